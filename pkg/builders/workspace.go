// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// SecretGetter returns the Secret of that name in the object's namespace,
// or nil when there is none. An error means the answer is unknown (the API
// failed): callers retry rather than fail the object.
type SecretGetter func(name string) (*corev1.Secret, error)

// secretHasKey reports whether key is in the Secret's data or stringData.
func secretHasKey(s *corev1.Secret, key string) bool {
	if s == nil {
		return false
	}
	if _, ok := s.Data[key]; ok {
		return true
	}
	_, ok := s.StringData[key]
	return ok
}

// ConditionReady is the condition type the operator owns on both kinds.
const ConditionReady = "Ready"

// Workspace Ready reasons.
const (
	ReasonWorkspaceValid   = "Valid"
	ReasonWorkspaceInvalid = "Invalid"
)

// ValidateWorkspace runs the checks of docs/crd-reference.md#validation in
// order and returns the first problem as a message naming the field, or ""
// when the workspace is valid. root is the operator's workspace root. The
// error is the secret lookup's, returned when the answer cannot be known.
func ValidateWorkspace(spec *calibanv1alpha1.WorkspaceSpec, root string, getSecret SecretGetter) (string, error) {
	checks := []func() string{
		func() string { return sourcePathProblem(spec.Sources, root) },    // sources land strictly under the root, each in its own place
		func() string { return egressProblem(spec.Egress) },               // every CIDR and port is usable in a NetworkPolicy, and no CIDR is link-local
		func() string { return duplicateProviderProblem(spec.Providers) }, // providers are addressable by name
		func() string { return defaultProviderProblem(spec) },             // defaultProvider points somewhere
		func() string { return envProblem(spec.Env, spec.Providers) },     // env neither repeats nor shadows the operator's own or the agent policy's variables, nor loads code
		func() string { return agentPolicyProblem(spec.AgentPolicy) },     // caliban would refuse to start
		func() string { return providerKindProblem(spec.Providers) },      // the kind's variables are ones caliban may see
		func() string { return isolationProblem(spec.Isolation) },         // the pod's runtimeClassName is one the apiserver accepts
		func() string { return credentialsNameProblem(spec.Providers) },   // the Secret lookup below is a request client-go can make
		func() string { return sourceRefProblem(spec.Sources) },           // a ref git can check out: a name, or a full commit id
		func() string { return sourceCredentialsProblem(spec.Sources) },   // credentials on a repo that can use them, from a Secret client-go can read
	}
	for _, check := range checks {
		if p := check(); p != "" {
			return p, nil
		}
	}
	// Credentials last: the only check that reads the API.
	for _, p := range spec.Providers {
		if p.CredentialsRef == nil {
			continue
		}
		secret, err := getSecret(p.CredentialsRef.SecretName)
		if err != nil {
			return "", fmt.Errorf("provider '%s': reading secret '%s': %w", p.Name, p.CredentialsRef.SecretName, err)
		}
		if !secretHasKey(secret, p.CredentialsRef.Key) {
			return fmt.Sprintf("provider '%s': secret '%s' key '%s' not found", p.Name, p.CredentialsRef.SecretName, p.CredentialsRef.Key), nil
		}
	}
	for i, src := range spec.Sources {
		if src.CredentialsRef == nil {
			continue
		}
		name := src.CredentialsRef.SecretName
		secret, err := getSecret(name)
		if err != nil {
			return "", fmt.Errorf("sources[%d] '%s': reading secret '%s': %w", i, src.Name, name, err)
		}
		if p := sourceSecretProblem(secret, repoAuth(src.Repo)); p != "" {
			return fmt.Sprintf("sources[%d] '%s': secret '%s' %s", i, src.Name, name, p), nil
		}
	}
	return "", nil
}

// sourceSecretProblem checks a source's Secret in the order the docs give:
// it exists, holds the keys its own type needs, and its type is the one the
// repo's scheme authenticates with. A Secret of another type needs no keys
// of its own and fails on the type.
func sourceSecretProblem(secret *corev1.Secret, want sourceAuth) string {
	if secret == nil {
		return "not found"
	}
	for _, auth := range []sourceAuth{authBasic, authSSH} {
		if secret.Type != auth.secretType() {
			continue
		}
		for _, key := range auth.secretKeys() {
			if !secretHasKey(secret, key) {
				return fmt.Sprintf("key '%s' not found (a %s secret needs '%s')", key, secret.Type, strings.Join(auth.secretKeys(), "' and '"))
			}
		}
	}
	if secret.Type != want.secretType() {
		return fmt.Sprintf("is of type '%s', but %s repo needs a %s secret", secret.Type, want.schemes(), want.secretType())
	}
	return ""
}

// sourceCredentialsProblem refuses credentials git could not use: on a
// repo whose scheme takes none (plain http:// would send a password in the
// clear; file:// has no server), or in a Secret name client-go will not
// request.
func sourceCredentialsProblem(sources []calibanv1alpha1.Source) string {
	for i, s := range sources {
		if s.CredentialsRef == nil {
			continue
		}
		if msg := secretNameProblem(s.CredentialsRef.SecretName); msg != "" {
			return fmt.Sprintf("sources[%d].credentialsRef.secretName '%s' %s", i, s.CredentialsRef.SecretName, msg)
		}
		switch repoAuth(s.Repo) {
		case authUnsupported:
			return fmt.Sprintf("sources[%d] '%s': credentialsRef needs an https://, ssh:// or git@ repo; '%s' is none of these", i, s.Name, s.Repo)
		case authBasic:
			// The credential helper answers only for this host.
			if repoHost(s.Repo) == "" {
				return fmt.Sprintf("sources[%d] '%s': credentialsRef needs an https:// repo with a host the credentials can be tied to; '%s' has none", i, s.Name, s.Repo)
			}
		}
	}
	return ""
}

// sourceRefProblem refuses a ref that reads as an abbreviated commit id:
// in the pod it would fail as a branch that does not exist, while here the
// message can say what to write instead.
func sourceRefProblem(sources []calibanv1alpha1.Source) string {
	for i, s := range sources {
		if looksAbbreviated(s.Ref) {
			return fmt.Sprintf("sources[%d] '%s': ref '%s' looks like an abbreviated commit SHA, which git cannot fetch; give the full 40- or 64-character commit id", i, s.Name, s.Ref)
		}
	}
	return ""
}

func sourcePathProblem(sources []calibanv1alpha1.Source, root string) string {
	root = path.Clean(root)
	// "/" already ends in a separator; every other cleaned root does not.
	under := strings.TrimSuffix(root, "/") + "/"
	seen := map[string]string{}
	for i, s := range sources {
		p := path.Clean(s.Path)
		if !path.IsAbs(s.Path) || p == root || !strings.HasPrefix(p, under) {
			return fmt.Sprintf("sources[%d] '%s': path '%s' is not under the workspace root '%s'", i, s.Name, s.Path, root)
		}
		if other, dup := seen[p]; dup {
			return fmt.Sprintf("sources[%d] '%s': path '%s' is also the path of source '%s'", i, s.Name, s.Path, other)
		}
		seen[p] = s.Name
	}
	return ""
}

func egressProblem(egress *calibanv1alpha1.Egress) string {
	if egress == nil {
		return ""
	}
	for i, rule := range egress.Allow {
		prefix, err := netip.ParsePrefix(rule.CIDR)
		if err != nil {
			return fmt.Sprintf("egress.allow[%d]: cidr '%s' is not an IPv4 or IPv6 CIDR", i, rule.CIDR)
		}
		// A CIDR around a link-local range is rendered without it; one
		// inside would be rendered as nothing, which the user would never
		// learn of but from here. Checked first, in every spelling (an
		// IPv4-mapped one, host bits set): the other messages would suggest
		// the link-local network as the fix.
		if inside, _ := linkLocalOverlap(prefix); inside.IsValid() {
			return fmt.Sprintf("egress.allow[%d]: cidr '%s' is link-local (%s), which agent pods may never reach", i, rule.CIDR, inside)
		}
		if p := networkPolicyCIDRProblem(prefix); p != "" {
			return fmt.Sprintf("egress.allow[%d]: cidr '%s' %s", i, rule.CIDR, p)
		}
		for _, port := range rule.Ports {
			if port < 1 || port > 65535 {
				return fmt.Sprintf("egress.allow[%d]: port %d is outside 1-65535", i, port)
			}
		}
	}
	return ""
}

// networkPolicyCIDRProblem says why a NetworkPolicy's ipBlock.cidr would
// refuse a prefix netip accepts, or "". Without it the Workspace is Ready
// and every task's NetworkPolicy apply fails, so no task ever runs.
func networkPolicyCIDRProblem(prefix netip.Prefix) string {
	addr := prefix.Addr()
	switch {
	case addr.Is4In6() && prefix.Bits() >= 96:
		v4, _ := mappedIPv4(prefix)
		return fmt.Sprintf("is an IPv4-mapped IPv6 address, which a NetworkPolicy refuses; write it as IPv4 ('%s')", v4.Masked())
	case addr.Is4In6():
		return "is an IPv4-mapped IPv6 address, which a NetworkPolicy refuses"
	case prefix != prefix.Masked():
		return fmt.Sprintf("has bits set beyond the prefix length, which a NetworkPolicy refuses; the network is '%s'", prefix.Masked())
	}
	return ""
}

func duplicateProviderProblem(providers []calibanv1alpha1.Provider) string {
	seen := map[string]bool{}
	for _, p := range providers {
		if seen[p.Name] {
			return fmt.Sprintf("duplicate provider name '%s'", p.Name)
		}
		seen[p.Name] = true
	}
	return ""
}

func defaultProviderProblem(spec *calibanv1alpha1.WorkspaceSpec) string {
	if spec.DefaultProvider == "" || findProvider(spec.Providers, spec.DefaultProvider) != nil {
		return ""
	}
	return fmt.Sprintf("defaultProvider '%s' names no provider", spec.DefaultProvider)
}

func envProblem(env []calibanv1alpha1.EnvVar, providers []calibanv1alpha1.Provider) string {
	kinds := make([]string, 0, len(providers))
	for _, p := range providers {
		kinds = append(kinds, p.Kind)
	}
	seen := map[string]bool{}
	for i, e := range env {
		if len(validation.IsRelaxedEnvVarName(e.Name)) > 0 {
			return fmt.Sprintf("env[%d]: '%s' is not a valid environment variable name: %s", i, e.Name, envNameRule)
		}
		if seen[e.Name] {
			return fmt.Sprintf("env[%d]: duplicate name '%s'", i, e.Name)
		}
		seen[e.Name] = true
		if OperatorOwnedEnv(e.Name, kinds) {
			return fmt.Sprintf("env[%d]: '%s' is set by the operator itself and cannot be overridden", i, e.Name)
		}
		if slices.Contains(DeadEnvNames, e.Name) {
			return fmt.Sprintf("env[%d]: '%s' must not be set in agent pods (caliban does not read it, or caliband sets it for its workers)", i, e.Name)
		}
		if field := AgentPolicyField(e.Name); field != "" {
			return fmt.Sprintf("env[%d]: %s; set that field instead", i, agentPolicyEnvProblem(e.Name, field))
		}
		if LoaderEnv(e.Name) {
			return fmt.Sprintf("env[%d].name: %s", i, loaderEnvProblem(e.Name))
		}
	}
	return ""
}

// loaderEnvProblem says why an env entry may not carry a LoaderEnv
// variable, in the schema rule's words (pkg/apis, WorkspaceSpec.Env).
func loaderEnvProblem(name string) string {
	return fmt.Sprintf("'%s' decides what code the agent pod loads or runs, and cannot be set in a Workspace", name)
}

// agentPolicyEnvProblem says why an env entry may not carry an agentPolicy
// variable, in the schema rule's words (pkg/apis, WorkspaceSpec.Env).
func agentPolicyEnvProblem(name, field string) string {
	return fmt.Sprintf("'%s' is projected from %s and cannot be set in a Workspace", name, field)
}

func agentPolicyProblem(policy *calibanv1alpha1.AgentPolicy) string {
	if policy != nil && isTrue(policy.NoPermissions) && isTrue(policy.AutoAllow) {
		return "agentPolicy.noPermissions and agentPolicy.autoAllow cannot both be true (caliban refuses to start with both)"
	}
	return ""
}

// providerKindProblem refuses a kind whose derived variable names (the
// <KIND>_BASE_URL/<KIND>_API_KEY rule) land on a variable that must never
// reach the pod or that the operator sets for another purpose, such as kind
// "caliban" becoming CALIBAN_API_KEY.
func providerKindProblem(providers []calibanv1alpha1.Provider) string {
	for i, p := range providers {
		baseURL, apiKey := ProviderEnv(p.Kind)
		for _, name := range []string{baseURL, apiKey} {
			if slices.Contains(DeadEnvNames, name) || slices.Contains(OperatorEnvNames, name) {
				return fmt.Sprintf("providers[%d] '%s': kind '%s' would set %s, which the agent pod must not carry; use a different kind", i, p.Name, p.Kind, name)
			}
		}
	}
	return ""
}

// The rules the schema states for names Kubernetes checks later, in the
// same words, so an object stored before the schema had them reads the same
// answer in its status as a new one gets from the apiserver.
const (
	subdomainRule = "a lowercase RFC 1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)"
	envNameRule   = "printable ASCII characters other than '='"
)

// isolationProblem checks the runtimeClass default: the apiserver refuses
// a Pod whose runtimeClassName is no RuntimeClass name, inside
// agent-sandbox's controller, where nobody reads it.
func isolationProblem(iso *calibanv1alpha1.Isolation) string {
	if iso == nil || iso.RuntimeClass == "" || len(validation.IsDNS1123Subdomain(iso.RuntimeClass)) == 0 {
		return ""
	}
	return fmt.Sprintf("isolation.runtimeClass '%s' is not a valid RuntimeClass name: it must be %s", iso.RuntimeClass, subdomainRule)
}

// credentialsNameProblem catches a Secret name client-go will not even
// request ("may not contain '/'"): the lookup would fail on every retry and
// the workspace would never get a status.
func credentialsNameProblem(providers []calibanv1alpha1.Provider) string {
	for i, p := range providers {
		if p.CredentialsRef != nil {
			if msg := secretNameProblem(p.CredentialsRef.SecretName); msg != "" {
				return fmt.Sprintf("providers[%d].credentialsRef.secretName '%s' %s", i, p.CredentialsRef.SecretName, msg)
			}
		}
	}
	return ""
}

func secretNameProblem(name string) string {
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return ""
	}
	return "is not a valid Secret name: it must be " + subdomainRule
}

func findProvider(providers []calibanv1alpha1.Provider, name string) *calibanv1alpha1.Provider {
	for i := range providers {
		if providers[i].Name == name {
			return &providers[i]
		}
	}
	return nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// WorkspaceStatus is the whole status the operator owns for a workspace
// whose validation returned problem ("" when valid). current is the stored
// status: its Ready condition's lastTransitionTime survives when the
// condition's status does not change.
func WorkspaceStatus(ws *calibanv1alpha1.Workspace, problem string, pool *WarmPoolObservation, now metav1.Time) calibanv1alpha1.WorkspaceStatus {
	status := calibanv1alpha1.WorkspaceStatus{
		Phase:              calibanv1alpha1.WorkspaceReady,
		ObservedGeneration: ws.Generation,
	}
	ready := metav1.Condition{
		Type:               ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             ReasonWorkspaceValid,
		Message:            "the workspace is valid",
		ObservedGeneration: ws.Generation,
	}
	if problem != "" {
		status.Phase = calibanv1alpha1.WorkspaceFailed
		status.Message = problem
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonWorkspaceInvalid, problem
	}
	status.Conditions = []metav1.Condition{withTransitionTime(ready, ws.Status.Conditions, now)}
	if problem != "" && pool != nil {
		pool = &WarmPoolObservation{Reason: ReasonWarmPoolWorkspaceInvalid, Problem: "the workspace is invalid"}
	}
	if warm, cond := warmPoolStatus(ws, pool); warm != nil {
		status.WarmPool = warm
		status.Conditions = append(status.Conditions, withTransitionTime(*cond, ws.Status.Conditions, now))
	}
	return status
}

// WorkspaceStatusChanged reports whether applying desired would change
// anything the operator owns in current: phase, message, observedGeneration,
// the Ready and WarmPoolReady conditions or warmPool. Conditions of other
// types are not the operator's and never count.
func WorkspaceStatusChanged(current, desired calibanv1alpha1.WorkspaceStatus) bool {
	return current.Phase != desired.Phase ||
		current.Message != desired.Message ||
		current.ObservedGeneration != desired.ObservedGeneration ||
		!sameCondition(meta.FindStatusCondition(current.Conditions, ConditionReady), meta.FindStatusCondition(desired.Conditions, ConditionReady)) ||
		!sameCondition(meta.FindStatusCondition(current.Conditions, ConditionWarmPoolReady), meta.FindStatusCondition(desired.Conditions, ConditionWarmPoolReady)) ||
		!apiequality.Semantic.DeepEqual(current.WarmPool, desired.WarmPool)
}

// withTransitionTime stamps cond with now, or with the time the existing
// condition of its type last changed status when its status is the same:
// a transition time that moved on every pass would make every pass a write.
func withTransitionTime(cond metav1.Condition, existing []metav1.Condition, now metav1.Time) metav1.Condition {
	cond.LastTransitionTime = now
	if old := meta.FindStatusCondition(existing, cond.Type); old != nil && old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	return cond
}

func sameCondition(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	// Semantic equality compares times as instants, whatever their location.
	return apiequality.Semantic.DeepEqual(*a, *b)
}
