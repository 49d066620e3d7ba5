// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// The demo Workspace's provider credential.
const (
	DemoProviderSecret = "anthropic-key"
	DemoProviderKey    = "api-key"
)

var sandboxesResource = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

// CreateDemoWorkspace creates, in ns, the provider Secret (unless it is
// there) and a Workspace named name that the operator validates Ready: one
// public source, one anthropic provider.
func (c *Cluster) CreateDemoWorkspace(t testing.TB, ns, name, displayName string) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DemoProviderSecret}, StringData: map[string]string{DemoProviderKey: "sk-ant-test"}}
	if _, err := c.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ws := &calibanv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: calibanv1alpha1.WorkspaceSpec{
		DisplayName: displayName,
		Sources: []calibanv1alpha1.Source{{
			Name: "caliban", Repo: "https://github.com/caliban-ai/caliban.git", Ref: "main", Path: "/work/caliban",
		}},
		Providers: []calibanv1alpha1.Provider{{
			Name: "planner", Kind: "anthropic", Model: "claude-sonnet-4-5",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: DemoProviderSecret, Key: DemoProviderKey},
		}},
	}}
	if _, err := c.Caliban.CalibanV1alpha1().Workspaces(ns).Create(ctx, ws, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
		t.Fatal(err)
	}
}

// CreateDemoTask creates a supervised task of Workspace ws.
func (c *Cluster) CreateDemoTask(t testing.TB, ns, name, ws string) {
	t.Helper()
	task := &calibanv1alpha1.CalibanTask{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: calibanv1alpha1.CalibanTaskSpec{
		WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: ws},
		Task:         calibanv1alpha1.TaskDefinition{Prompt: "Summarise the repository layout in README form."},
	}}
	// Right after the CRDs and the admission policies are installed (a
	// chart install), the apiserver's policy admission may not know the
	// kind yet and refuses the create: "There can be a delay between when
	// CustomResourceDefinitions are created and when they are available".
	// Nothing was created then; try again.
	Eventually(t, 30*time.Second, func() error {
		_, err := c.Caliban.CalibanV1alpha1().CalibanTasks(ns).Create(context.Background(), task, metav1.CreateOptions{FieldManager: FieldManager})
		if err != nil && strings.Contains(err.Error(), "There can be a delay between when CustomResourceDefinitions are created") {
			return err
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	})
}

// WaitForWorkspaceReady waits up to 30 s for the Workspace to be Ready.
func (c *Cluster) WaitForWorkspaceReady(t testing.TB, ns, name string) {
	t.Helper()
	Eventually(t, 30*time.Second, func() error {
		ws, err := c.Caliban.CalibanV1alpha1().Workspaces(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ws.Status.Phase != calibanv1alpha1.WorkspaceReady {
			return fmt.Errorf("Workspace %s: phase %q (%s), want Ready", name, ws.Status.Phase, ws.Status.Message)
		}
		return nil
	})
}

// WaitForTaskRunning waits up to timeout for the task to be Running.
func (c *Cluster) WaitForTaskRunning(t testing.TB, ns, name string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() error {
		task, err := c.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if task.Status.Phase != calibanv1alpha1.TaskRunning {
			return fmt.Errorf("CalibanTask %s: phase %q, want Running", name, task.Status.Phase)
		}
		return nil
	})
}

// FrozenSandboxesMessage is the refusal FreezeSandboxes makes the
// apiserver answer.
const FrozenSandboxesMessage = "sandboxes are frozen in this namespace"

// FreezeSandboxes makes the apiserver refuse every Sandbox write in ns, as
// an API error would, with an admission policy, until unfreeze is called
// (the test's cleanup calls it too). It returns once the policy is in
// force, waiting at most timeout.
func (c *Cluster) FreezeSandboxes(t testing.TB, ns string, timeout time.Duration) (unfreeze func()) {
	t.Helper()
	ctx := context.Background()
	policy := "freeze-sandboxes-" + ns
	objs, err := decodeYAML(fmt.Sprintf(`
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
`, policy, FrozenSandboxesMessage, ns))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, "", objs...); err != nil {
		t.Fatal(err)
	}
	unfreeze = func() {
		_ = c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, policy, metav1.DeleteOptions{})
	}
	t.Cleanup(func() {
		unfreeze()
		_ = c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, policy, metav1.DeleteOptions{})
	})
	// The policy takes effect once the apiserver has loaded it: probe with
	// a dry run.
	Eventually(t, timeout, func() error {
		probe := &unstructured.Unstructured{}
		probe.SetAPIVersion(sandboxesResource.GroupVersion().String())
		probe.SetKind("Sandbox")
		probe.SetName("probe")
		probe.Object["spec"] = map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "image": "i"}},
		}}}
		_, err := c.Dynamic.Resource(sandboxesResource).Namespace(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), FrozenSandboxesMessage) {
			return fmt.Errorf("the policy is not in force yet (dry run: %v)", err)
		}
		return nil
	})
	return unfreeze
}
