// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	extac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/extensions/v1beta1"
)

// ExtensionsUnserved is why a Workspace keeps no pool, and a task starts
// cold, while agent-sandbox's extensions are not served.
var ExtensionsUnserved = fmt.Sprintf("agent-sandbox's extensions API %s is not served (run its controller with --extensions and install its extension CRDs)",
	extv1beta1.SchemeGroupVersion)

// WarmPoolWant is what a Workspace asks of its warm pool, from its spec
// and the operator's settings alone (WantWarmPool).
type WarmPoolWant struct {
	// Off: no pool is asked for; what a pool made goes, but for its
	// isolation policy (docs/adr/0026-warm-start.md).
	Off bool
	// Hold: the Workspace is invalid, or names no provider for a pool
	// task: what it has is left as it is, since it may be fixed in a
	// moment and no task can be admitted meanwhile.
	Hold bool
	// Problem, with Reason, is why the Workspace keeps no pool although
	// it asks for one; its pool goes.
	Reason, Problem string
	// Rendering and Template are the pool's rendering and the
	// SandboxTemplate named by it, when the pool is kept.
	Rendering WarmRendering
	Template  string
}

// WantWarmPool is what ws asks of its pool; problem is its validation
// problem.
func WantWarmPool(ws *calibanv1alpha1.Workspace, problem string, s config.AgentSettings) (WarmPoolWant, error) {
	if WarmReplicas(ws) == 0 {
		return WarmPoolWant{Off: true}, nil
	}
	if problem != "" {
		return WarmPoolWant{Hold: true}, nil
	}
	if p := WarmSourcesProblem(ws.Spec.Sources); p != "" {
		return WarmPoolWant{Reason: ReasonSourcesNotPinned, Problem: p}, nil
	}
	pin, ok := PoolPin(ws)
	if !ok {
		return WarmPoolWant{Hold: true}, nil
	}
	r, err := RenderWarm(PoolTask(ws), pin, s)
	if err != nil {
		return WarmPoolWant{}, err
	}
	return WarmPoolWant{Rendering: r, Template: WarmTemplateName(ws.Name, r.Hash)}, nil
}

// WarmPoolSeen is what the Workspace controller's caches hold of a
// Workspace's pool. Nil is absent from the cache.
type WarmPoolSeen struct {
	// Served: agent-sandbox's extensions are served; without them the
	// caches of templates and pools are empty and nothing is written
	// through them.
	Served bool
	// ServiceAccount and UnclaimedPolicy are the pool's ServiceAccount
	// and its unclaimed pods' NetworkPolicy.
	ServiceAccount, UnclaimedPolicy metav1.Object
	// Template is the SandboxTemplate of the wanted rendering's name.
	Template *extv1beta1.SandboxTemplate
	// Pool is the SandboxWarmPool of the pool's name.
	Pool *extv1beta1.SandboxWarmPool
	// Templates are the SandboxTemplates labelled as the Workspace's
	// pool's.
	Templates []*extv1beta1.SandboxTemplate
}

// Deletion is an object a plan deletes, with the UID it must still have:
// one made again under the name since the cache saw it is another.
type Deletion struct {
	Kind, Name string
	UID        types.UID
}

// WarmPoolPlan is what the Workspace controller writes for a pool
// (PlanWarmPool), in this order: the children, then the template, the
// pool and the deletions.
type WarmPoolPlan struct {
	// Observation is what the Workspace's status says of the pool, with
	// the pool as the cache has it; the writer puts the pool it wrote in
	// its place. Nil: none is asked for.
	Observation *WarmPoolObservation
	// ServiceAccount and Policies are applied unless their caches hold
	// them as applied.
	ServiceAccount *corev1ac.ServiceAccountApplyConfiguration
	Policies       []*networkingv1ac.NetworkPolicyApplyConfiguration
	// Taken says a template or pool name is held by something the
	// Workspace does not control: nothing past the children is written.
	Taken string
	// Template is created when the cache does not have it: a template is
	// never changed once made, since its name is its rendering's hash.
	Template *extac.SandboxTemplateApplyConfiguration
	// Pool is written when the cache does not hold it as the Workspace
	// asks; created when the cache has none (CreatePool). RolledFrom is the
	// template it served before, when the write rolls it.
	Pool       *extac.SandboxWarmPoolApplyConfiguration
	CreatePool bool
	RolledFrom string
	Deletes    []Deletion
}

// PlanWarmPool decides the writes that make ws's pool what want asks,
// from what the caches have (seen). A pool is applied unless the cache
// has it at the Workspace's size (a scale from elsewhere is undone: the
// Workspace owns it), template and Recreate strategy. Old renderings'
// templates go once the cached pool serves the new one: a claim reads its
// pool's template, never an old one, and a claimed Sandbox needs none.
// Nothing the Workspace does not control is written or deleted.
func PlanWarmPool(ws *calibanv1alpha1.Workspace, want WarmPoolWant, seen WarmPoolSeen) WarmPoolPlan {
	ours := func(o metav1.Object) bool { return o != nil && metav1.IsControlledBy(o, ws) }
	switch {
	case want.Hold:
		return WarmPoolPlan{Observation: &WarmPoolObservation{}}
	case want.Off:
		plan := WarmPoolPlan{Deletes: poolDeletions(ws, seen, "")}
		if ours(seen.ServiceAccount) {
			// A warm task of it may still resume into a new pod of the
			// pool's, which only this policy cuts off until the task's own
			// selects it.
			plan.Policies = []*networkingv1ac.NetworkPolicyApplyConfiguration{BuildWarmIsolationPolicy(ws)}
		}
		return plan
	case want.Problem != "":
		return WarmPoolPlan{Observation: &WarmPoolObservation{Reason: want.Reason, Problem: want.Problem}, Deletes: poolDeletions(ws, seen, "")}
	}
	plan := WarmPoolPlan{
		ServiceAccount: BuildWarmServiceAccount(ws),
		Policies:       []*networkingv1ac.NetworkPolicyApplyConfiguration{BuildWarmIsolationPolicy(ws), BuildWarmUnclaimedPolicy(ws, want.Rendering)},
	}
	if !seen.Served {
		plan.Observation = &WarmPoolObservation{Reason: ReasonWarmPoolUnavailable, Problem: ExtensionsUnserved}
		return plan
	}
	pool := seen.Pool
	plan.Observation = &WarmPoolObservation{Template: want.Template}
	switch {
	case seen.Template != nil && !ours(seen.Template):
		plan.Taken = NameTakenMessage("SandboxTemplate", want.Template, seen.Template)
		return plan
	case pool != nil && !ours(pool):
		plan.Taken = NameTakenMessage("SandboxWarmPool", WarmPoolName(ws.Name), pool)
		return plan
	}
	plan.Observation.Pool = pool
	if seen.Template == nil {
		plan.Template = BuildWarmTemplate(ws, want.Rendering)
	}
	if !poolHolds(pool, WarmReplicas(ws), want.Template) {
		plan.Pool, plan.CreatePool = BuildWarmPool(ws, want.Template), pool == nil
		if pool != nil && pool.Spec.TemplateRef.Name != want.Template {
			plan.RolledFrom = pool.Spec.TemplateRef.Name
		}
	}
	if pool != nil && pool.Spec.TemplateRef.Name == want.Template {
		plan.Deletes = templateDeletions(ws, seen.Templates, want.Template)
	}
	return plan
}

// poolHolds reports that a cached pool is the one to apply.
func poolHolds(pool *extv1beta1.SandboxWarmPool, replicas int32, template string) bool {
	return pool != nil && pool.Spec.Replicas != nil && *pool.Spec.Replicas == replicas &&
		pool.Spec.TemplateRef.Name == template &&
		pool.Spec.UpdateStrategy != nil && pool.Spec.UpdateStrategy.Type == extv1beta1.UpdateStrategyRecreate
}

// poolDeletions are the deletions of ws's pool, its templates but keep,
// and its unclaimed pods' policy, as far as the caches have them. The
// ServiceAccount and the isolation policy stay for the Workspace's life:
// a suspended warm task resumes into a new pod that runs as the one and
// is cut off by the other.
func poolDeletions(ws *calibanv1alpha1.Workspace, seen WarmPoolSeen, keep string) []Deletion {
	var dels []Deletion
	if np := seen.UnclaimedPolicy; np != nil && metav1.IsControlledBy(np, ws) {
		dels = append(dels, Deletion{Kind: "NetworkPolicy", Name: np.GetName(), UID: np.GetUID()})
	}
	if !seen.Served {
		return dels
	}
	if pool := seen.Pool; pool != nil && metav1.IsControlledBy(pool, ws) {
		dels = append(dels, Deletion{Kind: "SandboxWarmPool", Name: pool.Name, UID: pool.UID})
	}
	return append(dels, templateDeletions(ws, seen.Templates, keep)...)
}

// templateDeletions are the deletions of ws's templates but keep, by name.
func templateDeletions(ws *calibanv1alpha1.Workspace, templates []*extv1beta1.SandboxTemplate, keep string) []Deletion {
	var dels []Deletion
	for _, t := range templates {
		if t.Name != keep && metav1.IsControlledBy(t, ws) {
			dels = append(dels, Deletion{Kind: "SandboxTemplate", Name: t.Name, UID: t.UID})
		}
	}
	slices.SortFunc(dels, func(a, b Deletion) int { return strings.Compare(a.Name, b.Name) })
	return dels
}
