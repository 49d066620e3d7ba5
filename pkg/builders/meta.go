// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
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
	return map[string]string{LabelTaskUID: string(task.UID)}
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
