// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package agentsandbox_test

import (
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibanoperator "github.com/caliban-ai/caliban-operator/pkg/operator"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// Every step of a task's life, with agent-sandbox doing what it does:
// create → Running on a real pod; suspend → the pod gone, the claim kept,
// Suspended; resume → Running on a new pod over the same claim; a finish
// with onFinish suspend; the deadline; drain before delete; delete → the
// garbage collector takes everything.
func TestTheLifecycleWithAgentSandbox(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	op := startOperator(t, "lifecycle", ns)
	namespaceWithWorkspace(t, ns)

	createTask(t, ns, "life")
	createTask(t, ns, "done")
	createTask(t, ns, "late")
	createTask(t, ns, "drained", func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{OnDelete: calibanv1alpha1.OnDeleteCheckpoint}
	})

	// Created: Running on a real pod, with its claim bound and its Service.
	for _, name := range []string{"life", "done", "drained", "late"} {
		task := framework.WaitForPhase(t, cluster.Caliban, ns, name, calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
		want := fmt.Sprintf("%s.%s.svc.cluster.local:8443", builders.SandboxName(name), ns)
		if task.Status.CalibandEndpoint != want {
			t.Errorf("task %s: endpoint %q, want %q (agent-sandbox's serviceFQDN)", name, task.Status.CalibandEndpoint, want)
		}
		waitForPod(t, ns, name)
	}
	firstPod := waitForPod(t, ns, "life")
	workspace := claim(t, ns, "life")
	framework.Eventually(t, startTimeout, func() error {
		if c := claim(t, ns, "life"); c.Status.Phase != "Bound" {
			return fmt.Errorf("claim %s is %s", c.Name, c.Status.Phase)
		}
		return nil
	})
	if _, err := cluster.Kube.CoreV1().Services(ns).Get(ctx, builders.SandboxName("life"), metav1.GetOptions{}); err != nil {
		t.Errorf("the Sandbox's headless Service: %v", err)
	}

	// Suspend: the pod goes, the claim stays.
	framework.UpdateTask(t, cluster.Caliban, ns, "life", suspend(true))
	framework.WaitForPhase(t, cluster.Caliban, ns, "life", calibanv1alpha1.TaskSuspended, builders.ReasonSuspended, startTimeout)
	waitForNoPod(t, ns, "life")
	if c := claim(t, ns, "life"); c.UID != workspace.UID {
		t.Errorf("suspending replaced the workspace claim (%s, was %s)", c.UID, workspace.UID)
	}
	if task := getTask(t, ns, "life"); task.Status.CalibandEndpoint != "" {
		t.Errorf("a suspended task still has endpoint %q", task.Status.CalibandEndpoint)
	}

	// Resume: a new pod over the same claim.
	framework.UpdateTask(t, cluster.Caliban, ns, "life", suspend(false))
	framework.WaitForPhase(t, cluster.Caliban, ns, "life", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	if p := waitForPod(t, ns, "life"); p.UID == firstPod.UID {
		t.Errorf("the resumed task runs on the pod it had before suspending (%s)", p.UID)
	}
	if c := claim(t, ns, "life"); c.UID != workspace.UID {
		t.Errorf("resuming replaced the workspace claim (%s, was %s)", c.UID, workspace.UID)
	}

	// A finish: onFinish suspend (the default) releases the pod; the phase
	// is prospero's.
	prospero(t, ns, "done", map[string]any{"type": builders.ConditionAgentsSettled, "status": "True", "reason": builders.SettledSucceeded})
	framework.WaitForPhase(t, cluster.Caliban, ns, "done", calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, startTimeout)
	waitForNoPod(t, ns, "done")
	claim(t, ns, "done")

	// The deadline fails the task once its pod is gone. Set on the running
	// task, it has passed already: a deadline set at creation would have
	// to outlast a real start, and the test would wait for it.
	framework.UpdateTask(t, cluster.Caliban, ns, "late", func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{ActiveDeadlineSeconds: new(int32(1))}
	})
	late := framework.WaitForPhase(t, cluster.Caliban, ns, "late", calibanv1alpha1.TaskFailed, builders.ReasonDeadlineExceeded, startTimeout)
	if p := pod(t, ns, "late"); p != nil && p.DeletionTimestamp == nil {
		t.Errorf("task late is Failed %s while its pod %s still runs", builders.ReasonDeadlineExceeded, p.Name)
	}
	waitForNoPod(t, ns, "late")
	if late.Status.CompletionTime == nil {
		t.Error("a task past its deadline has no completionTime")
	}

	// Drain before delete, then the cascade.
	if err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Delete(ctx, "drained", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitForPhase(t, cluster.Caliban, ns, "drained", calibanv1alpha1.TaskDraining, builders.ReasonDraining, startTimeout)
	if p := pod(t, ns, "drained"); p == nil || p.DeletionTimestamp != nil {
		t.Error("a Draining task's pod went before prospero answered")
	}
	prospero(t, ns, "drained", map[string]any{"type": builders.ConditionAgentsDrained, "status": "True",
		"reason": builders.DrainedCheckpointed, "message": "ckpt-1"})
	gone(t, "task drained", func() error {
		_, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "drained", metav1.GetOptions{})
		return err
	})
	sbx := builders.SandboxName("drained")
	gone(t, "its Sandbox", func() error {
		_, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Get(ctx, sbx, metav1.GetOptions{})
		return err
	})
	gone(t, "its pod", func() error {
		_, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, sbx, metav1.GetOptions{})
		return err
	})
	gone(t, "its workspace claim", func() error {
		_, err := cluster.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claimName("drained"), metav1.GetOptions{})
		return err
	})
	gone(t, "its ServiceAccount", func() error {
		_, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, builders.ServiceAccountName("drained"), metav1.GetOptions{})
		return err
	})
	gone(t, "its NetworkPolicy", func() error {
		_, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, builders.NetworkPolicyName("drained"), metav1.GetOptions{})
		return err
	})

	if refused := op.refusedWrites(t, ns); len(refused) > 0 {
		t.Errorf("the apiserver refused writes of the operator: %v", refused)
	}
	// The drain finalizer the operator applied is released by an apply as
	// well: one write adds it, one takes it away, and no JSON patch is
	// needed for an entry the operator owns.
	if n := op.writesTo(t, ns, "calibantasks")["drained"]; n != 2 {
		t.Errorf("the operator wrote the drained task's metadata %d times, want 2 (the finalizer applied, then released)", n)
	}
}

// An operator restarted with another workspace storage size and caliband
// image: an existing task's Sandbox is not written at all (its claim is
// immutable, and its agent relies on the rest), so nothing is refused and
// nothing restarts; the task still suspends and resumes for real, on what
// it first got; a new task gets the new values.
func TestAnOperatorRestartedWithOtherSettingsBreaksNoTask(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	first := startOperator(t, "before", ns)
	namespaceWithWorkspace(t, ns)
	old := []string{"one", "two", "three"}
	for _, name := range old {
		createTask(t, ns, name)
	}
	type seen struct {
		generation int64
		pod        string
		image      string
	}
	before := map[string]seen{}
	for _, name := range old {
		framework.WaitForPhase(t, cluster.Caliban, ns, name, calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
		p := waitForPod(t, ns, name)
		before[name] = seen{generation: sandboxGeneration(t, ns, name), pod: string(p.UID), image: calibandImage(p)}
	}
	if err := first.Stop(30 * time.Second); err != nil {
		t.Fatalf("stopping the first operator: %v", err)
	}

	const newImage = "ghcr.io/caliban-ai/caliban:v2"
	// Resyncs every second, so that each task is synced again and again.
	second := startOperator(t, "after", ns, config.EnvWorkspaceStorage+"=20Gi", config.EnvCalibandImage+"="+newImage,
		config.EnvResyncSeconds+"=1")
	framework.Eventually(t, time.Minute, func() error {
		code, body, err := second.Get("/readyz")
		if err != nil || code != 200 {
			return fmt.Errorf("readyz %d %q: %v", code, body, err)
		}
		return nil
	})
	// Until every task was synced three times over: what the operator
	// would write, it writes on the first.
	framework.Eventually(t, time.Minute, func() error {
		m, err := second.Metrics("caliban_controller_syncs_total")
		if err != nil {
			return err
		}
		want := float64(3 * len(old))
		if n, _ := m.Sum("caliban_controller_syncs_total", map[string]string{"controller": calibanoperator.TaskControllerName, "result": "success"}); n < want {
			return fmt.Errorf("the restarted operator ran %v successful task syncs, want at least %v", n, want)
		}
		return nil
	})
	for _, name := range old {
		if task := getTask(t, ns, name); task.Status.Phase != calibanv1alpha1.TaskRunning {
			t.Errorf("after the restart task %s is %s, want Running", name, task.Status.Phase)
		}
		now := seen{generation: sandboxGeneration(t, ns, name)}
		if p := pod(t, ns, name); p != nil {
			now.pod, now.image = string(p.UID), calibandImage(p)
		}
		if want := before[name]; now != want {
			t.Errorf("after the restart task %s has Sandbox generation, pod and image %+v, want them untouched: %+v", name, now, want)
		}
	}
	if writes := second.writesTo(t, ns, builders.SandboxResource); len(writes) > 0 {
		t.Errorf("the restarted operator wrote existing Sandboxes: %v", writes)
	}
	if refused := second.refusedWrites(t, ns); len(refused) > 0 {
		t.Fatalf("the apiserver refused writes of the restarted operator: %v", refused)
	}

	// Suspended and resumed for real, under the new settings.
	framework.UpdateTask(t, cluster.Caliban, ns, "one", suspend(true))
	framework.WaitForPhase(t, cluster.Caliban, ns, "one", calibanv1alpha1.TaskSuspended, builders.ReasonSuspended, startTimeout)
	waitForNoPod(t, ns, "one")
	framework.UpdateTask(t, cluster.Caliban, ns, "one", suspend(false))
	framework.WaitForPhase(t, cluster.Caliban, ns, "one", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	resumed := waitForPod(t, ns, "one")
	if string(resumed.UID) == before["one"].pod {
		t.Error("the resumed task runs on its old pod")
	}
	if got := calibandImage(resumed); got != before["one"].image {
		t.Errorf("the resumed task runs %q, want %q, the image it first got", got, before["one"].image)
	}
	if got := claim(t, ns, "one").Spec.Resources.Requests.Storage().String(); got != "10Gi" {
		t.Errorf("the resumed task's claim asks for %s, want the 10Gi it first got", got)
	}

	// A new task gets the new values.
	createTask(t, ns, "four")
	framework.WaitForPhase(t, cluster.Caliban, ns, "four", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	if got := calibandImage(waitForPod(t, ns, "four")); got != newImage {
		t.Errorf("a new task runs %q, want the new %q", got, newImage)
	}
	if got := claim(t, ns, "four").Spec.Resources.Requests.Storage().String(); got != "20Gi" {
		t.Errorf("a new task's claim asks for %s, want the new 20Gi", got)
	}
	if refused := second.refusedWrites(t, ns); len(refused) > 0 {
		t.Errorf("the apiserver refused writes of the restarted operator: %v", refused)
	}
}

func sandboxGeneration(t *testing.T, ns, task string) int64 {
	t.Helper()
	sb, err := cluster.Dynamic.Resource(sandboxGVR).
		Namespace(ns).Get(ctx, builders.SandboxName(task), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return sb.GetGeneration()
}
