// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// controllersOf reads the ServiceAccount, NetworkPolicy and Sandbox a task
// got, and says who controls each.
func controllersOf(t testing.TB, ns string, task *calibanv1alpha1.CalibanTask) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	sa, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, builders.ServiceAccountName(task.Name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, builders.NetworkPolicyName(task.Name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sbx := getSandbox(t, ns, builders.SandboxName(task.Name))
	if sbx == nil {
		t.Fatalf("no Sandbox %s", builders.SandboxName(task.Name))
	}
	for kind, obj := range map[string]metav1.Object{"ServiceAccount": sa, "NetworkPolicy": np, "Sandbox": sbx} {
		if ref := metav1.GetControllerOf(obj); ref != nil {
			out[kind] = ref.UID
		} else {
			out[kind] = ""
		}
	}
	return out
}

// A task whose child names are hashed (a name that starts with a digit, as
// most UUIDs do) has children whose names another task can have plainly:
// "<prefix>-<hash>" gets "<prefix>-<hash>-sbx" and so on. That task fails
// with ChildNameTaken and a Warning Event; the first task keeps its
// children, controller and all, and keeps Running; deleting the second
// takes nothing of the first's with it.
func TestATaskCannotTakeAnotherTasksChildren(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "names", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "ws")

	victimName := "7c1e5a9d-2f4b-4e8a-9b3c-1d2e3f4a5b6c"
	createTask(t, ns, victimName, "ws")
	victim := waitForTask(t, ns, victimName, settleTimeout, isRunning)
	before := controllersOf(t, ns, victim)
	for kind, uid := range before {
		if uid != victim.UID {
			t.Fatalf("%s controlled by %q before anything else ran, want the task %s", kind, uid, victim.UID)
		}
	}

	// The name whose plain child names are the victim's hashed ones.
	attackerName := strings.TrimSuffix(builders.SandboxName(victimName), "-sbx")
	for _, pair := range [][2]string{
		{builders.SandboxName(attackerName), builders.SandboxName(victimName)},
		{builders.ServiceAccountName(attackerName), builders.ServiceAccountName(victimName)},
		{builders.NetworkPolicyName(attackerName), builders.NetworkPolicyName(victimName)},
	} {
		if pair[0] != pair[1] {
			t.Fatalf("the names do not collide (%s, %s): the test no longer shows the hole", pair[0], pair[1])
		}
	}
	createTask(t, ns, attackerName, "ws")
	waitForTask(t, ns, attackerName, settleTimeout, failedNaming(builders.ReasonChildNameTaken,
		builders.ServiceAccountName(victimName), "CalibanTask '"+victimName+"'"))
	waitForEvent(t, ns, attackerName, corev1.EventTypeWarning, builders.ReasonChildNameTaken, noteContains(victimName))

	// Long enough for a resync or a retry to have taken them.
	consistently(t, 3*time.Second, func() error {
		if diff := cmp.Diff(before, controllersOf(t, ns, victim)); diff != "" {
			return fmt.Errorf("the victim's children changed controller (-before +now):\n%s", diff)
		}
		return isRunning(getTask(t, ns, victimName))
	})

	if err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Delete(ctx, attackerName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settleTimeout, func() error {
		_, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, attackerName, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("task %s not gone yet", attackerName)
		}
		return nil
	})
	consistently(t, 2*time.Second, func() error {
		if diff := cmp.Diff(before, controllersOf(t, ns, victim)); diff != "" {
			return fmt.Errorf("the victim's children changed after the other task went (-before +now):\n%s", diff)
		}
		return isRunning(getTask(t, ns, victimName))
	})
}

// An object of a child's name that the operator did not make (an admin's
// NetworkPolicy and ServiceAccount, unlabelled, so no cache of the
// operator's holds them) is left exactly as it was: the task that wanted
// the name fails with ChildNameTaken, and no Sandbox is made for it.
func TestAnObjectTheOperatorDidNotMakeIsLeftAlone(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "foreign", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "ws")

	policy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "payments-db-netpol", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "payments-db"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	policy, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ci-sa", Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	createTask(t, ns, "payments-db", "ws")
	createTask(t, ns, "ci", "ws")
	waitForTask(t, ns, "payments-db", settleTimeout, failedNaming(builders.ReasonChildNameTaken,
		"NetworkPolicy 'payments-db-netpol'", "not controlled by anything"))
	waitForTask(t, ns, "ci", settleTimeout, failedNaming(builders.ReasonChildNameTaken, "ServiceAccount 'ci-sa'"))

	consistently(t, 3*time.Second, func() error {
		np, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, policy.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if np.ResourceVersion != policy.ResourceVersion {
			return fmt.Errorf("the admin's NetworkPolicy was written: owners %+v, selector %v", np.OwnerReferences, np.Spec.PodSelector)
		}
		got, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, sa.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.ResourceVersion != sa.ResourceVersion {
			return fmt.Errorf("the admin's ServiceAccount was written: owners %+v, automount %v", got.OwnerReferences, got.AutomountServiceAccountToken)
		}
		for _, name := range []string{builders.SandboxName("payments-db"), builders.SandboxName("ci")} {
			if _, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				return fmt.Errorf("Sandbox %s made for a task whose name is taken", name)
			}
		}
		return nil
	})

	// The holder goes: the task gets its own, and runs.
	if err := cluster.Kube.CoreV1().ServiceAccounts(ns).Delete(ctx, sa.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForTask(t, ns, "ci", 2*settleTimeout, isRunning)
}
