// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// What the operator copies from a status others may write, without the
// admission component (docs/security.md#what-only-the-operator-writes-in-status):
// prospero's AgentsDrained message, a Sandbox's serviceFQDN.

// The Ready reason of a task whose Sandbox reports an address that is not
// its own Service's.
const reasonServiceFQDNMismatch = "ServiceFQDNMismatch"

// An AgentsDrained answer on a task that is not draining, which anyone
// who may patch calibantasks/status can write, never reaches
// status.checkpointRef.
func TestAnAgentsDrainedMessageOutsideADrainIsNoCheckpoint(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	releaseTasksAtEnd(t, ns)
	startOperator(t, "checkpoint-ref", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")
	createTask(t, ns, "running", "demo", checkpoint)
	waitForTask(t, ns, "running", settleTimeout, allOf(isRunning, withDrainFinalizer))

	prosperoDrains(t, ns, "running", metav1.ConditionTrue, drainedCheckpointed, "ckpt-forged")
	// A sync after the condition: the operator records the generation.
	gen := touchTask(t, ns, "running")
	waitForTask(t, ns, "running", settleTimeout, allOf(isRunning, atGeneration(gen)))
	consistently(t, 3*time.Second, func() error {
		task := getTask(t, ns, "running")
		if task.Status.CheckpointRef != "" {
			return fmt.Errorf("a running task's checkpointRef is %q, copied from an AgentsDrained condition written while it was not draining", task.Status.CheckpointRef)
		}
		return isRunning(task)
	})
}

// A Sandbox's status is anyone's who may write sandboxes/status: a
// serviceFQDN there that is not the Sandbox's own Service (its name, the
// task's namespace, the cluster's domain) gives the task no endpoint, so
// prospero and the token it dials with are never sent elsewhere. Once the
// address is the Service again, the task runs there.
func TestASandboxThatReportsAnotherAddressGivesNoEndpoint(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "service-fqdn", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")
	createTask(t, ns, "served", "demo")
	waitForTask(t, ns, "served", settleTimeout, isRunning)
	sandbox := builders.SandboxName("served")
	own := sandbox + "." + ns + ".svc.cluster.local"

	setServiceFQDN := func(fqdn string) {
		t.Helper()
		body, err := json.Marshal(map[string]any{"status": map[string]any{"serviceFQDN": fqdn}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Patch(ctx, sandbox, types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: "sandbox-status-writer"}, "status"); err != nil {
			t.Fatalf("writing the Sandbox's status (the test needs to): %v", err)
		}
	}
	for _, elsewhere := range []string{"collector.attacker.example", sandbox + ".attacker.svc.cluster.local"} {
		setServiceFQDN(elsewhere)
		waitForTask(t, ns, "served", settleTimeout, func(task *calibanv1alpha1.CalibanTask) error {
			ready := readyCondition(task)
			switch {
			case task.Status.Phase != calibanv1alpha1.TaskProvisioning || task.Status.CalibandEndpoint != "":
				return fmt.Errorf("phase %s endpoint %q, want Provisioning and no endpoint", task.Status.Phase, task.Status.CalibandEndpoint)
			case ready == nil || ready.Reason != reasonServiceFQDNMismatch || !strings.Contains(ready.Message, "'"+elsewhere+"'") || !strings.Contains(ready.Message, own):
				return fmt.Errorf("Ready %+v, want %s naming %s and %s", ready, reasonServiceFQDNMismatch, elsewhere, own)
			}
			return nil
		})
		consistently(t, 2*time.Second, func() error {
			if task := getTask(t, ns, "served"); task.Status.CalibandEndpoint != "" {
				return fmt.Errorf("the task's endpoint is %q while its Sandbox reports %s", task.Status.CalibandEndpoint, elsewhere)
			}
			return nil
		})
	}
	waitForEvent(t, ns, "served", corev1.EventTypeWarning, reasonServiceFQDNMismatch, noteContains(own))

	setServiceFQDN(own)
	waitForTask(t, ns, "served", settleTimeout, isRunning)
}
