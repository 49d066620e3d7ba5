// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

func TestTheOperatorReportsThroughEventsAndMetrics(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	const instance = "caliban-operator-7d9f6-x2x4q"
	op := startOperator(t, "observability", ns, "CONTROLLER_POD_NAME="+instance)

	framework.Eventually(t, settleTimeout, func() error {
		code, body, err := op.Get("/healthz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/healthz: %d %s", code, body)
		}
		return nil
	})
	waitReady(t, op, settleTimeout)

	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")
	created := createTask(t, ns, "observed", "demo")
	waitForTask(t, ns, "observed", settleTimeout, isRunning)

	t.Run("Events", func(t *testing.T) {
		waitForEvent(t, ns, "observed", corev1.EventTypeNormal, "PhaseChanged", noteContains("Provisioning → Running"))
		for _, e := range eventsAbout(t, ns, "CalibanTask", "observed") {
			if e.ReportingController != builders.FieldManager || e.ReportingInstance != instance {
				t.Errorf("Event %s %q reported by %q/%q, want %s/%s", e.Reason, e.Note, e.ReportingController, e.ReportingInstance, builders.FieldManager, instance)
			}
			if e.Regarding.UID != created.UID || e.Regarding.APIVersion != calibanv1alpha1.SchemeGroupVersion.String() {
				t.Errorf("Event %s regards %+v, want the task (UID %s)", e.Reason, e.Regarding, created.UID)
			}
		}
		framework.Eventually(t, settleTimeout, func() error {
			for _, e := range eventsAbout(t, ns, "Workspace", "demo") {
				if e.Reason == "PhaseChanged" && strings.Contains(e.Note, "Ready") && e.ReportingInstance == instance {
					return nil
				}
			}
			return errors.New("no PhaseChanged Event about the workspace turning Ready")
		})
	})

	t.Run("a failure too long for an Event's note", func(t *testing.T) {
		// The workspace's message names the provider, whose name has no
		// length limit; the task's failure message quotes it.
		provider := "planner-" + strings.Repeat("x", 1100)
		createWorkspace(t, ns, "long", func(spec *calibanv1alpha1.WorkspaceSpec) {
			spec.Providers[0].Name = provider
			spec.Providers[0].CredentialsRef.SecretName = "no-such-secret"
		})
		// Once the operator has written the workspace's status it has it
		// in its cache, so the task's first failure is the long one, not
		// "Workspace not found" (which once came first, with the same
		// reason).
		waitForWorkspace(t, ns, "long", settleTimeout, func(ws *calibanv1alpha1.Workspace) error {
			if ws.Status.ObservedGeneration != 1 {
				return fmt.Errorf("the operator has not written the workspace's status (observedGeneration %d)", ws.Status.ObservedGeneration)
			}
			return nil
		})
		createTask(t, ns, "long-failure", "long")
		task := waitForTask(t, ns, "long-failure", settleTimeout, failedNaming(builders.ReasonWorkspaceUnresolved, provider))
		e := waitForEvent(t, ns, "long-failure", corev1.EventTypeWarning, builders.ReasonWorkspaceUnresolved, nil)
		if len(e.Note) > 1024 || !strings.HasPrefix(readyCondition(task).Message, strings.TrimSuffix(e.Note, "…")) {
			t.Errorf("Event note (%d bytes) %q, want at most 1024 bytes of the failure message", len(e.Note), e.Note)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		framework.Eventually(t, settleTimeout, func() error {
			m, err := op.Metrics()
			if err != nil {
				return err
			}
			type want struct {
				name   string
				labels map[string]string
				check  func(float64) bool
				what   string
			}
			positive := func(v float64) bool { return v > 0 }
			for _, w := range []want{
				{"workqueue_adds_total", map[string]string{"name": "calibantask"}, positive, "> 0"},
				{"workqueue_adds_total", map[string]string{"name": "workspace"}, positive, "> 0"},
				{"workqueue_depth", map[string]string{"name": "calibantask"}, func(float64) bool { return true }, "present"},
				{"rest_client_requests_total", nil, positive, "> 0"},
				{"caliban_controller_syncs_total", map[string]string{"controller": "calibantask", "result": "success"}, positive, "> 0"},
				{"caliban_controller_syncs_total", map[string]string{"controller": "workspace", "result": "success"}, positive, "> 0"},
				{"caliban_tasks", map[string]string{"phase": "Running"}, func(v float64) bool { return v == 1 }, "1"},
				{"caliban_tasks", map[string]string{"phase": "Failed"}, func(v float64) bool { return v == 1 }, "1"},
				{"caliban_workspaces", map[string]string{"phase": "Ready"}, func(v float64) bool { return v == 1 }, "1"},
				{"caliban_workspaces", map[string]string{"phase": "Failed"}, func(v float64) bool { return v == 1 }, "1"},
			} {
				v, ok := m.Sum(w.name, w.labels)
				if !ok || !w.check(v) {
					return fmt.Errorf("%s%v = %v (present: %v), want %s", w.name, w.labels, v, ok, w.what)
				}
			}
			return nil
		})
		code, body, err := op.Get("/readyz")
		if err != nil || code != http.StatusOK {
			t.Errorf("/readyz while running: %d %q %v", code, body, err)
		}
	})
}

func TestAnOperatorWatchingOneNamespaceLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	watched := cluster.Namespace(t, nil)
	other := cluster.Namespace(t, nil)
	op := startOperator(t, "watch-namespace", watched)
	for _, ns := range []string{watched, other} {
		createProviderSecret(t, ns)
		createWorkspace(t, ns, "demo")
		createTask(t, ns, "task", "demo")
	}
	waitForTask(t, watched, "task", settleTimeout, isRunning)

	// The phase gauges count what the caches hold: only the watched
	// namespace's objects, once each.
	m, err := op.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := m.Sum("caliban_tasks", nil); n != 1 {
		t.Errorf("the operator's cache holds %v tasks, want the watched namespace's 1", n)
	}
	if n, _ := m.Sum("caliban_workspaces", nil); n != 1 {
		t.Errorf("the operator's cache holds %v workspaces, want the watched namespace's 1", n)
	}
	task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(other).Get(ctx, "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := cluster.Caliban.CalibanV1alpha1().Workspaces(other).Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status.Phase != "" || ws.Status.Phase != "" {
		t.Errorf("objects in an unwatched namespace got a status: task %s, workspace %s", statusJSON(task.Status), statusJSON(ws.Status))
	}
	if sb := getSandbox(t, other, builders.SandboxName("task")); sb != nil {
		t.Error("a task in an unwatched namespace got a Sandbox")
	}
}

func TestTheOperatorRefusesABadConfigurationNamingTheVariable(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		env, names string
	}{
		"a caliband port inside the agent port window":   {env: "CALIBAND_PORT=7500", names: "CALIBAND_PORT"},
		"a leader election switch that is not a boolean": {env: "CALIBAN_LEADER_ELECTION=maybe", names: "CALIBAN_LEADER_ELECTION"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr, err := runOperatorToExit(t, 10*time.Second, test.env)
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			}
			if code == 0 {
				t.Errorf("exit code 0 with %s, want non-zero", test.env)
			}
			if !strings.Contains(stderr, test.names) {
				t.Errorf("stderr does not name %s:\n%s", test.names, stderr)
			}
		})
	}
}

func TestAFailingAPICallIsReportedAndRetried(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	op := startOperator(t, "api-error", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	// An admission policy refuses every Sandbox write in the namespace, so
	// the operator's apply fails the way an API error would.
	message := framework.FrozenSandboxesMessage
	unfreeze := cluster.FreezeSandboxes(t, ns, settleTimeout)

	createTask(t, ns, "blocked", "demo")
	waitForEvent(t, ns, "blocked", corev1.EventTypeWarning, "ReconcileError", noteContains(message))
	if task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "blocked", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if task.Status.Phase == calibanv1alpha1.TaskRunning {
		t.Errorf("a task whose Sandbox cannot be written runs: %s", statusJSON(task.Status))
	}
	m, err := op.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := m.Sum("caliban_controller_sync_errors_total", map[string]string{"controller": "calibantask"}); n == 0 {
		t.Error("caliban_controller_sync_errors_total{controller=calibantask} is 0 after a failed sync")
	}

	// Once the API accepts the write, a retry gets the task running.
	unfreeze()
	waitForTask(t, ns, "blocked", settleTimeout, isRunning)
}
