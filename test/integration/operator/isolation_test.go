// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// These tests read the NetworkPolicies the operator gave its tasks as the
// apiserver stored them, and evaluate them here with NetworkPolicy's own
// rules: kwok has no network plugin, so nothing in the test bed enforces a
// policy, and what a test can show is what a plugin that enforces them
// would let through (docs/security.md).

// endpoint is one end of a connection as a NetworkPolicy sees it: a pod,
// with its labels and its namespace's, or an address outside the cluster
// (podLabels nil).
type endpoint struct {
	name            string
	namespace       string
	namespaceLabels map[string]string
	podLabels       map[string]string
	ip              netip.Addr
}

// selects reports whether a stored label selector matches set.
func selects(t *testing.T, sel *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("the stored selector %+v does not parse: %v", sel, err)
	}
	return s.Matches(labels.Set(set))
}

// peerMatches reports whether peer, in a policy of namespace policyNS,
// selects e. An ipBlock matches by address, a pod or namespace selector
// only pods; a peer without a namespace selector stays in the policy's
// namespace.
func peerMatches(t *testing.T, peer networkingv1.NetworkPolicyPeer, policyNS string, e endpoint) bool {
	t.Helper()
	if peer.IPBlock != nil {
		if !e.ip.IsValid() || !netip.MustParsePrefix(peer.IPBlock.CIDR).Contains(e.ip) {
			return false
		}
		return !slices.ContainsFunc(peer.IPBlock.Except, func(x string) bool { return netip.MustParsePrefix(x).Contains(e.ip) })
	}
	if e.podLabels == nil {
		return false
	}
	if peer.NamespaceSelector == nil {
		if e.namespace != policyNS {
			return false
		}
	} else if !selects(t, peer.NamespaceSelector, e.namespaceLabels) {
		return false
	}
	return peer.PodSelector == nil || selects(t, peer.PodSelector, e.podLabels)
}

// portMatches reports whether a rule's ports admit proto/port: no ports
// is every port; a port without a number is every port of its protocol
// (TCP when unset).
func portMatches(ports []networkingv1.NetworkPolicyPort, proto corev1.Protocol, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pp := corev1.ProtocolTCP
		if p.Protocol != nil {
			pp = *p.Protocol
		}
		if pp != proto {
			continue
		}
		if p.Port == nil {
			return true
		}
		lo, hi := p.Port.IntVal, p.Port.IntVal
		if p.EndPort != nil {
			hi = *p.EndPort
		}
		if port >= lo && port <= hi {
			return true
		}
	}
	return false
}

// ruleAdmits is one rule's verdict: its ports, and its peers (none is
// everyone).
func ruleAdmits(t *testing.T, ports []networkingv1.NetworkPolicyPort, peers []networkingv1.NetworkPolicyPeer, policyNS string, e endpoint, proto corev1.Protocol, port int32) bool {
	t.Helper()
	if !portMatches(ports, proto, port) {
		return false
	}
	return len(peers) == 0 || slices.ContainsFunc(peers, func(p networkingv1.NetworkPolicyPeer) bool { return peerMatches(t, p, policyNS, e) })
}

// admits is the verdict of every policy of the namespace on a connection
// of pod (a task's agent pod) with other: allowed when no policy of that
// direction selects the pod, or when one of those that do has a rule that
// admits it.
func admits(t *testing.T, policies []networkingv1.NetworkPolicy, pod endpoint, dir networkingv1.PolicyType, other endpoint, proto corev1.Protocol, port int32) bool {
	t.Helper()
	selected := false
	for _, np := range policies {
		if np.Namespace != pod.namespace || !slices.Contains(np.Spec.PolicyTypes, dir) || !selects(t, &np.Spec.PodSelector, pod.podLabels) {
			continue
		}
		selected = true
		if dir == networkingv1.PolicyTypeIngress {
			for _, r := range np.Spec.Ingress {
				if ruleAdmits(t, r.Ports, r.From, np.Namespace, other, proto, port) {
					return true
				}
			}
		} else {
			for _, r := range np.Spec.Egress {
				if ruleAdmits(t, r.Ports, r.To, np.Namespace, other, proto, port) {
					return true
				}
			}
		}
	}
	return !selected
}

// storedPolicies lists the namespace's NetworkPolicies as the apiserver
// stored them.
func storedPolicies(t *testing.T, ns string) []networkingv1.NetworkPolicy {
	t.Helper()
	list, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// namespaceEndpoint is a pod of namespace ns with podLabels and address
// ip, the namespace's labels as the apiserver keeps them.
func namespaceEndpoint(t *testing.T, name, ns string, podLabels map[string]string, ip string) endpoint {
	t.Helper()
	obj, err := cluster.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := endpoint{name: name, namespace: ns, namespaceLabels: obj.Labels, podLabels: podLabels}
	if ip != "" {
		e.ip = netip.MustParseAddr(ip)
	}
	return e
}

// agentEndpoint is the agent pod of a Running task: the labels of the pod
// template of its Sandbox, which agent-sandbox copies onto the pod.
func agentEndpoint(t *testing.T, task *calibanv1alpha1.CalibanTask, ip string) endpoint {
	t.Helper()
	sb, err := framework.SandboxOf(getSandbox(t, task.Namespace, task.Status.SandboxRef.Name))
	if err != nil {
		t.Fatal(err)
	}
	return namespaceEndpoint(t, task.Name+"'s agent pod", task.Namespace, sb.Spec.PodTemplate.Metadata.Labels, ip)
}

// outside is an address outside the cluster.
func outside(ip string) endpoint {
	return endpoint{name: ip, ip: netip.MustParseAddr(ip)}
}

// Two tasks share a namespace, and every agent pod mounts the same daemon
// token (CALIBAN_SESSION_TOKEN_SECRET): only the NetworkPolicy keeps one
// task's agent from driving the other's caliband. prospero, or any pod of
// the namespace that is not an agent, still reaches both.
func TestAnAgentCannotReachAnotherTasksCaliband(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "isolation", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")
	createTask(t, ns, "task-a", "demo")
	createTask(t, ns, "task-b", "demo")
	a := waitForTask(t, ns, "task-a", settleTimeout, isRunning)
	b := waitForTask(t, ns, "task-b", settleTimeout, isRunning)

	prospero := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "prospero", Labels: map[string]string{"app.kubernetes.io/name": "prospero"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "prospero", Image: "ghcr.io/caliban-ai/prospero:test"}}},
	}
	prospero, err := cluster.Kube.CoreV1().Pods(ns).Create(ctx, prospero, metav1.CreateOptions{FieldManager: framework.FieldManager})
	if err != nil {
		t.Fatal(err)
	}

	podA, podB := agentEndpoint(t, a, "10.244.0.10"), agentEndpoint(t, b, "10.244.0.11")
	peer := namespaceEndpoint(t, "the prospero pod", ns, prospero.Labels, "10.244.0.20")
	policies := storedPolicies(t, ns)
	if len(policies) != 2 {
		t.Fatalf("the namespace holds %d NetworkPolicies, want one per task", len(policies))
	}
	// caliband's port and both ends of the agent port window.
	for _, port := range []int32{8443, 7100, 7999} {
		for _, c := range []struct{ to, from endpoint }{{podA, podB}, {podB, podA}} {
			if admits(t, policies, c.to, networkingv1.PolicyTypeIngress, c.from, corev1.ProtocolTCP, port) {
				t.Errorf("%s is admitted to %s on TCP %d", c.from.name, c.to.name, port)
			}
			if !admits(t, policies, c.to, networkingv1.PolicyTypeIngress, peer, corev1.ProtocolTCP, port) {
				t.Errorf("%s is not admitted to %s on TCP %d", peer.name, c.to.name, port)
			}
		}
	}
	// Nothing else is open, to anyone.
	if admits(t, policies, podA, networkingv1.PolicyTypeIngress, peer, corev1.ProtocolTCP, 22) {
		t.Errorf("%s is admitted to %s on TCP 22", peer.name, podA.name)
	}
}

// A Workspace without egress still keeps agents from the link-local range,
// where the cloud metadata services hand out the node's credentials; and
// port 53 reaches the cluster's DNS pods only, so it cannot carry traffic
// past an allow-list.
func TestAgentEgressNeverReachesLinkLocalAndDNSReachesOnlyTheClusterDNS(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "egress", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "open")
	createReadyWorkspace(t, ns, "listed", func(spec *calibanv1alpha1.WorkspaceSpec) {
		spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.0/8", Ports: []int32{443}}}}
	})
	createTask(t, ns, "open-task", "open")
	createTask(t, ns, "listed-task", "listed")
	open := agentEndpoint(t, waitForTask(t, ns, "open-task", settleTimeout, isRunning), "10.244.0.10")
	listed := agentEndpoint(t, waitForTask(t, ns, "listed-task", settleTimeout, isRunning), "10.244.0.11")
	policies := storedPolicies(t, ns)

	dns := namespaceEndpoint(t, "a kube-dns pod", "kube-system", map[string]string{"k8s-app": "kube-dns"}, "10.244.1.2")
	notDNS := namespaceEndpoint(t, "another kube-system pod", "kube-system", map[string]string{"component": "other"}, "192.168.7.7")
	elsewhere := endpoint{name: "a pod of another namespace", namespace: "elsewhere",
		namespaceLabels: map[string]string{"kubernetes.io/metadata.name": "elsewhere"}, podLabels: map[string]string{"app": "api"}}
	type conn struct {
		proto corev1.Protocol
		port  int32
	}
	tcp := func(p int32) conn { return conn{corev1.ProtocolTCP, p} }
	udp53 := conn{corev1.ProtocolUDP, 53}

	t.Run("link-local is shut, whatever the Workspace", func(t *testing.T) {
		for _, pod := range []endpoint{open, listed} {
			for _, dst := range []endpoint{outside("169.254.169.254"), outside("169.254.0.1"), outside("fe80::a9fe:a9fe")} {
				for _, c := range []conn{tcp(80), tcp(443), udp53, tcp(53)} {
					if admits(t, policies, pod, networkingv1.PolicyTypeEgress, dst, c.proto, c.port) {
						t.Errorf("%s reaches %s on %s %d", pod.name, dst.name, c.proto, c.port)
					}
				}
			}
		}
	})

	t.Run("without egress in the Workspace everything else is open", func(t *testing.T) {
		for _, dst := range []endpoint{outside("8.8.8.8"), outside("169.253.255.255"), outside("2001:4860:4860::8888"), elsewhere, dns} {
			if !admits(t, policies, open, networkingv1.PolicyTypeEgress, dst, corev1.ProtocolTCP, 443) {
				t.Errorf("%s does not reach %s on TCP 443", open.name, dst.name)
			}
		}
	})

	t.Run("port 53 reaches the cluster DNS pods, and under an allow-list nothing else", func(t *testing.T) {
		for _, pod := range []endpoint{open, listed} {
			for _, c := range []conn{udp53, tcp(53)} {
				if !admits(t, policies, pod, networkingv1.PolicyTypeEgress, dns, c.proto, c.port) {
					t.Errorf("%s does not reach %s on %s 53", pod.name, dns.name, c.proto)
				}
			}
		}
		for _, dst := range []endpoint{outside("8.8.8.8"), outside("10.1.2.3"), notDNS, elsewhere} {
			for _, c := range []conn{udp53, tcp(53)} {
				if admits(t, policies, listed, networkingv1.PolicyTypeEgress, dst, c.proto, c.port) {
					t.Errorf("%s reaches %s on %s 53", listed.name, dst.name, c.proto)
				}
			}
		}
		if !admits(t, policies, listed, networkingv1.PolicyTypeEgress, outside("10.1.2.3"), corev1.ProtocolTCP, 443) {
			t.Errorf("%s does not reach 10.1.2.3 on TCP 443, which its Workspace allows", listed.name)
		}
	})

	t.Run("the rules that open port 53 open it to the DNS pods only", func(t *testing.T) {
		for _, np := range policies {
			for i, r := range np.Spec.Egress {
				if !portMatches(r.Ports, corev1.ProtocolUDP, 53) || len(r.Ports) == 0 {
					continue
				}
				for _, dst := range []endpoint{outside("8.8.8.8"), notDNS, elsewhere} {
					if ruleAdmits(t, r.Ports, r.To, np.Namespace, dst, corev1.ProtocolUDP, 53) {
						t.Errorf("NetworkPolicy %s egress[%d], the DNS rule, admits %s", np.Name, i, dst.name)
					}
				}
			}
		}
	})
}

// A Workspace may not allow what no agent may reach; the message names the
// field, as every Workspace refusal does.
func TestALinkLocalEgressCIDRFailsTheWorkspace(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "linklocal", ns)
	createProviderSecret(t, ns)
	for name, cidr := range map[string]string{"metadata": "169.254.169.254/32", "metadata-v6": "fe80::a9fe:a9fe/128"} {
		createWorkspace(t, ns, name, func(spec *calibanv1alpha1.WorkspaceSpec) {
			spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.0/8"}, {CIDR: cidr, Ports: []int32{80}}}}
		})
	}
	waitForWorkspace(t, ns, "metadata", settleTimeout,
		workspaceFailedNaming("egress.allow[1]: cidr '169.254.169.254/32' is link-local (169.254.0.0/16), which agent pods may never reach"))
	waitForWorkspace(t, ns, "metadata-v6", settleTimeout,
		workspaceFailedNaming("egress.allow[1]: cidr 'fe80::a9fe:a9fe/128' is link-local (fe80::/10), which agent pods may never reach"))
}

// ADR 0022 and ADR 0015: a task keeps the NetworkPolicy it was given, so
// one rendered before the agent exclusion keeps admitting agents until it
// is replaced. A cluster operator finds such a policy by its rendered-by
// annotation, which differs from a new task's, and replaces it by deleting
// it (the operator makes it anew as it renders now) or by re-creating the
// task.
func TestAPolicyRenderedBeforeIsKeptUntilReplaced(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "kept", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")
	createTask(t, ns, "old", "demo")
	old := waitForTask(t, ns, "old", settleTimeout, isRunning)
	oldNP := builders.NetworkPolicyName(old.Name)
	policies := cluster.Kube.NetworkingV1().NetworkPolicies(ns)

	// What an earlier release left: every pod of the namespace admitted,
	// port 53 open to every address, another fingerprint.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := policies.Get(ctx, oldNP, metav1.GetOptions{})
		if err != nil {
			return err
		}
		live.Annotations["caliban.caliban-ai.dev/rendered-by"] = "an-earlier-release"
		live.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
		live.Spec.Egress[0].To = nil
		_, err = policies.Update(ctx, live, metav1.UpdateOptions{FieldManager: "earlier-release"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	before, err := policies.Get(ctx, oldNP, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Let the operator see the change, then make it sync the task.
	time.Sleep(time.Second)
	gen := touchTask(t, ns, old.Name)
	waitForTask(t, ns, old.Name, settleTimeout, func(task *calibanv1alpha1.CalibanTask) error {
		if task.Status.ObservedGeneration != gen {
			return fmt.Errorf("observedGeneration %d, want %d", task.Status.ObservedGeneration, gen)
		}
		return isRunning(task)
	})
	time.Sleep(2 * time.Second)
	kept, err := policies.Get(ctx, oldNP, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kept.ResourceVersion != before.ResourceVersion {
		t.Fatalf("the operator rewrote the earlier release's NetworkPolicy (resourceVersion %s, then %s): %+v", before.ResourceVersion, kept.ResourceVersion, kept.Spec)
	}

	// Found: a new task's policy carries the fingerprint of the running
	// operator, and the exclusion.
	createTask(t, ns, "new", "demo")
	waitForTask(t, ns, "new", settleTimeout, isRunning)
	fresh, err := policies.Get(ctx, builders.NetworkPolicyName("new"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current := fresh.Annotations["caliban.caliban-ai.dev/rendered-by"]
	if current == "" || current == kept.Annotations["caliban.caliban-ai.dev/rendered-by"] {
		t.Fatalf("rendered-by %q on the new task's policy, %q on the kept one: the kept one cannot be told apart", current, kept.Annotations["caliban.caliban-ai.dev/rendered-by"])
	}
	excludesAgents := func(np *networkingv1.NetworkPolicy) error {
		for _, r := range np.Spec.Ingress {
			for _, p := range r.From {
				if p.PodSelector == nil || !slices.ContainsFunc(p.PodSelector.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
					return r.Key == builders.LabelTask && r.Operator == metav1.LabelSelectorOpDoesNotExist
				}) {
					return fmt.Errorf("NetworkPolicy %s admits agent pods: ingress peer %+v", np.Name, p)
				}
			}
		}
		return nil
	}
	if err := excludesAgents(fresh); err != nil {
		t.Fatal(err)
	}

	// Replaced: deleted, it comes back as the operator renders now.
	if err := policies.Delete(ctx, oldNP, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settleTimeout, func() error {
		np, err := policies.Get(ctx, oldNP, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if np.UID == kept.UID {
			return fmt.Errorf("NetworkPolicy %s not deleted yet", oldNP)
		}
		if got := np.Annotations["caliban.caliban-ai.dev/rendered-by"]; got != current {
			return fmt.Errorf("the re-made NetworkPolicy is rendered by %q, want %q", got, current)
		}
		return excludesAgents(np)
	})
}
