// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// The Ready conditions below are the ones the operator writes
// (pkg/builders/status.go, docs/crd-reference.md#the-ready-condition), with
// their messages as it spells them.

const podUID = types.UID("3f1c8a2e-0000-4000-8000-000000000001")

var t0 = metav1.NewTime(time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC))

func task(phase calibanv1alpha1.TaskPhase, mods ...func(*calibanv1alpha1.CalibanTask)) *calibanv1alpha1.CalibanTask {
	t := &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-login", Namespace: "team-a"},
		Spec:       calibanv1alpha1.CalibanTaskSpec{WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "wsb"}},
		Status:     calibanv1alpha1.CalibanTaskStatus{Phase: phase},
	}
	for _, m := range mods {
		m(t)
	}
	return t
}

func ready(status metav1.ConditionStatus, reason, message string) func(*calibanv1alpha1.CalibanTask) {
	return condition(builders.ConditionReady, status, reason, message)
}

func condition(typ string, status metav1.ConditionStatus, reason, message string) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.Status.Conditions = append(t.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: t0})
	}
}

func workspace(phase calibanv1alpha1.WorkspacePhase, message string) *calibanv1alpha1.Workspace {
	return &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "wsb", Namespace: "team-a"},
		Status:     calibanv1alpha1.WorkspaceStatus{Phase: phase, Message: message},
	}
}

func sandbox(status metav1.ConditionStatus, reason, message string) *sandboxv1beta1.Sandbox {
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-login-sbx", Namespace: "team-a"},
		Spec:       sandboxv1beta1.SandboxSpec{OperatingMode: sandboxv1beta1.OperatingModeRunning},
		Status: sandboxv1beta1.SandboxStatus{Conditions: []metav1.Condition{{
			Type: "Ready", Status: status, Reason: reason, Message: message, LastTransitionTime: t0,
		}}},
	}
}

func pod(phase corev1.PodPhase, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-login-sbx", Namespace: "team-a", UID: podUID},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func podCond(typ corev1.PodConditionType, status corev1.ConditionStatus, reason, message string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: status, Reason: reason, Message: message})
	}
}

func initStatus(s corev1.ContainerStatus) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, s) }
}

func containerStatus(s corev1.ContainerStatus) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, s) }
}

func TestTask(t *testing.T) {
	const (
		secretMessage = "provider 'planner': secret 'no-such-secret' key 'api-key' not found"
		unschedulable = "0/3 nodes available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
	)
	tests := map[string]struct {
		// inputs
		in Input
		// expected output
		want Diagnosis
	}{
		"a task failed on a Failed Workspace waits for the Workspace and quotes its message": {
			in: Input{
				Task:      task(calibanv1alpha1.TaskFailed, ready(metav1.ConditionFalse, builders.ReasonWorkspaceUnresolved, "workspace 'wsb' not ready: "+secretMessage)),
				Workspace: workspace(calibanv1alpha1.WorkspaceFailed, secretMessage),
			},
			want: Diagnosis{Waiting: "Workspace wsb is Failed: " + secretMessage, Blocked: true},
		},
		"a task whose Workspace does not exist waits for it to be created": {
			in: Input{
				Task: task(calibanv1alpha1.TaskFailed, ready(metav1.ConditionFalse, builders.ReasonWorkspaceUnresolved, "Workspace not found: 'wsb'")),
			},
			want: Diagnosis{Waiting: "Workspace wsb to be created (WorkspaceUnresolved: Workspace not found: 'wsb')", Blocked: true},
		},
		"a Pending task whose Workspace is not validated yet waits for the operator": {
			in: Input{
				Task:      task(calibanv1alpha1.TaskPending),
				Workspace: workspace("", ""),
			},
			want: Diagnosis{Waiting: `the operator to validate Workspace wsb (its phase is "")`, Blocked: true},
		},
		"a task with no status at all waits for the operator to admit it": {
			in:   Input{Task: task(""), Workspace: workspace(calibanv1alpha1.WorkspaceReady, "")},
			want: Diagnosis{Waiting: "the operator to admit the task (it has no status yet: is caliban-operator running and watching this namespace?)", Blocked: true},
		},
		"a task failed by a missing Secret its condition names waits for that Secret": {
			in: Input{
				Task:      task(calibanv1alpha1.TaskFailed, ready(metav1.ConditionFalse, builders.ReasonInvalidState, "state.tokenRef: secret 'gonzalo-token' not found")),
				Workspace: workspace(calibanv1alpha1.WorkspaceReady, ""),
			},
			want: Diagnosis{Waiting: `Secret "gonzalo-token" to be created (InvalidState: state.tokenRef: secret 'gonzalo-token' not found)`, Blocked: true},
		},
		"a task failed by its posture waits for a fix and says why": {
			in: Input{
				Task: task(calibanv1alpha1.TaskFailed, ready(metav1.ConditionFalse, builders.ReasonPostureNotPermitted,
					"task.permissionPosture is unattended, but workspace 'wsb' does not set agentPolicy.allowUnattended")),
				Workspace: workspace(calibanv1alpha1.WorkspaceReady, ""),
			},
			want: Diagnosis{Waiting: "a fix to the task (Failed, PostureNotPermitted: task.permissionPosture is unattended, but workspace 'wsb' does not set agentPolicy.allowUnattended)", Blocked: true},
		},
		"a Provisioning task with no Sandbox yet waits for the operator to create it": {
			in: Input{
				Task: task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady, "Sandbox fix-login-sbx is not ready yet"),
					func(t *calibanv1alpha1.CalibanTask) {
						t.Status.SandboxRef = &calibanv1alpha1.SandboxReference{Name: "fix-login-sbx"}
					}),
			},
			want: Diagnosis{Waiting: "the operator to create Sandbox fix-login-sbx", Blocked: true},
		},
		"a warm task whose claim holds no Sandbox yet waits for agent-sandbox's claim": {
			in: Input{
				Task: task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady, "SandboxClaim fix-login-claim holds no Sandbox yet"),
					func(t *calibanv1alpha1.CalibanTask) {
						t.Status.Launch = &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchWarm, Reason: builders.ReasonLaunchWarmPool}
					}),
				Workspace: workspace(calibanv1alpha1.WorkspaceReady, ""),
			},
			want: Diagnosis{Waiting: "agent-sandbox: SandboxClaim fix-login-claim to hold a Sandbox from warm pool wsb-warm", Blocked: true},
		},
		"a Provisioning task without agent-sandbox waits for it to be installed": {
			in: Input{
				Task: task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxAPIUnavailable, builders.SandboxAPIUnavailableMessage)),
			},
			want: Diagnosis{Waiting: "agent-sandbox to be installed (" + builders.SandboxAPIUnavailableMessage + ")", Blocked: true},
		},
		"a Provisioning task whose Sandbox reports another address waits for agent-sandbox to report its own": {
			in: Input{
				Task:    task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonServiceFQDNMismatch, "Sandbox fix-login-sbx reports serviceFQDN 'elsewhere'")),
				Sandbox: sandbox(metav1.ConditionTrue, "DependenciesReady", "Pod is Ready"),
			},
			want: Diagnosis{Waiting: "agent-sandbox to report the Sandbox's own Service as its address (Sandbox fix-login-sbx reports serviceFQDN 'elsewhere')", Blocked: true},
		},
		"a Provisioning task whose Sandbox has no pod yet quotes the Sandbox's Ready condition": {
			in: Input{
				Task:    task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady, "Pod does not exist")),
				Sandbox: sandbox(metav1.ConditionFalse, "DependenciesNotReady", "Pod does not exist"),
			},
			want: Diagnosis{Waiting: "agent-sandbox: no pod yet (Sandbox fix-login-sbx Ready=False, DependenciesNotReady: Pod does not exist)", Blocked: true},
		},
		"a task whose pod cannot be scheduled quotes the scheduler": {
			in: Input{
				Task:    task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady, "Pod exists with phase: Pending")),
				Sandbox: sandbox(metav1.ConditionFalse, "DependenciesNotReady", "Pod exists with phase: Pending"),
				Pod:     pod(corev1.PodPending, podCond(corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable", unschedulable)),
			},
			want: Diagnosis{Waiting: "agent-sandbox: pod Pending (" + unschedulable + ")", Blocked: true},
		},
		"a task whose clone keeps failing shows the init container's back-off and git's message": {
			in: Input{
				Task:    task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady, "Pod exists with phase: Pending")),
				Sandbox: sandbox(metav1.ConditionFalse, "DependenciesNotReady", "Pod exists with phase: Pending"),
				Pod: pod(corev1.PodPending, podCond(corev1.PodScheduled, corev1.ConditionTrue, "", ""), initStatus(corev1.ContainerStatus{
					Name:                 builders.ContainerClone,
					State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s restarting failed container"}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "Error", Message: "fatal: repository 'https://example.com/nope.git/' not found\n"}},
				})),
			},
			want: Diagnosis{Waiting: "init container clone-workspace: CrashLoopBackOff (exit code 128: fatal: repository 'https://example.com/nope.git/' not found)", Blocked: true},
		},
		"a task whose clone has just failed shows the exit code": {
			in: Input{
				Task:    task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady, "Pod exists with phase: Pending")),
				Sandbox: sandbox(metav1.ConditionFalse, "DependenciesNotReady", "Pod exists with phase: Pending"),
				Pod: pod(corev1.PodPending, initStatus(corev1.ContainerStatus{
					Name:  builders.ContainerClone,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
				})),
			},
			want: Diagnosis{Waiting: "init container clone-workspace: Error (exit code 1)", Blocked: true},
		},
		"a task whose clone is running waits for it": {
			in: Input{
				Task:    task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady, "Pod exists with phase: Pending")),
				Sandbox: sandbox(metav1.ConditionFalse, "DependenciesNotReady", "Pod exists with phase: Pending"),
				Pod: pod(corev1.PodPending, initStatus(corev1.ContainerStatus{
					Name: builders.ContainerClone, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				})),
			},
			want: Diagnosis{Waiting: "init container clone-workspace to finish (running)", Blocked: true},
		},
		"a task whose caliband cannot start names the missing Secret from the kubelet": {
			in: Input{
				Task:    task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady, "Pod exists with phase: Pending")),
				Sandbox: sandbox(metav1.ConditionFalse, "DependenciesNotReady", "Pod exists with phase: Pending"),
				Pod: pod(corev1.PodPending, containerStatus(corev1.ContainerStatus{
					Name:  builders.ContainerCaliband,
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "anthropic-key" not found`}},
				})),
			},
			want: Diagnosis{Waiting: `container caliband: CreateContainerConfigError (secret "anthropic-key" not found)`, Blocked: true},
		},
		"a pending pod with nothing else to say quotes its newest Warning Event": {
			in: Input{
				Task:    task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady, "Pod exists with phase: Pending")),
				Sandbox: sandbox(metav1.ConditionFalse, "DependenciesNotReady", "Pod exists with phase: Pending"),
				Pod:     pod(corev1.PodPending),
				Events: []eventsv1.Event{
					{Type: "Warning", Reason: "FailedMount", Note: "older", Regarding: corev1.ObjectReference{UID: podUID}, EventTime: metav1.NewMicroTime(t0.Time)},
					{Type: "Warning", Reason: "FailedMount", Note: `MountVolume.SetUp failed for volume "session-tls" : secret "caliban-session-plane-tls" not found`,
						Regarding: corev1.ObjectReference{UID: podUID}, EventTime: metav1.NewMicroTime(t0.Add(time.Minute))},
					{Type: "Warning", Reason: "Other", Note: "about another object", Regarding: corev1.ObjectReference{UID: "other"}, EventTime: metav1.NewMicroTime(t0.Add(time.Hour))},
				},
			},
			want: Diagnosis{Waiting: `agent-sandbox: pod Pending (FailedMount: MountVolume.SetUp failed for volume "session-tls" : secret "caliban-session-plane-tls" not found)`, Blocked: true},
		},
		"a task whose pod runs but is not ready waits for caliband": {
			in: Input{
				Task:    task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady, "Pod exists with phase: Running")),
				Sandbox: sandbox(metav1.ConditionFalse, "DependenciesNotReady", "Pod exists with phase: Running"),
				Pod:     pod(corev1.PodRunning, podCond(corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "")),
			},
			want: Diagnosis{Waiting: "container caliband to become ready (pod Running, not Ready)", Blocked: true},
		},
		"a task whose children are refused says the apiserver's error": {
			in: Input{
				Task: task(calibanv1alpha1.TaskProvisioning, ready(metav1.ConditionFalse, builders.ReasonSandboxNotReady,
					`retrying: applying Sandbox fix-login-sbx: sandboxes.agents.x-k8s.io "fix-login-sbx" is forbidden: exceeded quota`)),
			},
			want: Diagnosis{Waiting: `the apiserver to accept the task's children (retrying: applying Sandbox fix-login-sbx: sandboxes.agents.x-k8s.io "fix-login-sbx" is forbidden: exceeded quota)`, Blocked: true},
		},
		"a Running task waits for nothing": {
			in:   Input{Task: task(calibanv1alpha1.TaskRunning, ready(metav1.ConditionTrue, builders.ReasonRunning, "caliband is serving at fix-login-sbx.team-a.svc.cluster.local:8443"))},
			want: Diagnosis{Waiting: "nothing (Running)"},
		},
		"a Completed task waits for nothing": {
			in:   Input{Task: task(calibanv1alpha1.TaskCompleted, ready(metav1.ConditionFalse, builders.ReasonCompleted, "every agent has finished"))},
			want: Diagnosis{Waiting: "nothing (Completed: every agent has finished)"},
		},
		"a task failed by its agents has finished and says why": {
			in: Input{Task: task(calibanv1alpha1.TaskFailed,
				condition(builders.ConditionAgentsSettled, metav1.ConditionTrue, builders.SettledFailed, "agent reviewer crashed"),
				ready(metav1.ConditionFalse, builders.ReasonAgentsFailed, "agent reviewer crashed"))},
			want: Diagnosis{Waiting: "nothing (Failed, AgentsFailed: agent reviewer crashed)"},
		},
		"a task failed by its deadline has finished and says why": {
			in: Input{Task: task(calibanv1alpha1.TaskFailed, ready(metav1.ConditionFalse, builders.ReasonDeadlineExceeded,
				"the task ran longer than lifecycle.activeDeadlineSeconds (60s from its start at 2026-12-05T09:00:00Z)"))},
			want: Diagnosis{Waiting: "nothing (Failed, DeadlineExceeded: the task ran longer than lifecycle.activeDeadlineSeconds (60s from its start at 2026-12-05T09:00:00Z))"},
		},
		"a Suspended task waits for spec.suspend to be false": {
			in:   Input{Task: task(calibanv1alpha1.TaskSuspended, ready(metav1.ConditionFalse, builders.ReasonSuspended, builders.SuspendedMessage))},
			want: Diagnosis{Waiting: "spec.suspend to be false (Suspended; resume with: kubectl caliban resume fix-login)", Blocked: true},
		},
		"a task being resumed waits for agent-sandbox": {
			in:   Input{Task: task(calibanv1alpha1.TaskSuspended, ready(metav1.ConditionFalse, builders.ReasonSuspended, builders.ResumingMessage))},
			want: Diagnosis{Waiting: "agent-sandbox to resume the Sandbox (resuming: the Sandbox is still suspended)", Blocked: true},
		},
		"a Draining task waits for prospero's AgentsDrained": {
			in: Input{Task: task(calibanv1alpha1.TaskDraining, ready(metav1.ConditionFalse, builders.ReasonDraining,
				"deleted with lifecycle.onDelete checkpoint: waiting for prospero's AgentsDrained condition until 2026-12-05T09:10:00Z"))},
			want: Diagnosis{Waiting: "prospero's AgentsDrained condition (Draining: deleted with lifecycle.onDelete checkpoint: waiting for prospero's AgentsDrained condition until 2026-12-05T09:10:00Z)", Blocked: true},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(test.want, Task(test.in)); diff != "" {
				t.Errorf("Task() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodName(t *testing.T) {
	tests := map[string]struct {
		task    *calibanv1alpha1.CalibanTask
		sandbox *sandboxv1beta1.Sandbox
		want    string
	}{
		"the pod is named after the Sandbox": {
			task: task(calibanv1alpha1.TaskRunning), sandbox: sandbox(metav1.ConditionTrue, "DependenciesReady", ""), want: "fix-login-sbx",
		},
		"a Sandbox that adopted a pod names it in agent-sandbox's annotation": {
			task: task(calibanv1alpha1.TaskRunning),
			sandbox: func() *sandboxv1beta1.Sandbox {
				sb := sandbox(metav1.ConditionTrue, "DependenciesReady", "")
				sb.Annotations = map[string]string{"agents.x-k8s.io/pod-name": "warm-pool-7x2k"}
				return sb
			}(),
			want: "warm-pool-7x2k",
		},
		"without a Sandbox the pod would have the recorded Sandbox name": {
			task: task(calibanv1alpha1.TaskProvisioning, func(t *calibanv1alpha1.CalibanTask) {
				t.Status.SandboxRef = &calibanv1alpha1.SandboxReference{Name: "recorded-sbx"}
			}),
			want: "recorded-sbx",
		},
		"without a Sandbox or a record the pod would have the operator's Sandbox name": {
			task: task(""), want: "fix-login-sbx",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(test.want, PodName(test.task, test.sandbox)); diff != "" {
				t.Errorf("PodName() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
