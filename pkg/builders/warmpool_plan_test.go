// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
)

func TestWantWarmPool(t *testing.T) {
	ws := fxWarmWorkspace()
	cases := map[string]struct {
		ws      *calibanv1alpha1.Workspace
		problem string
		want    WarmPoolWant
	}{
		"a Workspace without a pool asks for none": {
			ws: fxWarmWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.WarmPool = nil }), want: WarmPoolWant{Off: true},
		},
		"a pool of zero is none": {
			ws: fxWarmWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.WarmPool.Replicas = 0 }), want: WarmPoolWant{Off: true},
		},
		"an invalid Workspace holds what it has": {
			ws: ws, problem: "spec.sources[0].url: not a URL", want: WarmPoolWant{Hold: true},
		},
		"a source on a branch keeps no pool, and says which": {
			ws: fxWarmWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[1].Ref = "main" }),
			want: WarmPoolWant{Reason: ReasonSourcesNotPinned,
				Problem: WarmSourcesProblem(fxWarmWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[1].Ref = "main" }).Spec.Sources)},
		},
		"a valid pinned Workspace wants its rendering's template": {
			ws: ws, want: WarmPoolWant{Rendering: poolRendering(t, ws), Template: WarmTemplateName(ws.Name, poolRendering(t, ws).Hash)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := WantWarmPool(tc.ws, tc.problem, settings())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WantWarmPool (-want +got):\n%s", diff)
			}
		})
	}
}

// planSummary is what a WarmPoolPlan writes, by name.
type planSummary struct {
	Observation    *WarmPoolObservation
	ServiceAccount string
	Policies       []string
	Taken          string
	Template, Pool string
	PoolTemplate   string
	CreatePool     bool
	RolledFrom     string
	Deletes        []Deletion
}

func summarize(p WarmPoolPlan) planSummary {
	s := planSummary{Observation: p.Observation, Taken: p.Taken, CreatePool: p.CreatePool, RolledFrom: p.RolledFrom, Deletes: p.Deletes}
	if p.ServiceAccount != nil {
		s.ServiceAccount = *p.ServiceAccount.Name
	}
	for _, np := range p.Policies {
		s.Policies = append(s.Policies, *np.Name)
	}
	if p.Template != nil {
		s.Template = *p.Template.Name
	}
	if p.Pool != nil {
		s.Pool, s.PoolTemplate = *p.Pool.Name, *p.Pool.Spec.TemplateRef.Name
	}
	if strings.Contains(s.Taken, "is taken") {
		s.Taken = s.Taken[:strings.Index(s.Taken, " is taken")]
	}
	return s
}

func TestPlanWarmPool(t *testing.T) {
	ws := fxWarmWorkspace()
	r := poolRendering(t, ws)
	tpl := WarmTemplateName(ws.Name, r.Hash)
	kept := WarmPoolWant{Rendering: r, Template: tpl}
	pool, isolation, unclaimed := WarmPoolName(ws.Name), WarmIsolationPolicyName(ws.Name), WarmUnclaimedPolicyName(ws.Name)
	owned := func(name, uid string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ws.Namespace, UID: types.UID(uid),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: calibanv1alpha1.SchemeGroupVersion.String(), Kind: "Workspace", Name: ws.Name, UID: ws.UID, Controller: ptr.To(true)}}}
	}
	foreign := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ws.Namespace, UID: "f0"}
	}
	template := func(m metav1.ObjectMeta) *extv1beta1.SandboxTemplate {
		return &extv1beta1.SandboxTemplate{ObjectMeta: m}
	}
	poolOf := func(m metav1.ObjectMeta, replicas int32, template string) *extv1beta1.SandboxWarmPool {
		p := &extv1beta1.SandboxWarmPool{ObjectMeta: m}
		p.Spec.Replicas, p.Spec.TemplateRef.Name = ptr.To(replicas), template
		p.Spec.UpdateStrategy = &extv1beta1.SandboxWarmPoolUpdateStrategy{Type: extv1beta1.UpdateStrategyRecreate}
		return p
	}
	fresh := poolOf(owned(pool, "p1"), 3, tpl)
	old := template(owned("ws-warm-0ld0ld00", "t0"))
	current := template(owned(tpl, "t1"))
	scaled := poolOf(owned(pool, "p1"), 7, tpl)
	noStrategy := poolOf(owned(pool, "p1"), 3, tpl)
	noStrategy.Spec.UpdateStrategy = nil
	rolling := poolOf(owned(pool, "p1"), 3, old.Name)
	children := func(s planSummary) planSummary {
		s.ServiceAccount, s.Policies = pool, []string{isolation, unclaimed}
		return s
	}
	cases := map[string]struct {
		want WarmPoolWant
		seen WarmPoolSeen
		plan planSummary
	}{
		"an invalid Workspace writes and deletes nothing": {
			want: WarmPoolWant{Hold: true}, seen: WarmPoolSeen{Served: true, Pool: fresh, Templates: []*extv1beta1.SandboxTemplate{old}},
			plan: planSummary{Observation: &WarmPoolObservation{}},
		},
		"a new pool makes its children, its template and the pool": {
			want: kept, seen: WarmPoolSeen{Served: true},
			plan: children(planSummary{Observation: &WarmPoolObservation{Template: tpl}, Template: tpl, Pool: pool, PoolTemplate: tpl, CreatePool: true}),
		},
		"a pool the caches hold as asked writes only its children, whose caches the writer compares": {
			want: kept, seen: WarmPoolSeen{Served: true, Template: current, Pool: fresh, Templates: []*extv1beta1.SandboxTemplate{current}},
			plan: children(planSummary{Observation: &WarmPoolObservation{Template: tpl, Pool: fresh}}),
		},
		"a pool scaled from elsewhere is scaled back": {
			want: kept, seen: WarmPoolSeen{Served: true, Template: current, Pool: scaled},
			plan: children(planSummary{Observation: &WarmPoolObservation{Template: tpl, Pool: scaled}, Pool: pool, PoolTemplate: tpl}),
		},
		"a pool without the Recreate strategy gets it": {
			want: kept, seen: WarmPoolSeen{Served: true, Template: current, Pool: noStrategy},
			plan: children(planSummary{Observation: &WarmPoolObservation{Template: tpl, Pool: noStrategy}, Pool: pool, PoolTemplate: tpl}),
		},
		"a new rendering rolls the pool and keeps the old template until the cache shows the roll": {
			want: kept, seen: WarmPoolSeen{Served: true, Pool: rolling, Templates: []*extv1beta1.SandboxTemplate{old}},
			plan: children(planSummary{Observation: &WarmPoolObservation{Template: tpl, Pool: rolling}, Template: tpl, Pool: pool, PoolTemplate: tpl, RolledFrom: old.Name}),
		},
		"once the cached pool serves the new template the old ones go, but not one the Workspace does not control": {
			want: kept, seen: WarmPoolSeen{Served: true, Template: current, Pool: fresh,
				Templates: []*extv1beta1.SandboxTemplate{template(owned("ws-warm-zz000000", "t2")), current, old, template(foreign("ws-warm-aa000000"))}},
			plan: children(planSummary{Observation: &WarmPoolObservation{Template: tpl, Pool: fresh}, Deletes: []Deletion{
				{Kind: "SandboxTemplate", Name: "ws-warm-0ld0ld00", UID: "t0"}, {Kind: "SandboxTemplate", Name: "ws-warm-zz000000", UID: "t2"}}}),
		},
		"a template name something else holds stops the pool there": {
			want: kept, seen: WarmPoolSeen{Served: true, Template: template(foreign(tpl))},
			plan: children(planSummary{Observation: &WarmPoolObservation{Template: tpl}, Taken: "SandboxTemplate '" + tpl + "'"}),
		},
		"a pool name something else holds is left alone": {
			want: kept, seen: WarmPoolSeen{Served: true, Template: current, Pool: poolOf(foreign(pool), 1, "theirs")},
			plan: children(planSummary{Observation: &WarmPoolObservation{Template: tpl}, Taken: "SandboxWarmPool '" + pool + "'"}),
		},
		"without agent-sandbox's extensions only the children are made, and the status says why": {
			want: kept, seen: WarmPoolSeen{},
			plan: children(planSummary{Observation: &WarmPoolObservation{Reason: ReasonWarmPoolUnavailable, Problem: ExtensionsUnserved}}),
		},
		"a Workspace whose sources moved off commits loses its pool and says why": {
			want: WarmPoolWant{Reason: ReasonSourcesNotPinned, Problem: "sources[1]"},
			seen: WarmPoolSeen{Served: true, UnclaimedPolicy: &metav1.ObjectMeta{Name: unclaimed, UID: "n1", OwnerReferences: owned("", "").OwnerReferences}, Pool: fresh, Templates: []*extv1beta1.SandboxTemplate{current}},
			plan: planSummary{Observation: &WarmPoolObservation{Reason: ReasonSourcesNotPinned, Problem: "sources[1]"}, Deletes: []Deletion{
				{Kind: "NetworkPolicy", Name: unclaimed, UID: "n1"}, {Kind: "SandboxWarmPool", Name: pool, UID: "p1"}, {Kind: "SandboxTemplate", Name: tpl, UID: "t1"}}},
		},
		"a pool turned off goes, and its isolation policy stays while its ServiceAccount does": {
			want: WarmPoolWant{Off: true},
			seen: WarmPoolSeen{Served: true, ServiceAccount: &metav1.ObjectMeta{Name: pool, OwnerReferences: owned("", "").OwnerReferences}, Pool: fresh, Templates: []*extv1beta1.SandboxTemplate{current}},
			plan: planSummary{Policies: []string{isolation}, Deletes: []Deletion{{Kind: "SandboxWarmPool", Name: pool, UID: "p1"}, {Kind: "SandboxTemplate", Name: tpl, UID: "t1"}}},
		},
		"a Workspace that never had a pool writes nothing": {
			want: WarmPoolWant{Off: true}, seen: WarmPoolSeen{Served: true},
			plan: planSummary{},
		},
		"a pool turned off without the extensions deletes only what the core caches have": {
			want: WarmPoolWant{Off: true},
			seen: WarmPoolSeen{UnclaimedPolicy: &metav1.ObjectMeta{Name: unclaimed, UID: "n1", OwnerReferences: owned("", "").OwnerReferences}, Pool: fresh},
			plan: planSummary{Deletes: []Deletion{{Kind: "NetworkPolicy", Name: unclaimed, UID: "n1"}}},
		},
		"a ServiceAccount or policy of the pool's name that the Workspace does not control is neither kept nor deleted": {
			want: WarmPoolWant{Off: true},
			seen: WarmPoolSeen{Served: true, ServiceAccount: &metav1.ObjectMeta{Name: pool}, UnclaimedPolicy: &metav1.ObjectMeta{Name: unclaimed, UID: "n1"}},
			plan: planSummary{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.plan, summarize(PlanWarmPool(ws, tc.want, tc.seen))); diff != "" {
				t.Errorf("PlanWarmPool (-want +got):\n%s", diff)
			}
		})
	}
}
