// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package helm_test installs the operator the Helm way, with the Helm Go SDK
// against a real kube-apiserver (the kwokctl test bed of test/framework):
// the caliban-crds chart, then the caliban-operator chart into
// caliban-system, with the admission component its defaults install on a
// cluster that serves the policy kinds. It runs the operator binary with the
// installed Deployment's env as the chart's ServiceAccount, takes a task to
// Running with the component in force, upgrades the release with a changed
// value, and uninstalls both charts.
package helm_test

import (
	"testing"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

// build is the operator binary, built while the cluster starts.
var build *framework.OperatorBuild

// The CRDs chart installs the caliban CRDs; the cluster starts without.
func TestMain(m *testing.M) {
	framework.MainWithOptions(m, &cluster, framework.BuildingOperator(&build), framework.Options{WithoutCalibanCRDs: true})
}

// operatorBinary waits for the build and returns the binary's path.
func operatorBinary(t testing.TB) string { return build.Binary(t) }
