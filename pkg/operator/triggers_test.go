package operator

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

func TestTaskUpdateMatters(t *testing.T) {
	base := func() *calibanv1alpha1.CalibanTask {
		tk := task(func(t *calibanv1alpha1.CalibanTask) {
			t.ResourceVersion, t.Generation = "10", 1
			t.Status.Phase = calibanv1alpha1.TaskProvisioning
			t.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "False", Reason: "SandboxNotReady"}}
		})
		return tk
	}
	tests := map[string]struct {
		change func(*calibanv1alpha1.CalibanTask)
		want   bool
	}{
		"a resync, with the same resourceVersion, matters": {
			change: func(*calibanv1alpha1.CalibanTask) {}, want: true,
		},
		"the echo of the operator's own status write does not": {
			change: func(t *calibanv1alpha1.CalibanTask) {
				t.ResourceVersion = "11"
				t.Status.Phase = calibanv1alpha1.TaskRunning
				t.Status.CalibandEndpoint = "x:8443"
				t.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Running"}}
			},
		},
		"a spec edit matters": {
			change: func(t *calibanv1alpha1.CalibanTask) { t.ResourceVersion, t.Generation = "11", 2 },
			want:   true,
		},
		"prospero's AgentsSettled matters": {
			change: func(t *calibanv1alpha1.CalibanTask) {
				t.ResourceVersion = "11"
				t.Status.Conditions = append(t.Status.Conditions, metav1.Condition{Type: "AgentsSettled", Status: "True", Reason: "Succeeded"})
			},
			want: true,
		},
		"the deletion of the task matters": {
			change: func(t *calibanv1alpha1.CalibanTask) {
				t.ResourceVersion = "11"
				t.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)}
			},
			want: true,
		},
		"a finalizer matters": {
			change: func(t *calibanv1alpha1.CalibanTask) { t.ResourceVersion, t.Finalizers = "11", []string{"x"} },
			want:   true,
		},
		"a label does not": {
			change: func(t *calibanv1alpha1.CalibanTask) { t.ResourceVersion, t.Labels = "11", map[string]string{"a": "b"} },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old, new := base(), base()
			tc.change(new)
			if got := taskUpdateMatters(old, new); got != tc.want {
				t.Errorf("taskUpdateMatters = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestChildUpdateMatters(t *testing.T) {
	// A Sandbox as the informer hands it over: through its transform.
	sandbox := func(rv string, mods ...func(*unstructured.Unstructured)) any {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
			"metadata": map[string]any{"name": "t-sbx", "namespace": "team", "resourceVersion": rv, "generation": int64(1)},
			"spec":     map[string]any{"replicas": int64(1)},
		}}
		for _, m := range mods {
			m(u)
		}
		view, err := sandboxView(u)
		if err != nil {
			t.Fatal(err)
		}
		return view
	}
	ready := func(u *unstructured.Unstructured) {
		u.Object["status"] = map[string]any{"serviceFQDN": "t-sbx.team.svc", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	}
	sa := func(rv string, automount *bool) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "t-sa", ResourceVersion: rv}, AutomountServiceAccountToken: automount}
	}
	np := func(rv string, gen int64) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "t-netpol", ResourceVersion: rv, Generation: gen}}
	}
	tests := map[string]struct {
		old, new any
		want     bool
	}{
		"a resync of a child does not matter": {
			old: sandbox("5", ready), new: sandbox("5", ready),
		},
		"a Sandbox turning Ready matters": {
			old: sandbox("5"), new: sandbox("6", ready), want: true,
		},
		"a Sandbox whose spec someone edits matters": {
			old: sandbox("5"), new: sandbox("6", func(u *unstructured.Unstructured) { u.SetGeneration(2) }), want: true,
		},
		"a Sandbox losing the applied-hash annotation matters": {
			old: sandbox("5", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{AnnotationAppliedHash: "h"}) }),
			new: sandbox("6"), want: true,
		},
		"a Sandbox whose managedFields alone moved does not matter": {
			old: sandbox("5"),
			new: sandbox("6", func(u *unstructured.Unstructured) {
				u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "someone", Operation: metav1.ManagedFieldsOperationApply}})
			}),
		},
		"a ServiceAccount that starts automounting its token matters": {
			old: sa("5", new(false)), new: sa("6", new(true)), want: true,
		},
		"a ServiceAccount whose resourceVersion alone moved does not matter": {
			old: sa("5", new(false)), new: sa("6", new(false)),
		},
		"a NetworkPolicy someone opens up matters": {
			old: np("5", 1), new: np("6", 2), want: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := childUpdateMatters(tc.old, tc.new); got != tc.want {
				t.Errorf("childUpdateMatters = %v, want %v", got, tc.want)
			}
		})
	}
}
