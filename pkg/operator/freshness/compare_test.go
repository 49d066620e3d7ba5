// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package freshness

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

func TestHolds(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := intstr.FromInt32(443)
	policy := func(mods ...func(*networkingv1.NetworkPolicy)) *networkingv1.NetworkPolicy {
		np := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "t-netpol", Labels: map[string]string{"app": "caliband"}},
			Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &port}}}},
			},
		}
		for _, m := range mods {
			m(np)
		}
		return np
	}
	// policyAC is policy() as the builders render it, an apply configuration.
	policyAC := func(mods ...func(*networkingv1ac.NetworkPolicyApplyConfiguration)) *networkingv1ac.NetworkPolicyApplyConfiguration {
		np := networkingv1ac.NetworkPolicy("t-netpol", "").WithLabels(map[string]string{"app": "caliband"}).
			WithSpec(networkingv1ac.NetworkPolicySpec().WithPolicyTypes(networkingv1.PolicyTypeEgress).
				WithEgress(networkingv1ac.NetworkPolicyEgressRule().WithPorts(networkingv1ac.NetworkPolicyPort().WithPort(port))))
		for _, m := range mods {
			m(np)
		}
		return np
	}
	container := func(mods ...func(*corev1.Container)) *corev1.Container {
		c := &corev1.Container{Name: "caliband", Image: "caliband:1"}
		for _, m := range mods {
			m(c)
		}
		return c
	}
	tests := map[string]struct {
		live, desired any
		want          bool
	}{
		"an object holds itself": {
			live: policy(), desired: policy(), want: true,
		},
		"what the server adds (defaults, identity, other labels) does not matter": {
			live: policy(func(np *networkingv1.NetworkPolicy) {
				np.UID, np.ResourceVersion, np.Labels["team"] = "u1", "7", "a"
				np.Spec.Egress[0].Ports[0].Protocol = &tcp
			}),
			desired: policy(), want: true,
		},
		"a changed scalar is seen": {
			live:    policy(func(np *networkingv1.NetworkPolicy) { np.Labels["app"] = "other" }),
			desired: policy(),
		},
		"a missing map key is seen": {
			live:    policy(func(np *networkingv1.NetworkPolicy) { np.Labels = nil }),
			desired: policy(),
		},
		"a list of another length is seen": {
			live: policy(func(np *networkingv1.NetworkPolicy) {
				np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{})
			}),
			desired: policy(),
		},
		"a value behind a pointer is compared even when it differs only from a default": {
			live:    policy(func(np *networkingv1.NetworkPolicy) { np.Spec.Egress[0].Ports[0].Protocol = &tcp }),
			desired: policy(func(np *networkingv1.NetworkPolicy) { np.Spec.Egress[0].Ports[0].Protocol = &udp }),
		},
		"a pointer the live object lacks is seen": {
			live:    policy(),
			desired: policy(func(np *networkingv1.NetworkPolicy) { np.Spec.Egress[0].Ports[0].Protocol = &tcp }),
		},
		"a false behind a pointer is a value": {
			live:    &corev1.ServiceAccount{AutomountServiceAccountToken: new(true)},
			desired: &corev1.ServiceAccount{AutomountServiceAccountToken: new(false)},
		},
		"a false behind a pointer the live object lacks is seen": {
			live:    &corev1.ServiceAccount{},
			desired: &corev1.ServiceAccount{AutomountServiceAccountToken: new(false)},
		},
		"an empty list the apply would not send is not compared": {
			live:    policy(func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}} }),
			desired: policy(func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{} }),
			want:    true,
		},
		"quantities compare by value, not by spelling": {
			live: container(func(c *corev1.Container) {
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1024Mi")}
			}),
			desired: container(func(c *corev1.Container) {
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
			}),
			want: true,
		},
		"a changed quantity is seen": {
			live: container(func(c *corev1.Container) {
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
			}),
			desired: container(func(c *corev1.Container) {
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
			}),
		},
		"an int-or-string port compares as a whole": {
			live:    policy(func(np *networkingv1.NetworkPolicy) { np.Spec.Egress[0].Ports[0].Port = new(intstr.FromString("443")) }),
			desired: policy(),
		},
		"objects of different types never hold": {
			live: &corev1.ServiceAccount{}, desired: &corev1.Secret{},
		},
		"an apply configuration holds in the object it built": {
			live:    policy(func(np *networkingv1.NetworkPolicy) { np.UID, np.Labels["team"] = "u1", "a" }),
			desired: policyAC(), want: true,
		},
		"an apply configuration's type meta is not asked of the cache": {
			live:    policy(),
			desired: policyAC().WithKind("NetworkPolicy").WithAPIVersion("networking.k8s.io/v1"), want: true,
		},
		"a value an apply configuration sets is compared through its pointer": {
			live:    policy(func(np *networkingv1.NetworkPolicy) { np.Spec.Egress[0].Ports[0].Protocol = &tcp }),
			desired: policyAC(func(np *networkingv1ac.NetworkPolicyApplyConfiguration) { np.Spec.Egress[0].Ports[0].WithProtocol(udp) }),
		},
		"a list an apply configuration sets must match in length": {
			live: policy(),
			desired: policyAC(func(np *networkingv1ac.NetworkPolicyApplyConfiguration) {
				np.Spec.WithEgress(networkingv1ac.NetworkPolicyEgressRule())
			}),
		},
		"a label an apply configuration sets must be there": {
			live:    policy(func(np *networkingv1.NetworkPolicy) { np.Labels = nil }),
			desired: policyAC(),
		},
		"an owner reference is compared field by field, kind included": {
			live: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "caliban.caliban-ai.dev/v1alpha1", Kind: "Workspace", Name: "t", UID: "u1"},
			}}},
			desired: corev1ac.ServiceAccount("t", "ns").WithOwnerReferences(metav1ac.OwnerReference().
				WithAPIVersion("caliban.caliban-ai.dev/v1alpha1").WithKind("CalibanTask").WithName("t").WithUID("u1")),
		},
		"a false an apply configuration sets is a value": {
			live:    &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"}},
			desired: corev1ac.ServiceAccount("t", "ns").WithAutomountServiceAccountToken(false),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := holds(tc.live, tc.desired); got != tc.want {
				t.Errorf("holds = %v, want %v", got, tc.want)
			}
		})
	}
}

// BenchmarkHoldsSandbox is the check a Sandbox's watch event costs in the
// children's transform: the rendered apply configuration against the
// Sandbox the server holds after applying it.
func BenchmarkHoldsSandbox(b *testing.B) {
	task := pinnedTask()
	tr, err := New(config.DefaultAgentSettings(), func(metav1.Object) *calibanv1alpha1.CalibanTask { return task })
	if err != nil {
		b.Fatal(err)
	}
	want, _, err := tr.renderer.Sandbox(task, task.Status.ResolvedWorkspace, "")
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(want)
	if err != nil {
		b.Fatal(err)
	}
	live := &sandboxv1beta1.Sandbox{}
	if err := json.Unmarshal(body, live); err != nil {
		b.Fatal(err)
	}
	live.TypeMeta = metav1.TypeMeta{}
	want.Spec.OperatingMode = nil
	if !holds(live, want) {
		b.Fatal("the served Sandbox does not hold its own rendering")
	}
	b.ReportAllocs()
	for b.Loop() {
		holds(live, want)
	}
}
