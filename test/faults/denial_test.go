// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package faults_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// denyMessage is what the policy that refuses Sandboxes says.
const denyMessage = "Sandboxes are refused for now by the fault test's admission policy"

// retryBase is the task queue's first retry delay after a failed sync; it
// doubles with each failure of the same task.
const retryBase = 500 * time.Millisecond

// retriesBound is the most Sandbox applies one task may send while it is
// refused for window: its first, the retries exponential backoff allows
// (retryBase·(2ⁿ−1) ≤ window), and one more for the status write that
// wakes it once (the write says why it is stuck, and its watch event is a
// new reason to look).
func retriesBound(window time.Duration) int {
	return 2 + int(math.Floor(math.Log2(float64(window)/float64(retryBase)+1)))
}

// An admission policy refuses every Sandbox for a while. The tasks stay
// Provisioning, and say why; the operator retries each with backoff, not in
// a hot loop (the audit log counts every apply it sent); once the policy is
// lifted, every task converges without help.
func TestRefusedSandboxesAreRetriedWithBackoffAndConvergeOnceAllowed(t *testing.T) {
	sz := sizes()
	ctx, bed := scenario(t, framework.Options{ImmediateSandbox: true, AuditOperator: true})
	op := bed.mustStartOperator(t, "op-0", "op-0", "")
	ns := bed.namespace(t, ctx, "denial", "model-a")
	pins := watchPins(t, ctx, bed.cluster, ns)
	bed.waitWorkspaceObserved(t, ctx, ns, 1)
	bed.denySandboxes(t, ctx, ns)

	names := taskNames("a", sz.deniedTasks)
	if err := bed.createTasks(ctx, ns, names, 16); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		return bed.allProvisioningWith(ctx, ns, names, denyMessage)
	})
	sleepCtx(ctx, sz.denyFor)
	if err := bed.allProvisioningWith(ctx, ns, names, denyMessage); err != nil {
		t.Errorf("after %s of refusals: %v", sz.denyFor, err)
	}
	lifted := time.Now()
	bed.allowSandboxes(t, ctx)
	bed.waitAllRunning(t, ctx, ns, names, sz.convergeTimeout)
	converged := time.Since(lifted)
	bed.checkChildren(t, ctx, ns, names)
	if changed := pins.changed(); len(changed) > 0 {
		t.Errorf("%d tasks changed their pin after it was written, e.g. %s", len(changed), changed[0])
	}

	events, err := bed.cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	applies := sandboxAppliesByTask(events, ns)
	var refusedTotal, worst, worstBound int
	for _, name := range names {
		a := applies[builders.SandboxName(name)]
		if a.refused == 0 {
			t.Errorf("task %s: no Sandbox apply was refused; the policy tested nothing", name)
			continue
		}
		window := lifted.Sub(a.firstRefused)
		if bound := retriesBound(window); a.refused > bound {
			t.Errorf("task %s: %d Sandbox applies refused in %s, want at most %d with backoff from %s",
				name, a.refused, window.Round(time.Millisecond), bound, retryBase)
		}
		if a.accepted != 1 {
			t.Errorf("task %s: %d Sandbox applies accepted, want 1", name, a.accepted)
		}
		refusedTotal += a.refused
		if a.refused > worst {
			worst, worstBound = a.refused, retriesBound(window)
		}
	}
	t.Logf("%d tasks refused for %s: %d Sandbox applies refused (at most %d for one task, whose bound was %d); all Running %s after the policy was lifted; %d pins watched, %d changed",
		len(names), sz.denyFor, refusedTotal, worst, worstBound, converged.Round(time.Millisecond), pins.count(), len(pins.changed()))
	if err := op.Stop(stopTimeout); err != nil {
		t.Error(err)
	}
}

// sandboxApplies is what the audit log says of the operator's applies of
// one Sandbox.
type sandboxApplies struct {
	refused, accepted int
	firstRefused      time.Time
}

func sandboxAppliesByTask(events []framework.AuditEvent, ns string) map[string]*sandboxApplies {
	out := map[string]*sandboxApplies{}
	for _, e := range events {
		if !e.Write() || e.ObjectRef == nil || e.ObjectRef.Resource != builders.SandboxResource ||
			e.ObjectRef.Namespace != ns || e.ObjectRef.Subresource != "" {
			continue
		}
		a := out[e.ObjectRef.Name]
		if a == nil {
			a = &sandboxApplies{}
			out[e.ObjectRef.Name] = a
		}
		if e.Succeeded() {
			a.accepted++
			continue
		}
		if a.refused == 0 {
			a.firstRefused = e.RequestReceived
		}
		a.refused++
	}
	return out
}

// denySandboxes installs a ValidatingAdmissionPolicy that refuses every
// Sandbox created or updated in ns, and waits until the apiserver applies
// it (policies take effect asynchronously).
func (b *bed) denySandboxes(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	c := b.cluster
	forbidden := metav1.StatusReasonForbidden
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-sandboxes"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups:   []string{sandboxv1beta1.SchemeGroupVersion.Group},
							APIVersions: []string{"*"},
							Resources:   []string{builders.SandboxResource},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: denyMessage, Reason: &forbidden}},
		},
	}
	if _, err := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-sandboxes"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			},
		},
	}
	if _, err := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		err := b.dryRunSandbox(ctx, ns)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), denyMessage) {
			return nil
		}
		return fmt.Errorf("a Sandbox is not refused yet: %v", err)
	})
}

// allowSandboxes removes denySandboxes' binding. It does not wait for the
// apiserver to stop applying the policy: that delay is part of the time the
// test reports until every task runs.
func (b *bed) allowSandboxes(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := b.cluster.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "refuse-sandboxes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// dryRunSandbox asks the apiserver whether it would create a Sandbox in ns.
func (b *bed) dryRunSandbox(ctx context.Context, ns string) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(sandboxv1beta1.SchemeGroupVersion.String())
	u.SetKind("Sandbox")
	u.SetName("probe")
	_ = unstructured.SetNestedField(u.Object, map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}, "spec", "podTemplate", "spec")
	_, err := b.cluster.Dynamic.Resource(sandboxv1beta1.SchemeGroupVersion.WithResource(builders.SandboxResource)).Namespace(ns).
		Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// allProvisioningWith reports the tasks that are not Provisioning with a
// Ready message containing want.
func (b *bed) allProvisioningWith(ctx context.Context, ns string, names []string, want string) error {
	list, err := b.cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	byName := map[string]*calibanv1alpha1.CalibanTask{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var wrong []string
	for _, name := range names {
		task := byName[name]
		if task == nil {
			wrong = append(wrong, name+" (missing)")
			continue
		}
		ready := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady)
		if task.Status.Phase != calibanv1alpha1.TaskProvisioning || ready == nil || !strings.Contains(ready.Message, want) {
			msg := ""
			if ready != nil {
				msg = ready.Message
			}
			wrong = append(wrong, fmt.Sprintf("%s (%s, %q)", name, task.Status.Phase, msg))
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		return fmt.Errorf("%d of %d tasks are not Provisioning saying %q, e.g. %v", len(wrong), len(names), want, wrong[:min(3, len(wrong))])
	}
	return nil
}
