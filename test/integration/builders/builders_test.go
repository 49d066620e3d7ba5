// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package builders_test applies what the child builders render to a real
// kube-apiserver: the Sandbox survives strict server-side apply with nothing
// pruned, the NetworkPolicy and ServiceAccount apply through the typed
// clients and read back unchanged, and the pod agent-sandbox would create
// from the Sandbox passes Pod Security "restricted" with default settings
// and fails it when seccomp is Unconfined. No controller runs here.
package builders_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) { framework.Main(m, &cluster) }

var sandboxes = sandboxv1beta1.SchemeGroupVersion.WithResource("sandboxes")

func TestTheRenderedSandboxAppliesWithNothingPruned(t *testing.T) {
	tests := map[string]struct {
		taskName string
		scenario scenario
	}{
		"default settings and a minimal workspace": {taskName: "refactor-auth", scenario: minimalScenario()},
		"every feature":           {taskName: "refactor-auth", scenario: everyFeatureScenario("gvisor")},
		"a long dotted task name": {taskName: "7" + strings.Repeat("team.", 11) + "fix-login-1234", scenario: minimalScenario()},
		"resources cleared in the settings": {taskName: "refactor-auth", scenario: func() scenario {
			s := minimalScenario()
			s.settings.CalibandResources = corev1.ResourceRequirements{}
			return s
		}()},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ns := cluster.Namespace(t, nil)
			owner := createTask(t, ns, test.taskName, test.scenario.task)

			u, err := framework.Unstructured(builders.BuildSandbox(owner, test.scenario.pin, test.scenario.settings))
			if err != nil {
				t.Fatal(err)
			}
			want, err := framework.SandboxOf(u)
			if err != nil {
				t.Fatal(err)
			}
			body, err := u.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			// Strict validation: the server names any field its schema does
			// not know instead of silently pruning it.
			applied, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Patch(ctx, want.Name, types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: fieldManager, Force: new(true), FieldValidation: "Strict"})
			if err != nil {
				t.Fatalf("server-side apply: %v", err)
			}
			if !appliedBy(applied.GetManagedFields(), fieldManager) {
				t.Errorf("managed fields = %+v, want an Apply entry for %s", applied.GetManagedFields(), fieldManager)
			}

			readBack, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := framework.SandboxOf(readBack)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
				t.Errorf("spec after the round trip (-sent +stored):\n%s", diff)
			}
			// The same in the generic form, which also shows a field the Go
			// view would not declare. agent-sandbox's CRD defaults
			// shutdownPolicy (to Retain) on every Sandbox: a field added by
			// the schema's default, not one the operator sent.
			stored, _ := readBack.Object["spec"].(map[string]any)
			if stored["shutdownPolicy"] != "Retain" {
				t.Errorf("spec.shutdownPolicy %v, want agent-sandbox's default Retain", stored["shutdownPolicy"])
			}
			delete(stored, "shutdownPolicy")
			if diff := cmp.Diff(u.Object["spec"], readBack.Object["spec"]); diff != "" {
				t.Errorf("spec as JSON after the round trip (-sent +stored):\n%s", diff)
			}
			if diff := cmp.Diff(want.Labels, got.Labels); diff != "" {
				t.Errorf("labels (-sent +stored):\n%s", diff)
			}
			if diff := cmp.Diff(want.OwnerReferences, got.OwnerReferences); diff != "" {
				t.Errorf("owner references (-sent +stored):\n%s", diff)
			}
			if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != owner.UID {
				t.Errorf("owner references = %+v, want the created task's UID %s", got.OwnerReferences, owner.UID)
			}

			// A second identical apply is a no-op: nothing the operator sends
			// is rewritten by the server into something else.
			again, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Patch(ctx, want.Name, types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: fieldManager, Force: new(true), FieldValidation: "Strict"})
			if err != nil {
				t.Fatalf("second apply: %v", err)
			}
			if again.GetGeneration() != applied.GetGeneration() {
				t.Errorf("generation moved from %d to %d on an identical apply", applied.GetGeneration(), again.GetGeneration())
			}
		})
	}
}

func TestTheRenderedNetworkPolicyAppliesAndReadsBack(t *testing.T) {
	tests := map[string]struct {
		scenario scenario
		env      map[string]string
	}{
		"default settings, no workspace egress":    {scenario: minimalScenario()},
		"an egress allow-list with ports and IPv6": {scenario: everyFeatureScenario("")},
		"an empty allow-list (DNS only)": {scenario: func() scenario {
			s := minimalScenario()
			s.pin.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{}}
			return s
		}()},
		"an allow-list around link-local, which it leaves out, IPv4 and IPv6": {scenario: func() scenario {
			s := minimalScenario()
			s.pin.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{
				{CIDR: "0.0.0.0/0", Ports: []int32{443}}, {CIDR: "169.0.0.0/8"}, {CIDR: "::/0"}, {CIDR: "fe00::/8", Ports: []int32{22}},
			}}
			return s
		}()},
		// From before the Workspace refused them: the apiserver refuses an
		// IPv4-mapped ipBlock, so rendering one would leave the task
		// without a NetworkPolicy; the renderer drops it.
		"a pin with IPv4-mapped entries, which it leaves out": {scenario: func() scenario {
			s := minimalScenario()
			s.pin.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{
				{CIDR: "::ffff:169.254.169.254/128", Ports: []int32{80}}, {CIDR: "::ffff:0:0/96"}, {CIDR: "10.0.0.0/8"},
			}}
			return s
		}()},
		"DNS in another namespace, every pod of it": {scenario: func() scenario {
			s := minimalScenario()
			s.settings.DNSNamespace = "dns-system"
			s.settings.DNSPodSelector = nil
			return s
		}()},
		"ingress narrowed to a namespace and pod selector": {scenario: func() scenario {
			s := minimalScenario()
			s.settings.IngressNamespace = "prospero"
			s.settings.IngressPodSelector = map[string]string{"app.kubernetes.io/name": "prospero"}
			return s
		}()},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ns := cluster.Namespace(t, nil)
			owner := createTask(t, ns, "refactor-auth", test.scenario.task)

			apply := builders.BuildNetworkPolicy(owner, test.scenario.pin, test.scenario.settings)
			want := convert[networkingv1.NetworkPolicy](t, apply)
			applied, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Apply(ctx, apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			if !appliedBy(applied.ManagedFields, fieldManager) {
				t.Errorf("managed fields = %+v, want an Apply entry for %s", applied.ManagedFields, fieldManager)
			}
			got, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, *apply.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
				t.Errorf("spec (-sent +stored):\n%s", diff)
			}
			if diff := cmp.Diff(want.Labels, got.Labels); diff != "" {
				t.Errorf("labels (-sent +stored):\n%s", diff)
			}
			if diff := cmp.Diff(want.OwnerReferences, got.OwnerReferences); diff != "" {
				t.Errorf("owner references (-sent +stored):\n%s", diff)
			}
			if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != owner.UID {
				t.Errorf("owner references = %+v, want the created task's UID %s", got.OwnerReferences, owner.UID)
			}
		})
	}
}

func TestTheRenderedServiceAccountAppliesAndReadsBack(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, nil)
	owner := createTask(t, ns, "refactor-auth", minimalScenario().task)

	apply := builders.BuildServiceAccount(owner)
	want := convert[corev1.ServiceAccount](t, apply)
	applied, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Apply(ctx, apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if !appliedBy(applied.ManagedFields, fieldManager) {
		t.Errorf("managed fields = %+v, want an Apply entry for %s", applied.ManagedFields, fieldManager)
	}
	got, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, *apply.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.AutomountServiceAccountToken == nil || *got.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken = %v, want false", got.AutomountServiceAccountToken)
	}
	if diff := cmp.Diff(want.Labels, got.Labels); diff != "" {
		t.Errorf("labels (-sent +stored):\n%s", diff)
	}
	if diff := cmp.Diff(want.OwnerReferences, got.OwnerReferences); diff != "" {
		t.Errorf("owner references (-sent +stored):\n%s", diff)
	}
	if len(got.Secrets) != 0 || len(got.ImagePullSecrets) != 0 {
		t.Errorf("secrets = %v, imagePullSecrets = %v, want none", got.Secrets, got.ImagePullSecrets)
	}
}

// podFromSandbox is the pod agent-sandbox creates for a Sandbox
// (docs/crd-reference.md#what-agent-sandbox-creates-from-the-sandbox): named
// after the Sandbox, with the template's labels and spec, and one volume per
// claim template, named after the template, whose claim is
// "<template>-<sandbox>".
func podFromSandbox(sb *sandboxv1beta1.Sandbox) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: sb.Name, Namespace: sb.Namespace, Labels: sb.Spec.PodTemplate.Metadata.Labels},
		Spec:       *sb.Spec.PodTemplate.Spec.DeepCopy(),
	}
	for _, vct := range sb.Spec.VolumeClaimTemplates {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name: vct.Metadata.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: vct.Metadata.Name + "-" + sb.Name,
			}},
		})
	}
	return pod
}

// docs/crd-reference.md#the-sandbox-and-the-agent-pod: the rendered pod passes
// the Pod Security Standard "restricted" profile with default settings. The
// Unconfined case proves the namespace really enforces the profile.
func TestTheRenderedPodPassesPodSecurityRestricted(t *testing.T) {
	tests := map[string]struct {
		// inputs
		scenario scenario
		seccomp  string // CALIBAN_AGENT_SECCOMP_PROFILE; "" leaves it unset
		// expected
		admitted bool
	}{
		"default settings and a minimal workspace are admitted": {scenario: minimalScenario(), admitted: true},
		"every feature with default settings is admitted":       {scenario: everyFeatureScenario("caliban-it-runc"), admitted: true},
		"an Unconfined seccomp profile is rejected":             {scenario: minimalScenario(), seccomp: "Unconfined", admitted: false},
	}
	ctx := context.Background()
	// The every-feature pod names a RuntimeClass; the RuntimeClass admission
	// plugin rejects a pod whose class does not exist.
	if _, err := cluster.Kube.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "caliban-it-runc"}, Handler: "runc",
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the RuntimeClass: %v", err)
	}
	t.Cleanup(func() {
		_ = cluster.Kube.NodeV1().RuntimeClasses().Delete(context.Background(), "caliban-it-runc", metav1.DeleteOptions{})
	})

	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			ns := cluster.Namespace(t, map[string]string{
				"pod-security.kubernetes.io/enforce":         "restricted",
				"pod-security.kubernetes.io/enforce-version": "latest",
			})
			s := test.scenario.settings
			if test.seccomp != "" {
				parsed, err := config.Parse(func(k string) (string, bool) {
					if k == config.EnvAgentSeccompProfile {
						return test.seccomp, true
					}
					return "", false
				}, ns)
				if err != nil {
					t.Fatal(err)
				}
				s = parsed.AgentSettings
			}
			owner := createTask(t, ns, "refactor-auth", test.scenario.task)
			// The ServiceAccount admission plugin rejects a pod whose
			// ServiceAccount does not exist.
			if _, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Apply(ctx, builders.BuildServiceAccount(owner),
				metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
				t.Fatalf("applying the ServiceAccount: %v", err)
			}

			sb, err := framework.SandboxOf(builders.BuildSandbox(owner, test.scenario.pin, s))
			if err != nil {
				t.Fatal(err)
			}
			pod := podFromSandbox(sb)
			_, err = cluster.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			switch {
			case test.admitted && err != nil:
				t.Errorf("the pod was rejected: %v", err)
			case !test.admitted && err == nil:
				t.Error("the pod was admitted; want Pod Security restricted to reject it")
			case !test.admitted && !(apierrors.IsForbidden(err) && strings.Contains(err.Error(), "seccompProfile")):
				t.Errorf("rejected with %v; want a Pod Security violation naming seccompProfile", err)
			case !test.admitted:
				t.Logf("rejected as expected: %v", err)
			}
		})
	}
}
