// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// +k8s:deepcopy-gen=package
// +groupName=agents.x-k8s.io
// +versionName=v1beta1

// Package v1beta1 is the operator's view of agent-sandbox's Sandbox
// (agents.x-k8s.io/v1beta1): only the fields the operator sets or reads, with
// upstream's JSON names and types. The operator does not own this API. It
// reads Sandboxes into this view and writes them as the apply configuration
// generated from it (pkg/generated/applyconfiguration/sandbox/v1beta1),
// whose pod and claim specs are client-go's, like every other child's.
//
// Sandbox is marked +genclient with the verbs the operator uses (get,
// patch, apply): applyconfiguration-gen generates only for what a client
// applies, and no lister or informer comes with these verbs (the operator
// lists and watches Sandboxes through a REST client of its own). The view
// has no OpenAPI definitions, so the generated ExtractSandbox and the fake
// clientset know the Sandbox as an untyped object.
//
// The tests install agent-sandbox's own CRD (test/crds, copied from the
// pinned module), and a test checks that every field of this view is in
// that CRD's schema.
package v1beta1
