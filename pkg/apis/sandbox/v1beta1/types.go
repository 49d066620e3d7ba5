// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:onlyVerbs=get,patch,apply
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sandbox
// +kubebuilder:storageversion

// Sandbox is a single stateful pod with stable identity, persistent volumes
// and, optionally, a headless Service, managed by agent-sandbox.
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxSpec `json:"spec"`

	// +optional
	Status SandboxStatus `json:"status,omitempty"`
}

// OperatingMode says whether the Sandbox's pod should exist.
// +kubebuilder:validation:Enum=Running;Suspended
type OperatingMode string

// Operating modes.
const (
	OperatingModeRunning   OperatingMode = "Running"
	OperatingModeSuspended OperatingMode = "Suspended"
)

// SandboxSpec is the desired state of a Sandbox.
type SandboxSpec struct {
	// podTemplate describes the pod agent-sandbox creates.
	// +required
	PodTemplate PodTemplate `json:"podTemplate"`

	// volumeClaimTemplates become PersistentVolumeClaims named
	// <template>-<sandbox>, mounted in the pod as volumes named after the
	// template. Items carry no apiVersion or kind.
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// service, when true, makes agent-sandbox create a headless Service named
	// after the Sandbox and report status.serviceFQDN.
	// +optional
	Service *bool `json:"service,omitempty"`

	// operatingMode is Running or Suspended.
	// +optional
	// +kubebuilder:default=Running
	OperatingMode OperatingMode `json:"operatingMode,omitempty"`
}

// PodTemplate is the pod agent-sandbox creates for the Sandbox.
type PodTemplate struct {
	// metadata holds the pod's labels and annotations.
	// +optional
	Metadata PodMetadata `json:"metadata"`

	// spec is the pod's spec.
	// +required
	Spec corev1.PodSpec `json:"spec"`
}

// PodMetadata is the subset of object metadata a pod template may carry.
type PodMetadata struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PersistentVolumeClaimTemplate is a claim template without type metadata.
type PersistentVolumeClaimTemplate struct {
	// +optional
	Metadata EmbeddedObjectMetadata `json:"metadata,omitempty"`

	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// EmbeddedObjectMetadata is the metadata a claim template may carry.
type EmbeddedObjectMetadata struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// SandboxStatus is written by agent-sandbox's controller.
type SandboxStatus struct {
	// serviceFQDN is <service>.<namespace>.svc.<cluster domain>, set while
	// the Sandbox's Service exists.
	// +optional
	ServiceFQDN string `json:"serviceFQDN,omitempty"`

	// service is the name of the Sandbox's Service.
	// +optional
	Service string `json:"service,omitempty"`

	// conditions include Ready, True once the pod is ready and the Service
	// (when requested) exists. The list is atomic upstream.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// selector selects the Sandbox's pod.
	// +optional
	Selector string `json:"selector,omitempty"`

	// podIPs are the pod's IPs.
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`

	// nodeName is the node the pod runs on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// SandboxList is a list of Sandboxes.
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Sandbox `json:"items"`
}
