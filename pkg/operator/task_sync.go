// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/caliban/v1alpha1"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// A task's sync, as one story (docs/architecture.md#task-sync): the loop
// gets the task from the cache (syncObjects); syncTask picks drain or
// reconcile; reconcile gathers what the decision reads, lets the builders
// decide, writes what changed (the pin, the finalizer, the children, the
// status) and returns when to look again; record is the one status write,
// and report the one place a status change is told (log, metrics, start
// timing, Events, span).

// Requeue intervals (docs/crd-reference.md#requeue-intervals): a task waiting
// on a Pending workspace looks again soon (the workspace index usually wakes
// it sooner); a failed admission waits longer, since a person has to change
// something.
const (
	pendingWorkspaceRequeue = 10 * time.Second
	failureRequeue          = 30 * time.Second
	// conflictRequeue: a conditional pin met a newer version of the task.
	conflictRequeue = time.Second
)

func (c *TaskController) syncTask(ctx context.Context, task *calibanv1alpha1.CalibanTask) (after time.Duration, err error) {
	switch {
	case task.DeletionTimestamp != nil && builders.HasDrainFinalizer(task):
		after, err = c.drain(ctx, task)
	case task.DeletionTimestamp != nil:
		// The garbage collector removes the children; applying now would
		// only race it.
		return 0, nil
	default:
		after, err = c.reconcile(ctx, task)
	}
	if err != nil {
		c.recorder.Event(task, corev1.EventTypeWarning, EventReconcileError, "Reconcile", err.Error())
	}
	return after, err
}

// reconcile follows docs/crd-reference.md#admission: decide admission and
// the checks, pin once, keep the finalizer and the children, then derive
// and write the status.
func (c *TaskController) reconcile(ctx context.Context, task *calibanv1alpha1.CalibanTask) (time.Duration, error) {
	now := c.clock.Now()
	d, err := builders.Decide(task, c.facts(ctx, task), c.settings)
	if err != nil {
		return 0, err
	}
	in := builders.TaskStatusInput{Task: task, Failure: d.Failure, Pin: d.Pin, Posture: d.Posture, PinSignature: d.PinSignature,
		Now: metav1.NewTime(now), DrainTimeout: c.drainTimeout, Launch: d.Launch}
	// stuck records a task nothing is applied for this pass: one that
	// failed a check, or whose apply failed (problem). A Sandbox it already
	// has is still its Sandbox.
	stuck := func(task *calibanv1alpha1.CalibanTask, problem error) (*calibanv1alpha1.CalibanTask, error) {
		if problem != nil {
			in.ApplyProblem = problem.Error()
		}
		in.Sandbox = c.observed(task)
		return c.record(ctx, task, in, anyVersion)
	}
	// An apply that fails says why in the status, once (the same problem
	// again changes nothing to write); the error itself retries with
	// backoff.
	applyProblem := func(task *calibanv1alpha1.CalibanTask, err error) (time.Duration, error) {
		if _, rerr := stuck(task, err); rerr != nil {
			klog.FromContext(ctx).V(2).Info("Could not record the apply problem in the status", "error", rerr)
		}
		return 0, err
	}
	switch {
	case d.WaitForWorkspace:
		// A task that already says something keeps saying it until
		// admission decides.
		klog.FromContext(ctx).V(4).Info("Waiting for the workspace to be validated", "workspace", task.Spec.WorkspaceRef.Name)
		if task.Status.Phase == "" {
			_, err = c.record(ctx, task, builders.TaskStatusInput{Task: task}, anyVersion)
		}
		return pendingWorkspaceRequeue, err
	case d.Failure != nil:
		// A pinned task keeps the finalizer its onDelete asks for, failed
		// or not: it is deleted like any other.
		written, err := stuck(task, nil)
		if err == nil && in.Pin != nil {
			_, err = c.syncDrainFinalizer(ctx, written)
		}
		return failureRequeue, err
	}

	// fresh is the claim this pass applied, which the cache may not have.
	var fresh *extv1beta1.SandboxClaim
	if d.NewlyPinned {
		if in.Launch != nil && in.Launch.Type == calibanv1alpha1.LaunchWarm && in.Launch.Claim == nil {
			// The claim first, so that agent-sandbox hands over a Sandbox
			// while the pin is written, and written with its UID: the
			// NetworkPolicy selects the pod by it.
			if fresh, err = c.applyClaim(ctx, task); err != nil {
				return applyProblem(task, err)
			}
			in.Launch.Claim = &calibanv1alpha1.ClaimReference{Name: fresh.Name, UID: fresh.UID}
		}
		var conflict bool
		if task, conflict, err = c.pin(ctx, task, &in); conflict {
			// The newer version may differ only in what the operator wrote
			// itself, which wakes nobody: look again shortly.
			klog.FromContext(ctx).V(4).Info("The task changed since the cache saw it; looking again", "error", err)
			return conflictRequeue, nil
		}
		if err != nil {
			return 0, err
		}
	}
	// The finalizer before any child: a task deleted once it has children
	// must find it there.
	if task, err = c.syncDrainFinalizer(ctx, task); err != nil {
		return 0, err
	}
	in.Task = task

	mode := builders.SandboxMode(task, now)
	var got applied
	if builders.IsWarm(task) {
		task, got, err = c.applyWarm(ctx, task, &in, fresh, mode)
	} else {
		got, err = c.applyChildren(ctx, task, in.Pin, mode)
	}
	if err != nil {
		return applyProblem(task, err)
	}
	if got.sandbox != nil {
		c.starts.childrenApplied(task.UID, c.clock.Now())
	}
	in.Sandbox, in.SandboxAPIMissing = got.sandbox, got.apiMissing
	written, err := c.record(ctx, task, in, anyVersion)
	if err != nil {
		return 0, err
	}
	expired, wake := builders.LifecycleDue(task, written.Status.CompletionTime, now)
	if expired {
		return 0, c.deleteExpired(ctx, task)
	}
	after := got.after
	if got.apiMissing && c.sandboxAPI.Served() {
		// Served by discovery, yet the apply found no such resource: the
		// CRD went away. Look again later rather than wait for an event.
		after = soonest(after, failureRequeue)
	}
	return soonest(after, wake), nil
}

// applied is what applying a task's children found.
type applied struct {
	// sandbox is the task's Sandbox as its status reads it, nil while it
	// has none.
	sandbox *builders.ObservedSandbox
	// apiMissing: agent-sandbox's API is not served, so there is no
	// Sandbox to apply.
	apiMissing bool
	// after is how soon to look again, 0 for no time.
	after time.Duration
}

// facts gathers what the decision reads besides the task: the Workspace,
// its pool's offer and a claim made before the pin (while there is no
// pin), and the Secrets.
func (c *TaskController) facts(ctx context.Context, task *calibanv1alpha1.CalibanTask) builders.TaskFacts {
	f := builders.TaskFacts{PinKey: c.pinKey, Secrets: secretGetter(ctx, c.kube, task.Namespace)}
	if task.Status.ResolvedWorkspace != nil {
		return f
	}
	// A missing Workspace is an answer (nil) for admission; a cache read
	// fails no other way.
	f.Workspace, _ = c.workspaces.Workspaces(task.Namespace).Get(task.Spec.WorkspaceRef.Name)
	if f.Workspace != nil {
		f.Offer = c.warmOffer(f.Workspace)
	}
	if claim := c.claimOf(task); claim != nil {
		f.Claim, f.ClaimUID = claim.Name, claim.UID
	}
	return f
}

// pin writes the pin, the admitted posture, the launch and Provisioning in
// one write before any child, so a child apply that keeps failing retries
// under this pin instead of re-admitting against whatever the Workspace
// says by then. The write is conditional on the resourceVersion the
// decision was made from: a cache that lags behind a pin written moments
// ago gets a conflict (reported, not returned as an error), never a second
// pin of a Workspace edited since.
func (c *TaskController) pin(ctx context.Context, task *calibanv1alpha1.CalibanTask, in *builders.TaskStatusInput) (pinned *calibanv1alpha1.CalibanTask, conflict bool, err error) {
	pinning := *in
	pinning.SandboxAPIMissing = !c.sandboxAPI.Served()
	written, err := c.record(ctx, task, pinning, sameVersion)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, true, err
	}
	if err != nil {
		return nil, false, err
	}
	// From here on the task is pinned like any other: the children are
	// rendered from the pin as the server stored it.
	in.Task = written
	if written.Status.ResolvedWorkspace != nil {
		in.Pin = written.Status.ResolvedWorkspace
	}
	return written, false, nil
}

// precondition says whether a status write must find the task at the
// version it was read at.
type precondition bool

const (
	anyVersion  precondition = false
	sameVersion precondition = true
)

// record derives the task's status from in and applies it when anything
// the operator owns changed, then reports the change. It returns the task
// as it stands after the write (the input when nothing was written).
func (c *TaskController) record(ctx context.Context, task *calibanv1alpha1.CalibanTask, in builders.TaskStatusInput, p precondition) (*calibanv1alpha1.CalibanTask, error) {
	desired := builders.TaskStatus(in, c.settings)
	if !builders.TaskStatusChanged(task.Status, desired) {
		return task, nil
	}
	written, err := applyTaskStatus(ctx, c.caliban, task, desired, bool(p))
	if err != nil {
		return nil, fmt.Errorf("applying status of CalibanTask %s/%s: %w", task.Namespace, task.Name, err)
	}
	c.children.Carry(task, written)
	// Every sync reads the task cache with the operator's own writes on
	// top: one that runs before the watch brings this write must not take
	// the task for what it was and write the same move again.
	c.taskCache.Mutation(written)
	c.report(ctx, task, desired, in)
	return written, nil
}

// applyTaskStatus applies the whole operator-owned status of a task, on
// condition that the task is still at the version read when precondition
// is set. A field the operator owned before and omits now is removed.
func applyTaskStatus(ctx context.Context, c calibanclient.Interface, task *calibanv1alpha1.CalibanTask, status calibanv1alpha1.CalibanTaskStatus, precondition bool) (*calibanv1alpha1.CalibanTask, error) {
	id := calibanac.CalibanTask(task.Name, task.Namespace).WithUID(task.UID)
	if precondition {
		id.WithResourceVersion(task.ResourceVersion)
	}
	return apply(ctx, writeStatus, c.CalibanV1alpha1().CalibanTasks(task.Namespace), task.Name,
		statusApply{TypeMetaApplyConfiguration: id.TypeMetaApplyConfiguration, Metadata: id.ObjectMetaApplyConfiguration, Status: status}, "status")
}

// report tells a status change, from task (as it was) to desired (as
// written): the log line and the transition metric of a new phase, the
// start's timing, the span's phase, and the Events.
func (c *TaskController) report(ctx context.Context, task *calibanv1alpha1.CalibanTask, desired calibanv1alpha1.CalibanTaskStatus, in builders.TaskStatusInput) {
	now := c.clock.Now()
	oldReady := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady)
	newReady := meta.FindStatusCondition(desired.Conditions, builders.ConditionReady)
	moved := task.Status.Phase != desired.Phase
	if span := tracing.SyncFrom(ctx); span != nil {
		span.SetAttributes(tracing.KeyTaskPhaseAfter.String(string(desired.Phase)))
	}
	if moved {
		msg, reason := "", ""
		if newReady != nil {
			msg, reason = newReady.Message, newReady.Reason
		}
		klog.FromContext(ctx).Info("CalibanTask phase changed", "from", task.Status.Phase, "to", desired.Phase, "message", msg)
		c.metrics.observeTransition(task.Status.Phase, desired.Phase, reason)
	}
	if task.Status.ResolvedWorkspace == nil && desired.ResolvedWorkspace != nil {
		c.starts.pinned(task.UID, now)
	}
	if !builders.Starting(desired) {
		marks := c.starts.take(task.UID)
		if desired.Phase == calibanv1alpha1.TaskRunning && builders.Starting(task.Status) {
			c.metrics.observeStart(builders.StartLaunch(in.Sandbox), builders.StartDurations(task.CreationTimestamp, task.Status.StartTime, in.Sandbox, marks, now))
		}
	}
	if note := coldStartNote(task.Status.Launch, desired.Launch); note != "" {
		c.recorder.Event(task, corev1.EventTypeNormal, EventColdStart, "Launch", note)
	}
	// A task's first phase is not a move: the Event would cost a request
	// per task in a burst and say nothing the status does not (a first
	// phase that is a failure has its Warning Event below).
	if task.Status.Phase != "" && moved {
		c.recorder.Event(task, corev1.EventTypeNormal, EventPhaseChanged, "Reconcile", phaseNote(string(task.Status.Phase), string(desired.Phase), ""))
	}
	// The admitted posture is recorded in the write that pins the task (or
	// that follows an allowed edit), whatever else that write says: a state
	// problem fixed later must not lose the news.
	if desired.PermissionPosture == calibanv1alpha1.PostureUnattended && task.Status.PermissionPosture != desired.PermissionPosture {
		c.recorder.Event(task, corev1.EventTypeNormal, EventUnattendedAdmitted, "Admit", builders.UnattendedAdmittedNote(task.Spec.WorkspaceRef.Name, desired.RequestedBy))
	}
	if warning := warningOf(in, newReady); warning != "" {
		if oldReady == nil || oldReady.Reason != newReady.Reason || oldReady.Message != newReady.Message || moved {
			c.recorder.Event(task, corev1.EventTypeWarning, warning, "Reconcile", newReady.Message)
		}
	}
}

// warningOf is the reason of the Warning Event a status derived from in
// (whose Ready condition is ready) calls for, "" for none: failures, a
// passed deadline, and a task held up by a missing agent-sandbox.
func warningOf(in builders.TaskStatusInput, ready *metav1.Condition) string {
	switch {
	case ready == nil:
		return ""
	case in.Failure != nil:
		return in.Failure.Reason
	case ready.Reason == builders.ReasonDeadlineExceeded:
		return EventDeadlineExceeded
	case in.SandboxAPIMissing:
		return EventSandboxAPIUnavailable
	}
	return ""
}

// soonest is the earlier of two requeue delays, where zero is none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}
