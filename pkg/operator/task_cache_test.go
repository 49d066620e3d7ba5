// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// A sync reads the task as the operator's own status write left it until
// the watch brings that write; the version that brings it wakes the task
// only if it differs from what those syncs read in a way that matters.
func TestTheOperatorsOwnWriteIsReadUntilTheWatchBringsIt(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 9, 1, 12, 0, 1, 0, time.UTC))
	tests := map[string]struct {
		// meanwhile is what someone else wrote before the operator's write.
		meanwhile func(*calibanv1alpha1.CalibanTask)
		wakes     bool
	}{
		"the write alone wakes nobody": {},
		"prospero's condition written in between wakes the task": {
			meanwhile: func(t *calibanv1alpha1.CalibanTask) {
				meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: builders.ConditionAgentsSettled,
					Status: metav1.ConditionTrue, Reason: "AllSucceeded", LastTransitionTime: at})
			},
			wakes: true,
		},
		"a deletion in between wakes the task": {
			meanwhile: func(t *calibanv1alpha1.CalibanTask) { t.DeletionTimestamp = &at },
			wakes:     true,
		},
		"a label added in between wakes nobody": {
			meanwhile: func(t *calibanv1alpha1.CalibanTask) { t.Labels = map[string]string{"team": "blue"} },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			c, tk, stored := f.syncedOnce()
			read, ok, _ := c.cachedTask(key(tk))
			if !ok || read.ResourceVersion != stored.ResourceVersion || read.Status.ResolvedWorkspace == nil {
				t.Fatalf("before the watch brings the pin, a sync reads version %s, pinned %v; want version %s, pinned",
					read.ResourceVersion, read.Status.ResolvedWorkspace != nil, stored.ResourceVersion)
			}
			if n := c.queue.Len(); n != 0 {
				t.Fatalf("queue holds %d tasks before the watch event", n)
			}

			// The informer first brings what was written in between, which
			// wakes the task; its sync reads the operator's write, which is
			// newer, and sees nothing of it.
			informer := f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer()
			last := tk
			if tc.meanwhile != nil {
				between := tk.DeepCopy()
				between.ResourceVersion = "5" // between the task's (1) and the write's (11)
				tc.meanwhile(between)
				f.cache(informer, between)
				c.taskUpdated(tk, between)
				if read, _, _ := c.cachedTask(key(tk)); read.ResourceVersion != stored.ResourceVersion {
					t.Fatalf("a sync reads version %s, want the operator's write %s still on top", read.ResourceVersion, stored.ResourceVersion)
				}
				drain(t, c)
				last = between
			}
			// Then the write, with what was written in between.
			echo := stored.DeepCopy()
			if tc.meanwhile != nil {
				tc.meanwhile(echo)
			}
			f.cache(informer, echo)
			c.taskUpdated(last, echo)
			if got := c.queue.Len() == 1; got != tc.wakes {
				t.Errorf("task woken = %v, want %v", got, tc.wakes)
			}
			if read, _, _ := c.cachedTask(key(tk)); read != echo {
				t.Errorf("after the watch brought the write, a sync reads %+v, want the informer's version", read.ObjectMeta)
			}
		})
	}
}

// drain empties the queue as the workers would.
func drain(t *testing.T, c *TaskController) {
	t.Helper()
	for c.queue.Len() > 0 {
		item, _ := c.queue.Get()
		c.queue.Forget(item)
		c.queue.Done(item)
	}
}

// A watch event older than the operator's write leaves the write on top,
// and still wakes the task for what it brings.
func TestAnOlderVersionLeavesTheOwnWriteOnTop(t *testing.T) {
	f := newFixture(t)
	c, tk, _ := f.syncedOnce()
	written, _, _ := c.cachedTask(key(tk))
	older := tk.DeepCopy()
	older.ResourceVersion = "5" // between the task's version (1) and the write's (11)
	meta.SetStatusCondition(&older.Status.Conditions, metav1.Condition{Type: builders.ConditionAgentsSettled,
		Status: metav1.ConditionFalse, Reason: "Working", LastTransitionTime: metav1.Now()})
	if !newer(written, older) {
		t.Fatalf("test set-up: write version %s is not newer than %s", written.ResourceVersion, older.ResourceVersion)
	}
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), older)
	c.taskUpdated(tk, older)
	if c.queue.Len() != 1 {
		t.Errorf("queue holds %d tasks, want the task woken by the condition", c.queue.Len())
	}
	if read, _, _ := c.cachedTask(key(tk)); read != written {
		t.Errorf("a sync reads version %s, want the operator's write %s still on top", read.ResourceVersion, written.ResourceVersion)
	}
}
