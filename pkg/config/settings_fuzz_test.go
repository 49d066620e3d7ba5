// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"math"
	"net"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParse sets up to three variables to arbitrary values. Whatever they
// are, Parse must not panic, must answer the same twice, and must either
// refuse with problems that each name their variable, or return Settings
// that keep every rule it promises.
func FuzzParse(f *testing.F) {
	index := func(name string) uint8 {
		for i, n := range settingsNames {
			if n == name {
				return uint8(i)
			}
		}
		panic(name)
	}
	for _, seed := range []struct {
		a, b, c      string
		va, vb, vc   string
		podNamespace string
	}{
		{"CALIBAND_PORT", "CALIBAN_AGENT_PORT_BASE", "CALIBAN_AGENT_PORT_END", "7500", "7000", "8000", "ns"},
		{"CALIBAND_PORT", "CALIBAN_AGENT_PORT_BASE", "CALIBAN_AGENT_PORT_END", "99999999999999999999", "-1", "x", ""},
		{"CALIBAND_CPU_REQUEST", "CALIBAND_CPU_LIMIT", "CALIBAND_MEMORY_REQUEST", "2", "1", "", "ns"},
		{"CALIBAND_MEMORY_LIMIT", "CALIBAND_MEMORY_REQUEST", "CALIBAND_CPU_REQUEST", "1e3", "1e400", "-0", "ns"},
		{"CALIBAN_INGRESS_POD_SELECTOR", "CALIBAN_INGRESS_NAMESPACE", "CALIBAN_WATCH_NAMESPACE", "a=b,c=\n,=", "A", "ns-1", "ns"},
		{"CALIBAN_DNS_POD_SELECTOR", "CALIBAN_DNS_NAMESPACE", "CALIBAN_INGRESS_POD_SELECTOR", "k8s-app=kube-dns,", " ", "", "ns"},
		{"CALIBAN_LEADER_ELECTION", "CALIBAN_LEASE_NAMESPACE", "CALIBAN_LEASE_NAME", "off", "", " ", ""},
		{"CALIBAN_LEASE_DURATION_SECONDS", "CALIBAN_LEASE_GRACE_SECONDS", "POD_NAME", "9223372036", "9223372035", "\x00", "ns"},
		{"CALIBAN_METRICS_BIND_ADDRESS", "CALIBAN_KUBE_API_QPS", "CALIBAN_LOG_VERBOSITY", "[fe80::1%eth0]:80", "NaN", "2147483647", "ns"},
		{"CALIBAN_WORKSPACE_ROOT", "CALIBAN_WORKSPACE_STORAGE", "CALIBAN_CLUSTER_DOMAIN", "/a/../..", "1E", "..", "ns"},
		{"CALIBAN_WORKSPACE_STORAGE", "CALIBAND_CPU_REQUEST", "CALIBAND_CPU_LIMIT", "1e999999999", "1e-999999999", "1e30", "ns"},
		{"CALIBAN_AGENT_SECCOMP_PROFILE", "CALIBAN_LOG_FORMAT", "HOSTNAME", "Unconfined", "json", "h", "ns"},
		{"CALIBAN_SESSION_TOKEN_KEY", "CALIBAN_SESSION_SERVER_NAME", "CALIBAN_SESSION_TLS_SECRET", "..", "*.x", "s", "ns"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_TRACES_SAMPLER_ARG", "http://[::1]:4317/x", "grpc", "1e-400", "ns"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_RESOURCE_ATTRIBUTES", "https://h?", "traceidratio", "a=%2,b", "ns"},
		{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "True", "none", "\n", "ns"},
	} {
		f.Add(index(seed.a), seed.va, index(seed.b), seed.vb, index(seed.c), seed.vc, seed.podNamespace)
	}
	f.Fuzz(func(t *testing.T, a uint8, va string, b uint8, vb string, c uint8, vc string, podNamespace string) {
		env := map[string]string{}
		for _, kv := range []struct {
			i uint8
			v string
		}{{a, va}, {b, vb}, {c, vc}} {
			env[settingsNames[int(kv.i)%len(settingsNames)]] = kv.v
		}
		got, err := Parse(settingsEnv(env), podNamespace)
		again, errAgain := Parse(settingsEnv(env), podNamespace)
		if diff := cmp.Diff(got, again); diff != "" || (err == nil) != (errAgain == nil) ||
			(err != nil && err.Error() != errAgain.Error()) {
			t.Fatalf("env %q: two answers:\n%v\n%v\n%s", env, err, errAgain, diff)
		}
		if err != nil {
			for _, line := range settingsErrorLines(err) {
				if !settingsLineNamesAVariable(line) {
					t.Errorf("env %q: problem does not start with a variable name: %q", env, line)
				}
			}
			if diff := cmp.Diff(Settings{}, got); diff != "" {
				t.Errorf("env %q: settings returned with an error:\n%s", env, diff)
			}
			return
		}
		for _, problem := range settingsProblems(got) {
			t.Errorf("env %q, pod namespace %q: accepted, but %s", env, podNamespace, problem)
		}
	})
}

func settingsLineNamesAVariable(line string) bool {
	if strings.HasPrefix(line, "agent port window is empty: CALIBAN_AGENT_PORT_BASE ") {
		return true
	}
	for _, name := range settingsNames {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+":") {
			return true
		}
	}
	return false
}

// settingsProblems restates Parse's promises about an accepted Settings,
// independently of how it keeps them.
func settingsProblems(s Settings) []string {
	var problems []string
	check := func(ok bool, problem string) {
		if !ok {
			problems = append(problems, problem)
		}
	}
	check(strings.TrimSpace(s.CalibandImage) != "" && strings.TrimSpace(s.GitImage) != "", "an image is blank")
	check(path.IsAbs(s.WorkspaceRoot) && path.Clean(s.WorkspaceRoot) == s.WorkspaceRoot, "the workspace root is not absolute and clean")
	check(s.WorkspaceStorage.Sign() > 0, "the workspace storage is not positive")
	check(s.AgentUID > 0 && s.AgentUID <= math.MaxInt32 && s.AgentGID > 0 && s.AgentGID <= math.MaxInt32, "uid/gid out of range")
	for _, p := range []int32{s.CalibandPort, s.AgentPortBase, s.AgentPortEnd} {
		check(p >= 1 && p <= 65535, "a port is outside 1-65535")
	}
	check(s.AgentPortBase <= s.AgentPortEnd, "the agent port window is empty")
	check(s.CalibandPort < s.AgentPortBase || s.CalibandPort > s.AgentPortEnd, "the control port is in the agent window")
	check(len(validation.IsDNS1123Subdomain(s.SessionTLSSecret)) == 0 && len(validation.IsDNS1123Subdomain(s.SessionTokenSecret)) == 0,
		"a session Secret name is invalid")
	check(len(validation.IsConfigMapKey(s.SessionTokenKey)) == 0, "the token key is invalid")
	check(len(validation.IsDNS1123Subdomain(s.SessionServerName)) == 0, "the server name is invalid")
	for _, list := range []corev1.ResourceList{s.CalibandResources.Requests, s.CalibandResources.Limits} {
		check(list == nil || len(list) > 0, "an empty, non-nil resource list")
		for _, q := range list {
			check(q.Sign() >= 0, "a negative resource")
		}
	}
	for r, req := range s.CalibandResources.Requests {
		if lim, ok := s.CalibandResources.Limits[r]; ok {
			check(req.Cmp(lim) <= 0, "a request is above its limit")
		}
	}
	check(s.ClusterDomain != "" && !strings.HasSuffix(s.ClusterDomain, ".") && len(validation.IsDNS1123Subdomain(s.ClusterDomain)) == 0,
		"the cluster domain is invalid")
	for _, ns := range []string{s.IngressNamespace, s.LeaseNamespace, s.WatchNamespace} {
		check(ns == "" || len(validation.IsDNS1123Label(ns)) == 0, "a namespace is invalid")
	}
	check(len(validation.IsDNS1123Label(s.DNSNamespace)) == 0, "the DNS namespace is blank or invalid")
	for _, sel := range []map[string]string{s.IngressPodSelector, s.DNSPodSelector} {
		check(sel == nil || len(sel) > 0, "an empty, non-nil pod selector")
		for k, v := range sel {
			check(len(content.IsLabelKey(k)) == 0 && len(content.IsLabelValue(v)) == 0, "a selector entry is invalid")
		}
	}
	check(!s.LeaderElection || s.LeaseNamespace != "", "leader election without a lease namespace")
	check(len(validation.IsDNS1123Subdomain(s.LeaseName)) == 0, "the lease name is invalid")
	check(s.LeaseGrace > 0 && s.LeaseGrace < s.LeaseDuration, "the lease timing is invalid")
	check(s.PodName != "" && strings.TrimSpace(s.PodName) == s.PodName, "the pod name is blank or untrimmed")
	check(s.AgentSeccompProfile == corev1.SeccompProfileTypeRuntimeDefault || s.AgentSeccompProfile == corev1.SeccompProfileTypeUnconfined,
		"the seccomp profile is not allowed")
	if s.MetricsBindAddress != "" {
		_, _, err := net.SplitHostPort(s.MetricsBindAddress)
		check(err == nil, "the metrics address is not host:port")
	}
	check(s.Workers >= 1 && s.KubeAPIBurst >= 1 && s.LogVerbosity >= 0 && s.LogVerbosity <= math.MaxInt32, "a count is out of range")
	check(s.KubeAPIQPS == NoClientRateLimit || s.KubeAPIQPS > 0 && !math.IsInf(float64(s.KubeAPIQPS), 0), "the QPS is neither -1 nor positive and finite")
	check(s.LogFormat == "text" || s.LogFormat == "json", "the log format is unknown")
	tr := s.Tracing
	check(tr.Enabled() == (tr.Off == ""), "tracing is both on and off")
	if tr.Enabled() {
		u, err := url.Parse(tr.Endpoint)
		check(err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Hostname() != "" && u.User == nil && u.RawQuery == "",
			"the OTLP endpoint is not a plain http(s) URL")
		check(tr.EndpointVariable == EnvOTLPEndpoint || tr.EndpointVariable == EnvOTLPTracesEndpoint, "the endpoint's variable is unknown")
	}
	check(tr.Protocol == TracingProtocolGRPC || tr.Protocol == TracingProtocolHTTPProtobuf, "the OTLP protocol is unsupported")
	check(slices.Contains(samplers, tr.Sampler), "the sampler is unknown")
	check(tr.SamplerRatio >= 0 && tr.SamplerRatio <= 1, "the sampler ratio is outside [0,1]")
	check(tr.SamplerRatio == 1 || tr.Sampler == SamplerTraceIDRatio || tr.Sampler == SamplerParentBasedTraceIDRatio,
		"a ratio is kept for a sampler that takes none")
	check(tr.ServiceName != "", "the service name is empty")
	return problems
}
