package builders

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

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

// FuzzEgressCIDRAgreesWithNetworkPolicy holds the egress check to the
// apiserver's own rule for a NetworkPolicy ipBlock.cidr (strict, as the
// StrictIPCIDRValidation gate has it by default): a CIDR the workspace
// accepts but the NetworkPolicy refuses leaves every task Provisioning, and
// one refused here that the NetworkPolicy would take is a false alarm.
func FuzzEgressCIDRAgreesWithNetworkPolicy(f *testing.F) {
	for _, cidr := range []string{
		"10.0.0.0/8", "10.0.0.1/8", "10.0.0.1/32", "0.0.0.0/0", "::/0", "2001:db8::/32", "2001:DB8::/32",
		"2001:db8::1/32", "::ffff:10.0.0.0/104", "::ffff:0.0.0.0/80", "::1.2.3.4/128", "010.0.0.0/8",
		"10.0.0.0/08", "fe80::1%eth0/64", "10.0.0.1", "10.0.0.0/33", "", " 10.0.0.0/8",
	} {
		f.Add(cidr)
	}
	f.Fuzz(func(t *testing.T, cidr string) {
		problem := egressProblem(&calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: cidr}}})
		refused := validation.IsValidCIDRForLegacyField(field.NewPath("cidr"), cidr, true, nil)
		if (problem != "") != (len(refused) > 0) {
			t.Errorf("cidr %q: the workspace says %q, a NetworkPolicy says %v", cidr, problem, refused)
		}
	})
}

// FuzzEnvNameAgreesWithPods holds the env name check to the apiserver's
// rule for a container's variable names (relaxed validation, GA and locked
// on since Kubernetes 1.34).
func FuzzEnvNameAgreesWithPods(f *testing.F) {
	for _, name := range []string{"A", "my.var-1", "A=B", "$(x)", "a b", "A\nB", "ÜBER", "~", "\x7f", "\t"} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" {
			return // the schema's minLength; the Pod says "Required"
		}
		problem := envProblem([]calibanv1alpha1.EnvVar{{Name: name}}, nil)
		refused := validation.IsRelaxedEnvVarName(name)
		if (problem != "") != (len(refused) > 0) {
			t.Errorf("env name %q: the workspace says %q, a Pod says %v", name, problem, refused)
		}
	})
}
