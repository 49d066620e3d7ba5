// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package upgrade_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// The shape of the upgrade.
const (
	// tasks run under the previous release; suspendedTasks of them are
	// suspended, and one more is left Draining.
	tasks          = 50
	suspendedTasks = 3

	// quietAfterReady is how long the new build must write nothing, once
	// its controllers run, before the state is compared: what it does on
	// taking over it does at once, from its first sync of each task.
	quietAfterReady = 20 * time.Second
	// settleLimit bounds that wait when the new build never goes quiet (a
	// write retried after each refusal).
	settleLimit = 3 * time.Minute
	// convergeTimeout bounds the waits for tasks to reach a phase.
	convergeTimeout = 3 * time.Minute
)

// The previous release runs 50 tasks (46 Running, 3 Suspended, 1
// Draining) and is replaced by the current build: every task keeps its
// phase throughout, no child is re-created, none has a write refused or
// is written more than once, and a resumed task runs again on its old
// Sandbox. See the package comment for why each matters.
func TestTheCurrentBuildTakesOverThePreviousReleasesTasksWithoutRecreatingOrRewritingTheirChildren(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	bins := buildBoth(t)

	if err := cluster.InstallOperatorIdentity(ctx); err != nil {
		t.Fatal(err)
	}
	oldID, newID := mintIdentity(t, ctx), mintIdentity(t, ctx)
	ns := cluster.Namespace(t, nil)
	releaseTasksAtEnd(t, ns)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs (the audit log is audit.log): %s", cluster.KeepLogs())
		}
	})

	// The previous release brings every task to where an installation has
	// them: most Running, some Suspended, one deleted and Draining.
	old := startOperator(t, "previous-release", bins.old, operatorSettings(ns, oldID))
	// The process is the recorded commit's build: it names the commit
	// stamped into it (the current build is not stamped).
	if line := startLine(old.Output()); !strings.Contains(line, startedAs) {
		t.Fatalf("the previous release's process did not start saying %s; it said: %s", startedAs, line)
	}
	t.Logf("previous release: %s", startLine(old.Output()))
	createReadyWorkspace(t, ctx, ns)
	names := make([]string, tasks)
	for i := range names {
		names[i] = fmt.Sprintf("task-%02d", i)
	}
	createTasks(t, ctx, ns, names)
	waitTasks(t, ctx, ns, names, convergeTimeout, isRunning)

	suspended, draining := names[:suspendedTasks], names[len(names)-1]
	for _, name := range suspended {
		framework.UpdateTask(t, cluster.Caliban, ns, name, func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.Suspend = true })
	}
	framework.UpdateTask(t, cluster.Caliban, ns, draining, func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{OnDelete: "checkpoint"}
	})
	waitTasks(t, ctx, ns, suspended, convergeTimeout, atPhase(calibanv1alpha1.TaskSuspended))
	// The finalizer first: a task deleted before the operator holds it
	// would simply go.
	waitTasks(t, ctx, ns, []string{draining}, convergeTimeout, allOf(isRunning, withDrainFinalizer))
	if err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Delete(ctx, draining, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting CalibanTask %s/%s: %v", ns, draining, err)
	}
	waitTasks(t, ctx, ns, []string{draining}, convergeTimeout, isDraining)

	// What the new build must keep.
	before := settledChildren(t, ctx, ns, 2*time.Second)
	if len(before) != 3*tasks {
		t.Fatalf("the previous release made %d children for %d tasks, want %d (a Sandbox, a ServiceAccount and a NetworkPolicy each)", len(before), tasks, 3*tasks)
	}
	states, err := taskStates(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	phases := map[calibanv1alpha1.TaskPhase]int{}
	for _, s := range states {
		phases[s.Phase]++
	}
	if want := map[calibanv1alpha1.TaskPhase]int{
		calibanv1alpha1.TaskRunning:   tasks - suspendedTasks - 1,
		calibanv1alpha1.TaskSuspended: suspendedTasks,
		calibanv1alpha1.TaskDraining:  1,
	}; fmt.Sprint(phases) != fmt.Sprint(want) {
		t.Fatalf("before the upgrade the tasks' phases are %v, want %v", phases, want)
	}
	watch := watchStates(t, ctx, ns, states)

	// The upgrade: the old process lets its syncs in flight finish and exits
	// on SIGTERM, as a Deployment's old pod does, then the new build starts
	// with the same settings and a token of its own.
	if err := old.Stop(stopTimeout); err != nil {
		t.Errorf("stopping the previous release: %v", err)
	}
	current := startOperator(t, "current", bins.current, operatorSettings(ns, newID))
	if line := startLine(current.Output()); strings.Contains(line, startedAs) {
		t.Fatalf("the current build's process says it is the previous release: %s", line)
	}
	t.Logf("current build: %s", startLine(current.Output()))
	readyAt := time.Now()
	events, quiet := waitQuiet(t, newID.credential, readyAt, quietAfterReady, settleLimit)
	strayed := watch.stop()
	if !quiet {
		t.Errorf("the new build was still writing %s after its controllers started (it never wrote nothing for %s)", settleLimit, quietAfterReady)
	}
	after, err := listChildren(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	statesAfter, err := taskStates(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	messages, err := refusalMessages()
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	oldWrites := writesByChild(events, messages, oldID.credential, ns)
	newWrites := writesByChild(events, messages, newID.credential, ns)
	t.Logf("writes of the previous release: %s", writeSummary(events, oldID.credential))
	t.Logf("writes of the new build in its first %s: %s", time.Since(readyAt).Round(time.Second), writeSummary(events, newID.credential))

	// The old process did the work: it created every child the new build
	// found. Without that, nothing below tests an upgrade.
	var notByOld []string
	for _, key := range sortedKeys(before) {
		if !anySucceeded(oldWrites[key]) {
			notByOld = append(notByOld, key)
		}
	}
	if len(notByOld) > 0 {
		t.Errorf("%d children have no successful write by the previous release's process in the audit log, e.g. %v", len(notByOld), notByOld[:min(5, len(notByOld))])
	}

	checkTaskStates(t, states, statesAfter, strayed)
	checkChildrenKept(t, before, after)
	checkNewWrites(t, before, after, newWrites)
	checkSelectedByUID(t, ctx, ns, draining)

	// The new build drives a child the previous release made: a suspended
	// task resumed now runs again, on the same Sandbox.
	resumed := suspended[0]
	sandboxKey := ""
	for key, c := range before {
		if c.Kind == "Sandbox" && c.Task == resumed {
			sandboxKey = key
		}
	}
	if sandboxKey == "" {
		t.Fatalf("no Sandbox of task %s was recorded before the upgrade", resumed)
	}
	resumedAt := time.Now()
	framework.UpdateTask(t, cluster.Caliban, ns, resumed, func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.Suspend = false })
	if err := waitFor(ctx, convergeTimeout, func() error { return tasksPass(ctx, ns, []string{resumed}, isRunning) }); err != nil {
		t.Errorf("the suspended task %s, resumed under the new build, did not run again: %v\nthe new build's writes to its Sandbox since the resume: %s",
			resumed, err, describe(writesSince(t, newID.credential, ns, sandboxKey, resumedAt)))
	}
	now, err := listChildren(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := now[sandboxKey]; !ok || c.UID != before[sandboxKey].UID {
		t.Errorf("resuming %s under the new build replaced its %s (uid %s before, %+v now)", resumed, sandboxKey, before[sandboxKey].UID, c)
	}
	if bad := refused(writesSince(t, newID.credential, ns, sandboxKey, resumedAt)); len(bad) > 0 {
		t.Errorf("resuming %s: the apiserver refused %d of the new build's writes to %s: %s", resumed, len(bad), sandboxKey, describe(bad))
	}
}

// checkTaskStates fails for every task whose phase or Ready condition
// differs after the upgrade, or that strayed from it meanwhile.
func checkTaskStates(t *testing.T, before, after map[string]taskState, strayed map[string][]string) {
	t.Helper()
	for _, name := range sortedKeys(before) {
		want := before[name]
		got, ok := after[name]
		switch {
		case !ok:
			t.Errorf("task %s (%s before the upgrade) is gone after it", name, want)
		case !got.same(want):
			t.Errorf("task %s was %s before the upgrade and is %s after it", name, want, got)
		case got.ReadyMessage != want.ReadyMessage:
			t.Logf("task %s kept its phase and Ready reason; its Ready message changed from %q to %q", name, want.ReadyMessage, got.ReadyMessage)
		}
		if seen := strayed[name]; len(seen) > 0 {
			t.Errorf("task %s, %s before the upgrade, was seen meanwhile as: %s", name, want, strings.Join(seen, " → "))
		}
	}
}

// checkChildrenKept fails for every child the upgrade deleted, re-created
// (a new UID under the same name) or added.
func checkChildrenKept(t *testing.T, before, after map[string]child) {
	t.Helper()
	for _, key := range sortedKeys(before) {
		was := before[key]
		now, ok := after[key]
		switch {
		case !ok:
			t.Errorf("%s of task %s (uid %s) is gone after the upgrade", key, was.Task, was.UID)
		case now.UID != was.UID:
			t.Errorf("%s of task %s was re-created by the upgrade: uid %s before, %s after", key, was.Task, was.UID, now.UID)
		}
	}
	for _, key := range sortedKeys(after) {
		if _, ok := before[key]; !ok {
			t.Errorf("%s (of task %s, uid %s) appeared with the upgrade", key, after[key].Task, after[key].UID)
		}
	}
}

// checkSelectedByUID fails for every task but the draining one whose
// NetworkPolicy, made by the previous release, still selects its pod by
// name, or whose Sandbox's pod template lacks the task-UID label: the new
// build moves them over (ADR 0029), the Sandbox first. The test bed runs
// no pods, so no pod waits for its label.
func checkSelectedByUID(t *testing.T, ctx context.Context, ns, draining string) {
	t.Helper()
	tasks, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var byName []string
	for _, task := range tasks.Items {
		if task.Name == draining {
			continue
		}
		np, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, builders.NetworkPolicyName(task.Name), metav1.GetOptions{})
		if err != nil {
			t.Errorf("task %s: %v", task.Name, err)
			continue
		}
		if diff := cmp.Diff(map[string]string{builders.LabelTaskUID: string(task.UID)}, np.Spec.PodSelector.MatchLabels); diff != "" {
			byName = append(byName, fmt.Sprintf("NetworkPolicy %s selects %v", np.Name, np.Spec.PodSelector.MatchLabels))
		}
		sb, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Get(ctx, builders.SandboxName(task.Name), metav1.GetOptions{})
		if err != nil {
			t.Errorf("task %s: %v", task.Name, err)
			continue
		}
		if v, _, _ := unstructured.NestedString(sb.Object, "spec", "podTemplate", "metadata", "labels", builders.LabelTaskUID); v != string(task.UID) {
			byName = append(byName, fmt.Sprintf("Sandbox %s's pod template has %s=%q", sb.GetName(), builders.LabelTaskUID, v))
		}
	}
	if len(byName) > 0 {
		t.Errorf("%d children of the previous release do not select or label the pod by the task's UID after the upgrade, e.g. %v", len(byName), byName[:min(5, len(byName))])
	}
}

// checkNewWrites fails for every child the new build wrote more than once
// or had a write refused to, naming each write, and logs the children it
// wrote once and those whose resourceVersion moved.
func checkNewWrites(t *testing.T, before, after map[string]child, newWrites childWrites) {
	t.Helper()
	var once, repeated, refusedTo []string
	refusals := 0
	for _, key := range newWrites.keys() {
		ws := newWrites[key]
		bad := refused(ws)
		refusals += len(bad)
		if len(bad) > 0 {
			refusedTo = append(refusedTo, key)
		}
		if len(ws) > 1 {
			repeated = append(repeated, key)
		}
		owner := before[key].Task
		if owner == "" {
			owner = after[key].Task
		}
		switch {
		case len(ws) > 1 && len(bad) > 0:
			t.Errorf("%s (task %s): written %d times by the new build, want at most once; the apiserver refused %d of them: %s", key, owner, len(ws), len(bad), describe(ws))
		case len(ws) > 1:
			t.Errorf("%s (task %s): written %d times by the new build, want at most once: %s", key, owner, len(ws), describe(ws))
		case len(bad) > 0:
			t.Errorf("%s (task %s): the apiserver refused the new build's write: %s", key, owner, describe(ws))
		case len(ws) == 1:
			once = append(once, key)
		}
	}
	if len(repeated) > 0 || len(refusedTo) > 0 {
		t.Errorf("in all: the new build wrote %d children more than once, and the apiserver refused %d of its writes to %d children", len(repeated), refusals, len(refusedTo))
	}
	if len(once) > 0 {
		t.Logf("the new build wrote %d children once each (a changed rendering re-applied), e.g. %v", len(once), once[:min(5, len(once))])
	}
	var moved []string
	for _, key := range sortedKeys(before) {
		if now, ok := after[key]; ok && now.UID == before[key].UID && now.ResourceVersion != before[key].ResourceVersion {
			moved = append(moved, fmt.Sprintf("%s %s→%s (new build's writes: %d)", key, before[key].ResourceVersion, now.ResourceVersion, len(newWrites[key])))
		}
	}
	if len(moved) > 0 {
		t.Logf("%d children changed resourceVersion over the upgrade, e.g. %v", len(moved), moved[:min(5, len(moved))])
	}
}

// writesSince are the writes to one child that the process holding
// credential sent from since on.
func writesSince(t *testing.T, credential, ns, key string, since time.Time) []childWrite {
	t.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	messages, err := refusalMessages()
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	var out []childWrite
	for _, w := range writesByChild(events, messages, credential, ns)[key] {
		if !w.At.Before(since) {
			out = append(out, w)
		}
	}
	return out
}

// startLine is the operator's "Starting caliban-operator" log line, which
// names the version and commit stamped into the binary.
func startLine(output string) string {
	for line := range strings.Lines(output) {
		if strings.Contains(line, `"Starting caliban-operator"`) {
			return strings.TrimSpace(line)
		}
	}
	return "(no \"Starting caliban-operator\" line)"
}

func anySucceeded(ws []childWrite) bool {
	for _, w := range ws {
		if w.succeeded() {
			return true
		}
	}
	return false
}

// waitFor is framework.Eventually returning the last error instead of
// failing the test, for a wait whose failure needs more said about it.
func waitFor(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not within %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
