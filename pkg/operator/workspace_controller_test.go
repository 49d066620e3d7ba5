// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"testing"
	"time"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

func TestSyncWorkspace(t *testing.T) {
	tests := map[string]struct {
		// inputs
		ws      *calibanv1alpha1.Workspace
		secrets bool
		// expected
		phase calibanv1alpha1.WorkspacePhase // "" = no status write
		after time.Duration
	}{
		"a valid workspace becomes Ready and is re-checked in 300s": {
			ws:      workspace(func(ws *calibanv1alpha1.Workspace) { ws.Status = calibanv1alpha1.WorkspaceStatus{} }),
			secrets: true, phase: calibanv1alpha1.WorkspaceReady, after: 300 * time.Second,
		},
		"a workspace missing its credential Secret fails and is re-checked in 15s": {
			ws:    workspace(func(ws *calibanv1alpha1.Workspace) { ws.Status = calibanv1alpha1.WorkspaceStatus{} }),
			phase: calibanv1alpha1.WorkspaceFailed, after: 15 * time.Second,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(tc.ws)
			if tc.secrets {
				f.seed(secret("key", "api-key"))
			}
			c := f.workspaceController()
			after, err := c.sync(f.ctx, key(tc.ws))
			if err != nil {
				t.Fatal(err)
			}
			if after != tc.after {
				t.Errorf("requeue after %s, want %s", after, tc.after)
			}
			if w := f.writes(); len(w) != 1 || w[0] != "patch workspaces/status ws" {
				t.Fatalf("writes %v, want one status apply", w)
			}
			for _, a := range f.kube.Actions() {
				if a.GetResource().Resource == "secrets" && a.GetVerb() != "get" {
					t.Errorf("secrets %s: the operator may only get Secrets", a.GetVerb())
				}
			}
			stored, err := f.caliban.CalibanV1alpha1().Workspaces("team").Get(f.ctx, "ws", metaGet)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Status.Phase != tc.phase {
				t.Errorf("phase %q, want %q", stored.Status.Phase, tc.phase)
			}

			// The same verdict again writes nothing.
			f.cache(f.calibanInformers.Caliban().V1alpha1().Workspaces().Informer(), stored)
			f.resetActions()
			f.clock.Step(time.Minute)
			if _, err := c.sync(f.ctx, key(tc.ws)); err != nil {
				t.Fatal(err)
			}
			if w := f.writes(); len(w) != 0 {
				t.Errorf("a repeated verdict wrote %v", w)
			}
			if len(f.events.events) != 0 {
				t.Errorf("a repeated verdict emitted %v", f.events.events)
			}
		})
	}
}
