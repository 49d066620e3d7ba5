// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
)

// WaitForPhase waits up to timeout until the task is in phase with a Ready
// condition of reason (of any reason when ""), and returns it.
func WaitForPhase(t testing.TB, client calibanclient.Interface, ns, name string, phase calibanv1alpha1.TaskPhase, reason string, timeout time.Duration) *calibanv1alpha1.CalibanTask {
	t.Helper()
	var task *calibanv1alpha1.CalibanTask
	Eventually(t, timeout, func() error {
		var err error
		if task, err = client.CalibanV1alpha1().CalibanTasks(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady)
		if task.Status.Phase != phase || reason != "" && (ready == nil || ready.Reason != reason) {
			return fmt.Errorf("task %s is %q (Ready %+v), want %s %s", name, task.Status.Phase, ready, phase, reason)
		}
		return nil
	})
	return task
}

// UpdateTask changes a task's spec through client, retrying on conflicts
// with the operator's status writes, and returns the new generation. It
// fails the test if the update fails.
func UpdateTask(t testing.TB, client calibanclient.Interface, ns, name string, mutate func(*calibanv1alpha1.CalibanTaskSpec)) int64 {
	t.Helper()
	task, err := TryUpdateTask(context.Background(), client, ns, name, func(task *calibanv1alpha1.CalibanTask) { mutate(&task.Spec) })
	if err != nil {
		t.Fatalf("updating CalibanTask %s/%s: %v", ns, name, err)
	}
	return task.Generation
}

// TryUpdateTask reads the task through client, changes it with mutate
// (its metadata too: admission guards the record of who asked) and writes
// it back, reading it again when the write conflicts with another. It
// returns the apiserver's answer, for a test that expects a refusal.
func TryUpdateTask(ctx context.Context, client calibanclient.Interface, ns, name string, mutate func(*calibanv1alpha1.CalibanTask)) (*calibanv1alpha1.CalibanTask, error) {
	return updateRetrying(ctx, client.CalibanV1alpha1().CalibanTasks(ns), name, mutate)
}

// UpdateWorkspace is UpdateTask for a Workspace.
func UpdateWorkspace(t testing.TB, client calibanclient.Interface, ns, name string, mutate func(*calibanv1alpha1.WorkspaceSpec)) int64 {
	t.Helper()
	ws, err := TryUpdateWorkspace(context.Background(), client, ns, name, mutate)
	if err != nil {
		t.Fatalf("updating Workspace %s/%s: %v", ns, name, err)
	}
	return ws.Generation
}

// TryUpdateWorkspace is TryUpdateTask for a Workspace's spec, all of a
// Workspace that anyone guards.
func TryUpdateWorkspace(ctx context.Context, client calibanclient.Interface, ns, name string, mutate func(*calibanv1alpha1.WorkspaceSpec)) (*calibanv1alpha1.Workspace, error) {
	return updateRetrying(ctx, client.CalibanV1alpha1().Workspaces(ns), name, func(ws *calibanv1alpha1.Workspace) { mutate(&ws.Spec) })
}

// getUpdater is the part of a typed client of one kind that an update
// needs.
type getUpdater[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// updateRetrying reads the object name through objects, changes it with
// mutate and writes it back, reading it again whenever the write conflicts
// with another.
func updateRetrying[T any](ctx context.Context, objects getUpdater[T], name string, mutate func(T)) (T, error) {
	var updated T
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := objects.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(obj)
		updated, err = objects.Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	return updated, err
}
