package monitoring_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// The fixtures of test/integration/operator, cut down to what this package
// needs.

const (
	providerSecret = "anthropic-key"
	providerKey    = "api-key"
)

var sandboxes = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

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
		DisplayName: "Monitoring integration workspace",
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

// freezeSandboxes makes the apiserver refuse every Sandbox write in ns,
// with an admission policy, until the returned function is called (the
// test's cleanup calls it too). It returns once the policy is in force.
func freezeSandboxes(t *testing.T, ns string) (unfreeze func()) {
	t.Helper()
	ctx := context.Background()
	const message = "sandboxes are frozen in this namespace"
	policy := "freeze-sandboxes-" + ns
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [agents.x-k8s.io], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [sandboxes]}
  validations:
  - {expression: "false", message: %[2]q}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: %[3]s}
`, policy, message, ns), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	if err := cluster.Apply(ctx, "", objs...); err != nil {
		t.Fatal(err)
	}
	unfreeze = func() {
		_ = cluster.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, policy, metav1.DeleteOptions{})
	}
	t.Cleanup(func() {
		unfreeze()
		_ = cluster.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, policy, metav1.DeleteOptions{})
	})
	// The policy takes effect once the apiserver has loaded it: probe with
	// a dry run.
	framework.Eventually(t, 30*time.Second, func() error {
		probe := &unstructured.Unstructured{}
		probe.SetAPIVersion(sandboxes.GroupVersion().String())
		probe.SetKind("Sandbox")
		probe.SetName("probe")
		probe.Object["spec"] = map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "image": "i"}},
		}}}
		_, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), message) {
			return fmt.Errorf("the policy is not in force yet (dry run: %v)", err)
		}
		return nil
	})
	return unfreeze
}
