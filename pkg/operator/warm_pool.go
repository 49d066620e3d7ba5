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
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
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

// unavailableMessage is why a Workspace has no pool while the extensions
// are not served.
var unavailableMessage = fmt.Sprintf("agent-sandbox's extensions API %s is not served (run its controller with --extensions and install its extension CRDs)",
	extv1beta1.SchemeGroupVersion)

// sync keeps ws's pool as its spec and the operator's settings render it,
// and says what it found. problem is ws's validation problem: an invalid
// Workspace keeps the pool it had, untouched, since no task can be
// admitted against it and it may be fixed in a moment.
func (c *WorkspaceController) syncWarmPool(ctx context.Context, ws *calibanv1alpha1.Workspace, problem string) (*builders.WarmPoolObservation, error) {
	w := c.warm
	if builders.WarmReplicas(ws) == 0 {
		if err := c.keepIsolation(ctx, ws); err != nil {
			return nil, err
		}
		return nil, c.removeWarmPool(ctx, ws, "")
	}
	if problem != "" {
		return &builders.WarmPoolObservation{}, nil
	}
	if p := builders.WarmSourcesProblem(ws.Spec.Sources); p != "" {
		return &builders.WarmPoolObservation{Reason: builders.ReasonSourcesNotPinned, Problem: p}, c.removeWarmPool(ctx, ws, "")
	}
	pin, ok := builders.PoolPin(ws)
	if !ok {
		return &builders.WarmPoolObservation{}, nil
	}
	r, err := builders.RenderWarm(builders.PoolTask(ws), pin, c.settings)
	if err != nil {
		return nil, err
	}
	ns := ws.Namespace
	sa := builders.BuildWarmServiceAccount(ws)
	if err := applyPoolChild(ctx, w.serviceAccounts, ws, *sa.Name, sa, c.serviceAccountWrites(ctx, ns, *sa.Name)); err != nil {
		return nil, err
	}
	for _, np := range []*networkingv1ac.NetworkPolicyApplyConfiguration{builders.BuildWarmIsolationPolicy(ws), builders.BuildWarmUnclaimedPolicy(ws, r)} {
		if err := applyPoolChild(ctx, w.networkPolicies, ws, *np.Name, np, c.networkPolicyWrites(ctx, ns, *np.Name)); err != nil {
			return nil, err
		}
	}
	if !w.ext.Served() {
		return &builders.WarmPoolObservation{Reason: builders.ReasonWarmPoolUnavailable, Problem: unavailableMessage}, nil
	}

	template := builders.WarmTemplateName(ws.Name, r.Hash)
	cachedTemplate, _ := w.templates.SandboxTemplates(ns).Get(template)
	if cachedTemplate != nil && !metav1.IsControlledBy(cachedTemplate, ws) {
		return nil, nameTaken("SandboxTemplate", template, cachedTemplate)
	}
	if cachedTemplate == nil {
		// A template is never changed once made: its name is its
		// rendering's hash.
		body := builders.BuildWarmTemplate(ws, r)
		created, err := createOrFind(ctx, typedTarget(writeTemplate, "SandboxTemplate", template, w.client.SandboxTemplates(ns), body,
			func() *extv1beta1.SandboxTemplate { return &extv1beta1.SandboxTemplate{} }, nil), ws.UID)
		if !created && err == nil {
			klog.FromContext(ctx).V(4).Info("Applying SandboxTemplate", "name", template)
			_, err = apply(ctx, writeTemplate, w.client.SandboxTemplates(ns), template, body)
		}
		if takenBy(err) != nil {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("applying SandboxTemplate %s/%s: %w", ns, template, err)
		}
	}
	name := builders.WarmPoolName(ws.Name)
	pool, _ := w.pools.SandboxWarmPools(ns).Get(name)
	if pool != nil && !metav1.IsControlledBy(pool, ws) {
		return nil, nameTaken("SandboxWarmPool", name, pool)
	}
	if !poolHolds(pool, builders.WarmReplicas(ws), template) {
		body := builders.BuildWarmPool(ws, template)
		var written *extv1beta1.SandboxWarmPool
		created := false
		var err error
		if pool == nil {
			created, err = createOrFind(ctx, typedTarget(writeWarmPool, "SandboxWarmPool", name, w.client.SandboxWarmPools(ns), body,
				func() *extv1beta1.SandboxWarmPool { return &extv1beta1.SandboxWarmPool{} }, &written), ws.UID)
		}
		if !created && err == nil {
			written, err = apply(ctx, writeWarmPool, w.client.SandboxWarmPools(ns), name, body)
		}
		if takenBy(err) != nil {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("applying SandboxWarmPool %s/%s: %w", ns, name, err)
		}
		if pool != nil && pool.Spec.TemplateRef.Name != template {
			c.recorder.Event(ws, corev1.EventTypeNormal, EventWarmPoolRolled, "Roll",
				fmt.Sprintf("warm pool %s rolls from SandboxTemplate %s to %s; claimed Sandboxes keep what they have", name, pool.Spec.TemplateRef.Name, template))
		}
		pool = written
	}
	// Old renderings' templates go once the pool, as its cache has it,
	// serves the new one: a claim reads its pool's template, never an old
	// one, and a claimed Sandbox needs none.
	if cached, _ := w.pools.SandboxWarmPools(ns).Get(pool.Name); cached != nil && cached.Spec.TemplateRef.Name == template {
		if err := c.deleteTemplates(ctx, ws, template); err != nil {
			return nil, err
		}
	}
	return &builders.WarmPoolObservation{Template: template, Pool: pool}, nil
}

// poolHolds reports that a cached pool is the one to apply: the size the
// Workspace asks for (a scale from elsewhere is undone: the Workspace owns
// it), the template, and Recreate.
func poolHolds(pool *extv1beta1.SandboxWarmPool, replicas int32, template string) bool {
	return pool != nil && pool.Spec.Replicas != nil && *pool.Spec.Replicas == replicas &&
		pool.Spec.TemplateRef.Name == template &&
		pool.Spec.UpdateStrategy != nil && pool.Spec.UpdateStrategy.Type == extv1beta1.UpdateStrategyRecreate
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

// keepIsolation keeps the isolation policy of a Workspace whose pool is
// off but that had one (its pool's ServiceAccount is there): a warm task
// of it may still resume into a new pod of the pool's, which only that
// policy cuts off until the task's own selects it. One deleted meanwhile
// is made again.
func (c *WorkspaceController) keepIsolation(ctx context.Context, ws *calibanv1alpha1.Workspace) error {
	w := c.warm
	obj, exists, _ := w.serviceAccounts.GetByKey(ws.Namespace + "/" + builders.WarmPoolName(ws.Name))
	if v, ok := obj.(*freshness.View); !exists || !ok || !metav1.IsControlledBy(v, ws) {
		return nil
	}
	np := builders.BuildWarmIsolationPolicy(ws)
	return applyPoolChild(ctx, w.networkPolicies, ws, *np.Name, np, c.networkPolicyWrites(ctx, ws.Namespace, *np.Name))
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

// removeWarmPool deletes ws's pool, its templates but keep, and the
// unclaimed pods' policy, as far as the caches have them. The
// ServiceAccount and the isolation policy stay for the Workspace's life:
// a suspended warm task resumes into a new pod that runs as the one and is
// cut off by the other.
func (c *WorkspaceController) removeWarmPool(ctx context.Context, ws *calibanv1alpha1.Workspace, keep string) error {
	w := c.warm
	if obj, exists, _ := w.networkPolicies.GetByKey(ws.Namespace + "/" + builders.WarmUnclaimedPolicyName(ws.Name)); exists {
		if v, ok := obj.(*freshness.View); ok && metav1.IsControlledBy(v, ws) {
			if _, err := deleteOwned(ctx, c.kube.NetworkingV1().NetworkPolicies(ws.Namespace), v.Name, v.UID); err != nil {
				return err
			}
		}
	}
	if !w.ext.Served() {
		return nil
	}
	if pool, err := w.pools.SandboxWarmPools(ws.Namespace).Get(builders.WarmPoolName(ws.Name)); err == nil && metav1.IsControlledBy(pool, ws) {
		klog.FromContext(ctx).Info("Deleting the warm pool the Workspace no longer asks for", "pool", pool.Name)
		if _, err := deleteOwned(ctx, w.client.SandboxWarmPools(ws.Namespace), pool.Name, pool.UID); err != nil {
			return err
		}
	}
	return c.deleteTemplates(ctx, ws, keep)
}

// deleteTemplates deletes the cached templates of ws's pool but keep.
func (c *WorkspaceController) deleteTemplates(ctx context.Context, ws *calibanv1alpha1.Workspace, keep string) error {
	selector := labels.SelectorFromSet(labels.Set{builders.LabelWarmPool: builders.TaskLabelValue(ws.Name)})
	templates, err := c.warm.templates.SandboxTemplates(ws.Namespace).List(selector)
	if err != nil {
		return err
	}
	for _, t := range templates {
		if t.Name == keep || !metav1.IsControlledBy(t, ws) {
			continue
		}
		klog.FromContext(ctx).V(2).Info("Deleting the SandboxTemplate of an older rendering", "name", t.Name)
		if _, err := deleteOwned(ctx, c.warm.client.SandboxTemplates(ws.Namespace), t.Name, t.UID); err != nil {
			return err
		}
	}
	return nil
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
