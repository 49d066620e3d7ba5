// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// The Sandbox stand-in's annotations (test/stages/sandbox.yaml).
const (
	annotationSandbox = "test.caliban.caliban-ai.dev/sandbox"
	annotationMessage = "test.caliban.caliban-ai.dev/message"
)

func TestATaskFollowsItsSandboxsReadiness(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "readiness", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	t.Run("a running task whose Sandbox loses readiness provisions until it is back", func(t *testing.T) {
		t.Parallel()
		createTask(t, ns, "flaky", "demo")
		task := waitForTask(t, ns, "flaky", settleTimeout, isRunning)
		sbx := task.Status.SandboxRef.Name

		const message = "0/3 nodes are available: 3 Insufficient memory."
		annotateSandbox(t, ns, sbx, map[string]*string{annotationSandbox: new("not-ready"), annotationMessage: new(message)})
		task = waitForTask(t, ns, "flaky", settleTimeout, provisioning(message))
		if task.Status.SandboxRef == nil || task.Status.SandboxRef.Name != sbx {
			t.Errorf("sandboxRef %+v while provisioning, want %s", task.Status.SandboxRef, sbx)
		}

		// Make the operator apply the Sandbox again: take away a field it
		// owns. Its apply must restore that and leave the test's
		// annotations alone.
		annotateSandbox(t, ns, sbx, map[string]*string{builders.AnnotationAppliedHash: nil})
		framework.Eventually(t, settleTimeout, func() error {
			ann := getSandbox(t, ns, sbx).GetAnnotations()
			if ann[builders.AnnotationAppliedHash] == "" {
				return errors.New("the operator has not re-applied the Sandbox")
			}
			if ann[annotationSandbox] != "not-ready" || ann[annotationMessage] != message {
				return fmt.Errorf("the operator's apply removed annotations it does not own: %v", ann)
			}
			return nil
		})
		waitForTask(t, ns, "flaky", settleTimeout, provisioning(message))

		annotateSandbox(t, ns, sbx, map[string]*string{annotationSandbox: nil, annotationMessage: nil})
		waitForTask(t, ns, "flaky", settleTimeout, isRunning)
	})

	t.Run("a task whose Sandbox never reports readiness provisions until it does", func(t *testing.T) {
		t.Parallel()
		// The stand-in reads the annotation when the Sandbox appears, before
		// a test could annotate what the operator creates: the task waits
		// for a Workspace that does not exist yet, the test creates its
		// Sandbox as the operator would render it, controlled by the task,
		// and the operator applies over it once the Workspace comes. (One
		// the task does not control would be left alone: ADR 0029.)
		const name = "patient"
		sbx := builders.SandboxName(name)
		created := createTask(t, ns, name, "patient-ws")
		waitForTask(t, ns, name, settleTimeout, hasPhase(calibanv1alpha1.TaskFailed))
		spec := workspaceSpec()
		pin := builders.PinWorkspace(created, &spec, spec.Providers[0])
		u, err := framework.Unstructured(builders.BuildSandbox(created, pin, config.DefaultAgentSettings()))
		if err != nil {
			t.Fatal(err)
		}
		u.SetAnnotations(map[string]string{annotationSandbox: "never-ready"})
		if _, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Create(ctx, u,
			metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
			t.Fatal(err)
		}
		createReadyWorkspace(t, ns, "patient-ws")
		waitForTask(t, ns, name, settleTimeout, provisioning(""))
		var sandbox *unstructured.Unstructured
		framework.Eventually(t, settleTimeout, func() error {
			sandbox = getSandbox(t, ns, sbx)
			if !metav1.IsControlledBy(sandbox, created) {
				return fmt.Errorf("Sandbox owner references %+v, want the task %s", sandbox.GetOwnerReferences(), created.UID)
			}
			return nil
		})
		if sandbox.GetAnnotations()[annotationSandbox] != "never-ready" {
			t.Errorf("the operator's apply removed the test's annotation: %v", sandbox.GetAnnotations())
		}
		consistently(t, 2*time.Second, func() error {
			got, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			return provisioning("")(got)
		})

		annotateSandbox(t, ns, sbx, map[string]*string{annotationSandbox: new("ready")})
		waitForTask(t, ns, name, settleTimeout, isRunning)
	})
}

// provisioning: phase Provisioning with a sandboxRef, Ready False
// SandboxNotReady with the message (when not empty), no endpoint.
func provisioning(message string) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		if err := hasPhase(calibanv1alpha1.TaskProvisioning)(task); err != nil {
			return err
		}
		if err := readyIs(task, metav1.ConditionFalse, builders.ReasonSandboxNotReady); err != nil {
			return err
		}
		if task.Status.SandboxRef == nil {
			return fmt.Errorf("no sandboxRef")
		}
		if got := readyCondition(task).Message; message != "" && got != message {
			return fmt.Errorf("Ready message %q, want the Sandbox's %q", got, message)
		}
		if task.Status.CalibandEndpoint != "" {
			return fmt.Errorf("calibandEndpoint %q while provisioning", task.Status.CalibandEndpoint)
		}
		return nil
	}
}
