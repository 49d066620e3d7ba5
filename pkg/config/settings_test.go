// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// settingsNames is every variable of docs/deploying.md#configuration, plus
// HOSTNAME (POD_NAME's fallback), spelled out here rather than taken from the
// constants so that a renamed constant fails the tests.
var settingsNames = []string{
	"CALIBAND_IMAGE", "CALIBAN_GIT_IMAGE", "CALIBAN_WORKSPACE_ROOT", "CALIBAN_WORKSPACE_STORAGE",
	"CALIBAN_AGENT_UID", "CALIBAN_AGENT_GID", "CALIBAND_PORT", "CALIBAN_AGENT_PORT_BASE", "CALIBAN_AGENT_PORT_END",
	"CALIBAN_SESSION_TLS_SECRET", "CALIBAN_SESSION_TOKEN_SECRET", "CALIBAN_SESSION_TOKEN_KEY", "CALIBAN_SESSION_SERVER_NAME",
	"CALIBAND_CPU_REQUEST", "CALIBAND_MEMORY_REQUEST", "CALIBAND_CPU_LIMIT", "CALIBAND_MEMORY_LIMIT",
	"CALIBAN_CLUSTER_DOMAIN", "CALIBAN_INGRESS_NAMESPACE", "CALIBAN_INGRESS_POD_SELECTOR",
	"CALIBAN_DNS_NAMESPACE", "CALIBAN_DNS_POD_SELECTOR",
	"CALIBAN_LEADER_ELECTION", "CALIBAN_LEASE_NAME", "CALIBAN_LEASE_NAMESPACE",
	"CALIBAN_LEASE_DURATION_SECONDS", "CALIBAN_LEASE_GRACE_SECONDS", "POD_NAME", "HOSTNAME", "CONTROLLER_POD_NAME",
	"CALIBAN_AGENT_SECCOMP_PROFILE", "CALIBAN_METRICS_BIND_ADDRESS", "CALIBAN_WORKERS",
	"CALIBAN_KUBE_API_QPS", "CALIBAN_KUBE_API_BURST", "CALIBAN_KUBE_API_COMPRESSION", "CALIBAN_LOG_VERBOSITY", "CALIBAN_LOG_FORMAT",
	"CALIBAN_WATCH_NAMESPACE", "CALIBAN_RESYNC_SECONDS", "CALIBAN_PPROF_BIND_ADDRESS",
	"CALIBAN_DRAIN_TIMEOUT_SECONDS", "CALIBAN_PIN_KEY_SECRET",
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
	"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
}

const settingsPodNamespace = "caliban-system"

func settingsEnv(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

// settingsErrorLines splits a joined error into its problems.
func settingsErrorLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// settingsMatchLines lets an expected line ending in "..." match any line
// it prefixes: the tail is apimachinery's own wording, which may change
// between releases without the operator's contract changing.
func settingsMatchLines(want, got []string) []string {
	out := slices.Clone(got)
	for i := range out {
		if i < len(want) && strings.HasSuffix(want[i], "...") && strings.HasPrefix(out[i], strings.TrimSuffix(want[i], "...")) {
			out[i] = want[i]
		}
	}
	return out
}

func TestDefault(t *testing.T) {
	want := Settings{
		AgentSettings: AgentSettings{
			CalibandImage:      "ghcr.io/caliban-ai/caliban:0.15.0",
			GitImage:           "alpine/git:v2.54.0",
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
			CalibandResources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("250m"),
				corev1.ResourceMemory: resource.MustParse("512Mi"),
			}},
			ClusterDomain:       "cluster.local",
			DNSNamespace:        "kube-system",
			DNSPodSelector:      map[string]string{"k8s-app": "kube-dns"},
			AgentSeccompProfile: corev1.SeccompProfileTypeRuntimeDefault,
		},
		ProcessSettings: ProcessSettings{
			LeaderElection:     true,
			LeaseName:          "caliban-operator",
			LeaseDuration:      15 * time.Second,
			LeaseGrace:         5 * time.Second,
			PodName:            "caliban-operator",
			MetricsBindAddress: ":8080",
			Workers:            32,
			KubeAPIQPS:         -1,
			KubeAPIBurst:       100,
			LogVerbosity:       0,
			LogFormat:          "text",
			ResyncPeriod:       300 * time.Second,
			TaskDrainTimeout:   600 * time.Second,
			PinKeySecret:       "caliban-pin-key",
			Tracing: TracingSettings{
				Protocol:     "http/protobuf",
				Sampler:      "parentbased_always_on",
				SamplerRatio: 1,
				ServiceName:  "caliban-operator",
				Off:          "neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set",
				Export:       OTLPExport{Timeout: 10 * time.Second},
			},
		},
	}
	t.Run("defaults() matches the Default columns of the configuration tables", func(t *testing.T) {
		if diff := cmp.Diff(want, defaults()); diff != "" {
			t.Errorf("defaults() (-want +got):\n%s", diff)
		}
	})
	t.Run("an empty environment in a cluster gives the defaults and the pod's namespace for the lease", func(t *testing.T) {
		got, err := Parse(settingsEnv(nil), settingsPodNamespace)
		if err != nil {
			t.Fatal(err)
		}
		want := want
		want.LeaseNamespace = settingsPodNamespace
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Parse (-want +got):\n%s", diff)
		}
	})
	t.Run("the defaults keep every rule the fuzzer checks", func(t *testing.T) {
		s := defaults()
		s.LeaseNamespace = settingsPodNamespace
		if problems := settingsProblems(s); len(problems) > 0 {
			t.Errorf("problems: %v", problems)
		}
	})
	t.Run("a nil lookup reads an empty environment", func(t *testing.T) {
		got, err := Parse(nil, settingsPodNamespace)
		if err != nil {
			t.Fatal(err)
		}
		if got.LeaseNamespace != settingsPodNamespace || got.CalibandPort != 8443 {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("defaults are not shared between calls", func(t *testing.T) {
		a := defaults()
		a.CalibandResources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
		if diff := cmp.Diff(want, defaults()); diff != "" {
			t.Errorf("a caller's change leaked into the defaults (-want +got):\n%s", diff)
		}
	})
}

func TestParseReadsEveryVariable(t *testing.T) {
	read := map[string]bool{}
	_, _ = Parse(func(name string) (string, bool) {
		read[name] = true
		return "", false
	}, settingsPodNamespace)
	var got []string
	for name := range read {
		got = append(got, name)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(settingsNames))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("variables read (-want +got):\n%s", diff)
	}
}

func TestParse(t *testing.T) {
	tests := map[string]struct {
		// inputs
		env          map[string]string
		podNamespace string
		// expected: the defaults (lease namespace = podNamespace) changed by want
		want func(s *Settings)
	}{
		"values are trimmed": {
			env:  map[string]string{"CALIBAND_PORT": " 9000\n", "CALIBAND_IMAGE": "\treg.example/caliban:1 "},
			want: func(s *Settings) { s.CalibandPort = 9000; s.CalibandImage = "reg.example/caliban:1" },
		},
		"images are taken as given": {
			env:  map[string]string{"CALIBAND_IMAGE": "caliban@sha256:abc", "CALIBAN_GIT_IMAGE": "git:2"},
			want: func(s *Settings) { s.CalibandImage = "caliban@sha256:abc"; s.GitImage = "git:2" },
		},
		"the workspace root is cleaned": {
			env:  map[string]string{"CALIBAN_WORKSPACE_ROOT": "/srv//ws/../work/"},
			want: func(s *Settings) { s.WorkspaceRoot = "/srv/work" },
		},
		"the workspace root may be the filesystem root": {
			env:  map[string]string{"CALIBAN_WORKSPACE_ROOT": "/"},
			want: func(s *Settings) { s.WorkspaceRoot = "/" },
		},
		"the workspace storage is a quantity": {
			env:  map[string]string{"CALIBAN_WORKSPACE_STORAGE": "50Gi"},
			want: func(s *Settings) { s.WorkspaceStorage = resource.MustParse("50Gi") },
		},
		"exponents within ±30 and the exa suffixes are quantities": {
			env: map[string]string{"CALIBAN_WORKSPACE_STORAGE": "1e30", "CALIBAND_CPU_REQUEST": "1e-30", "CALIBAND_MEMORY_REQUEST": "1Ei", "CALIBAND_MEMORY_LIMIT": "2E"},
			want: func(s *Settings) {
				s.WorkspaceStorage = resource.MustParse("1e30")
				s.CalibandResources.Requests = corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1e-30"), corev1.ResourceMemory: resource.MustParse("1Ei"),
				}
				s.CalibandResources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2E")}
			},
		},
		"the agent uid and gid are set apart": {
			env:  map[string]string{"CALIBAN_AGENT_UID": "2000", "CALIBAN_AGENT_GID": "3000"},
			want: func(s *Settings) { s.AgentUID = 2000; s.AgentGID = 3000 },
		},
		"the largest uid the API accepts is allowed": {
			env:  map[string]string{"CALIBAN_AGENT_UID": "2147483647"},
			want: func(s *Settings) { s.AgentUID = 2147483647 },
		},
		"a window of one port is allowed": {
			env:  map[string]string{"CALIBAN_AGENT_PORT_BASE": "7100", "CALIBAN_AGENT_PORT_END": "7100"},
			want: func(s *Settings) { s.AgentPortEnd = 7100 },
		},
		"the control port just below the window is allowed": {
			env:  map[string]string{"CALIBAND_PORT": "7099"},
			want: func(s *Settings) { s.CalibandPort = 7099 },
		},
		"the control port just above the window is allowed": {
			env:  map[string]string{"CALIBAND_PORT": "8000"},
			want: func(s *Settings) { s.CalibandPort = 8000 },
		},
		"ports at the ends of the range are allowed": {
			env:  map[string]string{"CALIBAND_PORT": "65535", "CALIBAN_AGENT_PORT_BASE": "1", "CALIBAN_AGENT_PORT_END": "65534"},
			want: func(s *Settings) { s.CalibandPort = 65535; s.AgentPortBase = 1; s.AgentPortEnd = 65534 },
		},
		"the session plane's names are set": {
			env: map[string]string{
				"CALIBAN_SESSION_TLS_SECRET": "tls", "CALIBAN_SESSION_TOKEN_SECRET": "tok",
				"CALIBAN_SESSION_TOKEN_KEY": "bearer.txt", "CALIBAN_SESSION_SERVER_NAME": "caliband.session.local",
			},
			want: func(s *Settings) {
				s.SessionTLSSecret, s.SessionTokenSecret = "tls", "tok"
				s.SessionTokenKey, s.SessionServerName = "bearer.txt", "caliband.session.local"
			},
		},
		"blank requests clear the defaults and leave no requests map": {
			env:  map[string]string{"CALIBAND_CPU_REQUEST": "", "CALIBAND_MEMORY_REQUEST": "  "},
			want: func(s *Settings) { s.CalibandResources = corev1.ResourceRequirements{} },
		},
		"clearing one request keeps the other": {
			env: map[string]string{"CALIBAND_CPU_REQUEST": ""},
			want: func(s *Settings) {
				s.CalibandResources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}
			},
		},
		"limits are added beside the default requests": {
			env: map[string]string{"CALIBAND_CPU_LIMIT": "1", "CALIBAND_MEMORY_LIMIT": "1Gi"},
			want: func(s *Settings) {
				s.CalibandResources.Limits = corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
				}
			},
		},
		"a request equal to its limit is allowed": {
			env: map[string]string{"CALIBAND_CPU_REQUEST": "500m", "CALIBAND_CPU_LIMIT": "0.5"},
			want: func(s *Settings) {
				s.CalibandResources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
				s.CalibandResources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
			},
		},
		"a blank limit is no limit": {
			env:  map[string]string{"CALIBAND_CPU_LIMIT": " "},
			want: func(s *Settings) {},
		},
		"clearing a request lets its limit sit below the old default": {
			env: map[string]string{"CALIBAND_CPU_REQUEST": "", "CALIBAND_CPU_LIMIT": "100m"},
			want: func(s *Settings) {
				s.CalibandResources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}
				s.CalibandResources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
			},
		},
		"a zero request is allowed": {
			env:  map[string]string{"CALIBAND_CPU_REQUEST": "0"},
			want: func(s *Settings) { s.CalibandResources.Requests[corev1.ResourceCPU] = resource.MustParse("0") },
		},
		"the cluster domain loses its trailing dot": {
			env:  map[string]string{"CALIBAN_CLUSTER_DOMAIN": "corp.example."},
			want: func(s *Settings) { s.ClusterDomain = "corp.example" },
		},
		"a blank cluster domain keeps the default": {
			env:  map[string]string{"CALIBAN_CLUSTER_DOMAIN": "  "},
			want: func(s *Settings) {},
		},
		"a cluster domain of only a dot keeps the default": {
			env:  map[string]string{"CALIBAN_CLUSTER_DOMAIN": "."},
			want: func(s *Settings) {},
		},
		"an ingress namespace and pod selector are parsed and trimmed": {
			env: map[string]string{
				"CALIBAN_INGRESS_NAMESPACE":    "prospero",
				"CALIBAN_INGRESS_POD_SELECTOR": " app = prospero , example.com/tier=control-plane ",
			},
			want: func(s *Settings) {
				s.IngressNamespace = "prospero"
				s.IngressPodSelector = map[string]string{"app": "prospero", "example.com/tier": "control-plane"}
			},
		},
		"a selector entry may have an empty value": {
			env:  map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "app="},
			want: func(s *Settings) { s.IngressPodSelector = map[string]string{"app": ""} },
		},
		"a selector entry repeated with the same value is harmless": {
			env:  map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "app=a,app=a"},
			want: func(s *Settings) { s.IngressPodSelector = map[string]string{"app": "a"} },
		},
		"a blank selector and namespaces are the same as unset": {
			env: map[string]string{
				"CALIBAN_INGRESS_POD_SELECTOR": " ", "CALIBAN_INGRESS_NAMESPACE": "",
				"CALIBAN_WATCH_NAMESPACE": " ", "CALIBAN_LEASE_NAMESPACE": "",
			},
			want: func(s *Settings) {},
		},
		"a DNS namespace and pod selector are parsed and trimmed": {
			env: map[string]string{
				"CALIBAN_DNS_NAMESPACE":    " openshift-dns ",
				"CALIBAN_DNS_POD_SELECTOR": " dns.operator.openshift.io/daemonset-dns = default ",
			},
			want: func(s *Settings) {
				s.DNSNamespace = "openshift-dns"
				s.DNSPodSelector = map[string]string{"dns.operator.openshift.io/daemonset-dns": "default"}
			},
		},
		"a blank DNS pod selector selects every pod of the DNS namespace": {
			env:  map[string]string{"CALIBAN_DNS_POD_SELECTOR": " "},
			want: func(s *Settings) { s.DNSPodSelector = nil },
		},
		"yes turns leader election on": {
			env:  map[string]string{"CALIBAN_LEADER_ELECTION": "yes"},
			want: func(s *Settings) {},
		},
		"an upper-case, padded OFF turns leader election off": {
			env:  map[string]string{"CALIBAN_LEADER_ELECTION": " OFF "},
			want: func(s *Settings) { s.LeaderElection = false },
		},
		"0 turns leader election off": {
			env:  map[string]string{"CALIBAN_LEADER_ELECTION": "0"},
			want: func(s *Settings) { s.LeaderElection = false },
		},
		"False turns leader election off": {
			env:  map[string]string{"CALIBAN_LEADER_ELECTION": "False"},
			want: func(s *Settings) { s.LeaderElection = false },
		},
		"no turns leader election off": {
			env:  map[string]string{"CALIBAN_LEADER_ELECTION": "no"},
			want: func(s *Settings) { s.LeaderElection = false },
		},
		"On turns leader election on": {
			env:  map[string]string{"CALIBAN_LEADER_ELECTION": "On"},
			want: func(s *Settings) {},
		},
		"the lease is named and timed": {
			env: map[string]string{
				"CALIBAN_LEASE_NAME": "my-lease", "CALIBAN_LEASE_NAMESPACE": "ops",
				"CALIBAN_LEASE_DURATION_SECONDS": "30", "CALIBAN_LEASE_GRACE_SECONDS": "29",
			},
			want: func(s *Settings) {
				s.LeaseName, s.LeaseNamespace = "my-lease", "ops"
				s.LeaseDuration, s.LeaseGrace = 30*time.Second, 29*time.Second
			},
		},
		"outside a cluster the lease namespace comes from the environment": {
			env:          map[string]string{"CALIBAN_LEASE_NAMESPACE": "ops"},
			podNamespace: "-",
			want:         func(s *Settings) { s.LeaseNamespace = "ops" },
		},
		"outside a cluster without leader election no lease namespace is needed": {
			env:          map[string]string{"CALIBAN_LEADER_ELECTION": "false"},
			podNamespace: "-",
			want:         func(s *Settings) { s.LeaderElection = false; s.LeaseNamespace = "" },
		},
		"the pod namespace is trimmed": {
			podNamespace: "caliban-system\n",
			want:         func(s *Settings) {},
		},
		"POD_NAME names the lease holder": {
			env:  map[string]string{"POD_NAME": "op-7d9f", "HOSTNAME": "host"},
			want: func(s *Settings) { s.PodName = "op-7d9f" },
		},
		"HOSTNAME stands in for POD_NAME": {
			env:  map[string]string{"HOSTNAME": "host-1"},
			want: func(s *Settings) { s.PodName = "host-1" },
		},
		"a blank POD_NAME falls back to HOSTNAME": {
			env:  map[string]string{"POD_NAME": " ", "HOSTNAME": "host-1"},
			want: func(s *Settings) { s.PodName = "host-1" },
		},
		"a blank HOSTNAME falls back to the fixed name": {
			env:  map[string]string{"HOSTNAME": ""},
			want: func(s *Settings) {},
		},
		"CONTROLLER_POD_NAME is the event instance": {
			env:  map[string]string{"CONTROLLER_POD_NAME": "op-7d9f"},
			want: func(s *Settings) { s.ControllerPodName = "op-7d9f" },
		},
		"the agent seccomp profile may be Unconfined": {
			env:  map[string]string{"CALIBAN_AGENT_SECCOMP_PROFILE": "Unconfined"},
			want: func(s *Settings) { s.AgentSeccompProfile = corev1.SeccompProfileTypeUnconfined },
		},
		"0 disables metrics": {
			env:  map[string]string{"CALIBAN_METRICS_BIND_ADDRESS": "0"},
			want: func(s *Settings) { s.MetricsBindAddress = "" },
		},
		"metrics may bind an IPv4 address": {
			env:  map[string]string{"CALIBAN_METRICS_BIND_ADDRESS": "127.0.0.1:9090"},
			want: func(s *Settings) { s.MetricsBindAddress = "127.0.0.1:9090" },
		},
		"metrics may bind an IPv6 address": {
			env:  map[string]string{"CALIBAN_METRICS_BIND_ADDRESS": "[::]:8080"},
			want: func(s *Settings) { s.MetricsBindAddress = "[::]:8080" },
		},
		"metrics may bind a host name": {
			env:  map[string]string{"CALIBAN_METRICS_BIND_ADDRESS": "localhost:8080"},
			want: func(s *Settings) { s.MetricsBindAddress = "localhost:8080" },
		},
		"the client and logging knobs are read": {
			env: map[string]string{
				"CALIBAN_WORKERS": "8", "CALIBAN_KUBE_API_QPS": "12.5", "CALIBAN_KUBE_API_BURST": "1",
				"CALIBAN_KUBE_API_COMPRESSION": "on",
				"CALIBAN_LOG_VERBOSITY":        "4", "CALIBAN_LOG_FORMAT": "json", "CALIBAN_WATCH_NAMESPACE": "team-a",
			},
			want: func(s *Settings) {
				s.Workers, s.KubeAPIQPS, s.KubeAPIBurst, s.KubeAPICompression = 8, 12.5, 1, true
				s.LogVerbosity, s.LogFormat, s.WatchNamespace = 4, "json", "team-a"
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			podNamespace := test.podNamespace
			switch podNamespace {
			case "":
				podNamespace = settingsPodNamespace
			case "-":
				podNamespace = ""
			}
			want := defaults()
			want.LeaseNamespace = settingsPodNamespace
			test.want(&want)

			got, err := Parse(settingsEnv(test.env), podNamespace)
			if err != nil {
				t.Fatalf("unexpected error:\n%v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := map[string]struct {
		// inputs
		env          map[string]string
		podNamespace string // "-" for none
		// expected error, one problem per line ("..." ends a prefix)
		want []string
	}{
		// The example of docs/deploying.md#ports-and-networking.
		"a port inside the agent window is refused naming CALIBAND_PORT": {
			env:  map[string]string{"CALIBAND_PORT": "7500"},
			want: []string{"CALIBAND_PORT 7500 falls inside the agent port window 7100-7999"},
		},
		"a port at the window's base is inside it": {
			env:  map[string]string{"CALIBAND_PORT": "7100"},
			want: []string{"CALIBAND_PORT 7100 falls inside the agent port window 7100-7999"},
		},
		"a port at the window's end is inside it": {
			env:  map[string]string{"CALIBAND_PORT": "7999"},
			want: []string{"CALIBAND_PORT 7999 falls inside the agent port window 7100-7999"},
		},
		"a moved window that takes in the default port is refused": {
			env:  map[string]string{"CALIBAN_AGENT_PORT_BASE": "8000", "CALIBAN_AGENT_PORT_END": "9000"},
			want: []string{"CALIBAND_PORT 8443 falls inside the agent port window 8000-9000"},
		},
		"ports outside 1-65535 are refused naming each variable": {
			env: map[string]string{"CALIBAND_PORT": "70000", "CALIBAN_AGENT_PORT_BASE": "0", "CALIBAN_AGENT_PORT_END": "-5"},
			want: []string{
				"CALIBAND_PORT 70000 is outside 1-65535",
				"CALIBAN_AGENT_PORT_BASE 0 is outside 1-65535",
				"CALIBAN_AGENT_PORT_END -5 is outside 1-65535",
			},
		},
		"a port too large for any integer is out of range, not a non-integer": {
			env:  map[string]string{"CALIBAND_PORT": "99999999999999999999"},
			want: []string{"CALIBAND_PORT 99999999999999999999 is outside 1-65535"},
		},
		"a port that is not an integer is refused": {
			env:  map[string]string{"CALIBAND_PORT": "abc", "CALIBAN_AGENT_PORT_END": "7999.0"},
			want: []string{`CALIBAND_PORT "abc" is not an integer`, `CALIBAN_AGENT_PORT_END "7999.0" is not an integer`},
		},
		"a blank port is refused, not defaulted": {
			env:  map[string]string{"CALIBAND_PORT": " "},
			want: []string{"CALIBAND_PORT is set but blank"},
		},
		"an empty window is refused naming both ends": {
			env:  map[string]string{"CALIBAN_AGENT_PORT_BASE": "8000", "CALIBAN_AGENT_PORT_END": "7000"},
			want: []string{"agent port window is empty: CALIBAN_AGENT_PORT_BASE 8000 > CALIBAN_AGENT_PORT_END 7000"},
		},
		"an invalid window end is reported once, without window checks": {
			env:  map[string]string{"CALIBAND_PORT": "7500", "CALIBAN_AGENT_PORT_END": "x"},
			want: []string{`CALIBAN_AGENT_PORT_END "x" is not an integer`},
		},
		"a relative workspace root is refused": {
			env:  map[string]string{"CALIBAN_WORKSPACE_ROOT": "work"},
			want: []string{`CALIBAN_WORKSPACE_ROOT "work" is not an absolute path`},
		},
		"a blank workspace root is refused": {
			env:  map[string]string{"CALIBAN_WORKSPACE_ROOT": ""},
			want: []string{"CALIBAN_WORKSPACE_ROOT is set but blank"},
		},
		"a workspace storage that is not a quantity is refused": {
			env:  map[string]string{"CALIBAN_WORKSPACE_STORAGE": "lots"},
			want: []string{`CALIBAN_WORKSPACE_STORAGE "lots" is not a quantity (e.g. 10Gi, 500m)`},
		},
		"a zero workspace storage is refused": {
			env:  map[string]string{"CALIBAN_WORKSPACE_STORAGE": "0Gi"},
			want: []string{`CALIBAN_WORKSPACE_STORAGE "0Gi" must be positive`},
		},
		"a negative workspace storage is refused": {
			env:  map[string]string{"CALIBAN_WORKSPACE_STORAGE": "-1Gi"},
			want: []string{`CALIBAN_WORKSPACE_STORAGE "-1Gi" must be positive`},
		},
		"uid and gid must be positive": {
			env: map[string]string{"CALIBAN_AGENT_UID": "0", "CALIBAN_AGENT_GID": "-1"},
			want: []string{
				"CALIBAN_AGENT_UID 0 is outside 1-2147483647",
				"CALIBAN_AGENT_GID -1 is outside 1-2147483647",
			},
		},
		"a uid beyond the API's range is refused": {
			env:  map[string]string{"CALIBAN_AGENT_UID": "2147483648"},
			want: []string{"CALIBAN_AGENT_UID 2147483648 is outside 1-2147483647"},
		},
		"a uid that is a name is refused": {
			env:  map[string]string{"CALIBAN_AGENT_UID": "app"},
			want: []string{`CALIBAN_AGENT_UID "app" is not an integer`},
		},
		"blank images are refused": {
			env:  map[string]string{"CALIBAND_IMAGE": "", "CALIBAN_GIT_IMAGE": " \t"},
			want: []string{"CALIBAND_IMAGE is set but blank", "CALIBAN_GIT_IMAGE is set but blank"},
		},
		"blank session settings are refused": {
			env: map[string]string{
				"CALIBAN_SESSION_TLS_SECRET": "", "CALIBAN_SESSION_TOKEN_SECRET": "",
				"CALIBAN_SESSION_TOKEN_KEY": "", "CALIBAN_SESSION_SERVER_NAME": "",
			},
			want: []string{
				"CALIBAN_SESSION_TLS_SECRET is set but blank",
				"CALIBAN_SESSION_TOKEN_SECRET is set but blank",
				"CALIBAN_SESSION_TOKEN_KEY is set but blank",
				"CALIBAN_SESSION_SERVER_NAME is set but blank",
			},
		},
		"session settings that cannot name what they name are refused": {
			env: map[string]string{
				"CALIBAN_SESSION_TLS_SECRET": "TLS_Secret", "CALIBAN_SESSION_TOKEN_SECRET": "a/b",
				"CALIBAN_SESSION_TOKEN_KEY": "bad/key", "CALIBAN_SESSION_SERVER_NAME": "not a name",
			},
			want: []string{
				`CALIBAN_SESSION_TLS_SECRET "TLS_Secret" is not a valid object name: ...`,
				`CALIBAN_SESSION_TOKEN_SECRET "a/b" is not a valid object name: ...`,
				`CALIBAN_SESSION_TOKEN_KEY "bad/key" is not a valid Secret key: ...`,
				`CALIBAN_SESSION_SERVER_NAME "not a name" is not a DNS name: ...`,
			},
		},
		"a resource that is not a quantity is refused naming it": {
			env: map[string]string{
				"CALIBAND_CPU_REQUEST": "fast", "CALIBAND_MEMORY_REQUEST": "1 Gi",
				"CALIBAND_CPU_LIMIT": "2 cores", "CALIBAND_MEMORY_LIMIT": "lots",
			},
			want: []string{
				`CALIBAND_CPU_REQUEST "fast" is not a quantity (e.g. 10Gi, 500m)`,
				`CALIBAND_MEMORY_REQUEST "1 Gi" is not a quantity (e.g. 10Gi, 500m)`,
				`CALIBAND_CPU_LIMIT "2 cores" is not a quantity (e.g. 10Gi, 500m)`,
				`CALIBAND_MEMORY_LIMIT "lots" is not a quantity (e.g. 10Gi, 500m)`,
			},
		},
		"a quantity with an exponent too large to compare in reasonable time is refused": {
			env: map[string]string{"CALIBAN_WORKSPACE_STORAGE": "1e999999999", "CALIBAND_CPU_LIMIT": "1e31"},
			want: []string{
				`CALIBAN_WORKSPACE_STORAGE "1e999999999" is out of range for a quantity (at most 64 characters and an exponent within ±30)`,
				`CALIBAND_CPU_LIMIT "1e31" is out of range for a quantity (at most 64 characters and an exponent within ±30)`,
			},
		},
		"a quantity with an exponent too small to parse in reasonable time is refused": {
			env: map[string]string{"CALIBAND_CPU_REQUEST": "1e-999999999", "CALIBAND_MEMORY_REQUEST": "1E-99999999999999999999"},
			want: []string{
				`CALIBAND_CPU_REQUEST "1e-999999999" is out of range for a quantity (at most 64 characters and an exponent within ±30)`,
				`CALIBAND_MEMORY_REQUEST "1E-99999999999999999999" is out of range for a quantity (at most 64 characters and an exponent within ±30)`,
			},
		},
		"a quantity text longer than 64 characters is refused": {
			env:  map[string]string{"CALIBAN_WORKSPACE_STORAGE": "1" + strings.Repeat("0", 64)},
			want: []string{`CALIBAN_WORKSPACE_STORAGE "1` + strings.Repeat("0", 64) + `" is out of range for a quantity (at most 64 characters and an exponent within ±30)`},
		},
		"a negative resource is refused": {
			env:  map[string]string{"CALIBAND_MEMORY_LIMIT": "-1Gi"},
			want: []string{`CALIBAND_MEMORY_LIMIT "-1Gi" must not be negative`},
		},
		"a request above its limit is refused naming both": {
			env:  map[string]string{"CALIBAND_MEMORY_REQUEST": "2Gi", "CALIBAND_MEMORY_LIMIT": "1Gi"},
			want: []string{"CALIBAND_MEMORY_REQUEST 2Gi is greater than CALIBAND_MEMORY_LIMIT 1Gi"},
		},
		"a limit below the default request says the request is the default": {
			env:  map[string]string{"CALIBAND_CPU_LIMIT": "100m"},
			want: []string{"CALIBAND_CPU_REQUEST 250m (the default) is greater than CALIBAND_CPU_LIMIT 100m"},
		},
		"a bad limit is not compared with its request": {
			env:  map[string]string{"CALIBAND_CPU_LIMIT": "-1"},
			want: []string{`CALIBAND_CPU_LIMIT "-1" must not be negative`},
		},
		"a cluster domain that is not a domain is refused": {
			env:  map[string]string{"CALIBAN_CLUSTER_DOMAIN": "Cluster Local."},
			want: []string{`CALIBAN_CLUSTER_DOMAIN "Cluster Local" is not a DNS domain: ...`},
		},
		"a selector entry without = is refused with the original's message": {
			env:  map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "app=web,prospero"},
			want: []string{"CALIBAN_INGRESS_POD_SELECTOR: bad selector entry 'prospero' (want key=value)"},
		},
		"a stray comma is a bad, empty entry": {
			env:  map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "app=web,"},
			want: []string{"CALIBAN_INGRESS_POD_SELECTOR: bad selector entry '' (want key=value)"},
		},
		"a selector entry without a key is refused": {
			env:  map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "=web"},
			want: []string{"CALIBAN_INGRESS_POD_SELECTOR: bad selector entry '=web' (want key=value)"},
		},
		"a selector key that is not a label key is refused": {
			env:  map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "my app=web"},
			want: []string{"CALIBAN_INGRESS_POD_SELECTOR: bad selector entry 'my app=web': key is not a valid label key: ..."},
		},
		"a selector value that is not a label value is refused": {
			env:  map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "app=a=b"},
			want: []string{"CALIBAN_INGRESS_POD_SELECTOR: bad selector entry 'app=a=b': value is not a valid label value: ..."},
		},
		"a selector key given two values is refused": {
			env:  map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "app=a,app=b"},
			want: []string{"CALIBAN_INGRESS_POD_SELECTOR: key 'app' is given twice with different values"},
		},
		"a control character in a selector entry is escaped to keep one problem per line": {
			env:  map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "a\nb"},
			want: []string{`CALIBAN_INGRESS_POD_SELECTOR: bad selector entry 'a\nb' (want key=value)`},
		},
		"a blank DNS namespace is refused: it would not say which namespace": {
			env:  map[string]string{"CALIBAN_DNS_NAMESPACE": " "},
			want: []string{"CALIBAN_DNS_NAMESPACE is set but blank"},
		},
		"a DNS pod selector entry without = is refused naming its variable": {
			env:  map[string]string{"CALIBAN_DNS_POD_SELECTOR": "k8s-app=kube-dns,coredns"},
			want: []string{"CALIBAN_DNS_POD_SELECTOR: bad selector entry 'coredns' (want key=value)"},
		},
		"a DNS pod selector with a stray comma is refused": {
			env:  map[string]string{"CALIBAN_DNS_POD_SELECTOR": "k8s-app=kube-dns,"},
			want: []string{"CALIBAN_DNS_POD_SELECTOR: bad selector entry '' (want key=value)"},
		},
		"a DNS pod selector key that is not a label key is refused": {
			env:  map[string]string{"CALIBAN_DNS_POD_SELECTOR": "k8s app=kube-dns"},
			want: []string{"CALIBAN_DNS_POD_SELECTOR: bad selector entry 'k8s app=kube-dns': key is not a valid label key: ..."},
		},
		"both selectors are checked, each naming its own variable": {
			env: map[string]string{"CALIBAN_INGRESS_POD_SELECTOR": "app=a,app=b", "CALIBAN_DNS_POD_SELECTOR": "k8s-app=a,k8s-app=b"},
			want: []string{
				"CALIBAN_INGRESS_POD_SELECTOR: key 'app' is given twice with different values",
				"CALIBAN_DNS_POD_SELECTOR: key 'k8s-app' is given twice with different values",
			},
		},
		"namespaces that are not DNS labels are refused": {
			env: map[string]string{
				"CALIBAN_INGRESS_NAMESPACE": "a.b", "CALIBAN_DNS_NAMESPACE": "kube.system", "CALIBAN_LEASE_NAMESPACE": "-ops", "CALIBAN_WATCH_NAMESPACE": "Team_A",
			},
			want: []string{
				`CALIBAN_INGRESS_NAMESPACE "a.b" is not a valid namespace name: ...`,
				`CALIBAN_DNS_NAMESPACE "kube.system" is not a valid namespace name: ...`,
				`CALIBAN_LEASE_NAMESPACE "-ops" is not a valid namespace name: ...`,
				`CALIBAN_WATCH_NAMESPACE "Team_A" is not a valid namespace name: ...`,
			},
		},
		"a leader election setting that is not a boolean is refused": {
			env:  map[string]string{"CALIBAN_LEADER_ELECTION": "maybe"},
			want: []string{`CALIBAN_LEADER_ELECTION "maybe" is not a boolean; use true/false (or 1/0, yes/no, on/off)`},
		},
		"leader election outside a cluster without a lease namespace says what to do": {
			podNamespace: "-",
			want: []string{
				"CALIBAN_LEASE_NAMESPACE is not set and there is no service-account namespace (not running in a cluster); set it, or disable leader election with CALIBAN_LEADER_ELECTION=false",
			},
		},
		"an unreadable leader election setting does not also claim a missing namespace": {
			env:          map[string]string{"CALIBAN_LEADER_ELECTION": "enabled"},
			podNamespace: "-",
			want:         []string{`CALIBAN_LEADER_ELECTION "enabled" is not a boolean; use true/false (or 1/0, yes/no, on/off)`},
		},
		"a service-account namespace that is not a namespace is refused": {
			podNamespace: "Bad_NS",
			want:         []string{`CALIBAN_LEASE_NAMESPACE is not set and the service-account namespace "Bad_NS" is not a valid namespace name: ...`},
		},
		"CALIBAN_LEASE_NAMESPACE spares a bad service-account namespace": {
			env:          map[string]string{"CALIBAN_LEASE_NAMESPACE": "ops", "CALIBAN_WORKERS": "0"},
			podNamespace: "Bad_NS",
			want:         []string{"CALIBAN_WORKERS 0 is outside 1-2147483647"},
		},
		"a blank lease name is refused": {
			env:  map[string]string{"CALIBAN_LEASE_NAME": "  "},
			want: []string{"CALIBAN_LEASE_NAME is set but blank"},
		},
		"a lease name that is not an object name is refused": {
			env:  map[string]string{"CALIBAN_LEASE_NAME": "My Lease"},
			want: []string{`CALIBAN_LEASE_NAME "My Lease" is not a valid object name: ...`},
		},
		"a grace as long as the lease is refused": {
			env:  map[string]string{"CALIBAN_LEASE_GRACE_SECONDS": "15"},
			want: []string{"CALIBAN_LEASE_GRACE_SECONDS 15 must be less than CALIBAN_LEASE_DURATION_SECONDS 15"},
		},
		"a lease shorter than the default grace is refused": {
			env:  map[string]string{"CALIBAN_LEASE_DURATION_SECONDS": "3"},
			want: []string{"CALIBAN_LEASE_GRACE_SECONDS 5 must be less than CALIBAN_LEASE_DURATION_SECONDS 3"},
		},
		"lease seconds must be positive integers": {
			env: map[string]string{"CALIBAN_LEASE_DURATION_SECONDS": "0", "CALIBAN_LEASE_GRACE_SECONDS": "1.5"},
			want: []string{
				"CALIBAN_LEASE_DURATION_SECONDS 0 is outside 1-9223372036",
				`CALIBAN_LEASE_GRACE_SECONDS "1.5" is not an integer`,
			},
		},
		"a lease too long for a duration is refused": {
			env:  map[string]string{"CALIBAN_LEASE_DURATION_SECONDS": "9223372037"},
			want: []string{"CALIBAN_LEASE_DURATION_SECONDS 9223372037 is outside 1-9223372036"},
		},
		"a seccomp profile other than RuntimeDefault or Unconfined is refused": {
			env:  map[string]string{"CALIBAN_AGENT_SECCOMP_PROFILE": "Localhost"},
			want: []string{`CALIBAN_AGENT_SECCOMP_PROFILE "Localhost" is not one of: RuntimeDefault, Unconfined`},
		},
		"seccomp profiles are case-sensitive, like the API's": {
			env:  map[string]string{"CALIBAN_AGENT_SECCOMP_PROFILE": "runtimedefault"},
			want: []string{`CALIBAN_AGENT_SECCOMP_PROFILE "runtimedefault" is not one of: RuntimeDefault, Unconfined`},
		},
		"a metrics address without a host:port shape is refused": {
			env:  map[string]string{"CALIBAN_METRICS_BIND_ADDRESS": "8080"},
			want: []string{`CALIBAN_METRICS_BIND_ADDRESS "8080" is neither 0 (disabled) nor host:port with a port in 1-65535`},
		},
		"a metrics address on port 0 is refused": {
			env:  map[string]string{"CALIBAN_METRICS_BIND_ADDRESS": ":0"},
			want: []string{`CALIBAN_METRICS_BIND_ADDRESS ":0" is neither 0 (disabled) nor host:port with a port in 1-65535`},
		},
		"a metrics address with a named port is refused": {
			env:  map[string]string{"CALIBAN_METRICS_BIND_ADDRESS": ":http"},
			want: []string{`CALIBAN_METRICS_BIND_ADDRESS ":http" is neither 0 (disabled) nor host:port with a port in 1-65535`},
		},
		"a metrics address with a bad host is refused": {
			env:  map[string]string{"CALIBAN_METRICS_BIND_ADDRESS": "my host:8080"},
			want: []string{`CALIBAN_METRICS_BIND_ADDRESS "my host:8080" is neither 0 (disabled) nor host:port with a port in 1-65535`},
		},
		"a blank metrics address is refused; 0 disables": {
			env:  map[string]string{"CALIBAN_METRICS_BIND_ADDRESS": ""},
			want: []string{"CALIBAN_METRICS_BIND_ADDRESS is set but blank"},
		},
		"zero workers are refused": {
			env:  map[string]string{"CALIBAN_WORKERS": "0"},
			want: []string{"CALIBAN_WORKERS 0 is outside 1-2147483647"},
		},
		"a worker count that is not an integer is refused": {
			env:  map[string]string{"CALIBAN_WORKERS": "four"},
			want: []string{`CALIBAN_WORKERS "four" is not an integer`},
		},
		"QPS must be a positive number": {
			env:  map[string]string{"CALIBAN_KUBE_API_QPS": "0"},
			want: []string{"CALIBAN_KUBE_API_QPS 0 must be -1 (no client-side limit) or a positive finite number"},
		},
		"a negative QPS is refused": {
			env:  map[string]string{"CALIBAN_KUBE_API_QPS": "-2"},
			want: []string{"CALIBAN_KUBE_API_QPS -2 must be -1 (no client-side limit) or a positive finite number"},
		},
		"a QPS of NaN is refused": {
			env:  map[string]string{"CALIBAN_KUBE_API_QPS": "NaN"},
			want: []string{"CALIBAN_KUBE_API_QPS NaN must be -1 (no client-side limit) or a positive finite number"},
		},
		"an infinite QPS is refused": {
			env:  map[string]string{"CALIBAN_KUBE_API_QPS": "+Inf"},
			want: []string{"CALIBAN_KUBE_API_QPS +Inf must be -1 (no client-side limit) or a positive finite number"},
		},
		"a QPS beyond float32 is refused": {
			env:  map[string]string{"CALIBAN_KUBE_API_QPS": "1e39"},
			want: []string{"CALIBAN_KUBE_API_QPS 1e39 must be -1 (no client-side limit) or a positive finite number"},
		},
		"a QPS that is not a number is refused": {
			env:  map[string]string{"CALIBAN_KUBE_API_QPS": "fast"},
			want: []string{`CALIBAN_KUBE_API_QPS "fast" is not a number`},
		},
		"a zero burst is refused": {
			env:  map[string]string{"CALIBAN_KUBE_API_BURST": "0"},
			want: []string{"CALIBAN_KUBE_API_BURST 0 is outside 1-2147483647"},
		},
		"a compression that is not a boolean is refused": {
			env:  map[string]string{"CALIBAN_KUBE_API_COMPRESSION": "gzip"},
			want: []string{`CALIBAN_KUBE_API_COMPRESSION "gzip" is not a boolean; use true/false (or 1/0, yes/no, on/off)`},
		},
		"a negative verbosity is refused": {
			env:  map[string]string{"CALIBAN_LOG_VERBOSITY": "-1"},
			want: []string{"CALIBAN_LOG_VERBOSITY -1 is outside 0-2147483647"},
		},
		"a verbosity beyond klog's level is refused": {
			env:  map[string]string{"CALIBAN_LOG_VERBOSITY": "2147483648"},
			want: []string{"CALIBAN_LOG_VERBOSITY 2147483648 is outside 0-2147483647"},
		},
		"a verbosity written as a flag is refused": {
			env:  map[string]string{"CALIBAN_LOG_VERBOSITY": "v4"},
			want: []string{`CALIBAN_LOG_VERBOSITY "v4" is not an integer`},
		},
		"a log format other than text or json is refused": {
			env:  map[string]string{"CALIBAN_LOG_FORMAT": "yaml"},
			want: []string{`CALIBAN_LOG_FORMAT "yaml" is not one of: text, json`},
		},
		"log formats are lower-case": {
			env:  map[string]string{"CALIBAN_LOG_FORMAT": "JSON"},
			want: []string{`CALIBAN_LOG_FORMAT "JSON" is not one of: text, json`},
		},
		"every problem is reported, in the documented order of checks": {
			env: map[string]string{
				"CALIBAN_LOG_FORMAT": "xml", "CALIBAND_PORT": "abc", "CALIBAN_WORKERS": "0", "CALIBAND_IMAGE": "",
			},
			podNamespace: "-",
			want: []string{
				"CALIBAND_IMAGE is set but blank",
				`CALIBAND_PORT "abc" is not an integer`,
				"CALIBAN_LEASE_NAMESPACE is not set and there is no service-account namespace (not running in a cluster); set it, or disable leader election with CALIBAN_LEADER_ELECTION=false",
				"CALIBAN_WORKERS 0 is outside 1-2147483647",
				`CALIBAN_LOG_FORMAT "xml" is not one of: text, json`,
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			podNamespace := test.podNamespace
			switch podNamespace {
			case "":
				podNamespace = settingsPodNamespace
			case "-":
				podNamespace = ""
			}
			got, err := Parse(settingsEnv(test.env), podNamespace)
			if err == nil {
				t.Fatalf("no error; settings %+v", got)
			}
			lines := settingsErrorLines(err)
			if diff := cmp.Diff(test.want, settingsMatchLines(test.want, lines)); diff != "" {
				t.Errorf("error lines (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(Settings{}, got); diff != "" {
				t.Errorf("settings returned with an error (-want +got):\n%s", diff)
			}
		})
	}
}

// The agent images an empty environment runs are a release, by tag: never
// "latest" or no tag, which Kubernetes pulls Always and resolves to
// whatever was pushed last, so that two pods of one task could run two
// images. Releases pin them by digest on top (hack/release/agent-images.txt,
// ADR 0031).
func TestTheDefaultAgentImagesAreReleaseTagsNotLatest(t *testing.T) {
	s := DefaultAgentSettings()
	for name, ref := range map[string]string{EnvCalibandImage: s.CalibandImage, EnvGitImage: s.GitImage} {
		t.Run(name, func(t *testing.T) {
			nameTag, _, _ := strings.Cut(ref, "@")
			i := strings.LastIndex(nameTag, ":")
			if i < 0 || i < strings.LastIndex(nameTag, "/") {
				t.Fatalf("%s defaults to %q, which has no tag", name, ref)
			}
			if tag := nameTag[i+1:]; tag == "latest" || tag == "" {
				t.Errorf("%s defaults to %q: tag %q, want a release's", name, ref, tag)
			}
		})
	}
}
