// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"slices"
	"strings"
)

// caliband's command line (docs/caliband-contract.md#command-line). The
// operator passes each flag and its value as two argv elements, in the
// container's args (the image's ENTRYPOINT is caliband and its CMD is --help).
// The bearer token is deliberately absent: it travels only as EnvDaemonToken
// from a Secret, never in argv where ps would show it.
const (
	FlagWorkspaceRoot = "--workspace-root"
	FlagListen        = "--listen"
	FlagAdvertiseHost = "--advertise-host"
	FlagAgentPortBase = "--agent-port-base"
	FlagTLSCert       = "--tls-cert"
	FlagTLSKey        = "--tls-key"
	FlagTLSCA         = "--tls-ca"
	FlagTLSServerName = "--tls-server-name"
)

// ListenHost is the host of --listen: every address, so the Service (and
// the NetworkPolicy) decide who can reach the port.
const ListenHost = "0.0.0.0"

// The session-plane TLS Secret (CALIBAN_SESSION_TLS_SECRET) is mounted at
// TLSMountDir; its keys are the file names. --tls-ca must be passed: caliband
// forwards it to workers so they can verify the control listener.
const (
	TLSMountDir = "/etc/caliband/tls"
	TLSCertFile = "tls.crt"
	TLSKeyFile  = "tls.key"
	TLSCAFile   = "ca.crt"
	TLSCertPath = TLSMountDir + "/" + TLSCertFile
	TLSKeyPath  = TLSMountDir + "/" + TLSKeyFile
	TLSCAPath   = TLSMountDir + "/" + TLSCAFile
)

// Variables the operator sets in the agent pod
// (docs/caliband-contract.md#environment).
const (
	// EnvDaemonToken carries caliband's bearer token, always from a
	// secretKeyRef, never as a literal value.
	EnvDaemonToken = "CALIBAN_DAEMON_TOKEN"

	// EnvRouterConfig is a path to a file, not inline config: caliban
	// 0.15.0 and caliban's own --config both read it as a path.
	EnvRouterConfig      = "CALIBAN_ROUTER_CONFIG"
	RouterConfigMountDir = "/etc/caliban/router"
	RouterConfigKey      = "caliban.toml"
	RouterConfigPath     = RouterConfigMountDir + "/" + RouterConfigKey

	// EnvProvider is the provider kind as a plain value. caliban does not
	// select a provider by it; it is only an input to a user apiKeyHelper.
	EnvProvider = "CALIBAN_PROVIDER"

	EnvStorageSubstrate = "CALIBAN_STORAGE_SUBSTRATE"
	EnvStorageRemoteURL = "CALIBAN_STORAGE_REMOTE_URL"
	// EnvStorageRemoteTokenEnv holds the name of the variable that holds
	// the token (EnvGonzaloToken), not the token.
	EnvStorageRemoteTokenEnv = "CALIBAN_STORAGE_REMOTE_TOKEN_ENV"
	EnvGonzaloToken          = "GONZALO_TOKEN"
	StorageSubstrateRemote   = "remote"
	StorageSubstrateFS       = "fs"
)

// Workspace.spec.agentPolicy projections (docs/crd-reference.md#agentpolicy,
// docs/caliband-contract.md#agent-policy-variables). Booleans are
// written only as "true" and omitted otherwise: caliban counts any env-sourced
// value as explicit, so even "false" can trip its conflicts, and
// EnvStrictKnownMarketplaces reads any non-blank value as an allow-list that
// blocks every real marketplace.
const (
	EnvDefaultPermissionMode   = "CALIBAN_DEFAULT_PERMISSION_MODE"
	EnvAutoAllow               = "CALIBAN_AUTO_ALLOW"
	EnvNoPermissions           = "CALIBAN_NO_PERMISSIONS"
	EnvNoMCP                   = "CALIBAN_NO_MCP"
	EnvNoHooks                 = "CALIBAN_NO_HOOKS"
	EnvNoSkills                = "CALIBAN_NO_SKILLS"
	EnvNoSubAgent              = "CALIBAN_NO_SUB_AGENT"
	EnvStrictKnownMarketplaces = "CALIBAN_STRICT_KNOWN_MARKETPLACES"
	// EnvEnabledPlugins is comma-joined and projected even when the list
	// is empty: set-but-empty enables no plugin, unset enables all.
	EnvEnabledPlugins        = "CALIBAN_ENABLED_PLUGINS"
	EnvBlockedMarketplaces   = "CALIBAN_BLOCKED_MARKETPLACES"
	EnvParallelToolLimit     = "CALIBAN_PARALLEL_TOOL_LIMIT"
	AgentPolicyTrue          = "true"
	AgentPolicyListSeparator = ","
)

// AgentPolicyVariable is a variable the agent policy projects and the
// agentPolicy field it is projected from, as a Workspace spells it.
type AgentPolicyVariable struct {
	Name  string
	Field string
}

// AgentPolicyVariables is every variable the agent policy projects, in the
// order CalibandEnv writes them. None may come from a Workspace's env:
// only the typed field passes the posture gate (a CALIBAN_AUTO_ALLOW=true
// entry would grant auto-allow without agentPolicy.allowUnattended), so
// the schema refuses them (pkg/apis, WorkspaceSpec.Env, a literal copy of
// this list), Workspace validation refuses them, CalibandEnv never renders
// them from env and PinnedEnvProblem fails a pin that carries one.
var AgentPolicyVariables = []AgentPolicyVariable{
	{EnvDefaultPermissionMode, "agentPolicy.permissionMode"},
	{EnvAutoAllow, "agentPolicy.autoAllow"},
	{EnvNoPermissions, "agentPolicy.noPermissions"},
	{EnvNoMCP, "agentPolicy.noMcp"},
	{EnvNoHooks, "agentPolicy.noHooks"},
	{EnvNoSkills, "agentPolicy.noSkills"},
	{EnvNoSubAgent, "agentPolicy.noSubAgent"},
	{EnvStrictKnownMarketplaces, "agentPolicy.strictKnownMarketplaces"},
	{EnvEnabledPlugins, "agentPolicy.enabledPlugins"},
	{EnvBlockedMarketplaces, "agentPolicy.blockedMarketplaces"},
	{EnvParallelToolLimit, "agentPolicy.parallelToolLimit"},
}

// AgentPolicyField returns the agentPolicy field that projects the
// variable name, or "" when the agent policy projects no variable of that
// name. Names compare exactly, as env names do.
func AgentPolicyField(name string) string {
	for _, v := range AgentPolicyVariables {
		if v.Name == name {
			return v.Field
		}
	}
	return ""
}

// DeadEnvNames lists variables the operator must never emit into an agent pod
// (docs/caliband-contract.md#names-the-operator-never-sets). Some were
// bugs of the original operator that caliban never reads;
// CALIBAN_CONTROL_TLS_CA and CALIBAN_CONTROL_TLS_SERVER_NAME are caliband's
// own outputs to its workers, and publishing them in the pod env would shadow
// what argv already says; so are the WorkerEnvNames at the end.
// CALIBAN_WORKSPACE_ROOT is the operator's own setting, not caliband's.
var DeadEnvNames = append([]string{
	"GONZALO_ENDPOINT",
	"CALIBAN_ROUTER_CONFIG_REF",
	"CALIBAN_PROVIDER_BASE_URL",
	"CALIBAN_API_KEY",
	"CALIBAN_MODEL",
	"CALIBAND_LISTEN",
	"CALIBAN_WORKSPACE_ROOT",
	"CALIBAN_WORKSPACE_SOURCES",
	"CALIBAN_CONTROL_TLS_CA",
	"CALIBAN_CONTROL_TLS_SERVER_NAME",
}, WorkerEnvNames...)

// WorkerEnvNames are the variables caliband sets for each worker it spawns.
// A pod-wide value would stand in for every worker's own; the Workspace
// schema refuses them too (pkg/apis, WorkspaceSpec.Env).
var WorkerEnvNames = []string{
	"CALIBAN_AGENT_TLS_CERT",
	"CALIBAN_AGENT_TLS_KEY",
	"CALIBAN_AGENT_TOKEN",
	"CALIBAN_CONTROL_ENDPOINT",
	"CALIBAN_CONTROL_TOKEN",
}

// ProviderEnv returns the base-URL and API-key variable names for a
// Workspace provider kind. anthropic, openai and google/gemini take caliban's
// own names (ProviderKind in caliban-contract); azure, azure-openai and
// azure_openai map to AZURE_OPENAI_*. Those kinds match case-insensitively
// after trimming. Any other kind is trimmed, uppercased, and every
// character other than A-Z, 0-9 and '_' becomes '_' before the suffixes
// _BASE_URL and _API_KEY ("my-llm.v2" gives MY_LLM_V2_BASE_URL).
func ProviderEnv(kind string) (baseURL, apiKey string) {
	prefix := providerEnvPrefix(kind)
	return prefix + "_BASE_URL", prefix + "_API_KEY"
}

func providerEnvPrefix(kind string) string {
	kind = strings.TrimSpace(kind)
	switch strings.ToLower(kind) {
	case "anthropic":
		return "ANTHROPIC"
	case "openai":
		return "OPENAI"
	case "google", "gemini":
		return "GEMINI"
	case "azure", "azure-openai", "azure_openai":
		return "AZURE_OPENAI"
	}
	var b strings.Builder
	for _, r := range kind {
		switch {
		case r >= 'a' && r <= 'z':
			r -= 'a' - 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
		default:
			r = '_'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// OperatorEnvNames are the names the operator may set in every pod,
// whatever the providers. The Workspace schema refuses them in env too
// (pkg/apis, WorkspaceSpec.Env).
var OperatorEnvNames = []string{
	EnvDaemonToken,
	EnvProvider,
	EnvRouterConfig,
	EnvStorageSubstrate,
	EnvStorageRemoteURL,
	EnvStorageRemoteTokenEnv,
	EnvGonzaloToken,
}

// OperatorOwnedEnv reports whether a Workspace env name collides with a
// variable the operator sets in the agent pod itself for these provider
// kinds: the daemon token, every listed provider's base-URL and API-key
// names, the storage and router variables, CALIBAN_PROVIDER and
// GONZALO_TOKEN. Names compare exactly (env names are case-sensitive).
// agentPolicy variables are not owned in this sense: they are reserved for
// another reason, with another answer (AgentPolicyField).
func OperatorOwnedEnv(name string, providerKinds []string) bool {
	if slices.Contains(OperatorEnvNames, name) {
		return true
	}
	for _, kind := range providerKinds {
		if baseURL, apiKey := ProviderEnv(kind); name == baseURL || name == apiKey {
			return true
		}
	}
	return false
}

// What a Workspace's env may not do, or may do only as someone who could
// read its provider keys (docs/adr/0030-workspace-env-is-checked-as-what-it-is.md).
// caliband, the agents it spawns and every program they run inherit the
// pod's environment, so a variable is what the programs reading it make
// of it, not a setting of caliban's.

// LoaderEnvNames are variables that make caliband, or a program an agent
// or caliband starts (a shell, git, node, python, perl, ruby, a JVM, the
// dynamic linker, OpenSSL), load or run code of the writer's choosing
// before anyone approved anything: preloaded libraries and modules,
// startup files, search paths for code, the programs a tool runs on its
// own (an editor, a pager, an askpass, an ssh command), the directories
// caliban reads its user settings, hooks and plugins from, and which
// program a command name is. No Workspace may set one: the schema refuses
// them (pkg/apis, WorkspaceSpec.Env, a literal copy of this list and of
// LoaderEnvPrefixes), Workspace validation refuses them, CalibandEnv never
// renders one from a pin's env and PinnedEnvProblem fails a pin that
// carries one. Names compare exactly, as the programs read them. The
// schema's rule looks a name up in a map, not a list, and tests the
// prefixes in a rule of its own: a map lookup costs the same whatever its
// size, and the env list is unbounded, so a list this long, or one rule
// for both, would exceed the apiserver's estimated cost budget.
var LoaderEnvNames = []string{
	// The C library and OpenSSL.
	"GCONV_PATH", "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES",
	// caliban itself: where it reads user settings (hooks, an API-key
	// helper), plugins, and a program it runs for telemetry headers.
	"HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "CALIBAN_OTEL_HEADERS_HELPER",
	// Which program a name runs, and the shells' startup.
	"PATH", "SHELL", "BASH_ENV", "ENV", "ZDOTDIR", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
	// Programs that tools start by themselves.
	"EDITOR", "VISUAL", "PAGER", "MANPAGER", "LESSOPEN", "LESSCLOSE", "SSH_ASKPASS",
	// node.
	"NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE",
	// python (PYTHONWARNINGS imports the module a filter's category names).
	"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONBREAKPOINT", "PYTHONWARNINGS", "PYTHONPYCACHEPREFIX",
	// perl and ruby.
	"PERL5LIB", "PERLLIB", "PERL5OPT", "PERL5DB", "RUBYLIB", "RUBYOPT",
	// The JVM.
	"JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "CLASSPATH",
	// git: the programs it runs, and the repository and templates it
	// takes hooks and configuration from (GIT_CONFIG* and GIT_SSH* are
	// prefixes below).
	"GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "GIT_ASKPASS", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER",
	"GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "GIT_ALLOW_PROTOCOL", "GIT_DIR", "GIT_COMMON_DIR",
	"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
}

// LoaderEnvPrefixes start families of LoaderEnvNames: the dynamic
// linker's LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT and the rest; bash's
// exported functions (BASH_FUNC_<name>%%), which replace a command in
// every script; git's configuration from the environment (GIT_CONFIG,
// GIT_CONFIG_GLOBAL, GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>,
// GIT_CONFIG_PARAMETERS, ...), which can name a program git runs; its
// ssh command (GIT_SSH, GIT_SSH_COMMAND); and npm's configuration
// (npm_config_node_options, npm_config_script_shell, ...), which npm
// reads in any case.
var LoaderEnvPrefixes = []string{"LD_", "BASH_FUNC_", "GIT_CONFIG", "GIT_SSH", "npm_config_", "NPM_CONFIG_"}

// LoaderEnv reports whether name is a LoaderEnvNames variable or starts
// one of the LoaderEnvPrefixes. npm's prefix matches in any case, as npm
// reads it; the schema refuses its two usual spellings, validation every
// one.
func LoaderEnv(name string) bool {
	if slices.Contains(LoaderEnvNames, name) || strings.HasPrefix(strings.ToLower(name), "npm_config_") {
		return true
	}
	for _, prefix := range LoaderEnvPrefixes {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// RepointingEnvNames, in lower case, are variables that decide where the
// pod's requests go, or whom their TLS trusts, so that a Workspace setting
// one sends its provider keys to a host of the writer's choosing as a
// provider's baseUrl does: name resolution, the CA bundles and switches
// of caliban's and its tools' TLS stacks (and a file of TLS session keys),
// node's switch to honour the proxy variables, and provider endpoints that
// caliban and the providers' SDKs read under a name RepointingEnvSuffixes
// does not catch (caliban builds Azure's host from AZURE_OPENAI_RESOURCE).
// A Workspace may set one only as someone who may get every Secret its
// providers name: the admission component's caliban-secret-refs policy
// (manifests/admission/secret-refs-policy.yaml, a literal copy of this
// list and of the suffixes) checks that when an entry is added or changed.
// Without the component, or in a Workspace written before it, they are
// what RBAC on Workspaces lets anyone write, as a baseUrl is.
var RepointingEnvNames = []string{
	"hostaliases", "localdomain", "res_options",
	"ssl_cert_file", "ssl_cert_dir", "sslkeylogfile",
	"node_extra_ca_certs", "node_tls_reject_unauthorized", "node_use_system_ca", "node_use_env_proxy",
	"requests_ca_bundle", "curl_ca_bundle", "httplib2_ca_certs", "pythonhttpsverify",
	"git_ssl_cainfo", "git_ssl_capath", "git_ssl_no_verify",
	"aws_ca_bundle", "grpc_default_ssl_roots_file_path", "deno_cert", "pip_cert", "cargo_http_cainfo",
	"azure_openai_endpoint", "azure_openai_resource", "openai_api_host",
}

// RepointingEnvSuffixes, in lower case, end the rest of the family: every
// proxy variable (http_proxy, HTTPS_PROXY, ALL_PROXY, NO_PROXY; Python
// takes <scheme>_proxy for any scheme, in any case), and the base-URL
// spellings of every provider kind (ProviderEnv's <PREFIX>_BASE_URL, which
// caliban reads, and the SDKs' OPENAI_API_BASE, ANTHROPIC_API_URL, ...).
var RepointingEnvSuffixes = []string{"_proxy", "_base_url", "_api_base", "_api_url"}

// RepointingEnv reports whether name, in any case, is a RepointingEnvNames
// variable or ends in one of the RepointingEnvSuffixes.
func RepointingEnv(name string) bool {
	lower := strings.ToLower(name)
	if slices.Contains(RepointingEnvNames, lower) {
		return true
	}
	for _, suffix := range RepointingEnvSuffixes {
		if strings.HasSuffix(lower, suffix) {
			return true
		}
	}
	return false
}
