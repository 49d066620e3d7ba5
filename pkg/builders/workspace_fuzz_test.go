// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// FuzzValidateWorkspace feeds arbitrary field values through the validation
// chain: it must never panic or fail on a lookup that works, and must
// answer the same twice. The first source may carry credentials from a
// Secret of any type and keys; a workspace found valid with them has them
// on an https://, ssh:// or git@ repo, from a Secret with a valid name of
// the type that scheme needs, holding that type's keys.
func FuzzValidateWorkspace(f *testing.F) {
	f.Add("/work/app", "/work/lib", "10.0.0.0/8", int32(443), "A", "anthropic", "planner", "", true, false, "r", "", "", "")
	f.Add("/work", "/work/../etc", "::/0", int32(0), "ANTHROPIC_API_KEY", "openai", "p", "q", false, true, "r", "", "", "")
	f.Add("relative", "/work/a", "1.2.3.4/33", int32(70000), "", "my-llm.v2", "", "", true, true, "r", "", "", "")
	f.Add("/work/app", "/work/lib", "10.0.0.0/8", int32(443), "A", "anthropic", "planner", "", true, false,
		"https://git.example.com/app.git", "git-https", "kubernetes.io/basic-auth", "username,password")
	f.Add("/work/app", "/work/lib", "10.0.0.0/8", int32(443), "A", "anthropic", "planner", "", true, false,
		"ssh://git@git.example.com:2222/app.git", "git-ssh", "kubernetes.io/ssh-auth", "ssh-privatekey,known_hosts")
	f.Add("/work/app", "/work/lib", "10.0.0.0/8", int32(443), "A", "anthropic", "planner", "", true, false,
		"git@git.example.com:app.git", "git-ssh", "kubernetes.io/ssh-auth", "ssh-privatekey")
	f.Add("/work/app", "/work/lib", "10.0.0.0/8", int32(443), "A", "anthropic", "planner", "", true, false,
		"https://git.example.com/app.git", "git-ssh", "kubernetes.io/ssh-auth", "ssh-privatekey,known_hosts,username,password")
	f.Add("/work/app", "/work/lib", "10.0.0.0/8", int32(443), "A", "anthropic", "planner", "", true, false,
		"HTTPS://git.example.com/app.git", "git-https", "kubernetes.io/basic-auth", "username,password")
	f.Add("/work/app", "/work/lib", "10.0.0.0/8", int32(443), "A", "anthropic", "planner", "", true, false,
		"file:///srv/app.git", "s", "Opaque", "k")
	f.Add("/work/app", "/work/lib", "10.0.0.0/8", int32(443), "A", "anthropic", "planner", "", true, false,
		`https://h'o"st:1/r`, "Git_Creds", "kubernetes.io/basic-auth", "username,password")
	f.Fuzz(func(t *testing.T, path1, path2, cidr string, port int32, envName, kind, provider, defaultProvider string, noPerms, autoAllow bool,
		repo, sourceSecret, secretType, secretKeys string) {
		spec := &calibanv1alpha1.WorkspaceSpec{
			DisplayName: "fuzz",
			Sources: []calibanv1alpha1.Source{
				{Name: "one", Repo: repo, Path: path1},
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
		if sourceSecret != "" {
			spec.Sources[0].CredentialsRef = &calibanv1alpha1.SourceCredentialsRef{SecretName: sourceSecret}
		}
		secrets := func(name string) (*corev1.Secret, error) {
			switch name {
			case "s":
				return fxSecret("s", "k"), nil
			case sourceSecret:
				return fxTypedSecret(sourceSecret, corev1.SecretType(secretType), strings.Split(secretKeys, ",")...), nil
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
		if first != "" || sourceSecret == "" {
			return
		}
		var wantType corev1.SecretType
		var wantKeys []string
		switch {
		case strings.HasPrefix(repo, "https://"):
			wantType, wantKeys = corev1.SecretTypeBasicAuth, []string{"username", "password"}
		case strings.HasPrefix(repo, "ssh://"), strings.HasPrefix(repo, "git@"):
			wantType, wantKeys = corev1.SecretTypeSSHAuth, []string{"ssh-privatekey", "known_hosts"}
		default:
			t.Fatalf("valid with credentials on repo %q, which takes none", repo)
		}
		if errs := validation.IsDNS1123Subdomain(sourceSecret); len(errs) > 0 {
			t.Fatalf("valid with credentials from %q, which is no Secret name: %v", sourceSecret, errs)
		}
		secret, _ := secrets(sourceSecret)
		if secret == nil || secret.Type != wantType {
			t.Fatalf("valid with credentials for %q from %+v, want a %s Secret", repo, secret, wantType)
		}
		for _, k := range wantKeys {
			if !secretHasKey(secret, k) {
				t.Fatalf("valid with credentials for %q from a Secret without %q: %+v", repo, k, secret)
			}
		}
	})
}

// FuzzEgressCIDRAgreesWithNetworkPolicy holds the egress check to the
// apiserver's own rule for a NetworkPolicy ipBlock.cidr (strict, as the
// StrictIPCIDRValidation gate has it by default): a CIDR the workspace
// accepts but the NetworkPolicy refuses leaves every task Provisioning, and
// one refused here that the NetworkPolicy would take is a false alarm,
// unless it is link-local, which the workspace refuses on its own account
// (in every spelling, whatever else is wrong with it) and the renderer
// never opens. Nothing rendered opens a link-local address, either as
// net/netip reads the block or as Go's net package does, which takes an
// IPv4-mapped block for the IPv4 one.
func FuzzEgressCIDRAgreesWithNetworkPolicy(f *testing.F) {
	for _, cidr := range []string{
		"10.0.0.0/8", "10.0.0.1/8", "10.0.0.1/32", "0.0.0.0/0", "::/0", "2001:db8::/32", "2001:DB8::/32",
		"2001:db8::1/32", "::ffff:10.0.0.0/104", "::ffff:0.0.0.0/80", "::1.2.3.4/128", "010.0.0.0/8",
		"10.0.0.0/08", "fe80::1%eth0/64", "10.0.0.1", "10.0.0.0/33", "", " 10.0.0.0/8",
		"169.254.169.254/32", "169.254.0.0/16", "169.0.0.0/8", "fe80::/10", "fe80::1/128", "fe00::/8",
		"::ffff:169.254.169.254/128", "::ffff:a9fe:a9fe/128", "0:0:0:0:0:ffff:169.254.169.254/128", "::ffff:169.254.0.0/112",
		"::ffff:0:0/96", "128.0.0.0/1", "169.254.169.254/24", "::169.254.169.254/128", "169.100.0.0/00",
	} {
		f.Add(cidr)
	}
	f.Fuzz(func(t *testing.T, cidr string) {
		problem := egressProblem(&calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: cidr}}})
		refused := validation.IsValidCIDRForLegacyField(field.NewPath("cidr"), cidr, true, nil)
		if block, ok := egressIPBlock(cidr); ok {
			opensLinkLocal(t, cidr, *block.CIDR, block.Except)
		}
		// Link-local is the workspace's own refusal, named before anything
		// else wrong with the CIDR; only the refusals besides it must agree.
		if strings.Contains(problem, "is link-local") {
			if _, ok := egressIPBlock(cidr); ok {
				t.Errorf("cidr %q: refused as link-local, but rendered", cidr)
			}
			return
		}
		if (problem != "") != (len(refused) > 0) {
			t.Errorf("cidr %q: the workspace says %q, a NetworkPolicy says %v", cidr, problem, refused)
		}
		if problem != "" {
			return
		}
		// An accepted CIDR is rendered, and what it leaves out is a strict
		// subset of it, as a NetworkPolicy's ipBlock.except must be.
		block, ok := egressIPBlock(cidr)
		if !ok {
			t.Fatalf("cidr %q: accepted, but not rendered", cidr)
		}
		prefix := netip.MustParsePrefix(cidr)
		for _, e := range block.Except {
			except := netip.MustParsePrefix(e)
			if except.Bits() <= prefix.Bits() || !prefix.Contains(except.Addr()) {
				t.Errorf("cidr %q: except %q is not a strict subset of it", cidr, e)
			}
		}
	})
}

// opensLinkLocal fails the test when an ipBlock of cidr less except
// admits a link-local address, read strictly or with Go's net package.
func opensLinkLocal(t *testing.T, input, cidr string, except []string) {
	t.Helper()
	probes := []string{"169.254.0.0", "169.254.169.254", "169.254.255.255", "fe80::", "fe80::a9fe:a9fe", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}
	strict := func(block string, addr netip.Addr) bool {
		p, err := netip.ParsePrefix(block)
		return err == nil && p.Contains(addr)
	}
	legacy := func(block string, addr netip.Addr) bool {
		_, n, err := net.ParseCIDR(block)
		return err == nil && n.Contains(net.IP(addr.AsSlice()))
	}
	for _, contains := range []func(string, netip.Addr) bool{strict, legacy} {
		for _, probe := range probes {
			addr := netip.MustParseAddr(probe)
			if contains(cidr, addr) && !slices.ContainsFunc(except, func(e string) bool { return contains(e, addr) }) {
				t.Errorf("cidr %q: rendered as %q except %v, which admits %s", input, cidr, except, addr)
			}
		}
	}
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
		if OperatorOwnedEnv(name, nil) || slices.Contains(DeadEnvNames, name) || AgentPolicyField(name) != "" || LoaderEnv(name) {
			return // a name a Pod takes, refused for what it does
		}
		problem := envProblem([]calibanv1alpha1.EnvVar{{Name: name}}, nil)
		refused := validation.IsRelaxedEnvVarName(name)
		if (problem != "") != (len(refused) > 0) {
			t.Errorf("env name %q: the workspace says %q, a Pod says %v", name, problem, refused)
		}
	})
}
