// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package tracing_test runs the real caliban-operator binary against the
// test bed with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP
// receiver in the test (test/framework/otlp), takes a task to Running, and
// reads back the spans the operator sent: the task's syncs with its UID,
// in one trace across a restart, the phase going to Running, and a child
// span per apiserver request, informers' excluded.
//
// A failing test shows the operators' output; SHOW_OPERATOR_OUTPUT=1 shows
// it for passing tests too.
package tracing_test

import (
	"testing"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

// build is the operator binary, built once while the cluster starts.
var build *framework.OperatorBuild

func TestMain(m *testing.M) { framework.MainBuildingOperator(m, &cluster, &build) }
