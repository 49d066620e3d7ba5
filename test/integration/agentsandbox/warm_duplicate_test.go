// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package agentsandbox_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/app"
	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanoperator "github.com/caliban-ai/caliban-operator/pkg/operator"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// agent-sandbox v1.0.3 can adopt a pool Sandbox for a claim and then, on
// a conflicting write, make a second one from the template under the
// claim's name (docs/warm-start.md#duplicates). The race cannot be forced
// on demand, so the test makes that second Sandbox as agent-sandbox's
// createSandbox does (the claim as controller, its UID label, the
// template's blueprint) beside a Running warm task. The operator deletes
// it, says so in a Warning Event and in kubectl caliban describe, and
// leaves the task and the Sandbox it runs on as they were. A finalizer of
// the test's holds the deleted duplicate, so describe is seen listing it.
func TestASecondSandboxOfAWarmTasksClaimIsRemovedAndTheTaskUntouched(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	startOperator(t, "duplicate", ns)
	namespaceWithWorkspace(t, ns)
	setWarmPool(t, ns, "ws", 1)
	waitForFullPool(t, ns, "ws", "")

	createTask(t, ns, "dup")
	task := framework.WaitForPhase(t, cluster.Caliban, ns, "dup", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	claim := getClaim(t, ns, "dup")
	named := task.Status.SandboxRef.Name
	if claim.Status.Sandbox.Name != named || !strings.HasPrefix(named, builders.WarmPoolName("ws")+"-") {
		t.Fatalf("the task runs on %q, its claim names %q: want one pool Sandbox", named, claim.Status.Sandbox.Name)
	}
	kept := getSandbox(t, ns, named)

	// The second Sandbox, as agent-sandbox's createSandbox makes it.
	yes := true
	spec, _, _ := unstructured.NestedMap(kept.Object, "spec")
	dup := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{
			"name": claim.Name, "namespace": ns,
			"labels": map[string]any{
				builders.LabelClaimUID:   string(claim.UID),
				builders.LabelLaunchType: builders.LaunchTypeCold,
			},
			"annotations": map[string]any{builders.AnnotationSandboxTemplateRef: kept.GetAnnotations()[builders.AnnotationSandboxTemplateRef]},
			"finalizers":  []any{holdFinalizer},
		},
		"spec": spec,
	}}
	dup.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxClaim",
		Name: claim.Name, UID: claim.UID, Controller: &yes, BlockOwnerDeletion: &yes}})
	made, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Create(ctx, dup, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("making the second Sandbox: %v", err)
	}

	t.Cleanup(func() { releaseSandbox(ns, claim.Name) })
	framework.Eventually(t, startTimeout, func() error {
		got, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Get(ctx, claim.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			return err
		case got.GetUID() != made.GetUID():
			return fmt.Errorf("Sandbox %s was made again (%s)", claim.Name, got.GetUID())
		case got.GetDeletionTimestamp() == nil:
			return fmt.Errorf("the second Sandbox %s is not being deleted", claim.Name)
		}
		return nil
	})
	framework.Eventually(t, startTimeout, func() error {
		list, err := cluster.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.UID == task.UID && e.Reason == calibanoperator.EventDuplicateSandboxRemoved && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, claim.Name) && strings.Contains(e.Note, named) {
				return nil
			}
		}
		return fmt.Errorf("no Warning %s Event on the task naming %s and %s", calibanoperator.EventDuplicateSandboxRemoved, claim.Name, named)
	})

	after := getTask(t, ns, "dup")
	if after.Status.Phase != calibanv1alpha1.TaskRunning || after.Status.SandboxRef.Name != named || after.Status.CalibandEndpoint != task.Status.CalibandEndpoint {
		t.Errorf("the task is %s on %q at %q, want Running on %q at %q as before", after.Status.Phase, after.Status.SandboxRef.Name,
			after.Status.CalibandEndpoint, named, task.Status.CalibandEndpoint)
	}
	still := getSandbox(t, ns, named)
	if still.GetUID() != kept.GetUID() || still.GetDeletionTimestamp() != nil {
		t.Errorf("the Sandbox the task runs on was replaced or is being deleted (%s, was %s)", still.GetUID(), kept.GetUID())
	}
	if c := getClaim(t, ns, "dup"); c.UID != claim.UID || c.Status.Sandbox.Name != named {
		t.Errorf("the claim is %s naming %q, want %s naming %q", c.UID, c.Status.Sandbox.Name, claim.UID, named)
	}

	var out, errOut bytes.Buffer
	if code := app.Run(ctx, []string{"describe", "dup", "-n", ns, "--kubeconfig", cluster.Kubeconfig},
		genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, app.BuildInfo{}); code != app.ExitOK {
		t.Fatalf("describe: exit %d: %s", code, errOut.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  Sandbox +` + regexp.QuoteMeta(named) + ` +operatingMode Running`),
		regexp.MustCompile(`(?m)^  Sandbox +` + regexp.QuoteMeta(claim.Name) + ` +a second Sandbox of claim ` + regexp.QuoteMeta(claim.Name) + ` .*; being deleted$`),
		regexp.MustCompile(`(?m)^  Duplicates +1 removed `),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("describe does not match %s:\n%s", want, out.String())
		}
	}

	releaseSandbox(ns, claim.Name)
	gone(t, "the second Sandbox "+claim.Name, func() error {
		_, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Get(ctx, claim.Name, metav1.GetOptions{})
		return err
	})
}

// holdFinalizer is the test's finalizer on a Sandbox it keeps in sight
// after its deletion.
const holdFinalizer = "caliban.test/hold"

// releaseSandbox lifts holdFinalizer from Sandbox name.
func releaseSandbox(ns, name string) {
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	_, _ = cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
}
