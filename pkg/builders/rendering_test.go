// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// TestRenderingFingerprint: every setting that renders into a Sandbox or a
// NetworkPolicy moves the fingerprint, and nothing else does.
func TestRenderingFingerprint(t *testing.T) {
	base, err := RenderingFingerprint(config.DefaultAgentSettings())
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := RenderingFingerprint(config.DefaultAgentSettings()); again != base {
		t.Fatalf("the fingerprint of the same settings changed: %s, then %s", base, again)
	}
	changes := map[string]func(*config.AgentSettings){
		"another caliband image":   func(s *config.AgentSettings) { s.CalibandImage = "ghcr.io/caliban-ai/caliban:v2" },
		"another git image":        func(s *config.AgentSettings) { s.GitImage = "alpine/git:v2" },
		"another storage size":     func(s *config.AgentSettings) { s.WorkspaceStorage = quantity("20Gi") },
		"another workspace root":   func(s *config.AgentSettings) { s.WorkspaceRoot = "/srv" },
		"another uid":              func(s *config.AgentSettings) { s.AgentUID = 2000 },
		"another gid":              func(s *config.AgentSettings) { s.AgentGID = 2000 },
		"another caliband port":    func(s *config.AgentSettings) { s.CalibandPort = 9443 },
		"another agent port range": func(s *config.AgentSettings) { s.AgentPortEnd = 7500 },
		"another seccomp profile":  func(s *config.AgentSettings) { s.AgentSeccompProfile = corev1.SeccompProfileTypeUnconfined },
		"other resources": func(s *config.AgentSettings) {
			s.CalibandResources.Requests[corev1.ResourceCPU] = quantity("1")
		},
		"another cluster domain":    func(s *config.AgentSettings) { s.ClusterDomain = "example.internal" },
		"another ingress namespace": func(s *config.AgentSettings) { s.IngressNamespace = "prospero" },
		"another ingress pod selector": func(s *config.AgentSettings) {
			s.IngressPodSelector = map[string]string{"app": "prospero"}
		},
		"another DNS namespace":      func(s *config.AgentSettings) { s.DNSNamespace = "dns-system" },
		"another DNS pod selector":   func(s *config.AgentSettings) { s.DNSPodSelector = map[string]string{"k8s-app": "coredns"} },
		"every pod for DNS":          func(s *config.AgentSettings) { s.DNSPodSelector = nil },
		"another session TLS secret": func(s *config.AgentSettings) { s.SessionTLSSecret = "other-tls" },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			s := config.DefaultAgentSettings()
			change(&s)
			got, err := RenderingFingerprint(s)
			if err != nil {
				t.Fatal(err)
			}
			if got == base {
				t.Errorf("the fingerprint did not move: %s", got)
			}
		})
	}
}
