// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"bytes"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	goldenfile "github.com/caliban-ai/caliban-operator/test/golden"
)

// golden is the repository's golden-file comparison.
var golden = goldenfile.Compare

func TestPrintTable(t *testing.T) {
	tasks := []calibanv1alpha1.CalibanTask{
		*fxTask("fix-login", "team-a", running),
		*fxTask("stuck", "team-a", blockedOnWorkspace),
		*fxTask("fresh", "team-b", func(t *calibanv1alpha1.CalibanTask) {
			t.CreationTimestamp = metav1.NewTime(fxNow.Add(-3 * time.Second))
		}),
	}
	tests := map[string]struct {
		withNamespace bool
		file          string
	}{
		"one namespace: no NAMESPACE column":       {file: "get.txt"},
		"all namespaces: a NAMESPACE column first": {withNamespace: true, file: "get-all-namespaces.txt"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := PrintTable(&out, tasks, fxNow, test.withNamespace); err != nil {
				t.Fatal(err)
			}
			golden(t, test.file, out.Bytes())
		})
	}
}

func TestPrintObject(t *testing.T) {
	task := fxTask("fix-login", "team-a", running)
	task.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "caliban-operator"}}
	list := &calibanv1alpha1.CalibanTaskList{Items: []calibanv1alpha1.CalibanTask{*task}}
	for _, format := range []string{"json", "yaml"} {
		t.Run("a list as "+format+" has its kinds and no managedFields", func(t *testing.T) {
			var out bytes.Buffer
			if err := printObject(&out, list, format); err != nil {
				t.Fatal(err)
			}
			golden(t, "get-list."+format, out.Bytes())
		})
	}
	if len(list.Items[0].ManagedFields) == 0 {
		t.Errorf("printObject changed the object it was given")
	}
}

func TestDescribe(t *testing.T) {
	tests := map[string]struct {
		snapshot *Snapshot
		file     string
	}{
		"a Running task shows its pin, children, pod and both owners' conditions": {
			snapshot: &Snapshot{
				Task:           fxTask("fix-login", "team-a", running),
				Workspace:      fxWorkspace("ws", calibanv1alpha1.WorkspaceReady, ""),
				Sandbox:        fxSandbox("fix-login", metav1.ConditionTrue, "DependenciesReady", "Pod is Ready; Service Exists"),
				ServiceAccount: fxServiceAccount(),
				NetworkPolicy:  fxNetworkPolicy(),
				Pod:            fxPod("fix-login"),
				TaskEvents: []eventsv1.Event{
					fxEvent("uid-fix-login", "Normal", "PhaseChanged", "Provisioning → Running", 23*time.Minute),
				},
				PodEvents: []eventsv1.Event{
					fxEvent(fxPodUID, "Normal", "Scheduled", "Successfully assigned team-a/fix-login-sbx to kwok-node-0", 24*time.Minute),
				},
			},
			file: "describe-running.txt",
		},
		"a warm task shows its launch, its claim and the pool's ServiceAccount": {
			snapshot: fxWarmSnapshot(),
			file:     "describe-warm.txt",
		},
		"a warm task shows a second Sandbox of its claim and counts those removed": {
			snapshot: func() *Snapshot {
				s := fxWarmSnapshot()
				dup := fxSandbox("quick", metav1.ConditionTrue, "DependenciesReady", "Pod is Ready; Service Exists")
				dup.Name = builders.ClaimName("quick")
				s.Duplicates = []sandboxv1beta1.Sandbox{*dup}
				note := builders.DuplicateRemovedNote("quick-claim-old", builders.ClaimName("quick"), s.Sandbox.Name)
				s.TaskEvents = []eventsv1.Event{
					fxEvent("uid-quick", "Warning", builders.ReasonDuplicateSandboxRemoved, note, 20*time.Minute),
					fxEvent("uid-quick", "Normal", "PhaseChanged", "Provisioning → Running", 22*time.Minute),
					fxEvent("uid-quick", "Warning", builders.ReasonDuplicateSandboxRemoved, note, 2*time.Minute),
				}
				return s
			}(),
			file: "describe-warm-duplicate.txt",
		},
		"a task blocked on a Failed Workspace has no children and says what it waits for": {
			snapshot: &Snapshot{
				Task:      fxTask("stuck", "team-a", blockedOnWorkspace),
				Workspace: fxWorkspace("wsb", calibanv1alpha1.WorkspaceFailed, "provider 'planner': secret 'no-such-secret' key 'api-key' not found"),
				TaskEvents: []eventsv1.Event{
					fxEvent("uid-stuck", "Warning", "WorkspaceUnresolved", "workspace 'wsb' not ready: provider 'planner': secret 'no-such-secret' key 'api-key' not found", 24*time.Minute),
				},
			},
			file: "describe-blocked.txt",
		},
		"a task whose clone fails shows the init container's state and a forbidden read": {
			snapshot: &Snapshot{
				Task: fxTask("bad-clone", "team-a", running, func(t *calibanv1alpha1.CalibanTask) {
					t.Status.Phase, t.Status.CalibandEndpoint = calibanv1alpha1.TaskProvisioning, ""
					t.Status.Conditions[0] = metav1.Condition{Type: builders.ConditionReady, Status: metav1.ConditionFalse,
						Reason: builders.ReasonSandboxNotReady, Message: "Pod exists with phase: Pending", LastTransitionTime: fxStarted}
				}),
				Workspace:      fxWorkspace("ws", calibanv1alpha1.WorkspaceReady, ""),
				Sandbox:        fxSandbox("bad-clone", metav1.ConditionFalse, "DependenciesNotReady", "Pod exists with phase: Pending"),
				ServiceAccount: fxServiceAccount(),
				NetworkPolicy:  fxNetworkPolicy(),
				Pod: fxPod("bad-clone", func(p *corev1.Pod) {
					p.Status.Phase = corev1.PodPending
					p.Status.Conditions[1].Status = corev1.ConditionFalse
					p.Status.InitContainerStatuses[0] = corev1.ContainerStatus{Name: builders.ContainerClone, RestartCount: 3,
						State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
						LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 128, Message: "fatal: could not read Username for 'https://example.com': terminal prompts disabled\n"}}}
					p.Status.ContainerStatuses[0] = corev1.ContainerStatus{Name: builders.ContainerCaliband,
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
				}),
				Problems: []string{`Events of the pod: events.events.k8s.io is forbidden: User "bob" cannot list resource "events" in API group "events.k8s.io" in the namespace "team-a"`},
			},
			file: "describe-clone-failing.txt",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Describe(&out, test.snapshot, fxNow); err != nil {
				t.Fatal(err)
			}
			golden(t, test.file, out.Bytes())
		})
	}
}

// fxWarmSnapshot is a Running warm task on a pool Sandbox.
func fxWarmSnapshot() *Snapshot {
	return &Snapshot{
		Task: fxTask("quick", "team-a", running, func(t *calibanv1alpha1.CalibanTask) {
			sb := builders.WarmPoolName("ws") + "-x7k2p"
			t.Status.SandboxRef.Name = sb
			t.Status.CalibandEndpoint = sb + ".team-a.svc.cluster.local:8443"
			t.Status.Conditions[0].Message = "caliband is serving at " + t.Status.CalibandEndpoint
			t.Status.Launch = &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchWarm, Reason: builders.ReasonLaunchWarmPool,
				Message: "claims a Sandbox from warm pool 'ws-warm' (SandboxTemplate 'ws-warm-0123456789')",
				Claim:   &calibanv1alpha1.ClaimReference{Name: builders.ClaimName("quick"), UID: "uid-claim"}}
		}),
		Workspace: fxWorkspace("ws", calibanv1alpha1.WorkspaceReady, ""),
		Sandbox: func() *sandboxv1beta1.Sandbox {
			sb := fxSandbox("quick", metav1.ConditionTrue, "DependenciesReady", "Pod is Ready; Service Exists")
			sb.Name = builders.WarmPoolName("ws") + "-x7k2p"
			return sb
		}(),
		ServiceAccount: fxServiceAccount(),
		NetworkPolicy:  fxNetworkPolicy(),
	}
}
