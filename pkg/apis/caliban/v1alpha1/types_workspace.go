// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cws,categories=caliban
// +kubebuilder:printcolumn:name=Phase,type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name=Message,type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name=Warm,type=integer,JSONPath=`.status.warmPool.readyReplicas`,priority=1,description="Ready Sandboxes in the warm pool"
// +kubebuilder:printcolumn:name=Pool,type=integer,JSONPath=`.spec.warmPool.replicas`,priority=1,description="The warm pool's size"

// Workspace is durable configuration for agent sessions: git sources, named
// model providers and their credential references, environment, isolation,
// egress allow-list and agent policy. The operator validates it and reports
// the result in status; it creates nothing for a Workspace.
type Workspace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the workspace configuration.
	// +required
	Spec WorkspaceSpec `json:"spec"`

	// status is the operator's verdict on spec.
	// +optional
	Status WorkspaceStatus `json:"status,omitempty"`
}

// WorkspaceSpec is the configuration that CalibanTasks referring to this
// Workspace run under. A task pins it when admitted; later edits affect new
// tasks only.
type WorkspaceSpec struct {
	// displayName is the label dashboards show for this workspace.
	// +required
	// +kubebuilder:validation:MinLength=1
	DisplayName string `json:"displayName"`

	// sources are git checkouts cloned into the workspace volume before the
	// agent starts; a workspace may start bare.
	// +optional
	// +kubebuilder:default={}
	// +listType=atomic
	Sources []Source `json:"sources,omitempty"`

	// providers are the named model providers tasks can use.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	Providers []Provider `json:"providers"`

	// defaultProvider names the provider a task uses when it sets no
	// providerRef. Optional when there is exactly one provider.
	// +optional
	DefaultProvider string `json:"defaultProvider,omitempty"`

	// env is non-secret environment for every agent pod. It may not name a
	// variable the operator sets itself or caliband sets for the workers it
	// spawns (the provider's variables depend on the providers, and are
	// checked by the operator), nor one the agentPolicy projects: those
	// come only from their typed field, which the posture gate checks. Nor
	// may it name one that makes the pod load or run code of the writer's
	// choosing (LD_PRELOAD, NODE_OPTIONS, PYTHONPATH, GIT_CONFIG_*, PATH,
	// ...). Variables that decide where requests go or whom TLS trusts (a
	// proxy, a CA bundle, a provider SDK's endpoint) are for whoever may
	// read the providers' keys: the optional admission component checks
	// that.
	// +optional
	// +kubebuilder:default={}
	// +listType=atomic
	// +kubebuilder:validation:items:XValidation:rule="!(self.name in ['CALIBAN_DAEMON_TOKEN', 'CALIBAN_PROVIDER', 'CALIBAN_ROUTER_CONFIG', 'CALIBAN_STORAGE_SUBSTRATE', 'CALIBAN_STORAGE_REMOTE_URL', 'CALIBAN_STORAGE_REMOTE_TOKEN_ENV', 'GONZALO_TOKEN'])",messageExpression="self.name + ' is set by the operator itself and cannot be set in a Workspace'",reason=FieldValueForbidden
	// +kubebuilder:validation:items:XValidation:rule="!(self.name in ['CALIBAN_AGENT_TLS_CERT', 'CALIBAN_AGENT_TLS_KEY', 'CALIBAN_AGENT_TOKEN', 'CALIBAN_CONTROL_ENDPOINT', 'CALIBAN_CONTROL_TOKEN'])",messageExpression="self.name + ' is set by caliband for the workers it spawns and cannot be set in a Workspace'",reason=FieldValueForbidden
	// +kubebuilder:validation:items:XValidation:rule="!(self.name in ['CALIBAN_DEFAULT_PERMISSION_MODE', 'CALIBAN_AUTO_ALLOW', 'CALIBAN_NO_PERMISSIONS', 'CALIBAN_NO_MCP', 'CALIBAN_NO_HOOKS', 'CALIBAN_NO_SKILLS', 'CALIBAN_NO_SUB_AGENT', 'CALIBAN_STRICT_KNOWN_MARKETPLACES', 'CALIBAN_ENABLED_PLUGINS', 'CALIBAN_BLOCKED_MARKETPLACES', 'CALIBAN_PARALLEL_TOOL_LIMIT'])",messageExpression="self.name + ' is projected from ' + {'CALIBAN_DEFAULT_PERMISSION_MODE': 'agentPolicy.permissionMode', 'CALIBAN_AUTO_ALLOW': 'agentPolicy.autoAllow', 'CALIBAN_NO_PERMISSIONS': 'agentPolicy.noPermissions', 'CALIBAN_NO_MCP': 'agentPolicy.noMcp', 'CALIBAN_NO_HOOKS': 'agentPolicy.noHooks', 'CALIBAN_NO_SKILLS': 'agentPolicy.noSkills', 'CALIBAN_NO_SUB_AGENT': 'agentPolicy.noSubAgent', 'CALIBAN_STRICT_KNOWN_MARKETPLACES': 'agentPolicy.strictKnownMarketplaces', 'CALIBAN_ENABLED_PLUGINS': 'agentPolicy.enabledPlugins', 'CALIBAN_BLOCKED_MARKETPLACES': 'agentPolicy.blockedMarketplaces', 'CALIBAN_PARALLEL_TOOL_LIMIT': 'agentPolicy.parallelToolLimit'}[self.name] + ' and cannot be set in a Workspace; set that field instead'",reason=FieldValueForbidden
	// +kubebuilder:validation:items:XValidation:rule="!(self.name in {'GCONV_PATH': true, 'OPENSSL_CONF': true, 'OPENSSL_ENGINES': true, 'OPENSSL_MODULES': true, 'HOME': true, 'XDG_CONFIG_HOME': true, 'XDG_DATA_HOME': true, 'CALIBAN_OTEL_HEADERS_HELPER': true, 'PATH': true, 'SHELL': true, 'BASH_ENV': true, 'ENV': true, 'ZDOTDIR': true, 'SHELLOPTS': true, 'BASHOPTS': true, 'PS4': true, 'PROMPT_COMMAND': true, 'EDITOR': true, 'VISUAL': true, 'PAGER': true, 'MANPAGER': true, 'LESSOPEN': true, 'LESSCLOSE': true, 'SSH_ASKPASS': true, 'NODE_OPTIONS': true, 'NODE_PATH': true, 'NODE_REPL_EXTERNAL_MODULE': true, 'PYTHONPATH': true, 'PYTHONHOME': true, 'PYTHONSTARTUP': true, 'PYTHONUSERBASE': true, 'PYTHONBREAKPOINT': true, 'PYTHONWARNINGS': true, 'PYTHONPYCACHEPREFIX': true, 'PERL5LIB': true, 'PERLLIB': true, 'PERL5OPT': true, 'PERL5DB': true, 'RUBYLIB': true, 'RUBYOPT': true, 'JAVA_TOOL_OPTIONS': true, 'JDK_JAVA_OPTIONS': true, '_JAVA_OPTIONS': true, 'CLASSPATH': true, 'GIT_EXEC_PATH': true, 'GIT_TEMPLATE_DIR': true, 'GIT_ASKPASS': true, 'GIT_EDITOR': true, 'GIT_SEQUENCE_EDITOR': true, 'GIT_PAGER': true, 'GIT_EXTERNAL_DIFF': true, 'GIT_PROXY_COMMAND': true, 'GIT_ALLOW_PROTOCOL': true, 'GIT_DIR': true, 'GIT_COMMON_DIR': true, 'GIT_OBJECT_DIRECTORY': true, 'GIT_ALTERNATE_OBJECT_DIRECTORIES': true})",messageExpression="self.name + ' decides what code the agent pod loads or runs, and cannot be set in a Workspace'",fieldPath=.name,reason=FieldValueForbidden
	// +kubebuilder:validation:items:XValidation:rule="!self.name.startsWith('LD_') && !self.name.startsWith('BASH_FUNC_') && !self.name.startsWith('GIT_CONFIG') && !self.name.startsWith('GIT_SSH') && !self.name.startsWith('npm_config_') && !self.name.startsWith('NPM_CONFIG_')",messageExpression="self.name + ' decides what code the agent pod loads or runs, and cannot be set in a Workspace'",fieldPath=.name,reason=FieldValueForbidden
	Env []EnvVar `json:"env,omitempty"`

	// isolation is the default isolation for tasks; a task's
	// spec.isolation.runtimeClass overrides it.
	// +optional
	Isolation *Isolation `json:"isolation,omitempty"`

	// egress restricts where agent pods may connect. Unset allows all
	// egress; set allows DNS plus exactly the listed destinations. A task
	// cannot override it.
	// +optional
	Egress *Egress `json:"egress,omitempty"`

	// agentPolicy says what agents here may do, including whether they may
	// run unattended. A task cannot override it.
	// +optional
	AgentPolicy *AgentPolicy `json:"agentPolicy,omitempty"`

	// warmPool keeps Sandboxes of this workspace's current configuration
	// ready in agent-sandbox's warm pool, so that a task whose pin matches
	// them starts as soon as agent-sandbox hands one over instead of waiting
	// for a new volume.
	// Absent, or replicas 0: no pool, every task starts cold. Needs
	// agent-sandbox's extensions API; without it tasks start cold and
	// status.conditions says so.
	// +optional
	WarmPool *WarmPool `json:"warmPool,omitempty"`
}

// WarmPool sizes a Workspace's warm pool.
type WarmPool struct {
	// replicas is how many unclaimed Sandboxes the pool keeps ready; a
	// claimed one is replaced at once. 0 turns the pool off.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas int32 `json:"replicas,omitempty"`
}

// WorkspacePhase is the lifecycle phase of a Workspace.
// +kubebuilder:validation:Enum=Pending;Ready;Failed
type WorkspacePhase string

// Workspace phases.
const (
	// WorkspacePending: not validated yet.
	WorkspacePending WorkspacePhase = "Pending"
	// WorkspaceReady: valid; tasks can be admitted against it.
	WorkspaceReady WorkspacePhase = "Ready"
	// WorkspaceFailed: invalid; status.message says why.
	WorkspaceFailed WorkspacePhase = "Failed"
)

// WorkspaceStatus is written by the operator only.
type WorkspaceStatus struct {
	// phase is Pending until the operator has validated the spec, then
	// Ready or Failed.
	// +optional
	Phase WorkspacePhase `json:"phase,omitempty"`

	// message says why the workspace failed validation; omitted when Ready.
	// +optional
	Message string `json:"message,omitempty"`

	// observedGeneration is the metadata.generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are the standard conditions; the operator owns Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// warmPool reports the warm pool while spec.warmPool asks for one; the
	// WarmPoolReady condition says why it is not ready.
	// +optional
	WarmPool *WarmPoolStatus `json:"warmPool,omitempty"`
}

// WarmPoolStatus is what the warm pool serves and how full it is.
type WarmPoolStatus struct {
	// replicas is the size spec.warmPool asks for.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// readyReplicas counts the unclaimed Sandboxes ready to be claimed,
	// as agent-sandbox reports them.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// template is the SandboxTemplate the pool serves: its name ends in
	// the hash of the rendering, so a task whose pin renders to the same
	// name takes the warm path.
	// +optional
	Template string `json:"template,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// WorkspaceList is a list of Workspaces.
type WorkspaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Workspace `json:"items"`
}
