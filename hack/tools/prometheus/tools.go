// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins Prometheus' promtool, which runs the alerting rules'
// unit tests (test/monitoring). It is a module of its own, apart from the
// operator's and from hack/tools, so that promtool is built with the
// versions Prometheus' own go.mod selects, which neither the operator's
// requirements nor hack/tools' replace directives move, and so that
// promtool's command and what only it needs (its service-discovery
// clients among them) stay out of the operator's go.mod.
//
// It does not keep Prometheus out of the operator's module:
// test/monitoring parses the rules' and the dashboard's PromQL with
// Prometheus' own packages (promql/parser, model/labels), so the
// operator's go.mod requires github.com/prometheus/prometheus too (at the
// same version today; `go mod why -m github.com/prometheus/prometheus`),
// and Prometheus' requirements take part in selecting the operator's
// versions: upgrading it there can raise those of client_golang, common,
// OpenTelemetry or gRPC that the operator is built with.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
