// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// RenderingFingerprint names how this operator, under settings s, renders
// the children whose content depends on the operator rather than on the task
// alone: the Sandbox and the NetworkPolicy. It is the hash of both as
// rendered for a fixed probe task that uses every input the renderers read,
// so any setting or any change of the renderers' code that shows in a
// child shows in the fingerprint, with nothing to bump by hand.
//
// The operator stamps it on every child it renders (ADR 0015): a child
// stamped with another fingerprint was rendered under other settings or by
// another version, and is kept as it is, because a running or resumed agent
// relies on it (its volume's owner, its ports, its claim).
func RenderingFingerprint(s config.AgentSettings) (string, error) {
	task, pin := renderingProbe()
	// The NetworkPolicy twice: a pin without egress renders rules of its
	// own, which the allow-list probe never reaches.
	allowAll := pin.DeepCopy()
	allowAll.Egress = nil
	body, err := json.Marshal([]any{BuildSandbox(task, pin, s), BuildNetworkPolicy(task, pin, s), BuildNetworkPolicy(task, allowAll, s)})
	if err != nil {
		return "", fmt.Errorf("rendering the fingerprint probe: %w", err)
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16]), nil
}

// renderingProbe is a task and pin that set every field the renderers read,
// and take every path through them (an allow-list entry around link-local
// included).
// It is a constant: changing it changes every fingerprint, and so keeps
// every existing task's children as they are, which is safe but freezes
// them against the task's own spec edits too.
func renderingProbe() (*calibanv1alpha1.CalibanTask, *calibanv1alpha1.ResolvedWorkspace) {
	yes, no, four := true, false, int32(4)
	task := &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "probe", UID: "00000000-0000-0000-0000-000000000000"},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "probe"},
			Model:        &calibanv1alpha1.ModelSpec{Name: "model", RouterConfigRef: "router"},
			State: &calibanv1alpha1.StateSpec{
				Mode: StateModeRemote, GonzaloEndpoint: "http://gonzalod:8080",
				TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "token", Key: "token"},
			},
			Isolation: &calibanv1alpha1.Isolation{RuntimeClass: "sandboxed"},
		},
	}
	pin := &calibanv1alpha1.ResolvedWorkspace{
		Sources: []calibanv1alpha1.Source{
			{Name: "public", Repo: "https://example.com/public.git", Ref: "main", Path: "/work/public"},
			{Name: "https", Repo: "https://example.com/private.git", Ref: "v1", Path: "/work/https",
				CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "basic"}},
			{Name: "ssh", Repo: "git@example.com:team/repo.git", Ref: "0123456789abcdef0123456789abcdef01234567", Path: "/work/ssh",
				CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "ssh"}},
		},
		Provider: calibanv1alpha1.Provider{Name: "p", Kind: "openai", BaseURL: "https://llm.example/v1", Model: "model",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "key", Key: "key"}},
		Env:       []calibanv1alpha1.EnvVar{{Name: "PROBE", Value: "1"}},
		Isolation: &calibanv1alpha1.Isolation{RuntimeClass: "pinned", Worktrees: "per-agent"},
		Egress: &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{
			{CIDR: "10.0.0.0/8", Ports: []int32{443}}, {CIDR: "0.0.0.0/0", Ports: []int32{443}}, {CIDR: "::/0"},
		}},
		AgentPolicy: &calibanv1alpha1.AgentPolicy{
			AllowUnattended: true, PermissionMode: calibanv1alpha1.PermissionModeDontAsk,
			AutoAllow: &yes, NoPermissions: &no, NoMCP: &yes, NoHooks: &yes, NoSkills: &yes, NoSubAgent: &yes,
			StrictKnownMarketplaces: &yes, EnabledPlugins: []string{"plugin"}, BlockedMarketplaces: []string{"https://m.example"},
			ParallelToolLimit: &four,
		},
	}
	return task, pin
}
