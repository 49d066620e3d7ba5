// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// fxWorkspace is a valid workspace; mods break or extend it.
func fxWorkspace(mods ...func(*calibanv1alpha1.Workspace)) *calibanv1alpha1.Workspace {
	ws := &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "team", Generation: 3},
		Spec: calibanv1alpha1.WorkspaceSpec{
			DisplayName: "Team workspace",
			Sources: []calibanv1alpha1.Source{
				{Name: "app", Repo: "https://example.com/app.git", Ref: "main", Path: "/work/app"},
				{Name: "lib", Repo: "https://example.com/lib.git", Ref: "v1", Path: "/work/lib"},
			},
			Providers: []calibanv1alpha1.Provider{{
				Name: "planner", Kind: "anthropic", Model: "m1",
				CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "anthropic-key", Key: "api-key"},
			}},
		},
		Status: calibanv1alpha1.WorkspaceStatus{Phase: calibanv1alpha1.WorkspaceReady, ObservedGeneration: 3},
	}
	for _, m := range mods {
		m(ws)
	}
	return ws
}

// fxSecrets serves Secrets from a map, like a GET by name.
func fxSecrets(secrets ...*corev1.Secret) SecretGetter {
	return func(name string) (*corev1.Secret, error) {
		for _, s := range secrets {
			if s.Name == name {
				return s, nil
			}
		}
		return nil, nil
	}
}

func fxSecret(name string, keys ...string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{}}
	for _, k := range keys {
		s.Data[k] = []byte("x")
	}
	return s
}

// fxTypedSecret is fxSecret of a type, as a source's credentials are.
func fxTypedSecret(name string, typ corev1.SecretType, keys ...string) *corev1.Secret {
	s := fxSecret(name, keys...)
	s.Type = typ
	return s
}

// fxSourceCredentials gives source i the Secret secret, and the repo when
// one is given.
func fxSourceCredentials(i int, repo, secret string) func(*calibanv1alpha1.Workspace) {
	return func(ws *calibanv1alpha1.Workspace) {
		if repo != "" {
			ws.Spec.Sources[i].Repo = repo
		}
		ws.Spec.Sources[i].CredentialsRef = &calibanv1alpha1.SourceCredentialsRef{SecretName: secret}
	}
}

// subdomainWords spells out the rule for every name Kubernetes checks as a
// DNS subdomain; written out here so a change of wording fails a row.
const subdomainWords = "a lowercase RFC 1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)"

func TestValidateWorkspace(t *testing.T) {
	anthropicKey := fxSecret("anthropic-key", "api-key")
	gitHTTPS := fxTypedSecret("git-https", corev1.SecretTypeBasicAuth, "username", "password")
	gitSSH := fxTypedSecret("git-ssh", corev1.SecretTypeSSHAuth, "ssh-privatekey", "known_hosts")
	egress := func(cidr string) func(*calibanv1alpha1.Workspace) {
		return func(ws *calibanv1alpha1.Workspace) {
			ws.Spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.0/8"}, {CIDR: cidr}}}
		}
	}
	tests := map[string]struct {
		// inputs
		ws      *calibanv1alpha1.Workspace
		secrets []*corev1.Secret
		root    string // "/work" when empty
		// expected
		problem string
	}{
		"a valid workspace has no problem": {
			ws: fxWorkspace(), secrets: []*corev1.Secret{anthropicKey},
		},
		"a keyless provider needs no secret": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Providers[0].CredentialsRef = nil }),
		},
		"a workspace may start bare": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources = nil }),
			secrets: []*corev1.Secret{anthropicKey},
		},
		"a key in stringData counts": {
			ws:      fxWorkspace(),
			secrets: []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "anthropic-key"}, StringData: map[string]string{"api-key": "x"}}},
		},
		"a missing secret fails naming provider, secret and key": {
			ws:      fxWorkspace(),
			problem: "provider 'planner': secret 'anthropic-key' key 'api-key' not found",
		},
		"a secret without the key fails the same way": {
			ws: fxWorkspace(), secrets: []*corev1.Secret{fxSecret("anthropic-key", "other")},
			problem: "provider 'planner': secret 'anthropic-key' key 'api-key' not found",
		},
		"a source path outside the root fails": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[1].Path = "/tmp/lib" }),
			problem: "sources[1] 'lib': path '/tmp/lib' is not under the workspace root '/work'",
		},
		"the root itself is not strictly under the root": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[0].Path = "/work/" }),
			problem: "sources[0] 'app': path '/work/' is not under the workspace root '/work'",
		},
		"a path escaping the root with .. fails": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[0].Path = "/work/../etc" }),
			problem: "sources[0] 'app': path '/work/../etc' is not under the workspace root '/work'",
		},
		"a relative path fails": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[0].Path = "work/app" }),
			problem: "sources[0] 'app': path 'work/app' is not under the workspace root '/work'",
		},
		"a sibling that only shares the root's prefix fails": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[0].Path = "/workspace/app" }),
			problem: "sources[0] 'app': path '/workspace/app' is not under the workspace root '/work'",
		},
		"with the filesystem root as workspace root, any path below it is fine": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Sources[0].Path, ws.Spec.Sources[1].Path = "/src/app", "/lib"
			}),
			secrets: []*corev1.Secret{anthropicKey}, root: "/",
		},
		"with the filesystem root as workspace root, the root itself still fails": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[0].Path = "//" }),
			root:    "/",
			problem: "sources[0] 'app': path '//' is not under the workspace root '/'",
		},
		"an abbreviated commit SHA fails, saying what to write": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[1].Ref = "1a2b3c4" }),
			secrets: []*corev1.Secret{anthropicKey},
			problem: "sources[1] 'lib': ref '1a2b3c4' looks like an abbreviated commit SHA, which git cannot fetch; give the full 40- or 64-character commit id",
		},
		"an abbreviated SHA is reported before a missing Secret, which needs a read": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[1].Ref = "1a2b3c4" }),
			problem: "sources[1] 'lib': ref '1a2b3c4' looks like an abbreviated commit SHA, which git cannot fetch; give the full 40- or 64-character commit id",
		},
		"a 39-character SHA is abbreviated too": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[0].Ref = sha1Ref[:39] }),
			secrets: []*corev1.Secret{anthropicKey},
			problem: "sources[0] 'app': ref '" + sha1Ref[:39] + "' looks like an abbreviated commit SHA, which git cannot fetch; give the full 40- or 64-character commit id",
		},
		"a path problem is reported before an abbreviated SHA": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Sources[1].Ref = "1a2b3c4"
				ws.Spec.Sources[0].Path = "/tmp/app"
			}),
			problem: "sources[0] 'app': path '/tmp/app' is not under the workspace root '/work'",
		},
		"full SHA-1 and SHA-256 ids, dated tags and hex-letter branch names are refs": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Sources[0].Ref, ws.Spec.Sources[1].Ref = sha1Ref, sha256Ref
				ws.Spec.Sources = append(ws.Spec.Sources,
					calibanv1alpha1.Source{Name: "dated", Repo: "https://example.com/d.git", Ref: "20240101", Path: "/work/d"},
					calibanv1alpha1.Source{Name: "facade", Repo: "https://example.com/f.git", Ref: "facade", Path: "/work/f"},
					calibanv1alpha1.Source{Name: "short", Repo: "https://example.com/s.git", Ref: "abc123", Path: "/work/s"})
			}),
			secrets: []*corev1.Secret{anthropicKey},
		},
		"two sources at the same path fail": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[1].Path = "/work/app/" }),
			problem: "sources[1] 'lib': path '/work/app/' is also the path of source 'app'",
		},
		"an unparsable CIDR fails": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.0/8"}, {CIDR: "10.0.0.1"}}}
			}),
			problem: "egress.allow[1]: cidr '10.0.0.1' is not an IPv4 or IPv6 CIDR",
		},
		"a prefix longer than the address fails": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.0/33"}}}
			}),
			problem: "egress.allow[0]: cidr '10.0.0.0/33' is not an IPv4 or IPv6 CIDR",
		},
		"an IPv6 CIDR is fine": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "2001:db8::/32", Ports: []int32{443}}}}
			}),
			secrets: []*corev1.Secret{anthropicKey},
		},
		// A NetworkPolicy refuses these, so without the check the workspace
		// was Ready and no task of it ever got a NetworkPolicy.
		"an IPv4 CIDR with bits set beyond the prefix fails naming the network": {
			ws:      fxWorkspace(egress("10.0.0.1/8")),
			problem: "egress.allow[1]: cidr '10.0.0.1/8' has bits set beyond the prefix length, which a NetworkPolicy refuses; the network is '10.0.0.0/8'",
		},
		"an IPv6 CIDR with bits set beyond the prefix fails naming the network": {
			ws:      fxWorkspace(egress("2001:db8::1/32")),
			problem: "egress.allow[1]: cidr '2001:db8::1/32' has bits set beyond the prefix length, which a NetworkPolicy refuses; the network is '2001:db8::/32'",
		},
		"an IPv4-mapped IPv6 CIDR fails naming its IPv4 form": {
			ws:      fxWorkspace(egress("::ffff:10.0.0.0/104")),
			problem: "egress.allow[1]: cidr '::ffff:10.0.0.0/104' is an IPv4-mapped IPv6 address, which a NetworkPolicy refuses; write it as IPv4 ('10.0.0.0/8')",
		},
		"an IPv4-mapped IPv6 CIDR with host bits fails naming the IPv4 network": {
			ws:      fxWorkspace(egress("::ffff:10.1.2.3/104")),
			problem: "egress.allow[1]: cidr '::ffff:10.1.2.3/104' is an IPv4-mapped IPv6 address, which a NetworkPolicy refuses; write it as IPv4 ('10.0.0.0/8')",
		},
		"an IPv4-mapped IPv6 CIDR shorter than the mapping fails without an IPv4 form": {
			ws:      fxWorkspace(egress("::ffff:0.0.0.0/80")),
			problem: "egress.allow[1]: cidr '::ffff:0.0.0.0/80' is an IPv4-mapped IPv6 address, which a NetworkPolicy refuses",
		},
		// Link-local holds the cloud metadata services; no Workspace may
		// open it, and a CIDR around it is rendered without it.
		"the IPv4 metadata address fails naming the field and the range": {
			ws:      fxWorkspace(egress("169.254.169.254/32")),
			problem: "egress.allow[1]: cidr '169.254.169.254/32' is link-local (169.254.0.0/16), which agent pods may never reach",
		},
		"the whole IPv4 link-local range fails": {
			ws:      fxWorkspace(egress("169.254.0.0/16")),
			problem: "egress.allow[1]: cidr '169.254.0.0/16' is link-local (169.254.0.0/16), which agent pods may never reach",
		},
		"an IPv6 link-local address fails naming the IPv6 range": {
			ws:      fxWorkspace(egress("fe80::a9fe:a9fe/128")),
			problem: "egress.allow[1]: cidr 'fe80::a9fe:a9fe/128' is link-local (fe80::/10), which agent pods may never reach",
		},
		"the whole IPv6 link-local range fails": {
			ws:      fxWorkspace(egress("fe80::/10")),
			problem: "egress.allow[1]: cidr 'fe80::/10' is link-local (fe80::/10), which agent pods may never reach",
		},
		"a CIDR around link-local is fine: the policy leaves link-local out": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{
					{CIDR: "0.0.0.0/0", Ports: []int32{443}}, {CIDR: "169.0.0.0/8"}, {CIDR: "::/0"}, {CIDR: "fe00::/8"},
				}}
			}),
			secrets: []*corev1.Secret{anthropicKey},
		},
		"a CIDR beside link-local is fine": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "169.255.0.0/16"}, {CIDR: "fec0::/10"}}}
			}),
			secrets: []*corev1.Secret{anthropicKey},
		},
		"a port outside 1-65535 fails": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.0/8", Ports: []int32{443, 0}}}}
			}),
			problem: "egress.allow[0]: port 0 is outside 1-65535",
		},
		"duplicate provider names fail": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Providers = append(ws.Spec.Providers, calibanv1alpha1.Provider{Name: "planner", Kind: "openai"})
			}),
			problem: "duplicate provider name 'planner'",
		},
		"a dangling defaultProvider fails": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.DefaultProvider = "coder" }),
			problem: "defaultProvider 'coder' names no provider",
		},
		"a repeated env name fails": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}}
			}),
			problem: "env[1]: duplicate name 'A'",
		},
		"env that shadows the provider's key variable fails": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "ANTHROPIC_API_KEY", Value: "sk-leak"}}
			}),
			problem: "env[0]: 'ANTHROPIC_API_KEY' is set by the operator itself and cannot be overridden",
		},
		"env that shadows the daemon token fails": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "CALIBAN_DAEMON_TOKEN", Value: "t"}}
			}),
			problem: "env[0]: 'CALIBAN_DAEMON_TOKEN' is set by the operator itself and cannot be overridden",
		},
		"env naming a variable caliban must never see fails": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "GONZALO_ENDPOINT", Value: "http://g"}}
			}),
			problem: "env[0]: 'GONZALO_ENDPOINT' must not be set in agent pods (caliban does not read it, or caliband sets it for its workers)",
		},
		"env naming a variable caliband sets for its workers fails, naming the entry": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "MODE", Value: "fast"}, {Name: "CALIBAN_AGENT_TOKEN", Value: "t"}}
			}),
			problem: "env[1]: 'CALIBAN_AGENT_TOKEN' must not be set in agent pods (caliban does not read it, or caliband sets it for its workers)",
		},
		"an env name with '=' fails, as a Pod's would": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "A", Value: "1"}, {Name: "A=B", Value: "2"}}
			}),
			problem: "env[1]: 'A=B' is not a valid environment variable name: printable ASCII characters other than '='",
		},
		"an env name with a newline fails": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "A\nB"}} }),
			problem: "env[0]: 'A\nB' is not a valid environment variable name: printable ASCII characters other than '='",
		},
		"an env name beyond ASCII fails": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "ÜBER"}} }),
			problem: "env[0]: 'ÜBER' is not a valid environment variable name: printable ASCII characters other than '='",
		},
		"an env name with spaces, dots and shell characters is one Kubernetes accepts": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "my.var $(x) `y`; -z"}}
			}),
			secrets: []*corev1.Secret{anthropicKey},
		},
		"env naming an agentPolicy variable fails, naming the field to set": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "MODE", Value: "fast"}, {Name: "CALIBAN_AUTO_ALLOW", Value: "true"}}
			}),
			problem: "env[1]: 'CALIBAN_AUTO_ALLOW' is projected from agentPolicy.autoAllow and cannot be set in a Workspace; set that field instead",
		},
		"env naming an agentPolicy variable fails even when the typed field is set too": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{NoMCP: new(true)}
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "CALIBAN_NO_MCP", Value: "false"}}
			}),
			problem: "env[0]: 'CALIBAN_NO_MCP' is projected from agentPolicy.noMcp and cannot be set in a Workspace; set that field instead",
		},
		"env naming a policy variable in another case is an ordinary variable": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "caliban_auto_allow", Value: "true"}}
			}),
			secrets: []*corev1.Secret{anthropicKey},
		},
		"noPermissions with autoAllow fails": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{NoPermissions: new(true), AutoAllow: new(true), AllowUnattended: true}
			}),
			problem: "agentPolicy.noPermissions and agentPolicy.autoAllow cannot both be true (caliban refuses to start with both)",
		},
		"a provider kind that would spell a dead variable fails": {
			ws:      fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Providers[0].Kind = "caliban" }),
			problem: "providers[0] 'planner': kind 'caliban' would set CALIBAN_API_KEY, which the agent pod must not carry; use a different kind",
		},
		"a runtimeClass that is no RuntimeClass name fails": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: "gVisor"}
			}),
			problem: "isolation.runtimeClass 'gVisor' is not a valid RuntimeClass name: it must be " + subdomainWords,
		},
		"a runtimeClass longer than 253 characters fails": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: strings.Repeat("a", 254)}
			}),
			problem: "isolation.runtimeClass '" + strings.Repeat("a", 254) + "' is not a valid RuntimeClass name: it must be " + subdomainWords,
		},
		"a dotted runtimeClass is fine": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: "gvisor.example.com"}
			}),
			secrets: []*corev1.Secret{anthropicKey},
		},
		"isolation without a runtimeClass is fine": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Isolation = &calibanv1alpha1.Isolation{Worktrees: "per-agent"}
			}),
			secrets: []*corev1.Secret{anthropicKey},
		},
		// client-go refuses to GET such a name, so the lookup used to fail
		// on every retry and the workspace never got a status.
		"a credentials Secret name with '/' fails before any lookup": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Providers[0].CredentialsRef.SecretName = "../../etc/passwd"
			}),
			problem: "providers[0].credentialsRef.secretName '../../etc/passwd' is not a valid Secret name: it must be " + subdomainWords,
		},
		"a credentials Secret name in upper case fails naming the second provider": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.Providers = append(ws.Spec.Providers, calibanv1alpha1.Provider{Name: "coder", Kind: "openai",
					CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "OpenAI", Key: "k"}})
			}),
			secrets: []*corev1.Secret{anthropicKey},
			problem: "providers[1].credentialsRef.secretName 'OpenAI' is not a valid Secret name: it must be " + subdomainWords,
		},
		"noPermissions with autoAllow false is fine": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{NoPermissions: new(true), AutoAllow: new(false)}
			}),
			secrets: []*corev1.Secret{anthropicKey},
		},
		// Private sources: credentialsRef (check 11, then the Secret read
		// after the providers'). fxWorkspace's sources are app
		// (https://example.com/app.git) and lib (https://example.com/lib.git).
		"an https source with a basic-auth Secret is valid, and the public source beside it needs none": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, gitHTTPS},
		},
		"ssh:// and git@ sources with ssh-auth Secrets are valid": {
			ws: fxWorkspace(fxSourceCredentials(0, "ssh://git@example.com:2222/app.git", "git-ssh"),
				fxSourceCredentials(1, "git@example.com:lib.git", "git-ssh")),
			secrets: []*corev1.Secret{anthropicKey, gitSSH},
		},
		"basic-auth keys present only in stringData count": {
			ws: fxWorkspace(fxSourceCredentials(0, "", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, {ObjectMeta: metav1.ObjectMeta{Name: "git-https"}, Type: corev1.SecretTypeBasicAuth,
				StringData: map[string]string{"username": "u", "password": "p"}}},
		},
		"ssh-auth keys split between data and stringData count": {
			ws: fxWorkspace(fxSourceCredentials(0, "git@example.com:app.git", "git-ssh")),
			secrets: []*corev1.Secret{anthropicKey, {ObjectMeta: metav1.ObjectMeta{Name: "git-ssh"}, Type: corev1.SecretTypeSSHAuth,
				Data: map[string][]byte{"ssh-privatekey": []byte("k")}, StringData: map[string]string{"known_hosts": "h"}}},
		},
		"a credentials Secret name that is no Secret name fails": {
			ws:      fxWorkspace(fxSourceCredentials(1, "", "Git_Creds")),
			secrets: []*corev1.Secret{anthropicKey},
			problem: "sources[1].credentialsRef.secretName 'Git_Creds' is not a valid Secret name: it must be " + subdomainWords,
		},
		"credentials on an http:// repo fail": {
			ws:      fxWorkspace(fxSourceCredentials(0, "http://example.com/app.git", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, gitHTTPS},
			problem: "sources[0] 'app': credentialsRef needs an https://, ssh:// or git@ repo; 'http://example.com/app.git' is none of these",
		},
		"credentials on a file:// repo fail": {
			ws:      fxWorkspace(fxSourceCredentials(1, "file:///srv/git/lib.git", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, gitHTTPS},
			problem: "sources[1] 'lib': credentialsRef needs an https://, ssh:// or git@ repo; 'file:///srv/git/lib.git' is none of these",
		},
		"credentials on an upper-case HTTPS:// repo fail, as git reads the scheme case and all": {
			ws:      fxWorkspace(fxSourceCredentials(0, "HTTPS://example.com/app.git", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, gitHTTPS},
			problem: "sources[0] 'app': credentialsRef needs an https://, ssh:// or git@ repo; 'HTTPS://example.com/app.git' is none of these",
		},
		"credentials on an https:// repo whose host cannot be read fail, as the helper could answer no host": {
			ws:      fxWorkspace(fxSourceCredentials(0, "https://x y@git.example.com/app.git", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, gitHTTPS},
			problem: "sources[0] 'app': credentialsRef needs an https:// repo with a host the credentials can be tied to; 'https://x y@git.example.com/app.git' has none",
		},
		"credentials on an https:// repo with no host fail": {
			ws:      fxWorkspace(fxSourceCredentials(0, "https:///app.git", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, gitHTTPS},
			problem: "sources[0] 'app': credentialsRef needs an https:// repo with a host the credentials can be tied to; 'https:///app.git' has none",
		},
		"credentials on a git:// repo fail": {
			ws:      fxWorkspace(fxSourceCredentials(0, "git://example.com/app.git", "git-ssh")),
			secrets: []*corev1.Secret{anthropicKey, gitSSH},
			problem: "sources[0] 'app': credentialsRef needs an https://, ssh:// or git@ repo; 'git://example.com/app.git' is none of these",
		},
		"a source's Secret name problem is reported before its scheme problem": {
			ws:      fxWorkspace(fxSourceCredentials(0, "http://example.com/app.git", "Git_Creds")),
			problem: "sources[0].credentialsRef.secretName 'Git_Creds' is not a valid Secret name: it must be " + subdomainWords,
		},
		"an earlier source's scheme problem is reported before a later source's name problem": {
			ws:      fxWorkspace(fxSourceCredentials(0, "http://example.com/app.git", "git-https"), fxSourceCredentials(1, "", "Git_Creds")),
			problem: "sources[0] 'app': credentialsRef needs an https://, ssh:// or git@ repo; 'http://example.com/app.git' is none of these",
		},
		"an abbreviated SHA (check 10) is reported before a credentials problem (check 11)": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Sources[1].Ref = "1a2b3c4" },
				fxSourceCredentials(0, "http://example.com/app.git", "Git_Creds")),
			problem: "sources[1] 'lib': ref '1a2b3c4' looks like an abbreviated commit SHA, which git cannot fetch; give the full 40- or 64-character commit id",
		},
		"a credentials problem is reported before a missing provider Secret, which needs a read": {
			ws:      fxWorkspace(fxSourceCredentials(0, "file:///srv/app.git", "git-https")),
			problem: "sources[0] 'app': credentialsRef needs an https://, ssh:// or git@ repo; 'file:///srv/app.git' is none of these",
		},
		"a missing source Secret fails naming source and Secret": {
			ws:      fxWorkspace(fxSourceCredentials(1, "", "git-https")),
			secrets: []*corev1.Secret{anthropicKey},
			problem: "sources[1] 'lib': secret 'git-https' not found",
		},
		"a provider's Secret problem wins over a source's": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-https")),
			problem: "provider 'planner': secret 'anthropic-key' key 'api-key' not found",
		},
		"a provider's missing key wins over a source Secret of the wrong type": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-ssh")),
			secrets: []*corev1.Secret{fxSecret("anthropic-key", "other"), gitSSH},
			problem: "provider 'planner': secret 'anthropic-key' key 'api-key' not found",
		},
		"a basic-auth Secret without username fails naming the key": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, fxTypedSecret("git-https", corev1.SecretTypeBasicAuth, "password")},
			problem: "sources[0] 'app': secret 'git-https' key 'username' not found (a kubernetes.io/basic-auth secret needs 'username' and 'password')",
		},
		"a basic-auth Secret without password fails naming the key": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, fxTypedSecret("git-https", corev1.SecretTypeBasicAuth, "username", "token")},
			problem: "sources[0] 'app': secret 'git-https' key 'password' not found (a kubernetes.io/basic-auth secret needs 'username' and 'password')",
		},
		"an ssh-auth Secret without ssh-privatekey fails naming the key": {
			ws:      fxWorkspace(fxSourceCredentials(0, "ssh://git@example.com/app.git", "git-ssh")),
			secrets: []*corev1.Secret{anthropicKey, fxTypedSecret("git-ssh", corev1.SecretTypeSSHAuth, "known_hosts")},
			problem: "sources[0] 'app': secret 'git-ssh' key 'ssh-privatekey' not found (a kubernetes.io/ssh-auth secret needs 'ssh-privatekey' and 'known_hosts')",
		},
		"an ssh-auth Secret without known_hosts fails naming the key: host keys are always checked": {
			ws:      fxWorkspace(fxSourceCredentials(1, "git@example.com:lib.git", "git-ssh")),
			secrets: []*corev1.Secret{anthropicKey, fxTypedSecret("git-ssh", corev1.SecretTypeSSHAuth, "ssh-privatekey")},
			problem: "sources[1] 'lib': secret 'git-ssh' key 'known_hosts' not found (a kubernetes.io/ssh-auth secret needs 'ssh-privatekey' and 'known_hosts')",
		},
		"an Opaque Secret on an https repo fails on its type, even with the right keys": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, fxTypedSecret("git-https", corev1.SecretTypeOpaque, "username", "password")},
			problem: "sources[0] 'app': secret 'git-https' is of type 'Opaque', but an https:// repo needs a kubernetes.io/basic-auth secret",
		},
		"an Opaque Secret needs no keys of its own and fails on its type": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, fxTypedSecret("git-https", corev1.SecretTypeOpaque)},
			problem: "sources[0] 'app': secret 'git-https' is of type 'Opaque', but an https:// repo needs a kubernetes.io/basic-auth secret",
		},
		"a basic-auth Secret on an ssh:// repo fails on its type": {
			ws:      fxWorkspace(fxSourceCredentials(0, "ssh://git@example.com/app.git", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, gitHTTPS},
			problem: "sources[0] 'app': secret 'git-https' is of type 'kubernetes.io/basic-auth', but an ssh:// or git@ repo needs a kubernetes.io/ssh-auth secret",
		},
		"a basic-auth Secret on a git@ repo fails on its type": {
			ws:      fxWorkspace(fxSourceCredentials(1, "git@example.com:lib.git", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, gitHTTPS},
			problem: "sources[1] 'lib': secret 'git-https' is of type 'kubernetes.io/basic-auth', but an ssh:// or git@ repo needs a kubernetes.io/ssh-auth secret",
		},
		"an ssh-auth Secret on an https repo fails on its type": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-ssh")),
			secrets: []*corev1.Secret{anthropicKey, gitSSH},
			problem: "sources[0] 'app': secret 'git-ssh' is of type 'kubernetes.io/ssh-auth', but an https:// repo needs a kubernetes.io/basic-auth secret",
		},
		"a Secret's own keys are checked before its type: basic-auth without password on an ssh repo names the key": {
			ws:      fxWorkspace(fxSourceCredentials(0, "ssh://git@example.com/app.git", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, fxTypedSecret("git-https", corev1.SecretTypeBasicAuth, "username")},
			problem: "sources[0] 'app': secret 'git-https' key 'password' not found (a kubernetes.io/basic-auth secret needs 'username' and 'password')",
		},
		"a Secret's own keys are checked before its type: ssh-auth without known_hosts on an https repo names the key": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-ssh")),
			secrets: []*corev1.Secret{anthropicKey, fxTypedSecret("git-ssh", corev1.SecretTypeSSHAuth, "ssh-privatekey")},
			problem: "sources[0] 'app': secret 'git-ssh' key 'known_hosts' not found (a kubernetes.io/ssh-auth secret needs 'ssh-privatekey' and 'known_hosts')",
		},
		"the first credentialed source's Secret problem wins": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-https"), fxSourceCredentials(1, "ssh://git@example.com/lib.git", "git-ssh")),
			secrets: []*corev1.Secret{anthropicKey, fxTypedSecret("git-ssh", corev1.SecretTypeBasicAuth, "username", "password")},
			problem: "sources[0] 'app': secret 'git-https' not found",
		},
		"a later source's Secret problem is found when the earlier ones are fine": {
			ws:      fxWorkspace(fxSourceCredentials(0, "", "git-https"), fxSourceCredentials(1, "ssh://git@example.com/lib.git", "git-https")),
			secrets: []*corev1.Secret{anthropicKey, gitHTTPS},
			problem: "sources[1] 'lib': secret 'git-https' is of type 'kubernetes.io/basic-auth', but an ssh:// or git@ repo needs a kubernetes.io/ssh-auth secret",
		},
		"the first problem in spec order wins": {
			ws: fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.DefaultProvider = "nobody"
				ws.Spec.Sources[0].Path = "/elsewhere"
			}),
			problem: "sources[0] 'app': path '/elsewhere' is not under the workspace root '/work'",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := tc.root
			if root == "" {
				root = "/work"
			}
			got, err := ValidateWorkspace(&tc.ws.Spec, root, fxSecrets(tc.secrets...))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.problem {
				t.Errorf("problem = %q, want %q", got, tc.problem)
			}
		})
	}
}

// A Workspace stored before the schema refused them may carry any of the
// agent policy's variables in env: each is refused, naming the entry and
// the field to set, whether or not the policy sets that field.
func TestValidateWorkspaceRefusesEveryAgentPolicyVariableInEnv(t *testing.T) {
	for _, v := range wantAgentPolicyVariables {
		for setting, policy := range map[string]*calibanv1alpha1.AgentPolicy{
			"no agentPolicy": nil,
			"an agentPolicy that sets every field": {
				AllowUnattended: true, PermissionMode: calibanv1alpha1.PermissionModePlan, AutoAllow: new(true),
				NoPermissions: new(false), NoMCP: new(true), NoHooks: new(true), NoSkills: new(true),
				NoSubAgent: new(true), StrictKnownMarketplaces: new(true), EnabledPlugins: []string{"a"},
				BlockedMarketplaces: []string{"b"}, ParallelToolLimit: new(int32(2)),
			},
		} {
			t.Run(v.Name+" is refused under "+setting, func(t *testing.T) {
				ws := fxWorkspace(func(ws *calibanv1alpha1.Workspace) {
					ws.Spec.AgentPolicy = policy
					ws.Spec.Env = []calibanv1alpha1.EnvVar{{Name: "MODE", Value: "fast"}, {Name: "TEAM"}, {Name: v.Name, Value: "true"}}
				})
				got, err := ValidateWorkspace(&ws.Spec, "/work", fxSecrets(fxSecret("anthropic-key", "api-key")))
				if err != nil {
					t.Fatal(err)
				}
				want := "env[2]: '" + v.Name + "' is projected from " + v.Field + " and cannot be set in a Workspace; set that field instead"
				if got != want {
					t.Errorf("problem = %q, want %q", got, want)
				}
			})
		}
	}
}

// A Workspace stored before the schema refused them may carry a variable
// that makes the agent pod load or run code: each is refused, naming the
// entry. Variables that re-point requests pass: only the admission
// component knows whether their writer could read the provider keys.
func TestValidateWorkspaceRefusesEveryLoaderVariableInEnv(t *testing.T) {
	validate := func(t *testing.T, env ...calibanv1alpha1.EnvVar) string {
		t.Helper()
		ws := fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Env = env })
		got, err := ValidateWorkspace(&ws.Spec, "/work", fxSecrets(fxSecret("anthropic-key", "api-key")))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, name := range wantLoaderEnv {
		t.Run(name+" is refused", func(t *testing.T) {
			got := validate(t, calibanv1alpha1.EnvVar{Name: "MODE", Value: "fast"}, calibanv1alpha1.EnvVar{Name: "TEAM"}, calibanv1alpha1.EnvVar{Name: name, Value: "/work/app/x"})
			want := "env[2].name: '" + name + "' decides what code the agent pod loads or runs, and cannot be set in a Workspace"
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("problem (-want +got):\n%s", diff)
			}
		})
	}
	for _, name := range wantRepointingEnv {
		if OperatorOwnedEnv(name, []string{"anthropic"}) {
			continue // the pinned provider's own base URL: refused as the operator's
		}
		t.Run(name+" passes validation", func(t *testing.T) {
			if got := validate(t, calibanv1alpha1.EnvVar{Name: name, Value: "http://proxy.corp:3128"}); got != "" {
				t.Errorf("problem = %q, want none", got)
			}
		})
	}
}

// An invalid Secret name must be answered without asking: the real lookup
// cannot be made, and its error would be retried forever.
func TestValidateWorkspaceDoesNotLookUpAnInvalidSecretName(t *testing.T) {
	for name, ws := range map[string]*calibanv1alpha1.Workspace{
		"a provider's": fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Spec.Providers[0].CredentialsRef.SecretName = "a/b" }),
		"a source's":   fxWorkspace(fxSourceCredentials(1, "", "a/b")),
	} {
		t.Run(name, func(t *testing.T) {
			problem, err := ValidateWorkspace(&ws.Spec, "/work", func(name string) (*corev1.Secret, error) {
				return nil, errors.New("invalid resource name " + name)
			})
			if err != nil || !strings.Contains(problem, "'a/b' is not a valid Secret name") {
				t.Errorf("got problem %q, err %v; want the name's problem and no lookup", problem, err)
			}
		})
	}
}

// A Secret read that fails (other than NotFound, which the getter answers
// as nil) is an error the caller retries, not a message on the workspace.
func TestValidateWorkspaceReturnsLookupErrorsInsteadOfFailing(t *testing.T) {
	boom := errors.New("connection refused")
	tests := map[string]struct {
		ws     *calibanv1alpha1.Workspace
		failOn string // the Secret whose read fails; the others are found
		// expected: the error names where the read was for
		context string
	}{
		"a provider's Secret": {ws: fxWorkspace(), failOn: "anthropic-key", context: "provider 'planner': reading secret 'anthropic-key'"},
		"a source's Secret": {
			ws: fxWorkspace(fxSourceCredentials(1, "", "git-https")), failOn: "git-https",
			context: "sources[1] 'lib': reading secret 'git-https'",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			found := fxSecrets(fxSecret("anthropic-key", "api-key"), fxTypedSecret("git-https", corev1.SecretTypeBasicAuth, "username", "password"))
			problem, err := ValidateWorkspace(&tc.ws.Spec, "/work", func(name string) (*corev1.Secret, error) {
				if name == tc.failOn {
					return nil, boom
				}
				return found(name)
			})
			if !errors.Is(err, boom) || problem != "" {
				t.Errorf("got problem %q, err %v; want no problem and the lookup error", problem, err)
			}
			if err != nil && !strings.Contains(err.Error(), tc.context) {
				t.Errorf("error %q does not say %q", err, tc.context)
			}
		})
	}
}

func TestWorkspaceStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	readyAt := func(ts metav1.Time) []metav1.Condition {
		return []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Valid", Message: "the workspace is valid", ObservedGeneration: 3, LastTransitionTime: ts}}
	}
	tests := map[string]struct {
		ws      *calibanv1alpha1.Workspace
		problem string
		want    calibanv1alpha1.WorkspaceStatus
	}{
		"a valid workspace is Ready with the generation it reflects": {
			ws:   fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Status = calibanv1alpha1.WorkspaceStatus{} }),
			want: calibanv1alpha1.WorkspaceStatus{Phase: "Ready", ObservedGeneration: 3, Conditions: readyAt(t1)},
		},
		"an invalid workspace is Failed with the message": {
			ws:      fxWorkspace(),
			problem: "duplicate provider name 'p'",
			want: calibanv1alpha1.WorkspaceStatus{Phase: "Failed", Message: "duplicate provider name 'p'", ObservedGeneration: 3,
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Invalid", Message: "duplicate provider name 'p'", ObservedGeneration: 3, LastTransitionTime: t1}}},
		},
		"a Ready condition that stays True keeps its transition time": {
			ws:   fxWorkspace(func(ws *calibanv1alpha1.Workspace) { ws.Status.Conditions = readyAt(t0) }),
			want: calibanv1alpha1.WorkspaceStatus{Phase: "Ready", ObservedGeneration: 3, Conditions: readyAt(t0)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := WorkspaceStatus(tc.ws, tc.problem, nil, t1)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWorkspaceStatusChanged(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	settled := WorkspaceStatus(fxWorkspace(), "", nil, now)
	foreign := metav1.Condition{Type: "Audited", Status: metav1.ConditionTrue, Reason: "Checked", LastTransitionTime: now}
	tests := map[string]struct {
		current calibanv1alpha1.WorkspaceStatus
		changed bool
	}{
		"the same status is unchanged":             {current: settled},
		"another owner's condition does not count": {current: withConditions(settled, append(settled.Conditions, foreign)...)},
		"an empty status is a change":              {current: calibanv1alpha1.WorkspaceStatus{}, changed: true},
		"an older observedGeneration is a change": {
			current: func() calibanv1alpha1.WorkspaceStatus { s := *settled.DeepCopy(); s.ObservedGeneration = 2; return s }(),
			changed: true,
		},
		"a different message is a change": {
			current: func() calibanv1alpha1.WorkspaceStatus { s := *settled.DeepCopy(); s.Message = "old"; return s }(),
			changed: true,
		},
		"a Ready condition with another reason is a change": {
			current: func() calibanv1alpha1.WorkspaceStatus {
				s := *settled.DeepCopy()
				s.Conditions[0].Reason = "Other"
				return s
			}(),
			changed: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := WorkspaceStatusChanged(tc.current, settled); got != tc.changed {
				t.Errorf("changed = %v, want %v", got, tc.changed)
			}
		})
	}
}

func withConditions(s calibanv1alpha1.WorkspaceStatus, conds ...metav1.Condition) calibanv1alpha1.WorkspaceStatus {
	s = *s.DeepCopy()
	s.Conditions = conds
	return s
}

// The link-local promise holds for every way of writing an address: an
// egress CIDR whose addresses lie in 169.254.0.0/16 or fe80::/10, however
// it is spelt, fails naming the range. IPv4-mapped IPv6 spellings count,
// because network plugins that read an ipBlock with Go's net package take
// ::ffff:169.254.169.254/128 for 169.254.169.254/32. A CIDR around a range
// passes (it is rendered without the range); an IPv4-mapped one fails as
// such, naming its IPv4 form.
func TestEveryLinkLocalSpellingFailsTheWorkspace(t *testing.T) {
	v4 := "is link-local (169.254.0.0/16), which agent pods may never reach"
	v6 := "is link-local (fe80::/10), which agent pods may never reach"
	tests := map[string]struct {
		cidr    string
		problem string // after "egress.allow[0]: cidr '<cidr>' "; "" passes
	}{
		"the metadata address":                                  {cidr: "169.254.169.254/32", problem: v4},
		"the metadata address as IPv4-mapped IPv6":              {cidr: "::ffff:169.254.169.254/128", problem: v4},
		"the metadata address as IPv4-mapped IPv6 in hex":       {cidr: "::ffff:a9fe:a9fe/128", problem: v4},
		"the metadata address as IPv4-mapped IPv6 in upper hex": {cidr: "::FFFF:A9FE:A9FE/128", problem: v4},
		"the metadata address as IPv4-mapped IPv6, uncompressed": {
			cidr: "0:0:0:0:0:ffff:169.254.169.254/128", problem: v4,
		},
		"the metadata address as IPv4-mapped IPv6, with leading zeros": {
			cidr: "0000:0000:0000:0000:0000:ffff:a9fe:a9fe/128", problem: v4,
		},
		"the whole range as IPv4-mapped IPv6":                            {cidr: "::ffff:169.254.0.0/112", problem: v4},
		"a part of the range as IPv4-mapped IPv6":                        {cidr: "::ffff:169.254.169.0/120", problem: v4},
		"the metadata address with host bits beyond a /24":               {cidr: "169.254.169.254/24", problem: v4},
		"an IPv6 link-local address":                                     {cidr: "fe80::a9fe:a9fe/128", problem: v6},
		"an IPv6 link-local address at the end of the range":             {cidr: "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", problem: v6},
		"an IPv6 link-local address in upper case":                       {cidr: "FE80::1/128", problem: v6},
		"a bare IPv4-mapped metadata address is not a CIDR at all":       {cidr: "0:0:0:0:0:ffff:169.254.169.254", problem: "is not an IPv4 or IPv6 CIDR"},
		"a CIDR around the IPv4 range passes: it is rendered without it": {cidr: "128.0.0.0/1"},
		"a CIDR around the IPv6 range passes: it is rendered without it": {cidr: "fe80::/9"},
		"an IPv4-mapped CIDR around the range fails naming its IPv4 form": {
			cidr: "::ffff:0:0/96", problem: "is an IPv4-mapped IPv6 address, which a NetworkPolicy refuses; write it as IPv4 ('0.0.0.0/0')",
		},
		"an IPv4-mapped CIDR beside the range fails as IPv4-mapped": {
			cidr: "::ffff:10.0.0.0/104", problem: "is an IPv4-mapped IPv6 address, which a NetworkPolicy refuses; write it as IPv4 ('10.0.0.0/8')",
		},
		"an IPv4-compatible spelling is another IPv6 address and passes": {cidr: "::169.254.169.254/128"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			want := ""
			if test.problem != "" {
				want = "egress.allow[0]: cidr '" + test.cidr + "' " + test.problem
			}
			got := egressProblem(&calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: test.cidr}}})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("problem (-want +got):\n%s", diff)
			}
		})
	}
}
