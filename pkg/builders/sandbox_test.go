// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// These tests hold BuildSandbox to
// docs/crd-reference.md#the-sandbox-and-the-agent-pod, one rule at a time. The
// golden files (golden_test.go) show whole objects; here each table names the
// rule it checks.

// longDottedName is a 70-character task name that starts with a digit and
// contains dots: valid for a CalibanTask (a DNS-1123 subdomain) but not as
// the base of a Service name or a label value.
var longDottedName = "7" + strings.Repeat("team.", 11) + "fix-login-1234"

func TestLongDottedNameNeedsTheSafeForm(t *testing.T) {
	if len(longDottedName) != 70 {
		t.Fatalf("len = %d, want 70", len(longDottedName))
	}
	if errs := validation.IsDNS1123Subdomain(longDottedName); len(errs) > 0 {
		t.Fatalf("not a valid task name: %v", errs)
	}
	if errs := validation.IsDNS1035Label(longDottedName + "-sbx"); len(errs) == 0 {
		t.Fatal("the plain Sandbox name would be valid; the fixture no longer exercises the safe form")
	}
}

func TestBuildSandboxArgs(t *testing.T) {
	tests := map[string]struct {
		// inputs
		task     *calibanv1alpha1.CalibanTask
		settings config.AgentSettings
		// expected
		args []string
	}{
		"default settings give the contract's argv in its exact order": {
			task:     task("refactor-auth"),
			settings: settings(),
			args: []string{
				"--workspace-root", "/work",
				"--listen", "0.0.0.0:8443",
				"--advertise-host", "refactor-auth-sbx.team-a.svc.cluster.local",
				"--agent-port-base", "7100",
				"--tls-cert", "/etc/caliband/tls/tls.crt",
				"--tls-key", "/etc/caliband/tls/tls.key",
				"--tls-ca", "/etc/caliband/tls/ca.crt",
				"--tls-server-name", "caliband",
			},
		},
		"every configurable value comes from the settings": {
			task: task("refactor-auth"),
			settings: settings(func(s *config.AgentSettings) {
				s.WorkspaceRoot = "/srv/ws"
				s.CalibandPort = 9443
				s.AgentPortBase = 20000
				s.AgentPortEnd = 20999
				s.ClusterDomain = "corp.example"
				s.SessionServerName = "caliband.session.internal"
				s.SessionTLSSecret = "other-tls"
			}),
			args: []string{
				"--workspace-root", "/srv/ws",
				"--listen", "0.0.0.0:9443",
				"--advertise-host", "refactor-auth-sbx.team-a.svc.corp.example",
				"--agent-port-base", "20000",
				"--tls-cert", "/etc/caliband/tls/tls.crt",
				"--tls-key", "/etc/caliband/tls/tls.key",
				"--tls-ca", "/etc/caliband/tls/ca.crt",
				"--tls-server-name", "caliband.session.internal",
			},
		},
		"a task name that needs the safe form advertises the safe Sandbox name": {
			task:     task("a.b"),
			settings: settings(),
			args: []string{
				"--workspace-root", "/work",
				"--listen", "0.0.0.0:8443",
				"--advertise-host", "a-b-2e7336dc8e-sbx.team-a.svc.cluster.local",
				"--agent-port-base", "7100",
				"--tls-cert", "/etc/caliband/tls/tls.crt",
				"--tls-key", "/etc/caliband/tls/tls.key",
				"--tls-ca", "/etc/caliband/tls/ca.crt",
				"--tls-server-name", "caliband",
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			c := calibandOf(t, buildSandbox(t, test.task, everyFeaturePin(), test.settings).Spec.PodTemplate.Spec)
			if diff := cmp.Diff(test.args, c.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if c.Command != nil {
				t.Errorf("command = %q, want none: the image's ENTRYPOINT is caliband", c.Command)
			}
			if c.Image != test.settings.CalibandImage {
				t.Errorf("image = %q, want %q", c.Image, test.settings.CalibandImage)
			}
		})
	}
}

func TestAdvertiseHost(t *testing.T) {
	tests := map[string]struct {
		task     *calibanv1alpha1.CalibanTask
		settings config.AgentSettings
		want     string
	}{
		"the Sandbox Service in the task's namespace under the cluster domain": {
			task: task("refactor-auth"), settings: settings(), want: "refactor-auth-sbx.team-a.svc.cluster.local",
		},
		"the namespace is the task's own": {
			task:     task("refactor-auth", func(t *calibanv1alpha1.CalibanTask) { t.Namespace = "other" }),
			settings: settings(), want: "refactor-auth-sbx.other.svc.cluster.local",
		},
		"a configured cluster domain replaces cluster.local": {
			task: task("refactor-auth"), settings: settings(func(s *config.AgentSettings) { s.ClusterDomain = "k8s.corp" }),
			want: "refactor-auth-sbx.team-a.svc.k8s.corp",
		},
		"a long dotted name uses the safe Sandbox name": {
			task: task(longDottedName), settings: settings(),
			want: SandboxName(longDottedName) + ".team-a.svc.cluster.local",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if got := AdvertiseHost(test.task, test.settings); got != test.want {
				t.Errorf("AdvertiseHost = %q, want %q", got, test.want)
			}
		})
	}
}

func TestBuildSandboxObjectMeta(t *testing.T) {
	sb := buildSandbox(t, task("refactor-auth"), pin(), settings())
	wantType := metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"}
	if diff := cmp.Diff(wantType, sb.TypeMeta); diff != "" {
		t.Errorf("type meta (-want +got):\n%s", diff)
	}
	labels := map[string]string{
		"app.kubernetes.io/managed-by": "caliban-operator",
		"app.kubernetes.io/name":       "caliband",
		"caliban.caliban-ai.dev/task":  "refactor-auth",
		LabelTaskUID:                   string(fxTaskUID),
	}
	want := metav1.ObjectMeta{
		Name:      "refactor-auth-sbx",
		Namespace: "team-a",
		Labels:    labels,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "caliban.caliban-ai.dev/v1alpha1", Kind: "CalibanTask",
			Name: "refactor-auth", UID: fxTaskUID, Controller: new(true), BlockOwnerDeletion: new(true),
		}},
	}
	if diff := cmp.Diff(want, sb.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	wantPodMeta := sandboxv1beta1.PodMetadata{Labels: labels}
	if diff := cmp.Diff(wantPodMeta, sb.Spec.PodTemplate.Metadata); diff != "" {
		t.Errorf("pod template metadata (-want +got):\n%s", diff)
	}
}

func TestBuildSandboxSpecShape(t *testing.T) {
	tests := map[string]struct {
		settings config.AgentSettings
		storage  string
	}{
		"the default claim asks for 10Gi": {settings: settings(), storage: "10Gi"},
		"the claim asks for the configured storage": {
			settings: settings(func(s *config.AgentSettings) { s.WorkspaceStorage = quantity("250Gi") }), storage: "250Gi",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			sb := buildSandbox(t, task("refactor-auth"), pin(), test.settings)
			if sb.Spec.Service == nil || !*sb.Spec.Service {
				t.Errorf("service = %v, want true (agent-sandbox makes the headless Service)", sb.Spec.Service)
			}
			if sb.Spec.OperatingMode != sandboxv1beta1.OperatingModeRunning {
				t.Errorf("operatingMode = %q, want Running", sb.Spec.OperatingMode)
			}
			want := []sandboxv1beta1.PersistentVolumeClaimTemplate{{
				Metadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: "workspace"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: quantity(test.storage),
					}},
				},
			}}
			if diff := cmp.Diff(want, sb.Spec.VolumeClaimTemplates); diff != "" {
				t.Errorf("volumeClaimTemplates (-want +got):\n%s", diff)
			}
			if sc := sb.Spec.VolumeClaimTemplates[0].Spec.StorageClassName; sc != nil {
				t.Errorf("storageClassName = %q, want unset (the cluster default)", *sc)
			}
		})
	}
}

func TestBuildSandboxRuntimeClass(t *testing.T) {
	tests := map[string]struct {
		task *calibanv1alpha1.CalibanTask
		pin  *calibanv1alpha1.ResolvedWorkspace
		want *string
	}{
		"the task's runtime class wins over the pinned workspace's": {
			task: task("t", taskIsolation(calibanv1alpha1.Isolation{RuntimeClass: "gvisor"})),
			pin:  pin(pinIsolation(calibanv1alpha1.Isolation{RuntimeClass: "kata"})),
			want: new("gvisor"),
		},
		"the task's runtime class applies with no workspace isolation": {
			task: task("t", taskIsolation(calibanv1alpha1.Isolation{RuntimeClass: "gvisor"})),
			pin:  pin(),
			want: new("gvisor"),
		},
		"the pinned workspace's runtime class applies when the task names none": {
			task: task("t"),
			pin:  pin(pinIsolation(calibanv1alpha1.Isolation{RuntimeClass: "kata"})),
			want: new("kata"),
		},
		"a task isolation with only worktrees falls back to the workspace": {
			task: task("t", taskIsolation(calibanv1alpha1.Isolation{Worktrees: "shared"})),
			pin:  pin(pinIsolation(calibanv1alpha1.Isolation{RuntimeClass: "kata"})),
			want: new("kata"),
		},
		"neither side naming one leaves the cluster default": {
			task: task("t", taskIsolation(calibanv1alpha1.Isolation{Worktrees: "shared"})),
			pin:  pin(pinIsolation(calibanv1alpha1.Isolation{Worktrees: "per-agent"})),
			want: nil,
		},
		"no isolation anywhere leaves the cluster default": {
			task: task("t"), pin: pin(), want: nil,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got := buildSandbox(t, test.task, test.pin, settings()).Spec.PodTemplate.Spec.RuntimeClassName
			if diff := cmp.Diff(test.want, got); diff != "" {
				t.Errorf("runtimeClassName (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildSandboxInitContainer(t *testing.T) {
	gitSettings := settings(func(s *config.AgentSettings) {
		s.GitImage = "registry.local/git:2.45"
		s.WorkspaceRoot = "/srv/ws"
	})
	tests := map[string]struct {
		// inputs
		pin      *calibanv1alpha1.ResolvedWorkspace
		settings config.AgentSettings
		// expected
		want []corev1.Container
	}{
		"sources get one clone container that mounts the workspace at the root": {
			pin:      pin(pinSources(srcCaliban, srcDocs)),
			settings: settings(),
			want: []corev1.Container{{
				Name:         "clone-workspace",
				Image:        config.DefaultGitImage,
				Command:      []string{"/bin/sh", "-c", CloneScript([]calibanv1alpha1.Source{srcCaliban, srcDocs}, SourceCredentialsDir)},
				VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: "/work"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: quantity("250m"), corev1.ResourceMemory: quantity("512Mi"),
				}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: new(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
		"the git image and workspace root come from the settings": {
			pin:      pin(pinSources(srcCaliban)),
			settings: gitSettings,
			want: []corev1.Container{{
				Name:         "clone-workspace",
				Image:        "registry.local/git:2.45",
				Command:      []string{"/bin/sh", "-c", CloneScript([]calibanv1alpha1.Source{srcCaliban}, SourceCredentialsDir)},
				VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: "/srv/ws"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: quantity("250m"), corev1.ResourceMemory: quantity("512Mi"),
				}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: new(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
		"no sources means no init container": {
			pin: pin(), settings: settings(), want: nil,
		},
		"an empty source list means no init container": {
			pin: pin(pinSources()), settings: settings(), want: nil,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got := buildSandbox(t, task("t"), test.pin, test.settings).Spec.PodTemplate.Spec.InitContainers
			if diff := cmp.Diff(test.want, got); diff != "" {
				t.Errorf("initContainers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildSandboxCloneScriptStartsWithSetEU(t *testing.T) {
	c := buildSandbox(t, task("t"), pin(pinSources(srcCaliban)), settings()).Spec.PodTemplate.Spec.InitContainers[0]
	if !strings.HasPrefix(c.Command[2], "set -eu\n") {
		t.Errorf("script = %q, want it to start with set -eu", c.Command[2])
	}
}

func TestBuildSandboxResources(t *testing.T) {
	tests := map[string]struct {
		settings config.AgentSettings
		want     corev1.ResourceRequirements
	}{
		"defaults request 250m and 512Mi with no limits": {
			settings: settings(),
			want: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: quantity("250m"), corev1.ResourceMemory: quantity("512Mi"),
			}},
		},
		"configured limits apply beside the default requests": {
			settings: parsedSettings(t, map[string]string{"CALIBAND_CPU_LIMIT": "2", "CALIBAND_MEMORY_LIMIT": "4Gi"}),
			want: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: quantity("250m"), corev1.ResourceMemory: quantity("512Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: quantity("2"), corev1.ResourceMemory: quantity("4Gi")},
			},
		},
		"a blank request clears only that default": {
			settings: parsedSettings(t, map[string]string{"CALIBAND_CPU_REQUEST": ""}),
			want: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceMemory: quantity("512Mi"),
			}},
		},
		"clearing both requests leaves resources empty": {
			settings: parsedSettings(t, map[string]string{"CALIBAND_CPU_REQUEST": "", "CALIBAND_MEMORY_REQUEST": ""}),
			want:     corev1.ResourceRequirements{},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			spec := buildSandbox(t, task("t"), pin(pinSources(srcCaliban)), test.settings).Spec.PodTemplate.Spec
			if diff := cmp.Diff(test.want, calibandOf(t, spec).Resources); diff != "" {
				t.Errorf("caliband resources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(test.want, spec.InitContainers[0].Resources); diff != "" {
				t.Errorf("clone-workspace resources (-want +got):\n%s", diff)
			}
		})
	}
}

// docs/crd-reference.md#the-sandbox-and-the-agent-pod: resources are "omitted
// when none is set". In a server-side apply body a present field is a claimed
// field, so the rendered object must not carry "resources: {}".
func TestTheSandboxApplyBodyOmitsClearedResources(t *testing.T) {
	s := parsedSettings(t, map[string]string{"CALIBAND_CPU_REQUEST": "", "CALIBAND_MEMORY_REQUEST": ""})
	doc := toMap(t, BuildSandbox(task("t"), pin(pinSources(srcCaliban)), s))
	for _, field := range []string{"containers", "initContainers"} {
		containers, _, err := unstructured.NestedSlice(doc, "spec", "podTemplate", "spec", field)
		if err != nil || len(containers) != 1 {
			t.Fatalf("%s = %v (%v), want one", field, containers, err)
		}
		if r, found := containers[0].(map[string]any)["resources"]; found {
			t.Errorf("%s[0].resources = %v, want the field omitted", field, r)
		}
	}
}

// An apply over a Sandbox the operator keeps sends its live spec back: the
// same document the rendering sent, with no empty resources that the typed
// spec would encode.
func TestSandboxSpecApplySendsTheLiveSpecBack(t *testing.T) {
	tests := map[string]config.AgentSettings{
		"resources set":     settings(),
		"resources cleared": parsedSettings(t, map[string]string{"CALIBAND_CPU_REQUEST": "", "CALIBAND_MEMORY_REQUEST": ""}),
	}
	for name, s := range tests {
		t.Run(name, func(t *testing.T) {
			rendered := BuildSandbox(everyFeatureTask("t"), everyFeaturePin(), s)
			live := convert[sandboxv1beta1.Sandbox](t, rendered)
			back, err := SandboxSpecApply(&live.Spec)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(toMap(t, rendered.Spec), toMap(t, back)); diff != "" {
				t.Errorf("spec sent back (-rendered +sent back):\n%s", diff)
			}
		})
	}
}

func TestBuildSandboxSecurityContexts(t *testing.T) {
	tests := map[string]struct {
		settings config.AgentSettings
		want     *corev1.PodSecurityContext
	}{
		"defaults run as 10001 with the runtime's default seccomp profile": {
			settings: settings(),
			want: &corev1.PodSecurityContext{
				RunAsUser: new(int64(10001)), RunAsGroup: new(int64(10001)), FSGroup: new(int64(10001)),
				RunAsNonRoot:   new(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
		"the agent uid and gid come from the settings, fsGroup follows the gid": {
			settings: settings(func(s *config.AgentSettings) { s.AgentUID, s.AgentGID = 2000, 3000 }),
			want: &corev1.PodSecurityContext{
				RunAsUser: new(int64(2000)), RunAsGroup: new(int64(3000)), FSGroup: new(int64(3000)),
				RunAsNonRoot:   new(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
		"an Unconfined seccomp setting is rendered as Unconfined": {
			settings: parsedSettings(t, map[string]string{"CALIBAN_AGENT_SECCOMP_PROFILE": "Unconfined"}),
			want: &corev1.PodSecurityContext{
				RunAsUser: new(int64(10001)), RunAsGroup: new(int64(10001)), FSGroup: new(int64(10001)),
				RunAsNonRoot:   new(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
			},
		},
	}
	wantContainer := &corev1.SecurityContext{
		AllowPrivilegeEscalation: new(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			spec := buildSandbox(t, task("t"), pin(pinSources(srcCaliban)), test.settings).Spec.PodTemplate.Spec
			if diff := cmp.Diff(test.want, spec.SecurityContext); diff != "" {
				t.Errorf("pod securityContext (-want +got):\n%s", diff)
			}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				if diff := cmp.Diff(wantContainer, c.SecurityContext); diff != "" {
					t.Errorf("%s securityContext (-want +got):\n%s", c.Name, diff)
				}
			}
		})
	}
}

func TestBuildSandboxPortsAndProbes(t *testing.T) {
	tests := map[string]struct {
		settings config.AgentSettings
		port     int32
	}{
		"the default control port":  {settings: settings(), port: 8443},
		"a configured control port": {settings: settings(func(s *config.AgentSettings) { s.CalibandPort = 9443 }), port: 9443},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			c := calibandOf(t, buildSandbox(t, task("t"), pin(), test.settings).Spec.PodTemplate.Spec)
			wantPorts := []corev1.ContainerPort{{Name: "caliband", ContainerPort: test.port, Protocol: corev1.ProtocolTCP}}
			if diff := cmp.Diff(wantPorts, c.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if c.LivenessProbe != nil {
				t.Errorf("livenessProbe = %+v, want none: a restart kills every supervised agent", c.LivenessProbe)
			}
			for kind, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
				if p == nil {
					t.Errorf("%s probe missing", kind)
					continue
				}
				if p.TCPSocket == nil || p.HTTPGet != nil || p.Exec != nil || p.GRPC != nil {
					t.Errorf("%s probe = %+v, want a TCP socket probe only", kind, p.ProbeHandler)
					continue
				}
				if got := resolvePort(p.TCPSocket.Port, c.Ports); got != test.port {
					t.Errorf("%s probe targets %v (port %d), want the caliband port %d", kind, p.TCPSocket.Port.String(), got, test.port)
				}
			}
		})
	}
}

// resolvePort is what the kubelet does with a probe's port: a number is
// itself, a name is the container port of that name.
func resolvePort(p intstr.IntOrString, ports []corev1.ContainerPort) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

func TestBuildSandboxVolumesAndMounts(t *testing.T) {
	tests := map[string]struct {
		// inputs
		task     *calibanv1alpha1.CalibanTask
		settings config.AgentSettings
		// expected
		volumes []corev1.Volume
		mounts  []corev1.VolumeMount
	}{
		"without router config: the session TLS Secret, read-only at /etc/caliband/tls": {
			task:     task("t", taskModel("gpt-5")),
			settings: settings(),
			volumes: []corev1.Volume{
				{Name: "session-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "caliban-session-plane-tls"}}},
			},
			mounts: []corev1.VolumeMount{
				{Name: "workspace", MountPath: "/work"},
				{Name: "session-tls", MountPath: "/etc/caliband/tls", ReadOnly: true},
			},
		},
		"with router config: the ConfigMap too, read-only at /etc/caliban/router": {
			task:     task("t", taskRouterConfig("team-router")),
			settings: settings(func(s *config.AgentSettings) { s.SessionTLSSecret = "session-tls-2"; s.WorkspaceRoot = "/srv/ws" }),
			volumes: []corev1.Volume{
				{Name: "session-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "session-tls-2"}}},
				{Name: "router-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "team-router"}}}},
			},
			mounts: []corev1.VolumeMount{
				{Name: "workspace", MountPath: "/srv/ws"},
				{Name: "session-tls", MountPath: "/etc/caliband/tls", ReadOnly: true},
				{Name: "router-config", MountPath: "/etc/caliban/router", ReadOnly: true},
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			spec := buildSandbox(t, test.task, pin(), test.settings).Spec.PodTemplate.Spec
			// The workspace volume is not in the template: agent-sandbox adds
			// it from the claim template under the template's name.
			if diff := cmp.Diff(test.volumes, spec.Volumes); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(test.mounts, calibandOf(t, spec).VolumeMounts); diff != "" {
				t.Errorf("caliband volumeMounts (-want +got):\n%s", diff)
			}
		})
	}
}

// A private source's Secret reaches the clone-workspace init container
// alone: one volume per source that can use it, named by the source's
// index, with just the keys its scheme needs, owner-read only, mounted
// read-only where the clone script reads it. caliband, and so the agents,
// never mount one.
func TestBuildSandboxSourceCredentials(t *testing.T) {
	mode := func() *int32 { m := int32(0o400); return &m }
	secretVolume := func(index, secret string, keys ...string) corev1.Volume {
		var items []corev1.KeyToPath
		for _, k := range keys {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
		return corev1.Volume{Name: "source-credentials-" + index, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret, Items: items, DefaultMode: mode(),
		}}}
	}
	mount := func(index string) corev1.VolumeMount {
		return corev1.VolumeMount{Name: "source-credentials-" + index, MountPath: "/var/run/caliban/source-credentials/" + index, ReadOnly: true}
	}
	sessionTLS := corev1.Volume{Name: "session-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "caliban-session-plane-tls"}}}
	workspace := corev1.VolumeMount{Name: "workspace", MountPath: "/work"}
	creds := func(secret string) *calibanv1alpha1.SourceCredentialsRef {
		return &calibanv1alpha1.SourceCredentialsRef{SecretName: secret}
	}
	tests := map[string]struct {
		// inputs
		pin *calibanv1alpha1.ResolvedWorkspace
		// expected
		volumes     []corev1.Volume
		cloneMounts []corev1.VolumeMount
	}{
		"public, https, ssh://, file:// and git@ sources: a volume for the https, ssh:// and git@ ones, by index": {
			pin: privateSourcesPin(),
			volumes: []corev1.Volume{
				sessionTLS,
				secretVolume("1", "git-https", "username", "password"),
				secretVolume("2", "git-ssh", "ssh-privatekey", "known_hosts"),
				secretVolume("4", "git-ssh", "ssh-privatekey", "known_hosts"),
			},
			cloneMounts: []corev1.VolumeMount{workspace, mount("1"), mount("2"), mount("4")},
		},
		"the index is the source's place in the list, not among the private ones": {
			pin: pin(pinSources(srcCaliban, srcDocs, srcFileWithCredentials, srcPrivateHTTPS)),
			volumes: []corev1.Volume{
				sessionTLS,
				secretVolume("3", "git-https", "username", "password"),
			},
			cloneMounts: []corev1.VolumeMount{workspace, mount("3")},
		},
		"a pin without credentials gets no credential volume": {
			pin:         pin(pinSources(srcCaliban, srcDocs)),
			volumes:     []corev1.Volume{sessionTLS},
			cloneMounts: []corev1.VolumeMount{workspace},
		},
		"credentials on a repo that cannot take them (file://, http://, HTTPS://) get no volume": {
			pin: pin(pinSources(srcFileWithCredentials,
				calibanv1alpha1.Source{Name: "plain", Repo: "http://git.example.com/a.git", Ref: "main", Path: "/work/plain", CredentialsRef: creds("git-https")},
				calibanv1alpha1.Source{Name: "upper", Repo: "HTTPS://git.example.com/a.git", Ref: "main", Path: "/work/upper", CredentialsRef: creds("git-https")})),
			volumes:     []corev1.Volume{sessionTLS},
			cloneMounts: []corev1.VolumeMount{workspace},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			spec := buildSandbox(t, task("t"), test.pin, settings()).Spec.PodTemplate.Spec
			if diff := cmp.Diff(test.volumes, spec.Volumes); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "clone-workspace" {
				t.Fatalf("init containers = %v, want clone-workspace alone", containerNames(spec.InitContainers))
			}
			clone := spec.InitContainers[0]
			if diff := cmp.Diff(test.cloneMounts, clone.VolumeMounts); diff != "" {
				t.Errorf("clone-workspace volumeMounts (-want +got):\n%s", diff)
			}
			wantCaliband := []corev1.VolumeMount{workspace, {Name: "session-tls", MountPath: "/etc/caliband/tls", ReadOnly: true}}
			if diff := cmp.Diff(wantCaliband, calibandOf(t, spec).VolumeMounts); diff != "" {
				t.Errorf("caliband volumeMounts (-want +got):\n%s", diff)
			}
			for _, c := range append(append([]corev1.Container{}, spec.Containers...), spec.InitContainers[1:]...) {
				for _, m := range c.VolumeMounts {
					if strings.HasPrefix(m.Name, "source-credentials-") || strings.HasPrefix(m.MountPath, SourceCredentialsDir) {
						t.Errorf("container %s mounts %s at %s; only clone-workspace may", c.Name, m.Name, m.MountPath)
					}
				}
			}
			// The script reads each file where the pod puts it.
			script := clone.Command[2]
			for _, m := range test.cloneMounts[1:] {
				for _, v := range spec.Volumes {
					if v.Name != m.Name {
						continue
					}
					for _, item := range v.Secret.Items {
						if file := m.MountPath + "/" + item.Path; !strings.Contains(script, file) {
							t.Errorf("the clone script never reads %s, which the pod mounts", file)
						}
					}
				}
			}
		})
	}
}

func TestBuildSandboxPodIdentity(t *testing.T) {
	for name, taskName := range map[string]string{
		"a plain task name":     "refactor-auth",
		"a long dotted name":    longDottedName,
		"a name with uppercase": "Refactor.Auth",
	} {
		t.Run(name, func(t *testing.T) {
			tk := task(taskName)
			spec := buildSandbox(t, tk, pin(), settings()).Spec.PodTemplate.Spec
			if want := *BuildServiceAccount(tk).Name; spec.ServiceAccountName != want {
				t.Errorf("serviceAccountName = %q, want the ServiceAccount's name %q", spec.ServiceAccountName, want)
			}
			if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
				t.Errorf("automountServiceAccountToken = %v, want false", spec.AutomountServiceAccountToken)
			}
		})
	}
}

// docs/crd-reference.md#names: whichever form a name takes, every place that
// refers to a child uses the same one.
func TestSafeNamesAreUsedConsistently(t *testing.T) {
	tests := map[string]struct {
		name string
		// expected
		sandbox, serviceAccount, networkPolicy, label string
	}{
		"a short name keeps the plain forms": {
			name: "refactor-auth", sandbox: "refactor-auth-sbx", serviceAccount: "refactor-auth-sa",
			networkPolicy: "refactor-auth-netpol", label: "refactor-auth",
		},
		"a dotted name is hashed in object names and kept as the label": {
			name: "a.b", sandbox: "a-b-2e7336dc8e-sbx", serviceAccount: "a-b-2e7336dc8e-sa",
			networkPolicy: "a-b-2e7336dc8e-netpol", label: "a.b",
		},
		"a 70-character dotted name starting with a digit is safe everywhere": {
			name:           longDottedName,
			sandbox:        SandboxName(longDottedName),
			serviceAccount: ServiceAccountName(longDottedName),
			networkPolicy:  NetworkPolicyName(longDottedName),
			label:          TaskLabelValue(longDottedName),
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			tk := task(test.name)
			p := pin()
			s := settings()
			sb := buildSandbox(t, tk, p, s)
			sa := BuildServiceAccount(tk)
			np := BuildNetworkPolicy(tk, p, s)

			for what, got := range map[string]string{"Sandbox": sb.Name, "pod serviceAccountName": sb.Spec.PodTemplate.Spec.ServiceAccountName,
				"ServiceAccount": *sa.Name, "NetworkPolicy": *np.Name} {
				if errs := validation.IsDNS1035Label(got); len(errs) > 0 {
					t.Errorf("%s name %q is not a DNS-1035 label: %v", what, got, errs)
				}
			}
			if sb.Name != test.sandbox {
				t.Errorf("Sandbox name = %q, want %q", sb.Name, test.sandbox)
			}
			if *sa.Name != test.serviceAccount || sb.Spec.PodTemplate.Spec.ServiceAccountName != test.serviceAccount {
				t.Errorf("ServiceAccount %q, pod refers to %q, want both %q", *sa.Name, sb.Spec.PodTemplate.Spec.ServiceAccountName, test.serviceAccount)
			}
			if *np.Name != test.networkPolicy {
				t.Errorf("NetworkPolicy name = %q, want %q", *np.Name, test.networkPolicy)
			}
			args := calibandOf(t, sb.Spec.PodTemplate.Spec).Args
			if host := argAfter(args, "--advertise-host"); host != test.sandbox+".team-a.svc.cluster.local" {
				t.Errorf("--advertise-host = %q, want the Sandbox Service %q", host, test.sandbox+".team-a.svc.cluster.local")
			}

			wantLabels := map[string]string{
				"app.kubernetes.io/managed-by": "caliban-operator",
				"app.kubernetes.io/name":       "caliband",
				"caliban.caliban-ai.dev/task":  test.label,
				LabelTaskUID:                   string(tk.UID),
			}
			if errs := validation.IsValidLabelValue(test.label); len(errs) > 0 {
				t.Errorf("label value %q is invalid: %v", test.label, errs)
			}
			for what, got := range map[string]map[string]string{
				"Sandbox": sb.Labels, "pod template": sb.Spec.PodTemplate.Metadata.Labels,
				"ServiceAccount": sa.Labels, "NetworkPolicy": np.Labels,
			} {
				if diff := cmp.Diff(wantLabels, got); diff != "" {
					t.Errorf("%s labels (-want +got):\n%s", what, diff)
				}
			}
			if diff := cmp.Diff(map[string]string{LabelTaskUID: string(tk.UID)}, np.Spec.PodSelector.MatchLabels); diff != "" {
				t.Errorf("NetworkPolicy podSelector (-want +got):\n%s", diff)
			}

			// The owner is the task by its real name, never the safe form.
			for what, refs := range map[string][]metav1.OwnerReference{
				"Sandbox":        sb.OwnerReferences,
				"ServiceAccount": convert[metav1.ObjectMeta](t, sa.ObjectMetaApplyConfiguration).OwnerReferences,
				"NetworkPolicy":  convert[metav1.ObjectMeta](t, np.ObjectMetaApplyConfiguration).OwnerReferences,
			} {
				if len(refs) != 1 || refs[0].Name != test.name || refs[0].UID != fxTaskUID {
					t.Errorf("%s owner references = %+v, want the task %q", what, refs, test.name)
				}
			}
		})
	}
}

func argAfter(args []string, flag string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

func TestBuildSandboxIsDeterministic(t *testing.T) {
	first := BuildSandbox(everyFeatureTask("refactor-auth"), everyFeaturePin(), settings())
	for range 20 {
		if diff := cmp.Diff(first, BuildSandbox(everyFeatureTask("refactor-auth"), everyFeaturePin(), settings())); diff != "" {
			t.Fatalf("a second rendering differs (-first +again):\n%s", diff)
		}
	}
}
