// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"maps"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

// AgentSettings is the contract of the agent pods: what the renderers in
// pkg/builders (BuildSandbox, BuildNetworkPolicy, CalibandEnv, TaskStatus's
// endpoint) and the Workspace validation read. Nothing about the operator process itself
// belongs here.
type AgentSettings struct {
	CalibandImage string
	GitImage      string
	// WorkspaceRoot is absolute and cleaned: it is both the clone target
	// and caliband's --workspace-root.
	WorkspaceRoot    string
	WorkspaceStorage resource.Quantity
	AgentUID         int64
	AgentGID         int64

	CalibandPort  int32
	AgentPortBase int32
	// AgentPortEnd is inclusive. caliband has no end flag: it only bounds
	// the NetworkPolicy's port range.
	AgentPortEnd int32

	SessionTLSSecret   string
	SessionTokenSecret string
	SessionTokenKey    string
	SessionServerName  string

	// CalibandResources holds only the entries that are set; a map with no
	// entries is nil so the rendered container omits it.
	CalibandResources corev1.ResourceRequirements

	// ClusterDomain carries no trailing dot.
	ClusterDomain string
	// IngressNamespace is "" for the task's own namespace.
	IngressNamespace string
	// IngressPodSelector is nil when empty (every pod of the peer namespace).
	IngressPodSelector map[string]string
	// DNSNamespace and DNSPodSelector name the cluster's DNS pods, the only
	// destination of the agents' port 53: DNS open to every address would
	// be a tunnel past the egress allow-list. DNSPodSelector is nil when
	// set blank (every pod of DNSNamespace).
	DNSNamespace   string
	DNSPodSelector map[string]string

	AgentSeccompProfile corev1.SeccompProfileType
}

// The agent images of an empty environment: a release of each by tag,
// never "latest", which Kubernetes pulls Always and which names whatever
// was pushed last. A tag without a digest is pulled IfNotPresent. Releases
// run them pinned by digest (hack/release/agent-images.txt, ADR 0031);
// CALIBAND_IMAGE and CALIBAN_GIT_IMAGE override either.
const (
	// DefaultCalibandImage is caliban's release by its image tag (caliban
	// tags its images with the bare semantic version).
	DefaultCalibandImage = "ghcr.io/caliban-ai/caliban:0.15.0"
	// DefaultGitImage is alpine/git's build of git 2.54.0 (alpine/git tags
	// v<git version>). A community image: the clone step mounts every
	// private source's credentials into it, so releases pin its digest.
	DefaultGitImage = "alpine/git:v2.54.0"
)

// DefaultAgentSettings is the agent contract of an empty environment.
func DefaultAgentSettings() AgentSettings {
	return AgentSettings{
		CalibandImage:      DefaultCalibandImage,
		GitImage:           DefaultGitImage,
		WorkspaceRoot:      "/work",
		WorkspaceStorage:   resource.MustParse("10Gi"),
		AgentUID:           10001,
		AgentGID:           10001,
		CalibandPort:       8443,
		AgentPortBase:      7100,
		AgentPortEnd:       7999,
		SessionTLSSecret:   "caliban-session-plane-tls",
		SessionTokenSecret: "caliban-session-plane-token",
		SessionTokenKey:    "token",
		SessionServerName:  "caliband",
		CalibandResources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("250m"),
				corev1.ResourceMemory: resource.MustParse("512Mi"),
			},
		},
		ClusterDomain:       defaultClusterDomain,
		DNSNamespace:        "kube-system",
		DNSPodSelector:      map[string]string{"k8s-app": "kube-dns"},
		AgentSeccompProfile: corev1.SeccompProfileTypeRuntimeDefault,
	}
}

// parseAgentSettings reads the agent variables alone, with Parse's rules;
// on error the AgentSettings is the zero value.
func parseAgentSettings(lookup func(string) (string, bool)) (AgentSettings, error) {
	p := newEnvParser(lookup)
	s := p.agent()
	if len(p.errs) > 0 {
		return AgentSettings{}, errors.Join(p.errs...)
	}
	return s, nil
}

func (p *envParser) agent() AgentSettings {
	s := DefaultAgentSettings()
	p.nonBlank(EnvCalibandImage, &s.CalibandImage)
	p.nonBlank(EnvGitImage, &s.GitImage)
	p.workspaceRoot(&s.WorkspaceRoot)
	p.positiveQuantity(EnvWorkspaceStorage, &s.WorkspaceStorage)
	p.id(EnvAgentUID, &s.AgentUID)
	p.id(EnvAgentGID, &s.AgentGID)
	p.ports(&s)

	p.objectName(EnvSessionTLSSecret, &s.SessionTLSSecret)
	p.objectName(EnvSessionTokenSecret, &s.SessionTokenSecret)
	p.secretKey(EnvSessionTokenKey, &s.SessionTokenKey)
	p.serverName(EnvSessionServerName, &s.SessionServerName)
	p.resources(&s.CalibandResources)

	p.clusterDomain(&s.ClusterDomain)
	p.namespace(EnvIngressNamespace, &s.IngressNamespace)
	p.podSelector(EnvIngressPodSelector, &s.IngressPodSelector)
	p.dnsNamespace(&s.DNSNamespace)
	p.podSelector(EnvDNSPodSelector, &s.DNSPodSelector)
	p.seccompProfile(&s.AgentSeccompProfile)
	return s
}

// resourceVars pairs each request with its limit.
var resourceVars = []struct {
	request, limit string
	resource       corev1.ResourceName
}{
	{EnvCalibandCPURequest, EnvCalibandCPULimit, corev1.ResourceCPU},
	{EnvCalibandMemoryRequest, EnvCalibandMemoryLimit, corev1.ResourceMemory},
}

func (p *envParser) workspaceRoot(dst *string) {
	v, found, _ := p.present(EnvWorkspaceRoot)
	if !found {
		return
	}
	if !path.IsAbs(v) {
		p.fail("%s %q is not an absolute path", EnvWorkspaceRoot, v)
		return
	}
	*dst = path.Clean(v)
}

// ports checks the window rules only on ports that are individually valid,
// so a typo in one is reported once, not also as a window problem.
func (p *envParser) ports(s *AgentSettings) {
	portOK := p.port(EnvCalibandPort, &s.CalibandPort)
	baseOK := p.port(EnvAgentPortBase, &s.AgentPortBase)
	endOK := p.port(EnvAgentPortEnd, &s.AgentPortEnd)
	if !baseOK || !endOK {
		return
	}
	if s.AgentPortBase > s.AgentPortEnd {
		p.fail("agent port window is empty: %s %d > %s %d", EnvAgentPortBase, s.AgentPortBase, EnvAgentPortEnd, s.AgentPortEnd)
		return
	}
	if portOK && s.CalibandPort >= s.AgentPortBase && s.CalibandPort <= s.AgentPortEnd {
		p.fail("%s %d falls inside the agent port window %d-%d", EnvCalibandPort, s.CalibandPort, s.AgentPortBase, s.AgentPortEnd)
	}
}

func (p *envParser) resources(dst *corev1.ResourceRequirements) {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	maps.Copy(requests, dst.Requests)
	maps.Copy(limits, dst.Limits)
	// Requests first, then limits, as in
	// docs/deploying.md#the-order-of-checks.
	ok := map[string]bool{}
	for _, rv := range resourceVars {
		ok[rv.request] = p.resource(rv.request, rv.resource, requests)
	}
	for _, rv := range resourceVars {
		ok[rv.limit] = p.resource(rv.limit, rv.resource, limits)
	}
	for _, rv := range resourceVars {
		req, hasReq := requests[rv.resource]
		lim, hasLim := limits[rv.resource]
		if ok[rv.request] && ok[rv.limit] && hasReq && hasLim && req.Cmp(lim) > 0 {
			note := ""
			if !p.lookupSet(rv.request) {
				note = " (the default)"
			}
			p.fail("%s %s%s is greater than %s %s", rv.request, req.String(), note, rv.limit, lim.String())
		}
	}
	dst.Requests, dst.Limits = nil, nil
	if len(requests) > 0 {
		dst.Requests = requests
	}
	if len(limits) > 0 {
		dst.Limits = limits
	}
}

// resource applies one CALIBAND_*_REQUEST/_LIMIT variable to list: unset
// keeps the entry, blank deletes it, anything else must be a non-negative
// quantity.
func (p *envParser) resource(name string, r corev1.ResourceName, list corev1.ResourceList) bool {
	v, set := p.get(name)
	switch {
	case !set:
		return true
	case v == "":
		delete(list, r)
		return true
	}
	q, ok := p.quantity(name, v)
	if !ok {
		return false
	}
	if q.Sign() < 0 {
		p.fail("%s %q must not be negative", name, v)
		return false
	}
	list[r] = q
	return true
}

func (p *envParser) clusterDomain(dst *string) {
	v := strings.TrimSuffix(p.optional(EnvClusterDomain), ".")
	if v == "" {
		return
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		p.fail("%s %q is not a DNS domain: %s", EnvClusterDomain, v, strings.Join(errs, "; "))
		return
	}
	*dst = v
}

// dnsNamespace refuses a blank value, unlike CALIBAN_INGRESS_NAMESPACE,
// where blank means the task's own namespace: the DNS pods are never there,
// and a blank that silently meant kube-system would hide a templating
// mistake.
func (p *envParser) dnsNamespace(dst *string) {
	if _, found, _ := p.present(EnvDNSNamespace); found {
		p.namespace(EnvDNSNamespace, dst)
	}
}

// podSelector parses "k=v,k2=v2". Unset keeps the default; blank is nil,
// every pod (of the ingress peer's or the DNS namespace). Every entry,
// including an empty one left by a stray comma, must be key=value: a
// selector that silently matched more pods than written would widen the
// NetworkPolicy.
func (p *envParser) podSelector(name string, dst *map[string]string) {
	v, set := p.get(name)
	if !set {
		return
	}
	if v == "" {
		*dst = nil
		return
	}
	sel := map[string]string{}
	ok := true
	for _, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		key, value, found := strings.Cut(entry, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !found || key == "" {
			p.fail("%s: bad selector entry '%s' (want key=value)", name, quoteInner(entry))
			ok = false
			continue
		}
		if errs := content.IsLabelKey(key); len(errs) > 0 {
			p.fail("%s: bad selector entry '%s': key is not a valid label key: %s", name, quoteInner(entry), strings.Join(errs, "; "))
			ok = false
			continue
		}
		if errs := content.IsLabelValue(value); len(errs) > 0 {
			p.fail("%s: bad selector entry '%s': value is not a valid label value: %s", name, quoteInner(entry), strings.Join(errs, "; "))
			ok = false
			continue
		}
		if prev, dup := sel[key]; dup && prev != value {
			p.fail("%s: key '%s' is given twice with different values", name, key)
			ok = false
			continue
		}
		sel[key] = value
	}
	if ok {
		*dst = sel
	}
}

func (p *envParser) seccompProfile(dst *corev1.SeccompProfileType) {
	v, found, _ := p.present(EnvAgentSeccompProfile)
	if !found {
		return
	}
	switch t := corev1.SeccompProfileType(v); t {
	case corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
		*dst = t
	default:
		p.fail("%s %q is not one of: %s, %s", EnvAgentSeccompProfile, v,
			corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined)
	}
}

func (p *envParser) id(name string, dst *int64) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	if n, ok := p.integer(name, v, 64, 1, maxID); ok {
		*dst = n
	}
}

func (p *envParser) positiveQuantity(name string, dst *resource.Quantity) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	q, ok := p.quantity(name, v)
	if !ok {
		return
	}
	if q.Sign() <= 0 {
		p.fail("%s %q must be positive", name, v)
		return
	}
	*dst = q
}

// serverName must be a DNS name because caliband compares it with the
// serving certificate's SANs; anything else can never verify.
func (p *envParser) serverName(name string, dst *string) {
	p.dnsSubdomain(name, dst, "a DNS name")
}

func (p *envParser) secretKey(name string, dst *string) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	if errs := validation.IsConfigMapKey(v); len(errs) > 0 {
		p.fail("%s %q is not a valid Secret key: %s", name, v, strings.Join(errs, "; "))
		return
	}
	*dst = v
}
