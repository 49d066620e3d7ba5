// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package undeploy_test runs `make deploy` against a cluster, then `make
// undeploy`'s script against it holding a task that waits for its drain,
// with nobody left to drain it. It has a cluster of its own: uninstalling
// deletes the CRDs.
package undeploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) {
	framework.MainWith(m, &cluster, func() (func(), error) { return func() {}, nil })
}

// TestUndeployCannotHangOnATaskWaitingForItsDrain: a task with
// lifecycle.onDelete checkpoint carries the drain finalizer; once the
// operator is gone nothing would ever remove it, and deleting the CRD would
// wait for the task forever. The script must still finish, and remove
// everything.
func TestUndeployCannotHangOnATaskWaitingForItsDrain(t *testing.T) {
	ctx := context.Background()
	root := cluster.Root
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl is part of the test bed (make tools): %v", err)
	}
	objs, err := framework.Kustomize(root, "manifests")
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Apply(ctx, "", objs...); err != nil {
		t.Fatal(err)
	}

	bin, err := framework.BuildOperator(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	op, err := framework.RunOperator(t, framework.OperatorOptions{
		Name: "op", Binary: bin,
		Env:         []string{"KUBECONFIG=" + cluster.Kubeconfig, "CALIBAN_LEADER_ELECTION=false"},
		StopTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}

	ns := cluster.Namespace(t, nil)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key"}, StringData: map[string]string{"api-key": "sk-test"}}
	if _, err := cluster.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ws := &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "ws"},
		Spec: calibanv1alpha1.WorkspaceSpec{DisplayName: "Undeploy", Providers: []calibanv1alpha1.Provider{{
			Name: "p", Kind: "anthropic", Model: "claude-sonnet-4-5",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "key", Key: "api-key"},
		}}},
	}
	if _, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Create(ctx, ws, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tasks := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns)
	for name, onDelete := range map[string]string{"drains": calibanv1alpha1.OnDeleteCheckpoint, "goes": ""} {
		task := &calibanv1alpha1.CalibanTask{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: calibanv1alpha1.CalibanTaskSpec{
				WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
				Task:         calibanv1alpha1.TaskDefinition{Prompt: "work"},
				Lifecycle:    &calibanv1alpha1.LifecycleSpec{OnDelete: onDelete},
			},
		}
		if _, err := tasks.Create(ctx, task, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The premise: the task carries the finalizer, and nobody will remove it.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		task, err := tasks.Get(ctx, "drains", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return task.Status.Phase == calibanv1alpha1.TaskRunning && len(task.Finalizers) == 1 && task.Finalizers[0] == calibanv1alpha1.FinalizerDrain, nil
	}); err != nil {
		t.Fatalf("task drains never ran with the drain finalizer: %v", err)
	}
	if err := op.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}

	// A hang is what this test is about: bound it well above the wait.
	runCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(runCtx, filepath.Join(root, "hack", "undeploy.sh"))
	cmd.Dir = root
	// A hung script is stopped with its kubectl, which would otherwise
	// keep the output pipe, and this test, waiting.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig, "UNDEPLOY_DRAIN_WAIT=3",
		"PATH="+filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if runCtx.Err() != nil {
		t.Fatalf("hack/undeploy.sh still ran after 3 minutes; its output:\n%s", out)
	}
	if err != nil {
		t.Fatalf("hack/undeploy.sh: %v; its output:\n%s", err, out)
	}
	if want := "tasks still draining after 3s; removing their caliban.caliban-ai.dev/drain finalizer"; !strings.Contains(string(out), want) {
		t.Errorf("the output does not say %q:\n%s", want, out)
	}

	for _, crd := range []string{"calibantasks.caliban.caliban-ai.dev", "workspaces.caliban.caliban-ai.dev"} {
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := cluster.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Errorf("CRD %s is still there after undeploy", crd)
		}
	}
	if _, err := cluster.Kube.AppsV1().Deployments("caliban-system").Get(ctx, "caliban-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the operator's Deployment after undeploy: %v, want NotFound", err)
	}
}
