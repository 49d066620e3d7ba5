// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// prospero's condition on a task, and the reasons the operator maps.
const (
	ConditionAgentsSettled = "AgentsSettled"
	SettledSucceeded       = "Succeeded"
	SettledFailed          = "Failed"

	agentsFailedFallback = "one or more agents failed or crashed"
)

// SandboxAPIUnavailableMessage is the Ready message of a task that waits
// for agent-sandbox to be installed.
var SandboxAPIUnavailableMessage = fmt.Sprintf(
	"agent-sandbox's API %s.%s/%s is not served; install agent-sandbox (its CRD and controller): the task stays Provisioning until then",
	SandboxResource, sandboxv1beta1.SchemeGroupVersion.Group, sandboxv1beta1.SchemeGroupVersion.Version)

// TaskStatusInput is everything a task's status is derived from.
type TaskStatusInput struct {
	// Task as read from the cache; its own conditions (prospero's
	// AgentsSettled) are read, never written.
	Task *calibanv1alpha1.CalibanTask
	// Failure, when set, is why the task cannot run this pass.
	Failure *Failure
	// Pin is the configuration the task runs under: the stored pin, or the
	// one just decided. Nil before admission.
	Pin *calibanv1alpha1.ResolvedWorkspace
	// Posture is the admitted posture (meaningful with Pin).
	Posture calibanv1alpha1.PermissionPosture
	// PinSignature is the pin's signature: the stored one, or SignPin's for
	// a pin just decided. Empty for a pin from before the operator signed.
	PinSignature string
	// Sandbox is the task's Sandbox as observed, nil when there is none.
	Sandbox *ObservedSandbox
	// SandboxAPIMissing says agent-sandbox's Sandbox API is not served, so
	// no Sandbox can be applied: the task waits in Provisioning.
	SandboxAPIMissing bool
	// ApplyProblem, when set, is why a child could not be applied this
	// pass (an admission policy's denial, a quota): a task not Running yet
	// says so in its Ready message while the apply is retried.
	ApplyProblem string
	// Now stamps a Ready condition whose status changes, and the start of a
	// task pinned by this pass; the deadline is measured against it.
	Now metav1.Time
	// DrainTimeout bounds a Draining task's wait (its Ready message says
	// until when).
	DrainTimeout time.Duration
	// Launch is the path the task's Sandbox takes: the one just decided
	// with the pin, or, for a pinned task, nil to keep the stored one.
	Launch *calibanv1alpha1.Launch
	// Unreachable, when set, is why a warm task whose Sandbox serves is not
	// Running yet: its NetworkPolicy selects no ready pod of that Sandbox
	// (PodReachable), so prospero could not reach caliband.
	Unreachable string
}

// TaskStatus derives the whole status the operator owns (the derivation table
// of docs/crd-reference.md#phases): phase, endpoint, sandboxRef, the pin, the
// admitted posture, observedGeneration and the Ready condition. It is total: a
// field left out is a field server-side apply removes. Conditions of other
// owners are not in it.
func TaskStatus(in TaskStatusInput, s config.AgentSettings) calibanv1alpha1.CalibanTaskStatus {
	task := in.Task
	status := calibanv1alpha1.CalibanTaskStatus{
		ObservedGeneration: task.Generation,
		ResolvedWorkspace:  in.Pin,
		CheckpointRef:      CheckpointRef(task),
	}
	if in.Pin != nil {
		status.PermissionPosture = in.Posture
		status.PinSignature = in.PinSignature
		status.RequestedBy = RequestedBy(task)
		status.Launch = launchOf(in)
		status.StartTime = task.Status.StartTime
		if status.StartTime == nil && task.Status.ResolvedWorkspace == nil {
			// Pinned by this pass: the deadline counts from now, which the
			// lifecycle below must see as the task's start.
			start := in.Now.Rfc3339Copy()
			status.StartTime = &start
			pinned := *task
			pinned.Status.StartTime = &start
			task = &pinned
		}
	}
	if in.Sandbox != nil {
		status.SandboxRef = &calibanv1alpha1.SandboxReference{Name: in.Sandbox.Name}
	}

	var ready *metav1.Condition
	setReady := func(st metav1.ConditionStatus, reason, message string) {
		ready = &metav1.Condition{Type: ConditionReady, Status: st, Reason: reason, Message: message, ObservedGeneration: task.Generation}
	}
	now := in.Now.Time
	finishedAt := func(at time.Time) {
		t := metav1.NewTime(at).Rfc3339Copy()
		status.CompletionTime = &t
	}
	settled := settledInTime(task)
	warm := status.Launch != nil && status.Launch.Type == calibanv1alpha1.LaunchWarm
	// The precedence of docs/crd-reference.md#lifecycle: first match wins.
	switch {
	case in.Pin != nil && Draining(task):
		status.Phase = calibanv1alpha1.TaskDraining
		status.CompletionTime = task.Status.CompletionTime
		if in.Sandbox != nil && SandboxServing(&in.Sandbox.Status) && serviceFQDNProblem(in.Sandbox, task.Namespace, s) == "" {
			// prospero drains through caliband: keep telling it where.
			status.CalibandEndpoint = calibandEndpoint(in.Sandbox, task.Namespace, s)
		}
		setReady(metav1.ConditionFalse, ReasonDraining, drainingMessage(task, in.DrainTimeout))
	case in.Failure != nil:
		status.Phase = calibanv1alpha1.TaskFailed
		setReady(metav1.ConditionFalse, in.Failure.Reason, in.Failure.Message)
		if in.Failure.Reason == ReasonLaunchNotTrusted {
			// The operator follows no launch it did not decide, and writes
			// none either: the launch, and the Sandbox it last named, stay
			// as they are (and are right again once the launch is put back).
			status.Launch, status.SandboxRef = task.Status.Launch, task.Status.SandboxRef
		}
	case in.Pin == nil:
		// Waiting for the workspace: Pending, and nothing else claimed.
		status.Phase = calibanv1alpha1.TaskPending
	case settled != nil && settled.Reason == SettledSucceeded:
		// prospero's verdict is true whatever the Sandbox does; a refused
		// onFinish suspend shows in the message.
		status.Phase = calibanv1alpha1.TaskCompleted
		finishedAt(settled.LastTransitionTime.Time)
		setReady(metav1.ConditionFalse, ReasonCompleted, orApplyProblem(in, "every agent has finished"))
	case settled != nil:
		status.Phase = calibanv1alpha1.TaskFailed
		finishedAt(settled.LastTransitionTime.Time)
		msg := settled.Message
		if msg == "" {
			msg = agentsFailedFallback
		}
		setReady(metav1.ConditionFalse, ReasonAgentsFailed, orApplyProblem(in, msg))
	// What the operator itself stops (the deadline, spec.suspend) is
	// reported stopped only once the cluster shows it: agent-sandbox accepted
	// operatingMode Suspended and no longer reports the Sandbox Ready (or
	// the task has no Sandbox, so nothing runs). Until then the task keeps
	// its last true phase, below.
	case pastDeadline(task, now) && parked(in):
		status.Phase = calibanv1alpha1.TaskFailed
		finishedAt(Deadline(task))
		setReady(metav1.ConditionFalse, ReasonDeadlineExceeded, deadlineMessage(task))
	case task.Spec.Suspend && parked(in):
		status.Phase = calibanv1alpha1.TaskSuspended
		if !warm {
			status.SandboxRef = &calibanv1alpha1.SandboxReference{Name: SandboxName(task.Name)}
		}
		setReady(metav1.ConditionFalse, ReasonSuspended, orApplyProblem(in, SuspendedMessage))
	case in.Sandbox != nil && sandboxParked(in.Sandbox):
		// Resumed in the spec, not yet in the cluster (the apply is refused,
		// or is this very pass's): the Sandbox still has no pod.
		status.Phase = calibanv1alpha1.TaskSuspended
		setReady(metav1.ConditionFalse, ReasonSuspended, orApplyProblem(in, ResumingMessage))
	case in.SandboxAPIMissing:
		status.Phase = calibanv1alpha1.TaskProvisioning
		setReady(metav1.ConditionFalse, ReasonSandboxAPIUnavailable, SandboxAPIUnavailableMessage)
	case in.Sandbox == nil && warm:
		// The claim's Sandbox is named by the pool, or by the claim.
		status.Phase = calibanv1alpha1.TaskProvisioning
		msg := fmt.Sprintf("SandboxClaim %s holds no Sandbox yet", ClaimName(task.Name))
		if in.ApplyProblem != "" {
			msg = applyProblemMessage(in.ApplyProblem)
		}
		setReady(metav1.ConditionFalse, ReasonSandboxNotReady, msg)
	case in.Sandbox == nil:
		// Admitted and pinned; the Sandbox is applied right after the pin,
		// under this name. Saying now what the status will say once it
		// exists, and not ready yet, saves a write per task.
		name := SandboxName(task.Name)
		status.Phase = calibanv1alpha1.TaskProvisioning
		status.SandboxRef = &calibanv1alpha1.SandboxReference{Name: name}
		msg := sandboxNotReadyMessage(name)
		if in.ApplyProblem != "" {
			msg = applyProblemMessage(in.ApplyProblem)
		}
		setReady(metav1.ConditionFalse, ReasonSandboxNotReady, msg)
	default:
		serving := SandboxServing(&in.Sandbox.Status)
		if problem := serviceFQDNProblem(in.Sandbox, task.Namespace, s); serving && problem != "" {
			// Whoever may write the Sandbox's status must not send
			// prospero, and the token it dials with, somewhere else.
			status.Phase = calibanv1alpha1.TaskProvisioning
			setReady(metav1.ConditionFalse, ReasonServiceFQDNMismatch, orApplyProblem(in, problem))
			break
		}
		if serving && in.Unreachable != "" {
			status.Phase = calibanv1alpha1.TaskProvisioning
			setReady(metav1.ConditionFalse, ReasonSandboxNotReady, orApplyProblem(in, in.Unreachable))
			break
		}
		if serving {
			status.Phase = calibanv1alpha1.TaskRunning
			status.CalibandEndpoint = calibandEndpoint(in.Sandbox, task.Namespace, s)
			setReady(metav1.ConditionTrue, ReasonRunning, orApplyProblem(in, "caliband is serving at "+status.CalibandEndpoint))
			break
		}
		status.Phase = calibanv1alpha1.TaskProvisioning
		sbReady := meta.FindStatusCondition(in.Sandbox.Status.Conditions, ConditionReady)
		msg := sandboxNotReadyMessage(in.Sandbox.Name)
		switch {
		case in.ApplyProblem != "":
			msg = applyProblemMessage(in.ApplyProblem)
		case sbReady != nil && sbReady.Message != "":
			msg = sbReady.Message
		case sbReady != nil && sbReady.Status == metav1.ConditionTrue:
			msg = fmt.Sprintf("Sandbox %s is ready but reports no serviceFQDN", in.Sandbox.Name)
		}
		setReady(metav1.ConditionFalse, ReasonSandboxNotReady, msg)
	}
	if ready != nil {
		status.Conditions = []metav1.Condition{withTransitionTime(*ready, task.Status.Conditions, in.Now)}
	}
	status.PhaseTransitionTime = task.Status.PhaseTransitionTime
	if status.Phase != task.Status.Phase {
		entered := in.Now.Rfc3339Copy()
		status.PhaseTransitionTime = &entered
	}
	return status
}

// ObservedSandbox is what a task's status reads of its Sandbox, as the
// cache keeps it or as a read or a write returned it.
type ObservedSandbox struct {
	Name              string
	UID               types.UID
	CreationTimestamp metav1.Time
	// Mode is the operatingMode agent-sandbox reads (LiveMode).
	Mode sandboxv1beta1.OperatingMode
	// CalibandPort is the control port of the caliband container of the
	// Sandbox's pod template, 0 when it has none.
	CalibandPort int32
	// Launch is the launch-type label: warm when a claim took the Sandbox
	// from a pool, cold when a claim made it, "" for a task's own.
	Launch string
	Status sandboxv1beta1.SandboxStatus
}

// ObserveSandbox is what the status reads of sb.
func ObserveSandbox(sb *sandboxv1beta1.Sandbox) *ObservedSandbox {
	return &ObservedSandbox{
		Name: sb.Name, UID: sb.UID, CreationTimestamp: sb.CreationTimestamp, Mode: LiveMode(sb.Spec.OperatingMode),
		CalibandPort: CalibandPortOf(&sb.Spec.PodTemplate.Spec), Launch: LaunchTypeOf(sb.Labels), Status: sb.Status,
	}
}

// InMode is the Sandbox after an apply that set its operatingMode to mode
// and changed nothing agent-sandbox writes.
func (o ObservedSandbox) InMode(mode sandboxv1beta1.OperatingMode) *ObservedSandbox {
	o.Mode = LiveMode(mode)
	return &o
}

// LiveMode is a Sandbox's operatingMode as agent-sandbox reads it: unset
// is Running, the CRD's default.
func LiveMode(m sandboxv1beta1.OperatingMode) sandboxv1beta1.OperatingMode {
	if m == "" {
		return sandboxv1beta1.OperatingModeRunning
	}
	return m
}

// LaunchTypeOf is a Sandbox's launch-type label, as one of two shared
// strings ("" for neither): the caches keep one copy of each.
func LaunchTypeOf(labels map[string]string) string {
	switch labels[LabelLaunchType] {
	case LaunchTypeWarm:
		return LaunchTypeWarm
	case LaunchTypeCold:
		return LaunchTypeCold
	}
	return ""
}

// calibandEndpoint is where caliband listens: the Sandbox's Service, at
// the port of the caliband container the Sandbox carries. A Sandbox
// rendered under other settings keeps its port (ADR 0015), so the
// settings' port is only the answer for a Sandbox that says nothing. The
// host is the Service's name as the operator knows it (ServiceHost), never
// read from the Sandbox's status: serviceFQDNProblem holds the two equal
// before the task is given an endpoint.
func calibandEndpoint(sb *ObservedSandbox, namespace string, s config.AgentSettings) string {
	port := s.CalibandPort
	if sb.CalibandPort != 0 {
		port = sb.CalibandPort
	}
	return ServiceHost(sb.Name, namespace, s) + ":" + strconv.Itoa(int(port))
}

// serviceFQDNProblem says why the serviceFQDN a Sandbox's status reports
// is not where its task's caliband may be reached, "" when it is. The only
// such place is the Sandbox's own headless Service, which agent-sandbox
// names after the Sandbox, in the task's namespace and the cluster's
// domain (CALIBAN_CLUSTER_DOMAIN, which caliband's advertised host names
// too). The status of a Sandbox is anyone's who may write sandboxes/status:
// an address copied from it unchecked would send prospero, and its token,
// wherever they chose.
func serviceFQDNProblem(sb *ObservedSandbox, namespace string, s config.AgentSettings) string {
	want := ServiceHost(sb.Name, namespace, s)
	if sb.Status.ServiceFQDN == want {
		return ""
	}
	return fmt.Sprintf("Sandbox %s reports serviceFQDN '%s', and its Service is %s (%s '%s'): caliband is not reached anywhere else, "+
		"so the task has no endpoint until agent-sandbox reports that name (its --cluster-domain and %s must agree)",
		sb.Name, sb.Status.ServiceFQDN, want, config.EnvClusterDomain, s.ClusterDomain, config.EnvClusterDomain)
}

// CalibandPortOf is the caliband container's control port in a pod spec,
// 0 when it has none.
func CalibandPortOf(spec *corev1.PodSpec) int32 {
	for i := range spec.Containers {
		if spec.Containers[i].Name != ContainerCaliband {
			continue
		}
		for _, p := range spec.Containers[i].Ports {
			if p.Name == PortNameCaliband {
				return p.ContainerPort
			}
		}
	}
	return 0
}

// ResumingMessage is the Ready message of a task whose spec no longer asks
// for suspension while its Sandbox is still suspended.
const ResumingMessage = "resuming: the Sandbox is still suspended"

// parked reports that nothing of the task runs: it has no Sandbox (none
// applied yet, none accepted, or no agent-sandbox to run one), or its
// Sandbox is suspended (sandboxParked).
func parked(in TaskStatusInput) bool {
	return in.Sandbox == nil || sandboxParked(in.Sandbox)
}

// sandboxParked reports that agent-sandbox accepted operatingMode
// Suspended for the Sandbox and no longer reports it Ready. A Suspended
// condition is not read: v1.0 can leave it behind after a resume, and
// upstream says to trust Ready.
func sandboxParked(sb *ObservedSandbox) bool {
	return sb.Mode == sandboxv1beta1.OperatingModeSuspended && !meta.IsStatusConditionTrue(sb.Status.Conditions, ConditionReady)
}

// orApplyProblem is msg, or what keeps an apply from being accepted: a task
// whose Sandbox cannot be brought where its spec asks says so.
func orApplyProblem(in TaskStatusInput, msg string) string {
	if in.ApplyProblem != "" {
		return applyProblemMessage(in.ApplyProblem)
	}
	return msg
}

// SandboxServing reports what makes a task Running: its Sandbox is Ready
// and has a serviceFQDN to reach caliband at.
func SandboxServing(st *sandboxv1beta1.SandboxStatus) bool {
	return st != nil && st.ServiceFQDN != "" && meta.IsStatusConditionTrue(st.Conditions, ConditionReady)
}

// RequestedBy is who created task: the annotation the admission
// component writes on create and lets nobody change. It is read from the
// annotation on every pass, never from the status, which whoever may write
// the status subresource could have rewritten. A task without the
// annotation records nobody.
func RequestedBy(task *calibanv1alpha1.CalibanTask) string {
	return task.Annotations[calibanv1alpha1.AnnotationRequestedBy]
}

// StoredTaskStatus is the status the apiserver stores when the operator
// applies sent, a TaskStatus, over a task whose status is current: sent as
// it reads back (times to the second, the pin with the schema's defaults)
// beside the conditions of other owners in current. The operator's cache
// takes a task as its own write left it from here, not from the write's
// answer (docs/architecture.md#the-operators-own-writes).
func StoredTaskStatus(current, sent calibanv1alpha1.CalibanTaskStatus) calibanv1alpha1.CalibanTaskStatus {
	stored := sent
	stored.ResolvedWorkspace = storedPin(sent.ResolvedWorkspace)
	stored.PhaseTransitionTime = storedTime(sent.PhaseTransitionTime)
	stored.StartTime = storedTime(sent.StartTime)
	stored.CompletionTime = storedTime(sent.CompletionTime)
	stored.Conditions = ForeignConditions(current.Conditions)
	for _, c := range sent.Conditions {
		if !c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = c.LastTransitionTime.Rfc3339Copy()
		}
		stored.Conditions = append(stored.Conditions, c)
	}
	return stored
}

// storedTime is t as it reads back: to the second, and none for the zero
// time, which encodes as null.
func storedTime(t *metav1.Time) *metav1.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	s := t.Rfc3339Copy()
	return &s
}

// ForeignConditions are the conditions the operator does not own: every
// one but Ready (prospero's AgentsSettled, for one). nil for none.
func ForeignConditions(conds []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conds {
		if c.Type != ConditionReady {
			out = append(out, c)
		}
	}
	return out
}

// launchOf is the pinned task's launch: decided this pass, else stored,
// else that of a task pinned before launches were decided.
func launchOf(in TaskStatusInput) *calibanv1alpha1.Launch {
	switch {
	case in.Launch != nil:
		return in.Launch
	case in.Task.Status.Launch != nil:
		return in.Task.Status.Launch
	}
	l := ColdBeforeWarmStart()
	return &l
}

// TaskStatusChanged reports whether applying desired would change a field
// the operator owns in current. Conditions other than Ready (prospero's
// AgentsSettled) never count, so another writer's update cannot make the
// operator write.
func TaskStatusChanged(current, desired calibanv1alpha1.CalibanTaskStatus) bool {
	return current.Phase != desired.Phase ||
		current.CalibandEndpoint != desired.CalibandEndpoint ||
		!apiequality.Semantic.DeepEqual(current.SandboxRef, desired.SandboxRef) ||
		!apiequality.Semantic.DeepEqual(current.ResolvedWorkspace, desired.ResolvedWorkspace) ||
		current.PinSignature != desired.PinSignature ||
		current.PermissionPosture != desired.PermissionPosture ||
		current.RequestedBy != desired.RequestedBy ||
		current.ObservedGeneration != desired.ObservedGeneration ||
		!current.StartTime.Equal(desired.StartTime) ||
		!current.CompletionTime.Equal(desired.CompletionTime) ||
		!current.PhaseTransitionTime.Equal(desired.PhaseTransitionTime) ||
		current.CheckpointRef != desired.CheckpointRef ||
		!apiequality.Semantic.DeepEqual(current.Launch, desired.Launch) ||
		!sameCondition(meta.FindStatusCondition(current.Conditions, ConditionReady), meta.FindStatusCondition(desired.Conditions, ConditionReady))
}

// applyProblemMessage bounds the message of a failed apply: an admission
// webhook's answer can be long, and the status is no place for all of it
// (the ReconcileError Event carries the error too).
func applyProblemMessage(problem string) string {
	const max = 1024
	if len(problem) > max {
		problem = strings.ToValidUTF8(problem[:max], "") + "…"
	}
	return "retrying: " + problem
}

func sandboxNotReadyMessage(name string) string {
	return fmt.Sprintf("Sandbox %s is not ready yet", name)
}
