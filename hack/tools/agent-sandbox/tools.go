// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins agent-sandbox's controller for the test bed. It is a
// module of its own, apart from hack/tools, so that adding it moves none of
// the dependencies the Kubernetes binaries are built with.
package tools

import (
	_ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
)
