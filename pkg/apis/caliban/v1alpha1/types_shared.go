// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

// Source is one git checkout cloned into the agent pod's workspace volume
// before caliband starts.
type Source struct {
	// name is the source's name in caliband's workspace.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// repo is the git remote to clone, in any form git accepts
	// (https://…, git@host:path, …).
	// +required
	// +kubebuilder:validation:MinLength=1
	Repo string `json:"repo"`

	// ref is the branch, tag or full commit SHA (40 or 64 hex digits) to
	// check out. A branch or tag is cloned with --branch; a SHA is fetched
	// by id. An abbreviated SHA fails the Workspace's validation.
	// +optional
	// +kubebuilder:default=main
	Ref string `json:"ref,omitempty"`

	// path is the absolute checkout path. It must lie strictly under the
	// operator's workspace root (default /work) and differ from every other
	// source's path.
	// +required
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`

	// credentialsRef names the Secret a private repository is cloned with:
	// a kubernetes.io/basic-auth Secret (username, password or token) for an
	// https:// repo, or a kubernetes.io/ssh-auth Secret (ssh-privatekey and
	// known_hosts) for an ssh:// or git@ repo. Only the clone step mounts
	// it; caliband and the agents never see it.
	// +optional
	CredentialsRef *SourceCredentialsRef `json:"credentialsRef,omitempty"`
}

// SourceCredentialsRef names the Secret, in the same namespace, a source is
// cloned with; its type says which keys it holds.
type SourceCredentialsRef struct {
	// secretName is the name of the Secret: a lowercase RFC 1123 subdomain,
	// as every Secret's name is.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName"`
}

// SecretKeyRef names one key of a Secret in the same namespace.
type SecretKeyRef struct {
	// A pattern, not a CEL rule: in the unbounded providers list a rule's
	// estimated cost exceeds the apiserver's budget.

	// secretName is the name of the Secret, in the same namespace: a
	// lowercase RFC 1123 subdomain, as every Secret's name is.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName"`

	// key is the key within the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// Provider is a named model provider and where its credential lives.
type Provider struct {
	// name identifies the provider within the workspace; tasks select it with
	// spec.providerRef. Unique within the workspace.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// kind is the provider family. anthropic, openai and google (or gemini)
	// use caliban's own environment variable names; any other kind maps to
	// <KIND>_BASE_URL and <KIND>_API_KEY (azure and azure-openai map to
	// AZURE_OPENAI_*).
	// +required
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`

	// baseUrl overrides the provider's API endpoint; it is projected as the
	// kind's base-URL environment variable.
	// +optional
	BaseURL string `json:"baseUrl,omitempty"`

	// model is the default model for this provider. It is recorded in a
	// task's pinned configuration (where a task's spec.model.name replaces
	// it); it is not projected into the pod environment.
	// +optional
	Model string `json:"model,omitempty"`

	// credentialsRef names the Secret key that holds the provider's API key.
	// The value is mounted into the agent pod through a secretKeyRef and is
	// never copied into any object. Keyless providers omit it.
	// +optional
	CredentialsRef *SecretKeyRef `json:"credentialsRef,omitempty"`
}

// EnvVar is a non-secret environment variable for every agent pod.
type EnvVar struct {
	// A pattern, not a CEL rule: in the unbounded env lists a rule's
	// estimated cost exceeds the apiserver's budget.

	// name of the variable: printable ASCII other than '=', as Kubernetes
	// requires of a container's variable. It must not be one the operator
	// sets itself (the daemon token, provider key and base-URL variables,
	// storage and router variables), nor one the agentPolicy projects
	// (CALIBAN_AUTO_ALLOW and the rest): set the agentPolicy field instead.
	// Nor one that makes the agent pod load or run code (LD_PRELOAD,
	// NODE_OPTIONS, PYTHONPATH, GIT_CONFIG_*, PATH and the rest).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[ -<>-~]+$`
	Name string `json:"name"`

	// value of the variable; may be empty.
	// +optional
	Value string `json:"value,omitempty"`
}

// Isolation selects how strongly agent pods are isolated.
type Isolation struct {
	// runtimeClass is the RuntimeClass the agent pod runs under (for
	// example gvisor or kata): a lowercase RFC 1123 subdomain, as every
	// RuntimeClass's name is. Unset uses the cluster default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || !format.dns1123Subdomain().validate(self).hasValue()",message="must be a valid RuntimeClass name: a lowercase RFC 1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)"
	RuntimeClass string `json:"runtimeClass,omitempty"`

	// worktrees is carried for caliban and not interpreted by the operator.
	// +optional
	Worktrees string `json:"worktrees,omitempty"`
}

// Egress is the allow-list of destinations agent pods may reach.
type Egress struct {
	// allow lists the destinations reachable besides DNS. An empty list
	// allows DNS only.
	// +optional
	// +kubebuilder:default={}
	// +listType=atomic
	Allow []EgressRule `json:"allow,omitzero"`
}

// EgressRule opens TCP traffic to one CIDR.
type EgressRule struct {
	// cidr is an IPv4 or IPv6 CIDR, for example 10.0.0.0/8 or 2001:db8::/32.
	// +required
	// +kubebuilder:validation:MinLength=1
	CIDR string `json:"cidr"`

	// ports are the TCP ports opened on cidr; empty opens every TCP port
	// (and no other protocol).
	// +optional
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +listType=atomic
	Ports []int32 `json:"ports,omitempty"`
}

// PermissionMode is caliban's default permission mode for agents.
// +kubebuilder:validation:Enum=default;acceptEdits;plan;auto;dontAsk;bypassPermissions
type PermissionMode string

// The permission modes caliban accepts. dontAsk and bypassPermissions are
// unsupervised: a workspace may only use them with allowUnattended.
const (
	PermissionModeDefault           PermissionMode = "default"
	PermissionModeAcceptEdits       PermissionMode = "acceptEdits"
	PermissionModePlan              PermissionMode = "plan"
	PermissionModeAuto              PermissionMode = "auto"
	PermissionModeDontAsk           PermissionMode = "dontAsk"
	PermissionModeBypassPermissions PermissionMode = "bypassPermissions"
)

// AgentPolicy says what agents in a workspace may do. Every field is
// optional, and an unset field leaves caliban's own default alone, which is
// not the same as false. A task cannot override it.
type AgentPolicy struct {
	// allowUnattended authorizes unsupervised agents: tasks with
	// task.permissionPosture unattended, and the unsupervised settings below
	// (permissionMode dontAsk or bypassPermissions, autoAllow, noPermissions).
	// Without it such a task fails with reason PostureNotPermitted.
	// +optional
	// +kubebuilder:default=false
	AllowUnattended bool `json:"allowUnattended,omitempty"`

	// permissionMode is projected as CALIBAN_DEFAULT_PERMISSION_MODE.
	// dontAsk and bypassPermissions need allowUnattended.
	// +optional
	PermissionMode PermissionMode `json:"permissionMode,omitempty"`

	// autoAllow is projected as CALIBAN_AUTO_ALLOW=true when true; it needs
	// allowUnattended and cannot be combined with noPermissions.
	// +optional
	AutoAllow *bool `json:"autoAllow,omitempty"`

	// noPermissions is projected as CALIBAN_NO_PERMISSIONS=true when true;
	// it needs allowUnattended and cannot be combined with autoAllow.
	// +optional
	NoPermissions *bool `json:"noPermissions,omitempty"`

	// noMcp is projected as CALIBAN_NO_MCP=true when true.
	// +optional
	NoMCP *bool `json:"noMcp,omitempty"`

	// noHooks is projected as CALIBAN_NO_HOOKS=true when true.
	// +optional
	NoHooks *bool `json:"noHooks,omitempty"`

	// noSkills is projected as CALIBAN_NO_SKILLS=true when true.
	// +optional
	NoSkills *bool `json:"noSkills,omitempty"`

	// noSubAgent is projected as CALIBAN_NO_SUB_AGENT=true when true.
	// +optional
	NoSubAgent *bool `json:"noSubAgent,omitempty"`

	// strictKnownMarketplaces is projected as
	// CALIBAN_STRICT_KNOWN_MARKETPLACES=true when true; false projects nothing.
	// +optional
	StrictKnownMarketplaces *bool `json:"strictKnownMarketplaces,omitempty"`

	// enabledPlugins is projected comma-joined as CALIBAN_ENABLED_PLUGINS.
	// Omitted enables every discovered plugin; an empty list enables none.
	// +optional
	// +listType=atomic
	EnabledPlugins []string `json:"enabledPlugins,omitzero"`

	// blockedMarketplaces is projected comma-joined as
	// CALIBAN_BLOCKED_MARKETPLACES; entries are marketplace URLs.
	// +optional
	// +listType=atomic
	BlockedMarketplaces []string `json:"blockedMarketplaces,omitzero"`

	// parallelToolLimit is projected as CALIBAN_PARALLEL_TOOL_LIMIT.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ParallelToolLimit *int32 `json:"parallelToolLimit,omitempty"`
}
