// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package agentsandbox_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/app"
	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// kubectl caliban on pods agent-sandbox really made: describe and why of a
// Running task (its pod and containers shown), of a task whose pod no
// node can take (a RuntimeClass whose nodeSelector matches no kwok node:
// the scheduler's message is the line), and logs on a kwok pod, which has
// no kubelet to serve a log.
func TestThePluginOnAgentSandboxPods(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	startOperator(t, "plugin", ns)
	namespaceWithWorkspace(t, ns)

	// RuntimeClass admission copies its scheduling.nodeSelector into the
	// pod; no kwok node carries the label.
	rc := "nowhere-" + ns
	if _, err := cluster.Kube.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: rc},
		Handler:    "nowhere",
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"caliban.test/nowhere": "true"}},
	}, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Kube.NodeV1().RuntimeClasses().Delete(ctx, rc, metav1.DeleteOptions{}) })

	createTask(t, ns, "runs")
	createTask(t, ns, "unplaced", func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: rc}
	})
	framework.WaitForPhase(t, cluster.Caliban, ns, "runs", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	waitForPod(t, ns, "runs")

	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := app.Run(ctx, append(args, "-n", ns, "--kubeconfig", cluster.Kubeconfig),
			genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, app.BuildInfo{})
		return code, out.String(), errOut.String()
	}

	t.Run("a Running task shows its pod and caliband running and ready", func(t *testing.T) {
		code, out, errOut := run("describe", "runs")
		if code != app.ExitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{
			"Pod " + builders.SandboxName("runs") + ": Running on node ",
			"Ready=True",
			"    caliband   Running, ready",
			"waiting for: nothing (Running)",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("describe does not say %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "Init containers:") {
			t.Errorf("a task whose Workspace has no sources shows init containers:\n%s", out)
		}
		if code, out, _ := run("why", "runs"); code != app.ExitOK || out != "waiting for: nothing (Running)\n" {
			t.Errorf("why: exit %d, %q", code, out)
		}
	})

	t.Run("a task whose pod no node fits quotes the scheduler and exits 1", func(t *testing.T) {
		var code int
		var out string
		framework.Eventually(t, startTimeout, func() error {
			code, out, _ = run("why", "unplaced")
			if !strings.HasPrefix(out, "waiting for: agent-sandbox: pod Pending (0/") {
				return fmt.Errorf("why says %q (exit %d)", out, code)
			}
			return nil
		})
		if code != app.ExitWaiting || !strings.Contains(out, "node affinity/selector") {
			t.Errorf("why: exit %d, %q; want exit %d naming the node selector", code, out, app.ExitWaiting)
		}
		_, describe, _ := run("describe", "unplaced")
		if !strings.Contains(describe, "Pending, not scheduled (Unschedulable: 0/") {
			t.Errorf("describe does not show the unscheduled pod:\n%s", describe)
		}
		t.Logf("kubectl caliban describe unplaced:\n%s", describe)
	})

	// kwok answers a log request for its pods with "no logs found for
	// container ..."; the plugin passes that on, naming the container.
	t.Run("logs of a kwok pod ends with a clear message", func(t *testing.T) {
		code, out, errOut := run("logs", "runs")
		if code != app.ExitError || !strings.HasPrefix(errOut, "error: reading the log of container caliband in pod "+ns+"/"+builders.SandboxName("runs")+": ") {
			t.Errorf("logs: exit %d, stdout %q, stderr %q; want exit %d naming the container", code, out, errOut, app.ExitError)
		}
		code, _, errOut = run("logs", "runs", "--clone")
		if code != app.ExitWaiting || !strings.Contains(errOut, "has no clone-workspace init container") {
			t.Errorf("logs --clone of a task without sources: exit %d, %q", code, errOut)
		}
		code, _, errOut = run("logs", "unplaced")
		if code != app.ExitWaiting || !strings.Contains(errOut, "container caliband in pod "+builders.SandboxName("unplaced")+" has not started yet") {
			t.Errorf("logs of an unscheduled pod: exit %d, %q", code, errOut)
		}
	})
}
