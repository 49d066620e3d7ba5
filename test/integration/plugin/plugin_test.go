// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/app"
	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

const settle = 45 * time.Second

// The Workspace message the operator writes for a provider Secret that
// does not exist (docs/crd-reference.md, validation check 12).
const missingSecret = "provider 'planner': secret 'no-such-secret' key 'api-key' not found"

func workspace(ns, name, secret string) *calibanv1alpha1.Workspace {
	return &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: calibanv1alpha1.WorkspaceSpec{DisplayName: "Plugin workspace", Providers: []calibanv1alpha1.Provider{{
			Name: "planner", Kind: "anthropic", Model: "claude-sonnet-4-5",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: secret, Key: "api-key"},
		}}},
	}
}

func task(ns, name, ws string) *calibanv1alpha1.CalibanTask {
	return &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: ws},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "Tidy the README."},
		},
	}
}

// row is the table row of the task name: its cells split on blanks (an
// empty cell leaves no field).
func row(t *testing.T, table, name string, nameColumn int) []string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > nameColumn && f[nameColumn] == name {
			return f
		}
	}
	t.Fatalf("no row for %s in:\n%s", name, table)
	return nil
}

// Every verb against tasks the operator manages: one Running, one failed
// at admission on a Workspace whose provider Secret does not exist.
func TestThePluginOnTasksTheOperatorManages(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	startOperator(t, ns)
	if _, err := cluster.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "provider"}, StringData: map[string]string{"api-key": "sk-test"},
	}, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []*calibanv1alpha1.Workspace{workspace(ns, "ws", "provider"), workspace(ns, "wsb", "no-such-secret")} {
		if _, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Create(ctx, ws, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range []*calibanv1alpha1.CalibanTask{task(ns, "runs", "ws"), task(ns, "stuck", "wsb")} {
		if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, tk, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
			t.Fatal(err)
		}
	}
	runs := framework.WaitForPhase(t, cluster.Caliban, ns, "runs", calibanv1alpha1.TaskRunning, builders.ReasonRunning, settle)
	framework.WaitForPhase(t, cluster.Caliban, ns, "stuck", calibanv1alpha1.TaskFailed, builders.ReasonWorkspaceUnresolved, settle)

	t.Run("get lists both tasks with the pinned model and the endpoint", func(t *testing.T) {
		r := plugin("get", "-n", ns)
		if r.code != app.ExitOK {
			t.Fatal(r)
		}
		if got, want := strings.Fields(strings.SplitN(r.out, "\n", 2)[0]), []string{"NAME", "PHASE", "POSTURE", "WORKSPACE", "MODEL", "ENDPOINT", "AGE"}; !slices.Equal(got, want) {
			t.Errorf("header %q, want %q", got, want)
		}
		if got, want := row(t, r.out, "runs", 0)[:6], []string{"runs", "Running", "supervised", "ws", "claude-sonnet-4-5", runs.Status.CalibandEndpoint}; !slices.Equal(got, want) {
			t.Errorf("row of runs %q, want %q", got, want)
		}
		// An unadmitted task has no posture, model or endpoint: four cells.
		if got := row(t, r.out, "stuck", 0); len(got) != 4 || got[1] != "Failed" || got[2] != "wsb" {
			t.Errorf("row of stuck %q, want stuck Failed wsb <age>", got)
		}
	})

	t.Run("get -A adds the namespace", func(t *testing.T) {
		r := plugin("get", "-A")
		if r.code != app.ExitOK || !strings.HasPrefix(r.out, "NAMESPACE") {
			t.Fatal(r)
		}
		if got := row(t, r.out, "runs", 1); got[0] != ns || got[2] != "Running" {
			t.Errorf("row of runs %q, want namespace %s, Running", got, ns)
		}
	})

	t.Run("get -o yaml prints the list as the apiserver has it", func(t *testing.T) {
		r := plugin("get", "-n", ns, "-o", "yaml")
		if r.code != app.ExitOK {
			t.Fatal(r)
		}
		var list calibanv1alpha1.CalibanTaskList
		if err := yaml.UnmarshalStrict([]byte(r.out), &list); err != nil {
			t.Fatalf("%v\n%s", err, r.out)
		}
		var names []string
		for _, item := range list.Items {
			names = append(names, item.Name)
			if item.Kind != "CalibanTask" || len(item.ManagedFields) != 0 {
				t.Errorf("item %s: kind %q, %d managedFields entries", item.Name, item.Kind, len(item.ManagedFields))
			}
		}
		slices.Sort(names)
		if list.Kind != "CalibanTaskList" || !slices.Equal(names, []string{"runs", "stuck"}) {
			t.Errorf("kind %q, items %q", list.Kind, names)
		}
	})

	t.Run("why of the blocked task names the missing Secret and exits 1", func(t *testing.T) {
		r := plugin("why", "stuck", "-n", ns)
		want := "waiting for: Workspace wsb is Failed: " + missingSecret + "\n"
		if r.code != app.ExitWaiting || r.out != want {
			t.Errorf("got %s\nwant exit %d and %q", r, app.ExitWaiting, want)
		}
	})

	t.Run("describe of the blocked task shows no children, its Event and the same line", func(t *testing.T) {
		var r result
		framework.Eventually(t, settle, func() error {
			r = plugin("describe", "stuck", "-n", ns)
			if r.code != app.ExitOK {
				return fmt.Errorf("%s", r)
			}
			if !strings.Contains(r.out, "WorkspaceUnresolved   CalibanTask/stuck") {
				return fmt.Errorf("no WorkspaceUnresolved Event yet:\n%s", r.out)
			}
			return nil
		})
		for _, want := range []string{
			"Phase:       Failed",
			"Workspace:      wsb (Failed: " + missingSecret + ")",
			"Sandbox          stuck-sbx      not found",
			"ServiceAccount   stuck-sa       not found",
			"Pod stuck-sbx: not found",
			"waiting for: Workspace wsb is Failed: " + missingSecret + "\n",
		} {
			if !strings.Contains(r.out, want) {
				t.Errorf("describe does not say %q:\n%s", want, r.out)
			}
		}
		t.Logf("kubectl caliban describe stuck:\n%s", r.out)
	})

	t.Run("why of the running task exits 0", func(t *testing.T) {
		if r := plugin("why", "runs", "-n", ns); r.code != app.ExitOK || r.out != "waiting for: nothing (Running)\n" {
			t.Error(r)
		}
	})

	t.Run("describe of the running task shows its children and the stand-in's missing pod", func(t *testing.T) {
		r := plugin("describe", "runs", "-n", ns)
		for _, want := range []string{"Model:          claude-sonnet-4-5", "ServiceAccount   runs-sa       exists", "NetworkPolicy    runs-netpol   exists",
			"operatingMode Running, Ready=True", "Pod runs-sbx: not found", "waiting for: nothing (Running)"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("describe does not say %q:\n%s", want, r.out)
			}
		}
	})

	t.Run("a task that does not exist is a usage error", func(t *testing.T) {
		r := plugin("why", "nope", "-n", ns)
		if r.code != app.ExitUsage || !strings.Contains(r.errOut, `calibantasks.caliban.caliban-ai.dev "nope" not found`) {
			t.Error(r)
		}
	})

	t.Run("logs without a pod says there is none yet", func(t *testing.T) {
		r := plugin("logs", "runs", "-n", ns)
		if r.code != app.ExitWaiting || !strings.Contains(r.errOut, "no pod yet for CalibanTask "+ns+"/runs (pod runs-sbx not found; phase Running)") {
			t.Error(r)
		}
	})

	t.Run("suspend parks the task and resume runs it again", func(t *testing.T) {
		if r := plugin("suspend", "runs", "-n", ns); r.code != app.ExitOK || r.out != "calibantask.caliban.caliban-ai.dev/runs suspended\n" {
			t.Fatal(r)
		}
		suspended := framework.WaitForPhase(t, cluster.Caliban, ns, "runs", calibanv1alpha1.TaskSuspended, builders.ReasonSuspended, settle)
		if !suspended.Spec.Suspend {
			t.Errorf("spec.suspend is false after suspend")
		}
		owner := ""
		for _, mf := range suspended.ManagedFields {
			if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:suspend"`) {
				owner = mf.Manager + "/" + string(mf.Operation)
			}
		}
		if owner != app.FieldManager+"/Apply" {
			t.Errorf("spec.suspend is owned by %q, want %s/Apply", owner, app.FieldManager)
		}
		if r := plugin("why", "runs", "-n", ns); r.code != app.ExitWaiting || !strings.Contains(r.out, "spec.suspend to be false") {
			t.Error(r)
		}
		if r := plugin("resume", "runs", "-n", ns); r.code != app.ExitOK || r.out != "calibantask.caliban.caliban-ai.dev/runs resumed\n" {
			t.Fatal(r)
		}
		if resumed := framework.WaitForPhase(t, cluster.Caliban, ns, "runs", calibanv1alpha1.TaskRunning, builders.ReasonRunning, settle); resumed.Spec.Suspend {
			t.Errorf("spec.suspend is still true after resume")
		}
		if r := plugin("why", "runs", "-n", ns); r.code != app.ExitOK {
			t.Error(r)
		}
	})

	t.Run("suspend of a task that does not exist creates nothing", func(t *testing.T) {
		if r := plugin("suspend", "ghost", "-n", ns); r.code != app.ExitUsage {
			t.Error(r)
		}
		if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "ghost", metav1.GetOptions{}); err == nil {
			t.Errorf("suspend created task ghost")
		}
	})
}
