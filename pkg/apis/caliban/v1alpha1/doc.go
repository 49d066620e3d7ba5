// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=caliban.caliban-ai.dev
// +versionName=v1alpha1

// Package v1alpha1 is the v1alpha1 version of the caliban.caliban-ai.dev API:
// the Workspace and CalibanTask custom resources.
package v1alpha1
