// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// LabelNamespaceName is the label the apiserver sets on every namespace.
const LabelNamespaceName = "kubernetes.io/metadata.name"

// BuildServiceAccount is the task's pod identity: no API token is mounted,
// and no Role is ever bound to it, so the pod has no API access at all.
func BuildServiceAccount(task *calibanv1alpha1.CalibanTask) *corev1ac.ServiceAccountApplyConfiguration {
	return corev1ac.ServiceAccount(ServiceAccountName(task.Name), task.Namespace).
		WithLabels(TaskLabels(task)).
		WithOwnerReferences(ownerReference(task)).
		WithAutomountServiceAccountToken(false)
}

// BuildNetworkPolicy isolates the task's pod
// (docs/crd-reference.md#networkpolicy): ingress only to caliband's port and
// the agent port window from the configured peers, never from an agent pod;
// egress to the cluster's DNS, plus everything but link-local (no workspace
// egress) or the pinned allow-list, less link-local.
func BuildNetworkPolicy(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) *networkingv1ac.NetworkPolicyApplyConfiguration {
	return networkPolicy(task, pin, s, metav1ac.LabelSelector().WithMatchLabels(TaskPodSelector(task)))
}

// networkPolicy is the task's NetworkPolicy for the pod pods selects: the
// task's own, or the one a warm pool handed over (BuildWarmNetworkPolicy).
func networkPolicy(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings, pods *metav1ac.LabelSelectorApplyConfiguration) *networkingv1ac.NetworkPolicyApplyConfiguration {
	tcp := corev1.ProtocolTCP
	// Every agent pod mounts the same daemon token and carries the task
	// label; without the exclusion one task's agent could drive its
	// neighbour's caliband (ADR 0022). No setting can lift it.
	notAnAgent := metav1ac.LabelSelectorRequirement().WithKey(LabelTask).WithOperator(metav1.LabelSelectorOpDoesNotExist)
	peer := networkingv1ac.NetworkPolicyPeer().
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(s.IngressPodSelector).WithMatchExpressions(notAnAgent))
	if s.IngressNamespace != "" {
		peer.WithNamespaceSelector(metav1ac.LabelSelector().
			WithMatchLabels(map[string]string{LabelNamespaceName: s.IngressNamespace}))
	}
	ingress := networkingv1ac.NetworkPolicyIngressRule().
		WithPorts(
			networkingv1ac.NetworkPolicyPort().WithProtocol(tcp).WithPort(intstr.FromInt32(s.CalibandPort)),
			networkingv1ac.NetworkPolicyPort().WithProtocol(tcp).WithPort(intstr.FromInt32(s.AgentPortBase)).WithEndPort(s.AgentPortEnd),
		).
		WithFrom(peer)

	return networkingv1ac.NetworkPolicy(NetworkPolicyName(task.Name), task.Namespace).
		WithLabels(TaskLabels(task)).
		WithOwnerReferences(ownerReference(task)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(pods).
			WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
			WithIngress(ingress).
			WithEgress(egressRules(pin.Egress, s)...))
}

// egressRules are an agent pod's ways out: the cluster's DNS, plus
// everything but link-local (no workspace egress) or the allow-list's TCP
// ports, less link-local.
func egressRules(allowList *calibanv1alpha1.Egress, s config.AgentSettings) []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	// Port 53 open to every address would carry anything past the
	// allow-list; only the cluster's resolver needs it.
	egress := []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration{
		networkingv1ac.NetworkPolicyEgressRule().
			WithPorts(
				networkingv1ac.NetworkPolicyPort().WithProtocol(udp).WithPort(intstr.FromInt32(53)),
				networkingv1ac.NetworkPolicyPort().WithProtocol(tcp).WithPort(intstr.FromInt32(53)),
			).
			WithTo(networkingv1ac.NetworkPolicyPeer().
				WithNamespaceSelector(metav1ac.LabelSelector().
					WithMatchLabels(map[string]string{LabelNamespaceName: s.DNSNamespace})).
				WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(s.DNSPodSelector))),
	}
	if allowList == nil {
		// Everything but link-local. The pod rule keeps every pod
		// reachable as an empty rule did: some network plugins never match
		// a pod's address against an ipBlock.
		everywhere := networkingv1ac.NetworkPolicyEgressRule()
		for _, p := range linkLocal {
			everywhere.WithTo(networkingv1ac.NetworkPolicyPeer().WithIPBlock(
				networkingv1ac.IPBlock().WithCIDR(netip.PrefixFrom(p.Addr(), 0).Masked().String()).WithExcept(p.String())))
		}
		return append(egress, everywhere,
			networkingv1ac.NetworkPolicyEgressRule().WithTo(networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(metav1ac.LabelSelector())))
	}
	for _, allow := range allowList.Allow {
		block, ok := egressIPBlock(allow.CIDR)
		if !ok {
			continue
		}
		rule := networkingv1ac.NetworkPolicyEgressRule().WithTo(networkingv1ac.NetworkPolicyPeer().WithIPBlock(block))
		for _, port := range allow.Ports {
			rule.WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(tcp).WithPort(intstr.FromInt32(port)))
		}
		// An allow entry opens TCP ports. Without ports it opens every
		// one of them, and nothing else: a rule without ports would open
		// every protocol (UDP, SCTP) to the CIDR.
		if len(allow.Ports) == 0 {
			rule.WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(tcp))
		}
		egress = append(egress, rule)
	}
	return egress
}

func ownerReference(task *calibanv1alpha1.CalibanTask) *metav1ac.OwnerReferenceApplyConfiguration {
	ref := TaskOwnerReference(task)
	return metav1ac.OwnerReference().
		WithAPIVersion(ref.APIVersion).
		WithKind(ref.Kind).
		WithName(ref.Name).
		WithUID(ref.UID).
		WithController(*ref.Controller).
		WithBlockOwnerDeletion(*ref.BlockOwnerDeletion)
}

// linkLocal are the ranges no agent pod may reach, whatever its Workspace
// allows: IPv4's holds the cloud metadata services (169.254.169.254), which
// hand out the node's credentials; IPv6's is its counterpart.
var linkLocal = [...]netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}

// linkLocalOverlap says how prefix meets the link-local ranges: inside is
// the range prefix lies in or equals, around the range prefix strictly
// contains; both are the zero Prefix when prefix is disjoint from them. An
// IPv4-mapped IPv6 prefix (::ffff:169.254.169.254/128) is taken for the
// IPv4 prefix it maps, as a network plugin reading it with Go's net
// package takes it.
func linkLocalOverlap(prefix netip.Prefix) (inside, around netip.Prefix) {
	if v4, ok := mappedIPv4(prefix); ok {
		prefix = v4
	}
	prefix = prefix.Masked()
	for _, ll := range linkLocal {
		switch {
		case prefix.Bits() >= ll.Bits() && ll.Contains(prefix.Addr()):
			return ll, netip.Prefix{}
		case prefix.Bits() < ll.Bits() && prefix.Contains(ll.Addr()):
			return netip.Prefix{}, ll
		}
	}
	return netip.Prefix{}, netip.Prefix{}
}

// mappedIPv4 is the IPv4 prefix an IPv4-mapped IPv6 prefix of at least
// /96 stands for (::ffff:10.0.0.0/104 is 10.0.0.0/8); ok is false for any
// other prefix.
func mappedIPv4(prefix netip.Prefix) (v4 netip.Prefix, ok bool) {
	if !prefix.Addr().Is4In6() || prefix.Bits() < 96 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(prefix.Addr().Unmap(), prefix.Bits()-96), true
}

// egressIPBlock is the ipBlock of one egress.allow entry: a CIDR around a
// link-local range leaves it out, and one inside a range, or written as an
// IPv4-mapped IPv6 address, is no block at all (ok false). The Workspace
// validation refuses both; a pin taken before those rules must not open
// them either. An IPv4-mapped block is dropped whatever it maps: a strict
// apiserver refuses it, and where one takes it, a network plugin may read
// ::ffff:0:0/96 as 0.0.0.0/0, link-local included. A CIDR netip cannot
// parse is no block either: the validation refused it, and an apiserver
// without strict CIDR validation would take spellings such as
// 10.0.0.0/00, which a network plugin reading them with Go's net package
// opens as 0.0.0.0/0.
func egressIPBlock(cidr string) (block *networkingv1ac.IPBlockApplyConfiguration, ok bool) {
	block = networkingv1ac.IPBlock().WithCIDR(cidr)
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, false
	}
	inside, around := linkLocalOverlap(prefix)
	switch {
	case inside.IsValid(), prefix.Addr().Is4In6():
		return nil, false
	case around.IsValid():
		block.WithExcept(around.String())
	}
	return block, true
}
