// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package latesandbox_test runs the real caliban-operator binary against a
// cluster that does not serve agent-sandbox's Sandbox API when the operator
// starts (test/framework's Options.WithoutSandbox), then installs it: the
// operator must start anyway, keep tasks waiting in Provisioning, and pick
// the API up without a restart.
//
// The package has a cluster of its own because installing the Sandbox CRD
// changes the cluster for every test in it.
package latesandbox_test

import (
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

// build is the operator binary, built once while the cluster starts.
var build *framework.OperatorBuild

func TestMain(m *testing.M) {
	framework.MainWithOptions(m, &cluster, framework.BuildingOperator(&build), framework.Options{WithoutSandbox: true})
}

// startOperator runs the operator binary as its Deployment would, watching
// only namespace ns, without leader election, metrics on a free loopback
// port; env entries ("NAME=value") are added. It needs nothing of the
// cluster to start, so it starts before agent-sandbox is installed. It is
// stopped with SIGTERM (SIGKILL after 20 s, which fails the test) when the
// test ends; its output is shown if the test failed or
// SHOW_OPERATOR_OUTPUT is set.
func startOperator(t *testing.T, ns string, env ...string) *framework.Operator {
	t.Helper()
	op, err := framework.RunOperator(t, framework.OperatorOptions{
		Name:        "latesandbox",
		Binary:      build.Binary(t),
		Env:         cluster.NamespaceOperatorEnv(ns, env...),
		StopTimeout: 20 * time.Second,
		CheckStop:   framework.StopInTime,
	})
	if err != nil {
		t.Fatal(err)
	}
	return op
}
