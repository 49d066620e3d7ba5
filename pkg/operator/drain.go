// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// drain syncs a deleted task that carries the drain finalizer
// (docs/crd-reference.md#drain-before-delete): it says Draining, leaves the
// children alone, and lets the task go once prospero has answered with
// AgentsDrained or the drain timeout has passed. Everything it reads is in
// the object (deletionTimestamp, prospero's condition), so an operator
// restarted in the middle decides the same.
func (c *TaskController) drain(ctx context.Context, task *calibanv1alpha1.CalibanTask) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	if task.Status.ResolvedWorkspace == nil {
		// Never pinned, so never ran: nothing to drain. (The operator adds
		// the finalizer only to pinned tasks; this one came with it.)
		_, err := c.applyDrainFinalizer(ctx, task, false)
		return 0, err
	}
	now := c.clock.Now()
	outcome, note := builders.DrainVerdict(task, c.drainTimeout, now)
	// Draining, and prospero's checkpoint identifier once it has one, are
	// written before the finalizer goes: a watcher sees them before the
	// task disappears.
	in := builders.TaskStatusInput{
		Task: task, Pin: task.Status.ResolvedWorkspace, Posture: task.Status.PermissionPosture, PinSignature: task.Status.PinSignature,
		Sandbox: c.sandboxOf(task, c.claimOf(task)), Now: metav1.NewTime(now), DrainTimeout: c.drainTimeout,
	}
	if _, err := c.record(ctx, task, in, anyVersion); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, err
	}
	if outcome == builders.DrainWaiting {
		return builders.DrainDeadline(task, c.drainTimeout).Sub(now), nil
	}
	if _, err := c.applyDrainFinalizer(ctx, task, false); err != nil {
		return 0, err
	}
	switch outcome {
	case builders.DrainDone:
		c.recorder.Event(task, corev1.EventTypeNormal, EventDrained, "Drain", note)
	case builders.DrainFailedOutcome:
		c.recorder.Event(task, corev1.EventTypeWarning, EventDrainFailed, "Drain", note)
	case builders.DrainTimedOut:
		c.recorder.Event(task, corev1.EventTypeWarning, EventDrainTimedOut, "Drain", note)
	}
	logger.Info("CalibanTask drained; it goes now", "outcome", note)
	return 0, nil
}

// syncDrainFinalizer keeps the drain finalizer on a pinned task exactly
// while its lifecycle.onDelete is checkpoint, and returns the task as it
// stands after any change.
func (c *TaskController) syncDrainFinalizer(ctx context.Context, task *calibanv1alpha1.CalibanTask) (*calibanv1alpha1.CalibanTask, error) {
	hold, change := builders.DrainFinalizerChange(task)
	if !change {
		return task, nil
	}
	return c.applyDrainFinalizer(ctx, task, hold)
}

// applyDrainFinalizer applies the operator's own entry of the task's
// finalizer set: the drain finalizer when hold is set, none otherwise.
// Server-side apply adds and removes only that entry, so whoever else
// holds a finalizer on the task keeps it, whatever the cache saw. A drain
// finalizer some other field manager wrote (a task created with it) is not
// the operator's entry, so the apply leaves it: when letting the task go,
// it is then removed by a JSON patch that first tests the entry it removes,
// so a list that changed since fails the patch (retried) rather than lose
// someone's finalizer. A task already gone is let go.
func (c *TaskController) applyDrainFinalizer(ctx context.Context, task *calibanv1alpha1.CalibanTask, hold bool) (*calibanv1alpha1.CalibanTask, error) {
	verb := "adding the drain finalizer to"
	ac := calibanac.CalibanTask(task.Name, task.Namespace).WithUID(task.UID)
	if hold {
		ac.WithFinalizers(calibanv1alpha1.FinalizerDrain)
	} else {
		verb = "removing the drain finalizer of"
	}
	tasks := c.caliban.CalibanV1alpha1().CalibanTasks(task.Namespace)
	written, err := apply(ctx, writeFinalizer, tasks, task.Name, ac)
	if !hold && apierrors.IsNotFound(err) {
		return task, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s CalibanTask %s/%s: %w", verb, task.Namespace, task.Name, err)
	}
	c.children.Carry(task, written)
	c.tasks.wrote(written)
	i := slices.Index(written.Finalizers, calibanv1alpha1.FinalizerDrain)
	if hold || i < 0 {
		return written, nil
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	patch, err := json.Marshal([]map[string]string{
		{"op": "test", "path": path, "value": calibanv1alpha1.FinalizerDrain},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return nil, err
	}
	patched, err := tasks.Patch(ctx, task.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: builders.FieldManager})
	switch {
	case apierrors.IsNotFound(err):
		return written, nil
	case err != nil:
		return nil, fmt.Errorf("removing the drain finalizer another manager wrote on CalibanTask %s/%s: %w", task.Namespace, task.Name, err)
	}
	tracing.RecordWrite(ctx, writeFinalizer)
	c.children.Carry(written, patched)
	c.tasks.wrote(patched)
	return patched, nil
}

// deleteExpired deletes a finished task whose ttlSecondsAfterFinished has
// passed, as the Job TTL controller does: the UID precondition spares a
// task re-created under the same name, and background propagation lets the
// garbage collector remove the children once the task is gone (after its
// drain, with onDelete checkpoint).
func (c *TaskController) deleteExpired(ctx context.Context, task *calibanv1alpha1.CalibanTask) error {
	background := metav1.DeletePropagationBackground
	err := c.caliban.CalibanV1alpha1().CalibanTasks(task.Namespace).Delete(ctx, task.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &task.UID},
		PropagationPolicy: &background,
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting CalibanTask %s/%s after its ttlSecondsAfterFinished: %w", task.Namespace, task.Name, err)
	}
	tracing.RecordWrite(ctx, writeDelete)
	klog.FromContext(ctx).Info("Deleted the finished CalibanTask: its ttlSecondsAfterFinished has passed")
	return nil
}
