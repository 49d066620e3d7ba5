// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// These tests cover the task lifecycle but for the drain (drain_test.go):
// spec.suspend, what a finish does to the Sandbox, the TTL after a finish,
// the active deadline, an unknown lifecycle.onDelete, the steady state of
// parked and finished tasks, and moments that pass while no operator runs.

func TestSuspendingARunningTaskParksItsSandboxAndResumingRunsItAgain(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "suspend", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	createTask(t, ns, "parked", "demo")
	running := waitForTask(t, ns, "parked", settleTimeout, isRunning)
	sbx := running.Status.SandboxRef.Name
	if running.Status.StartTime == nil {
		t.Fatalf("a running task has no startTime: %s", statusJSON(running.Status))
	}

	gen := framework.UpdateTask(t, cluster.Caliban, ns, "parked", suspend(true))
	suspended := waitForTask(t, ns, "parked", settleTimeout, allOf(atGeneration(gen), isSuspended))
	waitForSandbox(t, ns, sbx, settleTimeout, parked)
	// The Sandbox's readiness going away does not turn the suspended task
	// into a provisioning one, and nothing else goes.
	consistently(t, 2*time.Second, func() error {
		task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "parked", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := isSuspended(task); err != nil {
			return fmt.Errorf("once its Sandbox reported SandboxSuspended: %w (status %s)", err, statusJSON(task.Status))
		}
		return childrenExist(ns, "parked")()
	})
	if !suspended.Status.StartTime.Equal(running.Status.StartTime) {
		t.Errorf("startTime moved from %s to %s on suspend", running.Status.StartTime, suspended.Status.StartTime)
	}
	waitForEvent(t, ns, "parked", corev1.EventTypeNormal, eventPhaseChanged, noteContains("Running → Suspended"))

	gen = framework.UpdateTask(t, cluster.Caliban, ns, "parked", suspend(false))
	waitForSandbox(t, ns, sbx, settleTimeout, serving)
	resumed := waitForTask(t, ns, "parked", settleTimeout, allOf(atGeneration(gen), isRunning))
	if resumed.Status.CalibandEndpoint != running.Status.CalibandEndpoint {
		t.Errorf("calibandEndpoint %q after the resume, want %q as before", resumed.Status.CalibandEndpoint, running.Status.CalibandEndpoint)
	}
	if !resumed.Status.StartTime.Equal(running.Status.StartTime) {
		t.Errorf("startTime moved from %s to %s on resume", running.Status.StartTime, resumed.Status.StartTime)
	}
	if diff := cmp.Diff(running.Status.ResolvedWorkspace, resumed.Status.ResolvedWorkspace); diff != "" {
		t.Errorf("the pin changed over a suspend and resume (-before +after):\n%s", diff)
	}
	if resumed.Status.CompletionTime != nil {
		t.Errorf("a resumed task has completionTime %s", resumed.Status.CompletionTime)
	}
	// The Sandbox goes through Provisioning while its pod comes back,
	// unless it was quicker than the operator's write.
	waitForEvent(t, ns, "parked", corev1.EventTypeNormal, eventPhaseChanged, func(e eventsv1.Event) error {
		if !strings.HasPrefix(e.Note, "Suspended → Provisioning") && !strings.HasPrefix(e.Note, "Suspended → Running") {
			return fmt.Errorf("PhaseChanged note %q, want Suspended → Provisioning (or Running)", e.Note)
		}
		return nil
	})
}

func TestATaskCreatedSuspendedIsPinnedAndStartsOnResume(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "created-suspended", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	created := createTask(t, ns, "later", "demo", suspend(true))
	rec := recordTask(t, ns, "later", created.ResourceVersion)
	suspended := waitForTask(t, ns, "later", settleTimeout, isSuspended)
	sbx := suspended.Status.SandboxRef.Name
	sb := waitForSandbox(t, ns, sbx, settleTimeout, parked)
	// Created Suspended, not created Running and then suspended: a spec
	// change would have raised the generation.
	if sb.GetGeneration() != 1 {
		t.Errorf("the Sandbox of a task created suspended has generation %d, want 1 (created Suspended)", sb.GetGeneration())
	}
	consistently(t, 2*time.Second, func() error {
		if err := sandboxNow(ns, sbx, parked)(); err != nil {
			return err
		}
		task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "later", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return isSuspended(task)
	})

	// Until the resume the task was never on its way to run.
	for _, p := range rec.phases() {
		if p != calibanv1alpha1.TaskPending && p != calibanv1alpha1.TaskSuspended {
			t.Errorf("a task created suspended went through phases %v before its resume, want only Pending and Suspended", rec.phases())
			break
		}
	}

	gen := framework.UpdateTask(t, cluster.Caliban, ns, "later", suspend(false))
	waitForSandbox(t, ns, sbx, settleTimeout, serving)
	running := waitForTask(t, ns, "later", settleTimeout, allOf(atGeneration(gen), isRunning))
	if !running.Status.StartTime.Equal(suspended.Status.StartTime) {
		t.Errorf("startTime moved from %s to %s on resume: it is the admission's", suspended.Status.StartTime, running.Status.StartTime)
	}
	if diff := cmp.Diff(suspended.Status.ResolvedWorkspace, running.Status.ResolvedWorkspace); diff != "" {
		t.Errorf("the pin changed on resume (-suspended +running):\n%s", diff)
	}
}

func TestAFinishedTaskReleasesItsComputeUnlessToldToKeepIt(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "finish", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	tests := map[string]struct {
		spec            []func(*calibanv1alpha1.CalibanTaskSpec)
		reason, message string
		want            taskCheck
		sandbox         sandboxCheck
	}{
		"a task prospero settles Succeeded suspends its Sandbox": {
			reason:  builders.SettledSucceeded,
			want:    settledAs(calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, ""),
			sandbox: parked,
		},
		"a task with onFinish keep leaves its Sandbox running": {
			spec:    []func(*calibanv1alpha1.CalibanTaskSpec){onFinish(calibanv1alpha1.OnFinishKeep)},
			reason:  builders.SettledSucceeded,
			want:    settledAs(calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, ""),
			sandbox: serving,
		},
		"a task with onFinish suspend suspends its Sandbox": {
			spec:    []func(*calibanv1alpha1.CalibanTaskSpec){onFinish(calibanv1alpha1.OnFinishSuspend)},
			reason:  builders.SettledSucceeded,
			want:    settledAs(calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, ""),
			sandbox: parked,
		},
		"a task prospero settles Failed suspends its Sandbox": {
			reason:  builders.SettledFailed,
			message: "agent 'coder' exited with status 3",
			want:    settledAs(calibanv1alpha1.TaskFailed, builders.ReasonAgentsFailed, "agent 'coder' exited with status 3"),
			sandbox: parked,
		},
	}
	i := 0
	for name, test := range tests {
		task := fmt.Sprintf("finish-%d", i)
		i++
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			createTask(t, ns, task, "demo", test.spec...)
			running := waitForTask(t, ns, task, settleTimeout, isRunning)
			sbx := running.Status.SandboxRef.Name

			prosperoSettles(t, ns, task, test.reason, test.message)
			finished := waitForTask(t, ns, task, settleTimeout, allOf(test.want, hasCompletion))
			settled := settledCondition(t, finished)
			if err := completedAt(settled.LastTransitionTime.Time)(finished); err != nil {
				t.Errorf("%v: the completionTime is AgentsSettled's lastTransitionTime", err)
			}
			if !finished.Status.StartTime.Equal(running.Status.StartTime) {
				t.Errorf("startTime moved from %s to %s on the finish", running.Status.StartTime, finished.Status.StartTime)
			}
			waitForSandbox(t, ns, sbx, settleTimeout, test.sandbox)
			// The finished task keeps its phase, whatever its Sandbox
			// does, and the Sandbox stays as the finish left it.
			consistently(t, 3*time.Second, func() error {
				got, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, task, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if err := allOf(test.want, completedAt(finished.Status.CompletionTime.Time))(got); err != nil {
					return fmt.Errorf("after its Sandbox followed the finish: %w (status %s)", err, statusJSON(got.Status))
				}
				return sandboxNow(ns, sbx, test.sandbox)()
			})
		})
	}
}

func TestTTLAfterFinishedDeletesAFinishedTaskOnly(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "ttl", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	settles := func(reason string) func(t *testing.T, task string) {
		return func(t *testing.T, task string) {
			waitForTask(t, ns, task, settleTimeout, isRunning)
			prosperoSettles(t, ns, task, reason, "")
		}
	}
	tests := map[string]struct {
		spec []func(*calibanv1alpha1.CalibanTaskSpec)
		ttl  int32
		// finish makes the task finish.
		finish func(t *testing.T, task string)
	}{
		"a task prospero settles is deleted ttlSecondsAfterFinished after it finished": {
			ttl: 2, finish: settles(builders.SettledSucceeded),
		},
		"a task prospero settles with ttl 0 is deleted as soon as it finished": {
			ttl: 0, finish: settles(builders.SettledFailed),
		},
		"a task its deadline fails is deleted ttlSecondsAfterFinished after the deadline": {
			spec: []func(*calibanv1alpha1.CalibanTaskSpec){activeDeadline(2)},
			ttl:  2, finish: func(*testing.T, string) {},
		},
	}
	i := 0
	for name, test := range tests {
		task := fmt.Sprintf("ttl-%d", i)
		i++
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			created := createTask(t, ns, task, "demo", append(test.spec, ttlAfterFinished(test.ttl))...)
			w := recordTask(t, ns, task, created.ResourceVersion)
			test.finish(t, task)
			ttl := time.Duration(test.ttl) * time.Second
			if test.ttl > 0 {
				finished := waitForTask(t, ns, task, settleTimeout, hasCompletion)
				expiry := finished.Status.CompletionTime.Add(ttl)
				mustExistUntil(t, ns, task, expiry, fmt.Sprintf("completionTime %s + ttlSecondsAfterFinished %d",
					finished.Status.CompletionTime.UTC().Format(time.RFC3339), test.ttl))
			}
			last := w.waitDeleted(t, settleTimeout+ttl)
			if last.UID != created.UID {
				t.Fatalf("the deleted task has UID %s, want %s", last.UID, created.UID)
			}
			waitForChildrenGone(t, ns, task)
		})
	}

	t.Run("a task failed by its admission is not finished, and its ttl 0 never deletes it", func(t *testing.T) {
		t.Parallel()
		createTask(t, ns, "unadmitted", "nowhere", ttlAfterFinished(0))
		waitForTask(t, ns, "unadmitted", settleTimeout,
			failedWith(builders.ReasonWorkspaceUnresolved, "Workspace not found: 'nowhere'"))
		consistently(t, 5*time.Second, func() error {
			task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "unadmitted", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("a task Failed by its admission, with ttlSecondsAfterFinished 0: %w", err)
			}
			if task.DeletionTimestamp != nil {
				return fmt.Errorf("a task Failed by its admission is being deleted (deletionTimestamp %s)", task.DeletionTimestamp)
			}
			if task.Status.CompletionTime != nil {
				return fmt.Errorf("a task Failed by its admission has completionTime %s; it is not finished", task.Status.CompletionTime)
			}
			return nil
		})
	})
}

func TestAnActiveDeadlineFailsATaskThatRunsTooLong(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "deadline", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	const deadline = 3
	tests := map[string][]func(*calibanv1alpha1.CalibanTaskSpec){
		"a running task prospero never settles":      nil,
		"a suspended task, whose deadline counts on": {suspend(true)},
	}
	i := 0
	for name, spec := range tests {
		task := fmt.Sprintf("overdue-%d", i)
		i++
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			createTask(t, ns, task, "demo", append(spec, activeDeadline(deadline))...)
			failed := waitForTask(t, ns, task, settleTimeout, deadlineExceeded(deadline))
			message := readyCondition(failed).Message
			waitForEvent(t, ns, task, corev1.EventTypeWarning, eventDeadlineExceeded, func(e eventsv1.Event) error {
				if e.Note != message {
					return fmt.Errorf("DeadlineExceeded note %q, want the Ready message %q", e.Note, message)
				}
				return nil
			})
			waitForSandbox(t, ns, builders.SandboxName(task), settleTimeout, parked)

			// prospero settles once the deadline has passed (a second
			// later than it, as conditions have second precision): the
			// task stays Failed from its deadline.
			sleepUntil(failed.Status.CompletionTime.Add(time.Second + 100*time.Millisecond))
			prosperoSettles(t, ns, task, builders.SettledSucceeded, "")
			gen := touchTask(t, ns, task)
			waitForTask(t, ns, task, settleTimeout, allOf(atGeneration(gen), deadlineExceeded(deadline)))
			consistently(t, 2*time.Second, func() error {
				got, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, task, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if err := deadlineExceeded(deadline)(got); err != nil {
					return fmt.Errorf("after a late settle: %w (status %s)", err, statusJSON(got.Status))
				}
				return sandboxNow(ns, builders.SandboxName(task), parked)()
			})
		})
	}
}

func TestATaskSettledBeforeItsDeadlineStaysCompleted(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "in-time", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	// Long enough for the task to run and settle on a busy machine.
	const deadline = 15
	createTask(t, ns, "punctual", "demo", activeDeadline(deadline))
	running := waitForTask(t, ns, "punctual", settleTimeout, isRunning)
	prosperoSettles(t, ns, "punctual", builders.SettledSucceeded, "")
	completed := waitForTask(t, ns, "punctual", settleTimeout,
		allOf(settledAs(calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, ""), hasCompletion))
	due := running.Status.StartTime.Add(deadline * time.Second)
	if completed.Status.CompletionTime.After(due) {
		t.Fatalf("the test was too slow: prospero settled at %s, after the deadline %s, so it proves nothing",
			completed.Status.CompletionTime.UTC().Format(time.RFC3339), due.UTC().Format(time.RFC3339))
	}
	waitForSandbox(t, ns, running.Status.SandboxRef.Name, settleTimeout, parked)

	sleepUntil(due.Add(time.Second))
	gen := touchTask(t, ns, "punctual")
	after := waitForTask(t, ns, "punctual", settleTimeout,
		allOf(atGeneration(gen), settledAs(calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, ""),
			completedAt(completed.Status.CompletionTime.Time)))
	if !after.Status.StartTime.Equal(running.Status.StartTime) {
		t.Errorf("startTime moved from %s to %s", running.Status.StartTime, after.Status.StartTime)
	}
	noEvent(t, ns, "punctual", eventDeadlineExceeded)
}

func TestAnUnknownOnDeleteFailsTheTaskUntilItIsFixed(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "invalid-lifecycle", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	const message = "lifecycle.onDelete 'sometimes' is not one of: delete, checkpoint"

	t.Run("a new task is neither pinned nor given a Sandbox", func(t *testing.T) {
		t.Parallel()
		createTask(t, ns, "sometimes", "demo", onDelete("sometimes"))
		failed := waitForTask(t, ns, "sometimes", settleTimeout, failedWith(reasonInvalidLifecycle, message))
		waitForEvent(t, ns, "sometimes", corev1.EventTypeWarning, reasonInvalidLifecycle, noteContains(message))
		if failed.Status.ResolvedWorkspace != nil || failed.Status.StartTime != nil {
			t.Errorf("a task with an unknown onDelete was pinned: %s", statusJSON(failed.Status))
		}
		consistently(t, 2*time.Second, func() error {
			if sb := getSandbox(t, ns, builders.SandboxName("sometimes")); sb != nil {
				return fmt.Errorf("a task with an unknown onDelete got Sandbox %s", sb.GetName())
			}
			return nil
		})

		gen := framework.UpdateTask(t, cluster.Caliban, ns, "sometimes", func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.Lifecycle.OnDelete = calibanv1alpha1.OnDeleteDelete })
		waitForTask(t, ns, "sometimes", settleTimeout, allOf(atGeneration(gen), isRunning, isPinned))
	})

	t.Run("a running task leaves its children alone until it is fixed", func(t *testing.T) {
		t.Parallel()
		createTask(t, ns, "changes-its-mind", "demo")
		running := waitForTask(t, ns, "changes-its-mind", settleTimeout, isRunning)
		kids := children(ns, "changes-its-mind")
		before := settledVersions(t, kids)

		gen := framework.UpdateTask(t, cluster.Caliban, ns, "changes-its-mind", onDelete("sometimes"))
		waitForTask(t, ns, "changes-its-mind", settleTimeout, allOf(atGeneration(gen), failedWith(reasonInvalidLifecycle, message)))
		waitForEvent(t, ns, "changes-its-mind", corev1.EventTypeWarning, reasonInvalidLifecycle, noteContains(message))
		consistently(t, 2*time.Second, unchangedVersions(kids, before))

		gen = framework.UpdateTask(t, cluster.Caliban, ns, "changes-its-mind", func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.Lifecycle.OnDelete = calibanv1alpha1.OnDeleteDelete })
		fixed := waitForTask(t, ns, "changes-its-mind", settleTimeout, allOf(atGeneration(gen), isRunning))
		if diff := cmp.Diff(running.Status.ResolvedWorkspace, fixed.Status.ResolvedWorkspace); diff != "" {
			t.Errorf("the pin changed (-before +after):\n%s", diff)
		}
		if !fixed.Status.StartTime.Equal(running.Status.StartTime) {
			t.Errorf("startTime moved from %s to %s", running.Status.StartTime, fixed.Status.StartTime)
		}
	})
}

func TestParkedAndFinishedTasksWriteNothingInTheSteadyState(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	op := startOperator(t, "lifecycle-steady", ns, resyncEnv)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	createTask(t, ns, "parked", "demo", suspend(true))
	for _, name := range []string{"completed", "kept"} {
		spec := []func(*calibanv1alpha1.CalibanTaskSpec){}
		if name == "kept" {
			spec = append(spec, onFinish(calibanv1alpha1.OnFinishKeep))
		}
		createTask(t, ns, name, "demo", spec...)
	}
	createTask(t, ns, "overdue", "demo", activeDeadline(2))
	for _, name := range []string{"completed", "kept"} {
		waitForTask(t, ns, name, settleTimeout, isRunning)
		prosperoSettles(t, ns, name, builders.SettledSucceeded, "")
	}

	waitForTask(t, ns, "parked", settleTimeout, isSuspended)
	waitForSandbox(t, ns, builders.SandboxName("parked"), settleTimeout, parked)
	for _, name := range []string{"completed", "kept"} {
		waitForTask(t, ns, name, settleTimeout, allOf(settledAs(calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, ""), hasCompletion))
	}
	waitForSandbox(t, ns, builders.SandboxName("completed"), settleTimeout, parked)
	waitForSandbox(t, ns, builders.SandboxName("kept"), settleTimeout, serving)
	waitForTask(t, ns, "overdue", settleTimeout, deadlineExceeded(2))
	waitForSandbox(t, ns, builders.SandboxName("overdue"), settleTimeout, parked)

	objects := map[string]func() (metav1.Object, error){}
	for _, name := range []string{"parked", "completed", "kept", "overdue"} {
		for k, get := range taskAndChildren(ns, name) {
			objects[k] = get
		}
	}
	before := settledClusterState(t, ns, objects, resyncPeriod+time.Second)
	syncsBefore, writesBefore := taskSyncsAndWrites(t, op)

	const periods = 3
	time.Sleep(periods*resyncPeriod + time.Second)

	after, err := clusterState(ns, objects)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("over %d resync periods objects or Events changed (-before +after):\n%s", periods, diff)
	}
	syncsAfter, writesAfter := taskSyncsAndWrites(t, op)
	if writesAfter != writesBefore {
		t.Errorf("over %d resync periods the operator made %v write requests, want none", periods, writesAfter-writesBefore)
	}
	// The resyncs did happen: each task synced again (at least twice, to
	// leave room for a slow machine).
	if got := syncsAfter - syncsBefore; got < 2*4 {
		t.Errorf("over %d resync periods of %s the 4 tasks were synced %v times, want at least 8", periods, resyncPeriod, got)
	}
}

// taskSyncsAndWrites are the operator's task syncs and write requests so
// far.
func taskSyncsAndWrites(t testing.TB, op *framework.Operator) (syncs, writes float64) {
	t.Helper()
	m, err := op.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	syncs, _ = m.Sum("caliban_controller_syncs_total", map[string]string{"controller": "calibantask"})
	return syncs, writeRequests(m)
}

func TestALifecycleMomentThatPassesWhileNoOperatorRunsIsHonouredAfterTheRestart(t *testing.T) {
	t.Parallel()

	const (
		deadline = 10
		ttl      = 6
	)
	tests := map[string]struct {
		spec []func(*calibanv1alpha1.CalibanTaskSpec)
		// before runs while the first operator runs, once the task is
		// pinned.
		before func(t *testing.T, ns, task string)
		// meanwhile runs while no operator runs.
		meanwhile func(t *testing.T, ns, task string)
		// after checks what the second operator makes of the task.
		after func(t *testing.T, ns, task string)
	}{
		"a task suspended meanwhile is suspended": {
			before:    func(t *testing.T, ns, task string) { waitForTask(t, ns, task, settleTimeout, isRunning) },
			meanwhile: func(t *testing.T, ns, task string) { framework.UpdateTask(t, cluster.Caliban, ns, task, suspend(true)) },
			after: func(t *testing.T, ns, task string) {
				waitForTask(t, ns, task, settleTimeout, isSuspended)
				waitForSandbox(t, ns, builders.SandboxName(task), settleTimeout, parked)
			},
		},
		"a deadline that passed meanwhile fails the task from its deadline, not from the restart": {
			spec: []func(*calibanv1alpha1.CalibanTaskSpec){activeDeadline(deadline)},
			meanwhile: func(t *testing.T, ns, task string) {
				pinned := getTask(t, ns, task)
				due := pinned.Status.StartTime.Add(deadline * time.Second)
				if !time.Now().Before(due) {
					t.Fatalf("the test was too slow: the deadline %s passed before the operator stopped", due.UTC().Format(time.RFC3339))
				}
				sleepUntil(due.Add(time.Second))
				if got := getTask(t, ns, task); got.Status.Phase == calibanv1alpha1.TaskFailed {
					t.Fatalf("the task failed with no operator running: %s", statusJSON(got.Status))
				}
			},
			after: func(t *testing.T, ns, task string) {
				waitForTask(t, ns, task, settleTimeout, deadlineExceeded(deadline))
				waitForEvent(t, ns, task, corev1.EventTypeWarning, eventDeadlineExceeded, nil)
				waitForSandbox(t, ns, builders.SandboxName(task), settleTimeout, parked)
			},
		},
		"a TTL that expired meanwhile deletes the task": {
			spec: []func(*calibanv1alpha1.CalibanTaskSpec){ttlAfterFinished(ttl)},
			before: func(t *testing.T, ns, task string) {
				waitForTask(t, ns, task, settleTimeout, isRunning)
				prosperoSettles(t, ns, task, builders.SettledSucceeded, "")
				waitForTask(t, ns, task, settleTimeout, allOf(settledAs(calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, ""), hasCompletion))
			},
			meanwhile: func(t *testing.T, ns, task string) {
				finished := getTask(t, ns, task)
				expiry := finished.Status.CompletionTime.Add(ttl * time.Second)
				if !time.Now().Before(expiry) {
					t.Fatalf("the test was too slow: the TTL expired at %s, before the operator stopped", expiry.UTC().Format(time.RFC3339))
				}
				sleepUntil(expiry.Add(time.Second))
				if !taskExists(t, ns, task) {
					t.Fatal("the task was deleted with no operator running")
				}
			},
			after: func(t *testing.T, ns, task string) {
				waitForTaskGone(t, ns, task, settleTimeout)
				waitForChildrenGone(t, ns, task)
			},
		},
		"a settle meanwhile completes the task and suspends its Sandbox": {
			before:    func(t *testing.T, ns, task string) { waitForTask(t, ns, task, settleTimeout, isRunning) },
			meanwhile: func(t *testing.T, ns, task string) { prosperoSettles(t, ns, task, builders.SettledSucceeded, "") },
			after: func(t *testing.T, ns, task string) {
				completed := waitForTask(t, ns, task, settleTimeout,
					allOf(settledAs(calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, ""), hasCompletion))
				if err := completedAt(settledCondition(t, completed).LastTransitionTime.Time)(completed); err != nil {
					t.Errorf("%v: the completionTime is AgentsSettled's lastTransitionTime", err)
				}
				waitForSandbox(t, ns, builders.SandboxName(task), settleTimeout, parked)
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := cluster.Namespace(t, nil)
			first := startOperator(t, "restart-0", ns)
			createProviderSecret(t, ns)
			createReadyWorkspace(t, ns, "demo")
			createTask(t, ns, "interrupted", "demo", test.spec...)
			waitForTask(t, ns, "interrupted", settleTimeout, isPinned)
			if test.before != nil {
				test.before(t, ns, "interrupted")
			}

			stopOperator(t, first)
			test.meanwhile(t, ns, "interrupted")

			startOperator(t, "restart-1", ns)
			test.after(t, ns, "interrupted")
		})
	}
}
