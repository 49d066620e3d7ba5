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

// A pin taken before the Workspace schema refused the variables that load
// code may carry LD_PRELOAD from a Workspace that could not be stored any
// more. Rendered, it would run a library of the Workspace writer's choosing
// inside caliband, approved by nobody. A task pinned so fails before its
// first child, naming the entry, and no Sandbox is made for it. A task
// that already runs when its pin turns out to carry one (here: pinned
// again by hand while the operator was stopped, as a pin of an earlier
// release would be found after an upgrade) fails too, but keeps the
// Sandbox it has exactly as it was: the operator never restarts a running
// agent, and renders nothing new from that pin.
func TestAnOldPinCarryingALoaderVariableFailsAndReachesNoSandbox(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	createProviderSecret(t, ns)
	style := calibanv1alpha1.EnvVar{Name: "CALIBAN_OUTPUT_STYLE", Value: "concise"}

	// No operator runs in the namespace yet: the pins are written as an
	// operator before the rule would have written them.
	createTask(t, ns, "side-door", "before-the-rule")
	createTask(t, ns, "running", "before-the-rule")
	pinByHand(t, ns, "side-door", style, calibanv1alpha1.EnvVar{Name: "LD_PRELOAD", Value: "/work/caliban/hook.so"})
	pinByHand(t, ns, "running", style)

	// A signing key created after these tasks makes their hand-written
	// pins legacy pins, trusted as pins from before signing were.
	key := "CALIBAN_PIN_KEY_SECRET=pin-key-" + ns
	op := startOperator(t, "loader-env", ns, key)

	running := waitForTask(t, ns, "running", settleTimeout, isRunning)
	failed := waitForTask(t, ns, "side-door", settleTimeout, failedNaming(builders.ReasonPostureNotPermitted,
		"status.resolvedWorkspace.env[1].name", "'LD_PRELOAD'", "decides what code the agent pod loads or runs"))
	if failed.Status.SandboxRef != nil {
		t.Errorf("the failed task names Sandbox %q, want none", failed.Status.SandboxRef.Name)
	}
	waitForEvent(t, ns, "side-door", corev1.EventTypeWarning, builders.ReasonPostureNotPermitted,
		noteContains("status.resolvedWorkspace.env[1].name", "'LD_PRELOAD'"))
	before := getSandbox(t, ns, running.Status.SandboxRef.Name)

	stop(t, op)
	repinByHand(t, ns, "running", style, calibanv1alpha1.EnvVar{Name: "NODE_OPTIONS", Value: "--require /work/caliban/hook.js"})
	startOperator(t, "loader-env-again", ns, key)

	waitForTask(t, ns, "running", settleTimeout, failedNaming(builders.ReasonPostureNotPermitted,
		"status.resolvedWorkspace.env[1].name", "'NODE_OPTIONS'"))
	// The failure is looked at again every 30 s and never applies
	// anything: the running task's Sandbox is the one it had, and no
	// Sandbox carries either variable.
	consistently(t, 5*time.Second, func() error {
		list, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d Sandboxes, want only the running task's %s", len(list.Items), before.GetName())
		}
		sb := &list.Items[0]
		if sb.GetUID() != before.GetUID() || sb.GetGeneration() != before.GetGeneration() {
			return fmt.Errorf("Sandbox %s is uid %s generation %d, want it as it was: uid %s generation %d",
				sb.GetName(), sb.GetUID(), sb.GetGeneration(), before.GetUID(), before.GetGeneration())
		}
		for _, name := range []string{"LD_PRELOAD", "NODE_OPTIONS"} {
			if v, ok := envValue(calibandEnv(t, sb), name); ok {
				return fmt.Errorf("Sandbox %s carries %s=%q", sb.GetName(), name, v)
			}
		}
		return nil
	})
}

// repinByHand is pinByHand over a pin the operator has written since:
// the status fields are taken from it by force, as a status writer with
// force would take them.
func repinByHand(t testing.TB, ns, name string, env ...calibanv1alpha1.EnvVar) {
	t.Helper()
	spec := workspaceSpec()
	pin := calibanv1alpha1.ResolvedWorkspace{Sources: spec.Sources, Provider: spec.Providers[0], Env: env}
	body, err := json.Marshal(map[string]any{
		"apiVersion": calibanv1alpha1.SchemeGroupVersion.String(),
		"kind":       "CalibanTask",
		"metadata":   map[string]any{"name": name},
		"status":     map[string]any{"resolvedWorkspace": pin},
	})
	if err != nil {
		t.Fatal(err)
	}
	force := true
	if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Patch(ctx, name, types.ApplyYAMLPatchType, body,
		metav1.PatchOptions{FieldManager: "operator-before-the-rule", Force: &force}, "status"); err != nil {
		t.Fatalf("pinning %s/%s again by hand: %v", ns, name, err)
	}
}
