// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

func TestTheCacheTransform(t *testing.T) {
	pinned := func(model, workspace string) *calibanv1alpha1.CalibanTask {
		return task(func(tk *calibanv1alpha1.CalibanTask) {
			tk.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "caliban-operator"}}
			tk.Spec.WorkspaceRef.Name = workspace
			tk.Status.ResolvedWorkspace = &calibanv1alpha1.ResolvedWorkspace{
				Provider: calibanv1alpha1.Provider{Name: "planner", Kind: "anthropic", Model: model},
			}
		})
	}
	cases := map[string]struct {
		first, second *calibanv1alpha1.CalibanTask
		shared        bool
	}{
		"tasks pinned alike share one pin": {
			first: pinned("opus", "ws"), second: pinned("opus", "ws"), shared: true,
		},
		"tasks pinned differently keep their own": {
			first: pinned("opus", "ws"), second: pinned("sonnet", "ws"),
		},
		"equal pins from different Workspaces are not shared": {
			first: pinned("opus", "ws"), second: pinned("opus", "other"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr := &cacheTransform{}
			var got []*calibanv1alpha1.CalibanTask
			for _, tk := range []*calibanv1alpha1.CalibanTask{tc.first, tc.second} {
				out, err := tr.transform(tk)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, out.(*calibanv1alpha1.CalibanTask))
			}
			if shared := got[0].Status.ResolvedWorkspace == got[1].Status.ResolvedWorkspace; shared != tc.shared {
				t.Errorf("pins shared: %v, want %v", shared, tc.shared)
			}
			if got[1].Status.ResolvedWorkspace.Provider.Model != tc.second.Status.ResolvedWorkspace.Provider.Model {
				t.Errorf("the second task's pin has model %q, want its own %q", got[1].Status.ResolvedWorkspace.Provider.Model, tc.second.Status.ResolvedWorkspace.Provider.Model)
			}
			for _, tk := range got {
				if tk.ManagedFields != nil {
					t.Errorf("%s keeps managedFields", tk.Name)
				}
			}
		})
	}

	t.Run("a Workspace loses its managedFields", func(t *testing.T) {
		ws := workspace(func(w *calibanv1alpha1.Workspace) {
			w.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		})
		out, err := (&cacheTransform{}).transform(ws)
		if err != nil {
			t.Fatal(err)
		}
		if out.(*calibanv1alpha1.Workspace).ManagedFields != nil {
			t.Error("the Workspace keeps managedFields")
		}
	})
}
