// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package diagnose says, as a pure function, what a CalibanTask is waiting
// for: the one line `kubectl caliban why` prints and `kubectl caliban
// describe` ends with. It reads only what it is given (the task, its
// Workspace, Sandbox, pod and Events), so the plugin gathers and this
// package decides, as pkg/builders does for the operator.
package diagnose

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// Input is everything a diagnosis reads. A nil Workspace, Sandbox or Pod
// means it does not exist (or was not found).
type Input struct {
	Task      *calibanv1alpha1.CalibanTask
	Workspace *calibanv1alpha1.Workspace
	Sandbox   *sandboxv1beta1.Sandbox
	Pod       *corev1.Pod
	// Events regarding the task or its pod, in any order.
	Events []eventsv1.Event
}

// Diagnosis is what the task waits for.
type Diagnosis struct {
	// Waiting completes "waiting for: ": what has to happen next, with the
	// evidence (a message from the status, the pod or an Event).
	Waiting string
	// Blocked is true while the task neither runs nor has finished: it is
	// waiting on someone (a person, the operator, agent-sandbox, prospero).
	Blocked bool
}

// Line is the one line `why` prints.
func (d Diagnosis) Line() string { return "waiting for: " + d.Waiting }

// secretNotFound finds the Secret a status message says is missing, in the
// operator's spellings: `secret 'x' not found`, `secret 'x' key 'k' not
// found` (docs/crd-reference.md, Workspace validation and state checks).
var secretNotFound = regexp.MustCompile(`secret '([^']+)'(?: key '[^']+')? not found`)

// Task decides what the task of in waits for. The phase the operator wrote
// is trusted first: it already applies the precedence of
// docs/crd-reference.md#phase-precedence, so this function only explains
// it, with the objects the phase depends on.
func Task(in Input) Diagnosis {
	task := in.Task
	ready := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady)
	reason, message := "", ""
	if ready != nil {
		reason, message = ready.Reason, ready.Message
	}
	switch task.Status.Phase {
	case calibanv1alpha1.TaskRunning:
		return Diagnosis{Waiting: "nothing (Running)"}
	case calibanv1alpha1.TaskCompleted:
		return Diagnosis{Waiting: "nothing (Completed: " + orText(message, "every agent has finished") + ")"}
	case calibanv1alpha1.TaskDraining:
		return draining(task, message)
	case calibanv1alpha1.TaskFailed:
		return failed(in, reason, message)
	case calibanv1alpha1.TaskSuspended:
		if message == builders.ResumingMessage {
			return Diagnosis{Waiting: "agent-sandbox to resume the Sandbox (" + message + ")", Blocked: true}
		}
		return Diagnosis{Waiting: "spec.suspend to be false (Suspended; resume with: kubectl caliban resume " + task.Name + ")", Blocked: true}
	case calibanv1alpha1.TaskProvisioning:
		return provisioning(in, reason, message)
	case "", calibanv1alpha1.TaskPending:
		return pending(in)
	}
	return Diagnosis{Waiting: fmt.Sprintf("the operator (unknown phase %q)", task.Status.Phase), Blocked: true}
}

// failed tells an outcome (the task has finished; nothing to wait for)
// from a problem a person can fix (the task is retried every 30 s).
func failed(in Input, reason, message string) Diagnosis {
	switch reason {
	case builders.ReasonAgentsFailed, builders.ReasonDeadlineExceeded:
		return Diagnosis{Waiting: fmt.Sprintf("nothing (Failed, %s: %s)", reason, message)}
	case builders.ReasonWorkspaceUnresolved:
		ws := in.Task.Spec.WorkspaceRef.Name
		switch {
		case in.Workspace == nil:
			return Diagnosis{Waiting: fmt.Sprintf("Workspace %s to be created (%s: %s)", ws, reason, message), Blocked: true}
		case in.Workspace.Status.Phase == calibanv1alpha1.WorkspaceFailed:
			return Diagnosis{Waiting: fmt.Sprintf("Workspace %s is Failed: %s", ws, orText(in.Workspace.Status.Message, "validation failed")), Blocked: true}
		}
	}
	if m := secretNotFound.FindStringSubmatch(message); m != nil {
		return Diagnosis{Waiting: fmt.Sprintf("Secret %q to be created (%s: %s)", m[1], reason, message), Blocked: true}
	}
	return Diagnosis{Waiting: fmt.Sprintf("a fix to the task (Failed, %s: %s)", orText(reason, "no Ready condition"), message), Blocked: true}
}

func pending(in Input) Diagnosis {
	task := in.Task
	ws := task.Spec.WorkspaceRef.Name
	switch {
	case in.Workspace == nil:
		return Diagnosis{Waiting: fmt.Sprintf("Workspace %s to be created", ws), Blocked: true}
	case in.Workspace.Status.Phase == calibanv1alpha1.WorkspaceFailed:
		return Diagnosis{Waiting: fmt.Sprintf("Workspace %s is Failed: %s", ws, orText(in.Workspace.Status.Message, "validation failed")), Blocked: true}
	case task.Status.Phase == "":
		return Diagnosis{Waiting: "the operator to admit the task (it has no status yet: is caliban-operator running and watching this namespace?)", Blocked: true}
	}
	return Diagnosis{Waiting: fmt.Sprintf("the operator to validate Workspace %s (its phase is %q)", ws, in.Workspace.Status.Phase), Blocked: true}
}

func draining(task *calibanv1alpha1.CalibanTask, message string) Diagnosis {
	what := "prospero's AgentsDrained condition"
	if c := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionAgentsDrained); c != nil {
		what += fmt.Sprintf(" (it is %s, %s: %s)", c.Status, c.Reason, c.Message)
	}
	return Diagnosis{Waiting: what + " (Draining: " + message + ")", Blocked: true}
}

// provisioning follows the task down to what agent-sandbox made of it:
// the Sandbox, the pod, its init container and its containers.
func provisioning(in Input, reason, message string) Diagnosis {
	switch {
	case reason == builders.ReasonSandboxAPIUnavailable:
		return Diagnosis{Waiting: "agent-sandbox to be installed (" + message + ")", Blocked: true}
	case reason == builders.ReasonServiceFQDNMismatch:
		return Diagnosis{Waiting: "agent-sandbox to report the Sandbox's own Service as its address (" + message + ")", Blocked: true}
	case strings.HasPrefix(message, "retrying: "):
		return Diagnosis{Waiting: "the apiserver to accept the task's children (" + message + ")", Blocked: true}
	case in.Sandbox == nil && builders.IsWarm(in.Task):
		return Diagnosis{Waiting: "agent-sandbox: SandboxClaim " + builders.ClaimName(in.Task.Name) + " to hold a Sandbox from warm pool " +
			builders.WarmPoolName(in.Task.Spec.WorkspaceRef.Name), Blocked: true}
	case in.Sandbox == nil:
		return Diagnosis{Waiting: "the operator to create Sandbox " + SandboxName(in.Task), Blocked: true}
	case in.Sandbox.Spec.OperatingMode == sandboxv1beta1.OperatingModeSuspended:
		return Diagnosis{Waiting: "agent-sandbox: Sandbox " + in.Sandbox.Name + " is Suspended", Blocked: true}
	case in.Pod == nil:
		return Diagnosis{Waiting: "agent-sandbox: no pod yet (" + sandboxReady(in.Sandbox) + ")", Blocked: true}
	}
	return podState(in)
}

func podState(in Input) Diagnosis {
	p := in.Pod
	blocked := func(s string) Diagnosis { return Diagnosis{Waiting: s, Blocked: true} }
	if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
		return blocked(fmt.Sprintf("agent-sandbox: pod %s (%s)", p.Status.Phase, orText(c.Message, c.Reason)))
	}
	for _, s := range p.Status.InitContainerStatuses {
		if problem := containerProblem(s); problem != "" {
			return blocked(fmt.Sprintf("init container %s: %s", s.Name, problem))
		}
		if s.State.Running != nil {
			return blocked(fmt.Sprintf("init container %s to finish (running)", s.Name))
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if problem := containerProblem(s); problem != "" {
			return blocked(fmt.Sprintf("container %s: %s", s.Name, problem))
		}
	}
	if p.Status.Phase == corev1.PodPending {
		if e := newestWarning(in.Events, p.UID); e != nil {
			return blocked(fmt.Sprintf("agent-sandbox: pod Pending (%s: %s)", e.Reason, e.Note))
		}
		return blocked("agent-sandbox: pod Pending")
	}
	if c := podCondition(p, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
		return blocked(fmt.Sprintf("container %s to become ready (pod %s, not Ready)", builders.ContainerCaliband, p.Status.Phase))
	}
	return blocked("agent-sandbox: Sandbox " + in.Sandbox.Name + " to report Ready (" + sandboxReady(in.Sandbox) + ")")
}

// containerProblem is why a container cannot run, "" when nothing is
// wrong with it: waiting for a reason other than starting up, or its last
// run ended in failure.
func containerProblem(s corev1.ContainerStatus) string {
	last := s.LastTerminationState.Terminated
	if w := s.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" && w.Reason != "ContainerCreating" {
		out := w.Reason
		switch {
		case last != nil && last.ExitCode != 0:
			out += " " + terminated(last)
		case w.Message != "":
			out += " (" + w.Message + ")"
		}
		return out
	}
	if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
		return orText(t.Reason, "Terminated") + " " + terminated(t)
	}
	return ""
}

func terminated(t *corev1.ContainerStateTerminated) string {
	s := fmt.Sprintf("(exit code %d", t.ExitCode)
	if t.Message != "" {
		s += ": " + strings.TrimSpace(t.Message)
	}
	return s + ")"
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// newestWarning is the latest Warning Event regarding the object uid.
func newestWarning(events []eventsv1.Event, uid types.UID) *eventsv1.Event {
	var out *eventsv1.Event
	for i := range events {
		e := &events[i]
		if e.Type != corev1.EventTypeWarning || e.Regarding.UID != uid {
			continue
		}
		if out == nil || EventTime(*e).After(EventTime(*out).Time) {
			out = e
		}
	}
	return out
}

// EventTime is when an Event last happened: its series' last observation,
// else its eventTime, else the deprecated timestamps older reporters set.
func EventTime(e eventsv1.Event) metav1.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return metav1.NewTime(e.Series.LastObservedTime.Time)
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp
	}
	return e.CreationTimestamp
}

// SortEvents orders Events oldest first, as kubectl describe lists them.
func SortEvents(events []eventsv1.Event) {
	slices.SortStableFunc(events, func(a, b eventsv1.Event) int {
		return EventTime(a).Compare(EventTime(b).Time)
	})
}

func sandboxReady(sb *sandboxv1beta1.Sandbox) string {
	c := meta.FindStatusCondition(sb.Status.Conditions, builders.ConditionReady)
	if c == nil {
		return "Sandbox " + sb.Name + " reports no Ready condition yet"
	}
	return fmt.Sprintf("Sandbox %s Ready=%s, %s: %s", sb.Name, c.Status, c.Reason, c.Message)
}

// SandboxName is the task's Sandbox: the name the operator recorded, or
// the one it would use (docs/crd-reference.md#names); a warm task's claim
// names its Sandbox, "" until it holds one.
func SandboxName(task *calibanv1alpha1.CalibanTask) string {
	if task.Status.SandboxRef != nil && task.Status.SandboxRef.Name != "" {
		return task.Status.SandboxRef.Name
	}
	if builders.IsWarm(task) {
		return ""
	}
	return builders.SandboxName(task.Name)
}

func orText(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// podNameAnnotation is where agent-sandbox records the pod of a Sandbox
// that adopted a pod of another name (a warm pool's); otherwise the pod is
// named after the Sandbox.
const podNameAnnotation = "agents.x-k8s.io/pod-name"

// PodName is the name of the pod agent-sandbox runs for the Sandbox sb of
// task (sb nil: not observed; the pod would have the Sandbox's name).
func PodName(task *calibanv1alpha1.CalibanTask, sb *sandboxv1beta1.Sandbox) string {
	if sb == nil {
		return SandboxName(task)
	}
	if name := sb.Annotations[podNameAnnotation]; name != "" {
		return name
	}
	return sb.Name
}
