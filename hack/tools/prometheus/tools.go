// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins Prometheus' promtool, which runs the alerting rules'
// unit tests (test/monitoring). It is a module of its own, apart from the
// operator's and from hack/tools, so that Prometheus' many dependencies
// move none of the versions either is built with.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
