// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package monitoring_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
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
// metrics on a free loopback port. A port taken between choosing and
// binding it makes the operator exit at once: it is tried again on
// another, rather than fail the test on the machine's luck.
func startOperator(t *testing.T, ns string) *framework.Operator {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addr, err := framework.FreeLoopbackAddr()
		if err != nil {
			t.Fatal(err)
		}
		op, err := framework.StartOperator("monitoring", build.Binary(t), addr,
			"KUBECONFIG="+cluster.Kubeconfig,
			"CALIBAN_WATCH_NAMESPACE="+ns,
			"CALIBAN_LEADER_ELECTION=true",
			"CALIBAN_LEASE_NAMESPACE="+ns,
			"CALIBAN_LEASE_NAME="+leaseName,
			"CALIBAN_LEASE_DURATION_SECONDS=6",
			"CALIBAN_LEASE_GRACE_SECONDS=2",
			"POD_NAME="+podName,
			"CONTROLLER_POD_NAME="+podName,
		)
		if err != nil {
			t.Fatal(err)
		}
		serving := waitServing(op)
		if serving || attempt == 3 || !strings.Contains(op.Output(), "address already in use") {
			t.Cleanup(func() {
				if err := op.Stop(30 * time.Second); err != nil {
					t.Errorf("%v\n%s", err, op.Output())
				}
				if t.Failed() {
					t.Logf("operator output:\n%s", op.Output())
				}
			})
			if !serving {
				t.Fatalf("the operator does not serve %s:\n%s", addr, op.Output())
			}
			return op
		}
		t.Logf("metrics address %s was taken meanwhile; trying another port", addr)
	}
}

// waitServing waits until the operator answers /healthz, and reports
// whether it did before it exited or 30 seconds passed.
func waitServing(op *framework.Operator) bool {
	client := http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if op.Exited() {
			return false
		}
		resp, err := client.Get("http://" + op.MetricsAddr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
	}
	return false
}
