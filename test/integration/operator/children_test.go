// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

func TestTheOperatorRepairsChildrenOthersDeleteOrChange(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "repair", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")
	createTask(t, ns, "repaired", "demo")
	task := waitForTask(t, ns, "repaired", settleTimeout, isRunning)
	sa, np, sbx := builders.ServiceAccountName(task.Name), builders.NetworkPolicyName(task.Name), task.Status.SandboxRef.Name

	// These run in order: each leaves the task Running for the next.
	t.Run("a deleted ServiceAccount comes back", func(t *testing.T) {
		before, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cluster.Kube.CoreV1().ServiceAccounts(ns).Delete(ctx, sa, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settleTimeout, func() error {
			after, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if after.UID == before.UID {
				return fmt.Errorf("ServiceAccount %s not deleted yet", sa)
			}
			if after.AutomountServiceAccountToken == nil || *after.AutomountServiceAccountToken {
				return fmt.Errorf("re-created ServiceAccount automounts its token: %v", after.AutomountServiceAccountToken)
			}
			if !metav1.IsControlledBy(after, task) {
				return fmt.Errorf("re-created ServiceAccount is not controlled by the task: %+v", after.OwnerReferences)
			}
			return nil
		})
	})

	t.Run("a NetworkPolicy someone deletes or opens up is put back", func(t *testing.T) {
		before, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, np, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Someone opens ingress to every port from anywhere.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, np, metav1.GetOptions{})
			if err != nil {
				return err
			}
			live.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
			_, err = cluster.Kube.NetworkingV1().NetworkPolicies(ns).Update(ctx, live, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		restored := func() error {
			after, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, np, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if diff := cmp.Diff(before.Spec, after.Spec); diff != "" {
				return fmt.Errorf("NetworkPolicy spec not restored (-want +got):\n%s", diff)
			}
			return nil
		}
		framework.Eventually(t, settleTimeout, restored)

		if err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Delete(ctx, np, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settleTimeout, func() error {
			after, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, np, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if after.UID == before.UID {
				return fmt.Errorf("NetworkPolicy %s not deleted yet", np)
			}
			return restored()
		})
	})

	t.Run("a Sandbox someone changes is put back", func(t *testing.T) {
		before := getSandbox(t, ns, sbx)
		body, err := json.Marshal(map[string]any{"spec": map[string]any{"service": false}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Patch(ctx, sbx, types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settleTimeout, func() error {
			after := getSandbox(t, ns, sbx)
			if diff := cmp.Diff(before.Object["spec"], after.Object["spec"]); diff != "" {
				return fmt.Errorf("Sandbox spec not restored (-want +got):\n%s", diff)
			}
			return nil
		})
		waitForTask(t, ns, "repaired", settleTimeout, isRunning)
	})

	t.Run("a deleted Sandbox comes back and the task runs in it", func(t *testing.T) {
		before := getSandbox(t, ns, sbx)
		if err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Delete(ctx, sbx, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settleTimeout, func() error {
			after := getSandbox(t, ns, sbx)
			if after == nil || after.GetUID() == before.GetUID() {
				return fmt.Errorf("Sandbox %s not re-created yet", sbx)
			}
			if !metav1.IsControlledBy(after, task) {
				return fmt.Errorf("re-created Sandbox is not controlled by the task: %+v", after.GetOwnerReferences())
			}
			return nil
		})
		waitForTask(t, ns, "repaired", settleTimeout, isRunning)
		if env := calibandEnv(t, getSandbox(t, ns, sbx)); !cmp.Equal(env, calibandEnv(t, before)) {
			t.Errorf("re-created Sandbox env %v, want %v", env, calibandEnv(t, before))
		}
	})

	// Nothing of this is lost on the ServiceAccount either.
	got, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[builders.LabelTask] != builders.TaskLabelValue(task.Name) {
		t.Errorf("ServiceAccount labels %v lack the task label", got.Labels)
	}
}
