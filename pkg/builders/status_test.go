// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

var (
	tEarlier = metav1.NewTime(time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC))
	tNow     = metav1.NewTime(time.Date(2026, 9, 2, 0, 0, 0, 0, time.UTC))
)

func fxPin() *calibanv1alpha1.ResolvedWorkspace {
	return &calibanv1alpha1.ResolvedWorkspace{Provider: calibanv1alpha1.Provider{Name: "planner", Kind: "anthropic"}}
}

func fxSandbox(fqdn string, ready ...metav1.Condition) *sandboxv1beta1.Sandbox {
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-bug-sbx", Namespace: "team"},
		Status:     sandboxv1beta1.SandboxStatus{ServiceFQDN: fqdn, Conditions: ready},
	}
}

func sbReady(status metav1.ConditionStatus, message string) metav1.Condition {
	return metav1.Condition{Type: "Ready", Status: status, Reason: "DependenciesReady", Message: message, LastTransitionTime: tEarlier}
}

func sbNotReady(reason, message string) metav1.Condition {
	return metav1.Condition{Type: "Ready", Status: "False", Reason: reason, Message: message, LastTransitionTime: tEarlier}
}

// sbMode sets the operatingMode agent-sandbox accepted.
func sbMode(sb *sandboxv1beta1.Sandbox, mode sandboxv1beta1.OperatingMode) *sandboxv1beta1.Sandbox {
	sb.Spec.OperatingMode = mode
	return sb
}

// sbCalibandPort gives the Sandbox a caliband container with that control
// port, as a Sandbox rendered under other settings carries it.
func sbCalibandPort(sb *sandboxv1beta1.Sandbox, port int32) *sandboxv1beta1.Sandbox {
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: ContainerCaliband,
		Ports: []corev1.ContainerPort{{Name: PortNameCaliband, ContainerPort: port}}}}
	return sb
}

func settledCond(status metav1.ConditionStatus, reason, message string) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.Status.Conditions = append(t.Status.Conditions, metav1.Condition{
			Type: "AgentsSettled", Status: status, Reason: reason, Message: message, LastTransitionTime: tEarlier})
	}
}

func readyCond(status metav1.ConditionStatus, reason, message string, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: "Ready", Status: status, Reason: reason, Message: message, ObservedGeneration: 1, LastTransitionTime: at}
}

// TestTaskStatusPhaseDerivation has one case per row of the phase derivation
// table in docs/crd-reference.md#phases, plus the edges around them.
func TestTaskStatusPhaseDerivation(t *testing.T) {
	const fqdn = "fix-bug-sbx.team.svc.cluster.local"
	ref := &calibanv1alpha1.SandboxReference{Name: "fix-bug-sbx"}
	tests := map[string]struct {
		// inputs
		task    *calibanv1alpha1.CalibanTask
		failure *Failure
		pin     *calibanv1alpha1.ResolvedWorkspace
		sandbox *sandboxv1beta1.Sandbox
		// apiMissing: agent-sandbox's API is not served
		apiMissing bool
		// applyProblem: why a child could not be applied this pass
		applyProblem string
		// expected
		want calibanv1alpha1.CalibanTaskStatus
	}{
		"an admission failure is Failed with its reason and message": {
			task: fxTask(), failure: &Failure{ReasonWorkspaceUnresolved, "Workspace not found: 'ws'"},
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Failed", ObservedGeneration: 1,
				Conditions: []metav1.Condition{readyCond("False", "WorkspaceUnresolved", "Workspace not found: 'ws'", tNow)}},
		},
		"a task waiting for its workspace is Pending with nothing else": {
			task: fxTask(),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Pending", ObservedGeneration: 1},
		},
		"pinned with no Sandbox yet is Provisioning under the Sandbox it is about to get": {
			task: fxTask(), pin: fxPin(),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Sandbox fix-bug-sbx is not ready yet", tNow)}},
		},
		"pinned while the Sandbox API is not served is Provisioning, saying what to install": {
			task: fxTask(), pin: fxPin(), apiMissing: true,
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised",
				Conditions: []metav1.Condition{readyCond("False", "SandboxAPIUnavailable",
					"agent-sandbox's API sandboxes.agents.x-k8s.io/v1beta1 is not served; install agent-sandbox (its CRD and controller): the task stays Provisioning until then", tNow)}},
		},
		"a missing Sandbox API does not hide what prospero settled": {
			task: fxTask(settledCond("True", "Succeeded", "")), pin: fxPin(), apiMissing: true,
			want: calibanv1alpha1.CalibanTaskStatus{CompletionTime: &tEarlier, Phase: "Completed", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised",
				Conditions: []metav1.Condition{readyCond("False", "Completed", "every agent has finished", tNow)}},
		},
		"an admission failure wins over a missing Sandbox API": {
			task: fxTask(), pin: fxPin(), apiMissing: true,
			failure: &Failure{ReasonInvalidState, "state.tokenRef: secret 's' not found"},
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Failed", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised",
				Conditions: []metav1.Condition{readyCond("False", "InvalidState", "state.tokenRef: secret 's' not found", tNow)}},
		},
		"a Sandbox that cannot be applied leaves the task Provisioning, saying why": {
			task: fxTask(), pin: fxPin(), applyProblem: `applying Sandbox fix-bug-sbx: sandboxes.agents.x-k8s.io "fix-bug-sbx" is forbidden: denied`,
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady",
					`retrying: applying Sandbox fix-bug-sbx: sandboxes.agents.x-k8s.io "fix-bug-sbx" is forbidden: denied`, tNow)}},
		},
		"an existing Sandbox that cannot be updated says why over its own message": {
			task: fxTask(), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("False", "Pod exists with phase: Pending")),
			applyProblem: "applying Sandbox fix-bug-sbx: exceeded quota",
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "retrying: applying Sandbox fix-bug-sbx: exceeded quota", tNow)}},
		},
		"a Running task stays Running when an update of a child fails, and says it retries": {
			task: fxTask(), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("True", "")),
			applyProblem: "applying NetworkPolicy fix-bug-np: exceeded quota",
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Running", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				CalibandEndpoint: fqdn + ":8443",
				Conditions:       []metav1.Condition{readyCond("True", "Running", "retrying: applying NetworkPolicy fix-bug-np: exceeded quota", tNow)}},
		},
		"a suspend the Sandbox refused leaves the task Running, saying why": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) { t.Spec.Suspend = true }), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("True", "")),
			applyProblem: "applying Sandbox fix-bug-sbx: spec: Invalid value: \"object\": volumeClaimTemplates is immutable",
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Running", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				CalibandEndpoint: fqdn + ":8443",
				Conditions: []metav1.Condition{readyCond("True", "Running",
					"retrying: applying Sandbox fix-bug-sbx: spec: Invalid value: \"object\": volumeClaimTemplates is immutable", tNow)}},
		},
		"a resume the Sandbox refused leaves the task Suspended, saying why": {
			task: fxTask(), pin: fxPin(), sandbox: sbMode(fxSandbox(fqdn, sbNotReady("SandboxSuspended", "Sandbox is suspended")), "Suspended"),
			applyProblem: "applying Sandbox fix-bug-sbx: forbidden",
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Suspended", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "Suspended", "retrying: applying Sandbox fix-bug-sbx: forbidden", tNow)}},
		},
		"a finished task whose onFinish suspend is refused stays Completed, saying why": {
			task: fxTask(settledCond("True", "Succeeded", "")), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("True", "")),
			applyProblem: "applying Sandbox fix-bug-sbx: forbidden",
			want: calibanv1alpha1.CalibanTaskStatus{CompletionTime: &tEarlier, Phase: "Completed", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "Completed", "retrying: applying Sandbox fix-bug-sbx: forbidden", tNow)}},
		},
		"v1.0 DependenciesNotReady is Provisioning with agent-sandbox's message": {
			task: fxTask(), pin: fxPin(), sandbox: fxSandbox(fqdn, sbNotReady("DependenciesNotReady", "Pod exists with phase: Pending; Service Exists")),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Pod exists with phase: Pending; Service Exists", tNow)}},
		},
		"v1.0 MultiplePods is Provisioning with agent-sandbox's message": {
			task: fxTask(), pin: fxPin(), sandbox: fxSandbox(fqdn, sbNotReady("MultiplePods", "multiple Pods (2) are controlled by this Sandbox")),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "multiple Pods (2) are controlled by this Sandbox", tNow)}},
		},
		"v1.0 SandboxExpired is Provisioning with agent-sandbox's message": {
			task: fxTask(), pin: fxPin(), sandbox: fxSandbox(fqdn, sbNotReady("SandboxExpired", "Sandbox has expired")),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Sandbox has expired", tNow)}},
		},
		"v1.0 SandboxSuspended on a Sandbox that is resuming (mode Running) is Provisioning": {
			task: fxTask(), pin: fxPin(), sandbox: sbMode(fxSandbox(fqdn, sbNotReady("SandboxSuspended", "Sandbox is suspended")), "Running"),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Sandbox is suspended", tNow)}},
		},
		"a Suspended condition that lingers after a resume does not hold back Running: Ready is what counts": {
			task: fxTask(), pin: fxPin(), sandbox: sbMode(fxSandbox(fqdn, sbReady("True", "Pod is Ready; Service Exists"),
				metav1.Condition{Type: "Suspended", Status: "True", Reason: "PodTerminated", Message: "Pod has been terminated. Sandbox is suspended", LastTransitionTime: tEarlier}), "Running"),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Running", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				CalibandEndpoint: fqdn + ":8443",
				Conditions:       []metav1.Condition{readyCond("True", "Running", "caliband is serving at "+fqdn+":8443", tNow)}},
		},
		"the endpoint's port is the one the Sandbox's caliband container carries, not the settings'": {
			task: fxTask(), pin: fxPin(), sandbox: sbCalibandPort(fxSandbox(fqdn, sbReady("True", "")), 9443),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Running", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				CalibandEndpoint: fqdn + ":9443",
				Conditions:       []metav1.Condition{readyCond("True", "Running", "caliband is serving at "+fqdn+":9443", tNow)}},
		},
		"an apply problem is cut to a bounded message": {
			task: fxTask(), pin: fxPin(), applyProblem: strings.Repeat("é", 600),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "retrying: "+strings.Repeat("é", 512)+"…", tNow)}},
		},
		"a Sandbox with no Ready condition yet is Provisioning": {
			task: fxTask(), pin: fxPin(), sandbox: fxSandbox(""),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Sandbox fix-bug-sbx is not ready yet", tNow)}},
		},
		"a Sandbox that is not Ready carries its own message": {
			task: fxTask(), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("False", "Pod exists with phase: Pending; Service Exists")),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Pod exists with phase: Pending; Service Exists", tNow)}},
		},
		"a serviceFQDN alone is not readiness": {
			task: fxTask(), pin: fxPin(), sandbox: fxSandbox(fqdn),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Sandbox fix-bug-sbx is not ready yet", tNow)}},
		},
		"Ready without a serviceFQDN is not Running": {
			task: fxTask(), pin: fxPin(), sandbox: fxSandbox("", sbReady("True", "")),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Sandbox fix-bug-sbx is ready but reports no serviceFQDN", tNow)}},
		},
		"Ready with a serviceFQDN is Running with the endpoint": {
			task: fxTask(), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("True", "Pod is Ready; Service Exists")),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Running", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				CalibandEndpoint: fqdn + ":8443",
				Conditions:       []metav1.Condition{readyCond("True", "Running", "caliband is serving at "+fqdn+":8443", tNow)}},
		},
		"AgentsSettled Succeeded is Completed without an endpoint": {
			task: fxTask(settledCond("True", "Succeeded", "")), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("True", "")),
			want: calibanv1alpha1.CalibanTaskStatus{CompletionTime: &tEarlier, Phase: "Completed", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "Completed", "every agent has finished", tNow)}},
		},
		"AgentsSettled Failed is Failed with its message": {
			task: fxTask(settledCond("True", "Failed", "agent 2 crashed")), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("True", "")),
			want: calibanv1alpha1.CalibanTaskStatus{CompletionTime: &tEarlier, Phase: "Failed", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "AgentsFailed", "agent 2 crashed", tNow)}},
		},
		"AgentsSettled Failed without a message gets the fallback": {
			task: fxTask(settledCond("True", "Failed", "")), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("True", "")),
			want: calibanv1alpha1.CalibanTaskStatus{CompletionTime: &tEarlier, Phase: "Failed", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "AgentsFailed", "one or more agents failed or crashed", tNow)}},
		},
		"AgentsActive leaves the task Running": {
			task: fxTask(settledCond("False", "AgentsActive", "")), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("True", "")),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Running", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				CalibandEndpoint: fqdn + ":8443",
				Conditions:       []metav1.Condition{readyCond("True", "Running", "caliband is serving at "+fqdn+":8443", tNow)}},
		},
		"a settled condition with an unknown reason keeps the infrastructure phase": {
			task: fxTask(settledCond("True", "Killed", "")), pin: fxPin(), sandbox: fxSandbox(fqdn),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Sandbox fix-bug-sbx is not ready yet", tNow)}},
		},
		"an admission failure wins over a settled condition": {
			task: fxTask(settledCond("True", "Succeeded", "")), pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("True", "")),
			failure: &Failure{ReasonInvalidState, "state.mode 's3' is not one of: remote, local"},
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Failed", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "InvalidState", "state.mode 's3' is not one of: remote, local", tNow)}},
		},
		"a stale failure condition does not survive into Running": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
				t.Status.Phase = "Failed"
				t.Status.Conditions = []metav1.Condition{readyCond("False", "WorkspaceUnresolved", "Workspace not found: 'ws'", tEarlier)}
			}),
			pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("True", "")),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Running", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				CalibandEndpoint: fqdn + ":8443",
				Conditions:       []metav1.Condition{readyCond("True", "Running", "caliband is serving at "+fqdn+":8443", tNow)}},
		},
		"a Ready condition whose status holds keeps its transition time": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
				t.Status.Conditions = []metav1.Condition{readyCond("False", "SandboxNotReady", "older message", tEarlier)}
			}),
			pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("False", "Pod is Running but not Ready")),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Pod is Running but not Ready", tEarlier)}},
		},
		"a Running task whose Sandbox loses readiness drops back to Provisioning": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
				t.Status.Phase, t.Status.CalibandEndpoint = "Running", fqdn+":8443"
				t.Status.Conditions = []metav1.Condition{readyCond("True", "Running", "caliband is serving at "+fqdn+":8443", tEarlier)}
			}),
			pin: fxPin(), sandbox: fxSandbox(fqdn, sbReady("False", "Pod is Running but not Ready")),
			want: calibanv1alpha1.CalibanTaskStatus{Phase: "Provisioning", ObservedGeneration: 1, ResolvedWorkspace: fxPin(), PermissionPosture: "supervised", SandboxRef: ref,
				Conditions: []metav1.Condition{readyCond("False", "SandboxNotReady", "Pod is Running but not Ready", tNow)}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			posture := calibanv1alpha1.PermissionPosture("")
			if tc.pin != nil {
				posture = calibanv1alpha1.PostureSupervised
			}
			var launch *calibanv1alpha1.Launch
			if tc.pin != nil {
				launch = &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchCold, Reason: ReasonNoWarmPool, Message: "no pool"}
			}
			got := TaskStatus(TaskStatusInput{Task: tc.task, Failure: tc.failure, Pin: tc.pin, Posture: posture, Sandbox: observe(tc.sandbox), SandboxAPIMissing: tc.apiMissing, ApplyProblem: tc.applyProblem, Now: tNow, Launch: launch}, config.DefaultAgentSettings())
			want := tc.want
			want.Launch = launch
			// Entered now when the phase moved, else when it was entered.
			want.PhaseTransitionTime = tc.task.Status.PhaseTransitionTime
			if want.Phase != tc.task.Status.Phase {
				want.PhaseTransitionTime = &tNow
			}
			if tc.pin != nil && tc.task.Status.ResolvedWorkspace == nil {
				// These tasks are pinned by this pass, which starts them now.
				want.StartTime = &tNow
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A Sandbox's status is anyone's who may write sandboxes/status: the
// endpoint the task gives prospero is the Sandbox's own Service, in the
// task's namespace and the cluster's domain, and a serviceFQDN that names
// anything else gives no endpoint at all.
func TestTheEndpointIsTheSandboxsOwnServiceOnly(t *testing.T) {
	const own = "fix-bug-sbx.team.svc.cluster.local"
	corp := config.DefaultAgentSettings()
	corp.ClusterDomain = "corp.example"
	named := func(name string, sb *sandboxv1beta1.Sandbox) *sandboxv1beta1.Sandbox {
		sb.Name = name
		return sb
	}
	tests := map[string]struct {
		// inputs
		task     *calibanv1alpha1.CalibanTask
		sandbox  *sandboxv1beta1.Sandbox
		settings *config.AgentSettings
		// expected
		phase           calibanv1alpha1.TaskPhase
		reason, message string
		endpoint        string
	}{
		"the Sandbox's own Service is the endpoint": {
			task: fxTask(), sandbox: fxSandbox(own, sbReady("True", "")),
			phase: "Running", reason: ReasonRunning, message: "caliband is serving at " + own + ":8443", endpoint: own + ":8443",
		},
		"a claimed Sandbox's own Service is the endpoint": {
			task: fxTask(), sandbox: named("ws-warm-x7k2p", fxSandbox("ws-warm-x7k2p.team.svc.cluster.local", sbReady("True", ""))),
			phase: "Running", reason: ReasonRunning, message: "caliband is serving at ws-warm-x7k2p.team.svc.cluster.local:8443",
			endpoint: "ws-warm-x7k2p.team.svc.cluster.local:8443",
		},
		"the cluster's domain is the operator's setting": {
			task: fxTask(), sandbox: fxSandbox("fix-bug-sbx.team.svc.corp.example", sbReady("True", "")), settings: &corp,
			phase: "Running", reason: ReasonRunning, message: "caliband is serving at fix-bug-sbx.team.svc.corp.example:8443",
			endpoint: "fix-bug-sbx.team.svc.corp.example:8443",
		},
		"a host somewhere else is no endpoint": {
			task: fxTask(), sandbox: fxSandbox("collector.example.com", sbReady("True", "")),
			phase: "Provisioning", reason: ReasonServiceFQDNMismatch,
			message: "Sandbox fix-bug-sbx reports serviceFQDN 'collector.example.com', and its Service is " + own +
				" (CALIBAN_CLUSTER_DOMAIN 'cluster.local'): caliband is not reached anywhere else, so the task has no endpoint until agent-sandbox reports that name (its --cluster-domain and CALIBAN_CLUSTER_DOMAIN must agree)",
		},
		"another Service of the task's namespace is no endpoint": {
			task: fxTask(), sandbox: fxSandbox("other-task-sbx.team.svc.cluster.local", sbReady("True", "")),
			phase: "Provisioning", reason: ReasonServiceFQDNMismatch,
		},
		"the Sandbox's name in another namespace is no endpoint": {
			task: fxTask(), sandbox: fxSandbox("fix-bug-sbx.attacker.svc.cluster.local", sbReady("True", "")),
			phase: "Provisioning", reason: ReasonServiceFQDNMismatch,
		},
		"the Sandbox's name under another cluster domain is no endpoint": {
			task: fxTask(), sandbox: fxSandbox(own, sbReady("True", "")), settings: &corp,
			phase: "Provisioning", reason: ReasonServiceFQDNMismatch,
		},
		"a host with a port of its own is no endpoint": {
			task: fxTask(), sandbox: fxSandbox(own+":9999", sbReady("True", "")),
			phase: "Provisioning", reason: ReasonServiceFQDNMismatch,
		},
		"a Running task whose Sandbox reports another host drops to Provisioning": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
				t.Status.Phase, t.Status.CalibandEndpoint = "Running", own+":8443"
				t.Status.Conditions = []metav1.Condition{readyCond("True", "Running", "caliband is serving at "+own+":8443", tEarlier)}
			}),
			sandbox: fxSandbox("collector.example.com", sbReady("True", "")),
			phase:   "Provisioning", reason: ReasonServiceFQDNMismatch,
		},
		"a Sandbox that is not ready is not ready, whatever host it reports": {
			task: fxTask(), sandbox: fxSandbox("collector.example.com", sbReady("False", "Pod exists with phase: Pending")),
			phase: "Provisioning", reason: ReasonSandboxNotReady, message: "Pod exists with phase: Pending",
		},
		"a draining task tells prospero only its own Service": {
			task: fxTask(pinned, deletedAt(tStart)), sandbox: fxSandbox(own, sbReady("True", "")),
			phase: "Draining", reason: ReasonDraining, endpoint: own + ":8443",
		},
		"a draining task whose Sandbox reports another host has no endpoint": {
			task: fxTask(pinned, deletedAt(tStart)), sandbox: fxSandbox("collector.example.com", sbReady("True", "")),
			phase: "Draining", reason: ReasonDraining,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := config.DefaultAgentSettings()
			if tc.settings != nil {
				s = *tc.settings
			}
			got := TaskStatus(TaskStatusInput{Task: tc.task, Pin: fxPin(), Posture: "supervised", Sandbox: observe(tc.sandbox), Now: tNow, DrainTimeout: time.Minute}, s)
			ready := meta.FindStatusCondition(got.Conditions, ConditionReady)
			if ready == nil {
				t.Fatalf("no Ready condition in %+v", got)
			}
			if diff := cmp.Diff([]string{string(tc.phase), tc.reason, tc.endpoint}, []string{string(got.Phase), ready.Reason, got.CalibandEndpoint}); diff != "" {
				t.Errorf("phase, Ready reason, endpoint (-want +got):\n%s", diff)
			}
			if tc.message != "" {
				if diff := cmp.Diff(tc.message, ready.Message); diff != "" {
					t.Errorf("Ready message (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// The status written with the pin, before the Sandbox exists, is the
// status of the freshly applied Sandbox that has no condition yet: applying
// the children then needs no second status write.
func TestThePinStatusIsTheStatusOfAFreshSandbox(t *testing.T) {
	before := TaskStatus(TaskStatusInput{Task: fxTask(), Pin: fxPin(), Posture: "supervised", Now: tNow}, config.DefaultAgentSettings())
	after := TaskStatus(TaskStatusInput{Task: fxTask(), Pin: fxPin(), Posture: "supervised", Sandbox: observe(fxSandbox("")), Now: tNow}, config.DefaultAgentSettings())
	if TaskStatusChanged(before, after) {
		t.Errorf("a fresh Sandbox changes the status:\n%s", cmp.Diff(before, after))
	}
}

func TestTaskStatusChanged(t *testing.T) {
	const fqdn = "fix-bug-sbx.team.svc.cluster.local"
	in := TaskStatusInput{Task: fxTask(), Pin: fxPin(), Posture: "supervised", Sandbox: observe(fxSandbox(fqdn, sbReady("True", ""))), Now: tNow}
	running := TaskStatus(in, config.DefaultAgentSettings())
	stored := fxTask(func(t *calibanv1alpha1.CalibanTask) { t.Status = *running.DeepCopy() })
	tests := map[string]struct {
		current calibanv1alpha1.CalibanTaskStatus
		changed bool
	}{
		"a status equal in every owned field is unchanged": {current: stored.Status},
		"prospero's condition beside ours does not count": {
			current: fxTask(func(t *calibanv1alpha1.CalibanTask) { t.Status = *running.DeepCopy() }, settledCond("False", "AgentsActive", "")).Status,
		},
		"an empty status is a change":             {current: calibanv1alpha1.CalibanTaskStatus{}, changed: true},
		"a different phase is a change":           {current: mutate(running, func(s *calibanv1alpha1.CalibanTaskStatus) { s.Phase = "Provisioning" }), changed: true},
		"a missing endpoint is a change":          {current: mutate(running, func(s *calibanv1alpha1.CalibanTaskStatus) { s.CalibandEndpoint = "" }), changed: true},
		"a missing sandboxRef is a change":        {current: mutate(running, func(s *calibanv1alpha1.CalibanTaskStatus) { s.SandboxRef = nil }), changed: true},
		"a missing pin is a change":               {current: mutate(running, func(s *calibanv1alpha1.CalibanTaskStatus) { s.ResolvedWorkspace = nil }), changed: true},
		"another posture is a change":             {current: mutate(running, func(s *calibanv1alpha1.CalibanTaskStatus) { s.PermissionPosture = "unattended" }), changed: true},
		"an older observedGeneration is a change": {current: mutate(running, func(s *calibanv1alpha1.CalibanTaskStatus) { s.ObservedGeneration = 0 }), changed: true},
		"another requester is a change":           {current: mutate(running, func(s *calibanv1alpha1.CalibanTaskStatus) { s.RequestedBy = "mallory" }), changed: true},
		"another pin signature is a change":       {current: mutate(running, func(s *calibanv1alpha1.CalibanTaskStatus) { s.PinSignature = "v1:forged" }), changed: true},
		"another Ready message is a change": {
			current: mutate(running, func(s *calibanv1alpha1.CalibanTaskStatus) { s.Conditions[0].Message = "x" }), changed: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := TaskStatusChanged(tc.current, running); got != tc.changed {
				t.Errorf("changed = %v, want %v", got, tc.changed)
			}
		})
	}

	t.Run("a second derivation from the stored status changes nothing", func(t *testing.T) {
		in2 := in
		in2.Task = stored
		in2.Now = metav1.NewTime(tNow.Add(time.Hour))
		if TaskStatusChanged(stored.Status, TaskStatus(in2, config.DefaultAgentSettings())) {
			t.Error("a resync would write")
		}
	})
}

func TestTheRequesterIsReadFromTheAnnotationOnEveryPass(t *testing.T) {
	annotated := func(who string) func(*calibanv1alpha1.CalibanTask) {
		return func(t *calibanv1alpha1.CalibanTask) {
			t.Annotations = map[string]string{calibanv1alpha1.AnnotationRequestedBy: who}
		}
	}
	pinned := func(who string) func(*calibanv1alpha1.CalibanTask) {
		return func(t *calibanv1alpha1.CalibanTask) {
			t.Status.ResolvedWorkspace, t.Status.PermissionPosture, t.Status.RequestedBy = fxPin(), "supervised", who
			t.Status.StartTime = &tEarlier
		}
	}
	tests := map[string]struct {
		task *calibanv1alpha1.CalibanTask
		pin  *calibanv1alpha1.ResolvedWorkspace
		want string
	}{
		"a task pinned by this pass records its annotation":                  {task: fxTask(annotated("alice")), pin: fxPin(), want: "alice"},
		"a task pinned without the annotation records nobody":                {task: fxTask(), pin: fxPin(), want: ""},
		"a task waiting for its Workspace records nothing yet":               {task: fxTask(annotated("alice")), want: ""},
		"a status rewritten by someone else is put back from the annotation": {task: fxTask(pinned("mallory"), annotated("alice")), pin: fxPin(), want: "alice"},
		"a status record erased by someone else is put back":                 {task: fxTask(pinned(""), annotated("alice")), pin: fxPin(), want: "alice"},
		"a record without the annotation behind it is dropped":               {task: fxTask(pinned("mallory")), pin: fxPin(), want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := TaskStatus(TaskStatusInput{Task: tc.task, Pin: tc.pin, Posture: "supervised", Now: tNow}, config.DefaultAgentSettings())
			if got.RequestedBy != tc.want {
				t.Errorf("requestedBy %q, want %q", got.RequestedBy, tc.want)
			}
		})
	}
}

func TestUnattendedAdmittedNote(t *testing.T) {
	tests := map[string]struct {
		requestedBy, want string
	}{
		"it names the Workspace and who asked": {requestedBy: "alice",
			want: "admitted unattended: the configuration pinned from workspace 'trusting' sets agentPolicy.allowUnattended; requested by 'alice'"},
		"without a record it names the Workspace only": {
			want: "admitted unattended: the configuration pinned from workspace 'trusting' sets agentPolicy.allowUnattended"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := UnattendedAdmittedNote("trusting", tc.requestedBy); got != tc.want {
				t.Errorf("note %q, want %q", got, tc.want)
			}
		})
	}
}

func mutate(s calibanv1alpha1.CalibanTaskStatus, f func(*calibanv1alpha1.CalibanTaskStatus)) calibanv1alpha1.CalibanTaskStatus {
	s = *s.DeepCopy()
	f(&s)
	return s
}

func TestTheStatusSaysWhenThePhaseWasEntered(t *testing.T) {
	earlier := metav1.NewTime(tNow.Add(-2 * time.Hour))
	for name, tc := range map[string]struct {
		task *calibanv1alpha1.CalibanTask
		want *metav1.Time
	}{
		"a new phase is entered now": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
				t.Status.Phase, t.Status.PhaseTransitionTime = calibanv1alpha1.TaskSuspended, &earlier
			}),
			want: &tNow,
		},
		"the same phase keeps its time": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
				t.Status.Phase, t.Status.PhaseTransitionTime = calibanv1alpha1.TaskProvisioning, &earlier
			}),
			want: &earlier,
		},
		"a phase written before the field stays without one": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) { t.Status.Phase = calibanv1alpha1.TaskProvisioning }),
		},
	} {
		t.Run(name, func(t *testing.T) {
			tc.task.Status.ResolvedWorkspace = fxPin()
			got := TaskStatus(TaskStatusInput{Task: tc.task, Pin: fxPin(), Posture: calibanv1alpha1.PostureSupervised, Now: tNow}, config.DefaultAgentSettings())
			if got.Phase != calibanv1alpha1.TaskProvisioning {
				t.Fatalf("phase %s, want Provisioning (no Sandbox yet)", got.Phase)
			}
			if !got.PhaseTransitionTime.Equal(tc.want) {
				t.Errorf("phaseTransitionTime %v, want %v", got.PhaseTransitionTime, tc.want)
			}
			if tc.want != nil && !tc.want.Equal(tc.task.Status.PhaseTransitionTime) && !TaskStatusChanged(tc.task.Status, got) {
				t.Error("a new phaseTransitionTime is not a change")
			}
		})
	}
}
