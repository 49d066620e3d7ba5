// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// +k8s:deepcopy-gen=package
// +groupName=extensions.agents.x-k8s.io
// +versionName=v1beta1

// Package v1beta1 is the operator's view of agent-sandbox's extensions API
// (extensions.agents.x-k8s.io/v1beta1): SandboxTemplate, SandboxWarmPool
// and SandboxClaim, with only the fields the operator sets or reads, under
// upstream's JSON names and types. The operator does not own this API: it
// writes a template and a pool per Workspace that asks for warm start, and
// a claim per task that takes the warm path (docs/warm-start.md).
//
// A template's blueprint is the Sandbox view's own spec types, so the pod a
// pool keeps warm is built with the same builders as a cold task's.
//
// The tests install agent-sandbox's own extension CRDs (test/crds/extensions,
// copied from the pinned module), and a test checks that every field of
// this view is in their schemas.
package v1beta1
