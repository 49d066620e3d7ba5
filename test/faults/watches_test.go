// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package faults_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// watchOutage is how long the operator's link to the apiserver stays down
// after each cut: tasks created meanwhile reach it only through a watch
// opened again, or a list.
const watchOutage = 2 * time.Second

// The operator reaches the apiserver through a proxy that cuts every
// connection, its watches included, and refuses new ones for a while;
// tasks are created while it is cut off. Each time, every task converges
// (nothing missed), and the apiserver's audit log shows each task's
// children and status written exactly as often as for the tasks created
// before any cut (nothing written twice). The lease outlives the outages,
// so what recovers is the informers, not a new term.
func TestLostWatchesMissNothingAndWriteNothingTwice(t *testing.T) {
	sz := sizes()
	ctx, bed := scenario(t, framework.Options{ImmediateSandbox: true, AuditOperator: true})
	proxy, err := framework.StartProxy(strings.TrimPrefix(bed.cluster.Config.Host, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	kc, err := framework.KubeconfigVia(bed.kubeconfig, proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	op := bed.mustStartOperator(t, "op-0", "op-0", kc, "CALIBAN_LEASE_DURATION_SECONDS=15", "CALIBAN_LEASE_GRACE_SECONDS=5")
	ns := bed.namespace(t, ctx, "watches", "model-a")
	pins := watchPins(t, ctx, bed.cluster, ns)
	bed.waitWorkspaceObserved(t, ctx, ns, 1)

	baseline := taskNames("a", sz.watchBatch)
	if err := bed.createTasks(ctx, ns, baseline, 16); err != nil {
		t.Fatal(err)
	}
	bed.waitAllRunning(t, ctx, ns, baseline, sz.convergeTimeout)

	var during []string
	var firstCut time.Time
	cut := 0
	for i := range sz.watchCuts {
		// The operator is idle: no write of its is in flight to be cut
		// and sent again, which would be the network's doing, not its.
		sleepCtx(ctx, time.Second)
		if i == 0 {
			firstCut = time.Now()
		}
		cut += proxy.Cut(true)
		batch := taskNames(fmt.Sprintf("b%02d", i), sz.watchBatch)
		if err := bed.createTasks(ctx, ns, batch, 16); err != nil {
			t.Fatal(err)
		}
		sleepCtx(ctx, watchOutage)
		proxy.Restore()
		during = append(during, batch...)
		bed.waitAllRunning(t, ctx, ns, during, sz.convergeTimeout)
	}
	all := append(append([]string{}, baseline...), during...)
	bed.checkChildren(t, ctx, ns, all)
	if changed := pins.changed(); len(changed) > 0 {
		t.Errorf("%d tasks changed their pin after it was written, e.g. %s", len(changed), changed[0])
	}
	if n := strings.Count(op.Output(), `"Leading: starting controllers"`); n != 1 {
		t.Errorf("the operator started %d terms, want 1: the cuts were to end watches, not the lease", n)
	}

	events, err := bed.cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	writes := writesByTask(events, ns, all)
	want, odd := commonPattern(writes, baseline)
	if len(odd) > 0 {
		t.Errorf("the tasks created before any cut were written differently: %v", odd)
	}
	// The operator's contract: each child applied once, the status twice
	// (the pin with Provisioning, then Running).
	once := map[string]int{"calibantasks/status": 2, builders.SandboxResource: 1, "serviceaccounts": 1, "networkpolicies": 1}
	if diff := cmp.Diff(once, want); diff != "" {
		t.Errorf("the tasks created before any cut were written (-contract +written):\n%s", diff)
	}
	for _, name := range during {
		if diff := cmp.Diff(want, writes[name]); diff != "" {
			t.Errorf("task %s, created while the operator was cut off, was written otherwise than the tasks before (-before +it):\n%s", name, diff)
		}
	}
	var watches, lists int
	for _, e := range events {
		if e.RequestReceived.Before(firstCut) {
			continue
		}
		switch {
		case e.Verb == "watch" && e.Stage == "ResponseStarted":
			watches++
		case e.Verb == "list" && e.Stage == "ResponseComplete":
			lists++
		}
	}
	if watches < sz.watchCuts {
		t.Errorf("%d watches opened after the first cut, want at least one per cut (%d): the cuts did not end the watches", watches, sz.watchCuts)
	}
	t.Logf("%d cuts (%d connections) of %s; %d tasks created while cut off and %d before, all Running; after the first cut the operator opened %d watches and sent %d lists; every task written %v; %d pins watched, %d changed",
		sz.watchCuts, cut, watchOutage, len(during), len(baseline), watches, lists, want, pins.count(), len(pins.changed()))
	if err := op.Stop(stopTimeout); err != nil {
		t.Error(err)
	}
}

// writesByTask counts, from the audit log, the operator's writes of the
// named tasks' status and children in ns, by resource: task → resource →
// count. Events and the lease are no task's.
func writesByTask(events []framework.AuditEvent, ns string, names []string) map[string]map[string]int {
	owner := map[string]string{} // "resource name" → task
	for _, name := range names {
		owner["calibantasks/status "+name] = name
		owner[builders.SandboxResource+" "+builders.SandboxName(name)] = name
		owner["serviceaccounts "+builders.ServiceAccountName(name)] = name
		owner["networkpolicies "+builders.NetworkPolicyName(name)] = name
	}
	out := map[string]map[string]int{}
	for _, e := range events {
		if !e.Write() || e.ObjectRef == nil || e.ObjectRef.Namespace != ns {
			continue
		}
		task, ok := owner[e.Resource()+" "+e.ObjectRef.Name]
		if !ok {
			continue
		}
		if out[task] == nil {
			out[task] = map[string]int{}
		}
		out[task][e.Resource()]++
	}
	return out
}

// commonPattern returns the write pattern the named tasks share, and the
// tasks (with their patterns) that differ from the most common one.
func commonPattern(writes map[string]map[string]int, names []string) (map[string]int, []string) {
	counts := map[string]int{}
	for _, name := range names {
		counts[fmt.Sprint(writes[name])]++
	}
	var common string
	for p, n := range counts {
		if n > counts[common] {
			common = p
		}
	}
	var want map[string]int
	var odd []string
	for _, name := range names {
		if fmt.Sprint(writes[name]) == common {
			want = writes[name]
		} else {
			odd = append(odd, fmt.Sprintf("%s %v", name, writes[name]))
		}
	}
	sort.Strings(odd)
	return want, odd
}
