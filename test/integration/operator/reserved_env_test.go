// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// A pin taken before the Workspace schema refused the agent policy's
// variables in env may carry CALIBAN_AUTO_ALLOW=true from a Workspace that
// never set agentPolicy.allowUnattended. Rendered, it would run the agent
// with auto-allow behind the posture gate's back. The task fails instead,
// naming the entry and the field to set, and no Sandbox is made for it.
// A second task pinned by hand the same way, without the variable, runs:
// the failure is the variable's, not the hand-written pin's.
func TestAnOldPinCarryingAnAgentPolicyVariableFailsAndReachesNoSandbox(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	createProviderSecret(t, ns)

	// No operator runs in the namespace yet: the pins are written as an
	// operator before the rule would have written them, and the Workspace
	// they came from could not be stored any more.
	createTask(t, ns, "side-door", "before-the-rule")
	createTask(t, ns, "plain", "before-the-rule")
	pinByHand(t, ns, "side-door", calibanv1alpha1.EnvVar{Name: "CALIBAN_OUTPUT_STYLE", Value: "concise"},
		calibanv1alpha1.EnvVar{Name: "CALIBAN_AUTO_ALLOW", Value: "true"})
	pinByHand(t, ns, "plain", calibanv1alpha1.EnvVar{Name: "CALIBAN_OUTPUT_STYLE", Value: "concise"})

	// Ignored by an operator without pin signing. With it, a signing key
	// created after these tasks makes their hand-written pins legacy pins,
	// trusted as pins from before signing were.
	startOperator(t, "reserved-env", ns, "CALIBAN_PIN_KEY_SECRET=pin-key-"+ns)

	running := waitForTask(t, ns, "plain", settleTimeout, isRunning)
	if got, ok := envValue(calibandEnv(t, getSandbox(t, ns, running.Status.SandboxRef.Name)), "CALIBAN_OUTPUT_STYLE"); !ok || got != "concise" {
		t.Errorf("the hand-pinned control task's Sandbox has CALIBAN_OUTPUT_STYLE=%q (set: %v), want concise", got, ok)
	}

	failed := waitForTask(t, ns, "side-door", settleTimeout, failedNaming(builders.ReasonPostureNotPermitted,
		"status.resolvedWorkspace.env[1]", "'CALIBAN_AUTO_ALLOW'", "agentPolicy.autoAllow"))
	if failed.Status.SandboxRef != nil {
		t.Errorf("the failed task names Sandbox %q, want none", failed.Status.SandboxRef.Name)
	}
	waitForEvent(t, ns, "side-door", corev1.EventTypeWarning, builders.ReasonPostureNotPermitted,
		noteContains("status.resolvedWorkspace.env[1]", "agentPolicy.autoAllow"))

	// The failure is looked at again every 30 s and never applies
	// anything: only the control task's Sandbox exists, and no Sandbox
	// carries the variable.
	consistently(t, 5*time.Second, func() error {
		list, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			sb := &list.Items[i]
			if v, ok := envValue(calibandEnv(t, sb), "CALIBAN_AUTO_ALLOW"); ok {
				return fmt.Errorf("Sandbox %s carries CALIBAN_AUTO_ALLOW=%q", sb.GetName(), v)
			}
			if sb.GetName() != running.Status.SandboxRef.Name {
				return fmt.Errorf("Sandbox %s exists besides the control task's %s", sb.GetName(), running.Status.SandboxRef.Name)
			}
		}
		return nil
	})
}

// pinByHand writes a supervised pin of workspaceSpec's source and provider
// with env into the task's status, in one server-side apply to the status
// subresource as a field manager of its own, the way prospero writes its
// condition.
func pinByHand(t testing.TB, ns, name string, env ...calibanv1alpha1.EnvVar) {
	t.Helper()
	spec := workspaceSpec()
	pin := calibanv1alpha1.ResolvedWorkspace{Sources: spec.Sources, Provider: spec.Providers[0], Env: env}
	body, err := json.Marshal(map[string]any{
		"apiVersion": calibanv1alpha1.SchemeGroupVersion.String(),
		"kind":       "CalibanTask",
		"metadata":   map[string]any{"name": name},
		"status": map[string]any{
			"resolvedWorkspace": pin,
			"permissionPosture": calibanv1alpha1.PostureSupervised,
			"phase":             calibanv1alpha1.TaskProvisioning,
			"startTime":         time.Now().UTC().Format(time.RFC3339),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Patch(ctx, name, types.ApplyYAMLPatchType, body,
		metav1.PatchOptions{FieldManager: "operator-before-the-rule"}, "status"); err != nil {
		t.Fatalf("pinning %s/%s by hand: %v", ns, name, err)
	}
}
