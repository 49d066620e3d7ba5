// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// Task Ready reasons (docs/crd-reference.md#the-ready-condition).
const (
	ReasonRunning             = "Running"
	ReasonSandboxNotReady     = "SandboxNotReady"
	ReasonCompleted           = "Completed"
	ReasonAgentsFailed        = "AgentsFailed"
	ReasonWorkspaceUnresolved = "WorkspaceUnresolved"
	ReasonInvalidState        = "InvalidState"
	ReasonPostureNotPermitted = "PostureNotPermitted"
	// ReasonSandboxAPIUnavailable: agent-sandbox is not installed.
	ReasonSandboxAPIUnavailable = "SandboxAPIUnavailable"
	// ReasonServiceFQDNMismatch: the task's Sandbox serves, but reports a
	// serviceFQDN that is not its own Service's name in the task's
	// namespace and the cluster's domain.
	ReasonServiceFQDNMismatch = "ServiceFQDNMismatch"
)

// Failure is why a task cannot run: a Ready reason and a message for people.
type Failure struct {
	Reason  string
	Message string
}

// Verdict is the outcome of admitting a task that has no pin yet.
type Verdict int

const (
	// Admitted: Pin and Posture are set; write them once.
	Admitted Verdict = iota
	// WaitForWorkspace: the workspace is not validated yet; mark the task
	// Pending and look again soon.
	WaitForWorkspace
	// Rejected: Failure says why.
	Rejected
)

// Admission is what Admit decided.
type Admission struct {
	Verdict Verdict
	Failure Failure
	Pin     *calibanv1alpha1.ResolvedWorkspace
	Posture calibanv1alpha1.PermissionPosture
}

// Admit decides whether a task with no pin may run under ws (nil when the
// workspace does not exist), in the order of docs/crd-reference.md#admission:
// workspace state, the posture gate, provider resolution, then the pin.
func Admit(task *calibanv1alpha1.CalibanTask, ws *calibanv1alpha1.Workspace) Admission {
	name := task.Spec.WorkspaceRef.Name
	reject := func(reason, message string) Admission {
		return Admission{Verdict: Rejected, Failure: Failure{Reason: reason, Message: message}}
	}
	if ws == nil {
		return reject(ReasonWorkspaceUnresolved, fmt.Sprintf("Workspace not found: '%s'", name))
	}
	switch ws.Status.Phase {
	case calibanv1alpha1.WorkspaceReady:
	case calibanv1alpha1.WorkspaceFailed:
		msg := ws.Status.Message
		if msg == "" {
			msg = "validation failed"
		}
		return reject(ReasonWorkspaceUnresolved, fmt.Sprintf("workspace '%s' not ready: %s", name, msg))
	default:
		return Admission{Verdict: WaitForWorkspace}
	}
	// A Ready status that reflects an older spec says nothing about the
	// current one: wait for the workspace controller to catch up.
	if ws.Status.ObservedGeneration != ws.Generation {
		return Admission{Verdict: WaitForWorkspace}
	}
	// Nor does one an operator wrote before a rule on env existed, until
	// the workspace controller has looked again: the env is pinned as it
	// is, and only these checks keep what it must not carry out of a pin.
	if msg := envProblem(ws.Spec.Env, ws.Spec.Providers); msg != "" {
		return reject(ReasonWorkspaceUnresolved, fmt.Sprintf("workspace '%s' not ready: %s", name, msg))
	}

	posture := RequestedPosture(task)
	if msg := postureProblem(posture, ws.Spec.AgentPolicy, fmt.Sprintf("workspace '%s'", name)); msg != "" {
		return reject(ReasonPostureNotPermitted, msg)
	}
	provider, msg := ResolveProvider(&ws.Spec, task.Spec.ProviderRef)
	if msg != "" {
		return reject(ReasonWorkspaceUnresolved, msg)
	}
	return Admission{Verdict: Admitted, Pin: PinWorkspace(task, &ws.Spec, provider), Posture: posture}
}

// RequestedPosture is the task's posture, supervised when unset (objects
// stored before the schema default existed).
func RequestedPosture(task *calibanv1alpha1.CalibanTask) calibanv1alpha1.PermissionPosture {
	if task.Spec.Task.PermissionPosture == "" {
		return calibanv1alpha1.PostureSupervised
	}
	return task.Spec.Task.PermissionPosture
}

// UnsupervisedSetting names the first agentPolicy setting that lets agents
// act without a person's approval, or returns "". permissionMode auto is not
// one: its classifier still denies.
func UnsupervisedSetting(policy *calibanv1alpha1.AgentPolicy) string {
	if policy == nil {
		return ""
	}
	switch policy.PermissionMode {
	case calibanv1alpha1.PermissionModeDontAsk, calibanv1alpha1.PermissionModeBypassPermissions:
		return "agentPolicy.permissionMode " + string(policy.PermissionMode)
	}
	if isTrue(policy.AutoAllow) {
		return "agentPolicy.autoAllow"
	}
	if isTrue(policy.NoPermissions) {
		return "agentPolicy.noPermissions"
	}
	return ""
}

// postureProblem is the posture gate: an unattended task, or a policy with
// an unsupervised setting, needs allowUnattended. It never downgrades.
func postureProblem(posture calibanv1alpha1.PermissionPosture, policy *calibanv1alpha1.AgentPolicy, where string) string {
	if policy != nil && policy.AllowUnattended {
		return ""
	}
	if posture == calibanv1alpha1.PostureUnattended {
		return fmt.Sprintf("task.permissionPosture is unattended, but %s does not set agentPolicy.allowUnattended", where)
	}
	if setting := UnsupervisedSetting(policy); setting != "" {
		return fmt.Sprintf("%s sets %s, which lets agents act unsupervised, but does not set agentPolicy.allowUnattended", where, setting)
	}
	return ""
}

// UnattendedAdmittedNote is the note of the UnattendedAdmitted Event: the
// Workspace whose policy allowed the task, and who asked for it when the
// pin records that.
func UnattendedAdmittedNote(workspace, requestedBy string) string {
	note := fmt.Sprintf("admitted unattended: the configuration pinned from workspace '%s' sets agentPolicy.allowUnattended", workspace)
	if requestedBy != "" {
		note += fmt.Sprintf("; requested by '%s'", requestedBy)
	}
	return note
}

// PinnedPostureProblem re-checks a pinned task's current posture against
// its pin on every reconcile: a task edited to unattended after admission
// runs only if the configuration it was admitted under allows that. A later
// change to the Workspace never reaches a pinned task.
func PinnedPostureProblem(task *calibanv1alpha1.CalibanTask) *Failure {
	pin := task.Status.ResolvedWorkspace
	if pin == nil {
		return nil
	}
	if msg := postureProblem(RequestedPosture(task), pin.AgentPolicy, "its pinned workspace configuration"); msg != "" {
		return &Failure{Reason: ReasonPostureNotPermitted, Message: msg}
	}
	return nil
}

// PinnedEnvProblem fails a pin whose env carries an agentPolicy variable
// (AgentPolicyVariables) or a variable that loads code (LoaderEnv): a pin
// taken before the Workspace schema and validation refused them. The
// first would set the agent's posture without the typed field, and so
// without the posture gate; the second would run code in the agent pod
// that nobody approved. Dropping either silently would run the task under
// another configuration than its Workspace asked for, so the task fails,
// naming the entry. A task that already has children keeps them as they
// are (the operator never restarts a running agent); nothing new is
// rendered from the pin.
func PinnedEnvProblem(task *calibanv1alpha1.CalibanTask) *Failure {
	pin := task.Status.ResolvedWorkspace
	if pin == nil {
		return nil
	}
	for i, e := range pin.Env {
		if field := AgentPolicyField(e.Name); field != "" {
			return &Failure{Reason: ReasonPostureNotPermitted, Message: fmt.Sprintf(
				"status.resolvedWorkspace.env[%d]: %s; the task was pinned before that was refused: set %s in the Workspace instead and create the task again",
				i, agentPolicyEnvProblem(e.Name, field), field)}
		}
		if LoaderEnv(e.Name) {
			return &Failure{Reason: ReasonPostureNotPermitted, Message: fmt.Sprintf(
				"status.resolvedWorkspace.env[%d].name: %s; the task was pinned before that was refused: remove it from the Workspace and create the task again",
				i, loaderEnvProblem(e.Name))}
		}
	}
	return nil
}

// ResolveProvider picks the task's provider: providerRef, else the
// workspace's defaultProvider, else its only provider. The message says why
// none could be picked.
func ResolveProvider(spec *calibanv1alpha1.WorkspaceSpec, providerRef string) (calibanv1alpha1.Provider, string) {
	switch {
	case providerRef != "":
		if p := findProvider(spec.Providers, providerRef); p != nil {
			return *p, ""
		}
		return calibanv1alpha1.Provider{}, fmt.Sprintf("providerRef '%s' names no provider in the workspace", providerRef)
	case spec.DefaultProvider != "":
		if p := findProvider(spec.Providers, spec.DefaultProvider); p != nil {
			return *p, ""
		}
		return calibanv1alpha1.Provider{}, fmt.Sprintf("defaultProvider '%s' names no provider", spec.DefaultProvider)
	case len(spec.Providers) == 1:
		return spec.Providers[0], ""
	}
	return calibanv1alpha1.Provider{}, fmt.Sprintf("no providerRef and workspace has no defaultProvider among %d providers", len(spec.Providers))
}

// PinWorkspace is the configuration a task is admitted under, deep-copied
// so later edits of the workspace cannot reach it. A non-blank model.name
// replaces the provider's model.
func PinWorkspace(task *calibanv1alpha1.CalibanTask, spec *calibanv1alpha1.WorkspaceSpec, provider calibanv1alpha1.Provider) *calibanv1alpha1.ResolvedWorkspace {
	spec = spec.DeepCopy()
	provider = *provider.DeepCopy()
	if m := task.Spec.Model; m != nil && strings.TrimSpace(m.Name) != "" {
		provider.Model = m.Name
	}
	return &calibanv1alpha1.ResolvedWorkspace{
		Sources:     spec.Sources,
		Provider:    provider,
		Env:         spec.Env,
		Isolation:   spec.Isolation,
		Egress:      spec.Egress,
		AgentPolicy: spec.AgentPolicy,
	}
}

// TaskFacts are what a task's decision reads besides the task: gathered
// by the sync from its caches, and the one read it may need (Secrets).
type TaskFacts struct {
	// Workspace is the task's Workspace while the task has no pin (nil
	// when it is missing, or once pinned: a pinned task never reads it
	// again).
	Workspace *calibanv1alpha1.Workspace
	// Offer is what the Workspace's warm pool offers a task admitted now.
	Offer WarmOffer
	// Claim names a SandboxClaim made for this task before its pin was
	// written (a restart, a conflict); "" for none.
	Claim    string
	ClaimUID types.UID
	// PinKey signs the pins this operator writes.
	PinKey PinKey
	// Launched is what the caches show of the path a pinned task took: the
	// launch of a pin signed before launches were.
	Launched LaunchChildren
	// Secrets reads the state token Secret.
	Secrets SecretGetter
}

// Decision is what a task's sync decided before writing anything.
type Decision struct {
	// WaitForWorkspace: no pin yet, and the Workspace is not validated.
	WaitForWorkspace bool
	// Failure, when set, is why nothing is applied.
	Failure *Failure
	Pin     *calibanv1alpha1.ResolvedWorkspace
	Posture calibanv1alpha1.PermissionPosture
	// PinSignature is the stored signature, or the new pin's.
	PinSignature string
	// NewlyPinned: Pin is the admission's, not in the task yet.
	NewlyPinned bool
	// Launch is decided with a new pin; nil keeps the stored one.
	Launch *calibanv1alpha1.Launch
	// Recheck: the task's last status said its pin or launch was not
	// trusted, and both are now: its children's cached verdicts may have
	// been taken against what someone else wrote, and are taken again.
	Recheck bool
}

// Decide runs a task's checks in order (docs/crd-reference.md#admission):
// the lifecycle, then admission and the pin (once) or the pinned posture
// and env, then the state. An error is a failed read of a Secret, or a pin
// that cannot be rendered: worth a retry.
func Decide(task *calibanv1alpha1.CalibanTask, facts TaskFacts, s config.AgentSettings) (Decision, error) {
	d := Decision{Pin: task.Status.ResolvedWorkspace, Posture: task.Status.PermissionPosture, PinSignature: task.Status.PinSignature}
	if f := LifecycleProblem(task); f != nil {
		// Checked before admission: a task is never pinned under a
		// deletion the operator would not honour.
		d.Failure = f
		return d, nil
	}
	if d.Pin == nil {
		adm := Admit(task, facts.Workspace)
		switch adm.Verdict {
		case WaitForWorkspace:
			d.WaitForWorkspace = true
			return d, nil
		case Rejected:
			d.Failure = &adm.Failure
			return d, nil
		}
		d.Pin, d.Posture, d.NewlyPinned = adm.Pin, adm.Posture, true
		// With the pin, and written with it: a restart finds the path
		// taken before any child exists.
		launch, err := DecideLaunch(task, adm.Pin, facts.Offer, s)
		if err != nil {
			return d, err
		}
		if facts.Claim != "" {
			// A claim made for this pin before its write was lost: the path
			// was taken already.
			launch = WarmClaimed(task, facts.Claim, facts.ClaimUID)
		}
		d.Launch = &launch
		// Signed together: nobody else can flip the path afterwards.
		d.PinSignature = SignPin(facts.PinKey.Key, task.UID, adm.Pin, launch.Type)
	} else {
		// The pin's signature before every check that reads the pin: a pin
		// someone else wrote can say whatever passes them. Then the launch
		// signed with it, before anything is made or applied by it.
		d.Failure = UntrustedPin(task, facts.PinKey)
		if d.Failure == nil {
			d.Failure = UntrustedLaunch(task, facts.PinKey, facts.Launched)
		}
		if d.Failure == nil {
			d.Failure = PinnedPostureProblem(task)
		}
		if d.Failure == nil {
			d.Failure = PinnedEnvProblem(task)
		}
		if d.Failure != nil {
			return d, nil
		}
		d.Posture = RequestedPosture(task)
		d.Recheck = wasNotTrusted(task)
	}
	f, err := StateProblem(task.Spec.State, facts.Secrets)
	if err != nil {
		return d, err
	}
	d.Failure = f
	return d, nil
}

// wasNotTrusted reports that the task's last status failed it for a pin or
// a launch the operator did not write.
func wasNotTrusted(task *calibanv1alpha1.CalibanTask) bool {
	for _, c := range task.Status.Conditions {
		if c.Type == ConditionReady {
			return c.Reason == ReasonPinNotTrusted || c.Reason == ReasonLaunchNotTrusted
		}
	}
	return false
}
