// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	sandboxac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/sandbox/v1beta1"
)

// AnnotationAppliedHash records, on every child, a hash of what the operator
// last applied to it. Together with a check that every value it applies is
// still in place, it lets a steady-state sync skip the apply, and still
// notices a field the operator stopped setting, which a containment check
// alone cannot see (pkg/operator/freshness).
const AnnotationAppliedHash = "caliban.caliban-ai.dev/applied-hash"

// AnnotationRenderedBy records, on a Sandbox and a NetworkPolicy, the
// fingerprint of the settings and operator version that rendered it
// (RenderingFingerprint). A child rendered by another one is kept as it is
// (ADR 0015): the operator never re-renders what a running or resumed agent
// relies on because its own settings or version changed.
const AnnotationRenderedBy = "caliban.caliban-ai.dev/rendered-by"

// HashNone is the hash of a child a task does not want: a warm task has
// no ServiceAccount or Sandbox of its own, and no NetworkPolicy before it
// knows its claim's UID. No object carries it.
const HashNone = "none"

// ChildHashes are the applied hashes of a task's three desired children.
type ChildHashes struct {
	ServiceAccount, NetworkPolicy, Sandbox string
}

// Children are a task's three desired children, stamped with their applied
// hash (and, for the NetworkPolicy and the Sandbox, the rendering's
// fingerprint), with their hashes. A child the task does not want is nil,
// its hash HashNone. The sync applies them and the children's caches are
// checked against them, so both agree on what "up to date" means.
type Children struct {
	ServiceAccount *corev1ac.ServiceAccountApplyConfiguration
	NetworkPolicy  *networkingv1ac.NetworkPolicyApplyConfiguration
	Sandbox        *sandboxac.SandboxApplyConfiguration
	Hashes         ChildHashes
}

// Renderer renders a task's children under one set of settings, whose
// fingerprint it stamps on them.
type Renderer struct {
	Settings    config.AgentSettings
	Fingerprint string
}

// NewRenderer is the Renderer of settings s.
func NewRenderer(s config.AgentSettings) (Renderer, error) {
	fingerprint, err := RenderingFingerprint(s)
	if err != nil {
		return Renderer{}, err
	}
	return Renderer{Settings: s, Fingerprint: fingerprint}, nil
}

// Children are the children task wants under pin.
func (r Renderer) Children(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace) (*Children, error) {
	d := &Children{}
	var err error
	if d.ServiceAccount, d.Hashes.ServiceAccount, err = r.ServiceAccount(task, ""); err != nil {
		return nil, err
	}
	if d.NetworkPolicy, d.Hashes.NetworkPolicy, err = r.NetworkPolicy(task, pin, ""); err != nil {
		return nil, err
	}
	if d.Sandbox, d.Hashes.Sandbox, err = r.Sandbox(task, pin, ""); err != nil {
		return nil, err
	}
	return d, nil
}

// ServiceAccount is the ServiceAccount task wants, stamped with its applied
// hash: known, when the caller knows it already, taken otherwise. A
// ServiceAccount renders the same under any settings and carries no
// fingerprint.
func (r Renderer) ServiceAccount(task *calibanv1alpha1.CalibanTask, known string) (*corev1ac.ServiceAccountApplyConfiguration, string, error) {
	if IsWarm(task) {
		// A warm pod runs as its pool's ServiceAccount.
		return nil, HashNone, nil
	}
	sa := BuildServiceAccount(task)
	return stamp("ServiceAccount", *sa.Name, sa, known, map[string]string{})
}

// NetworkPolicy is ServiceAccount for the NetworkPolicy, also stamped with
// the rendering's fingerprint.
func (r Renderer) NetworkPolicy(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, known string) (*networkingv1ac.NetworkPolicyApplyConfiguration, string, error) {
	np := BuildNetworkPolicy(task, pin, r.Settings)
	if IsWarm(task) {
		// The pod its claim holds carries the claim's UID; until the task
		// records it, the pool's isolation policy cuts the pod off.
		claim := task.Status.Launch.Claim
		if claim == nil {
			return nil, HashNone, nil
		}
		np = BuildWarmNetworkPolicy(task, pin, r.Settings, string(claim.UID))
	}
	return stamp("NetworkPolicy", *np.Name, np, known, map[string]string{AnnotationRenderedBy: r.Fingerprint})
}

// Sandbox is NetworkPolicy for the Sandbox.
func (r Renderer) Sandbox(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, known string) (*sandboxac.SandboxApplyConfiguration, string, error) {
	if IsWarm(task) {
		// The pool rendered it; the task applies only its labels and mode
		// (BuildClaimedSandbox).
		return nil, HashNone, nil
	}
	sb := BuildSandbox(task, pin, r.Settings)
	return stamp("Sandbox", *sb.Name, sb, known, map[string]string{AnnotationRenderedBy: r.Fingerprint})
}

// SandboxOver is the Sandbox to apply over live, the task's Sandbox as the
// server has it, in mode; rendered is the task's Sandbox as Sandbox
// renders it. One rendered by these settings and this version gets the
// rendering, with live's volumeClaimTemplates (equal unless the CRD
// defaulted something in them, which must not count as a change): what
// agent-sandbox keeps immutable comes from the Sandbox as it is. A kept one
// (ADR 0015) gets its own spec back: the apply then changes nothing but
// the operatingMode, and claims nothing the operator did not own, its
// labels and annotations being the operator's own keys.
func (r Renderer) SandboxOver(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, live *sandboxv1beta1.Sandbox,
	rendered *sandboxac.SandboxApplyConfiguration, mode sandboxv1beta1.OperatingMode) (*sandboxac.SandboxApplyConfiguration, error) {
	liveSpec, err := SandboxSpecApply(&live.Spec)
	if err != nil {
		return nil, fmt.Errorf("encoding Sandbox %s/%s: %w", live.Namespace, live.Name, err)
	}
	if live.Annotations[AnnotationRenderedBy] == r.Fingerprint {
		desired, spec := *rendered, *rendered.Spec
		spec.VolumeClaimTemplates = liveSpec.VolumeClaimTemplates
		desired.Spec = spec.WithOperatingMode(mode)
		return &desired, nil
	}
	kept := BuildSandbox(task, pin, r.Settings)
	kept.Annotations = map[string]string{}
	for _, key := range []string{AnnotationAppliedHash, AnnotationRenderedBy} {
		if v, ok := live.Annotations[key]; ok {
			kept.Annotations[key] = v
		}
	}
	kept.Spec = liveSpec.WithOperatingMode(mode)
	// Its pod gets the UID label too, which agent-sandbox puts on the
	// running pod in place: the first step of moving its NetworkPolicy
	// from the name labels to the UID (ReselectedNetworkPolicy). A label
	// is no part of what the agent runs.
	if kept.Spec.PodTemplate == nil {
		kept.Spec.PodTemplate = sandboxac.PodTemplate()
	}
	if kept.Spec.PodTemplate.Metadata == nil {
		kept.Spec.PodTemplate.Metadata = sandboxac.PodMetadata()
	}
	kept.Spec.PodTemplate.Metadata.WithLabels(map[string]string{LabelTaskUID: string(task.UID)})
	return kept, nil
}

// stamp adds annotations and the applied hash of child (known, when the
// caller had it) to child's annotations.
func stamp[T interface{ WithAnnotations(map[string]string) T }](kind, name string, child T, known string, annotations map[string]string) (T, string, error) {
	hash := known
	if hash == "" {
		var err error
		if hash, err = AppliedHash(child); err != nil {
			var none T
			return none, "", fmt.Errorf("rendering %s %s: %w", kind, name, err)
		}
	}
	annotations[AnnotationAppliedHash] = hash
	return child.WithAnnotations(annotations), hash, nil
}

// AppliedHash is the applied-hash annotation's value for a desired object,
// taken before the annotation is added.
func AppliedHash(desired any) (string, error) {
	body, err := json.Marshal(desired)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16]), nil
}

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
