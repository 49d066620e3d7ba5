// +k8s:deepcopy-gen=package
// +groupName=agents.x-k8s.io
// +versionName=v1beta1

// Package v1beta1 is the operator's view of agent-sandbox's Sandbox
// (agents.x-k8s.io/v1beta1): only the fields the operator sets or reads, with
// upstream's JSON names and types. The operator does not own this API; it
// applies Sandboxes through the dynamic client. The CRD generated from these
// types is a test fixture only (test/crds), never shipped.
package v1beta1
