// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// The launch contract is a set of names caliband parses; a typo compiles and
// then fails only inside a pod. These tests restate the names from
// docs/caliband-contract.md literally: a changed constant fails loudly.
func TestContractNamesMatchCaliband(t *testing.T) {
	tests := map[string]struct {
		got, want string
	}{
		"the workspace root flag":       {FlagWorkspaceRoot, "--workspace-root"},
		"the listen flag":               {FlagListen, "--listen"},
		"the advertise host flag":       {FlagAdvertiseHost, "--advertise-host"},
		"the agent port base flag":      {FlagAgentPortBase, "--agent-port-base"},
		"the TLS cert flag":             {FlagTLSCert, "--tls-cert"},
		"the TLS key flag":              {FlagTLSKey, "--tls-key"},
		"the TLS CA flag":               {FlagTLSCA, "--tls-ca"},
		"the TLS server name flag":      {FlagTLSServerName, "--tls-server-name"},
		"the listen host":               {ListenHost, "0.0.0.0"},
		"the TLS mount":                 {TLSMountDir, "/etc/caliband/tls"},
		"the cert path":                 {TLSCertPath, "/etc/caliband/tls/tls.crt"},
		"the key path":                  {TLSKeyPath, "/etc/caliband/tls/tls.key"},
		"the CA path":                   {TLSCAPath, "/etc/caliband/tls/ca.crt"},
		"the cert file, a Secret key":   {TLSCertFile, "tls.crt"},
		"the key file, a Secret key":    {TLSKeyFile, "tls.key"},
		"the CA file, a Secret key":     {TLSCAFile, "ca.crt"},
		"the daemon token":              {EnvDaemonToken, "CALIBAN_DAEMON_TOKEN"},
		"the router config variable":    {EnvRouterConfig, "CALIBAN_ROUTER_CONFIG"},
		"the router config is a path":   {RouterConfigPath, "/etc/caliban/router/caliban.toml"},
		"the router config mount":       {RouterConfigMountDir, "/etc/caliban/router"},
		"the router ConfigMap key":      {RouterConfigKey, "caliban.toml"},
		"the provider variable":         {EnvProvider, "CALIBAN_PROVIDER"},
		"the storage substrate":         {EnvStorageSubstrate, "CALIBAN_STORAGE_SUBSTRATE"},
		"the remote storage URL":        {EnvStorageRemoteURL, "CALIBAN_STORAGE_REMOTE_URL"},
		"the remote token's variable":   {EnvStorageRemoteTokenEnv, "CALIBAN_STORAGE_REMOTE_TOKEN_ENV"},
		"the gonzalo token":             {EnvGonzaloToken, "GONZALO_TOKEN"},
		"the remote substrate":          {StorageSubstrateRemote, "remote"},
		"the filesystem substrate":      {StorageSubstrateFS, "fs"},
		"the permission mode":           {EnvDefaultPermissionMode, "CALIBAN_DEFAULT_PERMISSION_MODE"},
		"auto-allow":                    {EnvAutoAllow, "CALIBAN_AUTO_ALLOW"},
		"no permissions":                {EnvNoPermissions, "CALIBAN_NO_PERMISSIONS"},
		"no MCP":                        {EnvNoMCP, "CALIBAN_NO_MCP"},
		"no hooks":                      {EnvNoHooks, "CALIBAN_NO_HOOKS"},
		"no skills":                     {EnvNoSkills, "CALIBAN_NO_SKILLS"},
		"no sub-agent":                  {EnvNoSubAgent, "CALIBAN_NO_SUB_AGENT"},
		"strict known marketplaces":     {EnvStrictKnownMarketplaces, "CALIBAN_STRICT_KNOWN_MARKETPLACES"},
		"enabled plugins":               {EnvEnabledPlugins, "CALIBAN_ENABLED_PLUGINS"},
		"blocked marketplaces":          {EnvBlockedMarketplaces, "CALIBAN_BLOCKED_MARKETPLACES"},
		"the parallel tool limit":       {EnvParallelToolLimit, "CALIBAN_PARALLEL_TOOL_LIMIT"},
		"a policy boolean is only true": {AgentPolicyTrue, "true"},
		"policy lists are comma-joined": {AgentPolicyListSeparator, ","},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if test.got != test.want {
				t.Errorf("got %q, want %q", test.got, test.want)
			}
		})
	}
}

func TestProviderEnv(t *testing.T) {
	tests := map[string]struct {
		// input
		kind string
		// expected names
		baseURL, apiKey string
	}{
		"anthropic uses caliban's names":               {"anthropic", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"},
		"openai uses caliban's names":                  {"openai", "OPENAI_BASE_URL", "OPENAI_API_KEY"},
		"google uses caliban's Gemini names":           {"google", "GEMINI_BASE_URL", "GEMINI_API_KEY"},
		"gemini is google":                             {"gemini", "GEMINI_BASE_URL", "GEMINI_API_KEY"},
		"azure maps to Azure OpenAI":                   {"azure", "AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY"},
		"azure-openai maps to Azure OpenAI":            {"azure-openai", "AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY"},
		"azure_openai maps to Azure OpenAI":            {"azure_openai", "AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY"},
		"known kinds match whatever their case":        {"OpenAI", "OPENAI_BASE_URL", "OPENAI_API_KEY"},
		"known kinds match upper-case":                 {"GOOGLE", "GEMINI_BASE_URL", "GEMINI_API_KEY"},
		"known kinds match mixed-case Azure":           {"Azure-OpenAI", "AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY"},
		"known kinds match after trimming":             {"  anthropic\t", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"},
		"another kind is upper-cased":                  {"bedrock", "BEDROCK_BASE_URL", "BEDROCK_API_KEY"},
		"another kind in mixed case is upper-cased":    {"Bedrock", "BEDROCK_BASE_URL", "BEDROCK_API_KEY"},
		"dashes and dots become underscores":           {"my-llm.v2", "MY_LLM_V2_BASE_URL", "MY_LLM_V2_API_KEY"},
		"underscores and digits are kept":              {"llm_2", "LLM_2_BASE_URL", "LLM_2_API_KEY"},
		"other characters become underscores":          {"a/b c+d", "A_B_C_D_BASE_URL", "A_B_C_D_API_KEY"},
		"each non-ASCII character is one underscore":   {"kö", "K__BASE_URL", "K__API_KEY"},
		"another kind is trimmed":                      {" vertex ", "VERTEX_BASE_URL", "VERTEX_API_KEY"},
		"a google variant is not google":               {"google-vertex", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_VERTEX_API_KEY"},
		"a dotted azure is mapped by the general rule": {"azure.openai", "AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY"},
		"ollama is no longer special":                  {"ollama", "OLLAMA_BASE_URL", "OLLAMA_API_KEY"},
		"an empty kind still yields names":             {"", "_BASE_URL", "_API_KEY"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			baseURL, apiKey := ProviderEnv(test.kind)
			if diff := cmp.Diff([2]string{test.baseURL, test.apiKey}, [2]string{baseURL, apiKey}); diff != "" {
				t.Errorf("ProviderEnv(%q) (-want +got):\n%s", test.kind, diff)
			}
		})
	}
}

func TestDeadEnvNames(t *testing.T) {
	want := []string{
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
		"CALIBAN_AGENT_TLS_CERT",
		"CALIBAN_AGENT_TLS_KEY",
		"CALIBAN_AGENT_TOKEN",
		"CALIBAN_CONTROL_ENDPOINT",
		"CALIBAN_CONTROL_TOKEN",
	}
	if diff := cmp.Diff(want, DeadEnvNames); diff != "" {
		t.Errorf("DeadEnvNames (-want +got):\n%s", diff)
	}
	// A dead name the operator also owned would be emitted by one rule and
	// forbidden by another.
	var emitted []string
	for _, v := range wantAgentPolicyVariables {
		emitted = append(emitted, v.Name)
	}
	emitted = append(emitted, OperatorEnvNames...)
	for _, kind := range []string{"anthropic", "openai", "google", "azure"} {
		b, k := ProviderEnv(kind)
		emitted = append(emitted, b, k)
	}
	for _, dead := range DeadEnvNames {
		for _, name := range emitted {
			if dead == name {
				t.Errorf("%s is both dead and emitted", dead)
			}
		}
	}
}

func TestOperatorOwnedEnv(t *testing.T) {
	tests := map[string]struct {
		// inputs
		name  string
		kinds []string
		// expected
		owned bool
	}{
		"the daemon token is owned":                            {name: "CALIBAN_DAEMON_TOKEN", owned: true},
		"CALIBAN_PROVIDER is owned":                            {name: "CALIBAN_PROVIDER", owned: true},
		"the router config is owned":                           {name: "CALIBAN_ROUTER_CONFIG", owned: true},
		"the storage substrate is owned":                       {name: "CALIBAN_STORAGE_SUBSTRATE", owned: true},
		"the storage URL is owned":                             {name: "CALIBAN_STORAGE_REMOTE_URL", owned: true},
		"the storage token's variable is owned":                {name: "CALIBAN_STORAGE_REMOTE_TOKEN_ENV", owned: true},
		"the gonzalo token is owned":                           {name: "GONZALO_TOKEN", owned: true},
		"a listed provider's key is owned":                     {name: "ANTHROPIC_API_KEY", kinds: []string{"anthropic"}, owned: true},
		"a listed provider's base URL is owned":                {name: "ANTHROPIC_BASE_URL", kinds: []string{"anthropic"}, owned: true},
		"gemini names are owned for a google provider":         {name: "GEMINI_API_KEY", kinds: []string{"google"}, owned: true},
		"every listed provider's names are owned":              {name: "BEDROCK_BASE_URL", kinds: []string{"openai", "Bedrock"}, owned: true},
		"a mapped odd kind's names are owned":                  {name: "MY_LLM_V2_API_KEY", kinds: []string{"my-llm.v2"}, owned: true},
		"an unlisted provider's key is free":                   {name: "OPENAI_API_KEY", kinds: []string{"anthropic"}},
		"provider names are free without providers":            {name: "ANTHROPIC_API_KEY"},
		"names compare case-sensitively":                       {name: "caliban_daemon_token"},
		"an agentPolicy variable is reserved apart, not owned": {name: "CALIBAN_AUTO_ALLOW", kinds: []string{"anthropic"}},
		"an ordinary variable is free":                         {name: "HTTP_PROXY", kinds: []string{"anthropic", "openai"}},
		"a dead name is not owned, only never emitted":         {name: "CALIBAN_MODEL", kinds: []string{"anthropic"}},
		"other daemon variables are not owned":                 {name: "CALIBAN_DAEMON_RUNTIME_DIR"},
		"an empty name is free":                                {name: ""},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if got := OperatorOwnedEnv(test.name, test.kinds); got != test.owned {
				t.Errorf("OperatorOwnedEnv(%q, %q) = %v, want %v", test.name, test.kinds, got, test.owned)
			}
		})
	}
}

// wantAgentPolicyVariables is the table of docs/crd-reference.md#agentpolicy
// written out, the oracle the reserved-name tests loop over: a name left out
// of AgentPolicyVariables would pass every test that derived its rows from
// that list.
var wantAgentPolicyVariables = []AgentPolicyVariable{
	{"CALIBAN_DEFAULT_PERMISSION_MODE", "agentPolicy.permissionMode"},
	{"CALIBAN_AUTO_ALLOW", "agentPolicy.autoAllow"},
	{"CALIBAN_NO_PERMISSIONS", "agentPolicy.noPermissions"},
	{"CALIBAN_NO_MCP", "agentPolicy.noMcp"},
	{"CALIBAN_NO_HOOKS", "agentPolicy.noHooks"},
	{"CALIBAN_NO_SKILLS", "agentPolicy.noSkills"},
	{"CALIBAN_NO_SUB_AGENT", "agentPolicy.noSubAgent"},
	{"CALIBAN_STRICT_KNOWN_MARKETPLACES", "agentPolicy.strictKnownMarketplaces"},
	{"CALIBAN_ENABLED_PLUGINS", "agentPolicy.enabledPlugins"},
	{"CALIBAN_BLOCKED_MARKETPLACES", "agentPolicy.blockedMarketplaces"},
	{"CALIBAN_PARALLEL_TOOL_LIMIT", "agentPolicy.parallelToolLimit"},
}

func TestAgentPolicyVariables(t *testing.T) {
	t.Run("the list is the documented table", func(t *testing.T) {
		if diff := cmp.Diff(wantAgentPolicyVariables, AgentPolicyVariables); diff != "" {
			t.Errorf("AgentPolicyVariables (-want +got):\n%s", diff)
		}
	})
	// Every variable a policy can project is reserved, so a new field's
	// variable cannot be added to agentPolicyEnv and forgotten here.
	t.Run("the list is what a policy setting every field projects, in order", func(t *testing.T) {
		every := &calibanv1alpha1.AgentPolicy{
			AllowUnattended: true, PermissionMode: calibanv1alpha1.PermissionModeDontAsk,
			AutoAllow: new(true), NoPermissions: new(true), NoMCP: new(true), NoHooks: new(true), NoSkills: new(true),
			NoSubAgent: new(true), StrictKnownMarketplaces: new(true), EnabledPlugins: []string{},
			BlockedMarketplaces: []string{}, ParallelToolLimit: new(int32(1)),
		}
		var projected, listed []string
		for _, e := range agentPolicyEnv(every) {
			projected = append(projected, *e.Name)
		}
		for _, v := range AgentPolicyVariables {
			listed = append(listed, v.Name)
		}
		if diff := cmp.Diff(projected, listed); diff != "" {
			t.Errorf("(-projected +listed):\n%s", diff)
		}
	})
	// The field is what a message tells people to set: it must be spelled
	// as in a Workspace.
	t.Run("each field is an agentPolicy field as the API spells it", func(t *testing.T) {
		fields := map[string]bool{}
		typ := reflect.TypeFor[calibanv1alpha1.AgentPolicy]()
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			fields["agentPolicy."+name] = true
		}
		for _, v := range AgentPolicyVariables {
			if !fields[v.Field] {
				t.Errorf("%s: %s is no field of the AgentPolicy type", v.Name, v.Field)
			}
		}
	})
}

func TestAgentPolicyField(t *testing.T) {
	tests := map[string]struct {
		name  string
		field string
	}{
		"auto-allow is projected from autoAllow":          {name: "CALIBAN_AUTO_ALLOW", field: "agentPolicy.autoAllow"},
		"the permission mode is projected from its field": {name: "CALIBAN_DEFAULT_PERMISSION_MODE", field: "agentPolicy.permissionMode"},
		"the last variable of the list is found":          {name: "CALIBAN_PARALLEL_TOOL_LIMIT", field: "agentPolicy.parallelToolLimit"},
		"names compare case-sensitively":                  {name: "caliban_auto_allow"},
		"an operator-owned name is not the policy's":      {name: "CALIBAN_PROVIDER"},
		"an ordinary variable is not the policy's":        {name: "HTTP_PROXY"},
		"allowUnattended projects no variable":            {name: "CALIBAN_ALLOW_UNATTENDED"},
		"an empty name is not the policy's":               {name: ""},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if got := AgentPolicyField(test.name); got != test.field {
				t.Errorf("AgentPolicyField(%q) = %q, want %q", test.name, got, test.field)
			}
		})
	}
}

// wantLoaderEnv is docs/security.md#workspace-env-checked-as-what-it-is
// written out: one name of each family a program loads or runs code from,
// each prefix with a name it catches. A name left out of LoaderEnvNames
// fails here, not only in the lists derived from it.
var wantLoaderEnv = []string{
	"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES",
	"HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "CALIBAN_OTEL_HEADERS_HELPER",
	"PATH", "SHELL", "BASH_ENV", "ENV", "ZDOTDIR", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "BASH_FUNC_ls%%",
	"EDITOR", "VISUAL", "PAGER", "MANPAGER", "LESSOPEN", "LESSCLOSE", "SSH_ASKPASS",
	"NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE", "npm_config_node_options", "NPM_CONFIG_SCRIPT_SHELL", "Npm_Config_Onload_Script",
	"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONBREAKPOINT", "PYTHONWARNINGS", "PYTHONPYCACHEPREFIX",
	"PERL5LIB", "PERLLIB", "PERL5OPT", "PERL5DB", "RUBYLIB", "RUBYOPT",
	"JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "CLASSPATH",
	"GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0", "GIT_CONFIG_PARAMETERS",
	"GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "GIT_ASKPASS", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER",
	"GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "GIT_ALLOW_PROTOCOL", "GIT_DIR", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
	"GIT_ALTERNATE_OBJECT_DIRECTORIES",
}

// wantRepointingEnv is the same for the variables that re-point where
// requests go or whom TLS trusts, in the spellings people write.
var wantRepointingEnv = []string{
	"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "Https_Proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
	"GRPC_PROXY", "OPENAI_PROXY", "NODE_USE_ENV_PROXY", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE", "NODE_EXTRA_CA_CERTS", "NODE_TLS_REJECT_UNAUTHORIZED", "NODE_USE_SYSTEM_CA",
	"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HTTPLIB2_CA_CERTS", "PYTHONHTTPSVERIFY", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_SSL_NO_VERIFY",
	"AWS_CA_BUNDLE", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "DENO_CERT", "PIP_CERT", "CARGO_HTTP_CAINFO",
	"ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "ANTHROPIC_API_BASE", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL",
	"OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_HOST", "GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "GEMINI_API_BASE",
	"GOOGLE_VERTEX_BASE_URL", "AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_RESOURCE", "AZURE_API_BASE",
	"OLLAMA_BASE_URL", "MY_LLM_V2_BASE_URL",
}

func TestLoaderEnv(t *testing.T) {
	for _, name := range wantLoaderEnv {
		t.Run(name+" loads or runs code", func(t *testing.T) {
			if !LoaderEnv(name) {
				t.Errorf("LoaderEnv(%q) = false", name)
			}
		})
	}
	for name, variable := range map[string]string{
		"a lower-case ld_preload is not the linker's":           "ld_preload",
		"git's author is no program":                            "GIT_AUTHOR_NAME",
		"git's committer e-mail is no program":                  "GIT_COMMITTER_EMAIL",
		"python's unbuffered output loads nothing":              "PYTHONUNBUFFERED",
		"python's hash seed loads nothing":                      "PYTHONHASHSEED",
		"node's environment name loads nothing":                 "NODE_ENV",
		"a name merely containing PATH is not PATH":             "CALIBAN_RATES_PATH",
		"a re-pointing variable is gated, not refused":          "HTTPS_PROXY",
		"a CA bundle is gated, not refused":                     "NODE_EXTRA_CA_CERTS",
		"an ordinary caliban variable is no loader":             "CALIBAN_OUTPUT_STYLE",
		"an XDG directory caliban keeps caches in is no loader": "XDG_CACHE_HOME",
	} {
		t.Run(name, func(t *testing.T) {
			if LoaderEnv(variable) {
				t.Errorf("LoaderEnv(%q) = true", variable)
			}
		})
	}
}

func TestRepointingEnv(t *testing.T) {
	for _, name := range wantRepointingEnv {
		t.Run(name+" re-points requests", func(t *testing.T) {
			if !RepointingEnv(name) {
				t.Errorf("RepointingEnv(%q) = false", name)
			}
		})
	}
	// The variable a provider kind's baseUrl is projected as is one of
	// them whatever the kind: env cannot do what baseUrl may not.
	for _, kind := range []string{"anthropic", "openai", "google", "gemini", "azure", "azure-openai", "Bedrock", "my-llm.v2"} {
		t.Run("the base-URL variable of kind "+kind+" re-points requests", func(t *testing.T) {
			if baseURL, _ := ProviderEnv(kind); !RepointingEnv(baseURL) {
				t.Errorf("RepointingEnv(%q) = false", baseURL)
			}
		})
	}
	for name, variable := range map[string]string{
		"a provider's key is the operator's, not a re-pointing": "ANTHROPIC_API_KEY",
		"a log level re-points nothing":                         "LOG_LEVEL",
		"a name merely starting with PROXY is none":             "PROXY_MODE",
		"telemetry's endpoint carries no provider key":          "OTEL_EXPORTER_OTLP_ENDPOINT",
		"the Azure API version re-points nothing":               "AZURE_OPENAI_API_VERSION",
		"a loader is refused, not gated":                        "LD_PRELOAD",
	} {
		t.Run(name, func(t *testing.T) {
			if RepointingEnv(variable) {
				t.Errorf("RepointingEnv(%q) = true", variable)
			}
		})
	}
	t.Run("the names are listed in lower case, as they are compared", func(t *testing.T) {
		for _, list := range [][]string{RepointingEnvNames, RepointingEnvSuffixes} {
			for _, n := range list {
				if n != strings.ToLower(n) {
					t.Errorf("%q is not in lower case", n)
				}
			}
		}
	})
}
