// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// These tests hold the caliband container's environment to
// docs/crd-reference.md#the-sandbox-and-the-agent-pod and to
// docs/caliband-contract.md#provider-variables, #storage-variables and
// #agent-policy-variables: the variables, their values, their order, and what
// must never appear.

func TestCalibandEnvOrder(t *testing.T) {
	// Every source of env at once, in the order of the numbered table in
	// docs/caliband-contract.md#environment: provider, storage,
	// router config, workspace env, agentPolicy, daemon token.
	got := calibandEnv(t, everyFeatureTask("refactor-auth"), everyFeaturePin(), settings())
	want := []corev1.EnvVar{
		plainEnv("CALIBAN_PROVIDER", "openai"),
		plainEnv("OPENAI_BASE_URL", "https://llm.internal/v1"),
		secretEnv("OPENAI_API_KEY", "openai-key", "api-key"),
		plainEnv("CALIBAN_STORAGE_SUBSTRATE", "remote"),
		plainEnv("CALIBAN_STORAGE_REMOTE_URL", "http://gonzalod.storage.svc:8080"),
		plainEnv("CALIBAN_STORAGE_REMOTE_TOKEN_ENV", "GONZALO_TOKEN"),
		secretEnv("GONZALO_TOKEN", "gonzalo-token", "token"),
		plainEnv("CALIBAN_ROUTER_CONFIG", "/etc/caliban/router/caliban.toml"),
		plainEnv("LOG_LEVEL", "debug"),
		plainEnv("CALIBAN_DEFAULT_PERMISSION_MODE", "dontAsk"),
		plainEnv("CALIBAN_AUTO_ALLOW", "true"),
		plainEnv("CALIBAN_NO_MCP", "true"),
		plainEnv("CALIBAN_NO_HOOKS", "true"),
		plainEnv("CALIBAN_NO_SKILLS", "true"),
		plainEnv("CALIBAN_NO_SUB_AGENT", "true"),
		plainEnv("CALIBAN_STRICT_KNOWN_MARKETPLACES", "true"),
		plainEnv("CALIBAN_ENABLED_PLUGINS", "formatter,linter"),
		plainEnv("CALIBAN_BLOCKED_MARKETPLACES", "https://bad.example/market,https://worse.example/m"),
		plainEnv("CALIBAN_PARALLEL_TOOL_LIMIT", "4"),
		tokenEnv(),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	// BuildSandbox puts exactly this list on the container.
	c := calibandOf(t, buildSandbox(t, everyFeatureTask("refactor-auth"), everyFeaturePin(), settings()).Spec.PodTemplate.Spec)
	if diff := cmp.Diff(want, c.Env); diff != "" {
		t.Errorf("caliband container env (-want +got):\n%s", diff)
	}
}

func TestCalibandEnvProvider(t *testing.T) {
	cred := &calibanv1alpha1.SecretKeyRef{SecretName: "llm-key", Key: "k"}
	tests := map[string]struct {
		// input
		provider calibanv1alpha1.Provider
		// expected
		env []corev1.EnvVar
	}{
		"anthropic uses ANTHROPIC_*": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "anthropic", BaseURL: "https://a", CredentialsRef: cred},
			env: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic"), plainEnv("ANTHROPIC_BASE_URL", "https://a"),
				secretEnv("ANTHROPIC_API_KEY", "llm-key", "k"), tokenEnv()},
		},
		"openai uses OPENAI_*": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "openai", BaseURL: "https://o", CredentialsRef: cred},
			env: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "openai"), plainEnv("OPENAI_BASE_URL", "https://o"),
				secretEnv("OPENAI_API_KEY", "llm-key", "k"), tokenEnv()},
		},
		"google uses caliban's GEMINI_* names": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "google", BaseURL: "https://g", CredentialsRef: cred},
			env: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "google"), plainEnv("GEMINI_BASE_URL", "https://g"),
				secretEnv("GEMINI_API_KEY", "llm-key", "k"), tokenEnv()},
		},
		"gemini uses GEMINI_*": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "gemini", BaseURL: "https://g", CredentialsRef: cred},
			env: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "gemini"), plainEnv("GEMINI_BASE_URL", "https://g"),
				secretEnv("GEMINI_API_KEY", "llm-key", "k"), tokenEnv()},
		},
		"azure uses AZURE_OPENAI_*": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "azure", BaseURL: "https://z", CredentialsRef: cred},
			env: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "azure"), plainEnv("AZURE_OPENAI_BASE_URL", "https://z"),
				secretEnv("AZURE_OPENAI_API_KEY", "llm-key", "k"), tokenEnv()},
		},
		"azure-openai uses AZURE_OPENAI_*": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "azure-openai", CredentialsRef: cred},
			env: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "azure-openai"),
				secretEnv("AZURE_OPENAI_API_KEY", "llm-key", "k"), tokenEnv()},
		},
		"another kind maps to <KIND>_* uppercased": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "bedrock", BaseURL: "https://b", CredentialsRef: cred},
			env: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "bedrock"), plainEnv("BEDROCK_BASE_URL", "https://b"),
				secretEnv("BEDROCK_API_KEY", "llm-key", "k"), tokenEnv()},
		},
		"another kind has '-' and '.' replaced by '_'": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "my-llm.v2", BaseURL: "https://m", CredentialsRef: cred},
			env: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "my-llm.v2"), plainEnv("MY_LLM_V2_BASE_URL", "https://m"),
				secretEnv("MY_LLM_V2_API_KEY", "llm-key", "k"), tokenEnv()},
		},
		"a keyless provider has no API-key variable": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "openai", BaseURL: "http://ollama.local:11434/v1"},
			env: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "openai"), plainEnv("OPENAI_BASE_URL", "http://ollama.local:11434/v1"),
				tokenEnv()},
		},
		"a provider without baseUrl has no base-URL variable": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "anthropic", CredentialsRef: cred},
			env:      []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic"), secretEnv("ANTHROPIC_API_KEY", "llm-key", "k"), tokenEnv()},
		},
		"the model is recorded in the pin, never projected": {
			provider: calibanv1alpha1.Provider{Name: "p", Kind: "anthropic", Model: "claude-opus"},
			env:      []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic"), tokenEnv()},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got := calibandEnv(t, task("t", taskModel("override")), pin(pinProvider(test.provider)), settings())
			if diff := cmp.Diff(test.env, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCalibandEnvStorage(t *testing.T) {
	// docs/caliband-contract.md#storage-variables, one row per
	// case.
	tests := map[string]struct {
		// input
		state *calibanv1alpha1.StateSpec
		// expected: the storage variables, between the provider and the token
		storage []corev1.EnvVar
	}{
		"no state projects nothing": {
			state: nil, storage: nil,
		},
		"an empty state projects nothing": {
			state: &calibanv1alpha1.StateSpec{}, storage: nil,
		},
		"an endpoint alone selects remote storage at that URL": {
			state: &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://gonzalod.storage.svc:8080"},
			storage: []corev1.EnvVar{
				plainEnv("CALIBAN_STORAGE_SUBSTRATE", "remote"),
				plainEnv("CALIBAN_STORAGE_REMOTE_URL", "http://gonzalod.storage.svc:8080"),
			},
		},
		"remote mode with an endpoint and no token has no token variables": {
			state: &calibanv1alpha1.StateSpec{Mode: "remote", GonzaloEndpoint: "http://g:8080"},
			storage: []corev1.EnvVar{
				plainEnv("CALIBAN_STORAGE_SUBSTRATE", "remote"),
				plainEnv("CALIBAN_STORAGE_REMOTE_URL", "http://g:8080"),
			},
		},
		"remote mode with an endpoint and a token names the token variable and projects it from the Secret": {
			state: &calibanv1alpha1.StateSpec{Mode: "remote", GonzaloEndpoint: "http://g:8080",
				TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "gonzalo", Key: "bearer"}},
			storage: []corev1.EnvVar{
				plainEnv("CALIBAN_STORAGE_SUBSTRATE", "remote"),
				plainEnv("CALIBAN_STORAGE_REMOTE_URL", "http://g:8080"),
				plainEnv("CALIBAN_STORAGE_REMOTE_TOKEN_ENV", "GONZALO_TOKEN"),
				secretEnv("GONZALO_TOKEN", "gonzalo", "bearer"),
			},
		},
		"an endpoint and a token without a mode is remote with the token": {
			state: &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080",
				TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "gonzalo", Key: "bearer"}},
			storage: []corev1.EnvVar{
				plainEnv("CALIBAN_STORAGE_SUBSTRATE", "remote"),
				plainEnv("CALIBAN_STORAGE_REMOTE_URL", "http://g:8080"),
				plainEnv("CALIBAN_STORAGE_REMOTE_TOKEN_ENV", "GONZALO_TOKEN"),
				secretEnv("GONZALO_TOKEN", "gonzalo", "bearer"),
			},
		},
		"local mode selects the fs substrate only": {
			state:   &calibanv1alpha1.StateSpec{Mode: "local"},
			storage: []corev1.EnvVar{plainEnv("CALIBAN_STORAGE_SUBSTRATE", "fs")},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			tk := task("t", func(t *calibanv1alpha1.CalibanTask) { t.Spec.State = test.state })
			got := calibandEnv(t, tk, pin(pinProvider(calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"})), settings())
			want := append(append([]corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic")}, test.storage...), tokenEnv())
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if slices.Contains(envNames(got), "GONZALO_ENDPOINT") {
				t.Error("GONZALO_ENDPOINT is emitted; caliban never reads it")
			}
		})
	}
}

func TestCalibandEnvRouterConfig(t *testing.T) {
	tests := map[string]struct {
		task *calibanv1alpha1.CalibanTask
		want []corev1.EnvVar
	}{
		"a routerConfigRef sets the path of the mounted file": {
			task: task("t", taskRouterConfig("team-router")),
			want: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic"),
				plainEnv("CALIBAN_ROUTER_CONFIG", "/etc/caliban/router/caliban.toml"), tokenEnv()},
		},
		"a model name alone sets nothing": {
			task: task("t", taskModel("claude-opus")),
			want: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic"), tokenEnv()},
		},
		"no model sets nothing": {
			task: task("t"),
			want: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic"), tokenEnv()},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got := calibandEnv(t, test.task, pin(pinProvider(calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"})), settings())
			if diff := cmp.Diff(test.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if slices.Contains(envNames(got), "CALIBAN_ROUTER_CONFIG_REF") {
				t.Error("CALIBAN_ROUTER_CONFIG_REF is emitted")
			}
		})
	}
}

func TestCalibandEnvAgentPolicy(t *testing.T) {
	tests := map[string]struct {
		// inputs
		policy *calibanv1alpha1.AgentPolicy
		env    []calibanv1alpha1.EnvVar
		// expected: what follows CALIBAN_PROVIDER and precedes the token
		want []corev1.EnvVar
	}{
		"no policy projects nothing": {
			policy: nil, want: nil,
		},
		"an empty policy projects nothing": {
			policy: &calibanv1alpha1.AgentPolicy{}, want: nil,
		},
		"allowUnattended is the admission switch and projects nothing": {
			policy: &calibanv1alpha1.AgentPolicy{AllowUnattended: true}, want: nil,
		},
		"permissionMode is projected verbatim": {
			policy: &calibanv1alpha1.AgentPolicy{PermissionMode: calibanv1alpha1.PermissionModeAcceptEdits},
			want:   []corev1.EnvVar{plainEnv("CALIBAN_DEFAULT_PERMISSION_MODE", "acceptEdits")},
		},
		"bypassPermissions keeps its camelCase": {
			policy: &calibanv1alpha1.AgentPolicy{AllowUnattended: true, PermissionMode: calibanv1alpha1.PermissionModeBypassPermissions},
			want:   []corev1.EnvVar{plainEnv("CALIBAN_DEFAULT_PERMISSION_MODE", "bypassPermissions")},
		},
		"every boolean set true is projected as \"true\"": {
			policy: &calibanv1alpha1.AgentPolicy{AllowUnattended: true, AutoAllow: new(true), NoMCP: new(true), NoHooks: new(true),
				NoSkills: new(true), NoSubAgent: new(true), StrictKnownMarketplaces: new(true)},
			want: []corev1.EnvVar{
				plainEnv("CALIBAN_AUTO_ALLOW", "true"),
				plainEnv("CALIBAN_NO_MCP", "true"),
				plainEnv("CALIBAN_NO_HOOKS", "true"),
				plainEnv("CALIBAN_NO_SKILLS", "true"),
				plainEnv("CALIBAN_NO_SUB_AGENT", "true"),
				plainEnv("CALIBAN_STRICT_KNOWN_MARKETPLACES", "true"),
			},
		},
		"noPermissions true is projected as \"true\"": {
			policy: &calibanv1alpha1.AgentPolicy{AllowUnattended: true, NoPermissions: new(true)},
			want:   []corev1.EnvVar{plainEnv("CALIBAN_NO_PERMISSIONS", "true")},
		},
		"every boolean set false projects nothing": {
			policy: &calibanv1alpha1.AgentPolicy{AutoAllow: new(false), NoPermissions: new(false), NoMCP: new(false), NoHooks: new(false),
				NoSkills: new(false), NoSubAgent: new(false), StrictKnownMarketplaces: new(false)},
			want: nil,
		},
		"strictKnownMarketplaces false is never written as \"false\"": {
			policy: &calibanv1alpha1.AgentPolicy{StrictKnownMarketplaces: new(false)},
			want:   nil,
		},
		"an empty enabledPlugins list projects an empty value (enable none)": {
			policy: &calibanv1alpha1.AgentPolicy{EnabledPlugins: []string{}},
			want:   []corev1.EnvVar{plainEnv("CALIBAN_ENABLED_PLUGINS", "")},
		},
		"an unset enabledPlugins projects nothing (enable all)": {
			policy: &calibanv1alpha1.AgentPolicy{EnabledPlugins: nil},
			want:   nil,
		},
		"enabledPlugins is comma-joined in order": {
			policy: &calibanv1alpha1.AgentPolicy{EnabledPlugins: []string{"b", "a", "c"}},
			want:   []corev1.EnvVar{plainEnv("CALIBAN_ENABLED_PLUGINS", "b,a,c")},
		},
		"blockedMarketplaces is comma-joined": {
			policy: &calibanv1alpha1.AgentPolicy{BlockedMarketplaces: []string{"https://x.example/m", "https://y.example/m"}},
			want:   []corev1.EnvVar{plainEnv("CALIBAN_BLOCKED_MARKETPLACES", "https://x.example/m,https://y.example/m")},
		},
		"an unset blockedMarketplaces projects nothing": {
			policy: &calibanv1alpha1.AgentPolicy{BlockedMarketplaces: nil},
			want:   nil,
		},
		"parallelToolLimit is decimal": {
			policy: &calibanv1alpha1.AgentPolicy{ParallelToolLimit: new(int32(12))},
			want:   []corev1.EnvVar{plainEnv("CALIBAN_PARALLEL_TOOL_LIMIT", "12")},
		},
		"a policy value beats a workspace env entry of the same name": {
			policy: &calibanv1alpha1.AgentPolicy{NoMCP: new(true), ParallelToolLimit: new(int32(4))},
			env: []calibanv1alpha1.EnvVar{
				{Name: "CALIBAN_NO_MCP", Value: "false"},
				{Name: "KEEP", Value: "me"},
				{Name: "CALIBAN_PARALLEL_TOOL_LIMIT", Value: "64"},
			},
			want: []corev1.EnvVar{
				plainEnv("KEEP", "me"),
				plainEnv("CALIBAN_NO_MCP", "true"),
				plainEnv("CALIBAN_PARALLEL_TOOL_LIMIT", "4"),
			},
		},
		"a policy value beats a workspace env entry even when the list is empty": {
			policy: &calibanv1alpha1.AgentPolicy{EnabledPlugins: []string{}},
			env:    []calibanv1alpha1.EnvVar{{Name: "CALIBAN_ENABLED_PLUGINS", Value: "everything"}},
			want:   []corev1.EnvVar{plainEnv("CALIBAN_ENABLED_PLUGINS", "")},
		},
		"a workspace env entry naming a policy variable the policy leaves unset is dropped": {
			policy: &calibanv1alpha1.AgentPolicy{NoHooks: new(true)},
			env:    []calibanv1alpha1.EnvVar{{Name: "CALIBAN_NO_MCP", Value: "true"}},
			want:   []corev1.EnvVar{plainEnv("CALIBAN_NO_HOOKS", "true")},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			p := pin(pinProvider(calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"}), pinEnv(test.env...))
			p.AgentPolicy = test.policy
			got := calibandEnv(t, task("t"), p, settings())
			want := append(append([]corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic")}, test.want...), tokenEnv())
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			for _, e := range got {
				if e.Value == "false" && strings.HasPrefix(e.Name, "CALIBAN_") && !slices.ContainsFunc(test.env, func(w calibanv1alpha1.EnvVar) bool { return w.Name == e.Name }) {
					t.Errorf("%s=false is emitted by the policy", e.Name)
				}
			}
		})
	}
}

func TestCalibandEnvWorkspaceEnv(t *testing.T) {
	tests := map[string]struct {
		// inputs
		task *calibanv1alpha1.CalibanTask
		env  []calibanv1alpha1.EnvVar
		// expected: the whole list
		want []corev1.EnvVar
	}{
		"workspace env follows the operator's variables in its own order": {
			task: task("t"),
			env:  []calibanv1alpha1.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}, {Name: "EMPTY"}},
			want: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic"), secretEnv("ANTHROPIC_API_KEY", "anthropic-key", "api-key"),
				plainEnv("B", "2"), plainEnv("A", "1"), plainEnv("EMPTY", ""), tokenEnv()},
		},
		"workspace env never shadows a variable the operator owns": {
			task: task("t", taskRouterConfig("r"), taskState(calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g",
				TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "gz", Key: "t"}})),
			env: []calibanv1alpha1.EnvVar{
				{Name: "CALIBAN_DAEMON_TOKEN", Value: "literal-token"},
				{Name: "CALIBAN_PROVIDER", Value: "openai"},
				{Name: "ANTHROPIC_API_KEY", Value: "sk-literal"},
				{Name: "ANTHROPIC_BASE_URL", Value: "https://evil"},
				{Name: "CALIBAN_ROUTER_CONFIG", Value: "/tmp/x"},
				{Name: "CALIBAN_STORAGE_SUBSTRATE", Value: "fs"},
				{Name: "CALIBAN_STORAGE_REMOTE_URL", Value: "http://evil"},
				{Name: "CALIBAN_STORAGE_REMOTE_TOKEN_ENV", Value: "X"},
				{Name: "GONZALO_TOKEN", Value: "literal"},
				{Name: "KEPT", Value: "yes"},
			},
			want: []corev1.EnvVar{
				plainEnv("CALIBAN_PROVIDER", "anthropic"),
				secretEnv("ANTHROPIC_API_KEY", "anthropic-key", "api-key"),
				plainEnv("CALIBAN_STORAGE_SUBSTRATE", "remote"),
				plainEnv("CALIBAN_STORAGE_REMOTE_URL", "http://g"),
				plainEnv("CALIBAN_STORAGE_REMOTE_TOKEN_ENV", "GONZALO_TOKEN"),
				secretEnv("GONZALO_TOKEN", "gz", "t"),
				plainEnv("CALIBAN_ROUTER_CONFIG", "/etc/caliban/router/caliban.toml"),
				plainEnv("KEPT", "yes"),
				tokenEnv(),
			},
		},
		"operator-owned names stay reserved when the operator does not set them in this pod": {
			// No storage, no router config, no base URL: the names are still
			// the operator's, so a workspace cannot set them either.
			task: task("t"),
			env: []calibanv1alpha1.EnvVar{
				{Name: "CALIBAN_ROUTER_CONFIG", Value: "/tmp/x"},
				{Name: "CALIBAN_STORAGE_SUBSTRATE", Value: "fs"},
				{Name: "GONZALO_TOKEN", Value: "literal"},
				{Name: "ANTHROPIC_BASE_URL", Value: "https://evil"},
			},
			want: []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic"), secretEnv("ANTHROPIC_API_KEY", "anthropic-key", "api-key"), tokenEnv()},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got := calibandEnv(t, test.task, pin(pinEnv(test.env...)), settings())
			if diff := cmp.Diff(test.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

// Only the typed agentPolicy field passes the posture gate, so a pin's env
// entry never sets a policy variable, even when the policy leaves it unset
// (a pin from before the Workspace rules; PinnedEnvProblem fails such a
// task before anything is rendered, this is the last line).
func TestCalibandEnvNeverRendersAnAgentPolicyVariableFromEnv(t *testing.T) {
	for _, v := range wantAgentPolicyVariables {
		for setting, policy := range map[string]*calibanv1alpha1.AgentPolicy{
			"no agentPolicy":                      nil,
			"an agentPolicy that only allows it":  {AllowUnattended: true},
			"an agentPolicy setting other fields": {NoHooks: new(v.Name == "CALIBAN_NO_MCP"), NoMCP: new(v.Name != "CALIBAN_NO_MCP")},
		} {
			t.Run(v.Name+" from env is not rendered under "+setting, func(t *testing.T) {
				p := pin(pinProvider(calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"}),
					pinEnv(calibanv1alpha1.EnvVar{Name: "KEEP", Value: "me"}, calibanv1alpha1.EnvVar{Name: v.Name, Value: "true"}))
				p.AgentPolicy = policy
				got := calibandEnv(t, task("t"), p, settings())
				want := append([]corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic"), plainEnv("KEEP", "me")}, policyEnv(t, policy)...)
				want = append(want, tokenEnv())
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("env (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// A pin from before the Workspace rules may carry a variable that loads
// code; PinnedEnvProblem fails such a task before anything is rendered,
// and this is the last line: the entry is never rendered.
func TestCalibandEnvNeverRendersALoaderVariableFromEnv(t *testing.T) {
	for _, name := range wantLoaderEnv {
		t.Run(name+" from env is not rendered", func(t *testing.T) {
			p := pin(pinProvider(calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"}),
				pinEnv(calibanv1alpha1.EnvVar{Name: "KEEP", Value: "me"}, calibanv1alpha1.EnvVar{Name: name, Value: "/work/app/x"}))
			got := calibandEnv(t, task("t"), p, settings())
			want := []corev1.EnvVar{plainEnv("CALIBAN_PROVIDER", "anthropic"), plainEnv("KEEP", "me"), tokenEnv()}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

// policyEnv is what the policy alone projects, rendered with no env.
func policyEnv(t *testing.T, policy *calibanv1alpha1.AgentPolicy) []corev1.EnvVar {
	t.Helper()
	p := pin(pinProvider(calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"}))
	p.AgentPolicy = policy
	env := calibandEnv(t, task("t"), p, settings())
	return env[1 : len(env)-1]
}

func TestCalibandEnvDaemonToken(t *testing.T) {
	tests := map[string]struct {
		settings config.AgentSettings
		want     corev1.EnvVar
	}{
		"the default token Secret and key": {
			settings: settings(),
			want:     secretEnv("CALIBAN_DAEMON_TOKEN", "caliban-session-plane-token", "token"),
		},
		"the Secret and key named by CALIBAN_SESSION_TOKEN_SECRET/KEY": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_SESSION_TOKEN_SECRET": "session-bearer", "CALIBAN_SESSION_TOKEN_KEY": "bearer.txt"}),
			want:     secretEnv("CALIBAN_DAEMON_TOKEN", "session-bearer", "bearer.txt"),
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			p := everyFeaturePin()
			// A workspace trying to set the token literally changes nothing.
			p.Env = append(p.Env, calibanv1alpha1.EnvVar{Name: "CALIBAN_DAEMON_TOKEN", Value: "s3cr3t"})
			c := calibandOf(t, buildSandbox(t, everyFeatureTask("t"), p, test.settings).Spec.PodTemplate.Spec)

			var tokens []corev1.EnvVar
			for _, e := range c.Env {
				if e.Name == "CALIBAN_DAEMON_TOKEN" {
					tokens = append(tokens, e)
				}
			}
			if diff := cmp.Diff([]corev1.EnvVar{test.want}, tokens); diff != "" {
				t.Errorf("CALIBAN_DAEMON_TOKEN (-want +got):\n%s", diff)
			}
			if last := c.Env[len(c.Env)-1]; last.Name != "CALIBAN_DAEMON_TOKEN" {
				t.Errorf("last env var = %s, want the daemon token", last.Name)
			}
			for _, a := range c.Args {
				if strings.HasPrefix(a, "--token") || strings.Contains(a, "s3cr3t") {
					t.Errorf("args carry the token: %q", c.Args)
				}
			}
			for _, e := range c.Env {
				if e.Value == "s3cr3t" {
					t.Errorf("%s carries the literal token", e.Name)
				}
			}
		})
	}
}

// Every Secret reaches the pod as a non-optional secretKeyRef and nothing
// else: a literal value never sits beside a reference.
func TestCalibandEnvSecretsAreReferencesOnly(t *testing.T) {
	for _, e := range calibandEnv(t, everyFeatureTask("t"), everyFeaturePin(), settings()) {
		if e.ValueFrom == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref == nil || e.Value != "" || e.ValueFrom.ConfigMapKeyRef != nil || e.ValueFrom.FieldRef != nil || e.ValueFrom.ResourceFieldRef != nil {
			t.Errorf("%s = %+v, want a secretKeyRef only", e.Name, e)
			continue
		}
		if ref.Optional == nil || *ref.Optional {
			t.Errorf("%s: optional = %v, want false", e.Name, ref.Optional)
		}
	}
	secretNames := map[string]bool{}
	for _, e := range calibandEnv(t, everyFeatureTask("t"), everyFeaturePin(), settings()) {
		if e.ValueFrom != nil {
			secretNames[e.Name] = true
		}
	}
	want := map[string]bool{"OPENAI_API_KEY": true, "GONZALO_TOKEN": true, "CALIBAN_DAEMON_TOKEN": true}
	if diff := cmp.Diff(want, secretNames); diff != "" {
		t.Errorf("variables from Secrets (-want +got):\n%s", diff)
	}
}

// envInputs is a spread of inputs: every provider kind family, every storage
// row, with and without router config, policies from none to all, and
// workspace env that repeats the operator's names, the policy's names and
// itself.
func envInputs() map[string]struct {
	task *calibanv1alpha1.CalibanTask
	pin  *calibanv1alpha1.ResolvedWorkspace
} {
	kinds := []string{"anthropic", "openai", "google", "gemini", "azure", "azure_openai", "bedrock", "Vertex.AI"}
	states := map[string]*calibanv1alpha1.StateSpec{
		"no state": nil,
		"remote":   {GonzaloEndpoint: "http://g", TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "s", Key: "k"}},
		"endpoint": {GonzaloEndpoint: "http://g"},
		"local":    {Mode: "local"},
	}
	policies := map[string]*calibanv1alpha1.AgentPolicy{
		"no policy":    nil,
		"whole policy": everyFeaturePin().AgentPolicy,
		"false policy": {NoMCP: new(false), StrictKnownMarketplaces: new(false), EnabledPlugins: []string{}},
	}
	noisyEnv := func(kind string) []calibanv1alpha1.EnvVar {
		base, key := ProviderEnv(kind)
		return []calibanv1alpha1.EnvVar{
			{Name: "A", Value: "1"}, {Name: "A", Value: "2"},
			{Name: base, Value: "x"}, {Name: key, Value: "x"},
			{Name: "CALIBAN_PROVIDER", Value: "x"}, {Name: "CALIBAN_DAEMON_TOKEN", Value: "x"},
			{Name: "CALIBAN_ROUTER_CONFIG", Value: "x"}, {Name: "GONZALO_TOKEN", Value: "x"},
			{Name: "CALIBAN_STORAGE_SUBSTRATE", Value: "x"}, {Name: "CALIBAN_STORAGE_REMOTE_URL", Value: "x"},
			{Name: "CALIBAN_STORAGE_REMOTE_TOKEN_ENV", Value: "x"},
			{Name: "CALIBAN_NO_MCP", Value: "x"}, {Name: "CALIBAN_ENABLED_PLUGINS", Value: "x"},
			{Name: "CALIBAN_PARALLEL_TOOL_LIMIT", Value: "x"}, {Name: "CALIBAN_NO_MCP", Value: "y"},
		}
	}
	out := map[string]struct {
		task *calibanv1alpha1.CalibanTask
		pin  *calibanv1alpha1.ResolvedWorkspace
	}{}
	for _, kind := range kinds {
		for stateName, st := range states {
			for policyName, pol := range policies {
				for _, router := range []string{"", "router"} {
					for _, withKey := range []bool{false, true} {
						p := pin(pinProvider(calibanv1alpha1.Provider{Name: "p", Kind: kind, BaseURL: "https://u"}), pinEnv(noisyEnv(kind)...))
						if withKey {
							p.Provider.CredentialsRef = &calibanv1alpha1.SecretKeyRef{SecretName: "s", Key: "k"}
						}
						if pol != nil {
							p.AgentPolicy = pol.DeepCopy()
						}
						tk := task("t", func(t *calibanv1alpha1.CalibanTask) { t.Spec.State = st.DeepCopy() })
						if router != "" {
							tk = taskFrom(tk, taskRouterConfig(router))
						}
						name := fmt.Sprintf("%s, %s, %s, router=%q, key=%v", kind, stateName, policyName, router, withKey)
						out[name] = struct {
							task *calibanv1alpha1.CalibanTask
							pin  *calibanv1alpha1.ResolvedWorkspace
						}{tk, p}
					}
				}
			}
		}
	}
	return out
}

// Server-side apply rejects a list-map with a repeated key, so a repeated
// name would make the Sandbox unappliable.
func TestCalibandEnvNeverRepeatsAName(t *testing.T) {
	for name, in := range envInputs() {
		env := calibandEnv(t, in.task, in.pin, settings())
		seen := map[string]int{}
		for _, e := range env {
			seen[e.Name]++
		}
		for n, count := range seen {
			if count > 1 {
				t.Errorf("%s: %s is emitted %d times", name, n, count)
			}
		}
		if slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == "" }) {
			t.Errorf("%s: an unnamed variable is emitted", name)
		}
	}
}

// docs/caliband-contract.md#names-the-operator-never-sets: no dead name
// is ever emitted, whatever the operator's inputs.
func TestCalibandEnvNeverEmitsADeadName(t *testing.T) {
	t.Run("from any of the operator's own projections", func(t *testing.T) {
		for name, in := range envInputs() {
			for _, e := range calibandEnv(t, in.task, in.pin, settings()) {
				if slices.Contains(DeadEnvNames, e.Name) {
					t.Errorf("%s: dead name %s is emitted", name, e.Name)
				}
			}
		}
	})
	t.Run("the list holds every name the operator never sets", func(t *testing.T) {
		want := []string{"GONZALO_ENDPOINT", "CALIBAN_ROUTER_CONFIG_REF", "CALIBAN_PROVIDER_BASE_URL", "CALIBAN_API_KEY",
			"CALIBAN_MODEL", "CALIBAND_LISTEN", "CALIBAN_WORKSPACE_ROOT", "CALIBAN_WORKSPACE_SOURCES",
			"CALIBAN_CONTROL_TLS_CA", "CALIBAN_CONTROL_TLS_SERVER_NAME"}
		for _, n := range want {
			if !slices.Contains(DeadEnvNames, n) {
				t.Errorf("DeadEnvNames lacks %s", n)
			}
		}
	})
	// A pin is copied from a Workspace's env, which validation does not
	// screen for these names; the builder is the last line.
	for _, dead := range DeadEnvNames {
		t.Run("a workspace env entry named "+dead+" is not emitted", func(t *testing.T) {
			p := everyFeaturePin()
			p.Env = append(p.Env, calibanv1alpha1.EnvVar{Name: dead, Value: "x"})
			c := calibandOf(t, buildSandbox(t, everyFeatureTask("t"), p, settings()).Spec.PodTemplate.Spec)
			if slices.Contains(envNames(c.Env), dead) {
				t.Errorf("%s is emitted, but docs/caliband-contract.md#names-the-operator-never-sets forbids it", dead)
			}
		})
	}
}

func TestCalibandEnvIsDeterministic(t *testing.T) {
	for name, in := range envInputs() {
		first := calibandEnv(t, in.task, in.pin, settings())
		if diff := cmp.Diff(first, calibandEnv(t, in.task, in.pin, settings())); diff != "" {
			t.Errorf("%s: a second call differs (-first +second):\n%s", name, diff)
		}
	}
}
