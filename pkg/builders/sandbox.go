package builders

import (
	"fmt"
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
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
	SandboxAPIVersion             = "agents.x-k8s.io/v1beta1"
	SandboxKind                   = "Sandbox"
	SandboxResource               = "sandboxes"
	workspaceAccessModeRWO        = corev1.ReadWriteOnce
)

// AdvertiseHost is the name caliband advertises to its clients and agents:
// the Sandbox's headless Service in the task's namespace.
func AdvertiseHost(task *calibanv1alpha1.CalibanTask, s config.AgentSettings) string {
	return fmt.Sprintf("%s.%s.svc.%s", SandboxName(task.Name), task.Namespace, s.ClusterDomain)
}

// BuildSandbox renders the task's Sandbox
// (docs/crd-reference.md#the-sandbox-and-the-agent-pod) from the task and the
// configuration pinned at admission: one pod running caliband, a workspace
// volume claim, and a headless Service. Everything in it is the operator's
// intent; nothing is read back from the cluster.
func BuildSandbox(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) *sandboxv1beta1.Sandbox {
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
				Spec:     podSpec(task, pin, s),
			},
		},
	}
}

func podSpec(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) corev1.PodSpec {
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
		RuntimeClassName: runtimeClass(task, pin),
		Containers:       []corev1.Container{calibandContainer(task, pin, s)},
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
			SecurityContext: containerSecurityContext(),
		}
		volumes, mounts := sourceCredentials(pin.Sources)
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

// sourceCredentials are the volumes of the private sources' Secrets and
// their mounts, which only the clone container gets: each Secret is
// projected read-only, owner-read only (0400; the pod's fsGroup adds group
// read, which is how the non-root clone reads a root-owned file), with just
// the keys its type needs, under SourceCredentialsDir/<index>.
func sourceCredentials(sources []calibanv1alpha1.Source) ([]corev1.Volume, []corev1.VolumeMount) {
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

func calibandContainer(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) corev1.Container {
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
		Env: CalibandEnv(task, pin, s),
		// Readiness and startup only. A liveness probe would restart
		// caliband, and a restart kills every agent it supervises.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     tcpProbe(),
			PeriodSeconds:    5,
			TimeoutSeconds:   1,
			SuccessThreshold: 1,
			FailureThreshold: 3,
		},
		StartupProbe: &corev1.Probe{
			ProbeHandler:     tcpProbe(),
			PeriodSeconds:    2,
			TimeoutSeconds:   1,
			SuccessThreshold: 1,
			FailureThreshold: 60,
		},
		Resources:       s.CalibandResources,
		SecurityContext: containerSecurityContext(),
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

func tcpProbe() corev1.ProbeHandler {
	return corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(PortNameCaliband)}}
}

// containerSecurityContext is what Pod Security "restricted" asks of every
// container beyond the pod-level settings.
func containerSecurityContext() *corev1.SecurityContext {
	no := false
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// runtimeClass: the task's own choice, else the pinned workspace default,
// else none (the cluster default).
func runtimeClass(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace) *string {
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

func routerConfigRef(task *calibanv1alpha1.CalibanTask) string {
	if task.Spec.Model == nil {
		return ""
	}
	return task.Spec.Model.RouterConfigRef
}
