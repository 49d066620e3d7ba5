// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// Ready reasons of the lifecycle (docs/crd-reference.md#lifecycle).
const (
	ReasonSuspended        = "Suspended"
	ReasonDeadlineExceeded = "DeadlineExceeded"
	ReasonDraining         = "Draining"
	ReasonInvalidLifecycle = "InvalidLifecycle"
)

// prospero's answer to a drain: condition AgentsDrained and its reasons.
const (
	ConditionAgentsDrained = "AgentsDrained"
	DrainedCheckpointed    = "Checkpointed"
	DrainedNothingToDrain  = "NothingToDrain"
	DrainFailed            = "DrainFailed"
)

// SuspendedMessage is the Ready message of a task parked by spec.suspend.
const SuspendedMessage = "suspended by spec.suspend: the Sandbox has no pod; its workspace volume is kept"

// LifecycleProblem is why a task's lifecycle cannot be honoured: an
// onDelete the operator does not know. onDelete has no schema enum (the
// surface stays open for values to come), so the check is the operator's,
// on every pass: a task must not run under a deletion it would not honour.
func LifecycleProblem(task *calibanv1alpha1.CalibanTask) *Failure {
	lc := task.Spec.Lifecycle
	if lc == nil {
		return nil
	}
	switch lc.OnDelete {
	case "", calibanv1alpha1.OnDeleteDelete, calibanv1alpha1.OnDeleteCheckpoint:
		return nil
	}
	return &Failure{Reason: ReasonInvalidLifecycle, Message: fmt.Sprintf("lifecycle.onDelete '%s' is not one of: %s, %s",
		lc.OnDelete, calibanv1alpha1.OnDeleteDelete, calibanv1alpha1.OnDeleteCheckpoint)}
}

// WantsDrain reports that the task is to drain before it goes
// (lifecycle.onDelete checkpoint), so a pinned task carries the drain
// finalizer.
func WantsDrain(task *calibanv1alpha1.CalibanTask) bool {
	return task.Spec.Lifecycle != nil && task.Spec.Lifecycle.OnDelete == calibanv1alpha1.OnDeleteCheckpoint
}

// Draining reports that the task has been deleted and waits for its drain:
// it was pinned and still carries the drain finalizer.
func Draining(task *calibanv1alpha1.CalibanTask) bool {
	return task.DeletionTimestamp != nil && task.Status.ResolvedWorkspace != nil && HasDrainFinalizer(task)
}

// HasDrainFinalizer reports whether the task carries the drain finalizer.
func HasDrainFinalizer(task *calibanv1alpha1.CalibanTask) bool {
	for _, f := range task.Finalizers {
		if f == calibanv1alpha1.FinalizerDrain {
			return true
		}
	}
	return false
}

// DrainDeadline is when a Draining task goes whatever prospero says: its
// deletion plus the operator's drain timeout.
func DrainDeadline(task *calibanv1alpha1.CalibanTask, timeout time.Duration) time.Time {
	if task.DeletionTimestamp == nil {
		return time.Time{}
	}
	return task.DeletionTimestamp.Add(timeout)
}

func drainingMessage(task *calibanv1alpha1.CalibanTask, timeout time.Duration) string {
	return fmt.Sprintf("deleted with lifecycle.onDelete checkpoint: waiting for prospero's %s condition until %s",
		ConditionAgentsDrained, DrainDeadline(task, timeout).UTC().Format(time.RFC3339))
}

// DrainOutcome is what a Draining task's sync does next.
type DrainOutcome int

const (
	// DrainWaiting: no answer yet and time left.
	DrainWaiting DrainOutcome = iota
	// DrainDone: prospero drained the agents (Checkpointed, NothingToDrain).
	DrainDone
	// DrainFailedOutcome: prospero could not drain them.
	DrainFailedOutcome
	// DrainTimedOut: no answer within the timeout.
	DrainTimedOut
)

// DrainVerdict reads prospero's AgentsDrained answer on a Draining task.
// An answer wins over the timeout: one that arrived while no operator ran
// is still an answer. A False or Unknown condition with another reason is
// prospero still at work. The note is the Event's.
func DrainVerdict(task *calibanv1alpha1.CalibanTask, timeout time.Duration, now time.Time) (DrainOutcome, string) {
	c := meta.FindStatusCondition(task.Status.Conditions, ConditionAgentsDrained)
	switch {
	case c != nil && c.Status == metav1.ConditionTrue && c.Reason == DrainedCheckpointed:
		return DrainDone, "drained: checkpoint " + c.Message
	case c != nil && c.Status == metav1.ConditionTrue && c.Reason == DrainedNothingToDrain:
		return DrainDone, "drained: nothing to drain"
	case c != nil && c.Status == metav1.ConditionTrue:
		return DrainDone, fmt.Sprintf("drained (%s)", c.Reason)
	case c != nil && c.Status == metav1.ConditionFalse && c.Reason == DrainFailed:
		msg := c.Message
		if msg == "" {
			msg = "prospero reported " + DrainFailed
		}
		return DrainFailedOutcome, "drain failed: " + msg
	}
	if !now.Before(DrainDeadline(task, timeout)) {
		return DrainTimedOut, fmt.Sprintf("prospero did not answer within %s (%s); the task goes without a checkpoint", timeout, config.EnvDrainTimeoutSeconds)
	}
	return DrainWaiting, ""
}

// CheckpointRef is status.checkpointRef: the checkpoint identifier
// prospero reported in its AgentsDrained answer to this task's drain, ""
// when it reported none. It is copied only while the task is Draining,
// and once: an identifier recorded is kept whatever the condition says
// later. An AgentsDrained message on a task that is not draining, which
// anyone who may patch the status can write, never reaches a field only
// the operator writes (docs/security.md).
func CheckpointRef(task *calibanv1alpha1.CalibanTask) string {
	if task.Status.CheckpointRef != "" || !Draining(task) {
		return task.Status.CheckpointRef
	}
	c := meta.FindStatusCondition(task.Status.Conditions, ConditionAgentsDrained)
	if c != nil && c.Status == metav1.ConditionTrue && c.Reason == DrainedCheckpointed {
		return c.Message
	}
	return ""
}

// startTime is when the deadline starts counting: the pin's time, or the
// task's creation for a task pinned before startTime was written.
func startTime(task *calibanv1alpha1.CalibanTask) time.Time {
	if task.Status.StartTime != nil {
		return task.Status.StartTime.Time
	}
	return task.CreationTimestamp.Time
}

// Deadline is when an unfinished task fails, or zero without
// activeDeadlineSeconds.
func Deadline(task *calibanv1alpha1.CalibanTask) time.Time {
	lc := task.Spec.Lifecycle
	if lc == nil || lc.ActiveDeadlineSeconds == nil {
		return time.Time{}
	}
	return startTime(task).Add(time.Duration(*lc.ActiveDeadlineSeconds) * time.Second)
}

// settledInTime is prospero's AgentsSettled answer, if it says every agent
// finished and it came no later than the deadline: which happened first
// decides, not which one the operator saw first.
func settledInTime(task *calibanv1alpha1.CalibanTask) *metav1.Condition {
	c := meta.FindStatusCondition(task.Status.Conditions, ConditionAgentsSettled)
	if c == nil || c.Status != metav1.ConditionTrue || (c.Reason != SettledSucceeded && c.Reason != SettledFailed) {
		return nil
	}
	if d := Deadline(task); !d.IsZero() && c.LastTransitionTime.After(d) {
		return nil
	}
	return c
}

// pastDeadline reports that the task has a deadline and now is at or past it.
func pastDeadline(task *calibanv1alpha1.CalibanTask, now time.Time) bool {
	d := Deadline(task)
	return !d.IsZero() && !now.Before(d)
}

// SandboxMode is the operatingMode the task's Sandbox should have: Suspended
// while spec.suspend holds, once the task finished (unless onFinish is keep;
// a deadline suspends whatever onFinish says), Running otherwise.
func SandboxMode(task *calibanv1alpha1.CalibanTask, now time.Time) sandboxv1beta1.OperatingMode {
	if task.Spec.Suspend {
		return sandboxv1beta1.OperatingModeSuspended
	}
	if settledInTime(task) != nil {
		if lc := task.Spec.Lifecycle; lc != nil && lc.OnFinish == calibanv1alpha1.OnFinishKeep {
			return sandboxv1beta1.OperatingModeRunning
		}
		return sandboxv1beta1.OperatingModeSuspended
	}
	if pastDeadline(task, now) {
		return sandboxv1beta1.OperatingModeSuspended
	}
	return sandboxv1beta1.OperatingModeRunning
}

// Expiry is when a finished task with ttlSecondsAfterFinished is deleted:
// completion (the status's completionTime) plus the TTL; zero when it has no
// TTL or has not finished.
func Expiry(task *calibanv1alpha1.CalibanTask, completion *metav1.Time) time.Time {
	lc := task.Spec.Lifecycle
	if lc == nil || lc.TTLSecondsAfterFinished == nil || completion == nil {
		return time.Time{}
	}
	return completion.Add(time.Duration(*lc.TTLSecondsAfterFinished) * time.Second)
}

// NextLifecycleWake is how long until the next moment a pinned task's sync
// must look again by itself, given the status just derived: its TTL expiry
// once it has finished (completion set), its deadline while it has not.
// Zero when there is none or it has come (the sync acts on it now).
func NextLifecycleWake(task *calibanv1alpha1.CalibanTask, completion *metav1.Time, now time.Time) time.Duration {
	at := Deadline(task)
	if completion != nil {
		at = Expiry(task, completion)
	}
	if at.IsZero() || !now.Before(at) {
		return 0
	}
	return at.Sub(now)
}

// LifecycleDue says, for a pinned task whose status was just derived with
// completion, whether its ttlSecondsAfterFinished has run out (it is
// deleted now), and otherwise how long until its sync must look again by
// itself (NextLifecycleWake).
func LifecycleDue(task *calibanv1alpha1.CalibanTask, completion *metav1.Time, now time.Time) (expired bool, wake time.Duration) {
	if expiry := Expiry(task, completion); !expiry.IsZero() && !now.Before(expiry) {
		return true, 0
	}
	return false, NextLifecycleWake(task, completion, now)
}

// DrainFinalizerChange says whether a pinned task should hold the drain
// finalizer (WantsDrain), and whether that is a change from what it
// carries.
func DrainFinalizerChange(task *calibanv1alpha1.CalibanTask) (hold, change bool) {
	hold = WantsDrain(task)
	return hold, hold != HasDrainFinalizer(task)
}

func deadlineMessage(task *calibanv1alpha1.CalibanTask) string {
	return fmt.Sprintf("the task ran longer than lifecycle.activeDeadlineSeconds (%ds from its start at %s)",
		*task.Spec.Lifecycle.ActiveDeadlineSeconds, startTime(task).UTC().Format(time.RFC3339))
}
