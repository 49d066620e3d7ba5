// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package agentsandbox_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

var sandboxGVR = sandboxv1beta1.SchemeGroupVersion.WithResource(builders.SandboxResource)

// The test bed serves agent-sandbox's warm path on its own, without the
// operator: a SandboxWarmPool keeps a Sandbox of its SandboxTemplate ready,
// and a SandboxClaim adopts that one rather than starting a cold Sandbox.
// Warm starts are built on this; when it fails, the bed (the extension CRDs,
// the controller's --extensions) is what is broken.
func TestTheBedServesAClaimFromAWarmPool(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	ext := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: resource}
	}
	object := func(kind, name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "extensions.agents.x-k8s.io/v1beta1",
			"kind":       kind,
			"metadata":   map[string]any{"name": name},
			"spec":       spec,
		}}
	}
	// Unmanaged: a Managed template without a policy of its own would get
	// agent-sandbox's shared NetworkPolicy and public resolvers.
	template := object("SandboxTemplate", "tpl", map[string]any{
		"networkPolicyManagement": "Unmanaged",
		"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "agent", "image": "ghcr.io/caliban-ai/caliban:test"}},
		}},
	})
	pool := object("SandboxWarmPool", "pool", map[string]any{
		"replicas":           int64(1),
		"sandboxTemplateRef": map[string]any{"name": "tpl"},
	})
	if err := cluster.Apply(ctx, ns, template, pool); err != nil {
		t.Fatal(err)
	}

	var warm string
	framework.Eventually(t, startTimeout, func() error {
		got, err := cluster.Dynamic.Resource(ext("sandboxwarmpools")).Namespace(ns).Get(ctx, "pool", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ready, _, _ := unstructured.NestedInt64(got.Object, "status", "readyReplicas"); ready != 1 {
			return fmt.Errorf("the pool has %d ready Sandboxes, want 1", ready)
		}
		sandboxes, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(sandboxes.Items) != 1 {
			return fmt.Errorf("%d Sandboxes, want the pool's one", len(sandboxes.Items))
		}
		warm = sandboxes.Items[0].GetName()
		return nil
	})

	if err := cluster.Apply(ctx, ns, object("SandboxClaim", "claim", map[string]any{
		"warmPoolRef": map[string]any{"name": "pool"},
	})); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, startTimeout, func() error {
		got, err := cluster.Dynamic.Resource(ext("sandboxclaims")).Namespace(ns).Get(ctx, "claim", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if name, _, _ := unstructured.NestedString(got.Object, "status", "sandbox", "name"); name != warm {
			return fmt.Errorf("the claim has Sandbox %q, want the pool's %q", name, warm)
		}
		if !framework.ConditionTrue(got, "Ready") {
			return fmt.Errorf("the claim is not Ready: %v", got.Object["status"])
		}
		return nil
	})
	sandbox, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Get(ctx, warm, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sandbox.GetLabels()["agents.x-k8s.io/launch-type"]; got != "warm" {
		t.Errorf("the adopted Sandbox has launch-type %q, want warm", got)
	}
	owner := metav1.GetControllerOf(sandbox)
	if owner == nil || owner.Kind != "SandboxClaim" || owner.Name != "claim" {
		t.Errorf("the adopted Sandbox is controlled by %+v, want the claim", owner)
	}
}
