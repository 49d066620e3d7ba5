// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// denialMessage is what the test's ValidatingAdmissionPolicy answers.
const denialMessage = "integration test: no task children may be created here yet"

// denyTaskChildren installs a ValidatingAdmissionPolicy and a binding that
// deny the creation of any object labelled as a task's child (Sandboxes,
// ServiceAccounts, NetworkPolicies) in namespace ns. It waits until the
// apiserver enforces it and returns a function that deletes the binding,
// which lifts the denial. Both are deleted when the test ends.
func denyTaskChildren(t *testing.T, ns string) (lift func()) {
	t.Helper()
	name := "deny-task-children-" + ns
	policies := cluster.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := cluster.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	create := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	rule := func(group, resource string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: create,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
		}}
	}
	fail := admissionregistrationv1.Fail
	forbidden := metav1.StatusReasonForbidden
	_, err := policies.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				rule(sandboxes.Group, sandboxes.Resource),
				rule("", "serviceaccounts"),
				rule("networking.k8s.io", "networkpolicies"),
			}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: denialMessage, Reason: &forbidden}},
		},
	}, metav1.CreateOptions{FieldManager: framework.FieldManager})
	if err != nil {
		t.Fatalf("creating ValidatingAdmissionPolicy %s: %v", name, err)
	}
	t.Cleanup(func() { _ = policies.Delete(ctx, name, metav1.DeleteOptions{}) })
	_, err = bindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: builders.LabelTask, Operator: metav1.LabelSelectorOpExists,
				}}},
			},
		},
	}, metav1.CreateOptions{FieldManager: framework.FieldManager})
	if err != nil {
		t.Fatalf("creating ValidatingAdmissionPolicyBinding %s: %v", name, err)
	}
	deleteBinding := func() {
		if err := bindings.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting ValidatingAdmissionPolicyBinding %s: %v", name, err)
		}
	}
	t.Cleanup(deleteBinding)

	// The apiserver picks policies up asynchronously: wait until a
	// dry-run create of a labelled ServiceAccount is denied, and make sure
	// an unlabelled one is not.
	probe := func(labels map[string]string) error {
		_, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "vap-probe", Labels: labels}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	framework.Eventually(t, settleTimeout, func() error {
		err := probe(map[string]string{builders.LabelTask: "probe"})
		if err == nil {
			return errors.New("the apiserver does not enforce the ValidatingAdmissionPolicy yet: a labelled ServiceAccount is admitted")
		}
		if !strings.Contains(err.Error(), denialMessage) {
			return fmt.Errorf("a labelled ServiceAccount was refused, but not by the policy: %v", err)
		}
		return nil
	})
	if err := probe(nil); err != nil {
		t.Fatalf("the policy denies an unlabelled ServiceAccount too: %v", err)
	}

	return func() {
		deleteBinding()
		// Wait until the apiserver no longer enforces it.
		framework.Eventually(t, settleTimeout, func() error {
			if err := probe(map[string]string{builders.LabelTask: "probe"}); err != nil {
				return fmt.Errorf("the deleted binding is still enforced: %v", err)
			}
			return nil
		})
	}
}

// statusSeen is one version of a task's status, as a watch delivered it.
type statusSeen struct {
	resourceVersion string
	phase           calibanv1alpha1.TaskPhase
	pinned          bool
	posture         calibanv1alpha1.PermissionPosture
}

func (s statusSeen) String() string {
	return fmt.Sprintf("rv %s: phase %q, pinned %v, permissionPosture %q", s.resourceVersion, s.phase, s.pinned, s.posture)
}

// taskHistory records every version of a task a watch delivers.
type taskHistory struct {
	w    watch.Interface
	done chan struct{}

	mu     sync.Mutex
	seen   []statusSeen
	closed bool
}

// watchTask watches the task from resourceVersion rv (that of its
// creation) until Stop.
func watchTask(t testing.TB, ns, name, rv string) *taskHistory {
	t.Helper()
	w, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: rv,
	})
	if err != nil {
		t.Fatalf("watching CalibanTask %s: %v", name, err)
	}
	h := &taskHistory{w: w, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for ev := range w.ResultChan() {
			task, ok := ev.Object.(*calibanv1alpha1.CalibanTask)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			h.mu.Lock()
			h.seen = append(h.seen, statusSeen{
				resourceVersion: task.ResourceVersion,
				phase:           task.Status.Phase,
				pinned:          task.Status.ResolvedWorkspace != nil,
				posture:         task.Status.PermissionPosture,
			})
			h.mu.Unlock()
		}
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
	}()
	t.Cleanup(func() { h.Stop() })
	return h
}

// Stop ends the watch and returns what it saw, and whether the watch had
// closed on its own before (then versions may be missing).
func (h *taskHistory) Stop() ([]statusSeen, bool) {
	h.mu.Lock()
	closedEarly := h.closed
	h.mu.Unlock()
	h.w.Stop()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen, closedEarly
}

// checkPinnedFirst stops the watch and checks the task's history from its
// creation: the first version with any status has the pin, the posture and
// phase Provisioning together (one status apply), no version is Pending,
// and the phases go Provisioning, then Running.
func checkPinnedFirst(t testing.TB, h *taskHistory) {
	t.Helper()
	// The watch may deliver the last versions after a poll saw them.
	framework.Eventually(t, settleTimeout, func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		if n := len(h.seen); n > 0 && h.seen[n-1].phase == calibanv1alpha1.TaskRunning {
			return nil
		}
		return fmt.Errorf("the watch has not delivered phase Running yet; it saw %v", h.seen)
	})
	seen, closedEarly := h.Stop()
	if closedEarly {
		t.Fatalf("the watch on the task closed early; it saw %v", seen)
	}
	var phases []calibanv1alpha1.TaskPhase
	first := true
	for _, s := range seen {
		if s.phase == "" && !s.pinned && s.posture == "" {
			continue
		}
		if first {
			first = false
			if s.phase != calibanv1alpha1.TaskProvisioning || !s.pinned || s.posture == "" {
				t.Errorf("the first status the task showed was %v, want the pin, the posture and phase Provisioning written together; all versions: %v", s, seen)
			}
		}
		if s.phase == calibanv1alpha1.TaskPending {
			t.Errorf("the task showed phase Pending although its workspace was Ready: %v", s)
		}
		if s.phase != "" && (len(phases) == 0 || phases[len(phases)-1] != s.phase) {
			phases = append(phases, s.phase)
		}
	}
	want := []calibanv1alpha1.TaskPhase{calibanv1alpha1.TaskProvisioning, calibanv1alpha1.TaskRunning}
	if fmt.Sprint(phases) != fmt.Sprint(want) {
		t.Errorf("the task went through phases %v, want %v; all versions: %v", phases, want, seen)
	}
}

func TestATaskIsPinnedBeforeItsChildrenAndKeepsThePinWhileTheyFail(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "pin-first", ns)
	createProviderSecret(t, ns)
	model := func(m string) func(*calibanv1alpha1.WorkspaceSpec) {
		return func(spec *calibanv1alpha1.WorkspaceSpec) { spec.Providers[0].Model = m }
	}
	createReadyWorkspace(t, ns, "demo", model("m1"))

	t.Run("a task on a Ready workspace goes straight to a pinned Provisioning, never Pending", func(t *testing.T) {
		created := createTask(t, ns, "smooth", "demo")
		history := watchTask(t, ns, "smooth", created.ResourceVersion)
		task := waitForTask(t, ns, "smooth", settleTimeout, isRunning)
		if got := task.Status.ResolvedWorkspace.Provider.Model; got != "m1" {
			t.Errorf("pinned model %q, want m1", got)
		}
		checkPinnedFirst(t, history)
	})

	t.Run("a task whose children are refused is pinned and keeps its pin until they can be created", func(t *testing.T) {
		lift := denyTaskChildren(t, ns)
		created := createTask(t, ns, "blocked", "demo")
		history := watchTask(t, ns, "blocked", created.ResourceVersion)

		provisioningWithPin := func(task *calibanv1alpha1.CalibanTask) error {
			if task.Status.Phase != calibanv1alpha1.TaskProvisioning {
				return fmt.Errorf("phase %q, want Provisioning", task.Status.Phase)
			}
			if task.Status.ResolvedWorkspace == nil {
				return errors.New("no resolvedWorkspace")
			}
			if got := task.Status.ResolvedWorkspace.Provider.Model; got != "m1" {
				return fmt.Errorf("pinned model %q, want m1", got)
			}
			if task.Status.PermissionPosture != calibanv1alpha1.PostureSupervised {
				return fmt.Errorf("permissionPosture %q, want supervised", task.Status.PermissionPosture)
			}
			if c := readyCondition(task); c == nil || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("Ready condition %+v, want False", c)
			}
			if task.Status.CalibandEndpoint != "" {
				return fmt.Errorf("calibandEndpoint %q while the children cannot be created", task.Status.CalibandEndpoint)
			}
			return nil
		}
		waitForTask(t, ns, "blocked", settleTimeout, provisioningWithPin)
		// The operator did try to create a child, and the policy refused it.
		waitForEvent(t, ns, "blocked", corev1.EventTypeWarning, "ReconcileError", noteContains(denialMessage))
		noChildren := func() error {
			if sb := getSandbox(t, ns, builders.SandboxName("blocked")); sb != nil {
				return errors.New("a Sandbox exists although the policy denies it")
			}
			if _, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, builders.ServiceAccountName("blocked"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the ServiceAccount: %v, want NotFound", err)
			}
			if _, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, builders.NetworkPolicyName("blocked"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the NetworkPolicy: %v, want NotFound", err)
			}
			return nil
		}
		if err := noChildren(); err != nil {
			t.Fatal(err)
		}

		// The workspace changes while the task keeps failing to get its
		// children: the task's retries must not re-admit it.
		gen := framework.UpdateWorkspace(t, cluster.Caliban, ns, "demo", model("m2"))
		waitForWorkspaceGeneration(t, ns, "demo", gen)
		// The failed child applies are retried with backoff (0.5 s,
		// doubling): several retries happen in this time.
		consistently(t, 10*time.Second, func() error {
			task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "blocked", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := provisioningWithPin(task); err != nil {
				return fmt.Errorf("while its children were refused, after the workspace changed: %w (status %s)", err, statusJSON(task.Status))
			}
			return noChildren()
		})

		lift()
		lifted := time.Now()
		// The next retry comes after the current backoff, which by now
		// may be tens of seconds.
		task := waitForTask(t, ns, "blocked", 2*time.Minute, isRunning)
		t.Logf("the task ran %s after the policy was lifted", time.Since(lifted).Round(100*time.Millisecond))
		if got := task.Status.ResolvedWorkspace.Provider.Model; got != "m1" {
			t.Errorf("once its children exist the task runs with pinned model %q, want m1 (the model when it was admitted)", got)
		}
		checkPinnedFirst(t, history)

		// A task admitted now gets the new model.
		createTask(t, ns, "later", "demo")
		if got := waitForTask(t, ns, "later", settleTimeout, isRunning).Status.ResolvedWorkspace.Provider.Model; got != "m2" {
			t.Errorf("a task admitted after the edit pinned model %q, want m2", got)
		}
	})
}
