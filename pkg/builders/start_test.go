// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

func TestStarting(t *testing.T) {
	pinnedAt := metav1.NewTime(tEarlier.Add(10 * time.Second))
	status := func(phase calibanv1alpha1.TaskPhase, start *metav1.Time, ready ...metav1.Condition) calibanv1alpha1.CalibanTaskStatus {
		return calibanv1alpha1.CalibanTaskStatus{Phase: phase, StartTime: start, Conditions: ready}
	}
	readyAt := func(st metav1.ConditionStatus, at time.Time) metav1.Condition {
		return metav1.Condition{Type: ConditionReady, Status: st, Reason: "Any", LastTransitionTime: metav1.NewTime(at)}
	}
	tests := map[string]struct {
		status calibanv1alpha1.CalibanTaskStatus
		want   bool
	}{
		"a task with no status yet is starting":         {status: status("", nil), want: true},
		"a Pending task is starting":                    {status: status("Pending", nil), want: true},
		"a failed admission is not starting":            {status: status("Failed", nil, readyAt("False", tEarlier.Time)), want: false},
		"a task Provisioning since its pin is starting": {status: status("Provisioning", &pinnedAt, readyAt("False", pinnedAt.Time)), want: true},
		"a task pinned after a failed admission is starting": {
			status: status("Provisioning", &pinnedAt, readyAt("False", tEarlier.Time)), want: true,
		},
		"the pin and the condition in one write, a fraction of a second apart, is starting": {
			status: status("Provisioning", &pinnedAt, readyAt("False", pinnedAt.Add(400*time.Millisecond))), want: true,
		},
		"a task Provisioning again after it ran (Ready turned False after the pin) is not starting": {
			status: status("Provisioning", &pinnedAt, readyAt("False", pinnedAt.Add(time.Hour))), want: false,
		},
		"a Running task is not starting":   {status: status("Running", &pinnedAt, readyAt("True", pinnedAt.Add(time.Minute))), want: false},
		"a Suspended task is not starting": {status: status("Suspended", &pinnedAt, readyAt("False", pinnedAt.Add(time.Hour))), want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Starting(tc.status); got != tc.want {
				t.Errorf("Starting = %t, want %t", got, tc.want)
			}
		})
	}
}

// Starting reads what TaskStatus writes: a first start is starting until it
// runs; once it has run, a suspend and a resume never make it starting
// again, whichever phases the resume passes through.
func TestStartingFollowsTheStatusThroughAStartASuspendAndAResume(t *testing.T) {
	const fqdn = "fix-bug-sbx.team.svc.cluster.local"
	s := config.DefaultAgentSettings()
	task := fxTask()
	clock := tEarlier.Time
	step := func(in TaskStatusInput) calibanv1alpha1.CalibanTaskStatus {
		clock = clock.Add(7 * time.Second)
		in.Task, in.Now = task, metav1.NewTime(clock)
		// As stored by the API: whole seconds.
		st := TaskStatus(in, s)
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = metav1.NewTime(st.Conditions[i].LastTransitionTime.Rfc3339Copy().Time)
		}
		task = taskFrom(task, func(t *calibanv1alpha1.CalibanTask) { t.Status = st })
		return st
	}
	notReady := fxSandbox(fqdn, sbNotReady("DependenciesNotReady", "pod pending"))
	serving := fxSandbox(fqdn, sbReady("True", ""))
	for i, want := range []struct {
		in       TaskStatusInput
		phase    calibanv1alpha1.TaskPhase
		starting bool
	}{
		{TaskStatusInput{}, "Pending", true},
		{TaskStatusInput{Pin: fxPin(), Posture: "supervised"}, "Provisioning", true},
		{TaskStatusInput{Pin: fxPin(), Posture: "supervised", Sandbox: observe(notReady)}, "Provisioning", true},
		{TaskStatusInput{Pin: fxPin(), Posture: "supervised", Sandbox: observe(serving)}, "Running", false},
		{TaskStatusInput{Pin: fxPin(), Posture: "supervised", Sandbox: observe(sbMode(fxSandbox(fqdn, sbNotReady("SandboxSuspended", "")), "Suspended"))}, "Suspended", false},
		{TaskStatusInput{Pin: fxPin(), Posture: "supervised", Sandbox: observe(notReady)}, "Provisioning", false},
		{TaskStatusInput{Pin: fxPin(), Posture: "supervised", Sandbox: observe(serving)}, "Running", false},
	} {
		st := step(want.in)
		if st.Phase != want.phase || Starting(st) != want.starting {
			t.Fatalf("step %d: phase %s, Starting %t; want %s, %t", i, st.Phase, Starting(st), want.phase, want.starting)
		}
	}
}

func TestStartDurations(t *testing.T) {
	created := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return created.Add(d) }
	objTask := func(pinned *time.Time) *calibanv1alpha1.CalibanTask {
		return fxTask(func(t *calibanv1alpha1.CalibanTask) {
			t.CreationTimestamp = metav1.NewTime(created)
			if pinned != nil {
				start := metav1.NewTime(*pinned)
				t.Status.StartTime = &start
			}
		})
	}
	sandbox := func(createdAt time.Time, readyAt *time.Time) *sandboxv1beta1.Sandbox {
		sb := fxSandbox("fqdn")
		sb.CreationTimestamp = metav1.NewTime(createdAt)
		if readyAt != nil {
			sb.Status.Conditions = []metav1.Condition{{Type: ConditionReady, Status: "True", LastTransitionTime: metav1.NewTime(*readyAt)}}
		}
		return sb
	}
	ptr := func(t time.Time) *time.Time { return &t }
	tests := map[string]struct {
		task    *calibanv1alpha1.CalibanTask
		sandbox *sandboxv1beta1.Sandbox
		marks   StartMarks
		now     time.Time
		want    []StageDuration
	}{
		"a start this process saw whole is timed from its marks": {
			task:    objTask(ptr(at(time.Second))),
			sandbox: sandbox(at(time.Second), ptr(at(5*time.Second))),
			marks: StartMarks{
				Created: at(30 * time.Millisecond), Pinned: at(45 * time.Millisecond),
				ChildrenApplied: at(80 * time.Millisecond), SandboxReady: at(4200 * time.Millisecond),
			},
			now: at(4230 * time.Millisecond),
			want: []StageDuration{
				{StageCreatedToPinned, 15 * time.Millisecond},
				{StagePinnedToChildrenApplied, 35 * time.Millisecond},
				{StageChildrenAppliedToSandboxReady, 4120 * time.Millisecond},
				{StageSandboxReadyToRunning, 30 * time.Millisecond},
				{StageCreatedToRunning, 4200 * time.Millisecond},
			},
		},
		"after a restart the objects' timestamps time what the marks missed": {
			task:    objTask(ptr(at(2 * time.Second))),
			sandbox: sandbox(at(3*time.Second), ptr(at(40*time.Second))),
			marks:   StartMarks{SandboxReady: at(40200 * time.Millisecond)},
			now:     at(40250 * time.Millisecond),
			want: []StageDuration{
				{StageCreatedToPinned, 2 * time.Second},
				{StagePinnedToChildrenApplied, time.Second},
				{StageChildrenAppliedToSandboxReady, 37 * time.Second},
				{StageSandboxReadyToRunning, 50 * time.Millisecond},
				{StageCreatedToRunning, 40250 * time.Millisecond},
			},
		},
		"a stage with one end marked and the other not is timed from the objects, not from two clocks": {
			task:    objTask(ptr(at(2 * time.Second))),
			sandbox: sandbox(at(3*time.Second), ptr(at(9*time.Second))),
			marks:   StartMarks{ChildrenApplied: at(3100 * time.Millisecond)},
			now:     at(10 * time.Second),
			want: []StageDuration{
				{StageCreatedToPinned, 2 * time.Second},
				{StagePinnedToChildrenApplied, time.Second},
				{StageChildrenAppliedToSandboxReady, 6 * time.Second},
				{StageSandboxReadyToRunning, time.Second},
				{StageCreatedToRunning, 10 * time.Second},
			},
		},
		"stages nothing can time are left out": {
			task:    objTask(nil),
			sandbox: nil,
			now:     at(time.Minute),
			want:    []StageDuration{{StageCreatedToRunning, time.Minute}},
		},
		"clocks that disagree count as zero, never negative": {
			task:    objTask(ptr(at(2 * time.Second))),
			sandbox: sandbox(at(time.Second), ptr(at(12*time.Second))),
			now:     at(11 * time.Second),
			want: []StageDuration{
				{StageCreatedToPinned, 2 * time.Second},
				{StagePinnedToChildrenApplied, 0},
				{StageChildrenAppliedToSandboxReady, 11 * time.Second},
				{StageSandboxReadyToRunning, 0},
				{StageCreatedToRunning, 11 * time.Second},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := StartDurations(tc.task.CreationTimestamp, tc.task.Status.StartTime, observe(tc.sandbox), tc.marks, tc.now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("StartDurations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAStartIsWarmOnlyOnASandboxTakenFromAPool(t *testing.T) {
	labelled := func(v string) *sandboxv1beta1.Sandbox {
		return &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelLaunchType: v}}}
	}
	for name, tc := range map[string]struct {
		sb   *sandboxv1beta1.Sandbox
		want string
	}{
		"a Sandbox a claim took from a pool": {sb: labelled(LaunchTypeWarm), want: LaunchTypeWarm},
		"a Sandbox a claim had to make":      {sb: labelled(LaunchTypeCold), want: LaunchTypeCold},
		"a task's own Sandbox":               {sb: &sandboxv1beta1.Sandbox{}, want: LaunchTypeCold},
		"no Sandbox known":                   {want: LaunchTypeCold},
	} {
		t.Run(name, func(t *testing.T) {
			if got := StartLaunch(observe(tc.sb)); got != tc.want {
				t.Errorf("StartLaunch = %q, want %q", got, tc.want)
			}
		})
	}
}
