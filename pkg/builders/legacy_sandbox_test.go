package builders

// TEMPORARY: the typed Sandbox rendering as it was before BuildSandbox
// returned an apply configuration, kept only for
// TestTheApplyConfigurationIsTheOldApplyBody. Deleted with sandbox_apply.go.

import (
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

func legacyBuildSandbox(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s AgentSettings) *sandboxv1beta1.Sandbox {
	labels := TaskLabels(task)
	yes := true
	return &sandboxv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: SandboxAPIVersion, Kind: SandboxKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:            SandboxName(task.Name),
			Namespace:       task.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{TaskOwnerReference(task)},
		},
		Spec: sandboxv1beta1.SandboxSpec{
			Service:       &yes,
			OperatingMode: sandboxv1beta1.OperatingModeRunning,
			VolumeClaimTemplates: []sandboxv1beta1.PersistentVolumeClaimTemplate{{
				Metadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: VolumeWorkspace},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{workspaceAccessModeRWO},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: s.WorkspaceStorage,
					}},
				},
			}},
			PodTemplate: sandboxv1beta1.PodTemplate{
				Metadata: sandboxv1beta1.PodMetadata{Labels: labels},
				Spec:     legacyPodSpec(task, pin, s),
			},
		},
	}
}

func legacyPodSpec(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s AgentSettings) corev1.PodSpec {
	no, yes := false, true
	uid, gid := s.AgentUID, s.AgentGID
	spec := corev1.PodSpec{
		ServiceAccountName:           ServiceAccountName(task.Name),
		AutomountServiceAccountToken: &no,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsUser:      &uid,
			RunAsGroup:     &gid,
			FSGroup:        &gid,
			RunAsNonRoot:   &yes,
			SeccompProfile: &corev1.SeccompProfile{Type: s.AgentSeccompProfile},
		},
		RuntimeClassName: legacyRuntimeClass(task, pin),
		Containers:       []corev1.Container{legacyCalibandContainer(task, pin, s)},
		Volumes: []corev1.Volume{{
			Name:         VolumeSessionTLS,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s.SessionTLSSecret}},
		}},
	}
	if len(pin.Sources) > 0 {
		clone := corev1.Container{
			Name:            ContainerClone,
			Image:           s.GitImage,
			Command:         []string{"/bin/sh", "-c", CloneScript(pin.Sources, SourceCredentialsDir)},
			VolumeMounts:    []corev1.VolumeMount{{Name: VolumeWorkspace, MountPath: s.WorkspaceRoot}},
			Resources:       s.CalibandResources,
			SecurityContext: legacyContainerSecurityContext(),
		}
		volumes, mounts := legacySourceCredentials(pin.Sources)
		spec.Volumes = append(spec.Volumes, volumes...)
		clone.VolumeMounts = append(clone.VolumeMounts, mounts...)
		spec.InitContainers = []corev1.Container{clone}
	}
	if ref := routerConfigRef(task); ref != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name: VolumeRouterConfig,
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: ref},
			}},
		})
	}
	return spec
}

func legacySourceCredentials(sources []calibanv1alpha1.Source) ([]corev1.Volume, []corev1.VolumeMount) {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	mode := int32(0o400)
	for i, src := range sources {
		auth := credentialsAuth(src)
		if auth == authUnsupported {
			continue
		}
		name := VolumeSourceCredentialsPrefix + strconv.Itoa(i)
		var items []corev1.KeyToPath
		for _, key := range auth.secretKeys() {
			items = append(items, corev1.KeyToPath{Key: key, Path: key})
		}
		volumes = append(volumes, corev1.Volume{
			Name: name,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: src.CredentialsRef.SecretName, Items: items, DefaultMode: &mode,
			}},
		})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: path.Join(SourceCredentialsDir, strconv.Itoa(i)), ReadOnly: true})
	}
	return volumes, mounts
}

func legacyCalibandContainer(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s AgentSettings) corev1.Container {
	c := corev1.Container{
		Name:  ContainerCaliband,
		Image: s.CalibandImage,
		// args, not command: the image's ENTRYPOINT is caliband.
		Args: []string{
			FlagWorkspaceRoot, s.WorkspaceRoot,
			FlagListen, ListenHost + ":" + strconv.Itoa(int(s.CalibandPort)),
			FlagAdvertiseHost, AdvertiseHost(task, s),
			FlagAgentPortBase, strconv.Itoa(int(s.AgentPortBase)),
			FlagTLSCert, TLSCertPath,
			FlagTLSKey, TLSKeyPath,
			FlagTLSCA, TLSCAPath,
			FlagTLSServerName, s.SessionServerName,
		},
		Ports: []corev1.ContainerPort{{
			Name: PortNameCaliband, ContainerPort: s.CalibandPort, Protocol: corev1.ProtocolTCP,
		}},
		Env: legacyCalibandEnv(task, pin, s),
		// Readiness and startup only. A liveness probe would restart
		// caliband, and a restart kills every agent it supervises.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     legacyTCPProbe(),
			PeriodSeconds:    5,
			TimeoutSeconds:   1,
			SuccessThreshold: 1,
			FailureThreshold: 3,
		},
		StartupProbe: &corev1.Probe{
			ProbeHandler:     legacyTCPProbe(),
			PeriodSeconds:    2,
			TimeoutSeconds:   1,
			SuccessThreshold: 1,
			FailureThreshold: 60,
		},
		Resources:       s.CalibandResources,
		SecurityContext: legacyContainerSecurityContext(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: VolumeWorkspace, MountPath: s.WorkspaceRoot},
			{Name: VolumeSessionTLS, MountPath: TLSMountDir, ReadOnly: true},
		},
	}
	if routerConfigRef(task) != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeRouterConfig, MountPath: RouterConfigMountDir, ReadOnly: true})
	}
	return c
}

func legacyTCPProbe() corev1.ProbeHandler {
	return corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(PortNameCaliband)}}
}

func legacyContainerSecurityContext() *corev1.SecurityContext {
	no := false
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func legacyRuntimeClass(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace) *string {
	if iso := task.Spec.Isolation; iso != nil && iso.RuntimeClass != "" {
		rc := iso.RuntimeClass
		return &rc
	}
	if iso := pin.Isolation; iso != nil && iso.RuntimeClass != "" {
		rc := iso.RuntimeClass
		return &rc
	}
	return nil
}

func legacyCalibandEnv(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s AgentSettings) []corev1.EnvVar {
	var env legacyEnvList

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

	policy := legacyAgentPolicyEnv(pin.AgentPolicy)
	kinds := []string{p.Kind}
	for _, e := range pin.Env {
		// Validation keeps operator-owned and dead names out of a Ready
		// workspace; a pin from before those checks must still not emit them.
		if OperatorOwnedEnv(e.Name, kinds) || slices.Contains(DeadEnvNames, e.Name) || policy.has(e.Name) || env.has(e.Name) {
			continue
		}
		env.value(e.Name, e.Value)
	}
	env = append(env, policy...)

	env.secret(EnvDaemonToken, s.SessionTokenSecret, s.SessionTokenKey)
	return env
}

func legacyAgentPolicyEnv(policy *calibanv1alpha1.AgentPolicy) legacyEnvList {
	var env legacyEnvList
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

type legacyEnvList []corev1.EnvVar

func (l *legacyEnvList) value(name, value string) {
	*l = append(*l, corev1.EnvVar{Name: name, Value: value})
}

func (l *legacyEnvList) secret(name, secretName, key string) {
	optional := false
	*l = append(*l, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secretName},
		Key:                  key,
		Optional:             &optional,
	}}})
}

func (l legacyEnvList) has(name string) bool {
	for _, e := range l {
		if e.Name == name {
			return true
		}
	}
	return false
}
