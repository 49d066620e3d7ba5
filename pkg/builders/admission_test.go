// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

func fxTask(mods ...func(*calibanv1alpha1.CalibanTask)) *calibanv1alpha1.CalibanTask {
	t := &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-bug", Namespace: "team", UID: "uid-1", Generation: 1},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "fix it", PermissionPosture: calibanv1alpha1.PostureSupervised},
		},
	}
	for _, m := range mods {
		m(t)
	}
	return t
}

func unattended(t *calibanv1alpha1.CalibanTask) {
	t.Spec.Task.PermissionPosture = calibanv1alpha1.PostureUnattended
}

func withPolicy(p calibanv1alpha1.AgentPolicy) func(*calibanv1alpha1.Workspace) {
	return func(ws *calibanv1alpha1.Workspace) { ws.Spec.AgentPolicy = &p }
}

func TestAdmit(t *testing.T) {
	twoProviders := func(ws *calibanv1alpha1.Workspace) {
		ws.Spec.Providers = append(ws.Spec.Providers, calibanv1alpha1.Provider{Name: "coder", Kind: "openai", Model: "m2"})
	}
	tests := map[string]struct {
		// inputs
		task *calibanv1alpha1.CalibanTask
		ws   *calibanv1alpha1.Workspace
		// expected
		verdict  Verdict
		failure  Failure
		provider string
		model    string
		posture  calibanv1alpha1.PermissionPosture
	}{
		"a missing workspace is unresolved": {
			task: fxTask(), verdict: Rejected,
			failure: Failure{ReasonWorkspaceUnresolved, "Workspace not found: 'ws'"},
		},
		"a Pending workspace is waited for": {
			task: fxTask(), ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Status.Phase = calibanv1alpha1.WorkspacePending }),
			verdict: WaitForWorkspace,
		},
		"a workspace with no status yet is waited for": {
			task: fxTask(), ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Status = calibanv1alpha1.WorkspaceStatus{} }),
			verdict: WaitForWorkspace,
		},
		"a Ready status for an older generation is waited for": {
			task: fxTask(), ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Generation = 4 }),
			verdict: WaitForWorkspace,
		},
		"a Failed workspace surfaces its message": {
			task: fxTask(),
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Status.Phase, ws.Status.Message = calibanv1alpha1.WorkspaceFailed, "duplicate provider name 'p'"
			}),
			verdict: Rejected,
			failure: Failure{ReasonWorkspaceUnresolved, "workspace 'ws' not ready: duplicate provider name 'p'"},
		},
		"a Ready status written before a rule on env is not taken for the rule's": {
			task: fxTask(),
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "MODE", Value: "fast"}, {Name: "LD_PRELOAD", Value: "/work/app/hook.so"}}
			}),
			verdict: Rejected,
			failure: Failure{ReasonWorkspaceUnresolved, "workspace 'ws' not ready: env[1].name: 'LD_PRELOAD' decides what code the agent pod loads or runs, and cannot be set in a Workspace"},
		},
		"a Ready workspace whose env re-points requests is admitted: the admission component gates that": {
			task: fxTask(),
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy.corp:3128"}, {Name: "NODE_EXTRA_CA_CERTS", Value: "/work/app/ca.pem"}}
			}),
			verdict: Admitted, provider: "planner", model: "m1", posture: calibanv1alpha1.PostureSupervised,
		},
		"a Failed workspace without a message still explains": {
			task:    fxTask(),
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Status.Phase = calibanv1alpha1.WorkspaceFailed }),
			verdict: Rejected,
			failure: Failure{ReasonWorkspaceUnresolved, "workspace 'ws' not ready: validation failed"},
		},
		"a supervised task on a Ready workspace is pinned": {
			task: fxTask(), ws: fxWorkspace(),
			verdict: Admitted, provider: "planner", model: "m1", posture: calibanv1alpha1.PostureSupervised,
		},
		"a task without a posture is admitted as supervised": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) { t.Spec.Task.PermissionPosture = "" }), ws: fxWorkspace(),
			verdict: Admitted, provider: "planner", model: "m1", posture: calibanv1alpha1.PostureSupervised,
		},
		"an unattended task without permission is refused, naming the setting and workspace": {
			task: fxTask(unattended), ws: fxWorkspace(),
			verdict: Rejected,
			failure: Failure{ReasonPostureNotPermitted, "task.permissionPosture is unattended, but workspace 'ws' does not set agentPolicy.allowUnattended"},
		},
		"an unattended task with permission is admitted unattended": {
			task: fxTask(unattended), ws: fxWorkspace(withPolicy(calibanv1alpha1.AgentPolicy{AllowUnattended: true})),
			verdict: Admitted, provider: "planner", model: "m1", posture: calibanv1alpha1.PostureUnattended,
		},
		"permissionMode dontAsk needs allowUnattended": {
			task: fxTask(), ws: fxWorkspace(withPolicy(calibanv1alpha1.AgentPolicy{PermissionMode: calibanv1alpha1.PermissionModeDontAsk})),
			verdict: Rejected,
			failure: Failure{ReasonPostureNotPermitted, "workspace 'ws' sets agentPolicy.permissionMode dontAsk, which lets agents act unsupervised, but does not set agentPolicy.allowUnattended"},
		},
		"permissionMode bypassPermissions needs allowUnattended": {
			task: fxTask(), ws: fxWorkspace(withPolicy(calibanv1alpha1.AgentPolicy{PermissionMode: calibanv1alpha1.PermissionModeBypassPermissions})),
			verdict: Rejected,
			failure: Failure{ReasonPostureNotPermitted, "workspace 'ws' sets agentPolicy.permissionMode bypassPermissions, which lets agents act unsupervised, but does not set agentPolicy.allowUnattended"},
		},
		"autoAllow needs allowUnattended": {
			task: fxTask(), ws: fxWorkspace(withPolicy(calibanv1alpha1.AgentPolicy{AutoAllow: new(true)})),
			verdict: Rejected,
			failure: Failure{ReasonPostureNotPermitted, "workspace 'ws' sets agentPolicy.autoAllow, which lets agents act unsupervised, but does not set agentPolicy.allowUnattended"},
		},
		"noPermissions needs allowUnattended": {
			task: fxTask(), ws: fxWorkspace(withPolicy(calibanv1alpha1.AgentPolicy{NoPermissions: new(true)})),
			verdict: Rejected,
			failure: Failure{ReasonPostureNotPermitted, "workspace 'ws' sets agentPolicy.noPermissions, which lets agents act unsupervised, but does not set agentPolicy.allowUnattended"},
		},
		"permissionMode auto is supervised": {
			task: fxTask(), ws: fxWorkspace(withPolicy(calibanv1alpha1.AgentPolicy{PermissionMode: calibanv1alpha1.PermissionModeAuto, AutoAllow: new(false)})),
			verdict: Admitted, provider: "planner", model: "m1", posture: calibanv1alpha1.PostureSupervised,
		},
		"the posture gate comes before provider resolution": {
			task: fxTask(unattended, func(t *calibanv1alpha1.CalibanTask) { t.Spec.ProviderRef = "nobody" }), ws: fxWorkspace(),
			verdict: Rejected,
			failure: Failure{ReasonPostureNotPermitted, "task.permissionPosture is unattended, but workspace 'ws' does not set agentPolicy.allowUnattended"},
		},
		"providerRef picks its provider": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) { t.Spec.ProviderRef = "coder" }), ws: fxWorkspace(twoProviders),
			verdict: Admitted, provider: "coder", model: "m2", posture: calibanv1alpha1.PostureSupervised,
		},
		"a dangling providerRef is unresolved": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) { t.Spec.ProviderRef = "nobody" }), ws: fxWorkspace(),
			verdict: Rejected,
			failure: Failure{ReasonWorkspaceUnresolved, "providerRef 'nobody' names no provider in the workspace"},
		},
		"defaultProvider is used without providerRef": {
			task: fxTask(), ws: fxWorkspace(twoProviders, func(ws *calibanv1alpha1.Workspace) { ws.Spec.DefaultProvider = "coder" }),
			verdict: Admitted, provider: "coder", model: "m2", posture: calibanv1alpha1.PostureSupervised,
		},
		"a dangling defaultProvider is unresolved": {
			task: fxTask(), ws: fxWorkspace(twoProviders, func(ws *calibanv1alpha1.Workspace) { ws.Spec.DefaultProvider = "nobody" }),
			verdict: Rejected,
			failure: Failure{ReasonWorkspaceUnresolved, "defaultProvider 'nobody' names no provider"},
		},
		"two providers without a default are ambiguous": {
			task: fxTask(), ws: fxWorkspace(twoProviders),
			verdict: Rejected,
			failure: Failure{ReasonWorkspaceUnresolved, "no providerRef and workspace has no defaultProvider among 2 providers"},
		},
		"model.name replaces the provider's model in the pin": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) { t.Spec.Model = &calibanv1alpha1.ModelSpec{Name: "opus"} }), ws: fxWorkspace(),
			verdict: Admitted, provider: "planner", model: "opus", posture: calibanv1alpha1.PostureSupervised,
		},
		"a blank model.name is ignored": {
			task: fxTask(func(t *calibanv1alpha1.CalibanTask) { t.Spec.Model = &calibanv1alpha1.ModelSpec{Name: "  "} }), ws: fxWorkspace(),
			verdict: Admitted, provider: "planner", model: "m1", posture: calibanv1alpha1.PostureSupervised,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Admit(tc.task, tc.ws)
			if got.Verdict != tc.verdict {
				t.Fatalf("verdict = %v, want %v (failure %+v)", got.Verdict, tc.verdict, got.Failure)
			}
			if diff := cmp.Diff(tc.failure, got.Failure); diff != "" {
				t.Errorf("failure (-want +got):\n%s", diff)
			}
			if tc.verdict != Admitted {
				if got.Pin != nil {
					t.Errorf("a task that is not admitted got a pin: %+v", got.Pin)
				}
				return
			}
			if got.Pin.Provider.Name != tc.provider || got.Pin.Provider.Model != tc.model || got.Posture != tc.posture {
				t.Errorf("pinned provider %s model %s posture %s, want %s %s %s",
					got.Pin.Provider.Name, got.Pin.Provider.Model, got.Posture, tc.provider, tc.model, tc.posture)
			}
		})
	}
}

func TestThePinCarriesTheWholeWorkspaceAndIsIndependentOfIt(t *testing.T) {
	ws := fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
		ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "A", Value: "1"}}
		ws.Spec.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: "gvisor", Worktrees: "on"}
		ws.Spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{}}
		ws.Spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{EnabledPlugins: []string{}, NoMCP: new(true)}
	})
	got := Admit(fxTask(), ws)
	want := &calibanv1alpha1.ResolvedWorkspace{
		Sources:     ws.Spec.Sources,
		Provider:    ws.Spec.Providers[0],
		Env:         ws.Spec.Env,
		Isolation:   ws.Spec.Isolation,
		Egress:      ws.Spec.Egress,
		AgentPolicy: ws.Spec.AgentPolicy,
	}
	if diff := cmp.Diff(want, got.Pin); diff != "" {
		t.Fatalf("pin (-want +got):\n%s", diff)
	}
	if got.Pin.AgentPolicy.EnabledPlugins == nil || got.Pin.Egress.Allow == nil {
		t.Error("the pin turned an empty list into an omitted one")
	}
	ws.Spec.Sources[0].Repo = "https://evil.example/app.git"
	ws.Spec.AgentPolicy.AllowUnattended = true
	if got.Pin.Sources[0].Repo == ws.Spec.Sources[0].Repo || got.Pin.AgentPolicy.AllowUnattended {
		t.Error("editing the workspace after admission changed the pin")
	}
}

func TestPinnedPostureProblem(t *testing.T) {
	pinned := func(allow bool) func(*calibanv1alpha1.CalibanTask) {
		return func(t *calibanv1alpha1.CalibanTask) {
			t.Status.ResolvedWorkspace = &calibanv1alpha1.ResolvedWorkspace{
				Provider:    calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"},
				AgentPolicy: &calibanv1alpha1.AgentPolicy{AllowUnattended: allow},
			}
		}
	}
	tests := map[string]struct {
		task *calibanv1alpha1.CalibanTask
		want *Failure
	}{
		"an unpinned task has nothing to re-check":                {task: fxTask(unattended)},
		"a supervised pinned task is fine":                        {task: fxTask(pinned(false))},
		"a task edited to unattended runs when its pin allows it": {task: fxTask(pinned(true), unattended)},
		"a task edited to unattended fails when its pin does not allow it": {
			task: fxTask(pinned(false), unattended),
			want: &Failure{ReasonPostureNotPermitted, "task.permissionPosture is unattended, but its pinned workspace configuration does not set agentPolicy.allowUnattended"},
		},
		"a pin without any agentPolicy does not allow unattended": {
			task: fxTask(unattended, func(t *calibanv1alpha1.CalibanTask) {
				t.Status.ResolvedWorkspace = &calibanv1alpha1.ResolvedWorkspace{Provider: calibanv1alpha1.Provider{Name: "p", Kind: "x"}}
			}),
			want: &Failure{ReasonPostureNotPermitted, "task.permissionPosture is unattended, but its pinned workspace configuration does not set agentPolicy.allowUnattended"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PinnedPostureProblem(tc.task)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPinnedEnvProblem(t *testing.T) {
	pinnedEnv := func(policy *calibanv1alpha1.AgentPolicy, env ...calibanv1alpha1.EnvVar) func(*calibanv1alpha1.CalibanTask) {
		return func(t *calibanv1alpha1.CalibanTask) {
			t.Status.ResolvedWorkspace = &calibanv1alpha1.ResolvedWorkspace{
				Provider: calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"}, Env: env, AgentPolicy: policy,
			}
		}
	}
	autoAllow := calibanv1alpha1.EnvVar{Name: "CALIBAN_AUTO_ALLOW", Value: "true"}
	type row struct {
		task *calibanv1alpha1.CalibanTask
		want *Failure
	}
	tests := map[string]row{
		"an unpinned task has nothing to re-check": {task: fxTask()},
		"a pin with ordinary env is fine": {
			task: fxTask(pinnedEnv(nil, calibanv1alpha1.EnvVar{Name: "MODE", Value: "fast"}, calibanv1alpha1.EnvVar{Name: "caliban_auto_allow", Value: "true"})),
		},
		"a pin whose env grants auto-allow without the gate fails, naming the entry and the field": {
			task: fxTask(pinnedEnv(nil, calibanv1alpha1.EnvVar{Name: "MODE", Value: "fast"}, autoAllow)),
			want: &Failure{ReasonPostureNotPermitted, "status.resolvedWorkspace.env[1]: 'CALIBAN_AUTO_ALLOW' is projected from agentPolicy.autoAllow and cannot be set in a Workspace; " +
				"the task was pinned before that was refused: set agentPolicy.autoAllow in the Workspace instead and create the task again"},
		},
		"a pin whose policy allows unattended work still fails: the entry did not pass the gate": {
			task: fxTask(pinnedEnv(&calibanv1alpha1.AgentPolicy{AllowUnattended: true, AutoAllow: new(true)}, autoAllow)),
			want: &Failure{ReasonPostureNotPermitted, "status.resolvedWorkspace.env[0]: 'CALIBAN_AUTO_ALLOW' is projected from agentPolicy.autoAllow and cannot be set in a Workspace; " +
				"the task was pinned before that was refused: set agentPolicy.autoAllow in the Workspace instead and create the task again"},
		},
		"a restricting variable fails too: dropping it would run the task under a looser policy": {
			task: fxTask(pinnedEnv(nil, calibanv1alpha1.EnvVar{Name: "CALIBAN_NO_MCP", Value: "true"})),
			want: &Failure{ReasonPostureNotPermitted, "status.resolvedWorkspace.env[0]: 'CALIBAN_NO_MCP' is projected from agentPolicy.noMcp and cannot be set in a Workspace; " +
				"the task was pinned before that was refused: set agentPolicy.noMcp in the Workspace instead and create the task again"},
		},
		"the first such entry is named": {
			task: fxTask(pinnedEnv(nil, calibanv1alpha1.EnvVar{Name: "CALIBAN_PARALLEL_TOOL_LIMIT", Value: "64"}, autoAllow)),
			want: &Failure{ReasonPostureNotPermitted, "status.resolvedWorkspace.env[0]: 'CALIBAN_PARALLEL_TOOL_LIMIT' is projected from agentPolicy.parallelToolLimit and cannot be set in a Workspace; " +
				"the task was pinned before that was refused: set agentPolicy.parallelToolLimit in the Workspace instead and create the task again"},
		},
	}
	tests["a pin whose env preloads a library fails, naming the entry"] = row{
		task: fxTask(pinnedEnv(nil, calibanv1alpha1.EnvVar{Name: "MODE", Value: "fast"}, calibanv1alpha1.EnvVar{Name: "LD_PRELOAD", Value: "/work/app/hook.so"})),
		want: &Failure{ReasonPostureNotPermitted, "status.resolvedWorkspace.env[1].name: 'LD_PRELOAD' decides what code the agent pod loads or runs, and cannot be set in a Workspace; " +
			"the task was pinned before that was refused: remove it from the Workspace and create the task again"},
	}
	tests["a loader before an agentPolicy variable is the one named"] = row{
		task: fxTask(pinnedEnv(nil, calibanv1alpha1.EnvVar{Name: "GIT_CONFIG_COUNT", Value: "1"}, autoAllow)),
		want: &Failure{ReasonPostureNotPermitted, "status.resolvedWorkspace.env[0].name: 'GIT_CONFIG_COUNT' decides what code the agent pod loads or runs, and cannot be set in a Workspace; " +
			"the task was pinned before that was refused: remove it from the Workspace and create the task again"},
	}
	tests["a pin whose env re-points requests is not failed: the gate is on who wrote the Workspace"] = row{
		task: fxTask(pinnedEnv(nil, calibanv1alpha1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy.corp:3128"}, calibanv1alpha1.EnvVar{Name: "SSL_CERT_FILE", Value: "/work/app/ca.pem"})),
	}
	for _, name := range wantLoaderEnv {
		tests["a pin carrying "+name+" fails naming it"] = row{
			task: fxTask(pinnedEnv(nil, calibanv1alpha1.EnvVar{Name: name, Value: "x"})),
			want: &Failure{ReasonPostureNotPermitted, "status.resolvedWorkspace.env[0].name: '" + name + "' decides what code the agent pod loads or runs, and cannot be set in a Workspace; " +
				"the task was pinned before that was refused: remove it from the Workspace and create the task again"},
		}
	}
	for _, v := range wantAgentPolicyVariables {
		tests["a pin carrying "+v.Name+" fails naming "+v.Field] = row{
			task: fxTask(pinnedEnv(nil, calibanv1alpha1.EnvVar{Name: v.Name, Value: "true"})),
			want: &Failure{ReasonPostureNotPermitted, "status.resolvedWorkspace.env[0]: '" + v.Name + "' is projected from " + v.Field + " and cannot be set in a Workspace; " +
				"the task was pinned before that was refused: set " + v.Field + " in the Workspace instead and create the task again"},
		}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PinnedEnvProblem(tc.task)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
