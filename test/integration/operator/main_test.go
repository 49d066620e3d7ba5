// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package operator_test runs the real caliban-operator binary, as its
// Deployment would, against a real kube-apiserver (the kwokctl test bed of
// test/framework) and checks what it leaves in the API: task and workspace
// status, children, Events, the Lease, metrics.
//
// Each test works in a namespace of its own with an operator process of its
// own, restricted to that namespace by CALIBAN_WATCH_NAMESPACE, so tests can
// run in parallel without seeing each other's operators. agent-sandbox is
// played by the kwok Stages in test/stages: a Sandbox turns Ready about
// 300 ms after it is created unless a test annotates it otherwise.
//
// A failing test shows the output of its operator processes and what the
// kwok controller complained about; SHOW_OPERATOR_OUTPUT=1 shows the
// operators' output for passing tests too.
package operator_test

import (
	"flag"
	"strconv"
	"testing"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

// build is the operator binary, built once per package run while the
// cluster starts; tests wait for it in operatorBinary.
var build *framework.OperatorBuild

func TestMain(m *testing.M) { framework.MainWith(m, &cluster, buildOperator) }

// parallelTests is how many tests run at once unless -test.parallel says
// otherwise. The tests mostly wait on the cluster and on operator
// processes, so go test's default (GOMAXPROCS, 2 on a small machine) would
// serialise them for no gain.
const parallelTests = 16

// buildOperator starts `go build ./cmd/caliban-operator` into a temporary
// directory and returns the teardown that removes it. It also raises the
// default -test.parallel.
func buildOperator() (func(), error) {
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(parallelTests)); err != nil {
			return nil, err
		}
	}
	return framework.BuildingOperator(&build)()
}

// operatorBinary waits for the build and returns the binary's path.
func operatorBinary(t testing.TB) string { return build.Binary(t) }
