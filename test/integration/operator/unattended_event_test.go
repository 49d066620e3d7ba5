// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

func TestAnUnattendedAdmissionIsAnnouncedOnceEvenWhenTheStateCheckFailsFirst(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "unattended-event", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "trusting", func(spec *calibanv1alpha1.WorkspaceSpec) {
		spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true}
	})

	// Admission succeeds (the workspace allows unattended work), then the
	// state check fails: the token Secret does not exist yet.
	createTask(t, ns, "night-shift", "trusting", unattended, remoteState("late-token"))
	task := waitForTask(t, ns, "night-shift", settleTimeout,
		failedWith(builders.ReasonInvalidState, "state.tokenRef: secret 'late-token' not found"))
	if task.Status.ResolvedWorkspace == nil || task.Status.PermissionPosture != calibanv1alpha1.PostureUnattended {
		t.Errorf("the task failed its state check but was not admitted unattended and pinned first: %s", statusJSON(task.Status))
	}

	createSecret(t, ns, "late-token", map[string]string{"token": "gz-test"})
	// Secrets are read, not watched: the 30 s failure requeue finds it.
	task = waitForTask(t, ns, "night-shift", recheckTimeout, isRunning)
	if task.Status.PermissionPosture != calibanv1alpha1.PostureUnattended {
		t.Errorf("permissionPosture %q, want unattended", task.Status.PermissionPosture)
	}

	// The admission was announced, whether when it happened or once the
	// task got past its state check, and only once.
	waitForEvent(t, ns, "night-shift", corev1.EventTypeNormal, "UnattendedAdmitted", noteContains("'trusting'", "agentPolicy.allowUnattended"))
	// Events are written asynchronously: give a second one time to appear.
	consistently(t, 5*time.Second, func() error {
		events := eventsWithReason(t, ns, "night-shift", "UnattendedAdmitted")
		if len(events) != 1 {
			return fmt.Errorf("%d UnattendedAdmitted Events for the task, want exactly one: %+v", len(events), events)
		}
		if e := events[0]; e.Type != corev1.EventTypeNormal {
			return fmt.Errorf("the UnattendedAdmitted Event is of type %s, want Normal", e.Type)
		}
		return nil
	})
	if e := eventsWithReason(t, ns, "night-shift", "UnattendedAdmitted")[0]; e.Series != nil {
		t.Logf("the UnattendedAdmitted Event is a series of %d", e.Series.Count)
	}
}
