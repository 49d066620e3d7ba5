// +k8s:deepcopy-gen=package
// +groupName=agents.x-k8s.io
// +versionName=v1beta1

// Package v1beta1 is the operator's view of agent-sandbox's Sandbox
// (agents.x-k8s.io/v1beta1): only the fields the operator sets or reads, with
// upstream's JSON names and types. The operator does not own this API; it
// applies Sandboxes through a REST client. The tests install agent-sandbox's
// own CRD (test/crds, copied from the pinned module), and a test checks that
// every field of this view is in that CRD's schema.
package v1beta1
