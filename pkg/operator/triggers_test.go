// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
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
	pinned := func(t *calibanv1alpha1.CalibanTask) {
		t.Status.ResolvedWorkspace, t.Status.PinSignature = &calibanv1alpha1.ResolvedWorkspace{}, "v1:sig"
	}
	tests := map[string]struct {
		// before, when set, is applied to both the old and the new task.
		before func(*calibanv1alpha1.CalibanTask)
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
		"the echo of the operator's own pin does not": {
			change: func(t *calibanv1alpha1.CalibanTask) { t.ResourceVersion = "11"; pinned(t) },
		},
		"the echo of a status write of a pinned task does not": {
			before: pinned,
			change: func(t *calibanv1alpha1.CalibanTask) {
				t.ResourceVersion, t.Status.Phase = "11", calibanv1alpha1.TaskRunning
			},
		},
		"an edit of a pin once written matters": {
			before: pinned,
			change: func(t *calibanv1alpha1.CalibanTask) {
				t.ResourceVersion = "11"
				t.Status.ResolvedWorkspace.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true}
			},
			want: true,
		},
		"an edit of the pin's signature matters": {
			before: pinned,
			change: func(t *calibanv1alpha1.CalibanTask) { t.ResourceVersion, t.Status.PinSignature = "11", "v1:other" },
			want:   true,
		},
		"a launch of another type once pinned matters": {
			before: pinned,
			change: func(t *calibanv1alpha1.CalibanTask) {
				t.ResourceVersion, t.Status.Launch = "11", &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchWarm}
			},
			want: true,
		},
		"the echo of a claim the operator recorded does not": {
			before: func(t *calibanv1alpha1.CalibanTask) {
				pinned(t)
				t.Status.Launch = &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchWarm}
			},
			change: func(t *calibanv1alpha1.CalibanTask) {
				t.ResourceVersion = "11"
				t.Status.Launch = &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchWarm, Claim: &calibanv1alpha1.ClaimReference{Name: "c", UID: "u"}}
			},
		},
		"a requestedBy that is not the annotation matters": {
			before: pinned,
			change: func(t *calibanv1alpha1.CalibanTask) { t.ResourceVersion, t.Status.RequestedBy = "11", "mallory" },
			want:   true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old, new := base(), base()
			if tc.before != nil {
				tc.before(old)
				tc.before(new)
			}
			tc.change(new)
			if got := taskUpdateMatters(old, new); got != tc.want {
				t.Errorf("taskUpdateMatters = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestChildUpdateMatters(t *testing.T) {
	// Real children of a pinned task, through the informers' transform.
	f := newFixture(t)
	c, tk := f.provisionedTask()
	sa, np := f.servedChildren(tk)
	sb := f.lastSandboxApply()
	view := func(obj any, rv string, mods ...func(any)) *freshness.View {
		var o runtime.Object
		switch x := obj.(type) {
		case *corev1.ServiceAccount:
			o = x.DeepCopy()
		case *networkingv1.NetworkPolicy:
			o = x.DeepCopy()
		case *unstructured.Unstructured:
			o = x.DeepCopy()
		}
		o.(metav1.Object).SetResourceVersion(rv)
		for _, m := range mods {
			m(o)
		}
		// The informer decodes a Sandbox into its typed form.
		if u, ok := o.(*unstructured.Unstructured); ok {
			o = watchedSandbox(t, u)
		}
		v, err := c.children.Transform(o)
		if err != nil {
			t.Fatal(err)
		}
		return v.(*freshness.View)
	}
	ready := func(o any) {
		_ = unstructured.SetNestedSlice(o.(*unstructured.Unstructured).Object,
			[]any{map[string]any{"type": "Ready", "status": "True", "reason": "DependenciesReady", "message": "", "lastTransitionTime": "2026-09-01T12:00:00Z"}},
			"status", "conditions")
	}
	tests := map[string]struct {
		old, new *freshness.View
		want     bool
	}{
		"a resync of a child does not matter": {
			old: view(sb, "5", ready), new: view(sb, "5", ready),
		},
		"a Sandbox turning Ready matters": {
			old: view(sb, "5"), new: view(sb, "6", ready), want: true,
		},
		"a Sandbox whose caliband image someone changes matters": {
			old: view(sb, "5"),
			new: view(sb, "6", func(o any) {
				u := o.(*unstructured.Unstructured)
				containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "podTemplate", "spec", "containers")
				containers[0].(map[string]any)["image"] = "evil:latest"
				_ = unstructured.SetNestedSlice(u.Object, containers, "spec", "podTemplate", "spec", "containers")
			}),
			want: true,
		},
		"a Sandbox losing the applied-hash annotation matters": {
			old:  view(sb, "5"),
			new:  view(sb, "6", func(o any) { o.(*unstructured.Unstructured).SetAnnotations(nil) }),
			want: true,
		},
		"a label or annotation another controller adds to a Sandbox does not matter": {
			old: view(sb, "5"),
			new: view(sb, "6", func(o any) {
				u := o.(*unstructured.Unstructured)
				_ = unstructured.SetNestedField(u.Object, "a", "metadata", "labels", "team")
				_ = unstructured.SetNestedField(u.Object, "sbx-pod", "metadata", "annotations", "agents.x-k8s.io/pod-name")
			}),
		},
		"a Sandbox whose managedFields alone moved does not matter": {
			old: view(sb, "5"),
			new: view(sb, "6", func(o any) {
				o.(metav1.Object).SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "someone", Operation: metav1.ManagedFieldsOperationApply}})
			}),
		},
		"a Sandbox being deleted matters": {
			old: view(sb, "5"),
			new: view(sb, "6", func(o any) {
				o.(metav1.Object).SetDeletionTimestamp(&metav1.Time{Time: time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)})
			}),
			want: true,
		},
		"a ServiceAccount that starts automounting its token matters": {
			old:  view(sa, "5"),
			new:  view(sa, "6", func(o any) { o.(*corev1.ServiceAccount).AutomountServiceAccountToken = new(true) }),
			want: true,
		},
		"a ServiceAccount whose resourceVersion alone moved does not matter": {
			old: view(sa, "5"), new: view(sa, "6"),
		},
		"a NetworkPolicy someone opens up matters": {
			old: view(np, "5"),
			new: view(np, "6", func(o any) {
				o.(*networkingv1.NetworkPolicy).Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
			}),
			want: true,
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
