// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// observer records, from one watch on CalibanTasks and one on Sandboxes in
// the benchmark's namespace, the first moment each task was seen Running
// and each Sandbox was seen Ready=True. Watching costs the apiserver one
// event per change, which it sends to the operator's informers anyway;
// polling would cost a request per task per poll.
type observer struct {
	mu      sync.Mutex
	running map[string]time.Time
	ready   map[string]time.Time
	// created is when each Sandbox was first seen at all: the end of the
	// operator's first sync of its task, the start of the stand-in's work.
	created map[string]time.Time
	// failed holds tasks seen Failed, with their message: a task that
	// fails will never run, and the wait says why at once.
	failed map[string]string
	// readyLost counts, per Sandbox, the times it was seen not Ready after
	// it had been seen Ready: a controller whose Ready flaps moves the
	// condition's lastTransitionTime past the moment the task ran.
	readyLost map[string]int
}

// observe starts both watches and returns once both are established.
func (b *bench) observe(ctx context.Context, ns string) (*observer, error) {
	o := &observer{running: map[string]time.Time{}, ready: map[string]time.Time{}, created: map[string]time.Time{}, failed: map[string]string{}, readyLost: map[string]int{}}

	tasks := b.caliban.CalibanV1alpha1().CalibanTasks(ns)
	list, err := tasks.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	tw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return tasks.Watch(ctx, opts)
		},
	})
	if err != nil {
		return nil, err
	}

	sandboxes := b.dynamic.Resource(sandboxGVR).Namespace(ns)
	slist, err := sandboxes.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	sw, err := watchtools.NewRetryWatcherWithContext(ctx, slist.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return sandboxes.Watch(ctx, opts)
		},
	})
	if err != nil {
		tw.Stop()
		return nil, err
	}

	go func() {
		defer tw.Stop()
		for ev := range tw.ResultChan() {
			now := time.Now()
			t, ok := ev.Object.(*calibanv1alpha1.CalibanTask)
			if !ok {
				continue
			}
			o.mu.Lock()
			switch t.Status.Phase {
			case calibanv1alpha1.TaskRunning:
				if _, seen := o.running[t.Name]; !seen {
					o.running[t.Name] = now
				}
			case calibanv1alpha1.TaskFailed:
				if c := meta.FindStatusCondition(t.Status.Conditions, builders.ConditionReady); c != nil {
					o.failed[t.Name] = c.Reason + ": " + c.Message
				} else {
					o.failed[t.Name] = "Failed"
				}
			}
			o.mu.Unlock()
		}
	}()
	go func() {
		defer sw.Stop()
		for ev := range sw.ResultChan() {
			now := time.Now()
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			o.mu.Lock()
			if _, seen := o.created[u.GetName()]; !seen {
				o.created[u.GetName()] = now
			}
			_, seen := o.ready[u.GetName()]
			switch ready := framework.ConditionTrue(u, "Ready"); {
			case !seen && ready:
				o.ready[u.GetName()] = now
			case seen && !ready && ev.Type != watch.Deleted:
				o.readyLost[u.GetName()]++
			}
			o.mu.Unlock()
		}
	}()
	go func() {
		<-ctx.Done()
		tw.Stop()
		sw.Stop()
	}()
	return o, nil
}

// waitRunning waits until every named task has been seen Running, and
// fails when one is seen Failed or timeout passes. It reads only the
// observer's own records, so waiting costs the apiserver nothing.
func (o *observer) waitRunning(ctx context.Context, b *bench, names []string, timeout time.Duration) error {
	start := time.Now()
	deadline := start.Add(timeout)
	nextReport := start.Add(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		o.mu.Lock()
		running := 0
		var failed []string
		for _, n := range names {
			if _, ok := o.running[n]; ok {
				running++
			}
			if msg, ok := o.failed[n]; ok {
				failed = append(failed, n+" ("+msg+")")
			}
		}
		o.mu.Unlock()
		switch {
		case running == len(names):
			return nil
		case len(failed) > 0:
			return fmt.Errorf("%d task(s) failed, e.g. %s", len(failed), failed[0])
		case time.Now().After(deadline):
			return fmt.Errorf("only %d of %d tasks were Running after %s", running, len(names), timeout)
		case time.Now().After(nextReport):
			b.logf("  %d/%d Running after %s", running, len(names), time.Since(start).Round(time.Second))
			nextReport = nextReport.Add(10 * time.Second)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// runningAt is when each named task was first seen Running.
func (o *observer) runningAt(names []string) []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]time.Time, len(names))
	for i, n := range names {
		out[i] = o.running[n]
	}
	return out
}

// readyToRunning is, for each named task whose Sandbox was seen Ready, the
// time from that to the task being seen Running.
func (o *observer) readyToRunning(names []string) []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []time.Duration
	for _, n := range names {
		ready, ok := o.ready[builders.SandboxName(n)]
		running, ok2 := o.running[n]
		if ok && ok2 {
			out = append(out, running.Sub(ready))
		}
	}
	return out
}

// sandboxTimes is, for each named task whose Sandbox was seen, the time
// from the task's create to its Sandbox first seen, and from that to the
// Sandbox seen Ready: the operator's first sync, then the stand-in's work.
func (o *observer) sandboxTimes(names []string, sent []time.Time) (toCreated, toReady []time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, n := range names {
		created, ok := o.created[builders.SandboxName(n)]
		if !ok || sent[i].IsZero() {
			continue
		}
		toCreated = append(toCreated, created.Sub(sent[i]))
		if ready, ok := o.ready[builders.SandboxName(n)]; ok {
			toReady = append(toReady, ready.Sub(created))
		}
	}
	return toCreated, toReady
}

// sandboxesThatLostReady is how many of the named tasks' Sandboxes were
// seen not Ready after they had been seen Ready, and how many times in all.
func (o *observer) sandboxesThatLostReady(names []string) (sandboxes, times int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range names {
		if k := o.readyLost[builders.SandboxName(n)]; k > 0 {
			sandboxes++
			times += k
		}
	}
	return sandboxes, times
}
