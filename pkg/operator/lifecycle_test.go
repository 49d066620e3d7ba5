// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// The pin goes out before any child: a child apply that keeps failing must
// retry under the pin, not re-admit against a Workspace edited meanwhile.
func TestThePinIsWrittenBeforeAnyChild(t *testing.T) {
	f := newFixture(t)
	tk := task()
	f.seed(tk, workspace())
	var order []string
	var mu sync.Mutex
	record := func(a core.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		order = append(order, a.GetVerb()+" "+res)
		return false, nil, nil
	}
	// The ServiceAccount's create fails, as an admission webhook might make it.
	f.kube.PrependReactor("create", "serviceaccounts", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("denied by policy")
	})
	f.caliban.PrependReactor("patch", "*", record)
	f.kube.PrependReactor("patch", "*", record)
	f.kube.PrependReactor("create", "*", record)
	f.onSandboxApply = func(verb, _ string) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, verb+" sandboxes")
		return nil
	}
	c := f.taskController()

	if _, err := c.sync(f.ctx, key(tk)); err == nil {
		t.Fatal("sync succeeded, want the ServiceAccount's error")
	}
	// The pin, the refused child, then the status saying why it is stuck.
	if diff := cmp.Diff([]string{"patch calibantasks/status", "create serviceaccounts", "patch calibantasks/status"}, order); diff != "" {
		t.Errorf("writes in order (-want +got):\n%s", diff)
	}
	applies := statusApplies(t, f.caliban.Actions())
	if len(applies) != 2 {
		t.Fatalf("wrote %d statuses, want the pin and the problem", len(applies))
	}
	got := applies[0]
	if got.ResolvedWorkspace == nil || got.PermissionPosture != "supervised" || got.Phase != "Provisioning" {
		t.Errorf("first write has pin %v, posture %q, phase %q; want the pin, supervised, Provisioning",
			got.ResolvedWorkspace != nil, got.PermissionPosture, got.Phase)
	}
}

// A task that waits for agent-sandbox says so once: a later sync with the
// written status in the cache neither writes nor emits again.
func TestAMissingSandboxAPIIsReportedOnce(t *testing.T) {
	f := newFixture(t)
	tk := task()
	f.seed(tk, workspace())
	f.sandboxAPI.missing = true
	c := f.taskController()
	if _, err := c.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	f.feedBack(c, tk)
	f.resetActions()
	f.events.events = nil
	for range 3 {
		if _, err := c.sync(f.ctx, key(tk)); err != nil {
			t.Fatal(err)
		}
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("later syncs wrote %v", w)
	}
	if len(f.events.events) != 0 {
		t.Errorf("later syncs emitted %v", f.events.events)
	}
	if len(f.appliedSandboxes()) != 0 {
		t.Errorf("applied %d Sandboxes without the API", len(f.appliedSandboxes()))
	}
}

func TestSandboxAPIWatcher(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	disc := k8sfake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	var mu sync.Mutex
	serve := func() {
		mu.Lock()
		defer mu.Unlock()
		disc.Resources = []*metav1.APIResourceList{{
			GroupVersion: sandboxv1beta1.SchemeGroupVersion.String(),
			APIResources: []metav1.APIResource{{Name: builders.SandboxResource, Namespaced: true, Kind: "Sandbox"}},
		}}
	}
	disc.PrependReactor("get", "resource", func(core.Action) (bool, runtime.Object, error) {
		mu.Lock() // orders the read of Resources after serve's write
		defer mu.Unlock()
		return false, nil, nil
	})
	var started, served atomic.Int32
	w := &apiWatcher{
		api:       sandboxesAPI,
		discovery: disc,
		start:     func() { started.Add(1) },
		synced:    func() bool { return started.Load() > 0 },
		onServed:  func() { served.Add(1) },
		interval:  10 * time.Millisecond,
	}
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()

	waitFor(t, "the first answer", w.HasSynced)
	if w.Served() || started.Load() != 0 {
		t.Fatalf("API not served, yet Served=%v and the informer started %d times", w.Served(), started.Load())
	}
	serve()
	waitFor(t, "the API to be served", w.Served)
	<-done
	if started.Load() != 1 || served.Load() != 1 {
		t.Errorf("informer started %d times and tasks woken %d times, want once each", started.Load(), served.Load())
	}
}

func TestSandboxAPIWatcherDoesNotWakeTasksWhenServedFromTheStart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	disc := k8sfake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	disc.Resources = []*metav1.APIResourceList{{
		GroupVersion: sandboxv1beta1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: builders.SandboxResource}},
	}}
	woken := false
	w := &apiWatcher{api: sandboxesAPI, discovery: disc, start: func() {}, synced: func() bool { return true },
		onServed: func() { woken = true }, interval: time.Hour}
	w.run(ctx)
	if !w.Served() || !w.HasSynced() || woken {
		t.Errorf("Served=%v HasSynced=%v woken=%v; want served, synced and no extra wake-up (the informers' adds do that)",
			w.Served(), w.HasSynced(), woken)
	}
}

// Once a controller's term ends, its workers take no new item, though the
// queue still holds some: the next leader syncs them, and two writers never
// overlap.
func TestAStoppedControllerStartsNoNewSync(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	l := newLoop("test", workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](), Deps{Metrics: NewMetrics(), ShutdownGrace: time.Minute}, nil)
	var synced atomic.Int32
	inSync, release := make(chan struct{}), make(chan struct{})
	l.sync = func(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
		if synced.Add(1) == 1 {
			close(inSync)
			<-release
		}
		return 0, nil
	}
	for i := range 5 {
		l.queue.Add(cache.ObjectName{Namespace: "ns", Name: string(rune('a' + i))})
	}
	done := make(chan error)
	go func() { done <- l.run(ctx, 1) }()
	<-inSync
	cancel()
	// Let run reach its shutdown grace before the sync in flight finishes.
	time.Sleep(100 * time.Millisecond)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := synced.Load(); got != 1 {
		t.Errorf("%d syncs ran, want only the one in flight when the term ended", got)
	}
}

// The shutdown grace is bounded: a sync that ignores nothing but its context
// is cut off after shutdownGrace.
func TestTheShutdownGraceIsBounded(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	l := newLoop("test", workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](), Deps{Metrics: NewMetrics(), ShutdownGrace: 50 * time.Millisecond}, nil)
	inSync := make(chan struct{})
	var cutOff atomic.Bool
	l.sync = func(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
		close(inSync)
		<-ctx.Done() // a slow API call honours its context
		cutOff.Store(true)
		return 0, ctx.Err()
	}
	l.queue.Add(cache.ObjectName{Name: "slow"})
	done := make(chan error)
	go func() { done <- l.run(ctx, 1) }()
	<-inSync
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("run did not return: the shutdown grace is not bounded")
	}
	if !cutOff.Load() {
		t.Error("the sync in flight was not cancelled")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
