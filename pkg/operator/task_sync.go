// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/codec"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
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

// reconcile follows docs/crd-reference.md#admission: gather, decide
// admission and the checks (builders.Decide), write what the decision
// calls for (provision), then the status, once, and say when to look
// again.
func (c *TaskController) reconcile(ctx context.Context, task *calibanv1alpha1.CalibanTask) (time.Duration, error) {
	now := c.clock.Now()
	seen := c.facts(ctx, task)
	d, err := builders.Decide(task, seen.TaskFacts, c.settings)
	if err != nil {
		return 0, err
	}
	if d.WaitForWorkspace {
		// A task that already says something keeps saying it until
		// admission decides.
		klog.FromContext(ctx).V(4).Info("Waiting for the workspace to be validated", "workspace", task.Spec.WorkspaceRef.Name)
		if task.Status.Phase == "" {
			_, err = c.record(ctx, task, builders.TaskStatusInput{Task: task}, anyVersion)
		}
		return pendingWorkspaceRequeue, err
	}
	if d.Recheck {
		c.recheckChildren(ctx, task.Namespace, task.Name, task.UID)
	}
	in := builders.TaskStatusInput{Task: task, Failure: d.Failure, Pin: d.Pin, Posture: d.Posture, PinSignature: d.PinSignature,
		Now: metav1.NewTime(now), DrainTimeout: c.drainTimeout, Launch: d.Launch, Sandbox: seen.sandbox}
	task, got, err := c.provision(ctx, task, &in, d, seen.claim)
	switch {
	case errors.Is(err, errNewerTask):
		// The newer version may differ only in what the operator wrote
		// itself, which wakes nobody: look again shortly.
		klog.FromContext(ctx).V(4).Info("The task changed since the cache saw it; looking again")
		return conflictRequeue, nil
	case err != nil:
		return 0, err
	}
	if taken := takenBy(got.problem); taken != nil {
		// A name held by something else is no retry's to fix: the task
		// fails, says which object and holder, and looks again later
		// (the holder may go).
		in.Failure, got.problem = &builders.Failure{Reason: builders.ReasonChildNameTaken, Message: taken.Error()}, nil
	}
	if got.problem != nil {
		// A child that could not be applied is said in the status, once
		// (the same problem again changes nothing to write); the error
		// itself retries with backoff. The Sandbox the task had is still
		// its Sandbox.
		in.ApplyProblem = got.problem.Error()
	} else if in.Failure == nil {
		in.Sandbox, in.SandboxAPIMissing, in.Unreachable = got.sandbox, got.apiMissing, got.unreachable
	}
	if got.relaunch != nil {
		// The operator's own change of path, signed with the pin as the
		// launch decided at admission was.
		in.Launch, in.PinSignature = got.relaunch, builders.SignPin(c.pinKey.Key, task.UID, in.Pin, got.relaunch.Type)
	}
	written, err := c.record(ctx, task, in, anyVersion)
	switch {
	case got.problem != nil:
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Could not record the apply problem in the status", "error", err)
		}
		return 0, got.problem
	case err != nil:
		return 0, err
	case in.Failure != nil:
		return failureRequeue, nil
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

// recheckChildren reads the task's own children from the apiserver, one GET
// each, and has their cached verdicts taken again (freshness.Recheck): the
// task is trusted again after a status someone else wrote, against which
// the verdicts may have been taken. Only on that rare pass. A child that
// cannot be read keeps its verdict, which costs at most an apply that
// changes nothing.
func (c *TaskController) recheckChildren(ctx context.Context, namespace, name string, uid types.UID) {
	recheck := func(kind freshness.Kind, obj metav1.Object, err error) {
		if err != nil {
			return
		}
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != uid {
			return
		}
		if err := c.children.Recheck(kind, obj); err != nil {
			klog.FromContext(ctx).V(2).Info("Could not check a child again", "kind", kind, "name", obj.GetName(), "error", err)
		}
	}
	sa, err := c.kube.CoreV1().ServiceAccounts(namespace).Get(ctx, builders.ServiceAccountName(name), metav1.GetOptions{})
	recheck(freshness.ServiceAccount, sa, err)
	np, err := c.kube.NetworkingV1().NetworkPolicies(namespace).Get(ctx, builders.NetworkPolicyName(name), metav1.GetOptions{})
	recheck(freshness.NetworkPolicy, np, err)
	if c.sandboxAPI.Served() {
		sb, err := c.sandboxes.Sandboxes(namespace).Get(ctx, builders.SandboxName(name), metav1.GetOptions{})
		recheck(freshness.Sandbox, sb, err)
	}
}

// errNewerTask: the status write that must come before the children
// found the task changed since the cache read it.
var errNewerTask = errors.New("the task changed since it was read")

// provision makes what the decision d calls for and returns the task as it
// stands after its writes. For a task that passed the checks, in this
// order: a warm task's claim (agent-sandbox hands over a Sandbox while the
// rest is written); the status the children are rendered from, when it
// changes (a new pin, or a claim made again, whose UID the NetworkPolicy
// selects the pod by); the drain finalizer its onDelete asks for, which a
// task deleted once it has children must find; the children. A pinned task
// that failed a check gets the finalizer alone. claim is the task's claim
// from the cache. A child that could not be applied is returned as the
// problem, for the status to say; the error is one no status can tell.
func (c *TaskController) provision(ctx context.Context, task *calibanv1alpha1.CalibanTask, in *builders.TaskStatusInput, d builders.Decision, claim *extv1beta1.SandboxClaim) (*calibanv1alpha1.CalibanTask, applied, error) {
	var err error
	launch := in.Launch
	if launch == nil {
		launch = task.Status.Launch
	}
	warm := launch != nil && launch.Type == calibanv1alpha1.LaunchWarm
	served := c.sandboxAPI.Served() && (!warm || c.warm.API.Served())
	if !warm || !served {
		claim = nil
	}
	first := d.Failure == nil && d.NewlyPinned
	if d.Failure == nil && warm && served {
		if claim == nil {
			// Not in the cache yet, or never made, or deleted by someone:
			// the apply is the same claim in the first case, a new one in
			// the others.
			if claim, err = c.applyClaim(ctx, task); err != nil {
				return task, applied{problem: err}, nil
			}
		}
		if ref := launch.Claim; ref == nil || ref.UID != claim.UID {
			// A claim made again has another UID, and so has its pod.
			claimed := *launch
			claimed.Claim = &calibanv1alpha1.ClaimReference{Name: claim.Name, UID: claim.UID}
			in.Launch, first = &claimed, true
		}
	}
	if first {
		if task, err = c.pin(ctx, task, in); err != nil {
			return task, applied{}, err
		}
	}
	if in.Pin != nil {
		if task, err = c.syncDrainFinalizer(ctx, task); err != nil {
			return task, applied{}, err
		}
	}
	switch {
	case d.Failure != nil:
		return task, applied{}, nil
	case warm && !served:
		return task, applied{apiMissing: true}, nil
	}
	in.Task = task
	// The mode after the pin: a deadline counts from the start it records.
	got, err := c.applyChildren(ctx, task, in.Pin, claim, builders.SandboxMode(task, in.Now.Time))
	if err != nil {
		return task, applied{problem: err}, nil
	}
	if got.sandbox != nil {
		c.starts.childrenApplied(task.UID, c.clock.Now())
	}
	return task, got, nil
}

// applied is what provisioning a task's children found.
type applied struct {
	// sandbox is the task's Sandbox as its status reads it, nil while it
	// has none.
	sandbox *builders.ObservedSandbox
	// apiMissing: agent-sandbox's API is not served, so there is no
	// Sandbox to apply.
	apiMissing bool
	// after is how soon to look again, 0 for no time.
	after time.Duration
	// problem is why a child could not be applied: said in the status,
	// then retried.
	problem error
	// relaunch is the launch that replaces a warm one whose claim was let
	// go; nil for none.
	relaunch *calibanv1alpha1.Launch
	// unreachable is why a warm task's serving Sandbox is not yet one
	// prospero can reach (builders.PodReachable); "" for none.
	unreachable string
}

// seen is what a task's sync reads from the caches before it decides: the
// facts the decision reads besides the task, and the task's claim and
// Sandbox.
type seen struct {
	builders.TaskFacts
	claim   *extv1beta1.SandboxClaim
	sandbox *builders.ObservedSandbox
}

// facts gathers what the decision reads besides the task (the Workspace,
// its pool's offer and a claim made before the pin, while there is no
// pin; the children that show the path a pinned task took; the Secrets),
// and the task's claim and Sandbox.
func (c *TaskController) facts(ctx context.Context, task *calibanv1alpha1.CalibanTask) seen {
	f := seen{TaskFacts: builders.TaskFacts{PinKey: c.pinKey, Secrets: secretGetter(ctx, c.kube, task.Namespace)}}
	f.claim = c.claimOf(task)
	f.sandbox = c.sandboxOf(task, f.claim)
	if task.Status.ResolvedWorkspace != nil {
		own := c.children.View(freshness.Sandbox, task.Namespace, builders.SandboxName(task.Name))
		f.Launched = builders.LaunchChildren{
			Claim:   f.claim != nil && f.claim.DeletionTimestamp == nil,
			Sandbox: own != nil && metav1.IsControlledBy(own, task),
		}
		return f
	}
	// A missing Workspace is an answer (nil) for admission; a cache read
	// fails no other way.
	f.Workspace, _ = c.workspaces.Workspaces(task.Namespace).Get(task.Spec.WorkspaceRef.Name)
	if f.Workspace != nil {
		f.Offer = c.warmOffer(f.Workspace)
	}
	if f.claim != nil {
		f.Claim, f.ClaimUID = f.claim.Name, f.claim.UID
	}
	return f
}

// pin writes the status the children are rendered from (the pin, the
// admitted posture, the launch and Provisioning) in one write before any
// child, so a child apply that keeps failing retries under this pin
// instead of re-admitting against whatever the Workspace says by then.
// The write is conditional on the resourceVersion the decision was made
// from: a cache that lags behind a pin written moments ago gets
// errNewerTask, never a second pin of a Workspace edited since.
func (c *TaskController) pin(ctx context.Context, task *calibanv1alpha1.CalibanTask, in *builders.TaskStatusInput) (*calibanv1alpha1.CalibanTask, error) {
	pinning := *in
	pinning.SandboxAPIMissing = !c.sandboxAPI.Served()
	written, err := c.record(ctx, task, pinning, sameVersion)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(4).Info("Could not write the pin", "error", err)
		return task, errNewerTask
	}
	if err != nil {
		return task, err
	}
	// From here on the task is pinned like any other: the children are
	// rendered from the pin as the server stored it.
	in.Task = written
	if written.Status.ResolvedWorkspace != nil {
		in.Pin = written.Status.ResolvedWorkspace
	}
	return written, nil
}

// precondition says whether a status write must find the task at the
// version it was read at.
type precondition bool

const (
	anyVersion  precondition = false
	sameVersion precondition = true
)

// record derives the task's status from in and applies it, the whole
// operator-owned status, when anything in it changed, then reports the
// change. A field the operator owned before and omits now is removed. With
// sameVersion, the write must find the task at the version read. It returns the task
// as it stands after the write (the input when nothing was written).
func (c *TaskController) record(ctx context.Context, task *calibanv1alpha1.CalibanTask, in builders.TaskStatusInput, p precondition) (*calibanv1alpha1.CalibanTask, error) {
	desired := builders.TaskStatus(in, c.settings)
	if !builders.TaskStatusChanged(task.Status, desired) {
		return task, nil
	}
	id := calibanac.CalibanTask(task.Name, task.Namespace).WithUID(task.UID)
	if p == sameVersion {
		id.WithResourceVersion(task.ResourceVersion)
	}
	answer, err := applyUnread(ctx, writeStatus, c.taskREST, taskResource, task.Namespace, task.Name,
		statusApply{TypeMetaApplyConfiguration: id.TypeMetaApplyConfiguration, Metadata: id.ObjectMetaApplyConfiguration, Status: desired}, "status")
	if err != nil {
		return nil, fmt.Errorf("applying status of CalibanTask %s/%s: %w", task.Namespace, task.Name, err)
	}
	// The task as the write left it, built rather than decoded from the
	// answer, of which only the version is read (taskCache).
	written := *task
	written.Status = builders.StoredTaskStatus(task.Status, desired)
	if rv, err := codec.ResourceVersion(answer); err != nil {
		// Written, but not known at which version: the informer brings it.
		klog.FromContext(ctx).V(2).Info("Could not read the version of a status write", "error", err)
	} else {
		written.ResourceVersion = rv
		c.children.Carry(task, &written)
		// Every sync reads the task cache with the operator's own writes on
		// top: one that runs before the watch brings this write must not
		// take the task for what it was and write the same move again.
		c.tasks.wrote(&written)
	}
	c.report(ctx, task, desired, in)
	return &written, nil
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
// passed deadline, a task held up by a missing agent-sandbox, and one
// whose Sandbox reports an address that is not its own.
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
	case ready.Reason == builders.ReasonServiceFQDNMismatch:
		return EventServiceFQDNMismatch
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
