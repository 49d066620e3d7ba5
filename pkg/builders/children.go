package builders

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
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
// the agent port window from the configured peers; egress to DNS plus
// everything (no workspace egress) or the pinned allow-list.
func BuildNetworkPolicy(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) *networkingv1ac.NetworkPolicyApplyConfiguration {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	peer := networkingv1ac.NetworkPolicyPeer().
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(s.IngressPodSelector))
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

	egress := []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration{
		networkingv1ac.NetworkPolicyEgressRule().WithPorts(
			networkingv1ac.NetworkPolicyPort().WithProtocol(udp).WithPort(intstr.FromInt32(53)),
			networkingv1ac.NetworkPolicyPort().WithProtocol(tcp).WithPort(intstr.FromInt32(53)),
		),
	}
	if pin.Egress == nil {
		// An empty rule allows every destination.
		egress = append(egress, networkingv1ac.NetworkPolicyEgressRule())
	} else {
		for _, allow := range pin.Egress.Allow {
			rule := networkingv1ac.NetworkPolicyEgressRule().
				WithTo(networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR(allow.CIDR)))
			for _, port := range allow.Ports {
				rule.WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(tcp).WithPort(intstr.FromInt32(port)))
			}
			egress = append(egress, rule)
		}
	}

	return networkingv1ac.NetworkPolicy(NetworkPolicyName(task.Name), task.Namespace).
		WithLabels(TaskLabels(task)).
		WithOwnerReferences(ownerReference(task)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(TaskLabels(task))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
			WithIngress(ingress).
			WithEgress(egress...))
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
