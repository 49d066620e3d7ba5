// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

// +genclient
// +genclient:onlyVerbs=get,list,watch,create,delete,patch,apply
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=sandboxtemplate
// +kubebuilder:storageversion

// SandboxTemplate is a Sandbox blueprint that warm pools and claims
// instantiate.
type SandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxTemplateSpec `json:"spec"`
}

// NetworkPolicyManagement says whether agent-sandbox writes a NetworkPolicy
// for the template's pods.
// +kubebuilder:validation:Enum=Managed;Unmanaged
type NetworkPolicyManagement string

// NetworkPolicyUnmanaged leaves the pods' isolation to whoever made the
// template: agent-sandbox writes no policy and leaves the pod's DNS alone.
const NetworkPolicyUnmanaged NetworkPolicyManagement = "Unmanaged"

// SandboxTemplateSpec is the blueprint (the fields a Sandbox's spec shares
// with it) and how agent-sandbox treats it.
type SandboxTemplateSpec struct {
	// podTemplate describes the pod of every Sandbox made from the template.
	// +required
	PodTemplate sandboxv1beta1.PodTemplate `json:"podTemplate"`

	// volumeClaimTemplates are the Sandboxes' volume claims.
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []sandboxv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// service, when true, gives every Sandbox its headless Service.
	// +optional
	Service *bool `json:"service,omitempty"`

	// networkPolicyManagement is Managed (agent-sandbox's default) or
	// Unmanaged.
	// +optional
	NetworkPolicyManagement NetworkPolicyManagement `json:"networkPolicyManagement,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// SandboxTemplateList is a list of SandboxTemplates.
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []SandboxTemplate `json:"items"`
}

// +genclient
// +genclient:onlyVerbs=get,list,watch,create,delete,patch,apply
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=swp
// +kubebuilder:storageversion

// SandboxWarmPool keeps replicas Sandboxes of a template ready for claims.
type SandboxWarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxWarmPoolSpec `json:"spec"`

	// +optional
	Status SandboxWarmPoolStatus `json:"status,omitempty"`
}

// UpdateStrategyType says what a pool does with its unclaimed Sandboxes
// once its template changes.
// +kubebuilder:validation:Enum=Recreate;OnReplenish
type UpdateStrategyType string

// UpdateStrategyRecreate deletes unclaimed Sandboxes made from another
// blueprint at once, and claims never take one.
const UpdateStrategyRecreate UpdateStrategyType = "Recreate"

// SandboxWarmPoolSpec is the pool's size and template.
type SandboxWarmPoolSpec struct {
	// replicas is how many unclaimed Sandboxes the pool keeps.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// sandboxTemplateRef names the template, in the pool's namespace.
	// +required
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef"`

	// updateStrategy says how the pool rolls when its template changes.
	// +optional
	UpdateStrategy *SandboxWarmPoolUpdateStrategy `json:"updateStrategy,omitempty"`
}

// SandboxTemplateRef names a SandboxTemplate.
type SandboxTemplateRef struct {
	// +required
	Name string `json:"name"`
}

// SandboxWarmPoolUpdateStrategy is the pool's update strategy.
type SandboxWarmPoolUpdateStrategy struct {
	// +optional
	Type UpdateStrategyType `json:"type,omitempty"`
}

// SandboxWarmPoolStatus is written by agent-sandbox's controller. It has
// no conditions.
type SandboxWarmPoolStatus struct {
	// replicas counts the pool's unclaimed Sandboxes, ready or not.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas counts those whose Ready condition is True.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// observedGeneration is the generation the counts were taken at.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// SandboxWarmPoolList is a list of SandboxWarmPools.
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []SandboxWarmPool `json:"items"`
}

// +genclient
// +genclient:onlyVerbs=get,list,watch,create,delete,patch,apply
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sandboxclaim
// +kubebuilder:storageversion

// SandboxClaim asks for one Sandbox from a warm pool: an unclaimed one when
// the pool has one, else a new one from the pool's template.
type SandboxClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxClaimSpec `json:"spec"`

	// +optional
	Status SandboxClaimStatus `json:"status,omitempty"`
}

// SandboxClaimSpec names the pool. The operator sets no env and no volume
// claim templates: either sends the claim past the pool.
type SandboxClaimSpec struct {
	// warmPoolRef names the pool, in the claim's namespace.
	// +required
	WarmPoolRef SandboxWarmPoolRef `json:"warmPoolRef"`
}

// SandboxWarmPoolRef names a SandboxWarmPool.
type SandboxWarmPoolRef struct {
	// +required
	Name string `json:"name"`
}

// SandboxClaimStatus is written by agent-sandbox's controller.
type SandboxClaimStatus struct {
	// conditions include Ready, forwarded from the Sandbox once there is
	// one.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// sandbox is the Sandbox the claim holds.
	// +optional
	Sandbox SandboxStatus `json:"sandbox,omitempty"`
}

// SandboxStatus names the claim's Sandbox.
type SandboxStatus struct {
	// name is the Sandbox's name: the pool's generated one when the claim
	// adopted a warm Sandbox, the claim's own when it made a new one.
	// +optional
	Name string `json:"name,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// SandboxClaimList is a list of SandboxClaims.
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []SandboxClaim `json:"items"`
}
