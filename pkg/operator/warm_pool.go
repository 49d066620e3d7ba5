// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	extclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/typed/extensions/v1beta1"
	extinformers "github.com/caliban-ai/caliban-operator/pkg/generated/informers/externalversions/extensions/v1beta1"
	extlisters "github.com/caliban-ai/caliban-operator/pkg/generated/listers/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// The writes of warm pools (see write.go).
const (
	writeTemplate = "sandboxtemplate"
	writeWarmPool = "sandboxwarmpool"
	writeClaim    = "sandboxclaim"
)

// EventWarmPoolRolled: a Workspace's pool serves a new rendering
// (docs/warm-start.md).
const EventWarmPoolRolled = "WarmPoolRolled"

var workspaceGroupKind = schema.GroupKind{Group: calibanv1alpha1.GroupName, Kind: "Workspace"}

// WarmPoolInformers are what a controller reads of agent-sandbox's
// extensions: whether they are served, and the caches of the objects the
// operator made with them. The caches start only once API says the
// extensions are served.
type WarmPoolInformers struct {
	API SandboxAPI
	// Client writes templates, pools and claims.
	Client    extclient.ExtensionsV1beta1Interface
	Templates extinformers.SandboxTemplateInformer
	Pools     extinformers.SandboxWarmPoolInformer
	Claims    extinformers.SandboxClaimInformer
	// The informers of the task controller's children, which keep
	// freshness views: a pool's ServiceAccount and NetworkPolicies are
	// among them.
	ServiceAccounts coreinformers.ServiceAccountInformer
	NetworkPolicies networkinginformers.NetworkPolicyInformer
}

// warmPools keeps the warm pools of Workspaces (docs/adr/0026-warm-start.md):
// a template per rendering, the pool, its ServiceAccount and two
// NetworkPolicies, each applied only when its cache does not hold it.
type warmPools struct {
	ext       SandboxAPI
	client    extclient.ExtensionsV1beta1Interface
	templates extlisters.SandboxTemplateLister
	pools     extlisters.SandboxWarmPoolLister
	// serviceAccounts and networkPolicies are the stores of the task
	// controller's child informers, which keep freshness views.
	serviceAccounts, networkPolicies cache.Store
}

// syncWarmPool keeps ws's pool as its spec and the operator's settings
// render it, and says what it found: builders.WantWarmPool says what ws
// asks, builders.PlanWarmPool what to write for it over what the caches
// hold, and this writes the plan. problem is ws's validation problem.
func (c *WorkspaceController) syncWarmPool(ctx context.Context, ws *calibanv1alpha1.Workspace, problem string) (*builders.WarmPoolObservation, error) {
	want, err := builders.WantWarmPool(ws, problem, c.settings)
	if err != nil {
		return nil, err
	}
	plan := builders.PlanWarmPool(ws, want, c.seenWarmPool(ws, want.Template))
	if err := c.writeWarmPool(ctx, ws, plan); err != nil {
		return nil, err
	}
	return plan.Observation, nil
}

// seenWarmPool is what the caches hold of ws's pool; template is the
// name of the rendering it wants.
func (c *WorkspaceController) seenWarmPool(ws *calibanv1alpha1.Workspace, template string) builders.WarmPoolSeen {
	w, ns := c.warm, ws.Namespace
	seen := builders.WarmPoolSeen{
		Served:          w.ext.Served(),
		ServiceAccount:  cachedView(w.serviceAccounts, ns, builders.WarmPoolName(ws.Name)),
		UnclaimedPolicy: cachedView(w.networkPolicies, ns, builders.WarmUnclaimedPolicyName(ws.Name)),
	}
	if !seen.Served {
		return seen
	}
	if template != "" {
		seen.Template, _ = w.templates.SandboxTemplates(ns).Get(template)
	}
	seen.Pool, _ = w.pools.SandboxWarmPools(ns).Get(builders.WarmPoolName(ws.Name))
	selector := labels.SelectorFromSet(labels.Set{builders.LabelWarmPool: builders.TaskLabelValue(ws.Name)})
	seen.Templates, _ = w.templates.SandboxTemplates(ns).List(selector)
	return seen
}

// cachedView is the freshness view the store has under ns/name, or nil.
func cachedView(store cache.Store, ns, name string) metav1.Object {
	if obj, exists, _ := store.GetByKey(ns + "/" + name); exists {
		if v, ok := obj.(*freshness.View); ok {
			return v
		}
	}
	return nil
}

// writeWarmPool writes plan for ws; a pool it writes replaces the cached
// one in the plan's observation.
func (c *WorkspaceController) writeWarmPool(ctx context.Context, ws *calibanv1alpha1.Workspace, plan builders.WarmPoolPlan) error {
	w, ns := c.warm, ws.Namespace
	if sa := plan.ServiceAccount; sa != nil {
		if err := applyPoolChild(ctx, w.serviceAccounts, ws, *sa.Name, sa, c.serviceAccountWrites(ctx, ns, *sa.Name)); err != nil {
			return err
		}
	}
	for _, np := range plan.Policies {
		if err := applyPoolChild(ctx, w.networkPolicies, ws, *np.Name, np, c.networkPolicyWrites(ctx, ns, *np.Name)); err != nil {
			return err
		}
	}
	if plan.Taken != "" {
		return &errNameTaken{message: plan.Taken}
	}
	if body := plan.Template; body != nil {
		created, err := createOrFind(ctx, typedTarget(writeTemplate, "SandboxTemplate", *body.Name, w.client.SandboxTemplates(ns), body,
			func() *extv1beta1.SandboxTemplate { return &extv1beta1.SandboxTemplate{} }, nil), ws.UID)
		if !created && err == nil {
			klog.FromContext(ctx).V(4).Info("Applying SandboxTemplate", "name", *body.Name)
			_, err = apply(ctx, writeTemplate, w.client.SandboxTemplates(ns), *body.Name, body)
		}
		if takenBy(err) != nil {
			return err
		}
		if err != nil {
			return fmt.Errorf("applying SandboxTemplate %s/%s: %w", ns, *body.Name, err)
		}
	}
	if body := plan.Pool; body != nil {
		name := *body.Name
		var written *extv1beta1.SandboxWarmPool
		created := false
		var err error
		if plan.CreatePool {
			created, err = createOrFind(ctx, typedTarget(writeWarmPool, "SandboxWarmPool", name, w.client.SandboxWarmPools(ns), body,
				func() *extv1beta1.SandboxWarmPool { return &extv1beta1.SandboxWarmPool{} }, &written), ws.UID)
		}
		if !created && err == nil {
			written, err = apply(ctx, writeWarmPool, w.client.SandboxWarmPools(ns), name, body)
		}
		if takenBy(err) != nil {
			return err
		}
		if err != nil {
			return fmt.Errorf("applying SandboxWarmPool %s/%s: %w", ns, name, err)
		}
		if plan.RolledFrom != "" {
			c.recorder.Event(ws, corev1.EventTypeNormal, EventWarmPoolRolled, "Roll",
				fmt.Sprintf("warm pool %s rolls from SandboxTemplate %s to %s; claimed Sandboxes keep what they have", name, plan.RolledFrom, *body.Spec.TemplateRef.Name))
		}
		if plan.Observation != nil {
			plan.Observation.Pool = written
		}
	}
	for _, d := range plan.Deletes {
		klog.FromContext(ctx).V(2).Info("Deleting what the Workspace's warm pool no longer needs", "kind", d.Kind, "name", d.Name)
		if _, err := deleteOwned(ctx, c.poolDeleter(ns, d.Kind), d.Name, d.UID); err != nil {
			return err
		}
	}
	return nil
}

// poolDeleter is the client that deletes a pool's object of kind.
func (c *WorkspaceController) poolDeleter(ns, kind string) deleter {
	switch kind {
	case "SandboxWarmPool":
		return c.warm.client.SandboxWarmPools(ns)
	case "SandboxTemplate":
		return c.warm.client.SandboxTemplates(ns)
	}
	return c.kube.NetworkingV1().NetworkPolicies(ns)
}

// poolWrites are the writes of one of a pool's ServiceAccount and
// NetworkPolicies: its first, a create (createOrFind), and the applies
// after, over an object whose fields the create gave the operator moved
// to its applies (ownAsApplied through rc, resource) first.
type poolWrites struct {
	// kind names the object in messages.
	kind   string
	create func(body runtime.ApplyConfiguration) target
	apply  func(body runtime.ApplyConfiguration) error
	rc     rest.Interface
	// resource is the object's resource, for rc.
	resource string
}

// applyPoolChild applies a ServiceAccount or NetworkPolicy of ws's pool,
// stamped with its applied hash, unless the cache holds one of ws with the
// same stamp. One of that name that ws does not control is never written:
// errNameTaken.
func applyPoolChild[T interface {
	runtime.ApplyConfiguration
	WithAnnotations(map[string]string) T
}](ctx context.Context, store cache.Store, ws *calibanv1alpha1.Workspace, name string, child T, w poolWrites) error {
	hash, err := builders.AppliedHash(child)
	if err != nil {
		return err
	}
	var view *freshness.View
	if obj, exists, _ := store.GetByKey(ws.Namespace + "/" + name); exists {
		view, _ = obj.(*freshness.View)
	}
	switch {
	case view != nil && !metav1.IsControlledBy(view, ws):
		return nameTaken(w.kind, name, view)
	case view != nil && view.Applied == hash:
		return nil
	}
	body := child.WithAnnotations(map[string]string{builders.AnnotationAppliedHash: hash})
	t := w.create(body)
	if view == nil {
		created, err := createOrFind(ctx, t, ws.UID)
		if created || takenBy(err) != nil {
			return err
		}
		if err != nil {
			return fmt.Errorf("creating %s/%s: %w", ws.Namespace, name, err)
		}
	} else {
		// A new rendering of a child the operator may have created: what
		// it leaves out must go.
		live, err := t.get(ctx)
		if err != nil {
			return fmt.Errorf("reading %s/%s: %w", ws.Namespace, name, err)
		}
		if !metav1.IsControlledBy(live, ws) {
			return nameTaken(t.kind, name, live)
		}
		if err := ownAsApplied(ctx, w.rc, w.resource, live); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).V(4).Info("Applying a warm pool's child", "name", name)
	if err := w.apply(body); err != nil {
		return fmt.Errorf("applying %s/%s: %w", ws.Namespace, name, err)
	}
	return nil
}

// serviceAccountWrites are the writes of a pool's ServiceAccount name.
func (c *WorkspaceController) serviceAccountWrites(ctx context.Context, ns, name string) poolWrites {
	return typedPoolWrites(ctx, writeServiceAccount, "ServiceAccount", name, c.kube.CoreV1().ServiceAccounts(ns),
		func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} }, c.kube.CoreV1().RESTClient(), "serviceaccounts")
}

// networkPolicyWrites are the writes of a pool's NetworkPolicy name.
func (c *WorkspaceController) networkPolicyWrites(ctx context.Context, ns, name string) poolWrites {
	return typedPoolWrites(ctx, writeNetworkPolicy, "NetworkPolicy", name, c.kube.NetworkingV1().NetworkPolicies(ns),
		func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} }, c.kube.NetworkingV1().RESTClient(), "networkpolicies")
}

// typedPoolWrites are the writes of a pool's object name of kind through
// its typed client, and through rc for ownAsApplied.
func typedPoolWrites[T metav1.Object, C interface {
	typedClient[T]
	patcher[T]
}](ctx context.Context, write, kind, name string, client C, newObject func() T, rc rest.Interface, resource string) poolWrites {
	return poolWrites{
		kind: kind,
		create: func(body runtime.ApplyConfiguration) target {
			return typedTarget[T](write, kind, name, client, body, newObject, nil)
		},
		apply: func(body runtime.ApplyConfiguration) error {
			_, err := apply(ctx, write, client, name, body)
			return err
		},
		rc: rc, resource: resource,
	}
}

// deleter is the Delete method of a typed client.
type deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// deleteOwned deletes the object name if it still has uid: one re-made
// under the name since the cache saw it is another object. deleted is
// false when there was nothing of that UID left to delete.
func deleteOwned(ctx context.Context, client deleter, name string, uid types.UID) (deleted bool, err error) {
	err = client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("deleting %s: %w", name, err)
	}
	tracing.RecordWrite(ctx, writeDelete)
	return true, nil
}
