// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// What the task lifecycle (suspend, finish, TTL, deadline, drain) promises,
// spelled out here rather than taken from the operator's packages, so that
// a renamed constant cannot make a test agree with a changed behaviour.
const (
	reasonSuspended        = "Suspended"
	reasonDeadlineExceeded = "DeadlineExceeded"
	reasonDraining         = "Draining"
	reasonInvalidLifecycle = "InvalidLifecycle"

	suspendedMessage = "suspended by spec.suspend: the Sandbox has no pod; its workspace volume is kept"
	drainingPrefix   = "deleted with lifecycle.onDelete checkpoint: waiting for prospero's AgentsDrained condition until "

	// prospero's answer to a drain.
	conditionAgentsDrained = "AgentsDrained"
	drainedCheckpointed    = "Checkpointed"
	drainedNothingToDrain  = "NothingToDrain"
	drainFailedReason      = "DrainFailed"

	eventDeadlineExceeded = "DeadlineExceeded"
	eventDrained          = "Drained"
	eventDrainFailed      = "DrainFailed"
	eventDrainTimedOut    = "DrainTimedOut"
	eventPhaseChanged     = "PhaseChanged"

	// The Sandbox stand-in's Ready reason for a suspended Sandbox
	// (test/stages/sandbox.yaml, sandbox-suspended).
	sandboxSuspendedReason = "SandboxSuspended"

	drainFinalizer = calibanv1alpha1.FinalizerDrain
	// holdFinalizer is a finalizer of someone else, which the operator
	// must never touch.
	holdFinalizer = "test.caliban.caliban-ai.dev/hold"

	// defaultDrainTimeout is CALIBAN_DRAIN_TIMEOUT_SECONDS' default.
	defaultDrainTimeout = 600 * time.Second

	// gcTimeout bounds the wait for kube-controller-manager's garbage
	// collector, which notices new resources on its periodic discovery
	// (30 s).
	gcTimeout = 90 * time.Second
)

// drainTimeoutEnv is the operator setting for a drain timeout of d.
func drainTimeoutEnv(d time.Duration) string {
	return fmt.Sprintf("CALIBAN_DRAIN_TIMEOUT_SECONDS=%d", int(d/time.Second))
}

// Spec mutators for createTask and framework.UpdateTask.

func suspend(on bool) func(*calibanv1alpha1.CalibanTaskSpec) {
	return func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.Suspend = on }
}

func lifecycle(mutate func(*calibanv1alpha1.LifecycleSpec)) func(*calibanv1alpha1.CalibanTaskSpec) {
	return func(spec *calibanv1alpha1.CalibanTaskSpec) {
		if spec.Lifecycle == nil {
			spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{}
		}
		mutate(spec.Lifecycle)
	}
}

func onDelete(v string) func(*calibanv1alpha1.CalibanTaskSpec) {
	return lifecycle(func(lc *calibanv1alpha1.LifecycleSpec) { lc.OnDelete = v })
}

func onFinish(v calibanv1alpha1.OnFinish) func(*calibanv1alpha1.CalibanTaskSpec) {
	return lifecycle(func(lc *calibanv1alpha1.LifecycleSpec) { lc.OnFinish = v })
}

func ttlAfterFinished(seconds int32) func(*calibanv1alpha1.CalibanTaskSpec) {
	return lifecycle(func(lc *calibanv1alpha1.LifecycleSpec) { lc.TTLSecondsAfterFinished = new(seconds) })
}

func activeDeadline(seconds int32) func(*calibanv1alpha1.CalibanTaskSpec) {
	return lifecycle(func(lc *calibanv1alpha1.LifecycleSpec) { lc.ActiveDeadlineSeconds = new(seconds) })
}

// allOf passes when every check passes.
func allOf(checks ...taskCheck) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		for _, c := range checks {
			if err := c(task); err != nil {
				return err
			}
		}
		return nil
	}
}

// atGeneration: the status reflects generation gen (an edit the test made).
func atGeneration(gen int64) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		if task.Status.ObservedGeneration != gen {
			return fmt.Errorf("observedGeneration %d, want %d", task.Status.ObservedGeneration, gen)
		}
		return nil
	}
}

// isPinned: admitted, with the pin and the start time written.
func isPinned(task *calibanv1alpha1.CalibanTask) error {
	if task.Status.ResolvedWorkspace == nil {
		return errors.New("no resolvedWorkspace")
	}
	if task.Status.StartTime == nil {
		return errors.New("no startTime on a pinned task")
	}
	return nil
}

// isSuspended: phase Suspended for the current generation, Ready False
// Suspended with the design's message, no endpoint, the pin, startTime and
// sandboxRef kept.
func isSuspended(task *calibanv1alpha1.CalibanTask) error {
	if err := parkedWith(calibanv1alpha1.TaskSuspended, reasonSuspended, suspendedMessage)(task); err != nil {
		return err
	}
	if want := builders.SandboxName(task.Name); task.Status.SandboxRef == nil || task.Status.SandboxRef.Name != want {
		return fmt.Errorf("sandboxRef %+v on a suspended task, want name %s", task.Status.SandboxRef, want)
	}
	return isPinned(task)
}

// hasCompletion: completionTime is set.
func hasCompletion(task *calibanv1alpha1.CalibanTask) error {
	if task.Status.CompletionTime == nil {
		return errors.New("no completionTime")
	}
	return nil
}

// completedAt: the completionTime is exactly at.
func completedAt(at time.Time) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		if err := hasCompletion(task); err != nil {
			return err
		}
		if got := task.Status.CompletionTime.Time; !got.Equal(at) {
			return fmt.Errorf("completionTime %s, want %s", got.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
		}
		return nil
	}
}

// deadlineMessage is the Ready message of a task past its deadline.
func deadlineMessage(seconds int32, start time.Time) string {
	return fmt.Sprintf("the task ran longer than lifecycle.activeDeadlineSeconds (%ds from its start at %s)",
		seconds, start.UTC().Format(time.RFC3339))
}

// deadlineExceeded: Failed with reason DeadlineExceeded and the design's
// message, completed at startTime + seconds (not when the operator noticed).
func deadlineExceeded(seconds int32) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		if err := isPinned(task); err != nil {
			return err
		}
		start := task.Status.StartTime.Time
		if err := failedWith(reasonDeadlineExceeded, deadlineMessage(seconds, start))(task); err != nil {
			return err
		}
		return completedAt(start.Add(time.Duration(seconds) * time.Second))(task)
	}
}

// isDraining: deleted, phase Draining, Ready False Draining with a message
// that names the moment the drain times out: deletionTimestamp + timeout.
func isDraining(timeout time.Duration) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		if task.DeletionTimestamp == nil {
			return errors.New("no deletionTimestamp")
		}
		if task.Status.Phase != calibanv1alpha1.TaskDraining {
			return fmt.Errorf("phase %q, want Draining", task.Status.Phase)
		}
		if err := readyIs(task, metav1.ConditionFalse, reasonDraining); err != nil {
			return err
		}
		msg := readyCondition(task).Message
		until, ok := strings.CutPrefix(msg, drainingPrefix)
		if !ok {
			return fmt.Errorf("Ready message %q, want it to start %q", msg, drainingPrefix)
		}
		at, err := time.Parse(time.RFC3339, until)
		if err != nil {
			return fmt.Errorf("Ready message %q does not end in an RFC 3339 time: %v", msg, err)
		}
		if want := task.DeletionTimestamp.Add(timeout); !at.Equal(want) {
			return fmt.Errorf("Ready message %q names %s, want deletionTimestamp + %s = %s", msg, until, timeout, want.UTC().Format(time.RFC3339))
		}
		return nil
	}
}

func hasFinalizer(obj metav1.Object, finalizer string) bool {
	for _, f := range obj.GetFinalizers() {
		if f == finalizer {
			return true
		}
	}
	return false
}

// withDrainFinalizer / withoutDrainFinalizer check the drain finalizer.
func withDrainFinalizer(task *calibanv1alpha1.CalibanTask) error {
	if !hasFinalizer(task, drainFinalizer) {
		return fmt.Errorf("finalizers %v lack %s", task.Finalizers, drainFinalizer)
	}
	return nil
}

func withoutDrainFinalizer(task *calibanv1alpha1.CalibanTask) error {
	if hasFinalizer(task, drainFinalizer) {
		return fmt.Errorf("finalizers %v hold %s", task.Finalizers, drainFinalizer)
	}
	return nil
}

// ownsFinalizer reports whether manager holds finalizer through Apply on
// the main resource.
func ownsFinalizer(obj metav1.Object, manager, finalizer string) bool {
	md, _ := appliedFieldsOf(obj, manager, "")["f:metadata"].(map[string]any)
	fin, _ := md["f:finalizers"].(map[string]any)
	_, ok := fin[fmt.Sprintf("v:%q", finalizer)]
	return ok
}

// applyTestFinalizers server-side-applies the finalizers the test's field
// manager holds on the task (none: the test lets go of all of its own).
func applyTestFinalizers(t testing.TB, ns, name string, finalizers ...string) {
	t.Helper()
	if finalizers == nil {
		finalizers = []string{}
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": calibanv1alpha1.SchemeGroupVersion.String(),
		"kind":       "CalibanTask",
		"metadata":   map[string]any{"name": name, "finalizers": finalizers},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Patch(ctx, name, types.ApplyYAMLPatchType, body,
		metav1.PatchOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatalf("applying the test's finalizers %v to CalibanTask %s/%s: %v", finalizers, ns, name, err)
	}
}

// releaseTasksAtEnd removes every finalizer from the namespace's tasks
// when the test ends. Registered before startOperator, it runs after the
// operator has stopped and before the namespace goes, which would otherwise
// wait forever on a drain no operator finishes.
func releaseTasksAtEnd(t testing.TB, ns string) {
	t.Cleanup(func() {
		list, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, task := range list.Items {
			if len(task.Finalizers) == 0 {
				continue
			}
			_, _ = cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Patch(context.Background(), task.Name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	})
}

// deleteTask deletes the task the way `kubectl delete` does (background
// propagation, the default).
func deleteTask(t testing.TB, ns, name string) {
	t.Helper()
	if err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting CalibanTask %s/%s: %v", ns, name, err)
	}
}

// taskExists reports whether the task is still there.
func taskExists(t testing.TB, ns, name string) bool {
	t.Helper()
	_, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("reading CalibanTask %s/%s: %v", ns, name, err)
	}
	return true
}

// waitForTaskGone polls until the task no longer exists.
func waitForTaskGone(t testing.TB, ns, name string, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, func() error {
		task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("CalibanTask %s still exists (deletionTimestamp %v, finalizers %v, status %s)",
			name, task.DeletionTimestamp, task.Finalizers, statusJSON(task.Status))
	})
}

// mustExistUntil reads the task until the clock reaches until and fails
// the test if it is gone before: a NotFound answered before until proves
// the task went too early. (An answer that arrives at or after until
// proves nothing either way, so the check needs no margin.)
func mustExistUntil(t testing.TB, ns, name string, until time.Time, why string) {
	t.Helper()
	for time.Now().Before(until) {
		_, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
		answered := time.Now()
		if apierrors.IsNotFound(err) {
			if answered.Before(until) {
				t.Fatalf("CalibanTask %s was gone at %s, before %s (%s)", name,
					answered.UTC().Format(time.RFC3339Nano), until.UTC().Format(time.RFC3339Nano), why)
			}
			return
		}
		if err != nil {
			t.Fatalf("reading CalibanTask %s/%s: %v", ns, name, err)
		}
		time.Sleep(min(50*time.Millisecond, time.Until(until)))
	}
}

// sleepUntil sleeps until the clock reaches at.
func sleepUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
}

// getTask reads a task that must exist.
func getTask(t testing.TB, ns, name string) *calibanv1alpha1.CalibanTask {
	t.Helper()
	task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading CalibanTask %s/%s: %v", ns, name, err)
	}
	return task
}

// children are getters of the task's three children, by a name that says
// which (for clusterState).
func children(ns, task string) map[string]func() (metav1.Object, error) {
	sbx, sa, np := builders.SandboxName(task), builders.ServiceAccountName(task), builders.NetworkPolicyName(task)
	return map[string]func() (metav1.Object, error){
		"Sandbox " + sbx: func() (metav1.Object, error) {
			return cluster.Dynamic.Resource(sandboxes).Namespace(ns).Get(ctx, sbx, metav1.GetOptions{})
		},
		"ServiceAccount " + sa: func() (metav1.Object, error) {
			return cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{})
		},
		"NetworkPolicy " + np: func() (metav1.Object, error) {
			return cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, np, metav1.GetOptions{})
		},
	}
}

// taskAndChildren adds the task itself to children.
func taskAndChildren(ns, task string) map[string]func() (metav1.Object, error) {
	objects := children(ns, task)
	objects["CalibanTask "+task] = func() (metav1.Object, error) {
		return cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, task, metav1.GetOptions{})
	}
	return objects
}

// versions are the resourceVersions of objects.
func versions(objects map[string]func() (metav1.Object, error)) (map[string]string, error) {
	out := map[string]string{}
	for name, get := range objects {
		obj, err := get()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = obj.GetResourceVersion()
	}
	return out, nil
}

// settledVersions waits until the objects' resourceVersions hold for a
// second (the Sandbox stand-in writes shortly after a change) and returns
// them. Unlike settledClusterState it ignores Events, which other tasks of
// the namespace may be emitting meanwhile.
func settledVersions(t testing.TB, objects map[string]func() (metav1.Object, error)) map[string]string {
	t.Helper()
	return settledState(t, time.Second, func() (map[string]string, error) { return versions(objects) })
}

// unchangedVersions checks that the objects still have the versions want.
func unchangedVersions(objects map[string]func() (metav1.Object, error), want map[string]string) func() error {
	return func() error {
		got, err := versions(objects)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("objects changed (-before +now):\n%s", diff)
		}
		return nil
	}
}

// waitForChildrenGone waits until the garbage collector has removed the
// task's children.
func waitForChildrenGone(t testing.TB, ns, task string) {
	t.Helper()
	framework.Eventually(t, gcTimeout, func() error {
		for child, get := range children(ns, task) {
			if _, err := get(); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s of the deleted task %s still exists (err %v)", child, task, err)
			}
		}
		return nil
	})
}

// childrenExist fails unless each of the task's children exists.
func childrenExist(ns, task string) func() error {
	return func() error {
		for child, get := range children(ns, task) {
			if _, err := get(); err != nil {
				return fmt.Errorf("%s of task %s: %w", child, task, err)
			}
		}
		return nil
	}
}

type sandboxCheck func(*unstructured.Unstructured) error

// waitForSandbox polls the Sandbox until check passes and returns it.
func waitForSandbox(t testing.TB, ns, name string, timeout time.Duration, check sandboxCheck) *unstructured.Unstructured {
	t.Helper()
	var sb *unstructured.Unstructured
	framework.Eventually(t, timeout, func() error {
		u, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := check(u); err != nil {
			return fmt.Errorf("Sandbox %s: %w (generation %d, spec.operatingMode %q, status %s)", name, err,
				u.GetGeneration(), operatingMode(u), statusJSON(u.Object["status"]))
		}
		sb = u
		return nil
	})
	return sb
}

// sandboxNow reads the Sandbox and checks it at once.
func sandboxNow(ns, name string, check sandboxCheck) func() error {
	return func() error {
		u, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("Sandbox %s: %w", name, err)
		}
		if err := check(u); err != nil {
			return fmt.Errorf("Sandbox %s: %w (spec.operatingMode %q, status %s)", name, err, operatingMode(u), statusJSON(u.Object["status"]))
		}
		return nil
	}
}

func operatingMode(u *unstructured.Unstructured) string {
	mode, _, _ := unstructured.NestedString(u.Object, "spec", "operatingMode")
	return mode
}

// sandboxReady is the Sandbox's Ready condition as agent-sandbox (the
// stand-in) reports it, nil when there is none.
func sandboxReady(u *unstructured.Unstructured) *metav1.Condition {
	sb, err := framework.SandboxOf(u)
	if err != nil {
		return nil
	}
	return meta.FindStatusCondition(sb.Status.Conditions, builders.ConditionReady)
}

// inMode: the operator asks for operatingMode mode.
func inMode(mode sandboxv1beta1.OperatingMode) sandboxCheck {
	return func(u *unstructured.Unstructured) error {
		if got := operatingMode(u); got != string(mode) {
			return fmt.Errorf("spec.operatingMode %q, want %s", got, mode)
		}
		return nil
	}
}

// parked: operatingMode Suspended, and agent-sandbox has reacted (Ready
// False SandboxSuspended): the pod is gone.
func parked(u *unstructured.Unstructured) error {
	if err := inMode(sandboxv1beta1.OperatingModeSuspended)(u); err != nil {
		return err
	}
	if c := sandboxReady(u); c == nil || c.Status != metav1.ConditionFalse || c.Reason != sandboxSuspendedReason {
		return fmt.Errorf("Ready %+v, want False/%s", c, sandboxSuspendedReason)
	}
	return nil
}

// serving: operatingMode Running, and Ready.
func serving(u *unstructured.Unstructured) error {
	if err := inMode(sandboxv1beta1.OperatingModeRunning)(u); err != nil {
		return err
	}
	if c := sandboxReady(u); c == nil || c.Status != metav1.ConditionTrue {
		return fmt.Errorf("Ready %+v, want True", c)
	}
	return nil
}

// prosperoDrains answers a drain the way prospero does: a server-side
// apply of the AgentsDrained condition to the status subresource, as field
// manager "prospero", without force. prospero applies everything it owns
// each time, so an AgentsSettled condition it wrote before is applied
// again unchanged (leaving it out would remove it).
func prosperoDrains(t testing.TB, ns, name string, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	condition := map[string]any{
		"type":               conditionAgentsDrained,
		"status":             string(status),
		"reason":             reason,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
	if message != "" {
		condition["message"] = message
	}
	conditions := []map[string]any{condition}
	task := getTask(t, ns, name)
	if settled := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionAgentsSettled); settled != nil &&
		ownsCondition(statusFieldsOf(task, "prospero"), builders.ConditionAgentsSettled) {
		conditions = append(conditions, map[string]any{
			"type":               settled.Type,
			"status":             string(settled.Status),
			"reason":             settled.Reason,
			"message":            settled.Message,
			"lastTransitionTime": settled.LastTransitionTime.UTC().Format(time.RFC3339),
		})
	}
	if err := cluster.ProsperoApplies(ctx, ns, name, conditions...); err != nil {
		t.Fatal(err)
	}
}

// drainedAsProsperoSaid: the task carries prospero's AgentsDrained answer
// unchanged, prospero still owns it and the operator does not.
func drainedAsProsperoSaid(status metav1.ConditionStatus, reason, message string) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		c := meta.FindStatusCondition(task.Status.Conditions, conditionAgentsDrained)
		if c == nil || c.Status != status || c.Reason != reason || c.Message != message {
			return fmt.Errorf("AgentsDrained %+v, want prospero's %s/%s %q", c, status, reason, message)
		}
		if prospero := statusFieldsOf(task, "prospero"); !ownsCondition(prospero, conditionAgentsDrained) {
			return fmt.Errorf("prospero no longer owns AgentsDrained; its status fields: %v", prospero)
		}
		if operator := statusFieldsOf(task, builders.FieldManager); ownsCondition(operator, conditionAgentsDrained) {
			return fmt.Errorf("the operator owns prospero's AgentsDrained; its status fields: %v", operator)
		}
		return nil
	}
}

// settledCondition is prospero's AgentsSettled condition of the task.
func settledCondition(t testing.TB, task *calibanv1alpha1.CalibanTask) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionAgentsSettled)
	if c == nil {
		t.Fatalf("CalibanTask %s has no AgentsSettled condition: %s", task.Name, statusJSON(task.Status))
	}
	return *c
}

// taskRecord records every version of one task a watch delivers, from a
// resourceVersion on: what polling could miss (a status written just
// before the task goes).
type taskRecord struct {
	name string

	mu      sync.Mutex
	seen    []*calibanv1alpha1.CalibanTask
	deleted *calibanv1alpha1.CalibanTask
	err     error
}

// recordTask starts recording the task's versions after resourceVersion
// rv, until it is deleted or the test ends.
func recordTask(t testing.TB, ns, name, rv string) *taskRecord {
	t.Helper()
	w := &taskRecord{name: name}
	wctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for wctx.Err() == nil {
			wi, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Watch(wctx, metav1.ListOptions{
				FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
				ResourceVersion: rv,
			})
			if err != nil {
				w.fail(fmt.Errorf("watching CalibanTask %s: %w", name, err))
				return
			}
			for ev := range wi.ResultChan() {
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					task, ok := ev.Object.(*calibanv1alpha1.CalibanTask)
					if !ok {
						continue
					}
					rv = task.ResourceVersion
					w.mu.Lock()
					w.seen = append(w.seen, task)
					if ev.Type == watch.Deleted {
						w.deleted = task
					}
					w.mu.Unlock()
					if ev.Type == watch.Deleted {
						wi.Stop()
						return
					}
				case watch.Error:
					wi.Stop()
					w.fail(fmt.Errorf("watching CalibanTask %s: %v", name, apierrors.FromObject(ev.Object)))
					return
				}
			}
			// The server closed the watch: go on from the last version.
		}
	}()
	return w
}

func (w *taskRecord) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

// waitDeleted waits until the watch delivers the deletion and returns the
// task's last version.
func (w *taskRecord) waitDeleted(t testing.TB, timeout time.Duration) *calibanv1alpha1.CalibanTask {
	t.Helper()
	var last *calibanv1alpha1.CalibanTask
	framework.Eventually(t, timeout, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.deleted != nil {
			last = w.deleted
			return nil
		}
		if w.err != nil {
			return w.err
		}
		desc := "none"
		if n := len(w.seen); n > 0 {
			s := w.seen[n-1]
			desc = fmt.Sprintf("deletionTimestamp %v, finalizers %v, status %s", s.DeletionTimestamp, s.Finalizers, statusJSON(s.Status))
		}
		return fmt.Errorf("CalibanTask %s was not deleted; its last version seen: %s", w.name, desc)
	})
	return last
}

// find returns the first version seen that passes check, or the last
// check error.
func (w *taskRecord) find(check taskCheck) (*calibanv1alpha1.CalibanTask, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := fmt.Errorf("the watch saw no version of CalibanTask %s", w.name)
	for _, task := range w.seen {
		if err := check(task); err != nil {
			last = fmt.Errorf("no version of CalibanTask %s passes; the last checked: %w", w.name, err)
			continue
		}
		return task, nil
	}
	return nil, last
}

// phases lists the distinct phases seen, in order.
func (w *taskRecord) phases() []calibanv1alpha1.TaskPhase {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []calibanv1alpha1.TaskPhase
	for _, task := range w.seen {
		if p := task.Status.Phase; p != "" && (len(out) == 0 || out[len(out)-1] != p) {
			out = append(out, p)
		}
	}
	return out
}

// noEvent fails if an Event about the task has the reason.
func noEvent(t testing.TB, ns, task, reason string) {
	t.Helper()
	for _, e := range eventsAbout(t, ns, "CalibanTask", task) {
		if e.Reason == reason {
			t.Errorf("unexpected %s Event %s about CalibanTask %s: %q", e.Type, e.Reason, task, e.Note)
		}
	}
}

// stopOperator stops an operator with SIGTERM and expects a clean exit.
func stopOperator(t *testing.T, op *framework.Operator) {
	t.Helper()
	if code := stop(t, op); code != 0 {
		t.Errorf("operator %s exited with %d after SIGTERM, want 0", op.Name, code)
	}
}
