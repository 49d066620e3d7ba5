package builders

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// The ServiceAccount and NetworkPolicy are applied as applyconfigurations:
// what matters is the JSON the apiserver receives, so these tests decode the
// marshalled body and compare it with what
// docs/crd-reference.md#the-children-of-a-task and
// docs/crd-reference.md#networkpolicy require.

func fxOwnerRef(name string) map[string]any {
	return map[string]any{
		"apiVersion": "caliban.caliban-ai.dev/v1alpha1", "kind": "CalibanTask",
		"name": name, "uid": string(fxTaskUID), "controller": true, "blockOwnerDeletion": true,
	}
}

func fxLabelsMap(label string) map[string]any {
	return map[string]any{
		"app.kubernetes.io/managed-by": "caliban-operator",
		"app.kubernetes.io/name":       "caliband",
		"caliban.caliban-ai.dev/task":  label,
	}
}

func TestBuildServiceAccount(t *testing.T) {
	tests := map[string]struct {
		task *calibanv1alpha1.CalibanTask
		want map[string]any
	}{
		"a token-less, labelled, owned ServiceAccount and nothing else": {
			task: task("refactor-auth"),
			want: map[string]any{
				"apiVersion": "v1", "kind": "ServiceAccount",
				"metadata": map[string]any{
					"name": "refactor-auth-sa", "namespace": "team-a",
					"labels":          fxLabelsMap("refactor-auth"),
					"ownerReferences": []any{fxOwnerRef("refactor-auth")},
				},
				"automountServiceAccountToken": false,
			},
		},
		"a long dotted task name gets the safe names": {
			task: task(longDottedName),
			want: map[string]any{
				"apiVersion": "v1", "kind": "ServiceAccount",
				"metadata": map[string]any{
					"name": ServiceAccountName(longDottedName), "namespace": "team-a",
					"labels":          fxLabelsMap(TaskLabelValue(longDottedName)),
					"ownerReferences": []any{fxOwnerRef(longDottedName)},
				},
				"automountServiceAccountToken": false,
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(test.want, toMap(t, BuildServiceAccount(test.task))); diff != "" {
				t.Errorf("ServiceAccount apply body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildNetworkPolicyMetadata(t *testing.T) {
	got := toMap(t, BuildNetworkPolicy(task("refactor-auth"), pin(), settings()))
	if got["apiVersion"] != "networking.k8s.io/v1" || got["kind"] != "NetworkPolicy" {
		t.Errorf("apiVersion/kind = %v/%v", got["apiVersion"], got["kind"])
	}
	want := map[string]any{
		"name": "refactor-auth-netpol", "namespace": "team-a",
		"labels":          fxLabelsMap("refactor-auth"),
		"ownerReferences": []any{fxOwnerRef("refactor-auth")},
	}
	if diff := cmp.Diff(want, got["metadata"]); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	for k := range got {
		if k != "apiVersion" && k != "kind" && k != "metadata" && k != "spec" {
			t.Errorf("unexpected top-level field %q", k)
		}
	}
}

func tcpPort(p int32) networkingv1.NetworkPolicyPort {
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(p)
	return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &port}
}

func dnsRule() networkingv1.NetworkPolicyEgressRule {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	port := intstr.FromInt32(53)
	return networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{
		{Protocol: &udp, Port: &port}, {Protocol: &tcp, Port: &port},
	}}
}

func ingressRule(calibandPort, base, end int32, peer networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyIngressRule {
	window := tcpPort(base)
	window.EndPort = &end
	return []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{tcpPort(calibandPort), window},
		From:  []networkingv1.NetworkPolicyPeer{peer},
	}}
}

func TestBuildNetworkPolicyIngress(t *testing.T) {
	tests := map[string]struct {
		settings config.AgentSettings
		want     []networkingv1.NetworkPolicyIngressRule
	}{
		"by default any pod of the task's namespace may reach caliband and the agent window": {
			settings: settings(),
			want:     ingressRule(8443, 7100, 7999, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}),
		},
		"the ports follow the settings": {
			settings: settings(func(s *config.AgentSettings) { s.CalibandPort, s.AgentPortBase, s.AgentPortEnd = 9443, 20000, 20999 }),
			want:     ingressRule(9443, 20000, 20999, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}),
		},
		"a one-port window is still a range": {
			settings: settings(func(s *config.AgentSettings) { s.AgentPortBase, s.AgentPortEnd = 7100, 7100 }),
			want:     ingressRule(8443, 7100, 7100, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}),
		},
		"CALIBAN_INGRESS_POD_SELECTOR narrows the peer to those pods of the task's namespace": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "app=prospero,tier=control"}),
			want: ingressRule(8443, 7100, 7999, networkingv1.NetworkPolicyPeer{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "prospero", "tier": "control"}},
			}),
		},
		"CALIBAN_INGRESS_NAMESPACE moves the peer to that namespace, every pod": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_INGRESS_NAMESPACE": "prospero"}),
			want: ingressRule(8443, 7100, 7999, networkingv1.NetworkPolicyPeer{
				PodSelector:       &metav1.LabelSelector{},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "prospero"}},
			}),
		},
		"both narrow one peer: those pods in that namespace": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_INGRESS_NAMESPACE": "prospero", "CALIBAN_INGRESS_POD_SELECTOR": "app=prospero"}),
			want: ingressRule(8443, 7100, 7999, networkingv1.NetworkPolicyPeer{
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "prospero"}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "prospero"}},
			}),
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			np := convert[networkingv1.NetworkPolicy](t, BuildNetworkPolicy(task("refactor-auth"), pin(), test.settings))
			if diff := cmp.Diff(test.want, np.Spec.Ingress); diff != "" {
				t.Errorf("ingress (-want +got):\n%s", diff)
			}
		})
	}
}

// An empty podSelector must reach the apiserver as {} (every pod), not be
// dropped: a peer with no selector at all would be invalid.
func TestBuildNetworkPolicyDefaultPeerIsAnEmptySelector(t *testing.T) {
	m := toMap(t, BuildNetworkPolicy(task("refactor-auth"), pin(), settings()))
	peer := m["spec"].(map[string]any)["ingress"].([]any)[0].(map[string]any)["from"].([]any)[0]
	if diff := cmp.Diff(map[string]any{"podSelector": map[string]any{}}, peer); diff != "" {
		t.Errorf("ingress peer (-want +got):\n%s", diff)
	}
}

func TestBuildNetworkPolicyEgress(t *testing.T) {
	tests := map[string]struct {
		pin  *calibanv1alpha1.ResolvedWorkspace
		want []networkingv1.NetworkPolicyEgressRule
	}{
		"no workspace egress: DNS, then allow-all": {
			pin:  pin(),
			want: []networkingv1.NetworkPolicyEgressRule{dnsRule(), {}},
		},
		"an empty allow list: DNS only": {
			pin:  pin(pinEgress()),
			want: []networkingv1.NetworkPolicyEgressRule{dnsRule()},
		},
		"an egress with no allow field at all: DNS only": {
			pin:  pin(func(w *calibanv1alpha1.ResolvedWorkspace) { w.Egress = &calibanv1alpha1.Egress{} }),
			want: []networkingv1.NetworkPolicyEgressRule{dnsRule()},
		},
		"one rule per allow entry, in order, with TCP ports when listed": {
			pin: pin(pinEgress(
				calibanv1alpha1.EgressRule{CIDR: "10.0.0.0/8", Ports: []int32{443, 8080}},
				calibanv1alpha1.EgressRule{CIDR: "2001:db8::/32"},
				calibanv1alpha1.EgressRule{CIDR: "192.168.1.7/32", Ports: []int32{22}},
			)),
			want: []networkingv1.NetworkPolicyEgressRule{
				dnsRule(),
				{
					To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}},
					Ports: []networkingv1.NetworkPolicyPort{tcpPort(443), tcpPort(8080)},
				},
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "2001:db8::/32"}}}},
				{
					To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.1.7/32"}}},
					Ports: []networkingv1.NetworkPolicyPort{tcpPort(22)},
				},
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			np := convert[networkingv1.NetworkPolicy](t, BuildNetworkPolicy(task("refactor-auth"), test.pin, settings()))
			if diff := cmp.Diff(test.want, np.Spec.Egress); diff != "" {
				t.Errorf("egress (-want +got):\n%s", diff)
			}
		})
	}
}

// The allow-all rule must reach the apiserver as {} (an empty rule allows
// every destination); an absent rule would mean DNS only.
func TestBuildNetworkPolicyAllowAllIsAnEmptyRule(t *testing.T) {
	m := toMap(t, BuildNetworkPolicy(task("refactor-auth"), pin(), settings()))
	egress := m["spec"].(map[string]any)["egress"].([]any)
	if len(egress) != 2 {
		t.Fatalf("egress = %v, want DNS and allow-all", egress)
	}
	if diff := cmp.Diff(map[string]any{}, egress[1]); diff != "" {
		t.Errorf("allow-all rule (-want +got):\n%s", diff)
	}
}

func TestBuildNetworkPolicySelectsThePodAndBothDirections(t *testing.T) {
	for name, taskName := range map[string]string{"a plain name": "refactor-auth", "a long dotted name": longDottedName} {
		t.Run(name, func(t *testing.T) {
			tk := task(taskName)
			np := convert[networkingv1.NetworkPolicy](t, BuildNetworkPolicy(tk, pin(), settings()))
			podLabels := BuildSandbox(tk, pin(), settings()).Spec.PodTemplate.Metadata.Labels
			wantSelector := metav1.LabelSelector{MatchLabels: podLabels}
			if diff := cmp.Diff(wantSelector, np.Spec.PodSelector); diff != "" {
				t.Errorf("podSelector (-want the pod's labels +got):\n%s", diff)
			}
			wantTypes := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
			if diff := cmp.Diff(wantTypes, np.Spec.PolicyTypes); diff != "" {
				t.Errorf("policyTypes (-want +got):\n%s", diff)
			}
		})
	}
}
