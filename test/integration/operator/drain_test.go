// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// These tests cover lifecycle.onDelete checkpoint: the drain finalizer,
// the Draining phase, prospero's AgentsDrained answers, the drain timeout,
// and a drain across an operator restart.

func checkpoint(spec *calibanv1alpha1.CalibanTaskSpec) {
	onDelete(calibanv1alpha1.OnDeleteCheckpoint)(spec)
}

func TestTheDrainFinalizerFollowsOnDelete(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	releaseTasksAtEnd(t, ns)
	startOperator(t, "finalizer", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	tests := map[string]struct {
		spec []func(*calibanv1alpha1.CalibanTaskSpec)
		want bool
	}{
		"a pinned task with onDelete checkpoint carries it": {spec: []func(*calibanv1alpha1.CalibanTaskSpec){checkpoint}, want: true},
		"a task with onDelete delete does not":              {spec: []func(*calibanv1alpha1.CalibanTaskSpec){onDelete(calibanv1alpha1.OnDeleteDelete)}},
		"a task without a lifecycle does not":               {},
	}
	i := 0
	for name, test := range tests {
		task := fmt.Sprintf("finalizer-%d", i)
		i++
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			createTask(t, ns, task, "demo", test.spec...)
			if test.want {
				// The finalizer comes before any child: once the Sandbox
				// exists, the task has it.
				sbx := waitForSandbox(t, ns, builders.SandboxName(task), settleTimeout, func(*unstructured.Unstructured) error { return nil })
				if got := getTask(t, ns, task); !hasFinalizer(got, drainFinalizer) {
					t.Errorf("Sandbox %s exists (created %s) but the task's finalizers are %v, want %s added before any child",
						sbx.GetName(), sbx.GetCreationTimestamp().UTC().Format(time.RFC3339), got.Finalizers, drainFinalizer)
				}
				running := waitForTask(t, ns, task, settleTimeout, allOf(isRunning, withDrainFinalizer))
				if !ownsFinalizer(running, builders.FieldManager, drainFinalizer) {
					t.Errorf("the operator does not hold %s through a server-side apply; managed fields: %+v", drainFinalizer, running.ManagedFields)
				}
				return
			}
			waitForTask(t, ns, task, settleTimeout, isRunning)
			consistently(t, 2*time.Second, func() error {
				return withoutDrainFinalizer(getTask(t, ns, task))
			})
		})
	}

	t.Run("changing onDelete takes the finalizer away and back, and leaves other finalizers alone", func(t *testing.T) {
		t.Parallel()
		createTask(t, ns, "undecided", "demo", checkpoint)
		waitForTask(t, ns, "undecided", settleTimeout, allOf(isRunning, withDrainFinalizer))
		applyTestFinalizers(t, ns, "undecided", holdFinalizer)
		keepsHold := func(task *calibanv1alpha1.CalibanTask) error {
			if !hasFinalizer(task, holdFinalizer) {
				return fmt.Errorf("finalizers %v lost the test's %s", task.Finalizers, holdFinalizer)
			}
			return nil
		}

		gen := framework.UpdateTask(t, cluster.Caliban, ns, "undecided", func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.Lifecycle.OnDelete = calibanv1alpha1.OnDeleteDelete })
		waitForTask(t, ns, "undecided", settleTimeout, allOf(atGeneration(gen), isRunning, withoutDrainFinalizer, keepsHold))
		consistently(t, 2*time.Second, func() error {
			return allOf(withoutDrainFinalizer, keepsHold)(getTask(t, ns, "undecided"))
		})

		gen = framework.UpdateTask(t, cluster.Caliban, ns, "undecided", func(spec *calibanv1alpha1.CalibanTaskSpec) {
			spec.Lifecycle.OnDelete = calibanv1alpha1.OnDeleteCheckpoint
		})
		waitForTask(t, ns, "undecided", settleTimeout, allOf(atGeneration(gen), isRunning, withDrainFinalizer, keepsHold))

		// Without its lifecycle the finalizer goes again.
		gen = framework.UpdateTask(t, cluster.Caliban, ns, "undecided", func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.Lifecycle = nil })
		waitForTask(t, ns, "undecided", settleTimeout, allOf(atGeneration(gen), isRunning, withoutDrainFinalizer, keepsHold))
		applyTestFinalizers(t, ns, "undecided")
	})
}

func TestADeletedCheckpointTaskDrainsUntilProsperoAnswers(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	releaseTasksAtEnd(t, ns)
	startOperator(t, "drain", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	tests := map[string]struct {
		status          metav1.ConditionStatus
		reason, message string
		// The Event the answer calls for.
		eventType, event, note string
		// checkpointRef is what the operator records ("" for none).
		checkpointRef string
	}{
		"prospero checkpointed the agents": {
			status: metav1.ConditionTrue, reason: drainedCheckpointed, message: "ckpt-123",
			eventType: corev1.EventTypeNormal, event: eventDrained, note: "drained: checkpoint ckpt-123",
			checkpointRef: "ckpt-123",
		},
		"prospero had nothing to drain": {
			status: metav1.ConditionTrue, reason: drainedNothingToDrain,
			eventType: corev1.EventTypeNormal, event: eventDrained, note: "drained: nothing to drain",
		},
		"prospero could not drain": {
			status: metav1.ConditionFalse, reason: drainFailedReason, message: "caliband did not answer the checkpoint request",
			eventType: corev1.EventTypeWarning, event: eventDrainFailed, note: "drain failed: caliband did not answer the checkpoint request",
		},
	}
	i := 0
	for name, test := range tests {
		task := fmt.Sprintf("drain-%d", i)
		i++
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			createTask(t, ns, task, "demo", checkpoint)
			running := waitForTask(t, ns, task, settleTimeout, allOf(isRunning, withDrainFinalizer))
			kids := children(ns, task)
			before := settledVersions(t, kids)
			rec := recordTask(t, ns, task, getTask(t, ns, task).ResourceVersion)

			deleteTask(t, ns, task)
			draining := waitForTask(t, ns, task, settleTimeout, isDraining(defaultDrainTimeout))
			// prospero needs caliband to checkpoint: the endpoint stays
			// while the Sandbox serves, and so does the rest.
			if draining.Status.CalibandEndpoint != running.Status.CalibandEndpoint {
				t.Errorf("calibandEndpoint %q while Draining, want %q", draining.Status.CalibandEndpoint, running.Status.CalibandEndpoint)
			}
			if !draining.Status.StartTime.Equal(running.Status.StartTime) || draining.Status.ResolvedWorkspace == nil {
				t.Errorf("a Draining task lost its start time or pin: %s", statusJSON(draining.Status))
			}
			waitForEvent(t, ns, task, corev1.EventTypeNormal, eventPhaseChanged, noteContains("Running → Draining"))
			// While prospero has not answered, nothing goes and the
			// children are not touched.
			consistently(t, 3*time.Second, func() error {
				got, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, task, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("a Draining task prospero has not answered: %w", err)
				}
				if err := allOf(isDraining(defaultDrainTimeout), withDrainFinalizer)(got); err != nil {
					return err
				}
				if err := unchangedVersions(kids, before)(); err != nil {
					return fmt.Errorf("children of a Draining task: %w", err)
				}
				return sandboxNow(ns, builders.SandboxName(task), inMode(sandboxv1beta1.OperatingModeRunning))()
			})

			prosperoDrains(t, ns, task, test.status, test.reason, test.message)
			waitForEvent(t, ns, task, test.eventType, test.event, func(e eventsv1.Event) error {
				if e.Note != test.note {
					return fmt.Errorf("%s note %q, want %q", e.Reason, e.Note, test.note)
				}
				return nil
			})
			last := rec.waitDeleted(t, settleTimeout)
			if err := drainedAsProsperoSaid(test.status, test.reason, test.message)(last); err != nil {
				t.Errorf("the task's last version: %v", err)
			}
			if test.checkpointRef != "" {
				// Written while the task still Drains, before the
				// finalizer goes.
				seen, err := rec.find(func(v *calibanv1alpha1.CalibanTask) error {
					if v.Status.CheckpointRef != test.checkpointRef {
						return fmt.Errorf("checkpointRef %q, want %q", v.Status.CheckpointRef, test.checkpointRef)
					}
					if !hasFinalizer(v, drainFinalizer) {
						return fmt.Errorf("finalizers %v: the finalizer went in the same write", v.Finalizers)
					}
					return nil
				})
				if err != nil {
					t.Errorf("the checkpointRef was not recorded on the Draining task: %v", err)
				} else {
					if seen.Status.Phase != calibanv1alpha1.TaskDraining {
						t.Errorf("phase %q with checkpointRef set, want Draining", seen.Status.Phase)
					}
					if err := drainedAsProsperoSaid(test.status, test.reason, test.message)(seen); err != nil {
						t.Errorf("when the operator recorded the checkpointRef: %v", err)
					}
				}
				if last.Status.CheckpointRef != test.checkpointRef {
					t.Errorf("the task's last version has checkpointRef %q, want %q", last.Status.CheckpointRef, test.checkpointRef)
				}
			} else if last.Status.CheckpointRef != "" {
				t.Errorf("checkpointRef %q after a %s answer, want none", last.Status.CheckpointRef, test.reason)
			}
			noEvent(t, ns, task, eventDrainTimedOut)
			waitForChildrenGone(t, ns, task)
		})
	}
}

func TestADrainProsperoNeverAnswersTimesOut(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	releaseTasksAtEnd(t, ns)
	const timeout = 3 * time.Second
	startOperator(t, "drain-timeout", ns, drainTimeoutEnv(timeout))
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	createTask(t, ns, "unanswered", "demo", checkpoint)
	waitForTask(t, ns, "unanswered", settleTimeout, allOf(isRunning, withDrainFinalizer))
	deleteTask(t, ns, "unanswered")
	draining := waitForTask(t, ns, "unanswered", settleTimeout, isDraining(timeout))

	due := draining.DeletionTimestamp.Add(timeout)
	mustExistUntil(t, ns, "unanswered", due, fmt.Sprintf("deletionTimestamp %s + CALIBAN_DRAIN_TIMEOUT_SECONDS 3",
		draining.DeletionTimestamp.UTC().Format(time.RFC3339)))
	waitForEvent(t, ns, "unanswered", corev1.EventTypeWarning, eventDrainTimedOut, func(e eventsv1.Event) error {
		const want = "prospero did not answer within 3s (CALIBAN_DRAIN_TIMEOUT_SECONDS); the task goes without a checkpoint"
		if e.Note != want {
			return fmt.Errorf("DrainTimedOut note %q, want %q", e.Note, want)
		}
		return nil
	})
	waitForTaskGone(t, ns, "unanswered", settleTimeout)
	noEvent(t, ns, "unanswered", eventDrained)
	waitForChildrenGone(t, ns, "unanswered")
}

func TestTheOperatorLeavesProsperosAgentsDrainedAlone(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	releaseTasksAtEnd(t, ns)
	startOperator(t, "drained-alive", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	// prospero answers a drain nobody asked for: the task is not being
	// deleted, so it runs on, and the answer stays prospero's.
	createTask(t, ns, "alive", "demo", checkpoint)
	waitForTask(t, ns, "alive", settleTimeout, allOf(isRunning, withDrainFinalizer))
	prosperoDrains(t, ns, "alive", metav1.ConditionTrue, drainedNothingToDrain, "")
	gen := touchTask(t, ns, "alive")
	unbothered := allOf(isRunning, withDrainFinalizer, drainedAsProsperoSaid(metav1.ConditionTrue, drainedNothingToDrain, ""),
		func(task *calibanv1alpha1.CalibanTask) error {
			if task.DeletionTimestamp != nil {
				return fmt.Errorf("the task is being deleted (deletionTimestamp %s)", task.DeletionTimestamp)
			}
			if task.Status.CheckpointRef != "" {
				return fmt.Errorf("checkpointRef %q on a task that never drained", task.Status.CheckpointRef)
			}
			return nil
		})
	waitForTask(t, ns, "alive", settleTimeout, allOf(atGeneration(gen), unbothered))
	consistently(t, 3*time.Second, func() error { return unbothered(getTask(t, ns, "alive")) })
	noEvent(t, ns, "alive", eventDrained)
}

func TestADrainSurvivesAnOperatorRestart(t *testing.T) {
	t.Parallel()

	// Long enough to stop the first operator before the drain times out
	// on a busy machine.
	const shortTimeout = 8 * time.Second
	tests := map[string]struct {
		timeout time.Duration
		// meanwhile runs while no operator runs.
		meanwhile func(t *testing.T, ns, task string, draining *calibanv1alpha1.CalibanTask)
		// The Event the next operator emits, and the checkpointRef it
		// records ("" for none).
		eventType, event, note, checkpointRef string
	}{
		"prospero answers while no operator runs": {
			timeout: defaultDrainTimeout,
			meanwhile: func(t *testing.T, ns, task string, _ *calibanv1alpha1.CalibanTask) {
				prosperoDrains(t, ns, task, metav1.ConditionTrue, drainedCheckpointed, "ckpt-restart")
			},
			eventType: corev1.EventTypeNormal, event: eventDrained, note: "drained: checkpoint ckpt-restart",
			checkpointRef: "ckpt-restart",
		},
		"the drain timeout passes while no operator runs": {
			timeout: shortTimeout,
			meanwhile: func(t *testing.T, ns, task string, draining *calibanv1alpha1.CalibanTask) {
				sleepUntil(draining.DeletionTimestamp.Add(shortTimeout + time.Second))
			},
			eventType: corev1.EventTypeWarning, event: eventDrainTimedOut,
			note: "prospero did not answer within 8s (CALIBAN_DRAIN_TIMEOUT_SECONDS); the task goes without a checkpoint",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := cluster.Namespace(t, nil)
			releaseTasksAtEnd(t, ns)
			env := drainTimeoutEnv(test.timeout)
			first := startOperator(t, "drain-restart-0", ns, env)
			createProviderSecret(t, ns)
			createReadyWorkspace(t, ns, "demo")
			createTask(t, ns, "interrupted", "demo", checkpoint)
			waitForTask(t, ns, "interrupted", settleTimeout, allOf(isRunning, withDrainFinalizer))
			rec := recordTask(t, ns, "interrupted", getTask(t, ns, "interrupted").ResourceVersion)
			deleteTask(t, ns, "interrupted")
			draining := waitForTask(t, ns, "interrupted", settleTimeout, isDraining(test.timeout))

			stopOperator(t, first)
			if due := draining.DeletionTimestamp.Add(test.timeout); !time.Now().Before(due) {
				t.Fatalf("the test was too slow: the drain timed out at %s, before the operator stopped", due.UTC().Format(time.RFC3339))
			}
			test.meanwhile(t, ns, "interrupted", draining)
			// Nobody but an operator lets the task go.
			if got := getTask(t, ns, "interrupted"); !hasFinalizer(got, drainFinalizer) {
				t.Fatalf("the drain finalizer went while no operator ran: finalizers %v", got.Finalizers)
			}

			startOperator(t, "drain-restart-1", ns, env)
			waitForEvent(t, ns, "interrupted", test.eventType, test.event, func(e eventsv1.Event) error {
				if e.Note != test.note {
					return fmt.Errorf("%s note %q, want %q", e.Reason, e.Note, test.note)
				}
				return nil
			})
			last := rec.waitDeleted(t, settleTimeout)
			if last.Status.CheckpointRef != test.checkpointRef {
				t.Errorf("the task's last version has checkpointRef %q, want %q", last.Status.CheckpointRef, test.checkpointRef)
			}
			waitForChildrenGone(t, ns, "interrupted")
		})
	}
}

func TestATaskNeverPinnedHasNoDrainFinalizerAndGoesAtOnce(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	releaseTasksAtEnd(t, ns)
	startOperator(t, "never-pinned", ns)

	createTask(t, ns, "homeless", "nowhere", checkpoint)
	waitForTask(t, ns, "homeless", settleTimeout,
		failedWith(builders.ReasonWorkspaceUnresolved, "Workspace not found: 'nowhere'"))
	consistently(t, 2*time.Second, func() error { return withoutDrainFinalizer(getTask(t, ns, "homeless")) })

	deleteTask(t, ns, "homeless")
	// With no finalizer the apiserver removes the task within the DELETE.
	if taskExists(t, ns, "homeless") {
		t.Errorf("a task that was never pinned is still there after its DELETE: %+v", getTask(t, ns, "homeless").ObjectMeta)
	}
}
