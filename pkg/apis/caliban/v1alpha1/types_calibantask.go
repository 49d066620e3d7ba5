// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ctask,categories=caliban
// +kubebuilder:printcolumn:name=Phase,type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name=Posture,type=string,JSONPath=`.status.permissionPosture`,description="The posture the task was admitted with"
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name=Endpoint,type=string,JSONPath=`.status.calibandEndpoint`,priority=1
// +kubebuilder:printcolumn:name=Reason,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the task is in its phase: the Ready condition's reason"
// +kubebuilder:printcolumn:name=Suspend,type=boolean,JSONPath=`.spec.suspend`,priority=1
// +kubebuilder:printcolumn:name=Finished,type=date,JSONPath=`.status.completionTime`,priority=1,description="When the task finished: prospero's settle time, or its deadline"
// +kubebuilder:printcolumn:name=Launch,type=string,JSONPath=`.status.launch.type`,priority=1,description="Warm: claimed from the Workspace's warm pool; Cold: a Sandbox of its own"
// +kubebuilder:printcolumn:name=Requested-By,type=string,JSONPath=`.status.requestedBy`,priority=1,description="Who created the task, as the admission component recorded it"
// +kubebuilder:selectablefield:JSONPath=`.status.permissionPosture`

// CalibanTask is one agent session. The operator admits it against its
// Workspace, pins the Workspace configuration into status once, and runs
// caliband for it in an agent-sandbox Sandbox with its own ServiceAccount and
// NetworkPolicy.
type CalibanTask struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the requested session.
	// +required
	Spec CalibanTaskSpec `json:"spec"`

	// status is written by the operator, except the AgentsSettled and
	// AgentsDrained conditions, which the control plane (prospero) writes.
	// +optional
	Status CalibanTaskStatus `json:"status,omitempty"`
}

// CalibanTaskSpec is the requested agent session.
type CalibanTaskSpec struct {
	// workspaceRef names the Workspace, in the same namespace, whose
	// configuration the task runs under.
	// +required
	WorkspaceRef WorkspaceReference `json:"workspaceRef"`

	// providerRef names the workspace provider to use. Defaults to the
	// workspace's defaultProvider, else its only provider.
	// +optional
	ProviderRef string `json:"providerRef,omitempty"`

	// task describes the work for the agents.
	// +required
	Task TaskDefinition `json:"task"`

	// model overrides the model and router configuration.
	// +optional
	Model *ModelSpec `json:"model,omitempty"`

	// state selects where caliban keeps session state.
	// +optional
	State *StateSpec `json:"state,omitempty"`

	// isolation overrides the workspace's default isolation.
	// +optional
	Isolation *Isolation `json:"isolation,omitempty"`

	// resources is carried for the control plane; the operator does not
	// read it (pod resources come from the operator's settings).
	// +optional
	Resources *ResourcesSpec `json:"resources,omitempty"`

	// suspend parks the session: the Sandbox's pod goes away and its
	// workspace volume stays. Setting it back to false resumes the task.
	// Suspending a task that has not started yet delays its start.
	// +optional
	// +kubebuilder:default=false
	Suspend bool `json:"suspend,omitempty"`

	// lifecycle says what happens when the task finishes, runs too long or
	// is deleted.
	// +optional
	Lifecycle *LifecycleSpec `json:"lifecycle,omitempty"`

	// tools is the control plane's tool allow-list for the agents; the
	// operator carries it only.
	// +optional
	// +listType=atomic
	Tools []string `json:"tools,omitempty"`
}

// WorkspaceReference names a Workspace in the same namespace.
type WorkspaceReference struct {
	// name of the Workspace.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// PermissionPosture says whether a person supervises the session.
// +kubebuilder:validation:Enum=supervised;unattended
type PermissionPosture string

// Permission postures.
const (
	// PostureSupervised: a person answers permission prompts.
	PostureSupervised PermissionPosture = "supervised"
	// PostureUnattended: nobody answers; the workspace's agentPolicy must
	// set allowUnattended.
	PostureUnattended PermissionPosture = "unattended"
)

// TaskDefinition is the work the agents do.
type TaskDefinition struct {
	// prompt is the initial prompt.
	// +required
	// +kubebuilder:validation:MinLength=1
	Prompt string `json:"prompt"`

	// agentType is carried for the control plane.
	// +optional
	AgentType string `json:"agentType,omitempty"`

	// interactive marks a session a person drives; carried for the control
	// plane.
	// +optional
	// +kubebuilder:default=false
	Interactive bool `json:"interactive,omitempty"`

	// permissionPosture is supervised (the default) or unattended. An
	// unattended task is admitted only when its workspace's agentPolicy sets
	// allowUnattended.
	// +optional
	// +kubebuilder:default=supervised
	PermissionPosture PermissionPosture `json:"permissionPosture,omitempty"`
}

// ModelSpec overrides the model choice.
type ModelSpec struct {
	// name replaces the provider's model in the pinned configuration.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.trim().size() > 0",message="model.name must not be blank"
	Name string `json:"name,omitempty"`

	// routerConfigRef names a ConfigMap in the same namespace whose key
	// caliban.toml is caliban's model-router configuration; it is mounted
	// into the agent pod. A ConfigMap's name is a lowercase RFC 1123
	// subdomain.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || !format.dns1123Subdomain().validate(self).hasValue()",message="must be a valid ConfigMap name: a lowercase RFC 1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)"
	RouterConfigRef string `json:"routerConfigRef,omitempty"`
}

// StateSpec selects caliban's session-state storage.
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'remote' || (has(self.gonzaloEndpoint) && size(self.gonzaloEndpoint) > 0)",message="state.mode remote requires state.gonzaloEndpoint"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'local' || !has(self.gonzaloEndpoint) || size(self.gonzaloEndpoint) == 0",message="state.gonzaloEndpoint is set, but state.mode local never uses it"
// +kubebuilder:validation:XValidation:rule="!has(self.tokenRef) || (has(self.gonzaloEndpoint) && size(self.gonzaloEndpoint) > 0)",message="state.tokenRef requires remote storage (set state.gonzaloEndpoint)"
type StateSpec struct {
	// gonzaloEndpoint is the base URL of the gonzalo state service, for
	// example http://gonzalod.storage.svc:8080. Setting it selects remote
	// storage.
	// +optional
	GonzaloEndpoint string `json:"gonzaloEndpoint,omitempty"`

	// mode is remote or local. Defaults to remote when gonzaloEndpoint is
	// set; local keeps state on the workspace volume.
	// +optional
	// +kubebuilder:validation:Enum=remote;local
	Mode string `json:"mode,omitempty"`

	// tokenRef names the Secret key holding the gonzalo bearer token; it
	// requires gonzaloEndpoint.
	// +optional
	TokenRef *SecretKeyRef `json:"tokenRef,omitempty"`
}

// ResourcesSpec is carried for the control plane.
type ResourcesSpec struct {
	// class is a resource class name.
	// +optional
	Class string `json:"class,omitempty"`
}

// LifecycleSpec is what happens to a task at its ends: deletion, finish,
// deadline.
type LifecycleSpec struct {
	// idleTimeout is how long an idle session may live; carried for the
	// control plane, which knows idleness (it suspends the task).
	// +optional
	IdleTimeout string `json:"idleTimeout,omitempty"`

	// onDelete is delete (the default: the children go at once) or
	// checkpoint (the task drains first: the control plane checkpoints the
	// agents and answers with the AgentsDrained condition). It has no
	// schema enum: an unknown value fails the task with reason
	// InvalidLifecycle.
	// +optional
	OnDelete string `json:"onDelete,omitempty"`

	// onFinish is what happens to the Sandbox once the task is Completed or
	// Failed: suspend (the default) releases its compute and keeps the
	// workspace volume; keep leaves caliband running.
	// +optional
	// +kubebuilder:validation:Enum=suspend;keep
	OnFinish OnFinish `json:"onFinish,omitempty"`

	// ttlSecondsAfterFinished deletes the task that many seconds after it
	// finished (status.completionTime). The deletion honours onDelete.
	// Unset keeps finished tasks until someone deletes them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// activeDeadlineSeconds fails a task that has not finished that many
	// seconds after it was admitted (status.startTime), with reason
	// DeadlineExceeded, and suspends its Sandbox.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ActiveDeadlineSeconds *int32 `json:"activeDeadlineSeconds,omitempty"`
}

// OnFinish is what a finished task does with its Sandbox.
type OnFinish string

// Finish actions.
const (
	// OnFinishSuspend suspends the Sandbox: no pod, the volume stays.
	OnFinishSuspend OnFinish = "suspend"
	// OnFinishKeep leaves caliband running.
	OnFinishKeep OnFinish = "keep"
)

// Deletion behaviours (lifecycle.onDelete).
const (
	// OnDeleteDelete lets the garbage collector remove the children at once.
	OnDeleteDelete = "delete"
	// OnDeleteCheckpoint drains the task before it goes.
	OnDeleteCheckpoint = "checkpoint"
)

// FinalizerDrain holds a deleted task whose lifecycle.onDelete is
// checkpoint until the control plane has drained it, or the operator's
// drain timeout has passed.
const FinalizerDrain = "caliban.caliban-ai.dev/drain"

// AnnotationRequestedBy records who created a task: the user name the API
// server authenticated. The admission component (manifests/admission)
// writes it on create and refuses any hand-written value; without the
// component it is whatever the creator wrote, or absent.
const AnnotationRequestedBy = "caliban.caliban-ai.dev/requested-by"

// TaskPhase is the lifecycle phase of a CalibanTask.
// +kubebuilder:validation:Enum=Pending;Provisioning;Running;Suspended;Draining;Completed;Failed
type TaskPhase string

// Task phases.
const (
	// TaskPending: waiting for admission or for the Sandbox to appear.
	TaskPending TaskPhase = "Pending"
	// TaskProvisioning: the Sandbox exists but is not ready.
	TaskProvisioning TaskPhase = "Provisioning"
	// TaskRunning: caliband is reachable at status.calibandEndpoint.
	TaskRunning TaskPhase = "Running"
	// TaskSuspended: spec.suspend parks the session; the Sandbox has no
	// pod and keeps its volume.
	TaskSuspended TaskPhase = "Suspended"
	// TaskDraining: deleted, and waiting for the control plane to drain
	// the agents (lifecycle.onDelete checkpoint).
	TaskDraining TaskPhase = "Draining"
	// TaskCompleted: every agent finished (reported by the control plane).
	TaskCompleted TaskPhase = "Completed"
	// TaskFailed: admission failed or an agent failed; the Ready condition
	// says why.
	TaskFailed TaskPhase = "Failed"
)

// CalibanTaskStatus is the observed state of a task.
type CalibanTaskStatus struct {
	// phase is Pending, Provisioning, Running, Suspended, Draining,
	// Completed or Failed.
	// +optional
	Phase TaskPhase `json:"phase,omitempty"`

	// calibandEndpoint is caliband's host:port (no scheme), set only while
	// Running.
	// +optional
	CalibandEndpoint string `json:"calibandEndpoint,omitempty"`

	// sandboxRef names the task's Sandbox once it has been applied. Clients
	// read the name here rather than derive it.
	// +optional
	SandboxRef *SandboxReference `json:"sandboxRef,omitempty"`

	// resolvedWorkspace is the workspace configuration pinned at admission.
	// It is written once and never re-resolved.
	// +optional
	ResolvedWorkspace *ResolvedWorkspace `json:"resolvedWorkspace,omitempty"`

	// pinSignature authenticates resolvedWorkspace: an HMAC-SHA256, under
	// the operator's own key (the Secret CALIBAN_PIN_KEY_SECRET), of the
	// task's UID and its pin. The operator runs nothing from a pin whose
	// signature does not verify: only it can have written such a pin.
	// +optional
	PinSignature string `json:"pinSignature,omitempty"`

	// permissionPosture is the posture the task was admitted with.
	// +optional
	PermissionPosture PermissionPosture `json:"permissionPosture,omitempty"`

	// requestedBy is who created the task: the annotation
	// caliban.caliban-ai.dev/requested-by, copied from it on every pass
	// once the task is pinned. Only the admission component
	// (manifests/admission) makes it a record nobody can forge; without it,
	// it is whatever the creator wrote.
	// +optional
	RequestedBy string `json:"requestedBy,omitempty"`

	// observedGeneration is the metadata.generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phaseTransitionTime is when the task entered its current phase:
	// how long a task has been Provisioning counts from here, not from a
	// Ready condition that stayed False through a suspension.
	// +optional
	PhaseTransitionTime *metav1.Time `json:"phaseTransitionTime,omitempty"`

	// startTime is when the task was admitted (pinned); the deadline
	// counts from it.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the task finished: when the control plane
	// reported every agent settled, or when its deadline passed. The TTL
	// counts from it.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// checkpointRef identifies the checkpoint the control plane took when
	// the task drained (the message of its AgentsDrained condition).
	// +optional
	CheckpointRef string `json:"checkpointRef,omitempty"`

	// conditions: the operator owns Ready; the control plane owns
	// AgentsSettled (True with reason Succeeded or Failed once every agent
	// has finished) and AgentsDrained (its answer to a drain).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// launch says how the task's Sandbox was asked for, decided once with
	// its first child: Warm (a SandboxClaim on the Workspace's warm pool)
	// or Cold (a Sandbox of its own), and why not warm.
	// +optional
	Launch *Launch `json:"launch,omitempty"`
}

// LaunchType is the path a task's Sandbox took.
// +kubebuilder:validation:Enum=Warm;Cold
type LaunchType string

// Launch types.
const (
	// LaunchWarm: a SandboxClaim on the Workspace's warm pool, which hands
	// over a ready Sandbox, or makes one from the pool's template when it
	// has none ready.
	LaunchWarm LaunchType = "Warm"
	// LaunchCold: a Sandbox of the task's own.
	LaunchCold LaunchType = "Cold"
)

// Launch is the path a task's Sandbox took, and why.
type Launch struct {
	// type is Warm or Cold.
	// +required
	Type LaunchType `json:"type"`
	// reason is a CamelCase word for why: WarmPool, or why not
	// (NoWarmPool, WarmPoolUnavailable, RenderingDiffers, ...).
	// +optional
	Reason string `json:"reason,omitempty"`
	// message says it in a sentence.
	// +optional
	Message string `json:"message,omitempty"`
	// claim is the task's SandboxClaim once it exists (Warm only): its
	// UID is on the pod the claim holds, and the task's NetworkPolicy
	// selects the pod by it.
	// +optional
	Claim *ClaimReference `json:"claim,omitempty"`
}

// ClaimReference names a SandboxClaim and pins its UID.
type ClaimReference struct {
	// +required
	Name string `json:"name"`
	// +required
	UID types.UID `json:"uid"`
}

// SandboxReference names the task's agent-sandbox Sandbox.
type SandboxReference struct {
	// name of the Sandbox, in the task's namespace.
	// +required
	Name string `json:"name"`
}

// ResolvedWorkspace is the workspace configuration a task was admitted
// under: the chosen provider flattened, with the task's model override.
type ResolvedWorkspace struct {
	// sources are the git checkouts.
	// +optional
	// +listType=atomic
	Sources []Source `json:"sources,omitempty"`

	// provider is the chosen provider; its model is the task's
	// spec.model.name when that is set.
	// +required
	Provider Provider `json:"provider"`

	// env is the workspace's non-secret environment.
	// +optional
	// +listType=atomic
	Env []EnvVar `json:"env,omitempty"`

	// isolation is the workspace's default isolation.
	// +optional
	Isolation *Isolation `json:"isolation,omitempty"`

	// egress is the workspace's egress allow-list; unset allows all.
	// +optional
	Egress *Egress `json:"egress,omitempty"`

	// agentPolicy is the workspace's agent policy.
	// +optional
	AgentPolicy *AgentPolicy `json:"agentPolicy,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// CalibanTaskList is a list of CalibanTasks.
type CalibanTaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []CalibanTask `json:"items"`
}
