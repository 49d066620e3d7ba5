// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

// The operator's identity on everything it writes.
const (
	// FieldManager owns every field the operator applies, on children and
	// on status.
	FieldManager = "caliban-operator"

	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelName      = "app.kubernetes.io/name"
	LabelTask      = "caliban.caliban-ai.dev/task"
	// LabelTaskUID is the task's UID on its children and its pod: what
	// its NetworkPolicy selects the pod by. A name's label value can be
	// another task's (a long name's safe form is a name of its own), a
	// UID cannot.
	LabelTaskUID = "caliban.caliban-ai.dev/task-uid"
)

// TaskLabels are the labels on every child of a task and on its pod; the
// NetworkPolicy selects the pod by the UID among them (TaskPodSelector)
// and the Sandbox informer watches only objects labelled managed-by
// caliban-operator.
func TaskLabels(task *calibanv1alpha1.CalibanTask) map[string]string {
	return map[string]string{
		LabelManagedBy: FieldManager,
		LabelName:      "caliband",
		LabelTask:      TaskLabelValue(task.Name),
		LabelTaskUID:   string(task.UID),
	}
}

// TaskPodSelector selects a cold task's pod, and nothing else: by the
// task's UID (LabelTaskUID).
func TaskPodSelector(task *calibanv1alpha1.CalibanTask) map[string]string {
	return podSelectorOf(task.UID)
}

func podSelectorOf(uid types.UID) map[string]string {
	return map[string]string{LabelTaskUID: string(uid)}
}

// SelectsPodByName reports that a task's NetworkPolicy selects its pod by
// the task's name labels, as policies rendered before LabelTaskUID did
// (ADR 0029): a long name's label value can be another task's name, so
// such a policy is moved to TaskPodSelector (ReselectedNetworkPolicy).
func SelectsPodByName(np *networkingv1.NetworkPolicy) bool {
	_, byName := np.Spec.PodSelector.MatchLabels[LabelTask]
	_, byUID := np.Spec.PodSelector.MatchLabels[LabelTaskUID]
	return byName && !byUID
}

// LabelsPodByName reports that a Sandbox's pod template does not carry
// LabelTaskUID: a Sandbox rendered before it, whose pod its NetworkPolicy
// can select by the UID only once the label is there.
func LabelsPodByName(sb *sandboxv1beta1.Sandbox) bool {
	_, ok := sb.Spec.PodTemplate.Metadata.Labels[LabelTaskUID]
	return !ok
}

// ReselectedNetworkPolicy is live, a task's NetworkPolicy that selects its
// pod by name (SelectsPodByName), as the operator applied it but selecting
// the pod by the task's UID: everything else, rules and annotations,
// stays as it was rendered (ADR 0015 keeps it). ok is false when live
// holds nothing the operator applied, so there is nothing to move.
// Applied only once the pod carries the UID label: until then the new
// selector would select no pod.
func ReselectedNetworkPolicy(live *networkingv1.NetworkPolicy, uid types.UID) (np *networkingv1ac.NetworkPolicyApplyConfiguration, ok bool, err error) {
	np, err = networkingv1ac.ExtractNetworkPolicy(live, FieldManager)
	if err != nil {
		return nil, false, fmt.Errorf("reading what %s applied to NetworkPolicy %s/%s: %w", FieldManager, live.Namespace, live.Name, err)
	}
	if np.Spec == nil || np.Spec.PodSelector == nil {
		return nil, false, nil
	}
	np.Spec.PodSelector = metav1ac.LabelSelector().WithMatchLabels(podSelectorOf(uid))
	return np.WithLabels(podSelectorOf(uid)), true, nil
}

// TaskOwnerReference makes the task the controller of a child, so the
// garbage collector deletes the child with the task, and foreground
// deletion of the task waits for it.
func TaskOwnerReference(task *calibanv1alpha1.CalibanTask) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion:         calibanv1alpha1.SchemeGroupVersion.String(),
		Kind:               "CalibanTask",
		Name:               task.Name,
		UID:                task.UID,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}
