// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/klog/v2"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	sandboxac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// applyChildren applies the task's children, each only when its cache
// does not say it already is what the sync would write
// (freshness.Want.Plan): a cold task's ServiceAccount, NetworkPolicy and
// Sandbox; a warm task's NetworkPolicy, for the pod with its claim's UID,
// and, on the Sandbox its claim holds, its labels and mode
// (docs/adr/0026-warm-start.md). claim is a warm task's claim, nil for a
// cold task. A warm pod runs as its pool's ServiceAccount.
func (c *TaskController) applyChildren(ctx context.Context, task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, claim *extv1beta1.SandboxClaim, mode sandboxv1beta1.OperatingMode) (applied, error) {
	warm := claim != nil
	want, err := c.children.Want(task, pin)
	if err != nil {
		return applied{}, err
	}
	defer recordRendered(ctx, want)
	logger, ns := klog.FromContext(ctx), task.Namespace
	var reselectAfter time.Duration
	for _, child := range []struct {
		kind freshness.Kind
		name string
		// write applies the child d renders, if any: a warm task has no
		// ServiceAccount of its own, nor a policy before its claim.
		// first: the cache has no such child, so the write is a create
		// (createOrFind).
		write func(d *builders.Children, first bool) error
	}{
		{freshness.ServiceAccount, builders.ServiceAccountName(task.Name), func(d *builders.Children, first bool) error {
			if d.ServiceAccount == nil {
				return nil
			}
			name := *d.ServiceAccount.Name
			if first {
				created, err := createOrFind(ctx, c.serviceAccountTarget(ns, d.ServiceAccount), task.UID)
				if created || err != nil {
					return err
				}
			}
			logger.V(4).Info("Applying ServiceAccount", "name", name)
			_, err := apply(ctx, writeServiceAccount, c.kube.CoreV1().ServiceAccounts(ns), name, d.ServiceAccount)
			return err
		}},
		{freshness.NetworkPolicy, builders.NetworkPolicyName(task.Name), func(d *builders.Children, first bool) error {
			if d.NetworkPolicy == nil {
				return nil
			}
			name := *d.NetworkPolicy.Name
			var (
				created bool
				err     error
			)
			if first {
				created, err = createOrFind(ctx, c.networkPolicyTarget(ns, d.NetworkPolicy), task.UID)
			}
			if !created && err == nil {
				logger.V(4).Info("Applying NetworkPolicy", "name", name)
				_, err = apply(ctx, writeNetworkPolicy, c.kube.NetworkingV1().NetworkPolicies(ns), name, d.NetworkPolicy)
			}
			if err == nil && warm {
				c.appliedPolicies.Store(task.UID, want.NetworkPolicy)
			}
			return err
		}},
	} {
		if warm && child.kind == freshness.ServiceAccount {
			// Its pod runs as the pool's: the name is not the task's to
			// take, nor to find taken.
			continue
		}
		view := c.children.View(child.kind, ns, child.name)
		if view != nil && !metav1.IsControlledBy(view, task) {
			// Another task's child, or an object someone labelled as the
			// operator's: never applied over.
			return applied{}, nameTaken(child.kind.String(), child.name, view)
		}
		switch want.Plan(child.kind, view, "") {
		case freshness.Keep:
			continue
		case freshness.Reselect:
			waiting, err := c.reselectPolicy(ctx, ns, task.Name, task.UID)
			if err != nil {
				return applied{}, err
			}
			if waiting {
				reselectAfter = reselectRequeue
			}
			continue
		}
		// A warm task's next sync comes as soon as agent-sandbox hands
		// over its Sandbox, often before the watch brings the policy just
		// applied.
		if last, _ := c.appliedPolicies.Load(task.UID); warm && child.kind == freshness.NetworkPolicy && view == nil && last == want.NetworkPolicy {
			continue
		}
		d, err := want.Render()
		if err != nil {
			return applied{}, err
		}
		if err := child.write(d, view == nil); err != nil {
			if takenBy(err) != nil {
				return applied{}, err
			}
			return applied{}, fmt.Errorf("applying %s %s: %w", child.kind, child.name, err)
		}
	}
	if warm {
		if claim.Status.Sandbox.Name == "" {
			// The claim's status brings the name, and wakes the task.
			return applied{}, nil
		}
		removed, err := c.removeDuplicates(ctx, claim, task.UID)
		for _, name := range removed {
			c.recorder.Event(task, corev1.EventTypeWarning, EventDuplicateSandboxRemoved, "Reconcile", builders.DuplicateRemovedNote(name, claim.Name, claim.Status.Sandbox.Name))
		}
		if err != nil {
			return applied{}, err
		}
		got, err := c.takeClaimed(ctx, task, pin, claim, mode)
		if err != nil || got.sandbox == nil || got.relaunch != nil || !builders.StartingUp(task.Status.Phase) || !builders.SandboxServing(&got.sandbox.Status) {
			return got, err
		}
		// Running only once prospero can reach caliband: the policy
		// selects the pod by the claim's label, which agent-sandbox puts
		// on an adopted pod after the claim is Ready.
		if got.unreachable, err = c.podUnreachable(ctx, ns, got.sandbox, claim.UID); err != nil {
			return applied{}, err
		}
		if got.unreachable != "" {
			got.after = soonest(got.after, reachRequeue)
		}
		return got, nil
	}
	if !c.sandboxAPI.Served() {
		return applied{apiMissing: true}, nil
	}
	sandbox, err := c.applySandbox(ctx, task, want, mode)
	if apierrors.IsNotFound(err) {
		return applied{apiMissing: true}, nil
	}
	return applied{sandbox: sandbox, after: reselectAfter}, err
}

// reachRequeue is how soon a warm task whose pod its policy does not
// select yet looks again: no event of the operator's caches says when
// agent-sandbox relabels the pod.
const reachRequeue = 250 * time.Millisecond

// podUnreachable reads the pod of a warm task's serving Sandbox and says
// why the task's NetworkPolicy does not let prospero reach it yet
// (builders.PodReachable), "" once it does.
func (c *TaskController) podUnreachable(ctx context.Context, ns string, sandbox *builders.ObservedSandbox, claimUID types.UID) (string, error) {
	pod, err := c.kube.CoreV1().Pods(ns).Get(ctx, sandbox.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return "", fmt.Errorf("reading the pod of Sandbox %s: %w", sandbox.Name, err)
	}
	return builders.PodReachable(pod, sandbox.Name, sandbox.UID, claimUID), nil
}

// reselectRequeue is how soon a task whose NetworkPolicy still selects its
// pod by name looks again whether the pod carries its UID label: no event
// of the operator's caches says when agent-sandbox puts it there.
const reselectRequeue = 5 * time.Second

// reselectPolicy moves the NetworkPolicy of task (name, uid) from the
// name labels to the UID (builders.ReselectedNetworkPolicy), once no pod
// of the task can be left selected by no policy: the Sandbox's pod carries
// the UID label, or there is no pod and the Sandbox's template gives the
// next one the label. It reports that it is waiting for the label;
// meanwhile the policy keeps selecting by name, as it did. A policy it
// cannot move (not the task's, or with nothing the operator applied) is
// left as it is.
func (c *TaskController) reselectPolicy(ctx context.Context, ns, name string, uid types.UID) (bool, error) {
	sandbox := builders.SandboxName(name)
	pod, err := c.kube.CoreV1().Pods(ns).Get(ctx, sandbox, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if v := c.children.View(freshness.Sandbox, ns, sandbox); v == nil || v.ByName {
			return true, nil
		}
	case err != nil:
		// Not the task's failure: the policy it has still selects its pod,
		// and the rest of its sync (a suspend, a resume) must go on. A
		// role without get on pods keeps it waiting, and says so here.
		klog.FromContext(ctx).V(2).Info("Could not read the pod of a Sandbox; its NetworkPolicy keeps selecting it by name", "name", sandbox, "error", err)
		return true, nil
	case pod.Labels[builders.LabelTaskUID] != string(uid):
		return true, nil
	}
	policy := builders.NetworkPolicyName(name)
	live, err := c.kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, policy, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading NetworkPolicy %s: %w", policy, err)
	}
	if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != uid {
		return false, nil
	}
	np, ok, err := builders.ReselectedNetworkPolicy(live, uid)
	if err != nil || !ok {
		return false, err
	}
	klog.FromContext(ctx).V(2).Info("Moving NetworkPolicy to select its pod by the task's UID", "name", policy)
	if _, err := apply(ctx, writeNetworkPolicy, c.kube.NetworkingV1().NetworkPolicies(ns), policy, np); err != nil {
		return false, fmt.Errorf("applying NetworkPolicy %s: %w", policy, err)
	}
	return false, nil
}

// applySandbox applies the task's Sandbox when its plan says so: all of it
// when it is missing or does not hold what the task wants, its mode alone
// when only the mode differs (or it is kept, ADR 0015). It returns the
// Sandbox as the status reads it.
func (c *TaskController) applySandbox(ctx context.Context, task *calibanv1alpha1.CalibanTask, want *freshness.Want, mode sandboxv1beta1.OperatingMode) (*builders.ObservedSandbox, error) {
	name := builders.SandboxName(task.Name)
	current := c.children.View(freshness.Sandbox, task.Namespace, name)
	if current != nil && !metav1.IsControlledBy(current, task) {
		return nil, nameTaken(freshness.Sandbox.String(), name, current)
	}
	plan := want.Plan(freshness.Sandbox, current, mode)
	if plan == freshness.Keep {
		return current.Sandbox, nil
	}
	var desired *sandboxac.SandboxApplyConfiguration
	if current != nil {
		// The cache keeps no spec, and an apply over an existing Sandbox
		// must carry what agent-sandbox keeps immutable as it is: read it.
		live, err := c.sandboxes.Sandboxes(task.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading Sandbox %s: %w", name, err)
		}
		switch {
		case err != nil:
		case !metav1.IsControlledBy(live, task):
			return nil, nameTaken(freshness.Sandbox.String(), name, live)
		default:
			if desired, err = want.SandboxOver(live, mode); err != nil {
				return nil, err
			}
			// An apply over a Sandbox the operator created must be able
			// to drop what the task no longer asks for.
			if err := ownAsApplied(ctx, c.sandboxes.RESTClient(), builders.SandboxResource, live); err != nil {
				return nil, err
			}
		}
	}
	if desired == nil {
		d, err := want.Render()
		if err != nil {
			return nil, err
		}
		desired = d.Sandbox
		desired.Spec.WithOperatingMode(mode)
		if current == nil {
			created, err := createOrFind(ctx, c.sandboxTarget(task.Namespace, name, desired), task.UID)
			if err != nil {
				return nil, err
			}
			if created {
				return &builders.ObservedSandbox{Name: name, CalibandPort: c.settings.CalibandPort, Mode: builders.LiveMode(mode)}, nil
			}
		}
	}
	klog.FromContext(ctx).V(4).Info("Applying Sandbox", "name", name, "modeOnly", plan == freshness.ModeOnly, "kept", want.Kept(freshness.Sandbox, current))
	if _, err := applyUnread(ctx, writeSandbox, c.sandboxes.RESTClient(), builders.SandboxResource, task.Namespace, name, desired); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("applying Sandbox %s: %w", name, err)
	}
	// The apply changed the spec, never the status agent-sandbox writes:
	// the task reads the status it had (none for a new Sandbox) with the
	// mode the server just accepted, and the informer brings whatever
	// comes next. A new Sandbox is the rendering under the settings, so
	// caliband listens on their port.
	if current != nil {
		return current.Sandbox.InMode(mode), nil
	}
	return &builders.ObservedSandbox{Name: name, CalibandPort: c.settings.CalibandPort, Mode: builders.LiveMode(mode)}, nil
}

// sandboxOf is the task's Sandbox as its status reads it from the cache:
// its own, or, for a warm task, the one its claim holds; nil when there is
// none. claim is the task's claim from the cache (claimOf).
func (c *TaskController) sandboxOf(task *calibanv1alpha1.CalibanTask, claim *extv1beta1.SandboxClaim) *builders.ObservedSandbox {
	var owner metav1.Object = task
	name := builders.SandboxName(task.Name)
	if builders.IsWarm(task) {
		if claim == nil || claim.Status.Sandbox.Name == "" {
			return nil
		}
		owner, name = claim, claim.Status.Sandbox.Name
	}
	if v := c.children.View(freshness.Sandbox, task.Namespace, name); v != nil && metav1.IsControlledBy(v, owner) {
		return v.Sandbox
	}
	return nil
}

// recordRendered says in the sync's span that it had to render the task's
// children: the memo did not know what they hash to.
func recordRendered(ctx context.Context, want *freshness.Want) {
	if span := tracing.SyncFrom(ctx); span != nil && want.Rendered() {
		span.SetAttributes(tracing.KeyRendered.Bool(true))
	}
}

// The targets of the first writes of a task's children (createOrFind).
func (c *TaskController) serviceAccountTarget(ns string, sa *corev1ac.ServiceAccountApplyConfiguration) target {
	return typedTarget(writeServiceAccount, freshness.ServiceAccount.String(), *sa.Name, c.kube.CoreV1().ServiceAccounts(ns), sa,
		func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} }, nil)
}

func (c *TaskController) networkPolicyTarget(ns string, np *networkingv1ac.NetworkPolicyApplyConfiguration) target {
	return typedTarget(writeNetworkPolicy, freshness.NetworkPolicy.String(), *np.Name, c.kube.NetworkingV1().NetworkPolicies(ns), np,
		func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} }, nil)
}

func (c *TaskController) sandboxTarget(ns, name string, body *sandboxac.SandboxApplyConfiguration) target {
	return target{kind: freshness.Sandbox.String(), name: name,
		create: func(ctx context.Context) error {
			return restCreate(ctx, writeSandbox, c.sandboxes.RESTClient(), builders.SandboxResource, ns, name, body)
		},
		get: func(ctx context.Context) (metav1.Object, error) {
			return c.sandboxes.Sandboxes(ns).Get(ctx, name, metav1.GetOptions{})
		}}
}
