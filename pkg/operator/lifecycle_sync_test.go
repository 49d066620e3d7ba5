// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// The task controller's sync handler against the lifecycle of
// docs/crd-reference.md#lifecycle: suspend and resume, onFinish, the
// deadline, the TTL, the drain finalizer and the drain itself.

var calibanTaskGVR = calibanv1alpha1.SchemeGroupVersion.WithResource("calibantasks")

// Fixture helpers of the lifecycle.

// applyPerSubresource makes the caliban fake keep a server-side apply to
// the status subresource and one to the task itself apart, as the
// apiserver does (managedFields are per subresource). The fake tracks one
// field set per manager whatever the subresource, so the operator's status
// apply would drop the finalizer it applied to the task, and its finalizer
// apply the status it wrote: an artifact of the fake, not the operator's
// doing.
func (f *fixture) applyPerSubresource() {
	f.caliban.PrependReactor("patch", "calibantasks", func(a core.Action) (bool, runtime.Object, error) {
		p := a.(core.PatchActionImpl)
		if p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		before, err := f.caliban.Tracker().Get(calibanTaskGVR, p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		handled, obj, err := core.ObjectReaction(f.caliban.Tracker())(a)
		if !handled || err != nil {
			return handled, obj, err
		}
		after := obj.(*calibanv1alpha1.CalibanTask).DeepCopy()
		if p.GetSubresource() == "status" {
			after.Finalizers = before.(*calibanv1alpha1.CalibanTask).Finalizers
		} else {
			after.Status = before.(*calibanv1alpha1.CalibanTask).Status
		}
		if err := f.caliban.Tracker().Update(calibanTaskGVR, after, after.Namespace, metav1.UpdateOptions{FieldManager: "subresources"}); err != nil {
			return true, nil, err
		}
		return true, after, nil
	})
}

// lifecycleFixture is a fixture whose caliban fake applies per subresource.
func lifecycleFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.applyPerSubresource()
	return f
}

// storedTask is the task as the caliban fake holds it, read without an
// action.
func (f *fixture) storedTask(tk *calibanv1alpha1.CalibanTask) *calibanv1alpha1.CalibanTask {
	f.t.Helper()
	obj, err := f.caliban.Tracker().Get(calibanTaskGVR, tk.Namespace, tk.Name)
	if err != nil {
		f.t.Fatal(err)
	}
	return obj.(*calibanv1alpha1.CalibanTask).DeepCopy()
}

// pinnedTask seeds task(mods...) with its workspace and credentials, runs
// the sync that admits and pins it and applies its children, and feeds the
// writes back into the caches.
func (f *fixture) pinnedTask(mods ...func(*calibanv1alpha1.CalibanTask)) (*TaskController, *calibanv1alpha1.CalibanTask) {
	f.t.Helper()
	tk := task(mods...)
	f.seed(tk, workspace(), secret("key", "api-key"))
	c := f.taskController()
	f.mustSync(c, tk)
	f.feedBack(c, tk)
	return c, f.storedTask(tk)
}

// runningTask is pinnedTask, then its Sandbox Ready and the sync that makes
// the task Running, fed back; actions and events are reset.
func (f *fixture) runningTask(mods ...func(*calibanv1alpha1.CalibanTask)) (*TaskController, *calibanv1alpha1.CalibanTask) {
	f.t.Helper()
	c, tk := f.pinnedTask(mods...)
	f.sandboxAnswers()
	f.mustSync(c, tk)
	f.feedBack(c, tk)
	tk = f.storedTask(tk)
	if tk.Status.Phase != calibanv1alpha1.TaskRunning {
		f.t.Fatalf("set-up: the task is %s, want Running", tk.Status.Phase)
	}
	f.resetActions()
	return c, tk
}

// sandboxAnswers puts the last applied Sandbox into the cache with the
// status agent-sandbox gives it in its operatingMode: Ready with its
// address when Running; when Suspended no pod, the Service and its address
// kept, Ready=False SandboxSuspended (test/stages/sandbox.yaml).
func (f *fixture) sandboxAnswers() {
	f.t.Helper()
	sb := f.lastSandboxApply().DeepCopy()
	mode, _, _ := unstructured.NestedString(sb.Object, "spec", "operatingMode")
	ready := map[string]any{"type": "Ready", "status": "True", "reason": "DependenciesReady", "message": "Pod is Ready",
		"lastTransitionTime": "2026-09-01T12:00:00Z"}
	if mode == string(sandboxv1beta1.OperatingModeSuspended) {
		ready = map[string]any{"type": "Ready", "status": "False", "reason": "SandboxSuspended", "message": "Sandbox is suspended",
			"lastTransitionTime": "2026-09-01T12:00:00Z"}
	}
	_ = unstructured.SetNestedField(sb.Object, "fix-bug-sbx.team.svc.cluster.local", "status", "serviceFQDN")
	_ = unstructured.SetNestedSlice(sb.Object, []any{ready}, "status", "conditions")
	f.cacheSandbox(sb)
}

// edit changes the stored task as someone else would (manager: a person
// editing the spec, prospero writing its conditions), with a new
// resourceVersion, and a new generation when the spec changed, as the
// apiserver gives; the informer brings it to the cache.
func (f *fixture) edit(tk *calibanv1alpha1.CalibanTask, manager string, mod func(*calibanv1alpha1.CalibanTask)) *calibanv1alpha1.CalibanTask {
	f.t.Helper()
	stored := f.storedTask(tk)
	edited := stored.DeepCopy()
	mod(edited)
	if !apiequality.Semantic.DeepEqual(stored.Spec, edited.Spec) {
		edited.Generation++
	}
	rv, err := strconv.Atoi(stored.ResourceVersion)
	if err != nil {
		f.t.Fatal(err)
	}
	edited.ResourceVersion = strconv.Itoa(rv + 1)
	if err := f.caliban.Tracker().Update(calibanTaskGVR, edited, edited.Namespace, metav1.UpdateOptions{FieldManager: manager}); err != nil {
		f.t.Fatal(err)
	}
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), f.storedTask(tk))
	return f.storedTask(tk)
}

// feedTask puts the stored task into the task cache (feedBack without the
// children).
func (f *fixture) feedTask(tk *calibanv1alpha1.CalibanTask) *calibanv1alpha1.CalibanTask {
	f.t.Helper()
	stored := f.storedTask(tk)
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	return stored
}

func (f *fixture) mustSync(c *TaskController, tk *calibanv1alpha1.CalibanTask) time.Duration {
	f.t.Helper()
	after, err := c.sync(f.ctx, key(tk))
	if err != nil {
		f.t.Fatalf("sync: %v", err)
	}
	return after
}

// recordOrder records every write to the three APIs in the order it is
// sent, as "verb resource[/subresource]".
func (f *fixture) recordOrder() func() []string {
	var (
		mu    sync.Mutex
		order []string
	)
	record := func(a core.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "get", "list", "watch":
			return false, nil, nil
		}
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		mu.Lock()
		order = append(order, a.GetVerb()+" "+res)
		mu.Unlock()
		return false, nil, nil
	}
	f.caliban.PrependReactor("*", "*", record)
	f.kube.PrependReactor("*", "*", record)
	f.mu.Lock()
	f.onSandboxApply = func(verb, _ string) error {
		mu.Lock()
		order = append(order, verb+" sandboxes")
		mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), order...)
	}
}

// sandboxMode is the operatingMode of a Sandbox apply's body.
func sandboxMode(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	mode, found, err := unstructured.NestedString(u.Object, "spec", "operatingMode")
	if err != nil || !found {
		t.Fatalf("the Sandbox apply sets no spec.operatingMode (%v)", err)
	}
	return mode
}

// lastStatus is the last status apply the caliban fake saw.
func lastStatus(t *testing.T, f *fixture) calibanv1alpha1.CalibanTaskStatus {
	t.Helper()
	applies := statusApplies(t, f.caliban.Actions())
	if len(applies) == 0 {
		t.Fatal("no status was written")
	}
	return applies[len(applies)-1]
}

func readyOf(s calibanv1alpha1.CalibanTaskStatus) *metav1.Condition {
	return meta.FindStatusCondition(s.Conditions, builders.ConditionReady)
}

// finalizerApplies are the server-side applies to the task itself (not
// its status).
func finalizerApplies(actions []core.Action) []core.PatchActionImpl {
	var out []core.PatchActionImpl
	for _, a := range actions {
		p, ok := a.(core.PatchActionImpl)
		if ok && p.GetResource().Resource == "calibantasks" && p.GetSubresource() == "" && p.GetPatchType() == types.ApplyPatchType {
			out = append(out, p)
		}
	}
	return out
}

// jsonPatches are the JSON patches sent to tasks, decoded.
func jsonPatches(t *testing.T, actions []core.Action) [][]map[string]any {
	t.Helper()
	var out [][]map[string]any
	for _, a := range actions {
		p, ok := a.(core.PatchActionImpl)
		if !ok || p.GetResource().Resource != "calibantasks" || p.GetPatchType() != types.JSONPatchType {
			continue
		}
		var ops []map[string]any
		if err := json.Unmarshal(p.GetPatch(), &ops); err != nil {
			t.Fatal(err)
		}
		out = append(out, ops)
	}
	return out
}

// releasesTheDrainFinalizer checks that the actions removed the drain
// finalizer the way the operator does: one apply of the task's metadata
// without it, which releases the operator's own entry. The fake clientset
// records a finalizer in an object it stores as its own manager's (as a
// real apiserver does for a finalizer another client wrote), so the entry
// outlives the apply there, and the tested JSON patch the tests expect
// next is what removes it.
func releasesTheDrainFinalizer(t *testing.T, actions []core.Action) {
	t.Helper()
	applies := finalizerApplies(actions)
	if len(applies) != 1 {
		t.Fatalf("%d applies to the task, want 1", len(applies))
	}
	var body calibanv1alpha1.CalibanTask
	if err := json.Unmarshal(applies[0].GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	if body.UID == "" || len(body.Finalizers) != 0 {
		t.Errorf("the apply that releases the finalizer has uid %q and finalizers %v, want the uid and none", body.UID, body.Finalizers)
	}
}

// removeFinalizerAt is the JSON patch that removes the drain finalizer at
// index i after testing that it is there.
func removeFinalizerAt(i int) []map[string]any {
	path := "/metadata/finalizers/" + strconv.Itoa(i)
	return []map[string]any{
		{"op": "test", "path": path, "value": calibanv1alpha1.FinalizerDrain},
		{"op": "remove", "path": path},
	}
}

func taskDeletes(actions []core.Action) []core.DeleteActionImpl {
	var out []core.DeleteActionImpl
	for _, a := range actions {
		if d, ok := a.(core.DeleteActionImpl); ok && d.GetResource().Resource == "calibantasks" {
			out = append(out, d)
		}
	}
	return out
}

// Lifecycle spec modifiers.

func withLifecycle(mod func(*calibanv1alpha1.LifecycleSpec)) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		if t.Spec.Lifecycle == nil {
			t.Spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{}
		}
		mod(t.Spec.Lifecycle)
	}
}

func onDelete(v string) func(*calibanv1alpha1.CalibanTask) {
	return withLifecycle(func(l *calibanv1alpha1.LifecycleSpec) { l.OnDelete = v })
}

func onFinish(v calibanv1alpha1.OnFinish) func(*calibanv1alpha1.CalibanTask) {
	return withLifecycle(func(l *calibanv1alpha1.LifecycleSpec) { l.OnFinish = v })
}

func activeDeadline(s int32) func(*calibanv1alpha1.CalibanTask) {
	return withLifecycle(func(l *calibanv1alpha1.LifecycleSpec) { l.ActiveDeadlineSeconds = &s })
}

func ttlAfterFinished(s int32) func(*calibanv1alpha1.CalibanTask) {
	return withLifecycle(func(l *calibanv1alpha1.LifecycleSpec) { l.TTLSecondsAfterFinished = &s })
}

// settled is prospero's AgentsSettled answer, given at `at`.
func settled(reason, message string, at time.Time) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: builders.ConditionAgentsSettled,
			Status: metav1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(at)})
	}
}

// drained is prospero's AgentsDrained answer.
func drained(status metav1.ConditionStatus, reason, message string, at time.Time) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: builders.ConditionAgentsDrained,
			Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(at)})
	}
}

var allowUnexported = cmp.AllowUnexported(recordedEvent{})

// The tests.

// spec.suspend parks a Running task: its Sandbox is applied Suspended, and
// the task says Suspended once agent-sandbox has suspended it, not before;
// then another sync writes nothing. Resuming applies it Running again.
func TestSuspendAndResume(t *testing.T) {
	f := lifecycleFixture(t)
	c, tk := f.runningTask()
	start := tk.Status.StartTime

	// Suspend: the apply is accepted, the pod is still there.
	f.clock.Step(time.Minute)
	tk = f.edit(tk, "kubectl", func(t *calibanv1alpha1.CalibanTask) { t.Spec.Suspend = true })
	if after := f.mustSync(c, tk); after != 0 {
		t.Errorf("suspending: requeue after %s, want none", after)
	}
	if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug", "patch sandboxes fix-bug-sbx"}, f.writes()); diff != "" {
		t.Errorf("suspending: writes (-want +got):\n%s", diff)
	}
	if got := sandboxMode(t, f.lastSandboxApply()); got != string(sandboxv1beta1.OperatingModeSuspended) {
		t.Errorf("suspending: Sandbox applied with operatingMode %q, want Suspended", got)
	}
	if st := lastStatus(t, f); st.Phase != calibanv1alpha1.TaskRunning || st.CalibandEndpoint == "" {
		t.Errorf("suspending: status %s endpoint %q, want Running with its endpoint while agent-sandbox still reports the pod Ready", st.Phase, st.CalibandEndpoint)
	}
	if len(f.events.events) != 0 {
		t.Errorf("suspending: Events %v, want none before the Sandbox is suspended", f.events.events)
	}

	// agent-sandbox suspends it: now the task is Suspended.
	f.sandboxAnswers()
	tk = f.feedTask(tk)
	f.resetActions()
	f.mustSync(c, tk)
	if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
		t.Errorf("suspended: writes (-want +got):\n%s", diff)
	}
	st := lastStatus(t, f)
	ready := readyOf(st)
	if st.Phase != calibanv1alpha1.TaskSuspended || ready == nil || ready.Status != metav1.ConditionFalse ||
		ready.Reason != builders.ReasonSuspended || ready.Message != builders.SuspendedMessage {
		t.Errorf("suspended: status %s with Ready %+v, want Suspended, Ready=False %s %q", st.Phase, ready, builders.ReasonSuspended, builders.SuspendedMessage)
	}
	if st.CalibandEndpoint != "" {
		t.Errorf("suspended: calibandEndpoint %q, want none", st.CalibandEndpoint)
	}
	if st.SandboxRef == nil || st.SandboxRef.Name != "fix-bug-sbx" {
		t.Errorf("suspended: sandboxRef %+v, want fix-bug-sbx kept", st.SandboxRef)
	}
	if !st.StartTime.Equal(start) || st.CompletionTime != nil {
		t.Errorf("suspended: startTime %v completionTime %v, want startTime %v kept and no completion", st.StartTime, st.CompletionTime, start)
	}
	want := []recordedEvent{{corev1.EventTypeNormal, EventPhaseChanged, "Running → Suspended"}}
	if diff := cmp.Diff(want, f.events.events, allowUnexported); diff != "" {
		t.Errorf("suspended: Events (-want +got):\n%s", diff)
	}

	// The next syncs have nothing to do.
	tk = f.feedTask(tk)
	for pass := 1; pass <= 2; pass++ {
		f.resetActions()
		f.clock.Step(5 * time.Minute)
		if after := f.mustSync(c, tk); after != 0 {
			t.Errorf("suspended, pass %d: requeue after %s, want none", pass, after)
		}
		if w := f.writes(); len(w) != 0 {
			t.Errorf("suspended, pass %d: writes %v, want none", pass, w)
		}
		if len(f.events.events) != 0 {
			t.Errorf("suspended, pass %d: Events %v, want none", pass, f.events.events)
		}
	}

	// Resume.
	f.resetActions()
	tk = f.edit(tk, "kubectl", func(t *calibanv1alpha1.CalibanTask) { t.Spec.Suspend = false })
	f.mustSync(c, tk)
	if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug", "patch sandboxes fix-bug-sbx"}, f.writes()); diff != "" {
		t.Errorf("resuming: writes (-want +got):\n%s", diff)
	}
	if got := sandboxMode(t, f.lastSandboxApply()); got != string(sandboxv1beta1.OperatingModeRunning) {
		t.Errorf("resuming: Sandbox applied with operatingMode %q, want Running", got)
	}
	// The Sandbox still says suspended: the task waits for it.
	st = lastStatus(t, f)
	if st.Phase != calibanv1alpha1.TaskProvisioning || readyReason(st) != builders.ReasonSandboxNotReady {
		t.Errorf("resuming: status %s %s, want Provisioning %s", st.Phase, readyReason(st), builders.ReasonSandboxNotReady)
	}
	want = []recordedEvent{{corev1.EventTypeNormal, EventPhaseChanged, "Suspended → Provisioning"}}
	if diff := cmp.Diff(want, f.events.events, allowUnexported); diff != "" {
		t.Errorf("resuming: Events (-want +got):\n%s", diff)
	}
	// agent-sandbox starts the pod again: Running.
	f.sandboxAnswers()
	tk = f.feedTask(tk)
	f.resetActions()
	f.mustSync(c, tk)
	if st := lastStatus(t, f); st.Phase != calibanv1alpha1.TaskRunning {
		t.Errorf("resumed: phase %s, want Running", st.Phase)
	}
	// Created, suspended, resumed: nothing more once Running.
	if n := len(f.appliedSandboxes()); n != 3 {
		t.Errorf("%d Sandbox applies in all, want 3", n)
	}
}

// Suspending a task that is not pinned yet: it is admitted and pinned as
// usual and its Sandbox created Suspended.
func TestATaskSuspendedBeforeItsPinGetsASuspendedSandbox(t *testing.T) {
	f := lifecycleFixture(t)
	_, tk := f.pinnedTask(func(t *calibanv1alpha1.CalibanTask) { t.Spec.Suspend = true })
	if tk.Status.ResolvedWorkspace == nil {
		t.Fatal("the suspended task was not pinned")
	}
	applies := f.appliedSandboxes()
	if len(applies) != 1 {
		t.Fatalf("%d Sandbox applies, want 1", len(applies))
	}
	if got := sandboxMode(t, applies[0]); got != string(sandboxv1beta1.OperatingModeSuspended) {
		t.Errorf("the Sandbox was created with operatingMode %q, want Suspended", got)
	}
	if tk.Status.Phase != calibanv1alpha1.TaskSuspended {
		t.Errorf("phase %s, want Suspended", tk.Status.Phase)
	}
}

// prospero's settle finishes the task: Completed or Failed, completionTime
// the settle's, and the Sandbox suspended unless onFinish is keep; the
// steady state after it writes nothing.
func TestASettledTaskIsFinished(t *testing.T) {
	settledAt := time.Date(2026, 9, 1, 12, 3, 7, 0, time.UTC)
	tests := map[string]struct {
		mods    []func(*calibanv1alpha1.CalibanTask)
		reason  string // AgentsSettled's
		message string
		// expected
		phase       calibanv1alpha1.TaskPhase
		readyReason string
		suspended   bool // a Sandbox apply with operatingMode Suspended; else none
	}{
		"agents that succeeded complete the task and suspend its Sandbox": {
			reason: builders.SettledSucceeded, phase: calibanv1alpha1.TaskCompleted, readyReason: builders.ReasonCompleted, suspended: true,
		},
		"onFinish suspend, said outright, suspends it too": {
			mods:   []func(*calibanv1alpha1.CalibanTask){onFinish(calibanv1alpha1.OnFinishSuspend)},
			reason: builders.SettledSucceeded, phase: calibanv1alpha1.TaskCompleted, readyReason: builders.ReasonCompleted, suspended: true,
		},
		"agents that failed fail the task and suspend its Sandbox": {
			reason: builders.SettledFailed, message: "planner crashed",
			phase: calibanv1alpha1.TaskFailed, readyReason: builders.ReasonAgentsFailed, suspended: true,
		},
		"with onFinish keep the Sandbox is left running": {
			mods:   []func(*calibanv1alpha1.CalibanTask){onFinish(calibanv1alpha1.OnFinishKeep)},
			reason: builders.SettledSucceeded, phase: calibanv1alpha1.TaskCompleted, readyReason: builders.ReasonCompleted,
		},
		"a settle within the deadline counts": {
			mods:   []func(*calibanv1alpha1.CalibanTask){activeDeadline(3600)},
			reason: builders.SettledSucceeded, phase: calibanv1alpha1.TaskCompleted, readyReason: builders.ReasonCompleted, suspended: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := lifecycleFixture(t)
			c, tk := f.runningTask(tc.mods...)
			f.clock.SetTime(settledAt.Add(30 * time.Second))
			tk = f.edit(tk, "prospero", settled(tc.reason, tc.message, settledAt))
			if after := f.mustSync(c, tk); after != 0 {
				t.Errorf("requeue after %s, want none (no TTL)", after)
			}
			st := lastStatus(t, f)
			if st.Phase != tc.phase || readyReason(st) != tc.readyReason {
				t.Errorf("status %s %s, want %s %s", st.Phase, readyReason(st), tc.phase, tc.readyReason)
			}
			if st.CompletionTime == nil || !st.CompletionTime.Time.Equal(settledAt) {
				t.Errorf("completionTime %v, want the settle's %v", st.CompletionTime, settledAt)
			}
			if tc.message != "" && readyOf(st).Message != tc.message {
				t.Errorf("Ready message %q, want prospero's %q", readyOf(st).Message, tc.message)
			}
			var wantWrites []string
			if tc.suspended {
				wantWrites = []string{"patch calibantasks/status fix-bug", "patch sandboxes fix-bug-sbx"}
			} else {
				wantWrites = []string{"patch calibantasks/status fix-bug"}
			}
			if diff := cmp.Diff(wantWrites, f.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if tc.suspended {
				if got := sandboxMode(t, f.lastSandboxApply()); got != string(sandboxv1beta1.OperatingModeSuspended) {
					t.Errorf("Sandbox applied with operatingMode %q, want Suspended", got)
				}
			}

			// The steady state of a finished task writes nothing.
			if tc.suspended {
				f.sandboxAnswers()
			}
			tk = f.feedTask(tk)
			f.resetActions()
			f.clock.Step(time.Hour)
			if after := f.mustSync(c, tk); after != 0 {
				t.Errorf("finished: requeue after %s, want none", after)
			}
			if w := f.writes(); len(w) != 0 {
				t.Errorf("finished: writes %v, want none", w)
			}
			if len(f.events.events) != 0 {
				t.Errorf("finished: Events %v, want none", f.events.events)
			}
		})
	}
}

// activeDeadlineSeconds: before the deadline the sync asks to look again
// when it comes; once it has passed the task fails DeadlineExceeded, says
// so in one Warning Event, and its Sandbox is suspended.
func TestTheActiveDeadline(t *testing.T) {
	t.Run("before the deadline the sync asks to look again when it comes", func(t *testing.T) {
		f := lifecycleFixture(t)
		c, tk := f.runningTask(activeDeadline(3600))
		start := tk.Status.StartTime.Time
		f.clock.SetTime(start.Add(10 * time.Minute))
		after, err := c.sync(f.ctx, key(tk))
		if err != nil {
			t.Fatalf("sync error %v, want a requeue without an error", err)
		}
		if after != 50*time.Minute {
			t.Errorf("requeue after %s, want the 50m0s left", after)
		}
		if w := f.writes(); len(w) != 0 {
			t.Errorf("writes %v, want none", w)
		}
	})

	t.Run("the deadline keeps counting while the task is suspended", func(t *testing.T) {
		f := lifecycleFixture(t)
		c, tk := f.runningTask(activeDeadline(3600))
		start := tk.Status.StartTime.Time
		f.clock.SetTime(start.Add(20 * time.Minute))
		tk = f.edit(tk, "kubectl", func(t *calibanv1alpha1.CalibanTask) { t.Spec.Suspend = true })
		if after := f.mustSync(c, tk); after != 40*time.Minute {
			t.Errorf("requeue after %s, want the 40m0s left", after)
		}
		f.sandboxAnswers()
		tk = f.feedTask(tk)
		if after := f.mustSync(c, tk); after != 40*time.Minute {
			t.Errorf("once suspended: requeue after %s, want the 40m0s left", after)
		}
		if st := lastStatus(t, f); st.Phase != calibanv1alpha1.TaskSuspended {
			t.Errorf("phase %s, want Suspended", st.Phase)
		}
	})

	t.Run("the pinning sync starts the deadline at the startTime it writes", func(t *testing.T) {
		f := lifecycleFixture(t)
		f.clock.SetTime(time.Date(2026, 9, 1, 12, 0, 0, 400_000_000, time.UTC))
		tk := task(activeDeadline(3600))
		f.seed(tk, workspace(), secret("key", "api-key"))
		c := f.taskController()
		after := f.mustSync(c, tk)
		// startTime is the pin's time truncated to seconds, 12:00:00; the
		// wake-up agrees with it, as an operator restarted would.
		if want := time.Hour - 400*time.Millisecond; after != want {
			t.Errorf("requeue after %s, want %s: the deadline counted from the startTime written", after, want)
		}
		applies := statusApplies(t, f.caliban.Actions())
		if len(applies) == 0 || applies[0].ResolvedWorkspace == nil {
			t.Fatal("the first status write is not the pin")
		}
		if st := applies[0].StartTime; st == nil || !st.Time.Equal(time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)) {
			t.Errorf("the pin's write has startTime %v, want 12:00:00 (truncated)", st)
		}
	})

	tests := map[string]struct {
		mods []func(*calibanv1alpha1.CalibanTask)
		// late is prospero's settle after the deadline, if any.
		late bool
	}{
		"a task past its deadline fails":                          {},
		"a deadline suspends the Sandbox whatever onFinish says":  {mods: []func(*calibanv1alpha1.CalibanTask){onFinish(calibanv1alpha1.OnFinishKeep)}},
		"a settle after the deadline does not change the outcome": {late: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := lifecycleFixture(t)
			// The pin's time is not a whole second: startTime is truncated.
			f.clock.SetTime(time.Date(2026, 9, 1, 12, 0, 0, 400_000_000, time.UTC))
			c, tk := f.runningTask(append([]func(*calibanv1alpha1.CalibanTask){activeDeadline(3600)}, tc.mods...)...)
			start := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
			if tk.Status.StartTime == nil || !tk.Status.StartTime.Time.Equal(start) {
				t.Fatalf("startTime %v, want the pin's time truncated to seconds, %v", tk.Status.StartTime, start)
			}
			deadline := start.Add(time.Hour)
			f.clock.SetTime(deadline.Add(90 * time.Second))
			if tc.late {
				tk = f.edit(tk, "prospero", settled(builders.SettledSucceeded, "", deadline.Add(time.Minute)))
			}
			// The deadline suspends the Sandbox; the task is Running until
			// agent-sandbox has suspended it.
			if after := f.mustSync(c, tk); after != 0 {
				t.Errorf("requeue after %s, want none", after)
			}
			if diff := cmp.Diff([]string{"patch sandboxes fix-bug-sbx"}, f.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if got := sandboxMode(t, f.lastSandboxApply()); got != string(sandboxv1beta1.OperatingModeSuspended) {
				t.Errorf("Sandbox applied with operatingMode %q, want Suspended", got)
			}
			if st, err := f.caliban.CalibanV1alpha1().CalibanTasks(tk.Namespace).Get(f.ctx, tk.Name, metaGet); err != nil || st.Status.Phase != calibanv1alpha1.TaskRunning {
				t.Errorf("before agent-sandbox suspended the Sandbox: %v, phase %v, want Running", err, st.Status.Phase)
			}
			if len(f.events.events) != 0 {
				t.Errorf("before agent-sandbox suspended the Sandbox: Events %v, want none", f.events.events)
			}

			f.sandboxAnswers()
			tk = f.feedTask(tk)
			f.resetActions()
			if after := f.mustSync(c, tk); after != 0 {
				t.Errorf("requeue after %s, want none", after)
			}
			st := lastStatus(t, f)
			ready := readyOf(st)
			wantMsg := "the task ran longer than lifecycle.activeDeadlineSeconds (3600s from its start at 2026-09-01T12:00:00Z)"
			if st.Phase != calibanv1alpha1.TaskFailed || ready == nil || ready.Reason != builders.ReasonDeadlineExceeded || ready.Message != wantMsg {
				t.Errorf("status %s Ready %+v, want Failed %s %q", st.Phase, ready, builders.ReasonDeadlineExceeded, wantMsg)
			}
			if st.CompletionTime == nil || !st.CompletionTime.Time.Equal(deadline) {
				t.Errorf("completionTime %v, want startTime + 3600s = %v", st.CompletionTime, deadline)
			}
			if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			want := []recordedEvent{
				{corev1.EventTypeNormal, EventPhaseChanged, "Running → Failed"},
				{corev1.EventTypeWarning, EventDeadlineExceeded, wantMsg},
			}
			if diff := cmp.Diff(want, f.events.events, allowUnexported); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}

			// Once: the next sync, with all that in the caches, neither
			// writes nor records anything.
			tk = f.feedTask(tk)
			f.resetActions()
			f.clock.Step(10 * time.Minute)
			if after := f.mustSync(c, tk); after != 0 {
				t.Errorf("second sync: requeue after %s, want none", after)
			}
			if w := f.writes(); len(w) != 0 {
				t.Errorf("second sync: writes %v, want none", w)
			}
			if len(f.events.events) != 0 {
				t.Errorf("second sync: Events %v, want none", f.events.events)
			}
		})
	}
}

// ttlSecondsAfterFinished: a finished task is deleted at completionTime +
// ttl, with a UID precondition and background propagation; before that the
// sync asks to look again then. A task Failed by a problem someone may fix
// is not finished and never deleted.
func TestTheTTLAfterFinished(t *testing.T) {
	settledAt := time.Date(2026, 9, 1, 12, 5, 0, 0, time.UTC)
	expiry := settledAt.Add(5 * time.Minute)
	tests := map[string]struct {
		now    time.Time
		after  time.Duration
		delete bool
	}{
		"before its expiry the task stays and the sync looks again at it": {now: expiry.Add(-2 * time.Minute), after: 2 * time.Minute},
		"at its expiry the task is deleted":                               {now: expiry, delete: true},
		"long after its expiry the task is deleted":                       {now: expiry.Add(3 * time.Hour), delete: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := lifecycleFixture(t)
			c, tk := f.runningTask(ttlAfterFinished(300))
			// The settle is written and the Sandbox suspended first.
			f.clock.SetTime(settledAt.Add(time.Minute))
			tk = f.edit(tk, "prospero", settled(builders.SettledSucceeded, "", settledAt))
			if after := f.mustSync(c, tk); after != 4*time.Minute {
				t.Errorf("finishing sync: requeue after %s, want the 4m0s left to the expiry", after)
			}
			if taskDeletes(f.caliban.Actions()) != nil {
				t.Fatal("the finishing sync deleted the task before its expiry")
			}
			f.sandboxAnswers()
			tk = f.feedTask(tk)
			f.resetActions()

			f.clock.SetTime(tc.now)
			after, err := c.sync(f.ctx, key(tk))
			if err != nil {
				t.Fatal(err)
			}
			if after != tc.after {
				t.Errorf("requeue after %s, want %s", after, tc.after)
			}
			deletes := taskDeletes(f.caliban.Actions())
			if !tc.delete {
				if len(f.writes()) != 0 {
					t.Errorf("writes %v, want none", f.writes())
				}
				return
			}
			if diff := cmp.Diff([]string{"delete calibantasks fix-bug"}, f.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if len(deletes) != 1 {
				t.Fatalf("%d deletes, want 1", len(deletes))
			}
			opts := deletes[0].DeleteOptions
			if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != tk.UID {
				t.Errorf("delete preconditions %+v, want the task's UID %s", opts.Preconditions, tk.UID)
			}
			if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationBackground {
				t.Errorf("delete propagation %v, want Background", opts.PropagationPolicy)
			}
			if deletes[0].GetNamespace() != tk.Namespace || deletes[0].GetName() != tk.Name {
				t.Errorf("deleted %s/%s, want %s/%s", deletes[0].GetNamespace(), deletes[0].GetName(), tk.Namespace, tk.Name)
			}
		})
	}
}

func TestTheTTLNeverDeletesATaskThatIsNotFinished(t *testing.T) {
	stateWithoutToken := func(t *calibanv1alpha1.CalibanTask) {
		t.Spec.State = &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080", TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "tok", Key: "k"}}
	}
	tests := map[string]struct {
		run    func(t *testing.T, f *fixture) *calibanv1alpha1.CalibanTask
		reason string
	}{
		"a task Failed by admission (its workspace is missing), ttl 0": {
			run: func(t *testing.T, f *fixture) *calibanv1alpha1.CalibanTask {
				tk := task(ttlAfterFinished(0))
				f.seed(tk)
				c := f.taskController()
				f.clock.Step(time.Hour)
				f.mustSync(c, tk)
				f.feedTask(tk)
				f.clock.Step(time.Hour)
				f.mustSync(c, tk)
				return tk
			},
			reason: builders.ReasonWorkspaceUnresolved,
		},
		"a pinned task Failed by a state problem, ttl 0": {
			run: func(t *testing.T, f *fixture) *calibanv1alpha1.CalibanTask {
				c, tk := f.runningTask(ttlAfterFinished(0))
				f.clock.Step(time.Hour)
				tk = f.edit(tk, "kubectl", stateWithoutToken)
				f.mustSync(c, tk)
				f.feedTask(tk)
				f.clock.Step(time.Hour)
				f.mustSync(c, tk)
				return tk
			},
			reason: builders.ReasonInvalidState,
		},
		"a task Failed by an invalid lifecycle, ttl 0": {
			run: func(t *testing.T, f *fixture) *calibanv1alpha1.CalibanTask {
				tk := task(ttlAfterFinished(0), onDelete("sometimes"))
				f.seed(tk, workspace(), secret("key", "api-key"))
				c := f.taskController()
				f.mustSync(c, tk)
				f.feedTask(tk)
				f.clock.Step(time.Hour)
				f.mustSync(c, tk)
				return tk
			},
			reason: builders.ReasonInvalidLifecycle,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := lifecycleFixture(t)
			tk := tc.run(t, f)
			if d := taskDeletes(f.caliban.Actions()); len(d) != 0 {
				t.Errorf("the task was deleted: %+v", d)
			}
			stored := f.storedTask(tk)
			if stored.Status.Phase != calibanv1alpha1.TaskFailed || readyReason(stored.Status) != tc.reason {
				t.Errorf("the task is %s %s, want Failed %s", stored.Status.Phase, readyReason(stored.Status), tc.reason)
			}
			if stored.Status.CompletionTime != nil {
				t.Errorf("completionTime %v, want none: the task has not finished", stored.Status.CompletionTime)
			}
		})
	}
}

// lifecycle.onDelete checkpoint: the pin is followed by a server-side apply
// of the drain finalizer, before any child.
func TestTheDrainFinalizerIsAppliedRightAfterThePin(t *testing.T) {
	tests := map[string]struct {
		mods  []func(*calibanv1alpha1.CalibanTask)
		order []string
	}{
		"onDelete checkpoint: the finalizer after the pin, before the children": {
			mods: []func(*calibanv1alpha1.CalibanTask){onDelete(calibanv1alpha1.OnDeleteCheckpoint)},
			order: []string{"patch calibantasks/status", "patch calibantasks",
				"create serviceaccounts", "create networkpolicies", "create sandboxes"},
		},
		"onDelete delete: no finalizer": {
			mods:  []func(*calibanv1alpha1.CalibanTask){onDelete(calibanv1alpha1.OnDeleteDelete)},
			order: []string{"patch calibantasks/status", "create serviceaccounts", "create networkpolicies", "create sandboxes"},
		},
		"no lifecycle: no finalizer": {
			order: []string{"patch calibantasks/status", "create serviceaccounts", "create networkpolicies", "create sandboxes"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := lifecycleFixture(t)
			tk := task(tc.mods...)
			f.seed(tk, workspace(), secret("key", "api-key"))
			order := f.recordOrder()
			c := f.taskController()
			f.mustSync(c, tk)
			if diff := cmp.Diff(tc.order, order()); diff != "" {
				t.Errorf("writes in order (-want +got):\n%s", diff)
			}
			applies := finalizerApplies(f.caliban.Actions())
			stored := f.storedTask(tk)
			if !builders.WantsDrain(tk) {
				if len(applies) != 0 || len(stored.Finalizers) != 0 {
					t.Errorf("finalizer applies %d, stored finalizers %v; want none", len(applies), stored.Finalizers)
				}
				return
			}
			if len(applies) != 1 {
				t.Fatalf("%d applies to the task, want 1", len(applies))
			}
			p := applies[0]
			if p.PatchOptions.FieldManager != builders.FieldManager {
				t.Errorf("field manager %q, want %q", p.PatchOptions.FieldManager, builders.FieldManager)
			}
			var body map[string]any
			if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
				t.Fatal(err)
			}
			got, _, _ := unstructured.NestedStringSlice(body, "metadata", "finalizers")
			if diff := cmp.Diff([]string{calibanv1alpha1.FinalizerDrain}, got); diff != "" {
				t.Errorf("applied metadata.finalizers (-want +got):\n%s", diff)
			}
			for _, field := range []string{"spec", "status"} {
				if _, ok := body[field]; ok {
					t.Errorf("the finalizer apply claims %s: %s", field, p.GetPatch())
				}
			}
			if diff := cmp.Diff([]string{calibanv1alpha1.FinalizerDrain}, stored.Finalizers); diff != "" {
				t.Errorf("stored finalizers (-want +got):\n%s", diff)
			}
			if stored.Status.ResolvedWorkspace == nil {
				t.Error("the stored task lost its pin")
			}

			// The next sync, with the finalizer in the cache, applies it
			// no more.
			f.feedBack(c, tk)
			f.resetActions()
			f.mustSync(c, tk)
			if n := len(finalizerApplies(f.caliban.Actions())); n != 0 {
				t.Errorf("the second sync applied the finalizer %d more times", n)
			}
		})
	}
}

// A task that is never pinned never gets the finalizer.
func TestAnUnpinnedTaskNeverGetsTheDrainFinalizer(t *testing.T) {
	f := lifecycleFixture(t)
	tk := task(onDelete(calibanv1alpha1.OnDeleteCheckpoint)) // its workspace is missing
	f.seed(tk)
	c := f.taskController()
	f.mustSync(c, tk)
	if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if st := lastStatus(t, f); st.ResolvedWorkspace != nil || st.Phase != calibanv1alpha1.TaskFailed {
		t.Errorf("status %s pinned=%v, want Failed and not pinned", st.Phase, st.ResolvedWorkspace != nil)
	}
}

// onDelete changed away from checkpoint: the operator's apply releases its
// entry of the finalizer set, no other finalizer is touched, and an entry
// left to another manager goes by a JSON patch that tests it first.
func TestTheDrainFinalizerGoesWhenOnDeleteNoLongerAsksForIt(t *testing.T) {
	f := lifecycleFixture(t)
	c, tk := f.runningTask(onDelete(calibanv1alpha1.OnDeleteCheckpoint))
	// Someone else's finalizer comes first.
	tk = f.edit(tk, "someone", func(t *calibanv1alpha1.CalibanTask) {
		t.Finalizers = append([]string{"example.com/other"}, t.Finalizers...)
	})
	tk = f.edit(tk, "kubectl", func(t *calibanv1alpha1.CalibanTask) { t.Spec.Lifecycle.OnDelete = calibanv1alpha1.OnDeleteDelete })
	if diff := cmp.Diff([]string{"example.com/other", calibanv1alpha1.FinalizerDrain}, tk.Finalizers); diff != "" {
		t.Fatalf("set-up: finalizers (-want +got):\n%s", diff)
	}
	f.mustSync(c, tk)
	patches := jsonPatches(t, f.caliban.Actions())
	if diff := cmp.Diff([][]map[string]any{removeFinalizerAt(1)}, patches); diff != "" {
		t.Errorf("JSON patches (-want +got):\n%s", diff)
	}
	releasesTheDrainFinalizer(t, f.caliban.Actions())
	if diff := cmp.Diff([]string{"example.com/other"}, f.storedTask(tk).Finalizers); diff != "" {
		t.Errorf("stored finalizers (-want +got):\n%s", diff)
	}
	if len(f.appliedSandboxes()) != 1 {
		t.Errorf("%d Sandbox applies in all, want only the first: the children do not change", len(f.appliedSandboxes()))
	}
	// Gone for good: the next sync sends nothing.
	tk = f.feedTask(tk)
	f.resetActions()
	f.mustSync(c, tk)
	if w := f.writes(); len(w) != 0 {
		t.Errorf("the next sync wrote %v", w)
	}
}

// deleteTask sets the task's deletionTimestamp to now, as the apiserver
// does on a DELETE of an object with finalizers.
func (f *fixture) deleteTask(tk *calibanv1alpha1.CalibanTask) *calibanv1alpha1.CalibanTask {
	f.t.Helper()
	return f.edit(tk, "apiserver", func(t *calibanv1alpha1.CalibanTask) {
		now := metav1.NewTime(f.clock.Now())
		t.DeletionTimestamp = &now
	})
}

// A deleted task with the drain finalizer says Draining, once, leaves its
// children alone, keeps the finalizer, and looks again when the drain
// times out.
func TestADeletedTaskDrains(t *testing.T) {
	f := lifecycleFixture(t)
	c, tk := f.runningTask(onDelete(calibanv1alpha1.OnDeleteCheckpoint))
	start := tk.Status.StartTime
	f.clock.Step(3 * time.Minute)
	deletedAt := f.clock.Now()
	tk = f.deleteTask(tk)
	f.clock.Step(2 * time.Minute)

	after, err := c.sync(f.ctx, key(tk))
	if err != nil {
		t.Fatal(err)
	}
	if after != 8*time.Minute {
		t.Errorf("requeue after %s, want the 8m0s left of the 10m drain timeout", after)
	}
	if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	st := lastStatus(t, f)
	ready := readyOf(st)
	wantMsg := "deleted with lifecycle.onDelete checkpoint: waiting for prospero's AgentsDrained condition until " +
		deletedAt.Add(10*time.Minute).UTC().Format(time.RFC3339)
	if st.Phase != calibanv1alpha1.TaskDraining || ready == nil || ready.Status != metav1.ConditionFalse ||
		ready.Reason != builders.ReasonDraining || ready.Message != wantMsg {
		t.Errorf("status %s Ready %+v, want Draining, Ready=False %s %q", st.Phase, ready, builders.ReasonDraining, wantMsg)
	}
	if st.CalibandEndpoint != "fix-bug-sbx.team.svc.cluster.local:8443" {
		t.Errorf("calibandEndpoint %q, want it kept while the Sandbox serves", st.CalibandEndpoint)
	}
	if st.ResolvedWorkspace == nil || !st.StartTime.Equal(start) {
		t.Errorf("pin kept %v, startTime %v; want the pin and startTime %v kept", st.ResolvedWorkspace != nil, st.StartTime, start)
	}
	if diff := cmp.Diff([]string{calibanv1alpha1.FinalizerDrain}, f.storedTask(tk).Finalizers); diff != "" {
		t.Errorf("stored finalizers (-want +got):\n%s", diff)
	}
	want := []recordedEvent{{corev1.EventTypeNormal, EventPhaseChanged, "Running → Draining"}}
	if diff := cmp.Diff(want, f.events.events, allowUnexported); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}

	// Still no answer: nothing more is written, not even when the
	// children change under it.
	tk = f.feedTask(tk)
	f.resetActions()
	f.clock.Step(time.Minute)
	sa := f.servedServiceAccount(tk)
	sa.AutomountServiceAccountToken = new(true)
	f.cache(f.kubeInformers.Core().V1().ServiceAccounts().Informer(), sa)
	if after := f.mustSync(c, tk); after != 7*time.Minute {
		t.Errorf("second sync: requeue after %s, want the 7m0s left", after)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("second sync: writes %v, want none", w)
	}
	if len(f.events.events) != 0 {
		t.Errorf("second sync: Events %v", f.events.events)
	}
}

// Draining comes first: a finished task, or one past its deadline, that is
// deleted with the finalizer drains, keeps its completionTime, and its
// children are not touched (its Sandbox is not suspended by the drain).
func TestDrainingComesFirst(t *testing.T) {
	settledAt := time.Date(2026, 9, 1, 12, 1, 0, 0, time.UTC)
	tests := map[string]struct {
		mods []func(*calibanv1alpha1.CalibanTask)
		// finish happens to the Running task before it is deleted.
		finish     func(f *fixture, c *TaskController, tk *calibanv1alpha1.CalibanTask) *calibanv1alpha1.CalibanTask
		completion *time.Time
	}{
		"a completed task keeps its completionTime": {
			finish: func(f *fixture, c *TaskController, tk *calibanv1alpha1.CalibanTask) *calibanv1alpha1.CalibanTask {
				f.clock.SetTime(settledAt.Add(time.Minute))
				tk = f.edit(tk, "prospero", settled(builders.SettledSucceeded, "", settledAt))
				f.mustSync(c, tk)
				f.sandboxAnswers()
				return f.feedTask(tk)
			},
			completion: &settledAt,
		},
		"a task deleted after its deadline, before any sync saw it, drains rather than fails": {
			mods: []func(*calibanv1alpha1.CalibanTask){activeDeadline(60)},
			finish: func(f *fixture, _ *TaskController, tk *calibanv1alpha1.CalibanTask) *calibanv1alpha1.CalibanTask {
				f.clock.Step(2 * time.Minute)
				return tk
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := lifecycleFixture(t)
			c, tk := f.runningTask(append([]func(*calibanv1alpha1.CalibanTask){onDelete(calibanv1alpha1.OnDeleteCheckpoint)}, tc.mods...)...)
			tk = tc.finish(f, c, tk)
			sandboxes := len(f.appliedSandboxes())
			tk = f.deleteTask(tk)
			f.resetActions()
			f.mustSync(c, tk)
			if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if n := len(f.appliedSandboxes()); n != sandboxes {
				t.Errorf("the drain applied the Sandbox %d times", n-sandboxes)
			}
			st := lastStatus(t, f)
			if st.Phase != calibanv1alpha1.TaskDraining || readyReason(st) != builders.ReasonDraining {
				t.Errorf("status %s %s, want Draining", st.Phase, readyReason(st))
			}
			switch {
			case tc.completion == nil && st.CompletionTime != nil:
				t.Errorf("completionTime %v, want none", st.CompletionTime)
			case tc.completion != nil && (st.CompletionTime == nil || !st.CompletionTime.Time.Equal(*tc.completion)):
				t.Errorf("completionTime %v, want %v kept", st.CompletionTime, *tc.completion)
			}
			for _, e := range f.events.events {
				if e.eventType == corev1.EventTypeWarning {
					t.Errorf("Warning Event %+v while draining", e)
				}
			}
		})
	}
}

// prospero's answer, or the timeout, ends the drain: the checkpoint in the
// status, then the finalizer removed, and an Event saying how it went.
func TestTheDrainEnds(t *testing.T) {
	tests := map[string]struct {
		answer func(at time.Time) func(*calibanv1alpha1.CalibanTask) // nil: none
		wait   time.Duration                                         // after the first Draining sync
		// expected
		checkpointRef string
		event         *recordedEvent // nil: still draining
		after         time.Duration
	}{
		"Checkpointed: the checkpoint is recorded and the task goes": {
			answer: func(at time.Time) func(*calibanv1alpha1.CalibanTask) {
				return drained(metav1.ConditionTrue, builders.DrainedCheckpointed, "ckpt-1", at)
			},
			wait: time.Minute, checkpointRef: "ckpt-1",
			event: &recordedEvent{corev1.EventTypeNormal, EventDrained, "drained: checkpoint ckpt-1"},
		},
		"NothingToDrain: the task goes": {
			answer: func(at time.Time) func(*calibanv1alpha1.CalibanTask) {
				return drained(metav1.ConditionTrue, builders.DrainedNothingToDrain, "", at)
			},
			wait:  time.Minute,
			event: &recordedEvent{corev1.EventTypeNormal, EventDrained, "drained: nothing to drain"},
		},
		"DrainFailed: the task goes with a Warning": {
			answer: func(at time.Time) func(*calibanv1alpha1.CalibanTask) {
				return drained(metav1.ConditionFalse, builders.DrainFailed, "caliband unreachable", at)
			},
			wait:  time.Minute,
			event: &recordedEvent{corev1.EventTypeWarning, EventDrainFailed, "drain failed: caliband unreachable"},
		},
		"an answer after the timeout is still an answer": {
			answer: func(at time.Time) func(*calibanv1alpha1.CalibanTask) {
				return drained(metav1.ConditionTrue, builders.DrainedCheckpointed, "ckpt-2", at)
			},
			wait: time.Hour, checkpointRef: "ckpt-2",
			event: &recordedEvent{corev1.EventTypeNormal, EventDrained, "drained: checkpoint ckpt-2"},
		},
		"no answer past the timeout: the task goes without a checkpoint": {
			wait: 10*time.Minute + time.Second,
			event: &recordedEvent{corev1.EventTypeWarning, EventDrainTimedOut,
				"prospero did not answer within 10m0s (CALIBAN_DRAIN_TIMEOUT_SECONDS); the task goes without a checkpoint"},
		},
		"no answer exactly at the timeout: the task goes": {
			wait: 10 * time.Minute,
			event: &recordedEvent{corev1.EventTypeWarning, EventDrainTimedOut,
				"prospero did not answer within 10m0s (CALIBAN_DRAIN_TIMEOUT_SECONDS); the task goes without a checkpoint"},
		},
		"no answer before the timeout: the finalizer stays": {
			wait: 9 * time.Minute, after: time.Minute,
		},
		"prospero still at work (False, another reason): the finalizer stays": {
			answer: func(at time.Time) func(*calibanv1alpha1.CalibanTask) {
				return drained(metav1.ConditionFalse, "Checkpointing", "writing", at)
			},
			wait: 4 * time.Minute, after: 6 * time.Minute,
		},
		"prospero still at work (Unknown): the finalizer stays": {
			answer: func(at time.Time) func(*calibanv1alpha1.CalibanTask) {
				return drained(metav1.ConditionUnknown, "Starting", "", at)
			},
			wait: 4 * time.Minute, after: 6 * time.Minute,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := lifecycleFixture(t)
			c, tk := f.runningTask(onDelete(calibanv1alpha1.OnDeleteCheckpoint))
			tk = f.deleteTask(tk)
			f.mustSync(c, tk) // Draining
			tk = f.feedTask(tk)
			if tk.Status.Phase != calibanv1alpha1.TaskDraining {
				t.Fatalf("set-up: phase %s, want Draining", tk.Status.Phase)
			}
			f.clock.Step(tc.wait)
			if tc.answer != nil {
				tk = f.edit(tk, "prospero", tc.answer(f.clock.Now()))
			}
			f.resetActions()
			order := f.recordOrder()

			after, err := c.sync(f.ctx, key(tk))
			if err != nil {
				t.Fatal(err)
			}
			if after != tc.after {
				t.Errorf("requeue after %s, want %s", after, tc.after)
			}
			for _, w := range f.writes() {
				if !strings.HasPrefix(w, "patch calibantasks") {
					t.Errorf("a child was written: %s", w)
				}
			}
			if n := len(f.appliedSandboxes()); n != 1 {
				t.Errorf("%d Sandbox applies in all, want only the first", n)
			}
			patches := jsonPatches(t, f.caliban.Actions())
			stored := f.storedTask(tk)
			if tc.event == nil {
				if len(patches) != 0 || len(f.events.events) != 0 {
					t.Errorf("patches %v, Events %v; want none while the drain goes on", patches, f.events.events)
				}
				if diff := cmp.Diff([]string{calibanv1alpha1.FinalizerDrain}, stored.Finalizers); diff != "" {
					t.Errorf("stored finalizers (-want +got):\n%s", diff)
				}
				if w := f.writes(); len(w) != 0 {
					t.Errorf("writes %v, want none", w)
				}
				return
			}
			if diff := cmp.Diff([][]map[string]any{removeFinalizerAt(0)}, patches); diff != "" {
				t.Errorf("JSON patches (-want +got):\n%s", diff)
			}
			if len(stored.Finalizers) != 0 {
				t.Errorf("stored finalizers %v, want none", stored.Finalizers)
			}
			if diff := cmp.Diff([]recordedEvent{*tc.event}, f.events.events, allowUnexported); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
			if tc.checkpointRef != "" && !strings.Contains(f.events.events[0].note, tc.checkpointRef) {
				t.Errorf("the Drained note %q does not name the checkpoint %s", f.events.events[0].note, tc.checkpointRef)
			}
			releasesTheDrainFinalizer(t, f.caliban.Actions())
			// The apply, then the patch (see releasesTheDrainFinalizer).
			wantOrder := []string{"patch calibantasks", "patch calibantasks"}
			if tc.checkpointRef != "" {
				// The checkpoint is in the status before the task goes.
				wantOrder = append([]string{"patch calibantasks/status"}, wantOrder...)
				st := lastStatus(t, f)
				if st.CheckpointRef != tc.checkpointRef || st.Phase != calibanv1alpha1.TaskDraining {
					t.Errorf("status checkpointRef %q phase %s, want %q, Draining", st.CheckpointRef, st.Phase, tc.checkpointRef)
				}
			}
			if diff := cmp.Diff(wantOrder, order()); diff != "" {
				t.Errorf("writes in order (-want +got):\n%s", diff)
			}
		})
	}
}

// An AgentsDrained message written while the task is not draining (by
// anyone who may patch the status) is no checkpoint: it never reaches
// status.checkpointRef, which only the operator writes, and the operator
// writes nothing for it. Once the task drains, prospero's answer is
// recorded.
func TestACheckpointRefComesOnlyFromTheDrain(t *testing.T) {
	f := lifecycleFixture(t)
	c, tk := f.runningTask(onDelete(calibanv1alpha1.OnDeleteCheckpoint))
	tk = f.edit(tk, "prospero", drained(metav1.ConditionTrue, builders.DrainedCheckpointed, "ckpt-forged", f.clock.Now()))
	f.resetActions()
	f.mustSync(c, tk)
	if w := f.writes(); len(w) != 0 {
		t.Errorf("an AgentsDrained message on a running task: writes %v, want none", w)
	}
	if got := f.storedTask(tk).Status.CheckpointRef; got != "" {
		t.Errorf("a running task's checkpointRef is %q, want none", got)
	}

	// prospero takes its condition back before the task is deleted.
	tk = f.edit(tk, "prospero", func(t *calibanv1alpha1.CalibanTask) {
		meta.RemoveStatusCondition(&t.Status.Conditions, builders.ConditionAgentsDrained)
	})
	tk = f.deleteTask(tk)
	f.mustSync(c, tk) // Draining
	tk = f.feedTask(tk)
	tk = f.edit(tk, "prospero", drained(metav1.ConditionTrue, builders.DrainedCheckpointed, "ckpt-1", f.clock.Now()))
	f.resetActions()
	f.mustSync(c, tk)
	if got := lastStatus(t, f); got.CheckpointRef != "ckpt-1" || got.Phase != calibanv1alpha1.TaskDraining {
		t.Errorf("the drain's status: checkpointRef %q, phase %s; want ckpt-1, Draining", got.CheckpointRef, got.Phase)
	}
}

// A deleted task without the finalizer is the garbage collector's: the
// sync sends nothing at all.
func TestADeletedTaskWithoutTheFinalizerIsLeftAlone(t *testing.T) {
	tests := map[string]struct {
		mods []func(*calibanv1alpha1.CalibanTask)
		// sandboxGone: the garbage collector already removed the Sandbox.
		sandboxGone bool
	}{
		"onDelete delete":   {mods: []func(*calibanv1alpha1.CalibanTask){onDelete(calibanv1alpha1.OnDeleteDelete)}},
		"no lifecycle":      {},
		"suspended":         {mods: []func(*calibanv1alpha1.CalibanTask){func(t *calibanv1alpha1.CalibanTask) { t.Spec.Suspend = true }}},
		"past its deadline": {mods: []func(*calibanv1alpha1.CalibanTask){activeDeadline(60)}},
		"its Sandbox already collected: not applied again": {sandboxGone: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := lifecycleFixture(t)
			c, tk := f.pinnedTask(tc.mods...)
			f.resetActions()
			tk = f.deleteTask(tk)
			if tc.sandboxGone {
				if err := f.sandboxInformer.GetIndexer().Delete(watchedSandbox(t, f.lastSandboxApply())); err != nil {
					t.Fatal(err)
				}
				if c.sandboxOf(tk, c.claimOf(tk)) != nil {
					t.Fatal("set-up: the Sandbox is still cached")
				}
			}
			f.clock.Step(time.Hour)
			after, err := c.sync(f.ctx, key(tk))
			if err != nil || after != 0 {
				t.Errorf("sync = %s, %v; want 0, nil", after, err)
			}
			if w := f.writes(); len(w) != 0 {
				t.Errorf("writes %v, want none", w)
			}
			if len(f.events.events) != 0 {
				t.Errorf("Events %v, want none", f.events.events)
			}
		})
	}
}

// An onDelete the operator does not know fails the task before admission:
// never pinned, no child; fixing it lets the task go on. A pinned task
// given one fails too, its children left alone.
func TestAnInvalidLifecycle(t *testing.T) {
	wantMsg := "lifecycle.onDelete 'sometimes' is not one of: delete, checkpoint"

	t.Run("an unpinned task is never pinned with it", func(t *testing.T) {
		f := lifecycleFixture(t)
		tk := task(onDelete("sometimes"))
		f.seed(tk, workspace(), secret("key", "api-key"))
		c := f.taskController()
		after := f.mustSync(c, tk)
		if after != failureRequeue {
			t.Errorf("requeue after %s, want %s", after, failureRequeue)
		}
		if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
			t.Errorf("writes (-want +got):\n%s", diff)
		}
		st := lastStatus(t, f)
		ready := readyOf(st)
		if st.Phase != calibanv1alpha1.TaskFailed || ready == nil || ready.Reason != builders.ReasonInvalidLifecycle || ready.Message != wantMsg {
			t.Errorf("status %s Ready %+v, want Failed %s %q", st.Phase, ready, builders.ReasonInvalidLifecycle, wantMsg)
		}
		if st.ResolvedWorkspace != nil || st.StartTime != nil {
			t.Errorf("the task was pinned (%v) or started (%v)", st.ResolvedWorkspace != nil, st.StartTime)
		}
		if len(f.appliedSandboxes()) != 0 {
			t.Errorf("%d Sandboxes applied, want none", len(f.appliedSandboxes()))
		}
		want := []recordedEvent{{corev1.EventTypeWarning, builders.ReasonInvalidLifecycle, wantMsg}}
		if diff := cmp.Diff(want, f.events.events, allowUnexported); diff != "" {
			t.Errorf("Events (-want +got):\n%s", diff)
		}

		// Fixed: the task is admitted and pinned.
		tk = f.feedTask(tk)
		tk = f.edit(tk, "kubectl", func(t *calibanv1alpha1.CalibanTask) { t.Spec.Lifecycle.OnDelete = calibanv1alpha1.OnDeleteDelete })
		f.resetActions()
		f.mustSync(c, tk)
		if st := lastStatus(t, f); st.ResolvedWorkspace == nil || st.Phase != calibanv1alpha1.TaskProvisioning {
			t.Errorf("fixed: status %s pinned=%v, want Provisioning and pinned", st.Phase, st.ResolvedWorkspace != nil)
		}
		if len(f.appliedSandboxes()) != 1 {
			t.Errorf("fixed: %d Sandboxes applied, want 1", len(f.appliedSandboxes()))
		}
	})

	t.Run("a pinned task fails with its children left alone", func(t *testing.T) {
		f := lifecycleFixture(t)
		c, tk := f.runningTask()
		tk = f.edit(tk, "kubectl", onDelete("sometimes"))
		f.mustSync(c, tk)
		if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
			t.Errorf("writes (-want +got):\n%s", diff)
		}
		st := lastStatus(t, f)
		if st.Phase != calibanv1alpha1.TaskFailed || readyReason(st) != builders.ReasonInvalidLifecycle {
			t.Errorf("status %s %s, want Failed %s", st.Phase, readyReason(st), builders.ReasonInvalidLifecycle)
		}
		if st.ResolvedWorkspace == nil {
			t.Error("the pin was dropped")
		}
		// Fixed: Running again.
		tk = f.feedTask(tk)
		tk = f.edit(tk, "kubectl", func(t *calibanv1alpha1.CalibanTask) { t.Spec.Lifecycle.OnDelete = "" })
		f.resetActions()
		f.mustSync(c, tk)
		if st := lastStatus(t, f); st.Phase != calibanv1alpha1.TaskRunning {
			t.Errorf("fixed: phase %s, want Running", st.Phase)
		}
	})
}
