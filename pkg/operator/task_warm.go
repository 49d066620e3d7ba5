package operator

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
)

// EventColdStart: a task of a Workspace with a warm pool starts cold, and
// why (status.launch says it too).
const EventColdStart = "ColdStart"

// rolledRequeue: a warm task that let its claim go looks again at once,
// to start cold.
const rolledRequeue = 100 * time.Millisecond

var claimGroupKind = schema.GroupKind{Group: extv1beta1.SchemeGroupVersion.Group, Kind: "SandboxClaim"}

// warmOffer is what ws's pool offers a task admitted now.
func (c *TaskController) warmOffer(ws *calibanv1alpha1.Workspace) builders.WarmOffer {
	replicas := builders.WarmReplicas(ws)
	if replicas == 0 {
		return builders.WarmOffer{}
	}
	offer := builders.WarmOffer{Replicas: replicas}
	if !c.warm.API.Served() {
		offer.Unavailable = unavailableMessage
		return offer
	}
	name := builders.WarmPoolName(ws.Name)
	pool, err := c.pools.SandboxWarmPools(ws.Namespace).Get(name)
	if err != nil || !metav1.IsControlledBy(pool, ws) {
		offer.Unavailable = fmt.Sprintf("warm pool '%s' is not made yet", name)
		return offer
	}
	offer.Template = pool.Spec.TemplateRef.Name
	return offer
}

// applyWarm keeps a warm task's children (docs/adr/0026-warm-start.md): its
// claim, its NetworkPolicy once the claim's UID is recorded, and, on the
// Sandbox the claim holds, the task's labels and mode. It returns the task
// as it stands after any status write, the Sandbox as the status
// derivation reads it (nil until the claim holds one), whether the APIs
// are missing, and how soon to look again.
func (c *TaskController) applyWarm(ctx context.Context, task *calibanv1alpha1.CalibanTask, in *builders.TaskStatusInput, mode sandboxv1beta1.OperatingMode) (*calibanv1alpha1.CalibanTask, *sandboxv1beta1.Sandbox, bool, time.Duration, error) {
	if !c.warm.API.Served() || !c.sandboxAPI.Served() {
		return task, nil, true, 0, nil
	}
	ns := task.Namespace
	claim := c.claimOf(task)
	if claim == nil {
		name := builders.ClaimName(task.Name)
		klog.FromContext(ctx).V(4).Info("Applying SandboxClaim", "name", name)
		written, err := apply(ctx, writeClaim, c.warm.Client.SandboxClaims(ns), name, builders.BuildClaim(task))
		if err != nil {
			return task, nil, false, 0, fmt.Errorf("applying SandboxClaim %s: %w", name, err)
		}
		claim = written
		c.starts.childrenApplied(task.UID, c.clock.Now())
	}
	// The claim's UID is on the pod it will hold; the NetworkPolicy is
	// rendered from the task, so the task records it first.
	if ref := task.Status.Launch.Claim; ref == nil || ref.UID != claim.UID {
		launch := *task.Status.Launch
		launch.Claim = &calibanv1alpha1.ClaimReference{Name: claim.Name, UID: claim.UID}
		in.Launch = &launch
		written, err := c.writeStatus(ctx, task, *in)
		if err != nil {
			return task, nil, false, 0, err
		}
		task, in.Task = written, written
	}
	want, err := c.children.Want(task, in.Pin)
	if err != nil {
		return task, nil, false, 0, err
	}
	npName := builders.NetworkPolicyName(task.Name)
	if c.children.Stale(freshness.NetworkPolicy, c.children.View(freshness.NetworkPolicy, ns, npName), want) {
		d, err := want.Render()
		if err != nil {
			return task, nil, false, 0, err
		}
		if d.NetworkPolicy != nil {
			if _, err := apply(ctx, writeNetworkPolicy, c.kube.NetworkingV1().NetworkPolicies(ns), npName, d.NetworkPolicy); err != nil {
				return task, nil, false, 0, fmt.Errorf("applying NetworkPolicy %s: %w", npName, err)
			}
		}
	}

	name := claim.Status.Sandbox.Name
	if name == "" {
		// The claim's status brings the name, and wakes the task.
		return task, nil, false, 0, nil
	}
	view := c.children.View(freshness.Sandbox, ns, name)
	if view != nil && !metav1.IsControlledBy(view, claim) {
		view = nil
	}
	if view != nil && freshness.LiveMode(view.OperatingMode) == mode {
		return task, view.Sandbox(), false, 0, nil
	}
	var observed *sandboxv1beta1.Sandbox
	if view != nil {
		observed = view.Sandbox()
	} else {
		// First sight: the Sandbox carries none of the task's labels yet,
		// so the cache does not have it. Read it, and make sure it is of
		// the task's rendering before giving it the task's name.
		live, err := c.sandboxes.Sandboxes(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return task, nil, false, 0, nil
		}
		if err != nil {
			return task, nil, false, 0, fmt.Errorf("reading Sandbox %s: %w", name, err)
		}
		if !metav1.IsControlledBy(live, claim) {
			return task, nil, false, 0, nil
		}
		r, err := builders.RenderWarm(task, in.Pin, c.settings)
		if err != nil {
			return task, nil, false, 0, err
		}
		if want, got := builders.WarmTemplateName(task.Spec.WorkspaceRef.Name, r.Hash), live.Annotations[builders.AnnotationSandboxTemplateRef]; got != want {
			return c.letClaimGo(ctx, task, in, claim, builders.WarmPoolRolled(want, got))
		}
		observed = live
		if builders.SandboxServing(&live.Status) {
			// Taken ready from the pool: its readiness is news to this
			// task now, whenever the pool made it.
			c.starts.sandboxReady(task.UID, c.clock.Now())
		}
	}
	klog.FromContext(ctx).V(4).Info("Applying the task's labels and mode to the Sandbox its claim holds", "name", name, "mode", mode)
	_, err = apply(ctx, writeSandbox, c.sandboxes.Sandboxes(ns), name, builders.BuildClaimedSandbox(task, name, mode))
	if apierrors.IsNotFound(err) {
		return task, nil, false, 0, nil
	}
	if err != nil {
		return task, nil, false, 0, fmt.Errorf("applying Sandbox %s: %w", name, err)
	}
	// The apply changed the mode, never the status agent-sandbox writes:
	// the task reads the status the Sandbox had, with the mode the server
	// just accepted, and the informer brings whatever comes next.
	observed.Spec.OperatingMode = mode
	return task, observed, false, 0, nil
}

// letClaimGo deletes the claim of a warm task whose Sandbox is not of its
// pin's rendering (no agent has run in it: the task is not Running), and
// records the cold launch that replaces it.
func (c *TaskController) letClaimGo(ctx context.Context, task *calibanv1alpha1.CalibanTask, in *builders.TaskStatusInput, claim *extv1beta1.SandboxClaim, launch calibanv1alpha1.Launch) (*calibanv1alpha1.CalibanTask, *sandboxv1beta1.Sandbox, bool, time.Duration, error) {
	klog.FromContext(ctx).Info("The warm pool served another rendering; letting the claim go and starting cold", "claim", claim.Name, "message", launch.Message)
	if err := deleteOwned(ctx, c.warm.Client.SandboxClaims(task.Namespace), claim.Name, claim.UID); err != nil {
		return task, nil, false, 0, err
	}
	in.Launch = &launch
	written, err := c.writeStatus(ctx, task, *in)
	if err != nil {
		return task, nil, false, 0, err
	}
	in.Task = written
	return written, nil, false, rolledRequeue, nil
}

// claimOf is the task's claim from the cache, or nil.
func (c *TaskController) claimOf(task *calibanv1alpha1.CalibanTask) *extv1beta1.SandboxClaim {
	if c.claims == nil {
		return nil
	}
	claim, err := c.claims.SandboxClaims(task.Namespace).Get(builders.ClaimName(task.Name))
	if err != nil || !metav1.IsControlledBy(claim, task) {
		return nil
	}
	return claim
}

// claimedSandbox is the view of the Sandbox a warm task's claim holds, or
// nil.
func (c *TaskController) claimedSandbox(task *calibanv1alpha1.CalibanTask) *freshness.View {
	claim := c.claimOf(task)
	if claim == nil || claim.Status.Sandbox.Name == "" {
		return nil
	}
	v := c.children.View(freshness.Sandbox, task.Namespace, claim.Status.Sandbox.Name)
	if v == nil || !metav1.IsControlledBy(v, claim) {
		return nil
	}
	return v
}

// taskOfClaimed is the task whose claim controls a Sandbox, or nil.
func (c *TaskController) taskOfClaimed(child metav1.Object) *calibanv1alpha1.CalibanTask {
	ref := metav1.GetControllerOf(child)
	if ref == nil || ref.Kind != claimGroupKind.Kind || c.claims == nil {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != claimGroupKind.Group {
		return nil
	}
	claim, err := c.claims.SandboxClaims(child.GetNamespace()).Get(ref.Name)
	if err != nil || claim.UID != ref.UID {
		return nil
	}
	return c.controllingTask(claim)
}

// coldStartNote is the note of a ColdStart Event: only a task whose
// Workspace keeps a pool has news in starting cold.
func coldStartNote(old, launch *calibanv1alpha1.Launch) string {
	if launch == nil || launch.Type != calibanv1alpha1.LaunchCold || (old != nil && old.Reason == launch.Reason) {
		return ""
	}
	switch launch.Reason {
	case builders.ReasonNoWarmPool, builders.ReasonAdmittedBeforeWarmStart:
		return ""
	}
	return launch.Message
}
