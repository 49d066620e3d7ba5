// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package monitoring_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caliban-ai/caliban-operator/test/framework"
	"github.com/caliban-ai/caliban-operator/test/monitoring"
)

const (
	podName = "monitoring-0"
	// leaseName is the one the rules and the dashboard select.
	leaseName = "caliban-operator"
)

// How long the scrape may take to show every series once the operator
// leads: the term's gauges come with its caches.
const exportedWithin = 20 * time.Second

func TestEverySeriesTheAlertsAndTheDashboardReadIsExported(t *testing.T) {
	ctx := context.Background()
	referenced, err := monitoring.ReferencedMetrics(cluster.Root)
	if err != nil {
		t.Fatal(err)
	}
	ns := cluster.Namespace(t, nil)
	op := startOperator(t, ns)
	framework.Eventually(t, time.Minute, func() error {
		lease, err := cluster.Kube.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := lease.Spec.HolderIdentity; h == nil || *h != podName {
			return fmt.Errorf("lease holder %v, want %s", h, podName)
		}
		return nil
	})

	// Before any Workspace or task: a healthy operator that has done
	// nothing yet must already export what every panel and alert reads,
	// or they show "No data" until something happens.
	var missing []string
	deadline := time.Now().Add(exportedWithin)
	for {
		m, err := op.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		exported := map[string]bool{}
		for _, s := range m {
			exported[s.Name] = true
		}
		missing = missing[:0]
		for _, name := range slices.Sorted(maps.Keys(referenced)) {
			if !exported[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, name := range missing {
		t.Errorf("%s is not exported by the operator, yet it is read by %s", name, strings.Join(referenced[name], " and "))
	}
	if len(missing) > 0 {
		t.Logf("%d of the %d series the rules and the dashboard read are exported; missing: %v", len(referenced)-len(missing), len(referenced), missing)
	}
}

// startOperator runs the operator binary as the Deployment would, leader
// election on, restricted to ns (where its Lease is too) and serving
// metrics on a free loopback port, and fails the test unless it serves.
// It is stopped with SIGTERM when the test ends, which must end it cleanly
// within 30 s.
func startOperator(t *testing.T, ns string) *framework.Operator {
	t.Helper()
	op, err := framework.RunOperator(t, framework.OperatorOptions{
		Name:   "monitoring",
		Binary: build.Binary(t),
		Env: []string{
			"KUBECONFIG=" + cluster.Kubeconfig,
			"CALIBAN_WATCH_NAMESPACE=" + ns,
			"CALIBAN_LEADER_ELECTION=true",
			"CALIBAN_LEASE_NAMESPACE=" + ns,
			"CALIBAN_LEASE_NAME=" + leaseName,
			"CALIBAN_LEASE_DURATION_SECONDS=6",
			"CALIBAN_LEASE_GRACE_SECONDS=2",
			"POD_NAME=" + podName,
			"CONTROLLER_POD_NAME=" + podName,
		},
		StopTimeout: 30 * time.Second,
		CheckStop:   framework.StopCleanly,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.WaitServing(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return op
}
