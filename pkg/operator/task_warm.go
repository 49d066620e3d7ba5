// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// EventColdStart: a task of a Workspace with a warm pool starts cold, and
// why (status.launch says it too).
const EventColdStart = "ColdStart"

// EventDuplicateSandboxRemoved: agent-sandbox made a second Sandbox for a
// warm task's claim, and the operator deleted it (kubectl caliban describe
// counts them).
const EventDuplicateSandboxRemoved = builders.ReasonDuplicateSandboxRemoved

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
		offer.Unavailable = builders.ExtensionsUnserved
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

// takeClaimed makes the Sandbox the task's claim holds the task's: its
// labels and its mode. builders.PlanTake decides each step; this gathers
// what it asks for and writes what it decides.
func (c *TaskController) takeClaimed(ctx context.Context, task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace,
	claim *extv1beta1.SandboxClaim, mode sandboxv1beta1.OperatingMode) (applied, error) {
	name := claim.Status.Sandbox.Name
	in := builders.TakeInput{Mode: mode, Phase: task.Status.Phase}
	view := c.children.View(freshness.Sandbox, task.Namespace, name)
	if view != nil && metav1.IsControlledBy(view, claim) {
		in.Cached = &view.Sandbox.Mode
	}
	var record *takenSandbox
	if t, ok := c.taken.Load(task.UID); ok && t.(*takenSandbox).name == name && t.(*takenSandbox).mode == mode {
		record = t.(*takenSandbox)
		in.Recorded = &builders.TakeRecord{Labelled: record.labelled, Spec: record.spec}
	}
	// Each step gathers one input or ends the take; every take ends within
	// five steps (TestEveryTakeSettles).
	for range 8 {
		step := builders.PlanTake(in)
		switch step.Action {
		case builders.TakeWait:
			return applied{}, nil
		case builders.TakeCached:
			c.taken.Delete(task.UID)
			return applied{sandbox: view.Sandbox}, nil
		case builders.TakeSetMode, builders.TakeApply:
			// What the task applies, rather than patches, on the Sandbox:
			// its labels and its mode.
			claimed := builders.BuildClaimedSandbox(task, name, mode)
			if step.Action == builders.TakeApply {
				taken, err := apply(ctx, writeSandbox, c.sandboxes.Sandboxes(task.Namespace), name, claimed)
				if err != nil {
					return applied{}, fmt.Errorf("applying Sandbox %s: %w", name, err)
				}
				return c.tookSandbox(task.UID, task.Status.Phase, name, mode, taken), nil
			}
			if _, err := applyUnread(ctx, writeSandbox, c.sandboxes.RESTClient(), builders.SandboxResource, task.Namespace, name, claimed); apierrors.IsNotFound(err) {
				return applied{}, nil
			} else if err != nil {
				return applied{}, fmt.Errorf("applying Sandbox %s: %w", name, err)
			}
			return applied{sandbox: view.Sandbox.InMode(mode)}, nil
		case builders.TakeRecorded:
			return applied{sandbox: record.sandbox}, nil
		case builders.TakeRender:
			r, err := builders.RenderWarm(task, pin, c.settings)
			if err != nil {
				return applied{}, err
			}
			in.Template = builders.WarmTemplateName(task.Spec.WorkspaceRef.Name, r.Hash)
		case builders.TakeRead:
			live, err := c.claimedLive(ctx, claim, name)
			if err != nil {
				return applied{}, err
			}
			in.Read, in.Live = true, live
		case builders.TakeRunReady:
			c.starts.sandboxReady(task.UID, c.clock.Now())
			observed := builders.ObserveSandbox(in.Live)
			c.taken.Store(task.UID, &takenSandbox{name: name, mode: mode, sandbox: observed, spec: in.Live.Spec.OperatingMode})
			return applied{sandbox: observed, after: takeRequeue}, nil
		case builders.TakeLetGo:
			return c.letClaimGo(ctx, claim, step.Launch)
		case builders.TakeKeep:
			klog.FromContext(ctx).Info("The Sandbox the task ran in is of another rendering; leaving it alone",
				"sandbox", name, "template", in.Live.Annotations[builders.AnnotationSandboxTemplateRef], "want", in.Template)
			return applied{sandbox: builders.ObserveSandbox(in.Live)}, nil
		case builders.TakePatch:
			patch, err := builders.TakeSandboxPatch(task, claim.UID, in.Template, mode, step.SetMode)
			if err != nil {
				return applied{}, err
			}
			taken, err := c.takeSandbox(ctx, task.Namespace, name, patch)
			switch {
			case apierrors.IsNotFound(err):
				return applied{}, nil
			case apierrors.IsInvalid(err):
				// A test of the patch failed: the plan reads the Sandbox
				// again to tell why.
				in.Refused, in.Read, in.Live = true, false, nil
				continue
			case err != nil:
				return applied{}, fmt.Errorf("taking Sandbox %s: %w", name, err)
			}
			return c.tookSandbox(task.UID, task.Status.Phase, name, mode, taken), nil
		}
	}
	return applied{}, fmt.Errorf("taking Sandbox %s: the take's plan did not settle", name)
}

// tookSandbox records the Sandbox a warm task just labelled until its
// cache has it.
func (c *TaskController) tookSandbox(uid types.UID, phase calibanv1alpha1.TaskPhase, name string, mode sandboxv1beta1.OperatingMode, taken *sandboxv1beta1.Sandbox) applied {
	if builders.SandboxServing(&taken.Status) && builders.StartingUp(phase) {
		// Taken ready from the pool: its readiness is news to this task
		// now, whenever the pool made it.
		c.starts.sandboxReady(uid, c.clock.Now())
	}
	observed := builders.ObserveSandbox(taken)
	c.taken.Store(uid, &takenSandbox{name: name, mode: mode, sandbox: observed, spec: taken.Spec.OperatingMode, labelled: true})
	return applied{sandbox: observed}
}

// takeRequeue: a warm task that runs on a Sandbox it has not labelled
// yet, or whose take found the Sandbox changed, looks again at once.
const takeRequeue = 10 * time.Millisecond

// claimedLive reads Sandbox name, which claim's status names, from the
// apiserver: nil, without error, while it is gone or not yet the claim's.
// The first read is the apiserver's watch cache (cheap, and it has the
// adoption the claim's status was written after); a Sandbox it shows
// under another controller is read again from etcd before the task waits.
func (c *TaskController) claimedLive(ctx context.Context, claim *extv1beta1.SandboxClaim, name string) (*sandboxv1beta1.Sandbox, error) {
	for _, rv := range []string{"0", ""} {
		live, err := c.sandboxes.Sandboxes(claim.Namespace).Get(ctx, name, metav1.GetOptions{ResourceVersion: rv})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading Sandbox %s: %w", name, err)
		}
		if metav1.IsControlledBy(live, claim) {
			return live, nil
		}
	}
	// The claim's status is ahead of its Sandbox, or behind; its next
	// update wakes the task.
	return nil, nil
}

// takenSandbox is a claimed Sandbox the task read before it ran there,
// or labelled, until the cache has it.
type takenSandbox struct {
	name    string
	mode    sandboxv1beta1.OperatingMode
	sandbox *builders.ObservedSandbox
	// spec is the Sandbox's spec.operatingMode as read.
	spec     sandboxv1beta1.OperatingMode
	labelled bool
}

// takeSandbox applies patch, the take of a claimed Sandbox
// (builders.TakeSandboxPatch). A failed test is an Invalid error and
// changes nothing. The response is the Sandbox with its status, so the task
// can run at once.
func (c *TaskController) takeSandbox(ctx context.Context, namespace, name string, patch []byte) (*sandboxv1beta1.Sandbox, error) {
	klog.FromContext(ctx).V(4).Info("Taking the Sandbox the claim holds", "name", name)
	sb, err := c.sandboxes.Sandboxes(namespace).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: builders.FieldManager})
	if err == nil {
		tracing.RecordWrite(ctx, writeSandbox)
	}
	return sb, err
}

// applyClaim applies the task's SandboxClaim.
// The claim is the task's only when the task controls it: one of that
// name held by anything else is left alone (errNameTaken), as the task's
// other children are.
func (c *TaskController) applyClaim(ctx context.Context, task *calibanv1alpha1.CalibanTask) (*extv1beta1.SandboxClaim, error) {
	name := builders.ClaimName(task.Name)
	if c.claims != nil {
		if cached, err := c.claims.SandboxClaims(task.Namespace).Get(name); err == nil && !metav1.IsControlledBy(cached, task) {
			return nil, nameTaken("SandboxClaim", name, cached)
		}
	}
	body := builders.BuildClaim(task)
	var claim *extv1beta1.SandboxClaim
	created, err := createOrFind(ctx, typedTarget[*extv1beta1.SandboxClaim](writeClaim, "SandboxClaim", name, c.warm.Client.SandboxClaims(task.Namespace), body,
		func() *extv1beta1.SandboxClaim { return &extv1beta1.SandboxClaim{} }, &claim), task.UID)
	if !created && err == nil {
		klog.FromContext(ctx).V(4).Info("Applying SandboxClaim", "name", name)
		claim, err = apply(ctx, writeClaim, c.warm.Client.SandboxClaims(task.Namespace), name, body)
	}
	if takenBy(err) != nil {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("applying SandboxClaim %s: %w", name, err)
	}
	c.starts.childrenApplied(task.UID, c.clock.Now())
	return claim, nil
}

// letClaimGo deletes the claim of a warm task whose Sandbox is not of its
// pin's rendering (no agent has run in it: the task is not Running), and
// returns the cold launch that replaces it, for the status.
func (c *TaskController) letClaimGo(ctx context.Context, claim *extv1beta1.SandboxClaim, launch calibanv1alpha1.Launch) (applied, error) {
	klog.FromContext(ctx).Info("The warm pool served another rendering; letting the claim go and starting cold", "claim", claim.Name, "message", launch.Message)
	if _, err := deleteOwned(ctx, c.warm.Client.SandboxClaims(claim.Namespace), claim.Name, claim.UID); err != nil {
		return applied{}, err
	}
	return applied{relaunch: &launch, after: rolledRequeue}, nil
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

// taskOfClaimed is the task whose claim controls a Sandbox, or nil.
func (c *TaskController) taskOfClaimed(child metav1.Object) *calibanv1alpha1.CalibanTask {
	if c.claims == nil {
		return nil
	}
	claim, ok := controllerOf(child, claimGroupKind, func(ns, name string) (*extv1beta1.SandboxClaim, error) {
		return c.claims.SandboxClaims(ns).Get(name)
	})
	if !ok {
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

// removeDuplicates deletes the Sandboxes that agent-sandbox made for
// claim beside the one its status names (builders.DuplicateSandboxes),
// each with a UID precondition, so a Sandbox re-made under the name since
// the cache saw it is left alone. It returns the names it deleted. Without
// the claimed-Sandbox cache it finds none.
func (c *TaskController) removeDuplicates(ctx context.Context, claim *extv1beta1.SandboxClaim, taskUID types.UID) ([]string, error) {
	if c.claimed == nil || claim.Status.Sandbox.Name == "" {
		return nil, nil
	}
	items, err := c.claimed.ByIndex(controllerIndex, string(claim.UID))
	if err != nil || len(items) < 2 {
		return nil, nil
	}
	controlled := make([]metav1.Object, 0, len(items))
	for _, item := range items {
		if o, ok := item.(metav1.Object); ok {
			controlled = append(controlled, o)
		}
	}
	var removed []string
	for _, dup := range builders.DuplicateSandboxes(claim.UID, claim.Status.Sandbox.Name, taskUID, controlled) {
		klog.FromContext(ctx).Info("Deleting a second Sandbox agent-sandbox made for the task's claim", "sandbox", dup.GetName(), "claim", claim.Name, "kept", claim.Status.Sandbox.Name)
		deleted, err := deleteOwned(ctx, restDeleter{c.sandboxes.RESTClient(), claim.Namespace, builders.SandboxResource}, dup.GetName(), dup.GetUID())
		if err != nil {
			return removed, fmt.Errorf("deleting the duplicate Sandbox %s: %w", dup.GetName(), err)
		}
		if !deleted {
			// Gone already (a pass before this one, whose delete the
			// cache has yet to bring): counted and told then.
			continue
		}
		c.metrics.observeWarmDuplicate()
		removed = append(removed, dup.GetName())
	}
	return removed, nil
}

// restDeleter deletes objects of one resource and namespace through a
// REST client (the Sandbox view's typed client has no delete).
type restDeleter struct {
	client    rest.Interface
	namespace string
	resource  string
}

func (d restDeleter) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return d.client.Delete().Namespace(d.namespace).Resource(d.resource).Name(name).Body(&opts).Do(ctx).Error()
}
