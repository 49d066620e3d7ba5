package builders

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestRenderingFingerprint: every setting that renders into a Sandbox or a
// NetworkPolicy moves the fingerprint, and nothing else does.
func TestRenderingFingerprint(t *testing.T) {
	base, err := RenderingFingerprint(DefaultAgentSettings())
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := RenderingFingerprint(DefaultAgentSettings()); again != base {
		t.Fatalf("the fingerprint of the same settings changed: %s, then %s", base, again)
	}
	changes := map[string]func(*AgentSettings){
		"another caliband image":   func(s *AgentSettings) { s.CalibandImage = "ghcr.io/caliban-ai/caliban:v2" },
		"another git image":        func(s *AgentSettings) { s.GitImage = "alpine/git:v2" },
		"another storage size":     func(s *AgentSettings) { s.WorkspaceStorage = quantity("20Gi") },
		"another workspace root":   func(s *AgentSettings) { s.WorkspaceRoot = "/srv" },
		"another uid":              func(s *AgentSettings) { s.AgentUID = 2000 },
		"another gid":              func(s *AgentSettings) { s.AgentGID = 2000 },
		"another caliband port":    func(s *AgentSettings) { s.CalibandPort = 9443 },
		"another agent port range": func(s *AgentSettings) { s.AgentPortEnd = 7500 },
		"another seccomp profile":  func(s *AgentSettings) { s.AgentSeccompProfile = corev1.SeccompProfileTypeUnconfined },
		"other resources": func(s *AgentSettings) {
			s.CalibandResources.Requests[corev1.ResourceCPU] = quantity("1")
		},
		"another cluster domain":     func(s *AgentSettings) { s.ClusterDomain = "example.internal" },
		"another ingress namespace":  func(s *AgentSettings) { s.IngressNamespace = "prospero" },
		"another session TLS secret": func(s *AgentSettings) { s.SessionTLSSecret = "other-tls" },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			s := DefaultAgentSettings()
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
