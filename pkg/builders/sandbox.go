// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	sandboxac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/sandbox/v1beta1"
)

// Names inside the agent pod.
const (
	ContainerCaliband  = "caliband"
	ContainerClone     = "clone-workspace"
	PortNameCaliband   = "caliband"
	VolumeWorkspace    = "workspace"
	VolumeSessionTLS   = "session-tls"
	VolumeRouterConfig = "router-config"
	// VolumeSourceCredentialsPrefix and the source's index name the volume
	// of a private source's Secret.
	VolumeSourceCredentialsPrefix = "source-credentials-"
	SandboxKind                   = "Sandbox"
	SandboxResource               = "sandboxes"
	workspaceAccessModeRWO        = corev1.ReadWriteOnce
)

// AdvertiseHost is the name caliband advertises to its clients and agents:
// the Sandbox's headless Service in the task's namespace.
func AdvertiseHost(task *calibanv1alpha1.CalibanTask, s config.AgentSettings) string {
	return ServiceHost(SandboxName(task.Name), task.Namespace, s)
}

// ServiceHost is the name of Sandbox sandbox's headless Service in
// namespace, in the cluster's domain: where caliband is reached.
func ServiceHost(sandbox, namespace string, s config.AgentSettings) string {
	return fmt.Sprintf("%s.%s.svc.%s", sandbox, namespace, s.ClusterDomain)
}

// BuildSandbox renders the task's Sandbox
// (docs/crd-reference.md#the-sandbox-and-the-agent-pod) from the task and the
// configuration pinned at admission: one pod running caliband, a workspace
// volume claim, and a headless Service. Everything in it is the operator's
// intent; nothing is read back from the cluster.
func BuildSandbox(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) *sandboxac.SandboxApplyConfiguration {
	labels := TaskLabels(task)
	return sandboxac.Sandbox(SandboxName(task.Name), task.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReference(task)).
		WithSpec(sandboxac.SandboxSpec().
			WithService(true).
			WithOperatingMode(sandboxv1beta1.OperatingModeRunning).
			WithVolumeClaimTemplates(workspaceClaimTemplate(s)).
			WithPodTemplate(sandboxac.PodTemplate().
				WithMetadata(sandboxac.PodMetadata().WithLabels(labels)).
				WithSpec(podSpec(task, pin, s, taskIdentity(task, s)))))
}

// podIdentity is what ties a pod to one task: the ServiceAccount it runs
// as and the host caliband advertises, with any environment that host
// expands. A warm pool's pod is made before its task and carries the
// pool's (warmIdentity).
type podIdentity struct {
	serviceAccount string
	advertiseHost  string
	env            envList
}

func taskIdentity(task *calibanv1alpha1.CalibanTask, s config.AgentSettings) podIdentity {
	return podIdentity{serviceAccount: ServiceAccountName(task.Name), advertiseHost: AdvertiseHost(task, s)}
}

// SandboxSpecApply is spec, a live Sandbox's, as an apply configuration
// that sends it back unchanged: the claim templates agent-sandbox keeps
// immutable, or the whole spec of a Sandbox the operator keeps as it is
// (ADR 0015). A container's resources, which the API types' encoding writes
// even when nothing is set, is left out when empty, or the apply would
// claim it.
func SandboxSpecApply(spec *sandboxv1beta1.SandboxSpec) (*sandboxac.SandboxSpecApplyConfiguration, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	ac := &sandboxac.SandboxSpecApplyConfiguration{}
	if err := json.Unmarshal(body, ac); err != nil {
		return nil, err
	}
	if pod := ac.PodTemplate; pod != nil && pod.Spec != nil {
		for _, containers := range [][]corev1ac.ContainerApplyConfiguration{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range containers {
				if r := containers[i].Resources; r != nil && r.Limits == nil && r.Requests == nil && r.Claims == nil {
					containers[i].Resources = nil
				}
			}
		}
	}
	return ac, nil
}

func podSpec(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings, id podIdentity) *corev1ac.PodSpecApplyConfiguration {
	spec := corev1ac.PodSpec().
		WithServiceAccountName(id.serviceAccount).
		WithAutomountServiceAccountToken(false).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsUser(s.AgentUID).
			WithRunAsGroup(s.AgentGID).
			WithFSGroup(s.AgentGID).
			WithRunAsNonRoot(true).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(s.AgentSeccompProfile))).
		WithContainers(calibandContainer(task, pin, s, id)).
		WithVolumes(corev1ac.Volume().
			WithName(VolumeSessionTLS).
			WithSecret(corev1ac.SecretVolumeSource().WithSecretName(s.SessionTLSSecret)))
	if rc := runtimeClass(task, pin); rc != "" {
		spec.WithRuntimeClassName(rc)
	}
	if len(pin.Sources) > 0 {
		volumes, mounts := sourceCredentials(pin.Sources)
		spec.WithVolumes(volumes...)
		spec.WithInitContainers(corev1ac.Container().
			WithName(ContainerClone).
			WithImage(s.GitImage).
			WithCommand("/bin/sh", "-c", CloneScript(pin.Sources, SourceCredentialsDir)).
			WithVolumeMounts(corev1ac.VolumeMount().WithName(VolumeWorkspace).WithMountPath(s.WorkspaceRoot)).
			WithVolumeMounts(mounts...).
			WithResources(resources(s.CalibandResources)).
			WithSecurityContext(containerSecurityContext()))
	}
	if ref := routerConfigRef(task); ref != "" {
		spec.WithVolumes(corev1ac.Volume().
			WithName(VolumeRouterConfig).
			WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(ref)))
	}
	return spec
}

// sourceCredentials are the volumes of the private sources' Secrets and
// their mounts, which only the clone container gets: each Secret is
// projected read-only, owner-read only (0400; the pod's fsGroup adds group
// read, which is how the non-root clone reads a root-owned file), with just
// the keys its type needs, under SourceCredentialsDir/<index>.
func sourceCredentials(sources []calibanv1alpha1.Source) ([]*corev1ac.VolumeApplyConfiguration, []*corev1ac.VolumeMountApplyConfiguration) {
	var volumes []*corev1ac.VolumeApplyConfiguration
	var mounts []*corev1ac.VolumeMountApplyConfiguration
	for i, src := range sources {
		auth := credentialsAuth(src)
		if auth == authUnsupported {
			continue
		}
		name := VolumeSourceCredentialsPrefix + strconv.Itoa(i)
		secret := corev1ac.SecretVolumeSource().WithSecretName(src.CredentialsRef.SecretName).WithDefaultMode(0o400)
		for _, key := range auth.secretKeys() {
			secret.WithItems(corev1ac.KeyToPath().WithKey(key).WithPath(key))
		}
		volumes = append(volumes, corev1ac.Volume().WithName(name).WithSecret(secret))
		mounts = append(mounts, corev1ac.VolumeMount().
			WithName(name).
			WithMountPath(path.Join(SourceCredentialsDir, strconv.Itoa(i))).
			WithReadOnly(true))
	}
	return volumes, mounts
}

func calibandContainer(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings, id podIdentity) *corev1ac.ContainerApplyConfiguration {
	c := corev1ac.Container().
		WithName(ContainerCaliband).
		WithImage(s.CalibandImage).
		// args, not command: the image's ENTRYPOINT is caliband.
		WithArgs(
			FlagWorkspaceRoot, s.WorkspaceRoot,
			FlagListen, ListenHost+":"+strconv.Itoa(int(s.CalibandPort)),
			FlagAdvertiseHost, id.advertiseHost,
			FlagAgentPortBase, strconv.Itoa(int(s.AgentPortBase)),
			FlagTLSCert, TLSCertPath,
			FlagTLSKey, TLSKeyPath,
			FlagTLSCA, TLSCAPath,
			FlagTLSServerName, s.SessionServerName,
		).
		WithPorts(corev1ac.ContainerPort().
			WithName(PortNameCaliband).
			WithContainerPort(s.CalibandPort).
			WithProtocol(corev1.ProtocolTCP)).
		WithEnv(calibandEnvAfter(id.env, task, pin, s)...).
		// Readiness and startup only. A liveness probe would restart
		// caliband, and a restart kills every agent it supervises.
		WithReadinessProbe(corev1ac.Probe().
			WithTCPSocket(tcpProbe()).
			WithPeriodSeconds(5).
			WithTimeoutSeconds(1).
			WithSuccessThreshold(1).
			WithFailureThreshold(3)).
		WithStartupProbe(corev1ac.Probe().
			WithTCPSocket(tcpProbe()).
			WithPeriodSeconds(2).
			WithTimeoutSeconds(1).
			WithSuccessThreshold(1).
			WithFailureThreshold(60)).
		WithResources(resources(s.CalibandResources)).
		WithSecurityContext(containerSecurityContext()).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName(VolumeWorkspace).WithMountPath(s.WorkspaceRoot),
			corev1ac.VolumeMount().WithName(VolumeSessionTLS).WithMountPath(TLSMountDir).WithReadOnly(true),
		)
	if routerConfigRef(task) != "" {
		c.WithVolumeMounts(corev1ac.VolumeMount().WithName(VolumeRouterConfig).WithMountPath(RouterConfigMountDir).WithReadOnly(true))
	}
	return c
}

func workspaceStorage(s config.AgentSettings) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceStorage: s.WorkspaceStorage}
}

func tcpProbe() *corev1ac.TCPSocketActionApplyConfiguration {
	return corev1ac.TCPSocketAction().WithPort(intstr.FromString(PortNameCaliband))
}

// resources is nil when the settings configure none: in an apply body an
// empty resources would still claim the field
// (docs/crd-reference.md#the-sandbox-and-the-agent-pod: "omitted when none
// is set"). The settings hold only requests and limits.
func resources(r corev1.ResourceRequirements) *corev1ac.ResourceRequirementsApplyConfiguration {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return nil
	}
	ac := corev1ac.ResourceRequirements()
	if len(r.Requests) > 0 {
		ac.WithRequests(r.Requests)
	}
	if len(r.Limits) > 0 {
		ac.WithLimits(r.Limits)
	}
	return ac
}

// containerSecurityContext is what Pod Security "restricted" asks of every
// container beyond the pod-level settings.
func containerSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

// runtimeClass: the task's own choice, else the pinned workspace default,
// else none ("", the cluster default).
func runtimeClass(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace) string {
	if iso := task.Spec.Isolation; iso != nil && iso.RuntimeClass != "" {
		return iso.RuntimeClass
	}
	if iso := pin.Isolation; iso != nil {
		return iso.RuntimeClass
	}
	return ""
}

func routerConfigRef(task *calibanv1alpha1.CalibanTask) string {
	if task.Spec.Model == nil {
		return ""
	}
	return task.Spec.Model.RouterConfigRef
}
