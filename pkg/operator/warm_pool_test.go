// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
)

// warmWorkspace asks for a pool of two; its only provider needs the "key"
// Secret.
func warmWorkspace(mods ...func(*calibanv1alpha1.Workspace)) *calibanv1alpha1.Workspace {
	return workspace(append([]func(*calibanv1alpha1.Workspace){func(ws *calibanv1alpha1.Workspace) {
		ws.Spec.WarmPool = &calibanv1alpha1.WarmPool{Replicas: 2}
	}}, mods...)...)
}

// feedBackPool puts what the fake clientsets hold of ws and its pool into
// the caches, as the informers would deliver it.
func (f *fixture) feedBackPool(ws *calibanv1alpha1.Workspace) *calibanv1alpha1.Workspace {
	f.t.Helper()
	stored, err := f.caliban.CalibanV1alpha1().Workspaces(ws.Namespace).Get(f.ctx, ws.Name, metaGet)
	if err != nil {
		f.t.Fatal(err)
	}
	f.cache(f.calibanInformers.Caliban().V1alpha1().Workspaces().Informer(), stored)
	if sa, err := f.kube.CoreV1().ServiceAccounts(ws.Namespace).Get(f.ctx, builders.WarmPoolName(ws.Name), metaGet); err == nil {
		f.cache(f.kubeInformers.Core().V1().ServiceAccounts().Informer(), sa)
	}
	nps, err := f.kube.NetworkingV1().NetworkPolicies(ws.Namespace).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range nps.Items {
		f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), &nps.Items[i])
	}
	ext := f.calibanInformers.Extensions().V1beta1()
	templates, err := f.caliban.ExtensionsV1beta1().SandboxTemplates(ws.Namespace).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, obj := range ext.SandboxTemplates().Informer().GetStore().List() {
		_ = ext.SandboxTemplates().Informer().GetStore().Delete(obj)
	}
	for i := range templates.Items {
		f.cache(ext.SandboxTemplates().Informer(), &templates.Items[i])
	}
	if pool, err := f.caliban.ExtensionsV1beta1().SandboxWarmPools(ws.Namespace).Get(f.ctx, builders.WarmPoolName(ws.Name), metaGet); err == nil {
		f.cache(ext.SandboxWarmPools().Informer(), pool)
	} else if p, exists, _ := ext.SandboxWarmPools().Informer().GetStore().GetByKey(ws.Namespace + "/" + builders.WarmPoolName(ws.Name)); exists {
		_ = ext.SandboxWarmPools().Informer().GetStore().Delete(p)
	}
	return stored
}

func TestAWorkspaceKeepsTheWarmPoolItsSpecRenders(t *testing.T) {
	f := newFixture(t)
	f.extensionsAPI.missing = false
	ws := warmWorkspace()
	f.seed(ws, secret("key", "api-key"))
	f.taskController() // its transform views the children's caches
	c := f.workspaceController()
	sync := func() {
		t.Helper()
		f.resetActions()
		if _, err := c.sync(f.ctx, key(ws)); err != nil {
			t.Fatal(err)
		}
	}

	sync()
	pin, _ := builders.PoolPin(ws)
	r, err := builders.RenderWarm(builders.PoolTask(ws), pin, c.settings)
	if err != nil {
		t.Fatal(err)
	}
	first := builders.WarmTemplateName(ws.Name, r.Hash)
	want := []string{
		"create serviceaccounts ws-warm", "create networkpolicies ws-warm-isolation", "create networkpolicies ws-warm-unclaimed",
		"create sandboxtemplates " + first, "create sandboxwarmpools ws-warm", "patch workspaces/status ws",
	}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Fatalf("first sync wrote %v, want %v", got, want)
	}
	stored := f.feedBackPool(ws)
	cond := meta.FindStatusCondition(stored.Status.Conditions, builders.ConditionWarmPoolReady)
	if stored.Status.WarmPool == nil || stored.Status.WarmPool.Template != first || cond == nil || cond.Reason != builders.ReasonWarmPoolFilling {
		t.Errorf("status.warmPool %+v, WarmPoolReady %+v; want the template %s, Filling", stored.Status.WarmPool, cond, first)
	}
	pool, err := f.caliban.ExtensionsV1beta1().SandboxWarmPools("team").Get(f.ctx, "ws-warm", metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(pool, ws) || *pool.Spec.Replicas != 2 || pool.Spec.TemplateRef.Name != first {
		t.Errorf("pool %+v: want controlled by the Workspace, 2 replicas of %s", pool.Spec, first)
	}

	sync()
	if got := f.writes(); len(got) != 0 {
		t.Errorf("a second sync of the same Workspace wrote %v", got)
	}

	// An edit that changes the rendering rolls the pool to a new template;
	// the old one goes once the pool's cache serves the new one.
	edited := stored.DeepCopy()
	edited.Generation++
	edited.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "TEAM", Value: "a"}}
	if _, err := f.caliban.CalibanV1alpha1().Workspaces("team").Update(f.ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.cache(f.calibanInformers.Caliban().V1alpha1().Workspaces().Informer(), edited)
	sync()
	pin, _ = builders.PoolPin(edited)
	r, _ = builders.RenderWarm(builders.PoolTask(edited), pin, c.settings)
	second := builders.WarmTemplateName(ws.Name, r.Hash)
	if second == first {
		t.Fatal("an env edit did not change the rendering")
	}
	want = []string{"create sandboxtemplates " + second, "patch sandboxwarmpools ws-warm", "patch workspaces/status ws"}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Errorf("the edit wrote %v, want %v", got, want)
	}
	if got := f.events.reasons(); !slices.Equal(got, []string{EventWarmPoolRolled}) {
		t.Errorf("events %v, want one %s", got, EventWarmPoolRolled)
	}
	f.feedBackPool(edited)
	sync()
	if got := f.writes(); !slices.Equal(got, []string{"delete sandboxtemplates " + first}) {
		t.Errorf("once the pool serves the new template, the sync wrote %v, want the old template deleted", got)
	}

	// Turned off: the pool and what only it needs go; the ServiceAccount
	// and the isolation policy stay for the warm tasks that may resume.
	stored = f.feedBackPool(edited)
	off := stored.DeepCopy()
	off.Spec.WarmPool.Replicas = 0
	f.cache(f.calibanInformers.Caliban().V1alpha1().Workspaces().Informer(), off)
	sync()
	want = []string{"delete networkpolicies ws-warm-unclaimed", "delete sandboxwarmpools ws-warm", "delete sandboxtemplates " + second, "patch workspaces/status ws"}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Errorf("turning the pool off wrote %v, want %v", got, want)
	}
	stored, _ = f.caliban.CalibanV1alpha1().Workspaces("team").Get(f.ctx, "ws", metaGet)
	if stored.Status.WarmPool != nil || meta.FindStatusCondition(stored.Status.Conditions, builders.ConditionWarmPoolReady) != nil {
		t.Errorf("a Workspace without a pool reports %+v, %+v", stored.Status.WarmPool, stored.Status.Conditions)
	}
}

func TestAWorkspaceSaysWhyItKeepsNoWarmPool(t *testing.T) {
	for name, tc := range map[string]struct {
		ws       *calibanv1alpha1.Workspace
		served   bool
		reason   string
		contains string
		writes   []string
	}{
		"the extensions API is not served": {ws: warmWorkspace(), reason: builders.ReasonWarmPoolUnavailable, contains: "--extensions",
			writes: []string{"create serviceaccounts ws-warm", "create networkpolicies ws-warm-isolation", "create networkpolicies ws-warm-unclaimed", "patch workspaces/status ws"}},
		"a source follows a branch": {served: true, reason: builders.ReasonSourcesNotPinned, contains: "sources[0] 'app': ref 'main'",
			ws: warmWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Sources = []calibanv1alpha1.Source{{Name: "app", Repo: "https://example.com/app.git", Ref: "main", Path: "/work/app"}}
			}),
			writes: []string{"patch workspaces/status ws"}},
		"the Workspace is invalid": {served: true, reason: builders.ReasonWarmPoolWorkspaceInvalid,
			ws:     warmWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Providers[0].CredentialsRef.SecretName = "missing" }),
			writes: []string{"patch workspaces/status ws"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.extensionsAPI.missing = !tc.served
			f.seed(tc.ws, secret("key", "api-key"))
			f.taskController()
			c := f.workspaceController()
			if _, err := c.sync(f.ctx, key(tc.ws)); err != nil {
				t.Fatal(err)
			}
			if got := f.writes(); !slices.Equal(got, tc.writes) {
				t.Errorf("wrote %v, want %v", got, tc.writes)
			}
			stored, _ := f.caliban.CalibanV1alpha1().Workspaces("team").Get(f.ctx, "ws", metaGet)
			cond := meta.FindStatusCondition(stored.Status.Conditions, builders.ConditionWarmPoolReady)
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.contains) {
				t.Errorf("WarmPoolReady %+v, want False %s holding %q", cond, tc.reason, tc.contains)
			}
		})
	}
}

// warmFixture is a fixture whose Workspace keeps a pool the caches
// know, and a task of it, not synced yet. The fake clientset gives the
// claims it applies a UID, as the apiserver does.
func warmFixture(t *testing.T) (*fixture, *TaskController, *calibanv1alpha1.CalibanTask, string) {
	f := newFixture(t)
	f.extensionsAPI.missing = false
	ws := warmWorkspace()
	tk := task()
	f.seed(ws, tk, secret("key", "api-key"))
	tc := f.taskController()
	wc := f.workspaceController()
	if _, err := wc.sync(f.ctx, key(ws)); err != nil {
		t.Fatal(err)
	}
	f.feedBackPool(ws)
	f.serveClaims("claim-uid")
	pin, _ := builders.PoolPin(ws)
	r, err := builders.RenderWarm(builders.PoolTask(ws), pin, tc.settings)
	if err != nil {
		t.Fatal(err)
	}
	f.resetActions()
	return f, tc, tk, builders.WarmTemplateName(ws.Name, r.Hash)
}

// serveClaims answers the create (or apply) of a SandboxClaim as the
// apiserver would, with uid for a claim it does not hold yet.
func (f *fixture) serveClaims(uid types.UID) {
	serve := func(action core.Action) (bool, runtime.Object, error) {
		claim := &extv1beta1.SandboxClaim{}
		switch a := action.(type) {
		case core.PatchAction:
			if err := json.Unmarshal(a.GetPatch(), claim); err != nil {
				return true, nil, err
			}
		case core.CreateAction:
			claim = a.GetObject().(*extv1beta1.SandboxClaim).DeepCopy()
		}
		claim.UID = uid
		err := f.caliban.Tracker().Add(claim)
		if _, create := action.(core.CreateAction); create && err != nil {
			return true, nil, err
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return true, nil, err
		}
		stored, err := f.caliban.Tracker().Get(action.GetResource(), action.GetNamespace(), claim.Name)
		return true, stored, err
	}
	f.caliban.PrependReactor("patch", "sandboxclaims", serve)
	f.caliban.PrependReactor("create", "sandboxclaims", serve)
}

// holdSandbox makes the task's claim hold Sandbox name, made from
// template, ready: in the claim cache, and served to a GET.
func (f *fixture) holdSandbox(tk *calibanv1alpha1.CalibanTask, name, template string) {
	f.t.Helper()
	claim, err := f.caliban.ExtensionsV1beta1().SandboxClaims("team").Get(f.ctx, builders.ClaimName(tk.Name), metaGet)
	if err != nil {
		f.t.Fatal(err)
	}
	claim.Status.Sandbox.Name = name
	f.cache(f.calibanInformers.Extensions().V1beta1().SandboxClaims().Informer(), claim)
	yes := true
	sb := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: "sandbox-uid",
			Annotations: map[string]string{builders.AnnotationSandboxTemplateRef: template},
			Labels:      map[string]string{builders.LabelLaunchType: builders.LaunchTypeWarm},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: extv1beta1.SchemeGroupVersion.String(), Kind: "SandboxClaim",
				Name: claim.Name, UID: claim.UID, Controller: &yes}}},
		Status: sandboxv1beta1.SandboxStatus{ServiceFQDN: name + ".team.svc.cluster.local",
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "DependenciesReady"}}},
	}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: builders.ContainerCaliband,
		Ports: []corev1.ContainerPort{{Name: builders.PortNameCaliband, ContainerPort: 8443}}}}
	f.mu.Lock()
	if f.servedSandboxes == nil {
		f.servedSandboxes = map[string]*sandboxv1beta1.Sandbox{}
	}
	f.servedSandboxes["team/"+name] = sb
	f.mu.Unlock()
	f.podOfClaimed(name, sb.UID, claim.UID)
}

// podOfClaimed makes the pod of claimed Sandbox name (sandboxUID), as
// agent-sandbox leaves it once it has relabelled it: the claim's label, and
// ready.
func (f *fixture) podOfClaimed(name string, sandboxUID, claimUID types.UID) {
	f.t.Helper()
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", Labels: map[string]string{builders.LabelClaimUID: string(claimUID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: sandboxv1beta1.SchemeGroupVersion.String(), Kind: "Sandbox", Name: name, UID: sandboxUID, Controller: &yes}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	_ = f.kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "team", name)
	if err := f.kube.Tracker().Add(pod); err != nil {
		f.t.Fatal(err)
	}
}

// claimedFixture is a warm task synced once (its claim and pin written,
// the cache holding both and its policy) whose claim then holds a Sandbox
// of its rendering, as edit leaves it; no write recorded yet.
func claimedFixture(t *testing.T, edit func(*sandboxv1beta1.Sandbox)) (*fixture, *TaskController, *calibanv1alpha1.CalibanTask) {
	t.Helper()
	f, tc, tk, template := warmFixture(t)
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	stored, _ := f.caliban.CalibanV1alpha1().CalibanTasks("team").Get(f.ctx, tk.Name, metaGet)
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	np, err := f.kube.NetworkingV1().NetworkPolicies("team").Get(f.ctx, "fix-bug-netpol", metaGet)
	if err != nil {
		t.Fatal(err)
	}
	f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), np)
	f.holdSandbox(tk, "ws-warm-x7k2p", template)
	f.mu.Lock()
	edit(f.servedSandboxes["team/ws-warm-x7k2p"])
	f.mu.Unlock()
	f.resetActions()
	return f, tc, tk
}

func TestAWarmTaskClaimsFromItsWorkspacesPool(t *testing.T) {
	f, tc, tk, template := warmFixture(t)
	sync := func() *calibanv1alpha1.CalibanTask {
		t.Helper()
		f.resetActions()
		if _, err := tc.sync(f.ctx, key(tk)); err != nil {
			t.Fatal(err)
		}
		stored, err := f.caliban.CalibanV1alpha1().CalibanTasks("team").Get(f.ctx, tk.Name, metaGet)
		if err != nil {
			t.Fatal(err)
		}
		return stored
	}

	stored := sync()
	want := []string{"create networkpolicies fix-bug-netpol", "create sandboxclaims fix-bug-claim", "patch calibantasks/status fix-bug"}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Errorf("the first sync wrote %v, want %v: the claim, the pin with the launch and the claim's UID, the policy", got, want)
	}
	l := stored.Status.Launch
	if l == nil || l.Type != calibanv1alpha1.LaunchWarm || l.Claim == nil || l.Claim.UID != "claim-uid" || !strings.Contains(l.Message, template) {
		t.Fatalf("launch %+v, want Warm from %s with the claim's UID", l, template)
	}
	np, err := f.kube.NetworkingV1().NetworkPolicies("team").Get(f.ctx, "fix-bug-netpol", metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if got := np.Spec.PodSelector.MatchLabels; len(got) != 1 || got[builders.LabelClaimUID] != "claim-uid" {
		t.Errorf("the policy selects %v, want the claim's pod by its UID", got)
	}
	if stored.Status.Phase != calibanv1alpha1.TaskProvisioning || stored.Status.SandboxRef != nil {
		t.Errorf("phase %s sandboxRef %+v, want Provisioning and no Sandbox yet", stored.Status.Phase, stored.Status.SandboxRef)
	}

	// The claim holds a Sandbox of the task's rendering, ready: the task
	// runs there at once, and gives it its labels and mode next.
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), np)
	f.holdSandbox(tk, "ws-warm-x7k2p", template)
	stored = sync()
	if got, want := f.writes(), []string{"patch calibantasks/status fix-bug"}; !slices.Equal(got, want) {
		t.Errorf("the sync that found the Sandbox wrote %v, want %v: Running, before any write to the Sandbox", got, want)
	}
	if stored.Status.Phase != calibanv1alpha1.TaskRunning || stored.Status.SandboxRef == nil || stored.Status.SandboxRef.Name != "ws-warm-x7k2p" ||
		stored.Status.CalibandEndpoint != "ws-warm-x7k2p.team.svc.cluster.local:8443" {
		t.Errorf("status %s %+v %q, want Running in ws-warm-x7k2p", stored.Status.Phase, stored.Status.SandboxRef, stored.Status.CalibandEndpoint)
	}
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	stored = sync()
	if got, want := f.writes(), []string{"jsonpatch sandboxes ws-warm-x7k2p"}; !slices.Equal(got, want) {
		t.Errorf("the sync after Running wrote %v, want %v: one patch that takes the Sandbox", got, want)
	}
	f.mu.Lock()
	taken := f.servedSandboxes["team/ws-warm-x7k2p"].DeepCopy()
	f.mu.Unlock()
	if taken.Labels[builders.LabelTask] != "fix-bug" || taken.Labels[builders.LabelLaunchType] != builders.LaunchTypeWarm || taken.Spec.OperatingMode != "" {
		t.Errorf("the Sandbox has labels %v and mode %q, want the task's labels beside agent-sandbox's, and its spec as it was (no mode: Running), so no new generation", taken.Labels, taken.Spec.OperatingMode)
	}
	if stored.Status.Phase != calibanv1alpha1.TaskRunning {
		t.Errorf("phase %s after the take, want Running still", stored.Status.Phase)
	}

	// Once the cache has the labelled Sandbox, nothing is written.
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	sync()
	if got := f.writes(); len(got) != 0 {
		t.Errorf("a sync before the cache has the taken Sandbox wrote %v", got)
	}
	f.cache(f.sandboxInformer, taken)
	sync()
	if got := f.writes(); len(got) != 0 {
		t.Errorf("a steady warm task wrote %v", got)
	}

	// Suspended: the mode, applied to the Sandbox the cache has.
	suspended := stored.DeepCopy()
	suspended.Spec.Suspend = true
	suspended.Generation++
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), suspended)
	sync()
	applied := f.lastSandboxApply()
	if spec, _, _ := unstructured.NestedMap(applied.Object, "spec"); len(spec) != 1 || spec["operatingMode"] != "Suspended" {
		t.Errorf("suspending applied spec %v, want only operatingMode Suspended", spec)
	}
}

// A task whose claim's Sandbox is not the claim's (a status behind) is not
// given the task's labels.
func TestAWarmTaskTakesOnlyItsClaimsSandbox(t *testing.T) {
	f, tc, tk := claimedFixture(t, func(sb *sandboxv1beta1.Sandbox) { sb.OwnerReferences[0].UID = "another-claim" })
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); len(got) != 0 {
		t.Errorf("wrote %v for a Sandbox another claim controls", got)
	}
	f.mu.Lock()
	labels := f.servedSandboxes["team/ws-warm-x7k2p"].Labels
	f.mu.Unlock()
	if labels[builders.LabelTask] != "" {
		t.Errorf("the other claim's Sandbox got the task's labels: %v", labels)
	}
}

func TestAWarmTaskServedAnotherRenderingStartsCold(t *testing.T) {
	f, tc, tk, _ := warmFixture(t)
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	stored, _ := f.caliban.CalibanV1alpha1().CalibanTasks("team").Get(f.ctx, tk.Name, metaGet)
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	f.holdSandbox(tk, "ws-warm-x7k2p", "ws-warm-0000000000")
	f.resetActions()
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); !slices.Contains(got, "delete sandboxclaims fix-bug-claim") || slices.Contains(got, "patch sandboxes ws-warm-x7k2p") {
		t.Errorf("wrote %v, want the claim deleted and its Sandbox left alone", got)
	}
	stored, _ = f.caliban.CalibanV1alpha1().CalibanTasks("team").Get(f.ctx, tk.Name, metaGet)
	if l := stored.Status.Launch; l == nil || l.Type != calibanv1alpha1.LaunchCold || l.Reason != builders.ReasonWarmPoolRolled {
		t.Fatalf("launch %+v, want Cold, WarmPoolRolled", l)
	}
	if !slices.Contains(f.events.reasons(), EventColdStart) {
		t.Errorf("events %v, want a %s", f.events.reasons(), EventColdStart)
	}
	// The next sync starts it cold, with children of its own.
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	f.resetActions()
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	got := f.writes()
	// The policy the warm launch made is the task's: applied over.
	for _, w := range []string{"create serviceaccounts fix-bug-sa", "patch networkpolicies fix-bug-netpol", "create sandboxes fix-bug-sbx"} {
		if !slices.Contains(got, w) {
			t.Errorf("the cold start wrote %v, want %q among them", got, w)
		}
	}
}

// A claim that holds a Sandbox not serving yet (the pool had none ready):
// the task takes it first, and runs once it serves.
func TestAWarmTaskTakesASandboxThatIsNotReadyBeforeRunning(t *testing.T) {
	f, tc, tk := claimedFixture(t, func(sb *sandboxv1beta1.Sandbox) { sb.Status.Conditions[0].Status = metav1.ConditionFalse })
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	if got, want := f.writes(), []string{"patch calibantasks/status fix-bug", "jsonpatch sandboxes ws-warm-x7k2p"}; !slices.Equal(got, want) {
		t.Errorf("wrote %v, want %v: the take, and the status naming the Sandbox it waits for", got, want)
	}
	stored, _ := f.caliban.CalibanV1alpha1().CalibanTasks("team").Get(f.ctx, tk.Name, metaGet)
	if stored.Status.Phase != calibanv1alpha1.TaskProvisioning || stored.Status.SandboxRef == nil || stored.Status.SandboxRef.Name != "ws-warm-x7k2p" {
		t.Errorf("phase %s sandboxRef %+v, want Provisioning in ws-warm-x7k2p while it is not ready", stored.Status.Phase, stored.Status.SandboxRef)
	}
}

// A claim someone deleted is made again, with another UID, and so is its
// pod: the new UID is written, on condition that the task is as read,
// before anything is rendered from it (the policy selects the pod by it).
func TestAWarmTaskWhoseClaimWasDeletedRecordsTheNewClaimFirst(t *testing.T) {
	f, tc, tk, _ := warmFixture(t)
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	stored, err := f.caliban.CalibanV1alpha1().CalibanTasks("team").Get(f.ctx, tk.Name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	np, err := f.kube.NetworkingV1().NetworkPolicies("team").Get(f.ctx, "fix-bug-netpol", metaGet)
	if err != nil {
		t.Fatal(err)
	}
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), np)
	claims := extv1beta1.SchemeGroupVersion.WithResource("sandboxclaims")
	if err := f.caliban.Tracker().Delete(claims, "team", builders.ClaimName(tk.Name)); err != nil {
		t.Fatal(err)
	}
	f.serveClaims("claim-uid-2")
	f.resetActions()
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}

	var statusWrite []byte
	for _, a := range f.caliban.Actions() {
		if p, ok := a.(core.PatchAction); ok && a.GetSubresource() == "status" {
			statusWrite = p.GetPatch()
		}
	}
	var written struct {
		Metadata metav1.ObjectMeta                 `json:"metadata"`
		Status   calibanv1alpha1.CalibanTaskStatus `json:"status"`
	}
	if err := json.Unmarshal(statusWrite, &written); err != nil {
		t.Fatalf("no status write to read (%v): writes %v", err, f.writes())
	}
	if l := written.Status.Launch; l == nil || l.Claim == nil || l.Claim.UID != "claim-uid-2" {
		t.Errorf("the status write says launch %+v, want the new claim's UID", l)
	}
	if written.Metadata.ResourceVersion != stored.ResourceVersion {
		t.Errorf("the status write is on condition of resourceVersion %q, want %q, the task as read", written.Metadata.ResourceVersion, stored.ResourceVersion)
	}
	// The claim, then the status; the policy follows from the task as
	// written (the fake clientset keeps the resourceVersion, so it cannot
	// show a new version's policy here).
	var order []string
	for _, a := range f.caliban.Actions() {
		if a.GetVerb() == "patch" || a.GetVerb() == "create" {
			order = append(order, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	if want := []string{"create sandboxclaims/", "patch calibantasks/status"}; !slices.Equal(order, want) {
		t.Errorf("wrote %v, want %v: the claim made again, then the status with its UID", order, want)
	}
}

// A warm task's NetworkPolicy that someone deletes is made again at the
// task's next sync, also in the leadership term that applied it: the skip
// that waits for the watch to bring a policy just applied ends with its
// deletion.
func TestAWarmTasksDeletedPolicyIsMadeAgain(t *testing.T) {
	f, tc, tk, _ := warmFixture(t)
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	stored := f.storedTask(tk)
	np, err := f.kube.NetworkingV1().NetworkPolicies("team").Get(f.ctx, "fix-bug-netpol", metaGet)
	if err != nil {
		t.Fatal(err)
	}
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), np)
	view := tc.children.View(freshness.NetworkPolicy, "team", "fix-bug-netpol")
	if view == nil {
		t.Fatal("the policy is not in the cache")
	}

	// Deleted: gone from the cluster and from the cache, and the informer
	// tells the controller.
	if err := f.kube.NetworkingV1().NetworkPolicies("team").Delete(f.ctx, "fix-bug-netpol", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.kubeInformers.Networking().V1().NetworkPolicies().Informer().GetIndexer().Delete(view); err != nil {
		t.Fatal(err)
	}
	tc.policyDeleted(view)
	f.resetActions()
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); !slices.Contains(got, "create networkpolicies fix-bug-netpol") {
		t.Errorf("the sync after the deletion wrote %v, want the policy made again", got)
	}
	if _, err := f.kube.NetworkingV1().NetworkPolicies("team").Get(f.ctx, "fix-bug-netpol", metaGet); err != nil {
		t.Errorf("no policy after the sync: %v", err)
	}
}

// A SandboxClaim of the task's claim name that the task does not control
// is never written: the warm task fails with ChildNameTaken, naming it.
func TestAClaimNameHeldBySomethingElseFailsTheWarmTask(t *testing.T) {
	f, tc, tk, _ := warmFixture(t)
	held := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: builders.ClaimName(tk.Name), Namespace: "team", UID: "someone-elses",
		Labels: map[string]string{builders.LabelManagedBy: builders.FieldManager}}}
	if err := f.caliban.Tracker().Add(held); err != nil {
		t.Fatal(err)
	}
	f.cache(f.calibanInformers.Extensions().V1beta1().SandboxClaims().Informer(), held)
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	stored := f.storedTask(tk)
	ready := meta.FindStatusCondition(stored.Status.Conditions, builders.ConditionReady)
	if stored.Status.Phase != calibanv1alpha1.TaskFailed || ready == nil || ready.Reason != builders.ReasonChildNameTaken ||
		!strings.Contains(ready.Message, "SandboxClaim '"+held.Name+"'") {
		t.Fatalf("phase %s, Ready %+v; want Failed, %s naming the claim", stored.Status.Phase, ready, builders.ReasonChildNameTaken)
	}
	for _, w := range f.writes() {
		if strings.Contains(w, "sandboxclaims") {
			t.Errorf("wrote %q to the held claim", w)
		}
	}
}

// A warm task has no ServiceAccount of its own (its pod runs as the
// pool's), so another object of the name "<task>-sa" takes nothing from
// it: the task is not failed for it.
func TestAWarmTaskIsNotFailedForAServiceAccountNameItNeverUses(t *testing.T) {
	f, tc, tk, _ := warmFixture(t)
	yes := true
	other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: builders.ServiceAccountName(tk.Name), Namespace: "team", UID: "other-sa",
		Labels:          map[string]string{builders.LabelManagedBy: builders.FieldManager},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "caliban.caliban-ai.dev/v1alpha1", Kind: "CalibanTask", Name: "other", UID: "other-uid", Controller: &yes}}}}
	f.cache(f.kubeInformers.Core().V1().ServiceAccounts().Informer(), other)
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	stored := f.storedTask(tk)
	if ready := meta.FindStatusCondition(stored.Status.Conditions, builders.ConditionReady); stored.Status.Phase == calibanv1alpha1.TaskFailed {
		t.Fatalf("phase Failed (%+v), want the warm task to go on", ready)
	}
	if l := stored.Status.Launch; l == nil || l.Type != calibanv1alpha1.LaunchWarm {
		t.Errorf("launch %+v, want Warm", l)
	}
}

// A warm task is Running only once its NetworkPolicy selects a ready pod
// of its claimed Sandbox: agent-sandbox relabels an adopted pod after the
// claim is Ready, and until then prospero could not reach caliband.
func TestAWarmTaskIsRunningOnlyOnceItsPolicySelectsItsPod(t *testing.T) {
	f, tc, tk := claimedFixture(t, func(*sandboxv1beta1.Sandbox) {})
	claim, err := f.caliban.ExtensionsV1beta1().SandboxClaims("team").Get(f.ctx, builders.ClaimName(tk.Name), metaGet)
	if err != nil {
		t.Fatal(err)
	}
	f.podOfClaimed("ws-warm-x7k2p", "sandbox-uid", "not-yet")
	after, err := tc.sync(f.ctx, key(tk))
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := f.caliban.CalibanV1alpha1().CalibanTasks("team").Get(f.ctx, tk.Name, metaGet)
	ready := meta.FindStatusCondition(stored.Status.Conditions, builders.ConditionReady)
	if stored.Status.Phase != calibanv1alpha1.TaskProvisioning || stored.Status.CalibandEndpoint != "" || ready == nil || !strings.Contains(ready.Message, builders.LabelClaimUID) {
		t.Errorf("status %s %q %+v, want Provisioning, no endpoint, waiting for the claim's label", stored.Status.Phase, stored.Status.CalibandEndpoint, ready)
	}
	if after <= 0 || after > reachRequeue {
		t.Errorf("looks again after %s, want within %s", after, reachRequeue)
	}

	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	f.podOfClaimed("ws-warm-x7k2p", "sandbox-uid", claim.UID)
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	stored, _ = f.caliban.CalibanV1alpha1().CalibanTasks("team").Get(f.ctx, tk.Name, metaGet)
	if stored.Status.Phase != calibanv1alpha1.TaskRunning || stored.Status.CalibandEndpoint != "ws-warm-x7k2p.team.svc.cluster.local:8443" {
		t.Errorf("status %s %q once the pod carries the label, want Running", stored.Status.Phase, stored.Status.CalibandEndpoint)
	}
}

// A second Sandbox agent-sandbox made for the task's claim is deleted
// once, with its UID, told once and counted once, however many passes
// run before the cache brings the delete; the named one is kept.
func TestASecondSandboxOfTheClaimIsDeletedOnceAndTheNamedOneKept(t *testing.T) {
	f, tc, tk := claimedFixture(t, func(*sandboxv1beta1.Sandbox) {})
	claim, err := f.caliban.ExtensionsV1beta1().SandboxClaims("team").Get(f.ctx, builders.ClaimName(tk.Name), metaGet)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	named := f.servedSandboxes["team/ws-warm-x7k2p"].DeepCopy()
	dup := named.DeepCopy()
	dup.Name, dup.UID = claim.Name, "duplicate-uid"
	f.servedSandboxes["team/"+dup.Name] = dup.DeepCopy()
	f.mu.Unlock()
	tc.claimed = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{controllerIndex: indexByController})
	for _, sb := range []*sandboxv1beta1.Sandbox{named, dup} {
		if err := tc.claimed.Add(sb); err != nil {
			t.Fatal(err)
		}
	}
	before := testutil.ToFloat64(f.metrics.duplicates)
	for pass := range 2 {
		f.resetActions()
		if _, err := tc.sync(f.ctx, key(tk)); err != nil {
			t.Fatal(err)
		}
		var deletes []string
		for _, w := range f.writes() {
			if strings.HasPrefix(w, "delete ") {
				deletes = append(deletes, w)
			}
		}
		var told []string
		for _, e := range f.events.events {
			if e.reason == EventDuplicateSandboxRemoved {
				told = append(told, e.note)
			}
		}
		wantDeletes, wantTold := 1, 1
		if pass == 1 {
			wantDeletes, wantTold = 0, 0
		}
		if len(deletes) != wantDeletes || len(told) != wantTold {
			t.Errorf("pass %d: deletes %v and Events %v, want %d and %d", pass, deletes, told, wantDeletes, wantTold)
		}
		if len(told) == 1 && (!strings.Contains(told[0], claim.Name) || !strings.Contains(told[0], "ws-warm-x7k2p")) {
			t.Errorf("the Event says %q, want both Sandboxes named", told[0])
		}
	}
	if got := testutil.ToFloat64(f.metrics.duplicates) - before; got != 1 {
		t.Errorf("counted %v duplicates, want 1", got)
	}
	f.mu.Lock()
	_, kept := f.servedSandboxes["team/ws-warm-x7k2p"]
	_, left := f.servedSandboxes["team/"+claim.Name]
	f.mu.Unlock()
	if !kept || left {
		t.Errorf("named Sandbox kept %v, duplicate left %v; want the named one kept and the duplicate gone", kept, left)
	}
}
