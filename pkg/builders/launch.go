// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// Launch reasons (status.launch.reason; docs/warm-start.md#why-a-task-starts-cold).
const (
	ReasonLaunchWarmPool = "WarmPool"
	// Cold, and why not warm.
	ReasonNoWarmPool          = "NoWarmPool"
	ReasonWarmPoolUnavailable = "WarmPoolUnavailable"
	ReasonSourcesNotPinned    = "SourcesNotPinned"
	ReasonCreatedSuspended    = "CreatedSuspended"
	ReasonPerTaskState        = "PerTaskState"
	ReasonPerTaskRouterConfig = "PerTaskRouterConfig"
	ReasonRenderingDiffers    = "RenderingDiffers"
	// ReasonAdmittedBeforeWarmStart: pinned by an operator without warm
	// start; its Sandbox is its own.
	ReasonAdmittedBeforeWarmStart = "AdmittedBeforeWarmStart"
	// ReasonWarmPoolRolled: the claim was served from a newer rendering
	// than the task's pin; the operator let it go and started cold.
	ReasonWarmPoolRolled = "WarmPoolRolled"
)

// WarmOffer is what a task's Workspace's pool offers when the task is
// admitted.
type WarmOffer struct {
	// Replicas is the pool size the Workspace asks for; 0 is no pool.
	Replicas int32
	// Unavailable says why there is no pool to claim from ("" when there
	// is): the extensions API is not served, or the pool is not made yet.
	Unavailable string
	// Template is the SandboxTemplate the pool serves now.
	Template string
}

// DecideLaunch decides, once, at admission, how a task's Sandbox is asked
// for: a claim on its Workspace's warm pool when the pool serves exactly
// the task's rendering (RenderWarm), else a Sandbox of its own, with the
// first reason it could not be warm. Every check is a shortcut with a
// clearer message than the last, which alone decides: the task's warm
// rendering names the pool's template.
func DecideLaunch(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, offer WarmOffer, s config.AgentSettings) (calibanv1alpha1.Launch, error) {
	ws := task.Spec.WorkspaceRef.Name
	cold := func(reason, format string, args ...any) (calibanv1alpha1.Launch, error) {
		return calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchCold, Reason: reason, Message: fmt.Sprintf(format, args...)}, nil
	}
	switch {
	case offer.Replicas == 0:
		return cold(ReasonNoWarmPool, "Workspace '%s' keeps no warm pool", ws)
	case offer.Unavailable != "":
		return cold(ReasonWarmPoolUnavailable, "%s", offer.Unavailable)
	}
	if p := WarmSourcesProblem(pin.Sources); p != "" {
		return cold(ReasonSourcesNotPinned, "%s", p)
	}
	switch {
	case task.Spec.Suspend:
		return cold(ReasonCreatedSuspended, "the task was created suspended: a warm Sandbox would only be parked")
	case task.Spec.State != nil && (task.Spec.State.GonzaloEndpoint != "" || task.Spec.State.Mode != ""):
		return cold(ReasonPerTaskState, "spec.state is the task's own, and a warm Sandbox is made before its task: the pool cannot carry it")
	case task.Spec.Model != nil && task.Spec.Model.RouterConfigRef != "":
		return cold(ReasonPerTaskRouterConfig, "spec.model.routerConfigRef is mounted into the pod, and a warm Sandbox is made before its task: the pool cannot carry it")
	case offer.Template == "":
		return cold(ReasonWarmPoolUnavailable, "warm pool '%s' serves no template yet", WarmPoolName(ws))
	}
	r, err := RenderWarm(task, pin, s)
	if err != nil {
		return calibanv1alpha1.Launch{}, err
	}
	if want := WarmTemplateName(ws, r.Hash); want != offer.Template {
		return cold(ReasonRenderingDiffers, "the task renders to SandboxTemplate '%s' and warm pool '%s' serves '%s': its providerRef or isolation differ from the pool's, or the Workspace or the operator's settings changed and the pool has not rolled yet",
			want, WarmPoolName(ws), offer.Template)
	}
	return calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchWarm, Reason: ReasonLaunchWarmPool,
		Message: fmt.Sprintf("claims a Sandbox from warm pool '%s' (SandboxTemplate '%s')", WarmPoolName(ws), offer.Template)}, nil
}

// WarmClaimed is the launch of a task whose claim exists already.
func WarmClaimed(task *calibanv1alpha1.CalibanTask, claim string, uid types.UID) calibanv1alpha1.Launch {
	return calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchWarm, Reason: ReasonLaunchWarmPool,
		Message: fmt.Sprintf("claims a Sandbox from warm pool '%s'", WarmPoolName(task.Spec.WorkspaceRef.Name)),
		Claim:   &calibanv1alpha1.ClaimReference{Name: claim, UID: uid}}
}

// ColdBeforeWarmStart is the launch of a task pinned before the operator
// decided launches: it has its own Sandbox, or gets one.
func ColdBeforeWarmStart() calibanv1alpha1.Launch {
	return calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchCold, Reason: ReasonAdmittedBeforeWarmStart,
		Message: "the task was admitted before the operator started tasks from warm pools"}
}

// WarmPoolRolled is the launch of a warm task whose claim was served a
// Sandbox of another template than its pin renders to: the pool rolled
// between admission and the claim. The operator lets the claim go and
// starts the task cold, as its pin says.
func WarmPoolRolled(want, got string) calibanv1alpha1.Launch {
	return calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchCold, Reason: ReasonWarmPoolRolled,
		Message: fmt.Sprintf("the warm pool served a Sandbox of SandboxTemplate '%s', and the task's pin renders to '%s': the pool rolled after the task was admitted", got, want)}
}

// ConditionWarmPoolReady is the Workspace condition on its warm pool, set
// while spec.warmPool asks for one.
const ConditionWarmPoolReady = "WarmPoolReady"

// WarmPoolReady reasons (ReasonWarmPoolUnavailable and
// ReasonSourcesNotPinned too).
const (
	ReasonWarmPoolFull    = "Full"
	ReasonWarmPoolFilling = "Filling"
	// ReasonWarmPoolWorkspaceInvalid: a Workspace that fails validation
	// admits no task, and keeps no pool.
	ReasonWarmPoolWorkspaceInvalid = "WorkspaceInvalid"
)

// WarmPoolObservation is what the Workspace controller found of a pool.
type WarmPoolObservation struct {
	// Problem is why ws keeps no pool, with its reason; "" when it does.
	Reason, Problem string
	// Template is the template the operator applied for the current
	// rendering; Pool the pool as agent-sandbox reports it, nil before
	// the cache has it.
	Template string
	Pool     *extv1beta1.SandboxWarmPool
}

// warmPoolStatus is status.warmPool and the WarmPoolReady condition, or
// nils when ws asks for no pool.
func warmPoolStatus(ws *calibanv1alpha1.Workspace, obs *WarmPoolObservation) (*calibanv1alpha1.WarmPoolStatus, *metav1.Condition) {
	replicas := WarmReplicas(ws)
	if replicas == 0 || obs == nil {
		return nil, nil
	}
	status := &calibanv1alpha1.WarmPoolStatus{Replicas: replicas, Template: obs.Template}
	cond := &metav1.Condition{Type: ConditionWarmPoolReady, Status: metav1.ConditionFalse, ObservedGeneration: ws.Generation}
	switch {
	case obs.Problem != "":
		status.Template = ""
		cond.Reason, cond.Message = obs.Reason, obs.Problem+": tasks start cold"
	case obs.Pool == nil || obs.Pool.Spec.TemplateRef.Name != obs.Template || obs.Pool.Status.ObservedGeneration != obs.Pool.Generation:
		// The counts agent-sandbox reports are of another generation.
		cond.Reason, cond.Message = ReasonWarmPoolFilling, fmt.Sprintf("warm pool '%s' is being rolled to SandboxTemplate '%s'", WarmPoolName(ws.Name), obs.Template)
	default:
		status.ReadyReplicas = obs.Pool.Status.ReadyReplicas
		cond.Reason, cond.Message = ReasonWarmPoolFilling, fmt.Sprintf("%d of %d Sandboxes ready; a task that finds none ready claims a new one from the template", status.ReadyReplicas, replicas)
		if status.ReadyReplicas >= replicas {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, ReasonWarmPoolFull, fmt.Sprintf("%d of %d Sandboxes ready", status.ReadyReplicas, replicas)
		}
	}
	return status, cond
}
