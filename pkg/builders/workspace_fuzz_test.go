package builders

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// FuzzValidateWorkspace feeds arbitrary field values through the validation
// chain: it must never panic or fail on a lookup that works, and must
// answer the same twice.
func FuzzValidateWorkspace(f *testing.F) {
	f.Add("/work/app", "/work/lib", "10.0.0.0/8", int32(443), "A", "anthropic", "planner", "", true, false)
	f.Add("/work", "/work/../etc", "::/0", int32(0), "ANTHROPIC_API_KEY", "openai", "p", "q", false, true)
	f.Add("relative", "/work/a", "1.2.3.4/33", int32(70000), "", "my-llm.v2", "", "", true, true)
	f.Fuzz(func(t *testing.T, path1, path2, cidr string, port int32, envName, kind, provider, defaultProvider string, noPerms, autoAllow bool) {
		spec := &calibanv1alpha1.WorkspaceSpec{
			DisplayName: "fuzz",
			Sources: []calibanv1alpha1.Source{
				{Name: "one", Repo: "r", Path: path1},
				{Name: "two", Repo: "r", Path: path2},
			},
			Providers: []calibanv1alpha1.Provider{
				{Name: provider, Kind: kind, CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "s", Key: "k"}},
			},
			DefaultProvider: defaultProvider,
			Env:             []calibanv1alpha1.EnvVar{{Name: envName}},
			Egress:          &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: cidr, Ports: []int32{port}}}},
			AgentPolicy:     &calibanv1alpha1.AgentPolicy{NoPermissions: &noPerms, AutoAllow: &autoAllow},
		}
		secrets := func(name string) (*corev1.Secret, error) {
			if name == "s" {
				return fxSecret("s", "k"), nil
			}
			return nil, nil
		}
		first, err := ValidateWorkspace(spec, "/work", secrets)
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		second, _ := ValidateWorkspace(spec, "/work", secrets)
		if first != second {
			t.Fatalf("validation is not deterministic: %q then %q", first, second)
		}
	})
}
