// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	sandboxac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
)

// applyChildren applies the ServiceAccount, the NetworkPolicy and the
// Sandbox, each only when its cache does not say it already carries what
// the task wants, and returns the Sandbox as the status derivation reads
// it. apiMissing says agent-sandbox's API is not served, so there is no
// Sandbox to apply.
func (c *TaskController) applyChildren(ctx context.Context, task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, mode sandboxv1beta1.OperatingMode) (sandbox *sandboxv1beta1.Sandbox, apiMissing bool, err error) {
	want, err := c.children.Want(task, pin)
	if err != nil {
		return nil, false, err
	}
	ns := task.Namespace
	for _, child := range []struct {
		kind  freshness.Kind
		name  string
		write func(*freshness.Desired) error
	}{
		{freshness.ServiceAccount, builders.ServiceAccountName(task.Name), func(d *freshness.Desired) error {
			_, err := apply(ctx, writeServiceAccount, c.kube.CoreV1().ServiceAccounts(ns), *d.ServiceAccount.Name, d.ServiceAccount)
			return err
		}},
		{freshness.NetworkPolicy, builders.NetworkPolicyName(task.Name), func(d *freshness.Desired) error {
			_, err := apply(ctx, writeNetworkPolicy, c.kube.NetworkingV1().NetworkPolicies(ns), *d.NetworkPolicy.Name, d.NetworkPolicy)
			return err
		}},
	} {
		if !c.children.Stale(child.kind, c.children.View(child.kind, ns, child.name), want) {
			continue
		}
		d, err := want.Render()
		if err != nil {
			return nil, false, err
		}
		klog.FromContext(ctx).V(4).Info("Applying "+child.kind.String(), "name", child.name)
		if err := child.write(d); err != nil {
			return nil, false, fmt.Errorf("applying %s %s: %w", child.kind, child.name, err)
		}
	}
	if !c.sandboxAPI.Served() {
		return nil, true, nil
	}
	return c.applySandbox(ctx, task, want, mode)
}

// applySandbox applies the task's Sandbox when it is missing, does not hold
// what w wants (unless it is kept, ADR 0015), or is not in mode.
func (c *TaskController) applySandbox(ctx context.Context, task *calibanv1alpha1.CalibanTask, w *freshness.Want, mode sandboxv1beta1.OperatingMode) (*sandboxv1beta1.Sandbox, bool, error) {
	current := c.liveSandbox(task)
	if !c.children.Stale(freshness.Sandbox, current, w) && freshness.LiveMode(current.OperatingMode) == mode {
		return current.Sandbox(), false, nil
	}
	sandboxes := c.sandboxes.Sandboxes(task.Namespace)
	var desired *sandboxac.SandboxApplyConfiguration
	if current != nil {
		// The cache keeps no spec, and an apply over an existing Sandbox
		// must carry what agent-sandbox keeps immutable as it is: read it.
		live, err := sandboxes.Get(ctx, current.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, false, fmt.Errorf("reading Sandbox %s: %w", current.Name, err)
		}
		if err == nil && metav1.IsControlledBy(live, task) {
			if desired, err = w.SandboxOver(live); err != nil {
				return nil, false, err
			}
		}
	}
	if desired == nil {
		d, err := w.Render()
		if err != nil {
			return nil, false, err
		}
		desired = d.Sandbox
	}
	desired.Spec.WithOperatingMode(mode)
	name := *desired.Name
	klog.FromContext(ctx).V(4).Info("Applying Sandbox", "name", name, "kept", current != nil && c.children.Kept(freshness.Sandbox, current))
	_, err := apply(ctx, writeSandbox, sandboxes, name, desired)
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("applying Sandbox %s: %w", name, err)
	}
	// The apply changed the spec, never the status agent-sandbox writes:
	// the task reads the status it had (none for a new Sandbox) with the
	// mode the server just accepted, and the informer brings whatever
	// comes next. A new Sandbox is the rendering under the settings, so
	// caliband listens on their port.
	view := current
	if view == nil {
		view = &freshness.View{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: task.Namespace}, CalibandPort: c.settings.CalibandPort}
	}
	applied := view.Sandbox()
	applied.Spec.OperatingMode = mode
	return applied, false, nil
}

// liveSandbox is the view of the task's Sandbox from the cache, or nil.
func (c *TaskController) liveSandbox(task *calibanv1alpha1.CalibanTask) *freshness.View {
	v := c.children.View(freshness.Sandbox, task.Namespace, builders.SandboxName(task.Name))
	if v == nil || !metav1.IsControlledBy(v, task) {
		return nil
	}
	return v
}

// observedSandbox is the task's Sandbox as the status derivation reads it,
// or nil.
func (c *TaskController) observedSandbox(task *calibanv1alpha1.CalibanTask) *sandboxv1beta1.Sandbox {
	if builders.IsWarm(task) {
		if v := c.claimedSandbox(task); v != nil {
			return v.Sandbox()
		}
		return nil
	}
	if v := c.liveSandbox(task); v != nil {
		return v.Sandbox()
	}
	return nil
}
