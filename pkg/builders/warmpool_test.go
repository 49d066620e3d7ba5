// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

const (
	shaA = "0123456789abcdef0123456789abcdef01234567"
	shaB = "89abcdef0123456789abcdef0123456789abcdef"
)

// fxWarmWorkspace is a valid Workspace in fxNamespace, named like the
// task fixture's workspaceRef, whose sources are pinned to commits and
// which asks for a pool of three.
func fxWarmWorkspace(mods ...func(*calibanv1alpha1.Workspace)) *calibanv1alpha1.Workspace {
	ws := fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
		ws.Namespace = fxNamespace
		ws.UID = types.UID("5d0c1b7a-2e6f-4c1d-8f3a-9b2e4d6c8a10")
		ws.Spec.Sources[0].Ref, ws.Spec.Sources[1].Ref = shaA, shaB
		ws.Spec.WarmPool = &calibanv1alpha1.WarmPool{Replicas: 3}
	})
	for _, m := range mods {
		m(ws)
	}
	return ws
}

// poolRendering is the rendering ws's pool serves.
func poolRendering(t testing.TB, ws *calibanv1alpha1.Workspace) WarmRendering {
	t.Helper()
	p, ok := PoolPin(ws)
	if !ok {
		t.Fatalf("workspace %s names no provider for a task without providerRef", ws.Name)
	}
	r, err := RenderWarm(PoolTask(ws), p, settings())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// admitted is task as admission would pin it under ws now.
func admitted(t testing.TB, tk *calibanv1alpha1.CalibanTask, ws *calibanv1alpha1.Workspace) *calibanv1alpha1.ResolvedWorkspace {
	t.Helper()
	provider, problem := ResolveProvider(&ws.Spec, tk.Spec.ProviderRef)
	if problem != "" {
		t.Fatal(problem)
	}
	return PinWorkspace(tk, &ws.Spec, provider)
}

func TestWarmPoolNamesAreNamesTheirObjectsCanHave(t *testing.T) {
	for name, tc := range map[string]struct {
		workspace string
		want      string
	}{
		"a short workspace name is kept":                    {workspace: "team-ws", want: "team-ws-warm"},
		"a dotted workspace name is made a label":           {workspace: "team.ws", want: "team-ws-b570ba3ab4-warm"},
		"a name of 52 characters is kept in full":           {workspace: strings.Repeat("a", 52), want: strings.Repeat("a", 52) + "-warm"},
		"a name of 53 characters is cut and hashed":         {workspace: strings.Repeat("a", 53)},
		"a name of 253 characters still fits":               {workspace: strings.Repeat("ab.", 84) + "a"},
		"a name starting with a digit starts with a letter": {workspace: "1st"},
	} {
		t.Run(name, func(t *testing.T) {
			got := WarmPoolName(tc.workspace)
			if tc.want != "" && got != tc.want {
				t.Errorf("WarmPoolName(%q) = %q, want %q", tc.workspace, got, tc.want)
			}
			// The pool's Sandboxes are named <pool>-xxxxx, and name a
			// Service.
			if errs := validation.IsDNS1035Label(got + "-abcde"); len(errs) > 0 {
				t.Errorf("WarmPoolName(%q) = %q: its Sandboxes' names are no DNS-1035 labels: %v", tc.workspace, got, errs)
			}
			claim := ClaimName(tc.workspace)
			if errs := validation.IsDNS1035Label(claim); len(errs) > 0 {
				t.Errorf("ClaimName(%q) = %q is no DNS-1035 label: %v", tc.workspace, claim, errs)
			}
			for _, n := range []string{WarmTemplateName(tc.workspace, "0123456789"), WarmIsolationPolicyName(tc.workspace), WarmUnclaimedPolicyName(tc.workspace)} {
				if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
					t.Errorf("%q is no object name: %v", n, errs)
				}
			}
		})
	}
	if a, b := WarmPoolName(strings.Repeat("a", 60)+"x"), WarmPoolName(strings.Repeat("a", 60)+"y"); a == b {
		t.Errorf("two long workspace names share the pool name %q", a)
	}
}

// The pool's pod is the cold path's, less the task's identity: the same
// spec once the ServiceAccount, the advertised host and the pod-name
// variable are set aside.
func TestAWarmPodIsTheColdPodWithThePoolsIdentity(t *testing.T) {
	ws := fxWarmWorkspace()
	tk := task("refactor-auth")
	p := admitted(t, tk, ws)
	s := settings()

	cold := buildSandbox(t, tk, p, s).Spec.PodTemplate.Spec
	r, err := RenderWarm(tk, p, s)
	if err != nil {
		t.Fatal(err)
	}
	warm := convert[extv1beta1.SandboxTemplateSpec](t, r.Blueprint).PodTemplate.Spec

	if warm.ServiceAccountName != WarmPoolName("ws") {
		t.Errorf("serviceAccountName = %q, want the pool's %q", warm.ServiceAccountName, WarmPoolName("ws"))
	}
	c := calibandOf(t, warm)
	if len(c.Env) == 0 || c.Env[0].Name != EnvSandboxName || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil ||
		c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("the first variable is not %s from the pod's name: %+v", EnvSandboxName, c.Env)
	}
	wantHost := "$(" + EnvSandboxName + ").team-a.svc.cluster.local"
	if got := argAfter(c.Args, FlagAdvertiseHost); got != wantHost {
		t.Errorf("--advertise-host %q, want %q", got, wantHost)
	}

	// Set the identity aside; nothing else may differ.
	warm.ServiceAccountName = cold.ServiceAccountName
	warmC := &warm.Containers[0]
	warmC.Env = warmC.Env[1:]
	setArgAfter(warmC.Args, FlagAdvertiseHost, argAfter(cold.Containers[0].Args, FlagAdvertiseHost))
	if diff := cmp.Diff(cold, warm); diff != "" {
		t.Errorf("the warm pod differs from the cold one beyond the identity (-cold +warm):\n%s", diff)
	}
	if body, _ := json.Marshal(r.Blueprint); bytes.Contains(body, []byte(tk.Name)) {
		t.Errorf("the warm blueprint names the task %q, which a pool cannot know: %s", tk.Name, body)
	}
}

func setArgAfter(args []string, flag, value string) {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			args[i+1] = value
		}
	}
}

func TestATaskRendersToThePoolsTemplateOnlyWhenItsPodWouldBeThePools(t *testing.T) {
	ws := fxWarmWorkspace(func(ws *calibanv1alpha1.Workspace) {
		ws.Spec.Providers = append(ws.Spec.Providers, calibanv1alpha1.Provider{Name: "coder", Kind: "openai", Model: "m2"})
		ws.Spec.DefaultProvider = "planner"
	})
	pool := poolRendering(t, ws).Hash
	for name, tc := range map[string]struct {
		task *calibanv1alpha1.CalibanTask
		// edit changes the workspace after the task was pinned.
		edit func(*calibanv1alpha1.Workspace)
		same bool
	}{
		"a task that sets nothing of its own":     {task: task("a"), same: true},
		"another task name":                       {task: task("another-task-with-a-long-name"), same: true},
		"a model name of its own":                 {task: task("a", taskModel("m9")), same: true},
		"providerRef naming the default provider": {task: task("a", func(tk *calibanv1alpha1.CalibanTask) { tk.Spec.ProviderRef = "planner" }), same: true},
		"providerRef naming another provider":     {task: task("a", func(tk *calibanv1alpha1.CalibanTask) { tk.Spec.ProviderRef = "coder" })},
		"remote state":                            {task: task("a", taskState(calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080"}))},
		"a router config":                         {task: task("a", taskRouterConfig("router"))},
		"a runtime class of its own":              {task: task("a", taskIsolation(calibanv1alpha1.Isolation{RuntimeClass: "gvisor"}))},
		"a workspace edited after the task's pin": {task: task("a"), edit: func(ws *calibanv1alpha1.Workspace) { ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "X", Value: "1"}} }},
		"an egress allow-list added after the pin": {task: task("a"), edit: func(ws *calibanv1alpha1.Workspace) {
			ws.Spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.0/8"}}}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			p := admitted(t, tc.task, ws)
			if tc.edit != nil {
				edited := ws.DeepCopy()
				tc.edit(edited)
				p = admitted(t, tc.task, edited)
			}
			r, err := RenderWarm(tc.task, p, settings())
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Hash == pool; got != tc.same {
				t.Errorf("the task renders to %s, the pool to %s: same = %v, want %v", r.Hash, pool, got, tc.same)
			}
		})
	}
}

func TestDecideLaunch(t *testing.T) {
	ws := fxWarmWorkspace()
	serving := WarmTemplateName("ws", poolRendering(t, ws).Hash)
	offer := WarmOffer{Replicas: 3, Template: serving}
	for name, tc := range map[string]struct {
		task   *calibanv1alpha1.CalibanTask
		ws     *calibanv1alpha1.Workspace
		offer  WarmOffer
		want   calibanv1alpha1.LaunchType
		reason string
		// message is a part the message must hold.
		message string
	}{
		"a plain task of a workspace with a pool goes warm": {task: task("a"), offer: offer,
			want: calibanv1alpha1.LaunchWarm, reason: ReasonLaunchWarmPool, message: "warm pool 'ws-warm'"},
		"a workspace without a pool": {task: task("a"), offer: WarmOffer{},
			want: calibanv1alpha1.LaunchCold, reason: ReasonNoWarmPool, message: "Workspace 'ws' keeps no warm pool"},
		"the extensions API is not served": {task: task("a"), offer: WarmOffer{Replicas: 3, Unavailable: "the extensions API is not installed"},
			want: calibanv1alpha1.LaunchCold, reason: ReasonWarmPoolUnavailable, message: "not installed"},
		"sources on a branch": {task: task("a"), offer: offer,
			ws:   fxWarmWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[1].Ref = "v1" }),
			want: calibanv1alpha1.LaunchCold, reason: ReasonSourcesNotPinned, message: "sources[1] 'lib': ref 'v1' is not a full commit id"},
		"created suspended": {task: task("a", func(tk *calibanv1alpha1.CalibanTask) { tk.Spec.Suspend = true }), offer: offer,
			want: calibanv1alpha1.LaunchCold, reason: ReasonCreatedSuspended},
		"remote state": {task: task("a", taskState(calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080"})), offer: offer,
			want: calibanv1alpha1.LaunchCold, reason: ReasonPerTaskState, message: "spec.state"},
		"a router config": {task: task("a", taskRouterConfig("router")), offer: offer,
			want: calibanv1alpha1.LaunchCold, reason: ReasonPerTaskRouterConfig, message: "spec.model.routerConfigRef"},
		"a pool with no template yet": {task: task("a"), offer: WarmOffer{Replicas: 3},
			want: calibanv1alpha1.LaunchCold, reason: ReasonWarmPoolUnavailable, message: "serves no template yet"},
		"a runtime class of its own": {task: task("a", taskIsolation(calibanv1alpha1.Isolation{RuntimeClass: "gvisor"})), offer: offer,
			want: calibanv1alpha1.LaunchCold, reason: ReasonRenderingDiffers, message: "serves '" + serving + "'"},
		"a pool still serving an older rendering": {task: task("a"), offer: WarmOffer{Replicas: 3, Template: "ws-warm-0000000000"},
			want: calibanv1alpha1.LaunchCold, reason: ReasonRenderingDiffers, message: "serves 'ws-warm-0000000000'"},
	} {
		t.Run(name, func(t *testing.T) {
			w := ws
			if tc.ws != nil {
				w = tc.ws
			}
			got, err := DecideLaunch(tc.task, admitted(t, tc.task, w), tc.offer, settings())
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tc.want || got.Reason != tc.reason || !strings.Contains(got.Message, tc.message) {
				t.Errorf("DecideLaunch = %+v, want type %s, reason %s, a message holding %q", got, tc.want, tc.reason, tc.message)
			}
		})
	}
}

func TestWorkspaceStatusReportsTheWarmPool(t *testing.T) {
	now := metav1.Unix(1700000000, 0)
	pool := func(generation, observed int64, template string, ready int32) *extv1beta1.SandboxWarmPool {
		p := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "ws-warm", Generation: generation}}
		p.Spec.TemplateRef.Name = template
		p.Status.ObservedGeneration, p.Status.ReadyReplicas = observed, ready
		return p
	}
	for name, tc := range map[string]struct {
		ws       *calibanv1alpha1.Workspace
		problem  string
		obs      *WarmPoolObservation
		want     *calibanv1alpha1.WarmPoolStatus
		reason   string
		status   metav1.ConditionStatus
		contains string
	}{
		"no pool asked for": {ws: fxWarmWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.WarmPool = nil }),
			obs: &WarmPoolObservation{}},
		"replicas 0": {ws: fxWarmWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.WarmPool.Replicas = 0 }),
			obs: &WarmPoolObservation{}},
		"a full pool": {ws: fxWarmWorkspace(), obs: &WarmPoolObservation{Template: "t1", Pool: pool(2, 2, "t1", 3)},
			want: &calibanv1alpha1.WarmPoolStatus{Replicas: 3, ReadyReplicas: 3, Template: "t1"}, status: metav1.ConditionTrue, reason: ReasonWarmPoolFull, contains: "3 of 3"},
		"a pool filling": {ws: fxWarmWorkspace(), obs: &WarmPoolObservation{Template: "t1", Pool: pool(2, 2, "t1", 1)},
			want: &calibanv1alpha1.WarmPoolStatus{Replicas: 3, ReadyReplicas: 1, Template: "t1"}, status: metav1.ConditionFalse, reason: ReasonWarmPoolFilling, contains: "1 of 3"},
		"counts of an older generation are not reported": {ws: fxWarmWorkspace(), obs: &WarmPoolObservation{Template: "t2", Pool: pool(3, 2, "t2", 3)},
			want: &calibanv1alpha1.WarmPoolStatus{Replicas: 3, Template: "t2"}, status: metav1.ConditionFalse, reason: ReasonWarmPoolFilling, contains: "rolled to SandboxTemplate 't2'"},
		"a pool not cached yet": {ws: fxWarmWorkspace(), obs: &WarmPoolObservation{Template: "t1"},
			want: &calibanv1alpha1.WarmPoolStatus{Replicas: 3, Template: "t1"}, status: metav1.ConditionFalse, reason: ReasonWarmPoolFilling},
		"the extensions API is not installed": {ws: fxWarmWorkspace(),
			obs:  &WarmPoolObservation{Reason: ReasonWarmPoolUnavailable, Problem: "the extensions API is not installed"},
			want: &calibanv1alpha1.WarmPoolStatus{Replicas: 3}, status: metav1.ConditionFalse, reason: ReasonWarmPoolUnavailable, contains: "not installed: tasks start cold"},
		"an invalid workspace keeps no pool": {ws: fxWarmWorkspace(), problem: "env is wrong", obs: &WarmPoolObservation{Template: "t1"},
			want: &calibanv1alpha1.WarmPoolStatus{Replicas: 3}, status: metav1.ConditionFalse, reason: ReasonWarmPoolWorkspaceInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			got := WorkspaceStatus(tc.ws, tc.problem, tc.obs, now)
			if diff := cmp.Diff(tc.want, got.WarmPool); diff != "" {
				t.Errorf("status.warmPool (-want +got):\n%s", diff)
			}
			cond := findCondition(got.Conditions, ConditionWarmPoolReady)
			if tc.want == nil {
				if cond != nil {
					t.Errorf("a workspace without a pool has condition %+v", cond)
				}
				return
			}
			if cond == nil || cond.Status != tc.status || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.contains) || cond.ObservedGeneration != tc.ws.Generation {
				t.Errorf("WarmPoolReady = %+v, want %s %s holding %q", cond, tc.status, tc.reason, tc.contains)
			}
			if !WorkspaceStatusChanged(tc.ws.Status, got) {
				t.Error("a new warm pool status is not a change")
			}
		})
	}
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// The golden file is every object the operator applies for a Workspace's
// pool and for a warm task; see golden_test.go.
func TestGoldenWarmPool(t *testing.T) {
	ws := fxWarmWorkspace()
	r := poolRendering(t, ws)
	tk := task("refactor-auth")
	var out bytes.Buffer
	for i, obj := range []any{
		BuildWarmTemplate(ws, r), BuildWarmPool(ws, WarmTemplateName(ws.Name, r.Hash)), BuildWarmServiceAccount(ws),
		BuildWarmIsolationPolicy(ws), BuildWarmUnclaimedPolicy(ws, r),
		BuildClaim(tk), BuildWarmNetworkPolicy(tk, admitted(t, tk, ws), settings(), "6f1c2b3a-0d4e-4f5a-8b6c-7d8e9f0a1b2c"),
		BuildClaimedSandbox(tk, "ws-warm-x7k2p", sandboxv1beta1.OperatingModeRunning),
	} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	golden(t, "warm-pool.yaml", out.Bytes())
}

func TestTheStatusCarriesTheLaunch(t *testing.T) {
	warm := &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchWarm, Reason: ReasonLaunchWarmPool, Message: "m",
		Claim: &calibanv1alpha1.ClaimReference{Name: "a-claim", UID: "u"}}
	decided := &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchCold, Reason: ReasonNoWarmPool, Message: "n"}
	before := ColdBeforeWarmStart()
	for name, tc := range map[string]struct {
		stored, decided, want *calibanv1alpha1.Launch
		pin                   bool
	}{
		"a launch decided with the pin is written":               {decided: decided, want: decided, pin: true},
		"a stored launch is kept":                                {stored: warm, want: warm, pin: true},
		"a task pinned before launches were decided starts cold": {want: &before, pin: true},
		"an unpinned task has none":                              {},
	} {
		t.Run(name, func(t *testing.T) {
			tk := fxTask(func(tk *calibanv1alpha1.CalibanTask) { tk.Status.Launch = tc.stored })
			in := TaskStatusInput{Task: tk, Launch: tc.decided, Now: metav1.Unix(1700000000, 0)}
			if tc.pin {
				in.Pin, in.Posture = fxPin(), calibanv1alpha1.PostureSupervised
				tk.Status.ResolvedWorkspace = fxPin()
			}
			got := TaskStatus(in, settings())
			if diff := cmp.Diff(tc.want, got.Launch); diff != "" {
				t.Errorf("status.launch (-want +got):\n%s", diff)
			}
			changed := got.DeepCopy()
			changed.Launch = &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchCold, Reason: ReasonWarmPoolRolled}
			if tc.pin && !TaskStatusChanged(got, *changed) {
				t.Error("a changed launch is not a change of the status")
			}
		})
	}
}

func TestTakeSandboxPatchTestsOwnershipAndRenderingBeforeItWrites(t *testing.T) {
	task := fxTask()
	labels := TaskLabels(task)
	var wantLabels []map[string]any
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		wantLabels = append(wantLabels, map[string]any{"op": "add", "path": "/metadata/labels/" + strings.ReplaceAll(k, "/", "~1"), "value": labels[k]})
	}
	tests := map[string]struct {
		setMode bool
		want    []map[string]any
	}{
		"a Sandbox already in the mode keeps its spec": {},
		"a Sandbox in another mode gets the task's": {
			setMode: true,
			want:    []map[string]any{{"op": "add", "path": "/spec/operatingMode", "value": "Suspended"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			body, err := TakeSandboxPatch(task, "claim-uid", "ws-0123", "Suspended", tc.setMode)
			if err != nil {
				t.Fatal(err)
			}
			var got []map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			want := append([]map[string]any{
				{"op": "test", "path": "/metadata/ownerReferences/0/uid", "value": "claim-uid"},
				{"op": "test", "path": "/metadata/annotations/" + strings.ReplaceAll(AnnotationSandboxTemplateRef, "/", "~1"), "value": "ws-0123"},
			}, wantLabels...)
			want = append(want, tc.want...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
	if got := jsonPointerEscape("a~b/c"); got != "a~0b~1c" {
		t.Errorf("jsonPointerEscape(a~b/c) = %q, want a~0b~1c", got)
	}
}

func TestDuplicateSandboxes(t *testing.T) {
	const claimUID, taskUID = types.UID("claim-uid"), types.UID("task-uid")
	sandbox := func(name string, controller types.UID, labels map[string]string) metav1.Object {
		o := &metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Labels: labels}
		if controller != "" {
			yes := true
			o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxClaim", Name: "t-claim", UID: controller, Controller: &yes}}
		}
		return o
	}
	deleting := func(o metav1.Object) metav1.Object {
		now := metav1.Now()
		o.SetDeletionTimestamp(&now)
		return o
	}
	tests := map[string]struct {
		named      string
		controlled []metav1.Object
		want       []string
	}{
		"the Sandbox made from the template beside the adopted one is a duplicate": {
			named:      "ws-warm-8ds2j",
			controlled: []metav1.Object{sandbox("ws-warm-8ds2j", claimUID, nil), sandbox("t-claim", claimUID, nil)},
			want:       []string{"t-claim"},
		},
		"a second adopted pool Sandbox is one too, and both are returned in name order": {
			named:      "ws-warm-8ds2j",
			controlled: []metav1.Object{sandbox("ws-warm-zz", claimUID, nil), sandbox("ws-warm-8ds2j", claimUID, nil), sandbox("t-claim", claimUID, nil)},
			want:       []string{"t-claim", "ws-warm-zz"},
		},
		"nothing is a duplicate before the claim names a Sandbox": {
			controlled: []metav1.Object{sandbox("ws-warm-8ds2j", claimUID, nil), sandbox("t-claim", claimUID, nil)},
		},
		"nothing is a duplicate while the named Sandbox is not the claim's": {
			named:      "ws-warm-8ds2j",
			controlled: []metav1.Object{sandbox("ws-warm-8ds2j", "another-claim", nil), sandbox("t-claim", claimUID, nil)},
		},
		"a Sandbox the task took is never a duplicate": {
			named:      "ws-warm-8ds2j",
			controlled: []metav1.Object{sandbox("ws-warm-8ds2j", claimUID, nil), sandbox("t-claim", claimUID, map[string]string{LabelTaskUID: string(taskUID)})},
		},
		"a Sandbox of another claim, or already being deleted, is left alone": {
			named: "ws-warm-8ds2j",
			controlled: []metav1.Object{sandbox("ws-warm-8ds2j", claimUID, nil), sandbox("other", "another-claim", nil),
				deleting(sandbox("t-claim", claimUID, nil)), sandbox("orphan", "", nil)},
		},
		"another task's UID label does not protect it": {
			named:      "ws-warm-8ds2j",
			controlled: []metav1.Object{sandbox("ws-warm-8ds2j", claimUID, nil), sandbox("t-claim", claimUID, map[string]string{LabelTaskUID: "someone-else"})},
			want:       []string{"t-claim"},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, o := range DuplicateSandboxes(claimUID, test.named, taskUID, test.controlled) {
				got = append(got, o.GetName())
			}
			if diff := cmp.Diff(test.want, got); diff != "" {
				t.Errorf("duplicates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodReachable(t *testing.T) {
	yes := true
	pod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "ws-warm-x", Labels: map[string]string{LabelClaimUID: "claim"},
				OwnerReferences: []metav1.OwnerReference{{Kind: "Sandbox", Name: "ws-warm-x", UID: "sandbox", Controller: &yes}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
		if edit != nil {
			edit(p)
		}
		return p
	}
	tests := map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"a ready pod of the Sandbox with the claim's label is reachable": {pod: pod(nil)},
		"no pod yet":                              {want: "its pod is not there yet"},
		"the pod lacks the claim's label":         {pod: pod(func(p *corev1.Pod) { delete(p.Labels, LabelClaimUID) }), want: "waiting for agent-sandbox"},
		"the pod carries another claim's UID":     {pod: pod(func(p *corev1.Pod) { p.Labels[LabelClaimUID] = "other" }), want: "waiting for agent-sandbox"},
		"a pod of another Sandbox under the name": {pod: pod(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "other" }), want: "is not its pod"},
		"a pod being deleted":                     {pod: pod(func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }), want: "is not its pod"},
		"a pod not ready":                         {pod: pod(func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }), want: "its pod ws-warm-x is not"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got := PodReachable(test.pod, "ws-warm-x", "sandbox", "claim")
			if (test.want == "") != (got == "") || !strings.Contains(got, test.want) {
				t.Errorf("PodReachable = %q, want %q", got, test.want)
			}
		})
	}
}
