// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

func TestOneOfTwoOperatorsLeadsAndTheOtherTakesOver(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	const (
		lease         = "caliban-operator-it"
		leaseDuration = 6 * time.Second
		leaseGrace    = 2 * time.Second
		// The bound on a takeover after the leader dies: the lease
		// duration, the grace, and a margin for a candidate's retry period
		// (jittered) on a busy machine.
		takeoverWithin = leaseDuration + leaseGrace + 3*time.Second
	)
	a := startOperator(t, "op-a", ns, election(ns, lease, "op-a")...)
	waitForHolder(t, ns, lease, "op-a", settleTimeout)
	b := startOperator(t, "op-b", ns, election(ns, lease, "op-b")...)
	framework.Eventually(t, settleTimeout, func() error {
		for _, line := range strings.Split(b.Output(), "\n") {
			if strings.Contains(line, `"Standing by"`) && strings.Contains(line, "op-a") {
				return nil
			}
		}
		return errors.New("op-b has not said it stands by for op-a")
	})

	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")
	createTask(t, ns, "first", "demo")
	waitForTask(t, ns, "first", settleTimeout, isRunning)
	waitForEvent(t, ns, "first", corev1.EventTypeNormal, "PhaseChanged", nil)
	assertReportedBy(t, ns, "first", "op-a")

	held := getLease(t, ns, lease)
	if held.Spec.LeaseDurationSeconds == nil || *held.Spec.LeaseDurationSeconds != int32(leaseDuration/time.Second) {
		t.Errorf("Lease duration %v, want %s", held.Spec.LeaseDurationSeconds, leaseDuration)
	}
	am, err := a.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	bm, err := b.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := am.Sum("leader_election_master_status", map[string]string{"name": lease}); v != 1 {
		t.Errorf("op-a leader_election_master_status %v, want 1", v)
	}
	if v, _ := bm.Sum("leader_election_master_status", map[string]string{"name": lease}); v != 0 {
		t.Errorf("op-b leader_election_master_status %v, want 0", v)
	}
	// Leader or standby, each says which build it runs (the test's binary
	// is built without make's -ldflags stamp).
	for name, m := range map[string]metrics{"op-a": am, "op-b": bm} {
		if v, ok := m.Sum("caliban_build_info", map[string]string{"version": "dev", "commit": "unknown"}); !ok || v != 1 {
			t.Errorf("%s caliban_build_info{version=dev,commit=unknown} = %v (found %v), want 1", name, v, ok)
		}
	}
	if n, _ := am.Sum("caliban_controller_syncs_total", nil); n == 0 {
		t.Error("the leader op-a has synced nothing")
	}
	if n, _ := bm.Sum("caliban_controller_syncs_total", nil); n != 0 {
		t.Errorf("the standby op-b synced %v times, want none", n)
	}
	if n, _ := bm.Sum("workqueue_adds_total", nil); n != 0 {
		t.Errorf("the standby op-b queued %v items, want none", n)
	}
	if strings.Contains(b.Output(), "phase changed") {
		t.Errorf("the standby op-b changed a phase:\n%s", b.Output())
	}
	if code, body, err := b.Get("/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("the standby's /readyz: %d %q %v", code, body, err)
	}
	if t.Failed() {
		return
	}

	// The leader dies without releasing the lease: the standby takes it
	// once it expires.
	killed := time.Now()
	a.Kill()
	waitForHolder(t, ns, lease, "op-b", takeoverWithin)
	t.Logf("op-b took the lease %s after op-a was killed", time.Since(killed).Round(100*time.Millisecond))
	if l := getLease(t, ns, lease); l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions < 1 {
		t.Errorf("Lease transitions %v after a takeover, want at least 1", l.Spec.LeaseTransitions)
	}
	createTask(t, ns, "second", "demo")
	waitForTask(t, ns, "second", settleTimeout, isRunning)
	waitForEvent(t, ns, "second", corev1.EventTypeNormal, "PhaseChanged", nil)
	assertReportedBy(t, ns, "second", "op-b")

	// A clean shutdown releases the lease at once.
	exit := make(chan int, 1)
	go func() { exit <- stop(t, b) }()
	waitForHolder(t, ns, lease, "", 2*time.Second)
	if code := <-exit; code != 0 {
		t.Errorf("op-b exited with %d after SIGTERM, want 0", code)
	}
}

func TestALeaderThatLosesItsLeaseStandsByAndLeadsAgain(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	const lease = "caliban-operator-it"
	op := startOperator(t, "op-a", ns, election(ns, lease, "op-a")...)
	waitForHolder(t, ns, lease, "op-a", settleTimeout)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")
	createTask(t, ns, "first-term", "demo")
	waitForTask(t, ns, "first-term", settleTimeout, isRunning)

	// Another candidate takes the lease over and keeps renewing it: op-a
	// fails to renew, and must stop its controllers without exiting.
	stopIntruder := holdLease(t, ns, lease, "intruder")
	var m metrics
	framework.Eventually(t, settleTimeout, func() error {
		select {
		case <-op.Done():
			return fmt.Errorf("op-a exited after losing the lease: %v", op.ProcessState())
		default:
		}
		var err error
		if m, err = op.Metrics(); err != nil {
			return err
		}
		if v, _ := m.Sum("leader_election_master_status", map[string]string{"name": lease}); v != 0 {
			return fmt.Errorf("op-a's leader_election_master_status is %v, want 0 once the lease is lost", v)
		}
		return nil
	})
	if _, ok := m.Sum("caliban_tasks", nil); ok {
		t.Error("a standby exports task gauges from a cache it no longer runs")
	}
	createTask(t, ns, "second-term", "demo")
	consistently(t, 2*time.Second, func() error {
		task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "second-term", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if task.Status.Phase != "" {
			return fmt.Errorf("a standby wrote the status of a task: %s", statusJSON(task.Status))
		}
		return nil
	})

	// The intruder goes away; op-a leads again with fresh controllers.
	stopIntruder()
	waitForHolder(t, ns, lease, "op-a", settleTimeout)
	waitForTask(t, ns, "second-term", settleTimeout, isRunning)
	framework.Eventually(t, settleTimeout, func() error {
		m, err := op.Metrics()
		if err != nil {
			return err
		}
		if v, _ := m.Sum("caliban_tasks", map[string]string{"phase": "Running"}); v != 2 {
			return fmt.Errorf("caliban_tasks{phase=Running} = %v in the second term, want 2", v)
		}
		return nil
	})
	if code := stop(t, op); code != 0 {
		t.Errorf("op-a exited with %d after SIGTERM, want 0", code)
	}
	waitForHolder(t, ns, lease, "", settleTimeout)
}

// election is the environment of an operator replica named pod that
// campaigns for lease in ns, with a 6 s lease and a 2 s grace.
func election(ns, lease, pod string) []string {
	return []string{
		"CALIBAN_LEADER_ELECTION=true",
		"CALIBAN_LEASE_NAMESPACE=" + ns,
		"CALIBAN_LEASE_NAME=" + lease,
		"CALIBAN_LEASE_DURATION_SECONDS=6",
		"CALIBAN_LEASE_GRACE_SECONDS=2",
		"POD_NAME=" + pod,
		"CONTROLLER_POD_NAME=" + pod,
	}
}

// holdLease takes the Lease for holder and renews it every second until
// the returned function is called, which stops renewing and returns once
// the renewals have stopped; the lease then expires on its own.
func holdLease(t testing.TB, ns, name, holder string) (stop func()) {
	t.Helper()
	renew := func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l, err := cluster.Kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			now := metav1.NewMicroTime(time.Now())
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
				l.Spec.HolderIdentity = &holder
				l.Spec.AcquireTime = &now
			}
			l.Spec.RenewTime = &now
			_, err = cluster.Kube.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
			return err
		})
	}
	if err := renew(); err != nil {
		t.Fatalf("taking Lease %s: %v", name, err)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				_ = renew()
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			<-stopped
		})
	}
	t.Cleanup(stop)
	return stop
}

func getLease(t testing.TB, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := cluster.Kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading Lease %s/%s: %v", ns, name, err)
	}
	return l
}

// waitForHolder polls the Lease until holder holds it ("" = released).
func waitForHolder(t testing.TB, ns, name, holder string, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, func() error {
		l, err := cluster.Kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got := ""
		if l.Spec.HolderIdentity != nil {
			got = *l.Spec.HolderIdentity
		}
		if got != holder {
			return fmt.Errorf("Lease %s held by %q, want %q", name, got, holder)
		}
		return nil
	})
}

// assertReportedBy checks that every Event about the task names instance
// as its reporting instance.
func assertReportedBy(t testing.TB, ns, task, instance string) {
	t.Helper()
	events := eventsAbout(t, ns, "CalibanTask", task)
	if len(events) == 0 {
		t.Errorf("no Events about %s", task)
	}
	for _, e := range events {
		if e.ReportingInstance != instance {
			t.Errorf("Event %s %q about %s reported by %q, want %q", e.Reason, e.Note, task, e.ReportingInstance, instance)
		}
	}
}
