// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package agentsandbox_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// startTimeout bounds a real start: claim bound, pod scheduled onto a kwok
// node and Ready, then the task Running.
const startTimeout = 2 * time.Minute

// namespaceWithWorkspace makes a namespace with a provider Secret and a
// Workspace "ws" with no sources (a kwok pod runs no clone), and waits for
// the operator to validate it.
func namespaceWithWorkspace(t *testing.T, ns string) {
	t.Helper()
	if _, err := cluster.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "provider"},
		StringData: map[string]string{"api-key": "sk-test"},
	}, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Create(ctx, &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "ws"},
		Spec: calibanv1alpha1.WorkspaceSpec{DisplayName: "Agent-sandbox workspace", Providers: []calibanv1alpha1.Provider{{
			Name: "planner", Kind: "anthropic", Model: "claude-sonnet-4-5",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "provider", Key: "api-key"},
		}}},
	}, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		ws, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, "ws", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ws.Status.Phase != calibanv1alpha1.WorkspaceReady {
			return fmt.Errorf("workspace is %q: %s", ws.Status.Phase, ws.Status.Message)
		}
		return nil
	})
}

func createTask(t *testing.T, ns, name string, mutate ...func(*calibanv1alpha1.CalibanTaskSpec)) {
	t.Helper()
	spec := calibanv1alpha1.CalibanTaskSpec{
		WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
		Task:         calibanv1alpha1.TaskDefinition{Prompt: "Tidy the README."},
	}
	for _, m := range mutate {
		m(&spec)
	}
	if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
	}, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatalf("creating CalibanTask %s/%s: %v", ns, name, err)
	}
}

func getTask(t *testing.T, ns, name string) *calibanv1alpha1.CalibanTask {
	t.Helper()
	task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func suspend(on bool) func(*calibanv1alpha1.CalibanTaskSpec) {
	return func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.Suspend = on }
}

// pod is the task's agent pod as agent-sandbox made it (named after the
// Sandbox), nil when there is none.
func pod(t *testing.T, ns, task string) *corev1.Pod {
	t.Helper()
	p, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, builders.SandboxName(task), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitForPod waits for the task's pod to be Running and Ready, owned by its
// Sandbox, and returns it.
func waitForPod(t *testing.T, ns, task string) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	framework.Eventually(t, startTimeout, func() error {
		if p = pod(t, ns, task); p == nil {
			return fmt.Errorf("no pod for task %s", task)
		}
		owner := metav1.GetControllerOf(p)
		if owner == nil || owner.Kind != "Sandbox" || owner.Name != builders.SandboxName(task) {
			return fmt.Errorf("pod %s is controlled by %+v, want its Sandbox", p.Name, owner)
		}
		if p.Status.Phase != corev1.PodRunning || !podReady(p) {
			return fmt.Errorf("pod %s is %s, ready %v", p.Name, p.Status.Phase, podReady(p))
		}
		return nil
	})
	return p
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitForNoPod waits until agent-sandbox has deleted the task's pod (kwok
// plays the kubelet that lets it go).
func waitForNoPod(t *testing.T, ns, task string) {
	t.Helper()
	framework.Eventually(t, startTimeout, func() error {
		if p := pod(t, ns, task); p != nil {
			return fmt.Errorf("pod %s still exists (%s, deleting: %v)", p.Name, p.Status.Phase, p.DeletionTimestamp != nil)
		}
		return nil
	})
}

// claimName is the workspace claim agent-sandbox makes for the task.
func claimName(task string) string {
	return builders.VolumeWorkspace + "-" + builders.SandboxName(task)
}

func claim(t *testing.T, ns, task string) *corev1.PersistentVolumeClaim {
	t.Helper()
	c, err := cluster.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claimName(task), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the workspace claim of task %s: %v", task, err)
	}
	return c
}

// prospero writes its conditions through its own field manager, as in
// production.
func prospero(t *testing.T, ns, name string, condition map[string]any) {
	t.Helper()
	condition["lastTransitionTime"] = time.Now().UTC().Format(time.RFC3339)
	if err := cluster.ProsperoApplies(ctx, ns, name, condition); err != nil {
		t.Fatal(err)
	}
}

// gone waits until get reports NotFound.
func gone(t *testing.T, what string, get func() error) {
	t.Helper()
	framework.Eventually(t, startTimeout, func() error {
		err := get()
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s still exists", what)
	})
}

// calibandImage is the image of the pod's caliband container.
func calibandImage(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == builders.ContainerCaliband {
			return c.Image
		}
	}
	return ""
}
