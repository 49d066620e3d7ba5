// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// A crash loop under a burst: tasks arrive at full speed while the
// operator is SIGKILLed every few seconds and started again, and the
// Workspace's model is edited midway. Whatever the kills interrupt, every
// task ends Running with exactly its three children, no pin ever changes
// once written, the tasks created after the edit run the new model, and no
// operator process panicked.
func TestACrashLoopUnderABurstLosesNothingAndPinsOnce(t *testing.T) {
	sz := sizes()
	ctx, bed := scenario(t, framework.Options{ImmediateSandbox: true})
	ns := bed.namespace(t, ctx, "crashloop", "model-a")
	pins := watchPins(t, ctx, bed.cluster, ns)

	ops := bed.crashLoop(t, ctx, sz.killEvery, sz.killFor)

	before := taskNames("a", sz.burst)
	created := make(chan error, 1)
	go func() { created <- bed.createTasks(ctx, ns, before, 16) }()

	// Midway through the kills, the Workspace's model changes; the tasks
	// created once the operator has seen the change must run it.
	sleepCtx(ctx, sz.killFor/2)
	gen := bed.setModel(t, ns, "model-b")
	bed.waitWorkspaceObserved(t, ctx, ns, gen)
	after := taskNames("b", sz.afterEdit)
	if err := bed.createTasks(ctx, ns, after, 16); err != nil {
		t.Fatal(err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	last := ops.wait(t) // the kills are over; the last operator stays up
	// The scenario proves something only if operators worked between
	// kills, pinning tasks that a later kill could interrupt.
	duringKills := pins.pinnedBefore(time.Now())
	if duringKills == 0 {
		t.Errorf("no task was pinned during %s of kills: no operator led long enough to work, so the kills tested nothing", sz.killFor)
	}

	all := append(append([]string{}, before...), after...)
	bed.waitAllRunning(t, ctx, ns, all, sz.convergeTimeout)
	bed.checkChildren(t, ctx, ns, all)
	if changed := pins.changed(); len(changed) > 0 {
		t.Errorf("%d tasks changed their pin after it was written, e.g. %s", len(changed), changed[0])
	}
	for _, name := range after {
		task, err := bed.cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := pinnedModel(task); got != "model-b" {
			t.Errorf("task %s, created after the edit, runs model %q, want model-b", name, got)
		}
	}
	t.Logf("%d tasks converged through %d operator kills, %d of them pinned while the kills went on; %d pins watched, none changed",
		len(all), ops.kills(), duringKills, pins.count())
	if err := last.Stop(stopTimeout); err != nil {
		t.Error(err)
	}
}

func pinnedModel(task *calibanv1alpha1.CalibanTask) string {
	if task.Status.ResolvedWorkspace == nil {
		return ""
	}
	return task.Status.ResolvedWorkspace.Provider.Model
}

// operators is the crash loop's record of its kills and of the operator it
// leaves running.
type operators struct {
	mu    sync.Mutex
	done  chan struct{}
	last  *framework.Operator
	nkill int
}

// crashLoopPod is the pod every process of the crash loop runs in: a
// container that crashes is restarted in the same pod, under the same
// lease identity, so it takes its own lease back at once.
const crashLoopPod = "caliban-operator-0"

// crashLoop starts the operator and, every killEvery for killFor, kills it
// with SIGKILL and starts a new one; then leaves the last one running.
func (b *bed) crashLoop(t *testing.T, ctx context.Context, killEvery, killFor time.Duration) *operators {
	t.Helper()
	ops := &operators{done: make(chan struct{})}
	n := 0
	start := func() *framework.Operator {
		n++
		return b.startOperator(t, fmt.Sprintf("op-%d", n-1), crashLoopPod, "")
	}
	current := start()
	go func() {
		defer close(ops.done)
		deadline := time.Now().Add(killFor)
		for current != nil && time.Now().Before(deadline) {
			if !sleepCtx(ctx, killEvery) {
				break
			}
			current.Kill()
			ops.mu.Lock()
			ops.nkill++
			ops.mu.Unlock()
			current = start()
		}
		ops.last = current
	}()
	return ops
}

// wait waits for the kills to end and returns the operator left running.
func (o *operators) wait(t *testing.T) *framework.Operator {
	t.Helper()
	<-o.done
	if o.last == nil {
		t.Fatal("the crash loop could not start an operator")
	}
	return o.last
}

func (o *operators) kills() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.nkill
}
