// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanlisters "github.com/caliban-ai/caliban-operator/pkg/generated/listers/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
)

// stageObservations is each stage's count and sum of cold starts (the
// fixtures' tasks have Sandboxes of their own), in milliseconds.
func stageObservations(t *testing.T, m *Metrics) map[string][2]float64 {
	t.Helper()
	out := map[string][2]float64{}
	for _, stage := range builders.StartStages {
		var d dto.Metric
		if err := m.startStages.WithLabelValues(stage, builders.LaunchTypeCold).(prometheus.Metric).Write(&d); err != nil {
			t.Fatal(err)
		}
		// Milliseconds, rounded to the microsecond: float seconds are not
		// exact.
		out[stage] = [2]float64{float64(d.GetHistogram().GetSampleCount()), math.Round(d.GetHistogram().GetSampleSum()*1e6) / 1e3}
	}
	return out
}

// sandboxView is the task's Sandbox as its cache keeps it, or nil.
func (f *fixture) sandboxView(tk *calibanv1alpha1.CalibanTask) *freshness.View {
	return f.children.View(freshness.Sandbox, tk.Namespace, builders.SandboxName(tk.Name))
}

// sandboxServing puts the task's Sandbox into the cache as agent-sandbox
// reports it, serving or not.
func (f *fixture) sandboxServing(serving bool, at string) {
	f.t.Helper()
	sb := f.lastSandboxApply().DeepCopy()
	status := "False"
	if serving {
		status = "True"
		_ = unstructured.SetNestedField(sb.Object, "fix-bug-sbx.team.svc.cluster.local", "status", "serviceFQDN")
	}
	_ = unstructured.SetNestedSlice(sb.Object, []any{map[string]any{
		"type": "Ready", "status": status, "reason": "DependenciesReady", "message": "Pod", "lastTransitionTime": at,
	}}, "status", "conditions")
	f.cacheSandbox(sb)
}

// A first start this process watched whole is timed stage by stage from
// what it saw; the task losing its pod and running again is not a second
// start, and each phase change is counted with its reason.
func TestAFirstStartIsTimedOnceStageByStage(t *testing.T) {
	f := newFixture(t)
	tk := task()
	f.seed(tk, workspace(), secret("key", "api-key"))
	c := f.taskController()
	m := f.metrics
	// Listed at start-up: not timed from here; added later: timed.
	c.taskAdded(tk, true)
	if len(c.starts.marks) != 0 {
		t.Fatalf("a task listed at start-up opened a start: %v", c.starts.marks)
	}
	c.taskAdded(tk, false)

	f.clock.Step(20 * time.Millisecond)
	if _, err := c.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	f.feedBack(c, tk)
	// The Sandbox informer's update as it turns to serving.
	f.clock.Step(3 * time.Second)
	before := f.sandboxView(tk)
	f.sandboxServing(true, "2026-09-01T12:00:03Z")
	c.sandboxUpdated(before, f.sandboxView(tk))
	f.clock.Step(10 * time.Millisecond)
	c.sandboxUpdated(f.sandboxView(tk), f.sandboxView(tk)) // a later update: not the turn
	f.clock.Step(5 * time.Millisecond)
	if _, err := c.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	f.feedBack(c, tk)

	want := map[string][2]float64{
		builders.StageCreatedToPinned:               {1, 20},
		builders.StagePinnedToChildrenApplied:       {1, 0},
		builders.StageChildrenAppliedToSandboxReady: {1, 3000},
		builders.StageSandboxReadyToRunning:         {1, 15},
		builders.StageCreatedToRunning:              {1, 3035},
	}
	if diff := cmp.Diff(want, stageObservations(t, m)); diff != "" {
		t.Errorf("after the first Running, stages (count, ms) (-want +got):\n%s", diff)
	}
	if len(c.starts.marks) != 0 {
		t.Errorf("the start's marks outlived it: %v", c.starts.marks)
	}

	// The pod goes, and comes back a minute later.
	f.clock.Step(time.Minute)
	f.sandboxServing(false, "2026-09-01T12:01:03Z")
	if _, err := c.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	f.feedBack(c, tk)
	f.clock.Step(time.Minute)
	f.sandboxServing(true, "2026-09-01T12:02:03Z")
	if _, err := c.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, stageObservations(t, m)); diff != "" {
		t.Errorf("running again is not a start; stages (count, ms) (-want +got):\n%s", diff)
	}
	for _, tr := range []struct {
		from, to calibanv1alpha1.TaskPhase
		reason   string
		want     float64
	}{
		{"", "Provisioning", builders.ReasonSandboxNotReady, 1},
		{"Provisioning", "Running", builders.ReasonRunning, 2},
		{"Running", "Provisioning", builders.ReasonSandboxNotReady, 1},
	} {
		if got := testutil.ToFloat64(m.transitions.WithLabelValues(string(tr.from), string(tr.to), tr.reason)); got != tr.want {
			t.Errorf("transitions %q → %q (%s) = %v, want %v", tr.from, tr.to, tr.reason, got, tr.want)
		}
	}
}

// A task met half-way (the operator restarted after its pin) is timed from
// its objects' timestamps, in whole seconds.
func TestAStartMetHalfWayIsTimedFromTheObjects(t *testing.T) {
	f := newFixture(t)
	tk := task(func(t *calibanv1alpha1.CalibanTask) {
		t.CreationTimestamp = metav1.NewTime(f.clock.Now().Add(-2 * time.Second))
	})
	f.seed(tk, workspace(), secret("key", "api-key"))
	c := f.taskController()
	if _, err := c.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	f.feedBack(c, tk)

	// As in a new process: no marks.
	c.starts = newStartTracker()
	m := NewMetrics()
	c.metrics = m // a new process's metrics too
	f.clock.Step(9 * time.Second)
	f.sandboxServing(true, "2026-09-01T12:00:07Z")
	if _, err := c.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	got := stageObservations(t, m)
	// The fixture's Sandbox has no creationTimestamp: the stages on either
	// side of "children applied" cannot be timed and are left out.
	want := map[string][2]float64{
		builders.StageCreatedToPinned:               {1, 2000},
		builders.StagePinnedToChildrenApplied:       {0, 0},
		builders.StageChildrenAppliedToSandboxReady: {0, 0},
		builders.StageSandboxReadyToRunning:         {1, 2000},
		builders.StageCreatedToRunning:              {1, 11000},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stages (count, ms) (-want +got):\n%s", diff)
	}
}

func TestTheTermGaugesCountPhasesTheOldestTaskAndTheSandboxAPI(t *testing.T) {
	now := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	tasks := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, tk := range []*calibanv1alpha1.CalibanTask{
		task(func(t *calibanv1alpha1.CalibanTask) {
			t.Name, t.CreationTimestamp = "new", ago(time.Minute)
		}),
		task(func(t *calibanv1alpha1.CalibanTask) {
			t.Name, t.CreationTimestamp = "slow", ago(time.Hour)
			t.Status.Phase = calibanv1alpha1.TaskProvisioning
			t.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "False", LastTransitionTime: ago(20 * time.Minute)}}
		}),
		// Resumed after a long suspension: Provisioning for ten seconds,
		// though Ready has been False for two hours.
		task(func(t *calibanv1alpha1.CalibanTask) {
			t.Name, t.CreationTimestamp = "resumed", ago(3*time.Hour)
			t.Status.Phase = calibanv1alpha1.TaskProvisioning
			t.Status.PhaseTransitionTime = new(ago(10 * time.Second))
			t.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "False", LastTransitionTime: ago(2 * time.Hour)}}
		}),
		task(func(t *calibanv1alpha1.CalibanTask) {
			t.Name, t.CreationTimestamp = "quick", ago(time.Hour)
			t.Status.Phase = calibanv1alpha1.TaskProvisioning
			t.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "False", LastTransitionTime: ago(time.Minute)}}
		}),
	} {
		if err := tasks.Add(tk); err != nil {
			t.Fatal(err)
		}
	}
	m := NewMetrics()
	m.term.now = func() time.Time { return now }
	served := false
	m.SetTerm(&Term{
		Tasks:         calibanlisters.NewCalibanTaskLister(tasks),
		Workspaces:    calibanlisters.NewWorkspaceLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		SandboxServed: func() bool { return served },
	})
	for phase, want := range map[string]float64{"Provisioning": 1200, "Pending": 0, "Running": 0} {
		if got := gaugeValue(t, m, "caliban_task_oldest_seconds", phase); got != want {
			t.Errorf("caliban_task_oldest_seconds{phase=%q} = %v, want %v", phase, got, want)
		}
	}
	if got := gaugeValue(t, m, "caliban_tasks", ""); got != 1 {
		t.Errorf(`caliban_tasks{phase=""} = %v, want 1`, got)
	}
	if got := gaugeValue(t, m, "caliban_sandbox_api_available", ""); got != 0 {
		t.Errorf("caliban_sandbox_api_available = %v while not served, want 0", got)
	}
	served = true
	if got := gaugeValue(t, m, "caliban_sandbox_api_available", ""); got != 1 {
		t.Errorf("caliban_sandbox_api_available = %v while served, want 1", got)
	}
	m.SetTerm(nil)
	if n, err := testutil.GatherAndCount(m.Registry, "caliban_tasks", "caliban_task_oldest_seconds", "caliban_sandbox_api_available"); err != nil || n != 0 {
		t.Errorf("a standby exports %d term gauges (%v), want none", n, err)
	}
}

// gaugeValue is the value of a gauge family's sample whose phase label is
// phase (for a family without labels, pass "").
func gaugeValue(t *testing.T, m *Metrics, family, phase string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != family {
			continue
		}
		for _, s := range fam.GetMetric() {
			label := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == "phase" {
					label = l.GetValue()
				}
			}
			if label == phase {
				return s.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no sample of %s with phase %q", family, phase)
	return 0
}
