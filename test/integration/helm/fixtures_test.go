package helm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// The fixtures of test/integration/operator, cut down to what this package
// needs.

const (
	providerSecret = "anthropic-key"
	providerKey    = "api-key"
)

func createProviderSecret(t *testing.T, ns string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: providerSecret}, StringData: map[string]string{providerKey: "sk-ant-test"}}
	if _, err := cluster.Kube.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatal(err)
	}
}

func createWorkspace(t *testing.T, ns, name string) {
	t.Helper()
	ws := &calibanv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: calibanv1alpha1.WorkspaceSpec{
		DisplayName: "Helm integration workspace",
		Sources: []calibanv1alpha1.Source{{
			Name: "caliban", Repo: "https://github.com/caliban-ai/caliban.git", Ref: "main", Path: "/work/caliban",
		}},
		Providers: []calibanv1alpha1.Provider{{
			Name: "planner", Kind: "anthropic", Model: "claude-sonnet-4-5",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: providerSecret, Key: providerKey},
		}},
	}}
	if _, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Create(context.Background(), ws, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatal(err)
	}
}

func createTask(t *testing.T, ns, name, ws string) {
	t.Helper()
	task := &calibanv1alpha1.CalibanTask{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: calibanv1alpha1.CalibanTaskSpec{
		WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: ws},
		Task:         calibanv1alpha1.TaskDefinition{Prompt: "Summarise the repository layout in README form."},
	}}
	if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Create(context.Background(), task, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatal(err)
	}
}

func waitForWorkspaceReady(t *testing.T, ns, name string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, func() error {
		ws, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ws.Status.Phase != calibanv1alpha1.WorkspaceReady {
			return fmt.Errorf("Workspace %s: phase %q (%s), want Ready", name, ws.Status.Phase, ws.Status.Message)
		}
		return nil
	})
}

func waitForTaskRunning(t *testing.T, ns, name string) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, func() error {
		task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if task.Status.Phase != calibanv1alpha1.TaskRunning {
			return fmt.Errorf("CalibanTask %s: phase %q, want Running", name, task.Status.Phase)
		}
		return nil
	})
}
