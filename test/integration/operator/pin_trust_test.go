// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
)

// Whoever may patch calibantasks/status (prospero's ServiceAccount by
// design) can write any status field, the operator's too: without the
// admission component nothing refuses it. The operator must not run what
// such a writer put there, and must not keep its word for who asked.
func TestTheOperatorRunsOnlyPinsItWroteAndReadsWhoAskedFromTheAnnotation(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	// A key of the test's own, so that the test knows when it was made.
	key := "pin-key-" + ns
	op := startOperator(t, "pin-trust", ns, "CALIBAN_PIN_KEY_SECRET="+key)
	waitReady(t, op, settleTimeout)
	// Tasks created after the key's second are held to their signature
	// (creation times are whole seconds; the key's own is given the benefit
	// of the doubt).
	secret, err := cluster.Kube.CoreV1().Secrets("default").Get(ctx, key, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the operator made no pin key: %v", err)
	}
	time.Sleep(time.Until(secret.CreationTimestamp.Add(1100 * time.Millisecond)))
	createProviderSecret(t, ns)
	prospero := statusWriter(t, ns, "prospero")

	t.Run("a pin written through the status subresource by someone else runs nothing", func(t *testing.T) {
		// Unattended under a Workspace that does not exist: admission
		// fails it and writes no pin, so there is one to forge.
		createTask(t, ns, "forged", "nowhere", unattended)
		waitForTask(t, ns, "forged", settleTimeout, failedNaming(builders.ReasonWorkspaceUnresolved, "nowhere"))
		forged := map[string]any{
			"resolvedWorkspace": map[string]any{
				"provider": map[string]any{"name": "anthropic", "kind": "anthropic",
					"credentialsRef": map[string]any{"secretName": "provider-key", "key": "api-key"}},
				"agentPolicy": map[string]any{"allowUnattended": true, "autoAllow": true},
			},
			"permissionPosture": "unattended",
		}
		if err := applyStatusAs(prospero, "CalibanTask", ns, "forged", forged, true); err != nil {
			t.Fatalf("prospero could not write the pin (the test needs it to): %v", err)
		}
		waitForTask(t, ns, "forged", settleTimeout, failedNaming(builders.ReasonPinNotTrusted,
			"status.resolvedWorkspace was not written by caliban-operator", "carries no status.pinSignature"))
		consistently(t, 3*time.Second, func() error {
			_, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Get(ctx, builders.SandboxName("forged"), metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("a Sandbox for the forged pin: %v", err)
			}
			return nil
		})
	})

	t.Run("a pin the operator signed stops running once someone edits it", func(t *testing.T) {
		createReadyWorkspace(t, ns, "plain")
		createTask(t, ns, "edited", "plain")
		got := waitForTask(t, ns, "edited", settleTimeout, isRunning)
		if !strings.HasPrefix(got.Status.PinSignature, "v2:") {
			t.Fatalf("status.pinSignature %q, want the operator's v2 signature (the pin with its launch)", got.Status.PinSignature)
		}
		pin, err := json.Marshal(got.Status.ResolvedWorkspace)
		if err != nil {
			t.Fatal(err)
		}
		var edited map[string]any
		if err := json.Unmarshal(pin, &edited); err != nil {
			t.Fatal(err)
		}
		edited["agentPolicy"] = map[string]any{"allowUnattended": true, "autoAllow": true}
		if err := applyStatusAs(prospero, "CalibanTask", ns, "edited", map[string]any{"resolvedWorkspace": edited}, true); err != nil {
			t.Fatalf("prospero could not edit the pin (the test needs it to): %v", err)
		}
		waitForTask(t, ns, "edited", settleTimeout, failedNaming(builders.ReasonPinNotTrusted, "does not match it"))
		sbx := getSandbox(t, ns, builders.SandboxName("edited"))
		if v, ok := envValue(calibandEnv(t, sbx), builders.EnvAutoAllow); ok {
			t.Errorf("the Sandbox took %s=%q from the edited pin", builders.EnvAutoAllow, v)
		}
	})

	t.Run("who asked is read from the annotation, whatever the status says", func(t *testing.T) {
		task := newTask(ns, "asked", "plain")
		task.Annotations = map[string]string{calibanv1alpha1.AnnotationRequestedBy: "alice"}
		createAs(t, cluster.Caliban, task)
		waitForTask(t, ns, "asked", settleTimeout, func(tk *calibanv1alpha1.CalibanTask) error {
			if err := isRunning(tk); err != nil {
				return err
			}
			if tk.Status.RequestedBy != "alice" {
				return fmt.Errorf("requestedBy %q, want alice", tk.Status.RequestedBy)
			}
			return nil
		})
		for _, rewrite := range []string{"mallory", ""} {
			if err := applyStatusAs(prospero, "CalibanTask", ns, "asked", map[string]any{"requestedBy": rewrite}, true); err != nil {
				t.Fatalf("prospero could not rewrite requestedBy (the test needs it to): %v", err)
			}
			waitForTask(t, ns, "asked", settleTimeout, func(tk *calibanv1alpha1.CalibanTask) error {
				if tk.Status.RequestedBy != "alice" {
					return fmt.Errorf("after prospero wrote %q, requestedBy is %q, want alice back", rewrite, tk.Status.RequestedBy)
				}
				return isRunning(tk)
			})
		}
	})
}

// statusWriter is a client for ServiceAccount ns/name, which RBAC lets
// read tasks and patch their status: what prospero's installation grants
// it.
func statusWriter(t *testing.T, ns, name string) calibanclient.Interface {
	t.Helper()
	allow(t, ns, name+"-status", []rbacv1.PolicyRule{
		{APIGroups: []string{calibanv1alpha1.GroupName}, Resources: []string{"calibantasks"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{calibanv1alpha1.GroupName}, Resources: []string{"calibantasks/status"}, Verbs: []string{"patch"}},
	}, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns})
	return clientAs(t, "system:serviceaccount:"+ns+":"+name, "system:serviceaccounts", "system:serviceaccounts:"+ns)
}
