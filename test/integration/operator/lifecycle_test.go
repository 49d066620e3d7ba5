// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

func TestATaskRunsThenFollowsTheOutcomeProsperoReports(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "lifecycle", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	// Three tasks, one per outcome prospero reports.
	outcomes := []struct {
		task, reason, message string
		check                 taskCheck
	}{
		{task: "succeeds", reason: builders.SettledSucceeded, check: settledAs(calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, "")},
		{task: "fails-with-a-message", reason: builders.SettledFailed, message: "agent 'coder' exited with status 3",
			check: settledAs(calibanv1alpha1.TaskFailed, builders.ReasonAgentsFailed, "agent 'coder' exited with status 3")},
		{task: "fails-silently", reason: builders.SettledFailed,
			check: settledAs(calibanv1alpha1.TaskFailed, builders.ReasonAgentsFailed, "one or more agents failed or crashed")},
	}
	phases := map[string]<-chan []calibanv1alpha1.TaskPhase{}
	for _, o := range outcomes {
		created := createTask(t, ns, o.task, "demo")
		phases[o.task] = recordPhases(t, ns, o.task, created.ResourceVersion, calibanv1alpha1.TaskRunning)
	}

	for _, o := range outcomes {
		seen := <-phases[o.task]
		// Running comes after Pending and/or Provisioning, never first, and
		// the phase never goes back.
		order := []calibanv1alpha1.TaskPhase{calibanv1alpha1.TaskPending, calibanv1alpha1.TaskProvisioning, calibanv1alpha1.TaskRunning}
		if len(seen) < 2 || seen[len(seen)-1] != calibanv1alpha1.TaskRunning || !isSubsequence(seen, order) {
			t.Errorf("task %s went through phases %v, want Pending and/or Provisioning, then Running", o.task, seen)
		}

		task := waitForTask(t, ns, o.task, settleTimeout, isRunning)
		if task.Status.PermissionPosture != calibanv1alpha1.PostureSupervised {
			t.Errorf("task %s: permissionPosture %q, want supervised", o.task, task.Status.PermissionPosture)
		}
		if got := task.Status.ResolvedWorkspace; got.Provider.Name != "planner" || got.Provider.Model != "claude-sonnet-4-5" {
			t.Errorf("task %s: pinned provider %+v, want planner with model claude-sonnet-4-5", o.task, got.Provider)
		}
		if c := readyCondition(task); c.ObservedGeneration != task.Generation {
			t.Errorf("task %s: Ready observedGeneration %d, want %d", o.task, c.ObservedGeneration, task.Generation)
		}
		if getSandbox(t, ns, task.Status.SandboxRef.Name) == nil {
			t.Errorf("task %s: sandboxRef names %s, which does not exist", o.task, task.Status.SandboxRef.Name)
		}
	}
	if t.Failed() {
		return
	}

	for _, o := range outcomes {
		prosperoSettles(t, ns, o.task, o.reason, o.message)
	}
	for _, o := range outcomes {
		task := waitForTask(t, ns, o.task, settleTimeout, o.check)

		settled := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionAgentsSettled)
		if settled == nil || settled.Status != metav1.ConditionTrue || settled.Reason != o.reason || settled.Message != o.message {
			t.Errorf("task %s: AgentsSettled %+v, want prospero's True/%s %q", o.task, settled, o.reason, o.message)
		}
		prospero := statusFieldsOf(task, "prospero")
		if !ownsCondition(prospero, builders.ConditionAgentsSettled) {
			t.Errorf("task %s: prospero does not own AgentsSettled; its status fields: %v", o.task, prospero)
		}
		operator := statusFieldsOf(task, builders.FieldManager)
		if !ownsCondition(operator, builders.ConditionReady) || ownsCondition(operator, builders.ConditionAgentsSettled) {
			t.Errorf("task %s: the operator's status fields %v, want Ready and not AgentsSettled", o.task, operator)
		}
		// What the operator no longer claims is gone, not null.
		raw, err := cluster.Dynamic.Resource(calibanv1alpha1.SchemeGroupVersion.WithResource("calibantasks")).Namespace(ns).
			Get(ctx, o.task, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if status, _ := raw.Object["status"].(map[string]any); status == nil {
			t.Errorf("task %s has no status", o.task)
		} else if v, ok := status["calibandEndpoint"]; ok {
			t.Errorf("task %s: status.calibandEndpoint is %#v, want it omitted", o.task, v)
		}
		// The pin and the Sandbox stay: prospero may still read them.
		if task.Status.ResolvedWorkspace == nil || task.Status.SandboxRef == nil {
			t.Errorf("task %s: a settled task lost its pin or sandboxRef: %s", o.task, statusJSON(task.Status))
		}
	}
}

// settledAs: the phase and Ready reason an AgentsSettled outcome maps to,
// with the endpoint gone. An empty message is not checked.
func settledAs(phase calibanv1alpha1.TaskPhase, reason, message string) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		if err := hasPhase(phase)(task); err != nil {
			return err
		}
		if err := readyIs(task, metav1.ConditionFalse, reason); err != nil {
			return err
		}
		if got := readyCondition(task).Message; message != "" && got != message {
			return fmt.Errorf("Ready message %q, want %q", got, message)
		}
		if task.Status.CalibandEndpoint != "" {
			return fmt.Errorf("calibandEndpoint %q, want none", task.Status.CalibandEndpoint)
		}
		return nil
	}
}

// recordPhases watches a task from resourceVersion rv and sends the
// distinct phases it goes through, up to and including until.
func recordPhases(t testing.TB, ns, name, rv string, until calibanv1alpha1.TaskPhase) <-chan []calibanv1alpha1.TaskPhase {
	t.Helper()
	w, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: rv,
	})
	if err != nil {
		t.Fatalf("watching CalibanTask %s: %v", name, err)
	}
	out := make(chan []calibanv1alpha1.TaskPhase, 1)
	go func() {
		defer w.Stop()
		var seen []calibanv1alpha1.TaskPhase
		timeout := time.After(settleTimeout)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					out <- append(seen, "(watch closed)")
					return
				}
				task, isTask := ev.Object.(*calibanv1alpha1.CalibanTask)
				if !isTask || ev.Type == watch.Deleted {
					continue
				}
				if p := task.Status.Phase; p != "" && (len(seen) == 0 || seen[len(seen)-1] != p) {
					seen = append(seen, p)
				}
				if task.Status.Phase == until {
					out <- seen
					return
				}
			case <-timeout:
				out <- append(seen, "(timed out)")
				return
			}
		}
	}()
	return out
}

// isSubsequence reports whether seen lists elements of order in order.
func isSubsequence[T comparable](seen, order []T) bool {
	i := 0
	for _, s := range seen {
		for i < len(order) && order[i] != s {
			i++
		}
		if i == len(order) {
			return false
		}
		i++
	}
	return true
}

func TestAPinnedTaskKeepsItsConfigurationWhenTheWorkspaceChanges(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "pin", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	createTask(t, ns, "before", "demo")
	before := waitForTask(t, ns, "before", settleTimeout, isRunning)
	sandboxBefore := getSandbox(t, ns, before.Status.SandboxRef.Name)

	gen := framework.UpdateWorkspace(t, cluster.Caliban, ns, "demo", func(spec *calibanv1alpha1.WorkspaceSpec) {
		spec.Providers[0].Model = "claude-opus-4-1"
		spec.Env = append(spec.Env, calibanv1alpha1.EnvVar{Name: "TEAM", Value: "platform"})
	})
	waitForWorkspaceGeneration(t, ns, "demo", gen)

	// Make the operator reconcile the pinned task after the edit: it
	// records the new generation, which proves it looked.
	taskGen := touchTask(t, ns, "before")
	after := waitForTask(t, ns, "before", settleTimeout, func(task *calibanv1alpha1.CalibanTask) error {
		if task.Status.ObservedGeneration != taskGen {
			return fmt.Errorf("observedGeneration %d, want %d", task.Status.ObservedGeneration, taskGen)
		}
		return isRunning(task)
	})
	if diff := cmp.Diff(before.Status.ResolvedWorkspace, after.Status.ResolvedWorkspace); diff != "" {
		t.Errorf("the pin changed after the workspace was edited (-before +after):\n%s", diff)
	}
	sandboxAfter := getSandbox(t, ns, before.Status.SandboxRef.Name)
	if sandboxAfter.GetResourceVersion() != sandboxBefore.GetResourceVersion() || sandboxAfter.GetGeneration() != sandboxBefore.GetGeneration() {
		t.Errorf("the Sandbox was rewritten: resourceVersion %s → %s, generation %d → %d",
			sandboxBefore.GetResourceVersion(), sandboxAfter.GetResourceVersion(), sandboxBefore.GetGeneration(), sandboxAfter.GetGeneration())
	}
	if diff := cmp.Diff(calibandEnv(t, sandboxBefore), calibandEnv(t, sandboxAfter)); diff != "" {
		t.Errorf("the Sandbox's caliband env changed (-before +after):\n%s", diff)
	}
	if _, ok := envValue(calibandEnv(t, sandboxAfter), "TEAM"); ok {
		t.Error("the pinned task's Sandbox got the workspace's new env entry TEAM")
	}

	// A task admitted now runs under the new configuration.
	createTask(t, ns, "after-edit", "demo")
	fresh := waitForTask(t, ns, "after-edit", settleTimeout, isRunning)
	if got := fresh.Status.ResolvedWorkspace.Provider.Model; got != "claude-opus-4-1" {
		t.Errorf("new task pinned model %q, want claude-opus-4-1", got)
	}
	if !slices.Contains(fresh.Status.ResolvedWorkspace.Env, calibanv1alpha1.EnvVar{Name: "TEAM", Value: "platform"}) {
		t.Errorf("new task's pinned env %v lacks TEAM=platform", fresh.Status.ResolvedWorkspace.Env)
	}
	if v, ok := envValue(calibandEnv(t, getSandbox(t, ns, fresh.Status.SandboxRef.Name)), "TEAM"); !ok || v != "platform" {
		t.Errorf("new task's Sandbox env TEAM = %q (set: %v), want platform", v, ok)
	}
}

func TestDeletingATaskGarbageCollectsItsChildren(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "gc", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")
	// A name that is a valid CalibanTask name but no valid Service name
	// (dots, a leading digit, too long): the children get the safe names,
	// and the status records the Sandbox's.
	name := "7" + strings.Repeat("team.", 11) + "fix-login-1234"
	createTask(t, ns, name, "demo")
	task := waitForTask(t, ns, name, settleTimeout, isRunning)
	if got := task.Status.SandboxRef.Name; got == name+"-sbx" || len(got) > 63 {
		t.Errorf("sandboxRef %q is not a safe DNS-1035 label", got)
	}

	children := children(ns, task.Name)
	for child, get := range children {
		obj, err := get()
		if err != nil {
			t.Fatalf("%s: %v", child, err)
		}
		if got, want := obj.GetLabels()[builders.LabelTask], builders.TaskLabelValue(name); got != want {
			t.Errorf("%s: task label %q, want %q", child, got, want)
		}
		ref := metav1.GetControllerOf(obj)
		if ref == nil || ref.UID != task.UID || ref.Kind != "CalibanTask" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("%s: controller reference %+v, want the task (UID %s) with blockOwnerDeletion", child, ref, task.UID)
		}
	}

	if err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Delete(ctx, task.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// kube-controller-manager's garbage collector notices new resources on
	// its periodic discovery (30 s), hence the generous wait.
	framework.Eventually(t, 90*time.Second, func() error {
		for child, get := range children {
			if _, err := get(); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still exists (err %v)", child, err)
			}
		}
		return nil
	})
	t.Logf("the garbage collector removed the children %s after the task was deleted", time.Since(deleted).Round(100*time.Millisecond))

	// A task deleted and at once created again under the same name is a
	// different task: it ends up with children of its own, which the
	// garbage collector leaves alone, and not with its predecessor's.
	createTask(t, ns, name, "demo")
	waitForTask(t, ns, name, settleTimeout, isRunning)
	if err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	recreated := time.Now()
	again := createTask(t, ns, name, "demo")
	ownedByAgain := func() error {
		for child, get := range children {
			obj, err := get()
			if err != nil {
				return fmt.Errorf("%s: %w", child, err)
			}
			if refs := obj.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != again.UID {
				return fmt.Errorf("%s owner references %+v, want only the new task %s", child, refs, again.UID)
			}
		}
		return nil
	}
	framework.Eventually(t, 90*time.Second, func() error {
		if err := ownedByAgain(); err != nil {
			return err
		}
		task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return isRunning(task)
	})
	t.Logf("the task created again ran in children of its own %s after it was created", time.Since(recreated).Round(100*time.Millisecond))
	consistently(t, 2*time.Second, ownedByAgain)
}

func TestRestartingTheOperatorWritesNothing(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	first := startOperator(t, "churn-0", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo", func(spec *calibanv1alpha1.WorkspaceSpec) {
		// Every child builder input, so every field gets a chance to churn.
		spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.0/8", Ports: []int32{443}}}}
		spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{
			PermissionMode: calibanv1alpha1.PermissionModeAcceptEdits, NoMCP: new(true), EnabledPlugins: []string{},
		}
	})
	createTask(t, ns, "steady", "demo")
	task := waitForTask(t, ns, "steady", settleTimeout, isRunning)
	// Failures are steady states too: a repeated identical failure writes
	// no status and emits no Event.
	createWorkspace(t, ns, "broken", func(spec *calibanv1alpha1.WorkspaceSpec) {
		spec.Providers[0].CredentialsRef.SecretName = "no-such-secret"
	})
	createTask(t, ns, "on-broken", "broken")
	createTask(t, ns, "no-token", "demo", func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.State = &calibanv1alpha1.StateSpec{
			GonzaloEndpoint: "http://gonzalod.storage.svc:8080",
			TokenRef:        &calibanv1alpha1.SecretKeyRef{SecretName: "no-such-token", Key: "token"},
		}
	})
	createTask(t, ns, "too-bold", "demo", unattended)
	for name, reason := range map[string]string{
		"on-broken": builders.ReasonWorkspaceUnresolved,
		"no-token":  builders.ReasonInvalidState,
		"too-bold":  builders.ReasonPostureNotPermitted,
	} {
		waitForTask(t, ns, name, settleTimeout, failedNaming(reason))
		waitForEvent(t, ns, name, corev1.EventTypeWarning, reason, nil)
	}

	objects := map[string]func() (metav1.Object, error){
		"Sandbox steady-sbx": func() (metav1.Object, error) {
			return cluster.Dynamic.Resource(sandboxes).Namespace(ns).Get(ctx, task.Status.SandboxRef.Name, metav1.GetOptions{})
		},
		"ServiceAccount steady-sa": func() (metav1.Object, error) {
			return cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, builders.ServiceAccountName(task.Name), metav1.GetOptions{})
		},
		"NetworkPolicy steady-netpol": func() (metav1.Object, error) {
			return cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, builders.NetworkPolicyName(task.Name), metav1.GetOptions{})
		},
	}
	for _, name := range []string{"steady", "on-broken", "no-token", "too-bold"} {
		objects["CalibanTask "+name] = func() (metav1.Object, error) {
			return cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
		}
	}
	for _, name := range []string{"demo", "broken"} {
		objects["Workspace "+name] = func() (metav1.Object, error) {
			return cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, name, metav1.GetOptions{})
		}
	}
	want := settledClusterState(t, ns, objects, time.Second)
	unchanged := func() error {
		got, err := clusterState(ns, objects)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("objects or Events changed (-before +now):\n%s", diff)
		}
		return nil
	}

	// The running operator requeues the failed tasks every 30 s and
	// re-checks the failed workspace every 15 s: those syncs write nothing.
	syncs := func(op *framework.Operator) (float64, float64) {
		m, err := op.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := m.Sum("caliban_controller_syncs_total", map[string]string{"controller": "calibantask"})
		return n, writeRequests(m)
	}
	syncsBefore, writesBefore := syncs(first)
	if writesBefore == 0 {
		t.Fatal("the REST client metrics count no writes although the operator created children and wrote status")
	}
	consistently(t, 32*time.Second, unchanged)
	if syncsAfter, writesAfter := syncs(first); syncsAfter < syncsBefore+3 || writesAfter != writesBefore {
		t.Errorf("over 32 s the operator synced tasks %v times and made %v write requests, want at least 3 (the failed tasks' requeues) and none",
			syncsAfter-syncsBefore, writesAfter-writesBefore)
	}
	if code := stop(t, first); code != 0 {
		t.Errorf("operator exited with %d after SIGTERM, want 0", code)
	}
	if err := unchanged(); err != nil {
		t.Fatal(err)
	}

	// Each start lists everything and syncs every object once.
	for i := 1; i <= 2; i++ {
		start := time.Now()
		op := startOperator(t, fmt.Sprintf("churn-%d", i), ns)
		framework.Eventually(t, settleTimeout, func() error {
			m, err := op.Metrics()
			if err != nil {
				return err
			}
			for c, n := range map[string]float64{"calibantask": 4, "workspace": 2} {
				if got, _ := m.Sum("caliban_controller_syncs_total", map[string]string{"controller": c}); got < n {
					return fmt.Errorf("controller %s has synced %v times, want at least %v", c, got, n)
				}
				if d, ok := m.Sum("workqueue_depth", map[string]string{"name": c}); !ok || d != 0 {
					return fmt.Errorf("queue %s depth %v (present: %v)", c, d, ok)
				}
			}
			return nil
		})
		consistently(t, max(10*time.Second-time.Since(start), 3*time.Second), unchanged)

		m, err := op.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if n := writeRequests(m); n != 0 {
			t.Errorf("restart %d: the operator made %v write requests in steady state, want none", i, n)
		}
		if code := stop(t, op); code != 0 {
			t.Errorf("restart %d: operator exited with %d after SIGTERM, want 0", i, code)
		}
	}
}

// writeRequests counts the requests that change something, from the REST
// client metrics.
func writeRequests(m metrics) float64 {
	var n float64
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		v, _ := m.Sum("rest_client_requests_total", map[string]string{"method": verb})
		n += v
	}
	return n
}
