package operator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

func TestSandboxView(t *testing.T) {
	sandbox := func(spec any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
			"metadata": map[string]any{
				"name": "t-sbx", "namespace": "team", "uid": "u1", "resourceVersion": "7", "generation": int64(2),
				"labels":        map[string]any{"app.kubernetes.io/managed-by": "caliban-operator"},
				"annotations":   map[string]any{AnnotationAppliedHash: "h"},
				"managedFields": []any{map[string]any{"manager": "caliban-operator", "operation": "Apply"}},
			},
			"spec":   spec,
			"status": map[string]any{"serviceFQDN": "t-sbx.team.svc"},
		}}
	}
	meta := metav1.ObjectMeta{
		Name: "t-sbx", Namespace: "team", UID: "u1", ResourceVersion: "7", Generation: 2,
		Labels:      map[string]string{"app.kubernetes.io/managed-by": "caliban-operator"},
		Annotations: map[string]string{AnnotationAppliedHash: "h"},
	}
	tests := map[string]struct {
		in   any
		want any
	}{
		"a Sandbox becomes its typed view without managedFields": {
			in: sandbox(map[string]any{"operatingMode": "Running", "replicas": int64(1)}),
			want: &sandboxv1beta1.Sandbox{
				TypeMeta:   metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"},
				ObjectMeta: meta,
				Spec:       sandboxv1beta1.SandboxSpec{OperatingMode: sandboxv1beta1.OperatingModeRunning},
				Status:     sandboxv1beta1.SandboxStatus{ServiceFQDN: "t-sbx.team.svc"},
			},
		},
		"a Sandbox that does not fit the view keeps its metadata, so the sync applies it again": {
			in: sandbox(map[string]any{"podTemplate": "not an object"}),
			want: &sandboxv1beta1.Sandbox{
				TypeMeta:   metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"},
				ObjectMeta: meta,
			},
		},
		"a view passes through unchanged": {
			in:   &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			want: &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := sandboxView(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("view (-want +got):\n%s", diff)
			}
		})
	}
}
