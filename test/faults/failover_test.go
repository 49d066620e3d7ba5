// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// takeoverBound is how soon after the leader dies a standby must have
// taken the lease over. A standby learns of the leader's last renewal at
// its next poll of the lease and counts the lease duration from then, and
// then notices the expiry at its next poll: a lease duration plus two poll
// intervals, each a retry period stretched by client-go's jitter (up to
// 1 + JitterFactor times). The margin covers the lease requests' round
// trips on a loaded apiserver.
func takeoverBound() time.Duration {
	s := config.DefaultProcessSettings()
	s.LeaseDuration, s.LeaseGrace = leaseDuration, leaseGrace
	poll := time.Duration(float64(s.RetryPeriod()) * (1 + leaderelection.JitterFactor))
	return leaseDuration + 2*poll + 500*time.Millisecond
}

// Two replicas share the work's one lease; the leader is SIGKILLed during a
// burst. The standby takes over within takeoverBound, and the apiserver's
// audit log, which tells the replicas apart by the token each sends,
// shows that no write of the old leader happened after the new one took
// the lease, and that the new one wrote nothing before. Every task ends
// Running with its three children and its first pin.
func TestALeaderKilledDuringABurstIsReplacedInTimeAndNeverWritesAlongsideItsSuccessor(t *testing.T) {
	sz := sizes()
	ctx, bed := scenario(t, framework.Options{ImmediateSandbox: true, AuditOperator: true})
	kcA, kcB := bed.mintKubeconfig(t, ctx), bed.mintKubeconfig(t, ctx)
	idA, err := framework.CredentialID(kcA)
	if err != nil {
		t.Fatal(err)
	}
	idB, err := framework.CredentialID(kcB)
	if err != nil {
		t.Fatal(err)
	}

	a := bed.mustStartOperator(t, "op-a", "op-a", kcA)
	bed.waitHolder(t, ctx, "op-a")
	b := bed.mustStartOperator(t, "op-b", "op-b", kcB)
	framework.Eventually(t, time.Minute, func() error {
		if !strings.Contains(b.Output(), `"Standing by"`) {
			return errors.New("op-b has not said it stands by")
		}
		return nil
	})

	ns := bed.namespace(t, ctx, "failover", "model-a")
	pins := watchPins(t, ctx, bed.cluster, ns)
	bed.waitWorkspaceObserved(t, ctx, ns, 1)
	names := taskNames("a", sz.failoverBurst)
	created := make(chan error, 1)
	go func() { created <- bed.createTasks(ctx, ns, names, 16) }()
	framework.Eventually(t, time.Minute, func() error {
		if n := pins.count(); n < sz.failoverBurst/5 {
			return fmt.Errorf("%d tasks pinned, waiting for %d before the kill", n, sz.failoverBurst/5)
		}
		return nil
	})
	pinnedAtKill := pins.count()
	killAt := time.Now()
	a.Kill()
	bed.waitHolder(t, ctx, "op-b")

	if err := <-created; err != nil {
		t.Fatal(err)
	}
	bed.waitAllRunning(t, ctx, ns, names, sz.convergeTimeout)
	bed.checkChildren(t, ctx, ns, names)
	if changed := pins.changed(); len(changed) > 0 {
		t.Errorf("%d tasks changed their pin after it was written, e.g. %s", len(changed), changed[0])
	}
	if pinnedAtKill >= len(names) {
		t.Errorf("all %d tasks were pinned before the kill: the failover interrupted nothing", len(names))
	}
	if err := b.Stop(stopTimeout); err != nil {
		t.Error(err)
	}

	events, err := bed.cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	terms := termsFrom(events, map[string]string{idA: "op-a", idB: "op-b"})
	takeover := terms.taken["op-b"].Sub(killAt)
	overlaps := terms.overlaps()
	for _, problem := range overlaps {
		t.Error(problem)
	}
	if terms.writes["op-a"] == 0 || terms.writes["op-b"] == 0 {
		t.Errorf("writes by replica %v: each must have worked for the check of overlaps to mean anything", terms.writes)
	}
	if terms.taken["op-b"].IsZero() {
		t.Fatal("the audit log shows no lease taken by op-b")
	}
	if takeover > takeoverBound() {
		t.Errorf("op-b took the lease %s after op-a died, want at most %s", takeover.Round(time.Millisecond), takeoverBound())
	}
	if n := strings.Count(b.Output(), `"Leading: starting controllers"`); n != 1 {
		t.Errorf("op-b started %d terms, want 1", n)
	}
	t.Logf("op-a died after %d of %d tasks were pinned; op-b took the lease %s later (bound %s); writes: op-a %d, op-b %d, %d overlaps; %d pins watched, %d changed",
		pinnedAtKill, len(names), takeover.Round(time.Millisecond), takeoverBound(),
		terms.writes["op-a"], terms.writes["op-b"], len(overlaps), pins.count(), len(pins.changed()))
}

// waitHolder waits until the work's Lease names holder.
func (b *bed) waitHolder(t *testing.T, ctx context.Context, holder string) {
	t.Helper()
	name := config.DefaultProcessSettings().LeaseName
	framework.Eventually(t, time.Minute, func() error {
		lease, err := b.cluster.Kube.CoordinationV1().Leases(framework.OperatorNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != holder {
			return fmt.Errorf("Lease %s is held by %v, waiting for %s", name, lease.Spec.HolderIdentity, holder)
		}
		return nil
	})
}

// replicaTerms is what the audit log says of each replica: when it took
// the lease, and its writes.
type replicaTerms struct {
	// taken is the end of the first successful lease write of each
	// replica: for a standby, the start of its term.
	taken map[string]time.Time
	// writes counts each replica's writes but those to its lease.
	writes map[string]int
	// first and last are each replica's first and last write but those to
	// its lease: when the apiserver received the first and finished the
	// last.
	first, last map[string]time.Time
}

func termsFrom(events []framework.AuditEvent, replicas map[string]string) replicaTerms {
	leaseName := config.DefaultProcessSettings().LeaseName
	r := replicaTerms{taken: map[string]time.Time{}, writes: map[string]int{}, first: map[string]time.Time{}, last: map[string]time.Time{}}
	for _, e := range events {
		who, ok := replicas[e.CredentialID()]
		if !ok || !e.Write() {
			continue
		}
		if e.ObjectRef != nil && e.ObjectRef.Resource == "leases" && e.ObjectRef.Name == leaseName {
			if _, seen := r.taken[who]; !seen && e.Succeeded() {
				r.taken[who] = e.StageTimestamp
			}
			continue
		}
		r.writes[who]++
		if f, ok := r.first[who]; !ok || e.RequestReceived.Before(f) {
			r.first[who] = e.RequestReceived
		}
		if e.StageTimestamp.After(r.last[who]) {
			r.last[who] = e.StageTimestamp
		}
	}
	return r
}

// overlaps lists every way the old leader's and the new leader's writes
// overlapped: op-a must have finished its last write before op-b's term
// began, and op-b must not have written before it.
func (r replicaTerms) overlaps() []string {
	var problems []string
	began := r.taken["op-b"]
	if last := r.last["op-a"]; !began.IsZero() && last.After(began) {
		problems = append(problems, fmt.Sprintf("op-a's last write ended at %s, %s after op-b took the lease at %s",
			last.Format("15:04:05.000000"), last.Sub(began), began.Format("15:04:05.000000")))
	}
	if first, ok := r.first["op-b"]; ok && (began.IsZero() || first.Before(began)) {
		problems = append(problems, fmt.Sprintf("op-b wrote at %s, before it took the lease at %s",
			first.Format("15:04:05.000000"), began.Format("15:04:05.000000")))
	}
	return problems
}
