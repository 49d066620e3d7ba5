// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// Fixtures: the objects as the operator and agent-sandbox leave them, at
// fixed times, so the printers' output can be compared with golden files.

var (
	fxNow     = time.Date(2026, 12, 5, 9, 30, 0, 0, time.UTC)
	fxCreated = metav1.NewTime(fxNow.Add(-25 * time.Minute))
	fxStarted = metav1.NewTime(fxNow.Add(-24 * time.Minute))
)

const fxPodUID = types.UID("9d0c4d5e-1111-4a2b-8c3d-000000000002")

func fxTask(name, ns string, mods ...func(*calibanv1alpha1.CalibanTask)) *calibanv1alpha1.CalibanTask {
	t := &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), CreationTimestamp: fxCreated},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "Fix the login form."},
		},
	}
	for _, m := range mods {
		m(t)
	}
	return t
}

// running is a task the operator admitted and agent-sandbox runs.
func running(t *calibanv1alpha1.CalibanTask) {
	t.Status = calibanv1alpha1.CalibanTaskStatus{
		Phase:             calibanv1alpha1.TaskRunning,
		CalibandEndpoint:  builders.SandboxName(t.Name) + "." + t.Namespace + ".svc.cluster.local:8443",
		SandboxRef:        &calibanv1alpha1.SandboxReference{Name: builders.SandboxName(t.Name)},
		PermissionPosture: calibanv1alpha1.PostureSupervised,
		RequestedBy:       "alice@example.com",
		StartTime:         &fxStarted,
		ResolvedWorkspace: &calibanv1alpha1.ResolvedWorkspace{
			Sources:  []calibanv1alpha1.Source{{Name: "app", Repo: "https://example.com/app.git", Ref: "main", Path: "/work/app"}},
			Provider: calibanv1alpha1.Provider{Name: "planner", Kind: "anthropic", Model: "claude-sonnet-4-5"},
		},
		Conditions: []metav1.Condition{
			{Type: builders.ConditionReady, Status: metav1.ConditionTrue, Reason: builders.ReasonRunning,
				Message: "caliband is serving at " + builders.SandboxName(t.Name) + "." + t.Namespace + ".svc.cluster.local:8443", LastTransitionTime: metav1.NewTime(fxNow.Add(-23 * time.Minute))},
			{Type: builders.ConditionAgentsSettled, Status: metav1.ConditionFalse, Reason: "AgentsActive", LastTransitionTime: metav1.NewTime(fxNow.Add(-22 * time.Minute))},
		},
	}
}

// blockedOnWorkspace is a task failed at admission: its Workspace names a
// Secret that does not exist.
func blockedOnWorkspace(t *calibanv1alpha1.CalibanTask) {
	t.Spec.WorkspaceRef.Name = "wsb"
	t.Status = calibanv1alpha1.CalibanTaskStatus{
		Phase: calibanv1alpha1.TaskFailed,
		Conditions: []metav1.Condition{{
			Type: builders.ConditionReady, Status: metav1.ConditionFalse, Reason: builders.ReasonWorkspaceUnresolved,
			Message: "workspace 'wsb' not ready: provider 'planner': secret 'no-such-secret' key 'api-key' not found", LastTransitionTime: fxStarted,
		}},
	}
}

func fxWorkspace(name string, phase calibanv1alpha1.WorkspacePhase, message string) *calibanv1alpha1.Workspace {
	return &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
		Status:     calibanv1alpha1.WorkspaceStatus{Phase: phase, Message: message},
	}
}

func fxSandbox(task string, ready metav1.ConditionStatus, reason, message string) *sandboxv1beta1.Sandbox {
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: builders.SandboxName(task), Namespace: "team-a"},
		Spec:       sandboxv1beta1.SandboxSpec{OperatingMode: sandboxv1beta1.OperatingModeRunning},
		Status: sandboxv1beta1.SandboxStatus{
			ServiceFQDN: builders.SandboxName(task) + ".team-a.svc.cluster.local",
			Conditions: []metav1.Condition{{Type: "Ready", Status: ready, Reason: reason, Message: message,
				LastTransitionTime: metav1.NewTime(fxNow.Add(-23 * time.Minute))}},
		},
	}
}

func fxPod(task string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: builders.SandboxName(task), Namespace: "team-a", UID: fxPodUID},
		Spec: corev1.PodSpec{
			NodeName:       "kwok-node-0",
			InitContainers: []corev1.Container{{Name: builders.ContainerClone}},
			Containers:     []corev1.Container{{Name: builders.ContainerCaliband}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: builders.ContainerClone,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: 0}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: builders.ContainerCaliband, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func fxEvent(uid types.UID, typ, reason, note string, ago time.Duration) eventsv1.Event {
	return eventsv1.Event{
		Type: typ, Reason: reason, Note: note,
		Regarding: corev1.ObjectReference{UID: uid},
		EventTime: metav1.NewMicroTime(fxNow.Add(-ago)),
	}
}

func fxServiceAccount() *corev1.ServiceAccount { return &corev1.ServiceAccount{} }

func fxNetworkPolicy() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} }
