// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
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
		LabelTaskUID:                   string(fxTaskUID),
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

// everyTCPPort is the ports of an allow entry that lists none: TCP, every
// port, and no other protocol.
func everyTCPPort() []networkingv1.NetworkPolicyPort {
	tcp := corev1.ProtocolTCP
	return []networkingv1.NetworkPolicyPort{{Protocol: &tcp}}
}

// dnsRule is the DNS egress rule: UDP and TCP 53 to the pods sel selects
// (every pod when nil) in namespace ns.
func dnsRule(ns string, sel map[string]string) networkingv1.NetworkPolicyEgressRule {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	port := intstr.FromInt32(53)
	return networkingv1.NetworkPolicyEgressRule{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &port}, {Protocol: &tcp, Port: &port}},
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: sel},
		}},
	}
}

// defaultDNSRule is dnsRule under the default settings.
func defaultDNSRule() networkingv1.NetworkPolicyEgressRule {
	return dnsRule("kube-system", map[string]string{"k8s-app": "kube-dns"})
}

// allowAllRules are what a pin without egress gets after DNS: every
// address but link-local, and every pod.
func allowAllRules() []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"169.254.0.0/16"}}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: []string{"fe80::/10"}}},
		}},
		{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}},
	}
}

// notAnAgent is the requirement every ingress peer carries: no pod with a
// task label, that is no agent pod, is admitted.
var notAnAgent = []metav1.LabelSelectorRequirement{{Key: "caliban.caliban-ai.dev/task", Operator: metav1.LabelSelectorOpDoesNotExist}}

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
		"by default any pod of the task's namespace but an agent may reach caliband and the agent window": {
			settings: settings(),
			want:     ingressRule(8443, 7100, 7999, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchExpressions: notAnAgent}}),
		},
		"the ports follow the settings": {
			settings: settings(func(s *config.AgentSettings) { s.CalibandPort, s.AgentPortBase, s.AgentPortEnd = 9443, 20000, 20999 }),
			want:     ingressRule(9443, 20000, 20999, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchExpressions: notAnAgent}}),
		},
		"a one-port window is still a range": {
			settings: settings(func(s *config.AgentSettings) { s.AgentPortBase, s.AgentPortEnd = 7100, 7100 }),
			want:     ingressRule(8443, 7100, 7100, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchExpressions: notAnAgent}}),
		},
		"CALIBAN_INGRESS_POD_SELECTOR narrows the peer to those pods of the task's namespace, still no agent": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "app=prospero,tier=control"}),
			want: ingressRule(8443, 7100, 7999, networkingv1.NetworkPolicyPeer{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "prospero", "tier": "control"}, MatchExpressions: notAnAgent},
			}),
		},
		"a pod selector that agent pods match too still leaves them out": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "app.kubernetes.io/managed-by=caliban-operator"}),
			want: ingressRule(8443, 7100, 7999, networkingv1.NetworkPolicyPeer{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/managed-by": "caliban-operator"}, MatchExpressions: notAnAgent},
			}),
		},
		"CALIBAN_INGRESS_NAMESPACE moves the peer to that namespace, every pod but an agent": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_INGRESS_NAMESPACE": "prospero"}),
			want: ingressRule(8443, 7100, 7999, networkingv1.NetworkPolicyPeer{
				PodSelector:       &metav1.LabelSelector{MatchExpressions: notAnAgent},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "prospero"}},
			}),
		},
		"both narrow one peer: those pods in that namespace, no agent": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_INGRESS_NAMESPACE": "prospero", "CALIBAN_INGRESS_POD_SELECTOR": "app=prospero"}),
			want: ingressRule(8443, 7100, 7999, networkingv1.NetworkPolicyPeer{
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "prospero"}, MatchExpressions: notAnAgent},
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

// The requirement must reach the apiserver as written: DoesNotExist takes
// no values, and the selector has no matchLabels to hide behind.
func TestBuildNetworkPolicyDefaultPeerExcludesAgentPods(t *testing.T) {
	m := toMap(t, BuildNetworkPolicy(task("refactor-auth"), pin(), settings()))
	peer := m["spec"].(map[string]any)["ingress"].([]any)[0].(map[string]any)["from"].([]any)[0]
	want := map[string]any{"podSelector": map[string]any{
		"matchExpressions": []any{map[string]any{"key": "caliban.caliban-ai.dev/task", "operator": "DoesNotExist"}},
	}}
	if diff := cmp.Diff(want, peer); diff != "" {
		t.Errorf("ingress peer (-want +got):\n%s", diff)
	}
}

// The agent pods a peer must never admit are exactly the pods the
// policies select: the label the requirement names is on every agent pod.
func TestBuildNetworkPolicyExcludesTheLabelEveryAgentPodCarries(t *testing.T) {
	podLabels := BuildSandbox(task("refactor-auth"), pin(), settings()).Spec.PodTemplate.Metadata.Labels
	if _, ok := podLabels[notAnAgent[0].Key]; !ok {
		t.Errorf("the agent pod's labels %v lack %s, so the ingress peer would admit agent pods", podLabels, notAnAgent[0].Key)
	}
}

func TestBuildNetworkPolicyDNS(t *testing.T) {
	tests := map[string]struct {
		settings config.AgentSettings
		want     networkingv1.NetworkPolicyEgressRule
	}{
		"by default port 53 reaches kube-dns in kube-system only": {
			settings: settings(),
			want:     dnsRule("kube-system", map[string]string{"k8s-app": "kube-dns"}),
		},
		"CALIBAN_DNS_NAMESPACE and CALIBAN_DNS_POD_SELECTOR move it": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_DNS_NAMESPACE": "openshift-dns", "CALIBAN_DNS_POD_SELECTOR": "dns.operator.openshift.io/daemonset-dns=default,app=dns"}),
			want:     dnsRule("openshift-dns", map[string]string{"dns.operator.openshift.io/daemonset-dns": "default", "app": "dns"}),
		},
		"a blank CALIBAN_DNS_POD_SELECTOR opens port 53 to every pod of the DNS namespace, no further": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_DNS_POD_SELECTOR": ""}),
			want:     dnsRule("kube-system", nil),
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			for pinName, p := range map[string]*calibanv1alpha1.ResolvedWorkspace{
				"no egress": pin(), "an allow-list": pin(pinEgress(calibanv1alpha1.EgressRule{CIDR: "10.0.0.0/8"})), "DNS only": pin(pinEgress()),
			} {
				np := convert[networkingv1.NetworkPolicy](t, BuildNetworkPolicy(task("refactor-auth"), p, test.settings))
				if len(np.Spec.Egress) == 0 {
					t.Fatalf("%s: no egress rule", pinName)
				}
				if diff := cmp.Diff(test.want, np.Spec.Egress[0]); diff != "" {
					t.Errorf("%s: the DNS rule (-want +got):\n%s", pinName, diff)
				}
			}
		})
	}
}

// An empty DNS pod selector must reach the apiserver as {} (every pod of
// the namespace), not be dropped: the peer would then be the whole
// namespace all the same, but the shape would differ from the documented
// one.
func TestBuildNetworkPolicyEmptyDNSSelectorIsAnEmptySelector(t *testing.T) {
	s := parsedSettings(t, map[string]string{"CALIBAN_DNS_POD_SELECTOR": ""})
	m := toMap(t, BuildNetworkPolicy(task("refactor-auth"), pin(), s))
	peer := m["spec"].(map[string]any)["egress"].([]any)[0].(map[string]any)["to"].([]any)[0]
	want := map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "kube-system"}},
		"podSelector":       map[string]any{},
	}
	if diff := cmp.Diff(want, peer); diff != "" {
		t.Errorf("DNS peer (-want +got):\n%s", diff)
	}
}

func TestBuildNetworkPolicyEgress(t *testing.T) {
	allow := func(cidr string, ports ...int32) calibanv1alpha1.EgressRule {
		return calibanv1alpha1.EgressRule{CIDR: cidr, Ports: ports}
	}
	to := func(cidr string, except ...string) []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}}
	}
	tests := map[string]struct {
		pin  *calibanv1alpha1.ResolvedWorkspace
		want []networkingv1.NetworkPolicyEgressRule
	}{
		"no workspace egress: DNS, then every address but link-local, and every pod": {
			pin:  pin(),
			want: append([]networkingv1.NetworkPolicyEgressRule{defaultDNSRule()}, allowAllRules()...),
		},
		"an empty allow list: DNS only": {
			pin:  pin(pinEgress()),
			want: []networkingv1.NetworkPolicyEgressRule{defaultDNSRule()},
		},
		"an egress with no allow field at all: DNS only": {
			pin:  pin(func(w *calibanv1alpha1.ResolvedWorkspace) { w.Egress = &calibanv1alpha1.Egress{} }),
			want: []networkingv1.NetworkPolicyEgressRule{defaultDNSRule()},
		},
		"one rule per allow entry, in order, with its TCP ports, or every TCP port when it lists none": {
			pin: pin(pinEgress(allow("10.0.0.0/8", 443, 8080), allow("2001:db8::/32"), allow("192.168.1.7/32", 22))),
			want: []networkingv1.NetworkPolicyEgressRule{
				defaultDNSRule(),
				{To: to("10.0.0.0/8"), Ports: []networkingv1.NetworkPolicyPort{tcpPort(443), tcpPort(8080)}},
				{To: to("2001:db8::/32"), Ports: everyTCPPort()},
				{To: to("192.168.1.7/32"), Ports: []networkingv1.NetworkPolicyPort{tcpPort(22)}},
			},
		},
		"an IPv4 entry around 169.254.0.0/16 leaves it out": {
			pin: pin(pinEgress(allow("0.0.0.0/0", 443), allow("169.0.0.0/8"), allow("169.254.0.0/15"))),
			want: []networkingv1.NetworkPolicyEgressRule{
				defaultDNSRule(),
				{To: to("0.0.0.0/0", "169.254.0.0/16"), Ports: []networkingv1.NetworkPolicyPort{tcpPort(443)}},
				{To: to("169.0.0.0/8", "169.254.0.0/16"), Ports: everyTCPPort()},
				{To: to("169.254.0.0/15", "169.254.0.0/16"), Ports: everyTCPPort()},
			},
		},
		"an IPv6 entry around fe80::/10 leaves it out": {
			pin: pin(pinEgress(allow("::/0", 443), allow("fe00::/8"))),
			want: []networkingv1.NetworkPolicyEgressRule{
				defaultDNSRule(),
				{To: to("::/0", "fe80::/10"), Ports: []networkingv1.NetworkPolicyPort{tcpPort(443)}},
				{To: to("fe00::/8", "fe80::/10"), Ports: everyTCPPort()},
			},
		},
		"a pinned entry inside or equal to a link-local range is dropped, the others kept": {
			pin: pin(pinEgress(
				allow("169.254.169.254/32", 80), allow("10.0.0.0/8", 443), allow("169.254.0.0/16"),
				allow("fe80::1/128"), allow("fe80::/10"), allow("febf::/16"),
			)),
			want: []networkingv1.NetworkPolicyEgressRule{
				defaultDNSRule(),
				{To: to("10.0.0.0/8"), Ports: []networkingv1.NetworkPolicyPort{tcpPort(443)}},
			},
		},
		// A NetworkPolicy refuses them, but not on every apiserver, and a
		// network plugin that reads the block with Go's net package takes
		// each for its IPv4 form, ::ffff:0:0/96 for 0.0.0.0/0.
		"a pinned IPv4-mapped entry is dropped, whatever it spells": {
			pin: pin(pinEgress(
				allow("::ffff:169.254.169.254/128", 80), allow("::ffff:a9fe:a9fe/128"), allow("10.0.0.0/8", 443),
				allow("::ffff:0:0/96"), allow("::ffff:10.0.0.0/104"), allow("::ffff:0.0.0.0/80"),
			)),
			want: []networkingv1.NetworkPolicyEgressRule{
				defaultDNSRule(),
				{To: to("10.0.0.0/8"), Ports: []networkingv1.NetworkPolicyPort{tcpPort(443)}},
			},
		},
		// A lax apiserver takes a zero-padded prefix, and Go's net package
		// reads 169.100.0.0/00 as 0.0.0.0/0, link-local included.
		"a pinned entry that is no strict CIDR is dropped": {
			pin: pin(pinEgress(allow("169.100.0.0/00", 80), allow("010.0.0.0/8"), allow("10.0.0.0/08"), allow("10.0.0.0/8", 443), allow("not-a-cidr"))),
			want: []networkingv1.NetworkPolicyEgressRule{
				defaultDNSRule(),
				{To: to("10.0.0.0/8"), Ports: []networkingv1.NetworkPolicyPort{tcpPort(443)}},
			},
		},
		"entries beside link-local are left as they are": {
			pin: pin(pinEgress(allow("169.253.0.0/16"), allow("169.255.0.0/16"), allow("170.0.0.0/8"), allow("fec0::/10"), allow("fe40::/10"))),
			want: []networkingv1.NetworkPolicyEgressRule{
				defaultDNSRule(),
				{To: to("169.253.0.0/16"), Ports: everyTCPPort()}, {To: to("169.255.0.0/16"), Ports: everyTCPPort()},
				{To: to("170.0.0.0/8"), Ports: everyTCPPort()}, {To: to("fec0::/10"), Ports: everyTCPPort()}, {To: to("fe40::/10"), Ports: everyTCPPort()},
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

// An allow entry opens TCP, as the Workspace's egress says: one without
// ports opens every TCP port of its CIDR, and no UDP or SCTP port at all
// (a NetworkPolicy rule without ports would open every protocol). A
// Workspace without egress still opens every protocol: that is its
// documented allow-everything default.
func TestAnAllowEntryWithoutPortsOpensEveryTCPPortAndNoOtherProtocol(t *testing.T) {
	tests := map[string]struct {
		pin *calibanv1alpha1.ResolvedWorkspace
		dst string
		// open and shut are the protocol/port pairs that must reach dst,
		// and those that must not
		open, shut []string
	}{
		"an IPv4 entry without ports": {
			pin: pin(pinEgress(calibanv1alpha1.EgressRule{CIDR: "10.0.0.0/8"})), dst: "10.1.2.3",
			open: []string{"TCP/22", "TCP/443", "TCP/65535"}, shut: []string{"UDP/53", "UDP/443", "UDP/5353", "SCTP/443"},
		},
		"an IPv6 entry without ports": {
			pin: pin(pinEgress(calibanv1alpha1.EgressRule{CIDR: "2001:db8::/32"})), dst: "2001:db8::1",
			open: []string{"TCP/1", "TCP/8080"}, shut: []string{"UDP/443", "SCTP/1"},
		},
		"an entry around link-local without ports": {
			pin: pin(pinEgress(calibanv1alpha1.EgressRule{CIDR: "0.0.0.0/0"})), dst: "8.8.8.8",
			open: []string{"TCP/443"}, shut: []string{"UDP/443", "UDP/123"},
		},
		"an entry with ports opens those TCP ports only": {
			pin: pin(pinEgress(calibanv1alpha1.EgressRule{CIDR: "10.0.0.0/8", Ports: []int32{443}})), dst: "10.1.2.3",
			open: []string{"TCP/443"}, shut: []string{"TCP/80", "UDP/443"},
		},
		"no workspace egress opens every protocol, as documented": {
			pin: pin(), dst: "8.8.8.8",
			open: []string{"TCP/443", "UDP/443", "SCTP/443"},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			np := convert[networkingv1.NetworkPolicy](t, BuildNetworkPolicy(task("refactor-auth"), test.pin, settings()))
			dst := netip.MustParseAddr(test.dst)
			check := func(conns []string, want bool) {
				for _, c := range conns {
					proto, port, _ := strings.Cut(c, "/")
					n, _ := strconv.Atoi(port)
					if got := admitsConnection(np.Spec.Egress, dst, corev1.Protocol(proto), int32(n)); got != want {
						t.Errorf("%s to %s admitted: %t, want %t; egress %+v", c, dst, got, want, np.Spec.Egress)
					}
				}
			}
			check(test.open, true)
			check(test.shut, false)
		})
	}
}

// admitsConnection reports whether an egress rule whose ipBlock admits
// addr also admits protocol and port: a rule without ports admits every
// protocol and port; a port entry without a port, every port of its
// protocol (TCP when unset, as the apiserver defaults it).
func admitsConnection(rules []networkingv1.NetworkPolicyEgressRule, addr netip.Addr, protocol corev1.Protocol, port int32) bool {
	for _, r := range rules {
		if !admitsAddress([]networkingv1.NetworkPolicyEgressRule{{To: r.To}}, addr) {
			continue
		}
		if len(r.Ports) == 0 {
			return true
		}
		for _, p := range r.Ports {
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if proto != protocol {
				continue
			}
			end := port
			if p.EndPort != nil {
				end = *p.EndPort
			}
			if p.Port == nil || (port >= p.Port.IntVal && port <= max(end, p.Port.IntVal)) {
				return true
			}
		}
	}
	return false
}

// The allow-all pod rule must reach the apiserver as namespaceSelector: {}
// (every pod of every namespace): dropped, the peer would be invalid, and a
// rule without `to` would admit every address, link-local included.
func TestBuildNetworkPolicyAllowAllPodRuleIsAnEmptyNamespaceSelector(t *testing.T) {
	m := toMap(t, BuildNetworkPolicy(task("refactor-auth"), pin(), settings()))
	egress := m["spec"].(map[string]any)["egress"].([]any)
	if len(egress) != 3 {
		t.Fatalf("egress = %v, want DNS, every address but link-local, every pod", egress)
	}
	want := map[string]any{"to": []any{map[string]any{"namespaceSelector": map[string]any{}}}}
	if diff := cmp.Diff(want, egress[2]); diff != "" {
		t.Errorf("every-pod rule (-want +got):\n%s", diff)
	}
}

// admitsAddress reports whether some egress rule's ipBlock, or a rule
// without destinations, lets traffic to addr out, on any port, as a
// network plugin would read the blocks: either strictly (net/netip), or
// with Go's net package, which reads an IPv4-mapped IPv6 block as the
// IPv4 block it maps.
func admitsAddress(rules []networkingv1.NetworkPolicyEgressRule, addr netip.Addr) bool {
	strict := func(cidr string) bool { return netip.MustParsePrefix(cidr).Contains(addr) }
	legacy := func(cidr string) bool {
		_, n, err := net.ParseCIDR(cidr)
		return err == nil && n.Contains(net.IP(addr.AsSlice()))
	}
	for _, contains := range []func(string) bool{strict, legacy} {
		for _, r := range rules {
			if len(r.To) == 0 {
				return true
			}
			for _, peer := range r.To {
				if peer.IPBlock == nil || !contains(peer.IPBlock.CIDR) {
					continue
				}
				if !slices.ContainsFunc(peer.IPBlock.Except, contains) {
					return true
				}
			}
		}
	}
	return false
}

// Whatever a pin holds, link-local stays shut, and what is around it
// stays open: the rows above, seen from the addresses.
func TestBuildNetworkPolicyNeverAdmitsLinkLocal(t *testing.T) {
	metadata, metadataV6 := netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fe80::a9fe:a9fe")
	tests := map[string]struct {
		pin *calibanv1alpha1.ResolvedWorkspace
		// an address the policy must still admit, so a policy that shuts
		// everything cannot pass
		open []string
	}{
		"no workspace egress":             {pin: pin(), open: []string{"8.8.8.8", "2001:4860:4860::8888"}},
		"an allow-list of the world":      {pin: pin(pinEgress(calibanv1alpha1.EgressRule{CIDR: "0.0.0.0/0"}, calibanv1alpha1.EgressRule{CIDR: "::/0"})), open: []string{"8.8.8.8", "169.253.255.255", "169.255.0.0", "2001:4860:4860::8888", "fec0::1"}},
		"an allow-list around link-local": {pin: pin(pinEgress(calibanv1alpha1.EgressRule{CIDR: "169.0.0.0/8"}, calibanv1alpha1.EgressRule{CIDR: "fe00::/8"})), open: []string{"169.1.2.3", "fe00::1"}},
		"a pin of the metadata address from before the rule": {
			pin:  pin(pinEgress(calibanv1alpha1.EgressRule{CIDR: "169.254.169.254/32"}, calibanv1alpha1.EgressRule{CIDR: "fe80::a9fe:a9fe/128"}, calibanv1alpha1.EgressRule{CIDR: "10.0.0.0/8"})),
			open: []string{"10.1.2.3"},
		},
		"a pin of the metadata address spelt as IPv4-mapped IPv6, from before the rule": {
			pin: pin(pinEgress(
				calibanv1alpha1.EgressRule{CIDR: "::ffff:169.254.169.254/128"}, calibanv1alpha1.EgressRule{CIDR: "::ffff:a9fe:a9fe/128"},
				calibanv1alpha1.EgressRule{CIDR: "0:0:0:0:0:ffff:169.254.169.254/128"}, calibanv1alpha1.EgressRule{CIDR: "::ffff:169.254.0.0/112"},
				calibanv1alpha1.EgressRule{CIDR: "::ffff:0:0/96"}, calibanv1alpha1.EgressRule{CIDR: "10.0.0.0/8"},
			)),
			open: []string{"10.1.2.3"},
		},
		"an allow-list of the world in halves": {
			pin:  pin(pinEgress(calibanv1alpha1.EgressRule{CIDR: "0.0.0.0/1"}, calibanv1alpha1.EgressRule{CIDR: "128.0.0.0/1"})),
			open: []string{"8.8.8.8", "169.253.255.255", "200.1.2.3"},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			np := convert[networkingv1.NetworkPolicy](t, BuildNetworkPolicy(task("refactor-auth"), test.pin, settings()))
			for _, addr := range []netip.Addr{metadata, metadataV6} {
				if admitsAddress(np.Spec.Egress, addr) {
					t.Errorf("the egress admits %s: %+v", addr, np.Spec.Egress)
				}
			}
			for _, a := range test.open {
				if !admitsAddress(np.Spec.Egress, netip.MustParseAddr(a)) {
					t.Errorf("the egress shuts %s, which the pin allows: %+v", a, np.Spec.Egress)
				}
			}
		})
	}
}

func TestBuildNetworkPolicySelectsThePodAndBothDirections(t *testing.T) {
	for name, taskName := range map[string]string{"a plain name": "refactor-auth", "a long dotted name": longDottedName} {
		t.Run(name, func(t *testing.T) {
			tk := task(taskName)
			np := convert[networkingv1.NetworkPolicy](t, BuildNetworkPolicy(tk, pin(), settings()))
			podLabels := BuildSandbox(tk, pin(), settings()).Spec.PodTemplate.Metadata.Labels
			// The UID alone, which no other task's pod can carry.
			wantSelector := metav1.LabelSelector{MatchLabels: map[string]string{LabelTaskUID: string(tk.UID)}}
			if diff := cmp.Diff(wantSelector, np.Spec.PodSelector); diff != "" {
				t.Errorf("podSelector (-want the task's UID +got):\n%s", diff)
			}
			if got := podLabels[LabelTaskUID]; got != string(tk.UID) {
				t.Errorf("the pod carries %s=%q, want the task's UID %q", LabelTaskUID, got, tk.UID)
			}
			wantTypes := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
			if diff := cmp.Diff(wantTypes, np.Spec.PolicyTypes); diff != "" {
				t.Errorf("policyTypes (-want +got):\n%s", diff)
			}
		})
	}
}
