// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// resyncPeriod is the CALIBAN_RESYNC_SECONDS the resync tests run the
// operator with: short, so that several periods pass within a test.
const resyncPeriod = 3 * time.Second

// resyncEnv configures the operator with resyncPeriod.
var resyncEnv = fmt.Sprintf("CALIBAN_RESYNC_SECONDS=%d", int(resyncPeriod/time.Second))

// remoteState gives a task remote state on gonzalo with its token in
// secret (key "token"); the mode defaults to remote.
func remoteState(secret string) func(*calibanv1alpha1.CalibanTaskSpec) {
	return func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.State = &calibanv1alpha1.StateSpec{
			GonzaloEndpoint: "https://gonzalo.example:443",
			TokenRef:        &calibanv1alpha1.SecretKeyRef{SecretName: secret, Key: "token"},
		}
	}
}

func TestTheResyncFailsARunningTaskWhoseTokenSecretWasDeleted(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "resync-token", ns, resyncEnv)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")
	createSecret(t, ns, "s", map[string]string{"token": "gz-test"})
	createTask(t, ns, "stateful", "demo", remoteState("s"))
	running := waitForTask(t, ns, "stateful", settleTimeout, isRunning)
	// Let the syncs that follow the operator's own writes pass, so that
	// none of them is what notices the deletion.
	quiet(t, ns, "stateful", running.ResourceVersion)

	// Secrets are not watched and nothing else changes: no event reaches
	// the task, only the periodic resync can notice.
	if err := cluster.Kube.CoreV1().Secrets(ns).Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// Within one period (3 s) is what the operator promises; the bound is
	// generous because the machine is shared.
	failed := waitForTask(t, ns, "stateful", 60*time.Second,
		failedWith(builders.ReasonInvalidState, "state.tokenRef: secret 's' not found"))
	t.Logf("the task turned Failed %s after its token Secret was deleted (resync period %s)",
		time.Since(deleted).Round(100*time.Millisecond), resyncPeriod)

	if failed.Generation != running.Generation {
		t.Errorf("the task's generation went from %d to %d: something other than the resync changed it", running.Generation, failed.Generation)
	}
	if diff := cmp.Diff(running.Status.ResolvedWorkspace, failed.Status.ResolvedWorkspace); diff != "" {
		t.Errorf("the failed task's pin changed (-running +failed):\n%s", diff)
	}
	waitForEvent(t, ns, "stateful", corev1.EventTypeWarning, builders.ReasonInvalidState, noteContains("secret 's' not found"))
}

func TestResyncsWriteNothingInTheSteadyState(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	op := startOperator(t, "resync-steady", ns, resyncEnv)
	createProviderSecret(t, ns)
	createSecret(t, ns, "gonzalo-token", map[string]string{"token": "gz-test"})
	createReadyWorkspace(t, ns, "demo", func(spec *calibanv1alpha1.WorkspaceSpec) {
		spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true}
	})

	// Running tasks of every kind a resync reads something for (a token
	// Secret GET, an unattended posture), and a failed one, whose failure
	// repeats on every resync.
	running := map[string][]func(*calibanv1alpha1.CalibanTaskSpec){
		"plain":      nil,
		"stateful":   {remoteState("gonzalo-token")},
		"unattended": {unattended},
	}
	for name, mutate := range running {
		createTask(t, ns, name, "demo", mutate...)
	}
	createTask(t, ns, "no-token", "demo", remoteState("no-such-token"))

	objects := map[string]func() (metav1.Object, error){
		"Workspace demo": func() (metav1.Object, error) {
			return cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, "demo", metav1.GetOptions{})
		},
		"CalibanTask no-token": func() (metav1.Object, error) {
			return cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "no-token", metav1.GetOptions{})
		},
	}
	for name := range running {
		task := waitForTask(t, ns, name, settleTimeout, isRunning)
		objects["CalibanTask "+name] = func() (metav1.Object, error) {
			return cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
		}
		sbx, sa, np := task.Status.SandboxRef.Name, builders.ServiceAccountName(name), builders.NetworkPolicyName(name)
		objects["Sandbox "+sbx] = func() (metav1.Object, error) {
			return cluster.Dynamic.Resource(sandboxes).Namespace(ns).Get(ctx, sbx, metav1.GetOptions{})
		}
		objects["ServiceAccount "+sa] = func() (metav1.Object, error) {
			return cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{})
		}
		objects["NetworkPolicy "+np] = func() (metav1.Object, error) {
			return cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, np, metav1.GetOptions{})
		}
	}
	waitForTask(t, ns, "no-token", settleTimeout,
		failedWith(builders.ReasonInvalidState, "state.tokenRef: secret 'no-such-token' not found"))
	waitForEvent(t, ns, "no-token", corev1.EventTypeWarning, builders.ReasonInvalidState, nil)

	// Wait for a state that holds for longer than one resync period.
	before := settledClusterState(t, ns, objects, resyncPeriod+time.Second)

	counts := func() (taskSyncs, workspaceSyncs, writes float64) {
		m, err := op.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		taskSyncs, _ = m.Sum("caliban_controller_syncs_total", map[string]string{"controller": "calibantask"})
		workspaceSyncs, _ = m.Sum("caliban_controller_syncs_total", map[string]string{"controller": "workspace"})
		return taskSyncs, workspaceSyncs, writeRequests(m)
	}
	taskSyncsBefore, workspaceSyncsBefore, writesBefore := counts()
	if writesBefore == 0 {
		t.Fatal("the REST client metrics count no writes although the operator created children and wrote status")
	}

	const periods = 4
	time.Sleep(periods*resyncPeriod + time.Second)

	taskSyncsAfter, workspaceSyncsAfter, writesAfter := counts()
	after, err := clusterState(ns, objects)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("over %d resync periods objects or Events changed (-before +after):\n%s", periods, diff)
	}
	if writesAfter != writesBefore {
		t.Errorf("over %d resync periods the operator made %v write requests, want none", periods, writesAfter-writesBefore)
	}
	// The resyncs did happen: each of the four tasks synced again (at
	// least twice, to leave room for a slow machine).
	tasks := float64(len(running) + 1)
	if got := taskSyncsAfter - taskSyncsBefore; got < 2*tasks {
		t.Errorf("over %d resync periods of %s the tasks were synced %v times, want at least %v", periods, resyncPeriod, got, 2*tasks)
	}
	// (Workspaces are not resynced: they have re-checks of their own,
	// docs/crd-reference.md#requeue-intervals.)
	t.Logf("over %d resync periods: %v task syncs, %v workspace syncs, %v writes",
		periods, taskSyncsAfter-taskSyncsBefore, workspaceSyncsAfter-workspaceSyncsBefore, writesAfter-writesBefore)
}

// quiet waits until the task has kept resourceVersion rv for two seconds.
func quiet(t testing.TB, ns, name, rv string) {
	t.Helper()
	consistently(t, 2*time.Second, func() error {
		task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if task.ResourceVersion != rv {
			return fmt.Errorf("CalibanTask %s changed after it settled (resourceVersion %s → %s): %s", name, rv, task.ResourceVersion, statusJSON(task.Status))
		}
		return nil
	})
}
