// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// The stages of a task's start, the stage label of
// caliban_task_start_duration_seconds. The four steps add up to the total.
const (
	StageCreatedToPinned               = "created_to_pinned"
	StagePinnedToChildrenApplied       = "pinned_to_children_applied"
	StageChildrenAppliedToSandboxReady = "children_applied_to_sandbox_ready"
	StageSandboxReadyToRunning         = "sandbox_ready_to_running"
	StageCreatedToRunning              = "created_to_running"
)

// StartStages lists every stage, in order, the total last.
var StartStages = []string{
	StageCreatedToPinned, StagePinnedToChildrenApplied, StageChildrenAppliedToSandboxReady,
	StageSandboxReadyToRunning, StageCreatedToRunning,
}

// StartMarks are the instants one operator process saw a task reach each
// stage of its start, on its own clock: zero where it did not see it (it
// started, or took the lease, after that stage). Where it saw both ends of
// a stage, the stage is measured from them, to the millisecond; otherwise
// from the objects' own timestamps, which survive a restart but count whole
// seconds and come from three clocks (the apiserver's, the operator's,
// agent-sandbox's).
type StartMarks struct {
	// Created: the task's creation reached the informer.
	Created time.Time
	// Pinned: the write that pinned the task returned.
	Pinned time.Time
	// ChildrenApplied: a sync found all three children applied.
	ChildrenApplied time.Time
	// SandboxReady: the Sandbox's update that made it serve reached the
	// informer.
	SandboxReady time.Time
}

// StartLaunch is the launch label of a start that ran on sb: warm when a
// claim took sb from a warm pool, cold otherwise (a task's own Sandbox, or
// one its claim had to make).
func StartLaunch(sb *ObservedSandbox) string {
	if sb != nil && sb.Launch == LaunchTypeWarm {
		return LaunchTypeWarm
	}
	return LaunchTypeCold
}

// StageDuration is how long one stage of a start took.
type StageDuration struct {
	Stage    string
	Duration time.Duration
}

// Starting reports whether a task with this status is on its way to its
// first Running: not yet Running, and never Running before. A task that
// ran has a Ready condition that turned True after the pin, then False
// again (suspended, its pod lost); one on its first start has had Ready
// False since it was pinned (or since a failure before that), so the
// condition's last transition is not after the start time. Timestamps are
// compared in whole seconds, as the API stores them.
func Starting(st calibanv1alpha1.CalibanTaskStatus) bool {
	switch st.Phase {
	case "", calibanv1alpha1.TaskPending, calibanv1alpha1.TaskProvisioning:
	default:
		return false
	}
	ready := meta.FindStatusCondition(st.Conditions, ConditionReady)
	switch {
	case ready == nil:
		return true
	case ready.Status == metav1.ConditionTrue:
		return false
	case st.StartTime == nil:
		// Not pinned: it cannot have run.
		return true
	}
	return ready.LastTransitionTime.Unix() <= st.StartTime.Unix()
}

// StartDurations is how long each stage of a task's first start took, the
// task turning Running at now: created is the task's creationTimestamp,
// pinned its status.startTime (nil when unknown), sandbox its Sandbox as
// the status derivation read it (nil when unknown). A stage neither the
// marks nor the objects can time is left out; a negative span, clocks
// disagreeing, counts as zero.
func StartDurations(created metav1.Time, pinned *metav1.Time, sandbox *ObservedSandbox, marks StartMarks, now time.Time) []StageDuration {
	objects := StartMarks{Created: created.Time}
	if pinned != nil {
		objects.Pinned = pinned.Time
	}
	if sandbox != nil {
		objects.ChildrenApplied = sandbox.CreationTimestamp.Time
		if ready := meta.FindStatusCondition(sandbox.Status.Conditions, ConditionReady); ready != nil && ready.Status == metav1.ConditionTrue {
			objects.SandboxReady = ready.LastTransitionTime.Time
		}
	}
	running := now
	ends := func(m StartMarks) [5][2]time.Time {
		return [5][2]time.Time{
			{m.Created, m.Pinned},
			{m.Pinned, m.ChildrenApplied},
			{m.ChildrenApplied, m.SandboxReady},
			{m.SandboxReady, running},
			{m.Created, running},
		}
	}
	seen, stored := ends(marks), ends(objects)
	var out []StageDuration
	for i, stage := range StartStages {
		from, to := seen[i][0], seen[i][1]
		if from.IsZero() || to.IsZero() {
			from, to = stored[i][0], stored[i][1]
		}
		if from.IsZero() || to.IsZero() {
			continue
		}
		out = append(out, StageDuration{Stage: stage, Duration: max(to.Sub(from), 0)})
	}
	return out
}
