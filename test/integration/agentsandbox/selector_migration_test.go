// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package agentsandbox_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// A Running task whose Sandbox and NetworkPolicy an operator version
// before the task-UID label made (its pod template without the label, its
// policy applied selecting the pod by the name labels, both of another
// rendering): the operator started over it has agent-sandbox put the
// label on the running pod, and then moves the policy to select the pod
// by the task's UID, its rules as they were. The pod is the same pod
// throughout and the task stays Running.
func TestAPolicyMadeBeforeTheUIDLabelMovesToItWithoutARestart(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	first := startOperator(t, "made", ns)
	namespaceWithWorkspace(t, ns)
	const name = "legacy"
	createTask(t, ns, name)
	framework.WaitForPhase(t, cluster.Caliban, ns, name, calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	running := waitForPod(t, ns, name)
	task := getTask(t, ns, name)
	if err := first.Stop(30 * time.Second); err != nil {
		t.Fatalf("stopping the first operator: %v", err)
	}

	// What the earlier version left. Its pod template had no UID label,
	// which agent-sandbox then takes off the pod too.
	const earlier = "an-earlier-version"
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"podTemplate":{"metadata":{"labels":{%q:null}}}}}`,
		builders.AnnotationRenderedBy, earlier, builders.LabelTaskUID)
	if _, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Patch(ctx, builders.SandboxName(name), types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, startTimeout, func() error {
		if p := pod(t, ns, name); p == nil || p.Labels[builders.LabelTaskUID] != "" {
			return fmt.Errorf("the pod %v still carries %s", p != nil, builders.LabelTaskUID)
		}
		return nil
	})
	policies := cluster.Kube.NetworkingV1().NetworkPolicies(ns)
	live, err := policies.Get(ctx, builders.NetworkPolicyName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := builders.TaskLabels(task)
	delete(byName, builders.LabelTaskUID)
	spec := live.Spec.DeepCopy()
	spec.PodSelector = metav1.LabelSelector{MatchLabels: byName}
	body, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	specAC := &networkingv1ac.NetworkPolicySpecApplyConfiguration{}
	if err := json.Unmarshal(body, specAC); err != nil {
		t.Fatal(err)
	}
	owner := live.OwnerReferences[0]
	old := networkingv1ac.NetworkPolicy(live.Name, ns).
		WithLabels(byName).
		WithAnnotations(map[string]string{builders.AnnotationRenderedBy: earlier, builders.AnnotationAppliedHash: "earlier"}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(owner.APIVersion).WithKind(owner.Kind).WithName(owner.Name).
			WithUID(owner.UID).WithController(true).WithBlockOwnerDeletion(true)).
		WithSpec(specAC)
	// Made by apply, as that version made it.
	if err := policies.Delete(ctx, live.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := policies.Apply(ctx, old, metav1.ApplyOptions{FieldManager: builders.FieldManager, Force: true}); err != nil {
		t.Fatal(err)
	}

	startOperator(t, "moves", ns)
	framework.Eventually(t, 2*time.Minute, func() error {
		np, err := policies.Get(ctx, live.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if diff := cmp.Diff(map[string]string{builders.LabelTaskUID: string(task.UID)}, np.Spec.PodSelector.MatchLabels); diff != "" {
			return fmt.Errorf("the policy's pod selector (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(live.Spec.Ingress, np.Spec.Ingress); diff != "" {
			t.Errorf("the policy's ingress changed (-was +now):\n%s", diff)
		}
		if diff := cmp.Diff(live.Spec.Egress, np.Spec.Egress); diff != "" {
			t.Errorf("the policy's egress changed (-was +now):\n%s", diff)
		}
		return nil
	})
	now := pod(t, ns, name)
	switch {
	case now == nil:
		t.Fatal("the task's pod is gone")
	case now.UID != running.UID:
		t.Errorf("the task runs on pod %s, want the pod it ran on, %s (restarted)", now.UID, running.UID)
	case now.Labels[builders.LabelTaskUID] != string(task.UID):
		t.Errorf("the pod carries %s=%q, want the task's UID: the policy selects no pod", builders.LabelTaskUID, now.Labels[builders.LabelTaskUID])
	}
	if got := getTask(t, ns, name); got.Status.Phase != calibanv1alpha1.TaskRunning {
		t.Errorf("the task is %s, want Running", got.Status.Phase)
	}
}
