package operator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := holds(tc.live, tc.desired); got != tc.want {
				t.Errorf("holds = %v, want %v", got, tc.want)
			}
		})
	}
}
