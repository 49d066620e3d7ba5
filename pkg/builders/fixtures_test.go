// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// Fixture builders for the child builders' tests, in the style of
// cert-manager's test/unit/gen: a valid default object plus functional
// modifiers. Every builder returns a fresh object, so a case may modify its
// copy freely.

const (
	fxNamespace = "team-a"
	fxTaskUID   = types.UID("0b9c2d7e-5f41-4a8e-9d3c-6e2f1a7b8c90")
)

// task is a CalibanTask in fxNamespace with a UID, as the lister returns it.
func task(name string, mods ...func(*calibanv1alpha1.CalibanTask)) *calibanv1alpha1.CalibanTask {
	t := &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fxNamespace, UID: fxTaskUID, Generation: 1},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "refactor the auth module", PermissionPosture: calibanv1alpha1.PostureSupervised},
		},
	}
	for _, m := range mods {
		m(t)
	}
	return t
}

// taskFrom is task's deep-copying variant.
func taskFrom(t *calibanv1alpha1.CalibanTask, mods ...func(*calibanv1alpha1.CalibanTask)) *calibanv1alpha1.CalibanTask {
	t = t.DeepCopy()
	for _, m := range mods {
		m(t)
	}
	return t
}

func taskRouterConfig(ref string) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		if t.Spec.Model == nil {
			t.Spec.Model = &calibanv1alpha1.ModelSpec{}
		}
		t.Spec.Model.RouterConfigRef = ref
	}
}

func taskModel(name string) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		if t.Spec.Model == nil {
			t.Spec.Model = &calibanv1alpha1.ModelSpec{}
		}
		t.Spec.Model.Name = name
	}
}

func taskState(st calibanv1alpha1.StateSpec) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) { t.Spec.State = &st }
}

func taskIsolation(iso calibanv1alpha1.Isolation) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) { t.Spec.Isolation = &iso }
}

// pin is a minimal pinned workspace: one anthropic provider whose key lives
// in a Secret, nothing else.
func pin(mods ...func(*calibanv1alpha1.ResolvedWorkspace)) *calibanv1alpha1.ResolvedWorkspace {
	p := &calibanv1alpha1.ResolvedWorkspace{
		Provider: calibanv1alpha1.Provider{
			Name: "claude", Kind: "anthropic", Model: "claude-sonnet",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "anthropic-key", Key: "api-key"},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func pinProvider(p calibanv1alpha1.Provider) func(*calibanv1alpha1.ResolvedWorkspace) {
	return func(w *calibanv1alpha1.ResolvedWorkspace) { w.Provider = p }
}

func pinSources(s ...calibanv1alpha1.Source) func(*calibanv1alpha1.ResolvedWorkspace) {
	return func(w *calibanv1alpha1.ResolvedWorkspace) { w.Sources = s }
}

func pinEnv(env ...calibanv1alpha1.EnvVar) func(*calibanv1alpha1.ResolvedWorkspace) {
	return func(w *calibanv1alpha1.ResolvedWorkspace) { w.Env = env }
}

func pinIsolation(iso calibanv1alpha1.Isolation) func(*calibanv1alpha1.ResolvedWorkspace) {
	return func(w *calibanv1alpha1.ResolvedWorkspace) { w.Isolation = &iso }
}

// pinEgress sets an allow-list; pinEgress() with no rules is DNS-only.
func pinEgress(allow ...calibanv1alpha1.EgressRule) func(*calibanv1alpha1.ResolvedWorkspace) {
	return func(w *calibanv1alpha1.ResolvedWorkspace) {
		if allow == nil {
			allow = []calibanv1alpha1.EgressRule{}
		}
		w.Egress = &calibanv1alpha1.Egress{Allow: allow}
	}
}

func pinPolicy(p calibanv1alpha1.AgentPolicy) func(*calibanv1alpha1.ResolvedWorkspace) {
	return func(w *calibanv1alpha1.ResolvedWorkspace) { w.AgentPolicy = &p }
}

// settings is config.DefaultAgentSettings with overrides.
func settings(mods ...func(*config.AgentSettings)) config.AgentSettings {
	s := config.DefaultAgentSettings()
	for _, m := range mods {
		m(&s)
	}
	return s
}

// parsedSettings reads an environment through config.Parse,
// for the cases whose meaning is defined by the variables (a blank request
// clears it).
func parsedSettings(t testing.TB, env map[string]string) config.AgentSettings {
	t.Helper()
	parsed, err := config.Parse(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "caliban-system")
	s := parsed.AgentSettings
	if err != nil {
		t.Fatalf("config.Parse(%v): %v", env, err)
	}
	return s
}

func quantity(s string) resource.Quantity { return resource.MustParse(s) }

func plainEnv(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key, Optional: new(false),
	}}}
}

// tokenEnv is the daemon token as default settings project it.
func tokenEnv() corev1.EnvVar {
	return secretEnv("CALIBAN_DAEMON_TOKEN", "caliban-session-plane-token", "token")
}

// sources used across the tests.
var (
	srcCaliban = calibanv1alpha1.Source{Name: "caliban", Repo: "git@x:caliban", Ref: "main", Path: "/work/caliban"}
	srcDocs    = calibanv1alpha1.Source{Name: "docs", Repo: "https://example.com/docs.git", Ref: "release-1.2", Path: "/work/docs"}

	// Private sources: a basic-auth Secret for https, ssh-auth Secrets for
	// ssh:// and git@, and credentials on a file:// repo, which cannot use
	// them (validation refuses it; the builders render it as public).
	srcPrivateHTTPS = calibanv1alpha1.Source{Name: "app", Repo: "https://git.example.com/team/app.git", Ref: "main", Path: "/work/app",
		CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-https"}}
	srcPrivateSSH = calibanv1alpha1.Source{Name: "lib", Repo: "ssh://git@git.example.com:2222/team/lib.git", Ref: "v1", Path: "/work/lib",
		CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-ssh"}}
	srcPrivateSCP = calibanv1alpha1.Source{Name: "tools", Repo: "git@git.example.com:team/tools.git", Ref: sha1Ref, Path: "/work/tools",
		CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-ssh"}}
	srcFileWithCredentials = calibanv1alpha1.Source{Name: "local", Repo: "file:///srv/git/local.git", Ref: "main", Path: "/work/local",
		CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-local"}}
)

// privateSourcesPin mixes them: public (index 0), https with credentials
// (1), ssh:// with credentials (2), credentials on file:// (3), and git@ at
// a commit SHA with credentials (4).
func privateSourcesPin() *calibanv1alpha1.ResolvedWorkspace {
	return pin(pinSources(srcDocs, srcPrivateHTTPS, srcPrivateSSH, srcFileWithCredentials, srcPrivateSCP))
}

// everyFeatureTask and everyFeaturePin use every input the builders read:
// sources, a provider with base URL and key, router config, remote state
// with a token, runtime classes on both sides, an egress list, the whole
// agentPolicy, and workspace env that a policy field overrides.
func everyFeatureTask(name string) *calibanv1alpha1.CalibanTask {
	return task(name,
		taskModel("gpt-5"),
		taskRouterConfig("team-router"),
		taskState(calibanv1alpha1.StateSpec{
			GonzaloEndpoint: "http://gonzalod.storage.svc:8080",
			Mode:            StateModeRemote,
			TokenRef:        &calibanv1alpha1.SecretKeyRef{SecretName: "gonzalo-token", Key: "token"},
		}),
		taskIsolation(calibanv1alpha1.Isolation{RuntimeClass: "gvisor"}),
	)
}

func everyFeaturePin() *calibanv1alpha1.ResolvedWorkspace {
	return pin(
		pinSources(srcCaliban, srcDocs),
		pinProvider(calibanv1alpha1.Provider{
			Name: "coder", Kind: "openai", BaseURL: "https://llm.internal/v1", Model: "gpt-5",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "openai-key", Key: "api-key"},
		}),
		pinEnv(
			calibanv1alpha1.EnvVar{Name: "LOG_LEVEL", Value: "debug"},
			calibanv1alpha1.EnvVar{Name: "CALIBAN_NO_MCP", Value: "false"},
			calibanv1alpha1.EnvVar{Name: "CALIBAN_PARALLEL_TOOL_LIMIT", Value: "64"},
		),
		pinIsolation(calibanv1alpha1.Isolation{RuntimeClass: "kata", Worktrees: "per-agent"}),
		pinEgress(
			calibanv1alpha1.EgressRule{CIDR: "10.0.0.0/8", Ports: []int32{443, 8080}},
			calibanv1alpha1.EgressRule{CIDR: "2001:db8::/32"},
		),
		pinPolicy(calibanv1alpha1.AgentPolicy{
			AllowUnattended:         true,
			PermissionMode:          calibanv1alpha1.PermissionModeDontAsk,
			AutoAllow:               new(true),
			NoPermissions:           new(false),
			NoMCP:                   new(true),
			NoHooks:                 new(true),
			NoSkills:                new(true),
			NoSubAgent:              new(true),
			StrictKnownMarketplaces: new(true),
			EnabledPlugins:          []string{"formatter", "linter"},
			BlockedMarketplaces:     []string{"https://bad.example/market", "https://worse.example/m"},
			ParallelToolLimit:       new(int32(4)),
		}),
	)
}

// toMap decodes the JSON of v (an applyconfiguration, usually) into the
// generic form the apiserver receives.
func toMap(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// convert round-trips v through JSON into out's type: an applyconfiguration
// read back as the typed object the apiserver would store.
func convert[T any](t testing.TB, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// buildSandbox is BuildSandbox read back as the typed Sandbox the apiserver
// would store, for assertions on its fields.
func buildSandbox(t testing.TB, tk *calibanv1alpha1.CalibanTask, p *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) *sandboxv1beta1.Sandbox {
	t.Helper()
	return new(convert[sandboxv1beta1.Sandbox](t, BuildSandbox(tk, p, s)))
}

// calibandEnv is CalibandEnv read back as typed env vars.
func calibandEnv(t testing.TB, tk *calibanv1alpha1.CalibanTask, p *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) []corev1.EnvVar {
	t.Helper()
	return convert[[]corev1.EnvVar](t, CalibandEnv(tk, p, s))
}

// calibandOf returns the caliband container of a rendered Sandbox.
func calibandOf(t testing.TB, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	if len(spec.Containers) != 1 || spec.Containers[0].Name != "caliband" {
		t.Fatalf("want exactly one container named caliband, got %d: %v", len(spec.Containers), containerNames(spec.Containers))
	}
	return spec.Containers[0]
}

func containerNames(cs []corev1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

func envNames(env []corev1.EnvVar) []string {
	var names []string
	for _, e := range env {
		names = append(names, e.Name)
	}
	return names
}

// observe is ObserveSandbox, nil for no Sandbox.
func observe(sb *sandboxv1beta1.Sandbox) *ObservedSandbox {
	if sb == nil {
		return nil
	}
	return ObserveSandbox(sb)
}
