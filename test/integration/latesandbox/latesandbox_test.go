// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package latesandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

var ctx = context.Background()

const (
	// sandboxAPI is how the operator names the API it is missing.
	sandboxAPI = "sandboxes.agents.x-k8s.io/v1beta1"
	// reasonSandboxAPIUnavailable is the Ready reason and Event reason of
	// a task that waits for that API.
	reasonSandboxAPIUnavailable = "SandboxAPIUnavailable"
	settleTimeout               = 30 * time.Second
	resyncPeriod                = 2 * time.Second
)

func TestTasksWaitForAgentSandboxAndRunOnceItIsInstalled(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	tasks := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns)

	// The premise: the cluster does not serve the Sandbox API.
	if _, err := cluster.Kube.Discovery().ServerResourcesForGroupVersion(sandboxv1beta1.SchemeGroupVersion.String()); !apierrors.IsNotFound(err) {
		t.Fatalf("discovery of %s: %v, want NotFound: the cluster must start without the Sandbox CRD", sandboxv1beta1.SchemeGroupVersion, err)
	}

	// A short resync makes the operator sync the waiting task again and
	// again, which must not repeat the Warning Event.
	op := startOperator(t, ns, fmt.Sprintf("CALIBAN_RESYNC_SECONDS=%d", int(resyncPeriod/time.Second)))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "anthropic-key"}, StringData: map[string]string{"api-key": "sk-ant-test"}}
	if _, err := cluster.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Create(ctx, &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Spec: calibanv1alpha1.WorkspaceSpec{
			DisplayName: "Late agent-sandbox",
			Sources: []calibanv1alpha1.Source{{
				Name: "caliban", Repo: "https://github.com/caliban-ai/caliban.git", Ref: "main", Path: "/work/caliban",
			}},
			Providers: []calibanv1alpha1.Provider{{
				Name: "planner", Kind: "anthropic", Model: "claude-sonnet-4-5",
				CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "anthropic-key", Key: "api-key"},
			}},
		},
	}, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Create(ctx, &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: "early"},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "demo"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "Summarise the repository layout in README form."},
		},
	}, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatal(err)
	}

	// Each step needs the one before.
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("the workspace is validated although the Sandbox API is not served", func(t *testing.T) {
		framework.Eventually(t, settleTimeout, func() error {
			if err := op.Running(); err != nil {
				return err
			}
			ws, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, "demo", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ws.Status.Phase != calibanv1alpha1.WorkspaceReady || ws.Status.ObservedGeneration != ws.Generation {
				return fmt.Errorf("workspace phase %q observedGeneration %d (generation %d), want Ready for the current generation",
					ws.Status.Phase, ws.Status.ObservedGeneration, ws.Generation)
			}
			return nil
		})
	})

	// waiting: admitted and pinned, Provisioning, and Ready says why.
	waiting := func(task *calibanv1alpha1.CalibanTask) error {
		st := task.Status
		if st.Phase != calibanv1alpha1.TaskProvisioning {
			return fmt.Errorf("phase %q, want Provisioning", st.Phase)
		}
		if st.ResolvedWorkspace == nil {
			return errors.New("no resolvedWorkspace: the task was not pinned")
		}
		if st.PermissionPosture != calibanv1alpha1.PostureSupervised {
			return fmt.Errorf("permissionPosture %q, want supervised", st.PermissionPosture)
		}
		c := meta.FindStatusCondition(st.Conditions, builders.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonSandboxAPIUnavailable {
			return fmt.Errorf("Ready condition %+v, want False with reason %s", c, reasonSandboxAPIUnavailable)
		}
		for _, w := range []string{sandboxAPI, "agent-sandbox"} {
			if !strings.Contains(c.Message, w) {
				return fmt.Errorf("Ready message %q does not mention %q", c.Message, w)
			}
		}
		if st.SandboxRef != nil {
			return fmt.Errorf("sandboxRef %+v although no Sandbox can exist", st.SandboxRef)
		}
		if st.CalibandEndpoint != "" {
			return fmt.Errorf("calibandEndpoint %q without a Sandbox", st.CalibandEndpoint)
		}
		return nil
	}
	getTask := func() (*calibanv1alpha1.CalibanTask, error) { return tasks.Get(ctx, "early", metav1.GetOptions{}) }
	var pinned *calibanv1alpha1.CalibanTask

	step("the task is pinned and waits in Provisioning, saying agent-sandbox is missing", func(t *testing.T) {
		framework.Eventually(t, settleTimeout, func() error {
			task, err := getTask()
			if err != nil {
				return err
			}
			if err := waiting(task); err != nil {
				return fmt.Errorf("%w (status %+v)", err, task.Status)
			}
			pinned = task
			return nil
		})
	})

	step("one Warning Event says so, however often the task is retried", func(t *testing.T) {
		apiUnavailable := func() ([]eventsv1.Event, error) {
			list, err := cluster.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var out []eventsv1.Event
			for _, e := range list.Items {
				if e.Regarding.Kind == "CalibanTask" && e.Regarding.Name == "early" && e.Reason == reasonSandboxAPIUnavailable {
					out = append(out, e)
				}
			}
			return out, nil
		}
		framework.Eventually(t, settleTimeout, func() error {
			events, err := apiUnavailable()
			if err != nil {
				return err
			}
			if len(events) == 0 {
				return fmt.Errorf("no %s Event about the task", reasonSandboxAPIUnavailable)
			}
			return nil
		})
		syncs := func() float64 {
			m, err := op.Metrics("caliban_controller_syncs_total")
			if err != nil {
				t.Fatal(err)
			}
			n, _ := m.Sum("caliban_controller_syncs_total", map[string]string{"controller": "calibantask"})
			return n
		}
		syncsBefore := syncs()
		// Until the task was synced four more times (resyncs, and the
		// operator's discovery polls meanwhile), the task keeps waiting and
		// the operator keeps running; then there is still one Event.
		const resyncs = 4
		deadline := time.Now().Add(settleTimeout)
		for syncs()-syncsBefore < resyncs {
			if time.Now().After(deadline) {
				t.Fatalf("the task was synced %v times in %s with a resync period of %s, want at least %d", syncs()-syncsBefore, settleTimeout, resyncPeriod, resyncs)
			}
			if err := op.Running(); err != nil {
				t.Fatal(err)
			}
			task, err := getTask()
			if err != nil {
				t.Fatal(err)
			}
			if err := waiting(task); err != nil {
				t.Fatalf("while the Sandbox API is missing: %v (status %+v)", err, task.Status)
			}
			time.Sleep(500 * time.Millisecond)
		}
		events, err := apiUnavailable()
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 {
			t.Fatalf("%d %s Events about the task, want exactly one: %+v", len(events), reasonSandboxAPIUnavailable, events)
		}
		e := events[0]
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("the %s Event is of type %s, want Warning", e.Reason, e.Type)
		}
		for _, w := range []string{sandboxAPI, "agent-sandbox"} {
			if !strings.Contains(e.Note, w) {
				t.Errorf("the %s Event's note %q does not mention %q", e.Reason, e.Note, w)
			}
		}
		if e.Series != nil {
			t.Logf("the %s Event is a series of %d", e.Reason, e.Series.Count)
		}
	})

	step("the operator keeps running and reports ready", func(t *testing.T) {
		if err := op.Running(); err != nil {
			t.Fatal(err)
		}
		code, body, err := op.Get("/readyz")
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusOK {
			t.Fatalf("/readyz answered %d %q, want 200", code, body)
		}
	})

	step("once agent-sandbox is installed the task runs, without an operator restart", func(t *testing.T) {
		if err := cluster.InstallSandbox(ctx); err != nil {
			t.Fatalf("installing the Sandbox CRD and Stages: %v", err)
		}
		installed := time.Now()
		sandbox := builders.SandboxName("early")
		endpoint := fmt.Sprintf("%s.%s.svc.cluster.local:8443", sandbox, ns)
		var task *calibanv1alpha1.CalibanTask
		// The operator polls discovery every 5-10 s.
		framework.Eventually(t, 90*time.Second, func() error {
			if err := op.Running(); err != nil {
				return err
			}
			got, err := getTask()
			if err != nil {
				return err
			}
			st := got.Status
			if st.Phase != calibanv1alpha1.TaskRunning {
				return fmt.Errorf("phase %q, want Running (status %+v)", st.Phase, st)
			}
			if c := meta.FindStatusCondition(st.Conditions, builders.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.Reason != builders.ReasonRunning {
				return fmt.Errorf("Ready condition %+v, want True/%s", c, builders.ReasonRunning)
			}
			if st.CalibandEndpoint != endpoint {
				return fmt.Errorf("calibandEndpoint %q, want %q", st.CalibandEndpoint, endpoint)
			}
			if st.SandboxRef == nil || st.SandboxRef.Name != sandbox {
				return fmt.Errorf("sandboxRef %+v, want %s", st.SandboxRef, sandbox)
			}
			task = got
			return nil
		})
		t.Logf("the task ran %s after the Sandbox API and its stand-in were installed", time.Since(installed).Round(100*time.Millisecond))

		if _, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, builders.ServiceAccountName("early"), metav1.GetOptions{}); err != nil {
			t.Errorf("the task's ServiceAccount: %v", err)
		}
		if _, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, builders.NetworkPolicyName("early"), metav1.GetOptions{}); err != nil {
			t.Errorf("the task's NetworkPolicy: %v", err)
		}
		if _, err := cluster.Dynamic.Resource(sandboxv1beta1.SchemeGroupVersion.WithResource(builders.SandboxResource)).
			Namespace(ns).Get(ctx, sandbox, metav1.GetOptions{}); err != nil {
			t.Errorf("the task's Sandbox: %v", err)
		}
		if diff := cmp.Diff(pinned.Status.ResolvedWorkspace, task.Status.ResolvedWorkspace); diff != "" {
			t.Errorf("the pin changed while the task waited (-waiting +running):\n%s", diff)
		}
		if err := op.Running(); err != nil {
			t.Fatal(err)
		}
	})
}
