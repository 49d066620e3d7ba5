// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package faults_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// A control-plane component restarts while tasks arrive: kube-apiserver
// (every connection and watch of the operator breaks, and the apiserver
// comes back with a fresh watch cache) or etcd (the apiserver stays up but
// can neither read nor write). The same operator process rides it out: its
// /readyz turns 503 while it cannot reach the apiserver's storage and 200
// again after, and every task, those created before, during and after the
// outage, ends Running with its three children and the pin it was first
// given.
func TestAnAPIServerRestartMidBurstLosesNothing(t *testing.T) {
	rideOutRestart(t, framework.KubeAPIServer)
}

func TestAnEtcdRestartMidBurstLosesNothing(t *testing.T) {
	rideOutRestart(t, framework.Etcd)
}

// outageAtLeast keeps a component down at least this long once the
// operator reports it unready, so that the outage is more than a blip for
// every client.
const outageAtLeast = 2 * time.Second

func rideOutRestart(t *testing.T, component string) {
	sz := sizes()
	ctx, bed := scenario(t, framework.Options{ImmediateSandbox: true, AuditOperator: true})
	op := bed.mustStartOperator(t, "op-0", "op-0", "")
	ns := bed.namespace(t, ctx, "restart", "model-a")
	pins := watchPins(t, ctx, bed.cluster, ns)
	bed.waitWorkspaceObserved(t, ctx, ns, 1)
	waitReadyz(t, op, http.StatusOK, time.Minute)

	// The burst's creator retries through the outage, as a client would.
	before := taskNames("a", sz.restartBurst)
	created := make(chan error, 1)
	go func() { created <- bed.createTasks(ctx, ns, before, 16) }()
	framework.Eventually(t, time.Minute, func() error {
		if n := pins.count(); n < sz.restartBurst/10 {
			return fmt.Errorf("%d tasks pinned, waiting for %d before the restart", n, sz.restartBurst/10)
		}
		return nil
	})

	stopAt := time.Now()
	pinnedAtStop := pins.count()
	took, err := bed.cluster.StopComponent(component, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	unready := waitReadyz(t, op, http.StatusServiceUnavailable, leaseDuration+30*time.Second)
	sleepCtx(ctx, outageAtLeast)
	if err := bed.cluster.StartComponent(ctx, component); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	ready := waitReadyz(t, op, http.StatusOK, 2*time.Minute)
	if op.Exited() {
		t.Fatalf("operator %s exited during the %s restart", op.Name, component)
	}

	after := taskNames("b", sz.restartBurst/5)
	if err := bed.createTasks(ctx, ns, after, 16); err != nil {
		t.Fatal(err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	all := append(append([]string{}, before...), after...)
	bed.waitAllRunning(t, ctx, ns, all, sz.convergeTimeout)
	bed.checkChildren(t, ctx, ns, all)
	if changed := pins.changed(); len(changed) > 0 {
		t.Errorf("%d tasks changed their pin after it was written, e.g. %s", len(changed), changed[0])
	}
	if pinnedAtStop >= len(before) {
		t.Errorf("all %d tasks of the burst were pinned before %s stopped: the restart interrupted nothing", len(before), component)
	}
	if op.Exited() {
		t.Errorf("operator %s exited", op.Name)
	}
	events, err := bed.cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	lists := 0
	for _, e := range events {
		if e.Verb == "list" && e.Stage == "ResponseComplete" && e.RequestReceived.After(back) {
			lists++
		}
	}
	t.Logf("%s stopped %s after %d of %d tasks were pinned (it took %s to exit); the operator was unready %s after the stop; %s was back %s after the stop and the operator ready %s after that, having sent %d lists; the process ran on; %d tasks, %d pins watched, %d changed",
		component, stopAt.Format("15:04:05.000"), pinnedAtStop, len(before), took.Round(time.Millisecond),
		unready.Sub(stopAt).Round(time.Millisecond), component, back.Sub(stopAt).Round(time.Millisecond),
		ready.Sub(back).Round(time.Millisecond), lists, len(all), pins.count(), len(pins.changed()))
	if err := op.Stop(stopTimeout); err != nil {
		t.Error(err)
	}
}

// waitReadyz polls op's /readyz every 50 ms until it answers code, and
// returns when it first did.
func waitReadyz(t *testing.T, op *framework.Operator, code int, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		got, body, err := op.Get("/readyz")
		if err == nil && got == code {
			return time.Now()
		}
		last = fmt.Sprintf("%d %q %v", got, body, err)
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("operator %s: /readyz never answered %d within %s; last answer %s", op.Name, code, timeout, last)
	return time.Time{}
}
