// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package monitoring_test holds the alerts and the Grafana dashboard of
// manifests/monitoring to the operator that feeds them: it runs the
// operator binary, with leader election on, against a real kube-apiserver
// (the kwokctl test bed of test/framework), takes a task to Running, and
// checks that /metrics exports every series the rules and the dashboard
// read. A rule over a series nobody exports never fires, and a panel over
// one stays empty, without any other test noticing.
package monitoring_test

import (
	"testing"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

// build is the operator binary, built while the cluster starts.
var build *framework.OperatorBuild

func TestMain(m *testing.M) { framework.MainBuildingOperator(m, &cluster, &build) }
