// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// agent-sandbox's controller as its own manifests and chart install it,
// the identity manifests/admission lets relabel agent pods.
const (
	agentSandboxNamespace = "agent-sandbox-system"
	agentSandboxUser      = "system:serviceaccount:" + agentSandboxNamespace + ":agent-sandbox-controller"
)

// TestTheAdmissionComponentGuardsAnAgentPodsIsolationLabels: with the
// component, nobody but agent-sandbox's controller and the operator (and
// system:masters) changes a label an agent pod's NetworkPolicies select it
// by, through the pod or its status, on a task's pod and on a warm pool's,
// claimed or not; every other label, the annotations, the status and the
// owner references stay anyone's who may patch pods, and agent-sandbox
// still relabels a warm pod a claim adopts. The pods are made here, as an
// administrator: kwok runs none.
//
// Not parallel, as TestTheAdmissionComponentGatesUnattendedWork.
func TestTheAdmissionComponentGuardsAnAgentPodsIsolationLabels(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	const ws = "ws"
	task := &calibanv1alpha1.CalibanTask{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: ns, UID: "0b9c2d7e-5f41-4a8e-9d3c-6e2f1a7b8c90"},
		Spec: calibanv1alpha1.CalibanTaskSpec{WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: ws}}}
	isolation := isolationLabelKeys(t, task)
	t.Logf("the isolation labels: %v", isolation)

	// bob may write pods and their status in the namespace, as may the two
	// identities the component lets through (the operator's RBAC has no
	// pods: this is the policy's answer, not its RBAC's). The garbage
	// collector has its own.
	podWriter := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}},
	}
	allow(t, ns, "pod-writer", podWriter, rbacv1.Subject{Kind: rbacv1.UserKind, Name: bob},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "agent-sandbox-controller", Namespace: agentSandboxNamespace},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: framework.OperatorServiceAccount, Namespace: framework.OperatorNamespace})
	asBob := kubeAs(t, bob)
	asAgentSandbox := kubeAs(t, agentSandboxUser, "system:serviceaccounts", "system:serviceaccounts:"+agentSandboxNamespace)
	asOperator := kubeAs(t, operatorUser, "system:serviceaccounts", "system:serviceaccounts:"+framework.OperatorNamespace)
	asGarbageCollector := kubeAs(t, "system:serviceaccount:kube-system:generic-garbage-collector", "system:serviceaccounts", "system:serviceaccounts:kube-system")

	// A task's pod, and a warm pool's, unclaimed and claimed, labelled as
	// agent-sandbox labels them; and a pod that is no agent's.
	owner, err := cluster.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sandboxHash := map[string]string{"agents.x-k8s.io/sandbox-name-hash": "81155143", "team": "a"}
	pods := map[string]map[string]string{
		"cold":      merged(builders.TaskLabels(task), sandboxHash),
		"unclaimed": merged(builders.WarmPoolLabels(ws), map[string]string{builders.LabelWarmPoolSandbox: "7d1f0c2a"}, sandboxHash),
		"claimed":   merged(builders.WarmPoolLabels(ws), map[string]string{builders.LabelClaimUID: "5e0f3b1c-8d2a-4c6e-9f7b-1a2b3c4d5e6f"}, sandboxHash),
		"plain":     {"team": "a"},
	}
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		pod := agentPodFixture(name, pods[name])
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
		if _, err := cluster.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dryRun := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}

	// So that a refusal below is the component's, not the test's RBAC. A
	// component an earlier test removed may linger for a moment.
	t.Run("without the component, whoever may patch pods takes the task label off an agent pod", func(t *testing.T) {
		framework.Eventually(t, settleTimeout, func() error {
			return patchLabels(asBob, ns, "cold", map[string]any{builders.LabelTask: nil}, "", dryRun)
		})
	})

	component := installAdmission(t)
	waitInForce(t, "caliban-pod-labels", func() error {
		err := patchLabels(asBob, ns, "cold", map[string]any{builders.LabelTask: nil}, "", dryRun)
		return framework.IsForbidden(err, "metadata.labels["+builders.LabelTask+"]")
	})
	t.Run("the API server finds nothing to warn about in the component's CEL", func(t *testing.T) {
		checkTypeChecking(t)
	})

	mayOnly := "only agent-sandbox's controller (" + agentSandboxUser + ") and the operator (" + operatorUser + ") may"
	t.Run("bob may not take off, put on or change an isolation label of an agent pod, through the pod or its status", func(t *testing.T) {
		for _, name := range []string{"cold", "unclaimed", "claimed"} {
			for _, key := range isolation {
				edits := map[string]map[string]any{}
				if _, ok := pods[name][key]; ok {
					edits["taking off"] = map[string]any{key: nil}
					edits["changing"] = map[string]any{key: "forged"}
				} else {
					edits["putting on"] = map[string]any{key: "forged"}
				}
				for what, edit := range edits {
					for _, sub := range []string{"", "status"} {
						err := patchLabels(asBob, ns, name, edit, sub, metav1.PatchOptions{})
						if err := framework.IsForbidden(err, "metadata.labels["+key+"]: an agent pod's NetworkPolicies select it by this label; bob may not change it; "+mayOnly); err != nil {
							t.Errorf("%s %s on pod %s through pods%s: %v", what, key, name, strings.TrimSuffix("/"+sub, "/"), err)
						}
					}
				}
			}
		}
		// A request that changes several names each.
		err := patchLabels(asBob, ns, "cold", map[string]any{builders.LabelManagedBy: nil, builders.LabelTask: nil, "team": nil}, "", metav1.PatchOptions{})
		if err := framework.IsForbidden(err, "metadata.labels["+builders.LabelManagedBy+"], metadata.labels["+builders.LabelTask+"]: "+
			"an agent pod's NetworkPolicies select it by these labels; bob may not change them; "+mayOnly); err != nil {
			t.Errorf("taking off two isolation labels and another: %v", err)
		}
		// A server-side apply is an update too, with force or not.
		apply, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "claimed", "labels": map[string]any{builders.LabelClaimUID: "forged"}}})
		if err != nil {
			t.Fatal(err)
		}
		force := true
		_, err = asBob.CoreV1().Pods(ns).Patch(ctx, "claimed", types.ApplyYAMLPatchType, apply, metav1.PatchOptions{FieldManager: "bob", Force: &force})
		if err := framework.IsForbidden(err, "metadata.labels["+builders.LabelClaimUID+"]", "bob may not change it"); err != nil {
			t.Errorf("applying another claim's UID: %v", err)
		}
		// A pod does not become an agent pod by a label either.
		err = patchLabels(asBob, ns, "plain", map[string]any{builders.LabelManagedBy: builders.FieldManager}, "", metav1.PatchOptions{})
		if err := framework.IsForbidden(err, "metadata.labels["+builders.LabelManagedBy+"]", "bob may not change it"); err != nil {
			t.Errorf("labelling a pod managed by the operator: %v", err)
		}
		for _, name := range slices.Sorted(maps.Keys(pods)) {
			got, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(pods[name], got.Labels); diff != "" {
				t.Errorf("pod %s's labels after the refusals (-want +got):\n%s", name, diff)
			}
		}
	})

	t.Run("bob may change every other label, the annotations and the status; the garbage collector the owners", func(t *testing.T) {
		if err := patchLabels(asBob, ns, "cold", map[string]any{"team": nil, "reviewed-by": bob}, "", metav1.PatchOptions{}); err != nil {
			t.Errorf("bob's own labels on an agent pod: %v", err)
		}
		if _, err := asBob.CoreV1().Pods(ns).Patch(ctx, "claimed", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"reviewed-by":"bob"}}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("bob annotating an agent pod: %v", err)
		}
		// As the kubelet does: the status, never the labels.
		if _, err := asBob.CoreV1().Pods(ns).Patch(ctx, "unclaimed", types.MergePatchType,
			[]byte(`{"status":{"message":"probed by bob"}}`), metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("bob writing an agent pod's status: %v", err)
		}
		// A pod that is no agent's keeps every label its writers'.
		if err := patchLabels(asBob, ns, "plain", map[string]any{builders.LabelName: "caliband", builders.LabelTask: "mine"}, "", metav1.PatchOptions{}); err != nil {
			t.Errorf("bob labelling a pod that is no agent's: %v", err)
		}
		// A new pod's labels only narrow what it may do.
		created := agentPodFixture("bobs", pods["cold"])
		if _, err := asBob.CoreV1().Pods(ns).Create(ctx, created, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("bob creating a pod labelled as an agent's: %v", err)
		}
		// The patch the garbage collector sends when an owner goes.
		for _, name := range []string{"cold", "claimed"} {
			gc := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, owner.UID)
			if _, err := asGarbageCollector.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(gc), metav1.PatchOptions{}); err != nil {
				t.Errorf("the garbage collector removing pod %s's owner: %v", name, err)
			}
		}
		got, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, "cold", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Labels["reviewed-by"] != bob || len(got.OwnerReferences) != 0 {
			t.Errorf("pod cold has labels %v and owners %v after bob's and the garbage collector's patches", got.Labels, got.OwnerReferences)
		}
	})

	t.Run("agent-sandbox's controller relabels a warm pod a claim adopts, and the operator may relabel too", func(t *testing.T) {
		claimUID := "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
		if err := patchLabels(asAgentSandbox, ns, "unclaimed", map[string]any{builders.LabelWarmPoolSandbox: nil, builders.LabelClaimUID: claimUID}, "", metav1.PatchOptions{}); err != nil {
			t.Errorf("agent-sandbox adopting a warm pod: %v", err)
		}
		if err := patchLabels(asAgentSandbox, ns, "cold", map[string]any{builders.LabelTask: "renamed"}, "", metav1.PatchOptions{}); err != nil {
			t.Errorf("agent-sandbox bringing a pod's labels to its template's: %v", err)
		}
		if err := patchLabels(asOperator, ns, "cold", map[string]any{builders.LabelTaskUID: nil}, "", metav1.PatchOptions{}); err != nil {
			t.Errorf("the operator relabelling an agent pod: %v", err)
		}
		got, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, "unclaimed", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, warm := got.Labels[builders.LabelWarmPoolSandbox]; warm || got.Labels[builders.LabelClaimUID] != claimUID {
			t.Errorf("the adopted pod's labels are %v", got.Labels)
		}
		if err := patchLabels(cluster.Kube, ns, "claimed", map[string]any{builders.LabelClaimUID: nil}, "", dryRun); err != nil {
			t.Errorf("a member of system:masters: %v", err)
		}
	})

	removeAdmission(t, component)
}

// isolationLabelKeys is every label key the operator's NetworkPolicies
// select agent pods by, or keep them out by as peers, as the builders
// render them for task, and the task UID: the labels the component must
// guard, sorted.
func isolationLabelKeys(t *testing.T, task *calibanv1alpha1.CalibanTask) []string {
	t.Helper()
	ws := &calibanv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: task.Spec.WorkspaceRef.Name, Namespace: task.Namespace}}
	pin := &calibanv1alpha1.ResolvedWorkspace{Provider: calibanv1alpha1.Provider{Name: "planner", Kind: "anthropic",
		CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: providerSecret, Key: providerKey}}}
	s := config.DefaultAgentSettings()
	warm, err := builders.RenderWarm(builders.PoolTask(ws), pin, s)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{builders.LabelTaskUID: true}
	selector := func(sel *metav1ac.LabelSelectorApplyConfiguration, withLabels bool) {
		if sel == nil {
			return
		}
		if withLabels {
			for k := range sel.MatchLabels {
				keys[k] = true
			}
		}
		for _, e := range sel.MatchExpressions {
			keys[*e.Key] = true
		}
	}
	for _, np := range []*networkingv1ac.NetworkPolicyApplyConfiguration{
		builders.BuildNetworkPolicy(task, pin, s),
		builders.BuildWarmNetworkPolicy(task, pin, s, "claim-uid"),
		builders.BuildWarmIsolationPolicy(ws),
		builders.BuildWarmUnclaimedPolicy(ws, warm),
	} {
		selector(np.Spec.PodSelector, true)
		// An ingress peer's labels are the admitted pods' (prospero's, as
		// configured); its expressions keep agent pods out.
		for _, rule := range np.Spec.Ingress {
			for _, peer := range rule.From {
				selector(peer.PodSelector, false)
			}
		}
	}
	// A policy made before the task-UID label selects the pod by the
	// task's labels until it is moved to the UID (ADR 0029).
	selector(metav1ac.LabelSelector().WithMatchLabels(builders.TaskLabels(task)), true)
	if len(keys) < 7 {
		t.Fatalf("the NetworkPolicies select agent pods by %v only", keys)
	}
	return slices.Sorted(maps.Keys(keys))
}

// agentPodFixture is a pod that passes Pod Security restricted, labelled
// labels. No node runs it.
func agentPodFixture(name string, labels map[string]string) *corev1.Pod {
	no, yes := false, true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: maps.Clone(labels)},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "caliband", Image: "registry.example.com/caliband:test",
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
}

// patchLabels merge-patches a pod's labels through client, through the
// pod or its subresource sub; a nil value takes the label off.
func patchLabels(client kubernetes.Interface, ns, name string, labels map[string]any, sub string, opts metav1.PatchOptions) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	var subresources []string
	if sub != "" {
		subresources = []string{sub}
	}
	_, err = client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, body, opts, subresources...)
	return err
}

// kubeAs is a Kubernetes client that the API server authenticates as
// user, a member of groups (and system:authenticated).
func kubeAs(t *testing.T, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// merged is the union of label sets, later ones winning.
func merged(sets ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, s := range sets {
		maps.Copy(out, s)
	}
	return out
}
