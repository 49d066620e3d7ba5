// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
)

func names(s ...string) []cache.ObjectName {
	out := make([]cache.ObjectName, len(s))
	for i, n := range s {
		out[i] = cache.ObjectName{Namespace: "team", Name: n}
	}
	return out
}

// The store alone, driven as the workqueue drives it: Push for an item it
// does not hold, Touch for one it holds.
func TestLanesServeUrgentItemsFirst(t *testing.T) {
	type step struct {
		push, touch string
		urgent      bool // whether urgent reports the item at this step
	}
	tests := map[string]struct {
		steps []step
		want  []string
	}{
		"with nothing urgent it is a FIFO": {
			steps: []step{{push: "a"}, {push: "b"}, {push: "c"}},
			want:  []string{"a", "b", "c"},
		},
		"an urgent item goes ahead of those waiting": {
			steps: []step{{push: "a"}, {push: "b"}, {push: "c", urgent: true}},
			want:  []string{"c", "a", "b"},
		},
		"urgent items keep their order among themselves": {
			steps: []step{{push: "a"}, {push: "b", urgent: true}, {push: "c", urgent: true}},
			want:  []string{"b", "c", "a"},
		},
		"an item that became urgent while it waited is moved up once": {
			steps: []step{{push: "a"}, {push: "b"}, {push: "c"}, {touch: "b", urgent: true}},
			want:  []string{"b", "a", "c"},
		},
		"touching an item that is not urgent changes nothing": {
			steps: []step{{push: "a"}, {push: "b"}, {touch: "a"}},
			want:  []string{"a", "b"},
		},
		"touching an item already in the urgent lane does not serve it twice": {
			steps: []step{{push: "a"}, {push: "b", urgent: true}, {touch: "b", urgent: true}},
			want:  []string{"b", "a"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var urgentNow bool
			l := newLanes(func(cache.ObjectName) bool { return urgentNow })
			for _, s := range tc.steps {
				urgentNow = s.urgent
				if s.push != "" {
					l.Push(names(s.push)[0])
				} else {
					l.Touch(names(s.touch)[0])
				}
			}
			var got []cache.ObjectName
			for l.Len() > 0 {
				got = append(got, l.Pop())
			}
			if diff := cmp.Diff(names(tc.want...), got); diff != "" {
				t.Errorf("served (-want +got):\n%s", diff)
			}
		})
	}
}

// A promoted item's copy left in the other lane is skipped, also after the
// item came back into that lane behind it.
func TestLanesSkipThePromotedCopy(t *testing.T) {
	urgent := map[string]bool{}
	l := newLanes(func(n cache.ObjectName) bool { return urgent[n.Name] })
	a, b := names("a")[0], names("b")[0]
	l.Push(a)
	l.Push(b)
	urgent["a"] = true
	l.Touch(a)
	if got := l.Pop(); got != a {
		t.Fatalf("first served %v, want a", got)
	}
	urgent["a"] = false
	l.Push(a) // processed, added again: behind its stale copy and b
	var got []cache.ObjectName
	for l.Len() > 0 {
		got = append(got, l.Pop())
	}
	if diff := cmp.Diff([]cache.ObjectName{b, a}, got); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
}

// Through client-go's workqueue, as the task controller builds it.
func TestTheLoopsQueueServesUrgentItemsFirst(t *testing.T) {
	urgent := map[string]bool{}
	l := newLoop("lanes-test", workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](), Deps{Metrics: NewMetrics()},
		func(n cache.ObjectName) bool { return urgent[n.Name] })
	defer l.queue.ShutDown()
	for _, n := range names("a", "b", "c") {
		l.queue.Add(n)
	}
	urgent["c"] = true
	l.queue.Add(names("c")[0]) // waiting already: the queue touches it
	urgent["d"] = true
	l.queue.Add(names("d")[0])
	var got []cache.ObjectName
	for range 4 {
		n, shutdown := l.queue.Get()
		if shutdown {
			t.Fatal("queue shut down")
		}
		got = append(got, n)
		l.queue.Done(n)
	}
	if diff := cmp.Diff(names("c", "d", "a", "b"), got); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
	if n := l.queue.Len(); n != 0 {
		t.Errorf("%d items left", n)
	}
	// A delayed add reaches the same store.
	urgent["e"] = true
	l.queue.Add(names("f")[0])
	l.queue.AddAfter(names("e")[0], time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for l.queue.Len() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n, _ := l.queue.Get(); n != names("e")[0] {
		t.Errorf("after a delay, served %v first, want e", n)
	}
}

func TestATaskAwaitsRunningWhenItsSandboxIsReady(t *testing.T) {
	provisioning := func(tk *calibanv1alpha1.CalibanTask) { tk.Status.Phase = calibanv1alpha1.TaskProvisioning }
	sandboxOf := func(tk *calibanv1alpha1.CalibanTask, ready metav1.ConditionStatus) *freshness.View {
		return &freshness.View{
			ObjectMeta: metav1.ObjectMeta{Name: builders.SandboxName(tk.Name), Namespace: tk.Namespace,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tk, calibanv1alpha1.SchemeGroupVersion.WithKind("CalibanTask"))}},
			Sandbox: &builders.ObservedSandbox{Status: sandboxv1beta1.SandboxStatus{ServiceFQDN: "fix-bug.team.svc.cluster.local",
				Conditions: []metav1.Condition{{Type: builders.ConditionReady, Status: ready}}}},
		}
	}
	tests := map[string]struct {
		task    *calibanv1alpha1.CalibanTask
		sandbox func(*calibanv1alpha1.CalibanTask) *freshness.View
		want    bool
	}{
		"a Provisioning task whose Sandbox is Ready": {
			task: task(provisioning), sandbox: func(tk *calibanv1alpha1.CalibanTask) *freshness.View { return sandboxOf(tk, metav1.ConditionTrue) }, want: true,
		},
		"a Provisioning task whose Sandbox is not Ready": {
			task: task(provisioning), sandbox: func(tk *calibanv1alpha1.CalibanTask) *freshness.View { return sandboxOf(tk, metav1.ConditionFalse) },
		},
		"a Running task": {
			task:    task(func(tk *calibanv1alpha1.CalibanTask) { tk.Status.Phase = calibanv1alpha1.TaskRunning }),
			sandbox: func(tk *calibanv1alpha1.CalibanTask) *freshness.View { return sandboxOf(tk, metav1.ConditionTrue) },
		},
		"a Provisioning task with no Sandbox": {task: task(provisioning)},
		"a Ready Sandbox with no address, which its sync does not call Running": {
			task: task(provisioning),
			sandbox: func(tk *calibanv1alpha1.CalibanTask) *freshness.View {
				v := sandboxOf(tk, metav1.ConditionTrue)
				v.Sandbox.Status.ServiceFQDN = ""
				return v
			},
		},
		"a Ready Sandbox of the same name that another object controls": {
			task: task(provisioning),
			sandbox: func(tk *calibanv1alpha1.CalibanTask) *freshness.View {
				v := sandboxOf(tk, metav1.ConditionTrue)
				v.OwnerReferences[0].UID = "someone-else"
				return v
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(tc.task)
			c := f.taskController()
			if tc.sandbox != nil {
				if err := f.sandboxInformer.GetIndexer().Add(tc.sandbox(tc.task)); err != nil {
					t.Fatal(err)
				}
			}
			if got := c.awaitsRunning(key(tc.task)); got != tc.want {
				t.Errorf("awaitsRunning = %v, want %v", got, tc.want)
			}
		})
	}
}
