// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// A child name held by something else fails the task with ChildNameTaken,
// and the holder gets no write: found by the create when no cache has it
// (an object the operator did not make), or in the cache when it is
// another task's child.
func TestAChildNameHeldBySomethingElseFailsTheTask(t *testing.T) {
	yes := true
	tests := map[string]struct {
		holder *corev1.ServiceAccount
		// cached: the operator's ServiceAccount cache has the holder.
		cached bool
		words  []string
	}{
		"an object the operator did not make, which no cache has": {
			holder: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "fix-bug-sa", Namespace: "team", UID: "admin-sa"}},
			words:  []string{"ServiceAccount 'fix-bug-sa' is taken", "not controlled by anything"},
		},
		"another task's child, which the cache has": {
			holder: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "fix-bug-sa", Namespace: "team", UID: "other-sa",
				Labels:          map[string]string{builders.LabelManagedBy: builders.FieldManager},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "caliban.caliban-ai.dev/v1alpha1", Kind: "CalibanTask", Name: "other", UID: "other-uid", Controller: &yes}}}},
			cached: true,
			words:  []string{"ServiceAccount 'fix-bug-sa' is taken", "CalibanTask 'other' (uid other-uid)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			tk := task()
			f.seed(tk, workspace(), secret("key", "api-key"))
			if err := f.kube.Tracker().Add(tc.holder); err != nil {
				t.Fatal(err)
			}
			c := f.taskController()
			if tc.cached {
				f.cache(f.kubeInformers.Core().V1().ServiceAccounts().Informer(), tc.holder)
			}
			after, err := c.sync(f.ctx, key(tk))
			if err != nil {
				t.Fatalf("sync: %v, want the failure in the status and no retry", err)
			}
			if after != failureRequeue {
				t.Errorf("looks again after %v, want %v", after, failureRequeue)
			}
			stored := f.storedTask(tk)
			ready := meta.FindStatusCondition(stored.Status.Conditions, builders.ConditionReady)
			if stored.Status.Phase != calibanv1alpha1.TaskFailed || ready == nil || ready.Reason != builders.ReasonChildNameTaken {
				t.Fatalf("phase %s, Ready %+v; want Failed, %s", stored.Status.Phase, ready, builders.ReasonChildNameTaken)
			}
			for _, w := range tc.words {
				if !strings.Contains(ready.Message, w) {
					t.Errorf("Ready message %q does not say %q", ready.Message, w)
				}
			}
			if !slices.Contains(f.events.reasons(), builders.ReasonChildNameTaken) {
				t.Errorf("events %v, want a %s Warning", f.events.reasons(), builders.ReasonChildNameTaken)
			}
			for _, w := range f.writes() {
				if strings.Contains(w, "serviceaccounts") && !strings.HasPrefix(w, "create ") || strings.Contains(w, "networkpolicies") || strings.Contains(w, "sandboxes") {
					t.Errorf("wrote %q: nothing but a refused create may reach the name, and no later child", w)
				}
			}
			held, err := f.kube.CoreV1().ServiceAccounts("team").Get(f.ctx, "fix-bug-sa", metaGet)
			if err != nil {
				t.Fatal(err)
			}
			if held.UID != tc.holder.UID || len(held.OwnerReferences) != len(tc.holder.OwnerReferences) || held.AutomountServiceAccountToken != nil {
				t.Errorf("the holder changed: %+v", held)
			}

			// The same again writes nothing.
			f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
			f.resetActions()
			f.clock.Step(time.Minute)
			if _, err := c.sync(f.ctx, key(tk)); err != nil {
				t.Fatal(err)
			}
			for _, w := range f.writes() {
				if !strings.HasPrefix(w, "create serviceaccounts") {
					t.Errorf("the second sync wrote %q, want only the refused create", w)
				}
			}
		})
	}
}
