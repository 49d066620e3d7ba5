// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"slices"
	"strconv"
	"strings"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// CalibandEnv is the caliband container's environment, in a fixed order with
// no repeated name (server-side apply rejects a list-map with duplicate
// keys): the provider, storage, router config, the workspace's env, the
// agentPolicy variables and last the daemon token. Secrets only ever appear
// as secretKeyRefs.
func CalibandEnv(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) []*corev1ac.EnvVarApplyConfiguration {
	return calibandEnvAfter(nil, task, pin, s)
}

// calibandEnvAfter is CalibandEnv after first, the pod identity's own
// variables, which the workspace's env can then not repeat.
func calibandEnvAfter(first envList, task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) envList {
	env := append(envList(nil), first...)

	p := pin.Provider
	env.value(EnvProvider, p.Kind)
	baseURLVar, apiKeyVar := ProviderEnv(p.Kind)
	if p.BaseURL != "" {
		env.value(baseURLVar, p.BaseURL)
	}
	if p.CredentialsRef != nil {
		env.secret(apiKeyVar, p.CredentialsRef.SecretName, p.CredentialsRef.Key)
	}

	if st := task.Spec.State; st != nil {
		switch {
		case st.GonzaloEndpoint != "" && st.Mode != StateModeLocal:
			env.value(EnvStorageSubstrate, StorageSubstrateRemote)
			env.value(EnvStorageRemoteURL, st.GonzaloEndpoint)
			if st.TokenRef != nil {
				env.value(EnvStorageRemoteTokenEnv, EnvGonzaloToken)
				env.secret(EnvGonzaloToken, st.TokenRef.SecretName, st.TokenRef.Key)
			}
		case st.Mode == StateModeLocal:
			env.value(EnvStorageSubstrate, StorageSubstrateFS)
		}
	}

	if task.Spec.Model != nil && task.Spec.Model.RouterConfigRef != "" {
		env.value(EnvRouterConfig, RouterConfigPath)
	}

	kinds := []string{p.Kind}
	for _, e := range pin.Env {
		// Validation keeps operator-owned, dead, agentPolicy and loader
		// names out of a Ready workspace; a pin from before those checks
		// must still not emit them. An agentPolicy name is dropped even
		// when the policy leaves its field unset: only the typed field
		// passed the posture gate (PinnedEnvProblem fails such a pin, and
		// one with a loader, before it gets here).
		if OperatorOwnedEnv(e.Name, kinds) || slices.Contains(DeadEnvNames, e.Name) || AgentPolicyField(e.Name) != "" || LoaderEnv(e.Name) || env.has(e.Name) {
			continue
		}
		env.value(e.Name, e.Value)
	}
	env = append(env, agentPolicyEnv(pin.AgentPolicy)...)

	env.secret(EnvDaemonToken, s.SessionTokenSecret, s.SessionTokenKey)
	return env
}

// agentPolicyEnv projects the agent policy. Booleans only when true, lists
// comma-joined (an empty enabledPlugins list is projected as an empty
// value, which enables no plugin), unset fields not at all.
func agentPolicyEnv(policy *calibanv1alpha1.AgentPolicy) envList {
	var env envList
	if policy == nil {
		return env
	}
	if policy.PermissionMode != "" {
		env.value(EnvDefaultPermissionMode, string(policy.PermissionMode))
	}
	for _, b := range []struct {
		name string
		v    *bool
	}{
		{EnvAutoAllow, policy.AutoAllow},
		{EnvNoPermissions, policy.NoPermissions},
		{EnvNoMCP, policy.NoMCP},
		{EnvNoHooks, policy.NoHooks},
		{EnvNoSkills, policy.NoSkills},
		{EnvNoSubAgent, policy.NoSubAgent},
		{EnvStrictKnownMarketplaces, policy.StrictKnownMarketplaces},
	} {
		if isTrue(b.v) {
			env.value(b.name, AgentPolicyTrue)
		}
	}
	if policy.EnabledPlugins != nil {
		env.value(EnvEnabledPlugins, strings.Join(policy.EnabledPlugins, AgentPolicyListSeparator))
	}
	if policy.BlockedMarketplaces != nil {
		env.value(EnvBlockedMarketplaces, strings.Join(policy.BlockedMarketplaces, AgentPolicyListSeparator))
	}
	if policy.ParallelToolLimit != nil {
		env.value(EnvParallelToolLimit, strconv.Itoa(int(*policy.ParallelToolLimit)))
	}
	return env
}

type envList []*corev1ac.EnvVarApplyConfiguration

// value sends no empty value: the API's encoding of an env var drops it, so
// sending one would only claim a field that no stored object shows.
func (l *envList) value(name, value string) {
	e := corev1ac.EnvVar().WithName(name)
	if value != "" {
		e.WithValue(value)
	}
	*l = append(*l, e)
}

func (l *envList) fieldRef(name, path string) {
	*l = append(*l, corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().
		WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath(path))))
}

func (l *envList) secret(name, secretName, key string) {
	*l = append(*l, corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().
		WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(secretName).WithKey(key).WithOptional(false))))
}

func (l envList) has(name string) bool {
	for _, e := range l {
		if *e.Name == name {
			return true
		}
	}
	return false
}
