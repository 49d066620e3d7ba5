// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// The lifecycle's clock: a task pinned at tStart, with a 100 s deadline.
var (
	tStart    = metav1.NewTime(time.Date(2026, 9, 2, 0, 0, 0, 0, time.UTC))
	tDeadline = metav1.NewTime(tStart.Add(100 * time.Second))
	tBefore   = metav1.NewTime(tStart.Add(40 * time.Second))
	tAfter    = metav1.NewTime(tStart.Add(160 * time.Second))
)

const lcFQDN = "fix-bug-sbx.team.svc.cluster.local"

// pinned is a task admitted at tStart.
func pinned(t *calibanv1alpha1.CalibanTask) {
	t.Status.ResolvedWorkspace, t.Status.StartTime = fxPin(), &tStart
	t.Status.PermissionPosture = calibanv1alpha1.PostureSupervised
}

func withLifecycle(lc calibanv1alpha1.LifecycleSpec) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) { t.Spec.Lifecycle = &lc }
}

func seconds(n int32) *int32 { return &n }

func suspended(t *calibanv1alpha1.CalibanTask) { t.Spec.Suspend = true }

func settledAt(reason string, at metav1.Time) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.Status.Conditions = append(t.Status.Conditions, metav1.Condition{
			Type: ConditionAgentsSettled, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: at})
	}
}

func drained(status metav1.ConditionStatus, reason, message string) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.Status.Conditions = append(t.Status.Conditions, metav1.Condition{
			Type: ConditionAgentsDrained, Status: status, Reason: reason, Message: message, LastTransitionTime: tBefore})
	}
}

// deletedAt is a task deleted at the time given, still carrying the drain
// finalizer.
func deletedAt(at metav1.Time) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.DeletionTimestamp = &at
		t.Finalizers = []string{"example.com/other", calibanv1alpha1.FinalizerDrain}
	}
}

func deadline100(t *calibanv1alpha1.CalibanTask) {
	withLifecycle(calibanv1alpha1.LifecycleSpec{ActiveDeadlineSeconds: seconds(100)})(t)
}

// TestLifecyclePhasePrecedence has a row per pair of lifecycle states that
// can hold at once: the first of docs/crd-reference.md#lifecycle's list
// wins. Only the phase, the Ready reason, the endpoint and the completion
// time are compared; TestTaskStatusPhaseDerivation covers the rest.
func TestLifecyclePhasePrecedence(t *testing.T) {
	serving := fxSandbox(lcFQDN, sbReady("True", ""))
	// Suspend accepted, the pod still there (agent-sandbox has not
	// reconciled it yet), and the pod gone.
	stopping := withMode(fxSandbox(lcFQDN, sbReady("True", "")), sandboxv1beta1.OperatingModeSuspended)
	parkedSB := suspendedSandbox()
	type want struct {
		Phase      calibanv1alpha1.TaskPhase
		Reason     string
		Endpoint   string
		Completion *metav1.Time
	}
	tests := map[string]struct {
		task    *calibanv1alpha1.CalibanTask
		failure *Failure
		sandbox *sandboxv1beta1.Sandbox
		now     metav1.Time
		want    want
	}{
		"a suspended task whose Sandbox has not taken operatingMode Suspended stays Running": {
			task: fxTask(pinned, suspended), sandbox: serving, now: tBefore,
			want: want{Phase: "Running", Reason: ReasonRunning, Endpoint: lcFQDN + ":8443"},
		},
		"a suspended task stays Running while agent-sandbox still reports its Sandbox Ready": {
			task: fxTask(pinned, suspended), sandbox: stopping, now: tBefore,
			want: want{Phase: "Running", Reason: ReasonRunning, Endpoint: lcFQDN + ":8443"},
		},
		"a suspended task is Suspended without an endpoint once its Sandbox is suspended and not Ready": {
			task: fxTask(pinned, suspended), sandbox: parkedSB, now: tBefore,
			want: want{Phase: "Suspended", Reason: ReasonSuspended},
		},
		"resumed in its spec, a task whose Sandbox is still suspended is Suspended": {
			task: fxTask(pinned), sandbox: parkedSB, now: tBefore,
			want: want{Phase: "Suspended", Reason: ReasonSuspended},
		},
		"a suspended task whose Sandbox API is missing is still Suspended": {
			task: fxTask(pinned, suspended), now: tBefore,
			want: want{Phase: "Suspended", Reason: ReasonSuspended},
		},
		"resumed, a task with a Sandbox not Ready yet is Provisioning": {
			task: fxTask(pinned), sandbox: fxSandbox(lcFQDN, metav1.Condition{Type: "Ready", Status: "False", Reason: "SandboxSuspended", Message: "Sandbox is suspended"}), now: tBefore,
			want: want{Phase: "Provisioning", Reason: ReasonSandboxNotReady},
		},
		"a deadline not reached yet changes nothing": {
			task: fxTask(pinned, deadline100), sandbox: serving, now: tBefore,
			want: want{Phase: "Running", Reason: ReasonRunning, Endpoint: lcFQDN + ":8443"},
		},
		"a passed deadline leaves a task Running until its Sandbox is suspended": {
			task: fxTask(pinned, deadline100), sandbox: serving, now: tAfter,
			want: want{Phase: "Running", Reason: ReasonRunning, Endpoint: lcFQDN + ":8443"},
		},
		"a passed deadline fails a task once its Sandbox is suspended, finished at the deadline, not when it was noticed": {
			task: fxTask(pinned, deadline100), sandbox: parkedSB, now: tAfter,
			want: want{Phase: "Failed", Reason: ReasonDeadlineExceeded, Completion: &tDeadline},
		},
		"a passed deadline wins over suspend": {
			task: fxTask(pinned, deadline100, suspended), now: tAfter,
			want: want{Phase: "Failed", Reason: ReasonDeadlineExceeded, Completion: &tDeadline},
		},
		"a settle before the deadline wins over the deadline passing later": {
			task: fxTask(pinned, deadline100, settledAt(SettledSucceeded, tBefore)), sandbox: serving, now: tAfter,
			want: want{Phase: "Completed", Reason: ReasonCompleted, Completion: &tBefore},
		},
		"a settle after the deadline does not undo DeadlineExceeded": {
			task: fxTask(pinned, deadline100, settledAt(SettledSucceeded, tAfter)), sandbox: parkedSB, now: tAfter,
			want: want{Phase: "Failed", Reason: ReasonDeadlineExceeded, Completion: &tDeadline},
		},
		"a settle exactly at the deadline is in time": {
			task: fxTask(pinned, deadline100, settledAt(SettledFailed, tDeadline)), now: tAfter,
			want: want{Phase: "Failed", Reason: ReasonAgentsFailed, Completion: &tDeadline},
		},
		"a settled task that is also suspended stays Completed": {
			task: fxTask(pinned, suspended, settledAt(SettledSucceeded, tBefore)), now: tAfter,
			want: want{Phase: "Completed", Reason: ReasonCompleted, Completion: &tBefore},
		},
		"a problem wins over a passed deadline, and a failed task has not finished": {
			task: fxTask(pinned, deadline100), failure: &Failure{ReasonPostureNotPermitted, "no"}, now: tAfter,
			want: want{Phase: "Failed", Reason: ReasonPostureNotPermitted},
		},
		"a problem wins over prospero's settle": {
			task: fxTask(pinned, settledAt(SettledSucceeded, tBefore)), failure: &Failure{ReasonInvalidState, "no"}, now: tAfter,
			want: want{Phase: "Failed", Reason: ReasonInvalidState},
		},
		"a deleted task with the drain finalizer is Draining, keeping the endpoint prospero drains through": {
			task: fxTask(pinned, deletedAt(tBefore)), sandbox: serving, now: tBefore,
			want: want{Phase: "Draining", Reason: ReasonDraining, Endpoint: lcFQDN + ":8443"},
		},
		"Draining wins over a problem and over prospero's settle, keeping the completion time": {
			task: fxTask(pinned, settledAt(SettledSucceeded, tBefore), func(t *calibanv1alpha1.CalibanTask) {
				t.Status.CompletionTime = &tBefore
			}, deletedAt(tAfter)),
			failure: &Failure{ReasonInvalidState, "no"}, now: tAfter,
			want: want{Phase: "Draining", Reason: ReasonDraining, Completion: &tBefore},
		},
		"Draining wins over suspend and a passed deadline": {
			task: fxTask(pinned, suspended, deadline100, deletedAt(tAfter)), now: tAfter,
			want: want{Phase: "Draining", Reason: ReasonDraining},
		},
		"a deleted task without the drain finalizer is not Draining": {
			task: fxTask(pinned, func(t *calibanv1alpha1.CalibanTask) { t.DeletionTimestamp = &tBefore }), sandbox: serving, now: tBefore,
			want: want{Phase: "Running", Reason: ReasonRunning, Endpoint: lcFQDN + ":8443"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := TaskStatusInput{Task: tc.task, Failure: tc.failure, Pin: tc.task.Status.ResolvedWorkspace, Posture: "supervised",
				Sandbox: observe(tc.sandbox), SandboxAPIMissing: tc.sandbox == nil, Now: tc.now, DrainTimeout: time.Minute}
			st := TaskStatus(in, config.DefaultAgentSettings())
			got := want{Phase: st.Phase, Endpoint: st.CalibandEndpoint, Completion: st.CompletionTime}
			if len(st.Conditions) == 1 {
				got.Reason = st.Conditions[0].Reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if st.StartTime == nil || !st.StartTime.Equal(&tStart) {
				t.Errorf("startTime %v, want the pin's %v kept", st.StartTime, tStart)
			}
		})
	}
}

func TestLifecycleMessages(t *testing.T) {
	tests := map[string]struct {
		task    *calibanv1alpha1.CalibanTask
		sandbox *sandboxv1beta1.Sandbox
		now     metav1.Time
		want    string
	}{
		"Suspended says the volume is kept": {
			task: fxTask(pinned, suspended), sandbox: suspendedSandbox(), now: tBefore,
			want: "suspended by spec.suspend: the Sandbox has no pod; its workspace volume is kept",
		},
		"DeadlineExceeded names the field, the limit and the start": {
			task: fxTask(pinned, deadline100), sandbox: suspendedSandbox(), now: tAfter,
			want: "the task ran longer than lifecycle.activeDeadlineSeconds (100s from its start at 2026-09-02T00:00:00Z)",
		},
		"a task pinned before startTime existed counts from its creation": {
			task: fxTask(pinned, deadline100, func(t *calibanv1alpha1.CalibanTask) {
				t.Status.StartTime = nil
				t.CreationTimestamp = tEarlier
			}), sandbox: suspendedSandbox(), now: tNow,
			want: "the task ran longer than lifecycle.activeDeadlineSeconds (100s from its start at 2026-09-01T00:00:00Z)",
		},
		"Draining says what it waits for and until when": {
			task: fxTask(pinned, deletedAt(tBefore)), now: tBefore,
			want: "deleted with lifecycle.onDelete checkpoint: waiting for prospero's AgentsDrained condition until 2026-09-02T00:01:40Z",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := TaskStatus(TaskStatusInput{Task: tc.task, Pin: tc.task.Status.ResolvedWorkspace, Posture: "supervised", Sandbox: observe(tc.sandbox), Now: tc.now, DrainTimeout: time.Minute}, config.DefaultAgentSettings())
			if len(st.Conditions) != 1 || st.Conditions[0].Message != tc.want {
				t.Errorf("Ready %+v, want message %q", st.Conditions, tc.want)
			}
		})
	}
}

// A task pinned in this very pass starts now: a long wait for its
// Workspace does not eat its deadline.
func TestThePinStartsTheDeadline(t *testing.T) {
	task := fxTask(deadline100, func(t *calibanv1alpha1.CalibanTask) { t.CreationTimestamp = tEarlier })
	now := metav1.NewTime(tNow.Add(1500 * time.Millisecond))
	st := TaskStatus(TaskStatusInput{Task: task, Pin: fxPin(), Posture: "supervised", Now: now}, config.DefaultAgentSettings())
	if st.Phase != calibanv1alpha1.TaskProvisioning {
		t.Errorf("phase %s, want Provisioning: the deadline counts from the pin", st.Phase)
	}
	if want := metav1.NewTime(tNow.Add(time.Second)); st.StartTime == nil || !st.StartTime.Equal(&want) {
		t.Errorf("startTime %v, want the pin's time to the second, %v", st.StartTime, want)
	}
}

func TestSandboxMode(t *testing.T) {
	keep := withLifecycle(calibanv1alpha1.LifecycleSpec{OnFinish: calibanv1alpha1.OnFinishKeep})
	keepWithDeadline := withLifecycle(calibanv1alpha1.LifecycleSpec{OnFinish: calibanv1alpha1.OnFinishKeep, ActiveDeadlineSeconds: seconds(100)})
	tests := map[string]struct {
		task *calibanv1alpha1.CalibanTask
		now  metav1.Time
		want sandboxv1beta1.OperatingMode
	}{
		"a running task runs":                                   {fxTask(pinned), tBefore, "Running"},
		"spec.suspend suspends":                                 {fxTask(pinned, suspended), tBefore, "Suspended"},
		"a finished task is suspended by default":               {fxTask(pinned, settledAt(SettledSucceeded, tBefore)), tAfter, "Suspended"},
		"a task whose agents failed is suspended by default":    {fxTask(pinned, settledAt(SettledFailed, tBefore)), tAfter, "Suspended"},
		"onFinish keep leaves a finished task running":          {fxTask(pinned, keep, settledAt(SettledSucceeded, tBefore)), tAfter, "Running"},
		"spec.suspend wins over onFinish keep":                  {fxTask(pinned, keep, suspended, settledAt(SettledSucceeded, tBefore)), tAfter, "Suspended"},
		"a passed deadline suspends whatever onFinish says":     {fxTask(pinned, keepWithDeadline), tAfter, "Suspended"},
		"a deadline not reached yet leaves the task running":    {fxTask(pinned, keepWithDeadline), tBefore, "Running"},
		"a settle that is not a finish leaves the task running": {fxTask(pinned, settledAt("Pending", tBefore)), tAfter, "Running"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := SandboxMode(tc.task, tc.now.Time); got != tc.want {
				t.Errorf("SandboxMode = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestNextLifecycleWake(t *testing.T) {
	ttl := func(n int32) func(*calibanv1alpha1.CalibanTask) {
		return func(t *calibanv1alpha1.CalibanTask) {
			if t.Spec.Lifecycle == nil {
				t.Spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{}
			}
			t.Spec.Lifecycle.TTLSecondsAfterFinished = seconds(n)
		}
	}
	tests := map[string]struct {
		task       *calibanv1alpha1.CalibanTask
		completion *metav1.Time
		now        metav1.Time
		wake       time.Duration
		expiry     *metav1.Time
	}{
		"no deadline and no TTL: nothing to wake for": {
			task: fxTask(pinned), now: tBefore,
		},
		"an unfinished task wakes at its deadline": {
			task: fxTask(pinned, deadline100), now: tBefore, wake: 60 * time.Second,
		},
		"a deadline that has come is acted on now, not waited for": {
			task: fxTask(pinned, deadline100), now: tAfter,
		},
		"a finished task wakes at its expiry, not its deadline": {
			task: fxTask(pinned, deadline100, ttl(30)), completion: &tBefore, now: tBefore,
			wake: 30 * time.Second, expiry: ptrTime(tBefore.Add(30 * time.Second)),
		},
		"a TTL of zero expires as the task finishes": {
			task: fxTask(pinned, ttl(0)), completion: &tBefore, now: tBefore,
			expiry: &tBefore,
		},
		"a finished task without a TTL never wakes": {
			task: fxTask(pinned, deadline100), completion: &tBefore, now: tBefore,
		},
		"an unfinished task with a TTL has no expiry": {
			task: fxTask(pinned, ttl(0)), now: tBefore,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := NextLifecycleWake(tc.task, tc.completion, tc.now.Time); got != tc.wake {
				t.Errorf("NextLifecycleWake = %s, want %s", got, tc.wake)
			}
			got := Expiry(tc.task, tc.completion)
			if (tc.expiry == nil) != got.IsZero() || (tc.expiry != nil && !got.Equal(tc.expiry.Time)) {
				t.Errorf("Expiry = %v, want %v", got, tc.expiry)
			}
			wantExpired := tc.expiry != nil && !tc.now.Before(tc.expiry)
			wantWake := tc.wake
			if wantExpired {
				wantWake = 0
			}
			if expired, wake := LifecycleDue(tc.task, tc.completion, tc.now.Time); expired != wantExpired || wake != wantWake {
				t.Errorf("LifecycleDue = %v, %s; want %v, %s", expired, wake, wantExpired, wantWake)
			}
		})
	}
}

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

func TestDrainVerdict(t *testing.T) {
	deleted := deletedAt(tStart)
	tests := map[string]struct {
		task    *calibanv1alpha1.CalibanTask
		now     metav1.Time
		outcome DrainOutcome
		note    string
		ref     string
	}{
		"no answer within the timeout: wait": {
			task: fxTask(pinned, deleted), now: tBefore, outcome: DrainWaiting,
		},
		"no answer past the timeout: go without a checkpoint": {
			task: fxTask(pinned, deleted), now: tAfter, outcome: DrainTimedOut,
			note: "prospero did not answer within 1m0s (CALIBAN_DRAIN_TIMEOUT_SECONDS); the task goes without a checkpoint",
		},
		"a checkpoint: drained, and its identifier is the task's checkpointRef": {
			task: fxTask(pinned, deleted, drained("True", "Checkpointed", "ckpt-42")), now: tBefore, outcome: DrainDone,
			note: "drained: checkpoint ckpt-42", ref: "ckpt-42",
		},
		"nothing to drain: drained": {
			task: fxTask(pinned, deleted, drained("True", "NothingToDrain", "")), now: tBefore, outcome: DrainDone,
			note: "drained: nothing to drain",
		},
		"a failed drain: go, saying why": {
			task: fxTask(pinned, deleted, drained("False", "DrainFailed", "caliband unreachable")), now: tBefore, outcome: DrainFailedOutcome,
			note: "drain failed: caliband unreachable",
		},
		"an answer that came after the timeout is still an answer": {
			task: fxTask(pinned, deleted, drained("True", "Checkpointed", "late")), now: tAfter, outcome: DrainDone,
			note: "drained: checkpoint late", ref: "late",
		},
		"prospero still at work (False, another reason): wait": {
			task: fxTask(pinned, deleted, drained("False", "Checkpointing", "")), now: tBefore, outcome: DrainWaiting,
		},
		"prospero still at work past the timeout: go": {
			task: fxTask(pinned, deleted, drained("Unknown", "Checkpointing", "")), now: tAfter, outcome: DrainTimedOut,
			note: "prospero did not answer within 1m0s (CALIBAN_DRAIN_TIMEOUT_SECONDS); the task goes without a checkpoint",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			outcome, note := DrainVerdict(tc.task, time.Minute, tc.now.Time)
			if outcome != tc.outcome || note != tc.note {
				t.Errorf("DrainVerdict = (%d, %q), want (%d, %q)", outcome, note, tc.outcome, tc.note)
			}
			if got := CheckpointRef(tc.task); got != tc.ref {
				t.Errorf("CheckpointRef = %q, want %q", got, tc.ref)
			}
		})
	}
}

// prospero's AgentsDrained condition may be written by anyone who may
// patch the status, at any time; status.checkpointRef only the operator
// writes, and only from the answer to a drain, once.
func TestCheckpointRefIsCopiedOnceAndOnlyWhileDraining(t *testing.T) {
	deleted := deletedAt(tStart)
	stored := func(ref string) func(*calibanv1alpha1.CalibanTask) {
		return func(t *calibanv1alpha1.CalibanTask) { t.Status.CheckpointRef = ref }
	}
	tests := map[string]struct {
		task *calibanv1alpha1.CalibanTask
		want string
	}{
		"a draining task takes the identifier prospero checkpointed": {
			task: fxTask(pinned, deleted, drained("True", DrainedCheckpointed, "ckpt-42")), want: "ckpt-42",
		},
		"a running task does not take an AgentsDrained message": {
			task: fxTask(pinned, drained("True", DrainedCheckpointed, "ckpt-forged")),
		},
		"a checkpointRef the task has is kept, not overwritten": {
			task: fxTask(pinned, stored("ckpt-1"), drained("True", DrainedCheckpointed, "ckpt-2")), want: "ckpt-1",
		},
		"a deleted task without the drain finalizer is not draining": {
			task: fxTask(pinned, drained("True", DrainedCheckpointed, "ckpt-42"), func(t *calibanv1alpha1.CalibanTask) { t.DeletionTimestamp = &tStart }),
		},
		"a task never pinned is not draining": {
			task: fxTask(deleted, drained("True", DrainedCheckpointed, "ckpt-42")),
		},
		"the first identifier of a drain is kept whatever prospero says next": {
			task: fxTask(pinned, deleted, stored("ckpt-1"), drained("True", DrainedCheckpointed, "ckpt-2")), want: "ckpt-1",
		},
		"an identifier stays when the condition goes": {
			task: fxTask(pinned, deleted, stored("ckpt-1")), want: "ckpt-1",
		},
		"a drain with nothing to drain has no checkpoint": {
			task: fxTask(pinned, deleted, drained("True", DrainedNothingToDrain, "nothing")),
		},
		"a failed drain has no checkpoint": {
			task: fxTask(pinned, deleted, drained("False", DrainFailed, "ckpt-42")),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, CheckpointRef(tc.task)); diff != "" {
				t.Errorf("CheckpointRef (-want +got):\n%s", diff)
			}
			st := TaskStatus(TaskStatusInput{Task: tc.task, Pin: tc.task.Status.ResolvedWorkspace, Now: tBefore, DrainTimeout: time.Minute}, config.DefaultAgentSettings())
			if diff := cmp.Diff(tc.want, st.CheckpointRef); diff != "" {
				t.Errorf("TaskStatus's checkpointRef (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLifecycleProblemAndDrainWish(t *testing.T) {
	tests := map[string]struct {
		onDelete string
		problem  *Failure
		drain    bool
	}{
		"unset deletes":     {onDelete: ""},
		"delete deletes":    {onDelete: "delete"},
		"checkpoint drains": {onDelete: "checkpoint", drain: true},
		"an unknown value fails the task naming the field": {onDelete: "Checkpoint",
			problem: &Failure{Reason: ReasonInvalidLifecycle, Message: "lifecycle.onDelete 'Checkpoint' is not one of: delete, checkpoint"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			task := fxTask(withLifecycle(calibanv1alpha1.LifecycleSpec{OnDelete: tc.onDelete}))
			if diff := cmp.Diff(tc.problem, LifecycleProblem(task)); diff != "" {
				t.Errorf("LifecycleProblem (-want +got):\n%s", diff)
			}
			if got := WantsDrain(task); got != tc.drain {
				t.Errorf("WantsDrain = %v, want %v", got, tc.drain)
			}
			for _, holding := range []bool{false, true} {
				if holding {
					task.Finalizers = []string{"other", calibanv1alpha1.FinalizerDrain}
				}
				if hold, change := DrainFinalizerChange(task); hold != tc.drain || change != (tc.drain != holding) {
					t.Errorf("holding the finalizer %v: DrainFinalizerChange = %v, %v; want %v, %v", holding, hold, change, tc.drain, tc.drain != holding)
				}
			}
		})
	}
	if LifecycleProblem(fxTask()) != nil || WantsDrain(fxTask()) {
		t.Error("a task without a lifecycle has a lifecycle problem or drains")
	}
}

func TestDrainingNeedsAPinAndTheFinalizer(t *testing.T) {
	tests := map[string]struct {
		task *calibanv1alpha1.CalibanTask
		want bool
	}{
		"pinned, deleted, finalizer": {fxTask(pinned, deletedAt(tBefore)), true},
		"never pinned":               {fxTask(deletedAt(tBefore)), false},
		"not deleted":                {fxTask(pinned, func(t *calibanv1alpha1.CalibanTask) { t.Finalizers = []string{calibanv1alpha1.FinalizerDrain} }), false},
		"deleted without it":         {fxTask(pinned, func(t *calibanv1alpha1.CalibanTask) { t.DeletionTimestamp = &tBefore }), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Draining(tc.task); got != tc.want {
				t.Errorf("Draining = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTaskStatusChangedSeesTheLifecycleFields(t *testing.T) {
	base := calibanv1alpha1.CalibanTaskStatus{Phase: "Running", StartTime: &tStart}
	for name, mutate := range map[string]func(*calibanv1alpha1.CalibanTaskStatus){
		"startTime":      func(s *calibanv1alpha1.CalibanTaskStatus) { s.StartTime = &tBefore },
		"completionTime": func(s *calibanv1alpha1.CalibanTaskStatus) { s.CompletionTime = &tAfter },
		"checkpointRef":  func(s *calibanv1alpha1.CalibanTaskStatus) { s.CheckpointRef = "ckpt" },
	} {
		t.Run(name, func(t *testing.T) {
			changed := *base.DeepCopy()
			mutate(&changed)
			if !TaskStatusChanged(base, changed) {
				t.Errorf("a changed %s is not a change", name)
			}
		})
	}
	if TaskStatusChanged(base, *base.DeepCopy()) {
		t.Error("an equal status is a change")
	}
}

// withMode sets the operatingMode agent-sandbox accepted for the Sandbox.
func withMode(sb *sandboxv1beta1.Sandbox, mode sandboxv1beta1.OperatingMode) *sandboxv1beta1.Sandbox {
	sb.Spec.OperatingMode = mode
	return sb
}

// suspendedSandbox is a Sandbox agent-sandbox v1.0 has suspended: the mode
// accepted, Ready False with its SandboxSuspended reason.
func suspendedSandbox() *sandboxv1beta1.Sandbox {
	return withMode(fxSandbox(lcFQDN, metav1.Condition{Type: "Ready", Status: "False", Reason: "SandboxSuspended", Message: "Sandbox is suspended"}),
		sandboxv1beta1.OperatingModeSuspended)
}
