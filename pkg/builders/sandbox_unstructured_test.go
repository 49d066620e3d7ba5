package builders

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

func sandboxFixture() *sandboxv1beta1.Sandbox {
	yes := true
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "t-sbx", Namespace: "ns", Labels: map[string]string{"a": "b"}},
		Spec: sandboxv1beta1.SandboxSpec{
			Service:       &yes,
			OperatingMode: sandboxv1beta1.OperatingModeRunning,
			VolumeClaimTemplates: []sandboxv1beta1.PersistentVolumeClaimTemplate{{
				Metadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: "workspace"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("10Gi")}},
				},
			}},
			PodTemplate: sandboxv1beta1.PodTemplate{
				Metadata: sandboxv1beta1.PodMetadata{Labels: map[string]string{"a": "b"}},
				Spec:     corev1.PodSpec{Containers: []corev1.Container{{Name: "caliband", Image: "img", Args: []string{"--x"}}}},
			},
		},
	}
}

func TestSandboxToUnstructured(t *testing.T) {
	u, err := SandboxToUnstructured(sandboxFixture())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("it names the foreign group, version and kind", func(t *testing.T) {
		if u.GetAPIVersion() != "agents.x-k8s.io/v1beta1" || u.GetKind() != "Sandbox" {
			t.Errorf("apiVersion/kind = %s/%s", u.GetAPIVersion(), u.GetKind())
		}
	})
	t.Run("claim templates carry no type metadata", func(t *testing.T) {
		items, _, _ := unstructured.NestedSlice(u.Object, "spec", "volumeClaimTemplates")
		if len(items) != 1 {
			t.Fatalf("want one claim template, got %v", items)
		}
		want := map[string]any{
			"metadata": map[string]any{"name": "workspace"},
			"spec": map[string]any{
				"accessModes": []any{"ReadWriteOnce"},
				"resources":   map[string]any{"requests": map[string]any{"storage": "10Gi"}},
			},
		}
		if diff := cmp.Diff(want, items[0]); diff != "" {
			t.Errorf("claim template (-want +got):\n%s", diff)
		}
	})
	t.Run("an apply body claims no creationTimestamp and no status", func(t *testing.T) {
		if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "creationTimestamp"); found {
			t.Error("metadata.creationTimestamp is present")
		}
		if _, found := u.Object["status"]; found {
			t.Error("status is present")
		}
	})
}

func TestSandboxRoundTripsThroughUnstructured(t *testing.T) {
	want := sandboxFixture()
	want.Status = sandboxv1beta1.SandboxStatus{
		ServiceFQDN: "t-sbx.ns.svc.cluster.local",
		Service:     "t-sbx",
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "DependenciesNotReady",
			Message: "Pod exists with phase: Pending", LastTransitionTime: metav1.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
		PodIPs: []string{"10.0.0.1"},
	}
	u, err := SandboxToUnstructured(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := SandboxFromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	want.APIVersion, want.Kind = "agents.x-k8s.io/v1beta1", "Sandbox"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestSandboxFromUnstructured(t *testing.T) {
	t.Run("fields the view does not declare are ignored", func(t *testing.T) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
			"metadata": map[string]any{"name": "s", "namespace": "ns"},
			"spec": map[string]any{
				"shutdownPolicy": "Retain",
				"podTemplate":    map[string]any{"spec": map[string]any{"containers": []any{}}},
			},
			"status": map[string]any{"serviceFQDN": "s.ns.svc.cluster.local", "futureField": true},
		}}
		got, err := SandboxFromUnstructured(u)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.ServiceFQDN != "s.ns.svc.cluster.local" {
			t.Errorf("serviceFQDN = %q", got.Status.ServiceFQDN)
		}
	})
	t.Run("a field of the wrong type is an error naming the object", func(t *testing.T) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
			"metadata": map[string]any{"name": "s", "namespace": "ns"},
			"status":   map[string]any{"conditions": "not a list"},
		}}
		_, err := SandboxFromUnstructured(u)
		if err == nil || !strings.Contains(err.Error(), "ns/s") {
			t.Errorf("err = %v, want an error naming ns/s", err)
		}
	})
}

func TestSandboxApplyBodyIsTheUnstructuredDocument(t *testing.T) {
	tests := map[string]*sandboxv1beta1.Sandbox{
		"a container with nothing configured has no resources": sandboxFixture(),
		"a container's resources are kept when set": func() *sandboxv1beta1.Sandbox {
			sb := sandboxFixture()
			sb.Spec.PodTemplate.Spec.InitContainers = []corev1.Container{{Name: "clone", Image: "git"}}
			sb.Spec.PodTemplate.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
			return sb
		}(),
	}
	for name, sb := range tests {
		t.Run(name, func(t *testing.T) {
			u, err := SandboxToUnstructured(sb)
			if err != nil {
				t.Fatal(err)
			}
			body, err := SandboxApplyBody(sb)
			if err != nil {
				t.Fatal(err)
			}
			var got, want map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			// Through JSON, so that numbers compare as the apiserver reads them.
			wantJSON, err := json.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(wantJSON, &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("apply body (-unstructured +body):\n%s", diff)
			}
		})
	}
	t.Run("a status is never claimed", func(t *testing.T) {
		sb := sandboxFixture()
		sb.Status = sandboxv1beta1.SandboxStatus{ServiceFQDN: "t-sbx.ns.svc.cluster.local", PodIPs: []string{"10.0.0.1"}}
		body, err := SandboxApplyBody(sb)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if st, found := got["status"]; found {
			t.Errorf("status = %v, want it absent", st)
		}
	})
}
