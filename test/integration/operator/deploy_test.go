// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// These tests install the operator the way users do (kubectl apply -k of
// manifests/, then the samples) and prove the manifests' promises with the
// apiserver's own authorizer and admission: the operator runs on nothing but
// its ServiceAccount's RBAC, the RBAC grants nothing more, and every pod it
// implies passes PodSecurity "restricted".

const (
	operatorNamespace = framework.OperatorNamespace
	operatorSA        = framework.OperatorServiceAccount
	singleNamespace   = "caliban-tasks"
)

// kustomize renders a kustomization of the repository, as kubectl apply -k
// would.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := framework.Kustomize(cluster.Root, dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// operatorKubeconfig is a kubeconfig that authenticates as the operator's
// ServiceAccount alone.
func operatorKubeconfig(t *testing.T) string {
	t.Helper()
	path, err := cluster.OperatorKubeconfig(context.Background(), t.TempDir(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

type access struct {
	verb, group, resource, subresource, namespace string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	ns := a.namespace
	if ns == "" {
		ns = "(cluster)"
	}
	return a.verb + " " + r + " in " + ns
}

// allowed asks the apiserver's authorizer whether a ServiceAccount may do a.
func allowed(t *testing.T, namespace, name string, a access) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
		},
	}}
	got, err := cluster.Kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

// TestTheInstalledOperatorRunsOnItsOwnRBACAndNoMore installs the
// single-namespace variant, then the cluster-wide one, and for each proves
// what the ServiceAccount can and cannot do and that the operator, running
// with nothing but that ServiceAccount's token, takes a task to Running.
// Sequential on purpose: both variants bind the same ServiceAccount.
func TestTheInstalledOperatorRunsOnItsOwnRBACAndNoMore(t *testing.T) {
	ctx := context.Background()

	t.Run("the single-namespace variant works in its namespace only", func(t *testing.T) {
		if err := cluster.Apply(ctx, "", kustomize(t, "manifests/overlays/single-namespace")...); err != nil {
			t.Fatal(err)
		}
		for _, a := range []access{
			{"list", calibanv1alpha1.GroupName, "calibantasks", "", singleNamespace},
			{"patch", calibanv1alpha1.GroupName, "calibantasks", "status", singleNamespace},
			{"patch", calibanv1alpha1.GroupName, "calibantasks", "", singleNamespace},
			{"delete", calibanv1alpha1.GroupName, "calibantasks", "", singleNamespace},
			{"get", "", "secrets", "", singleNamespace},
			{"patch", "agents.x-k8s.io", "sandboxes", "", singleNamespace},
			{"update", "coordination.k8s.io", "leases", "", operatorNamespace},
			// The pin key, made on the first start.
			{"create", "", "secrets", "", operatorNamespace},
		} {
			if !allowed(t, operatorNamespace, operatorSA, a) {
				t.Errorf("the operator may not %s", a)
			}
		}
		for _, a := range []access{
			{"list", calibanv1alpha1.GroupName, "calibantasks", "", "default"},
			{"delete", calibanv1alpha1.GroupName, "calibantasks", "", "default"},
			{"get", "", "secrets", "", "default"},
			{"patch", "agents.x-k8s.io", "sandboxes", "", "default"},
			{"list", calibanv1alpha1.GroupName, "calibantasks", "", ""},
			{"create", "", "secrets", "", singleNamespace},
		} {
			if allowed(t, operatorNamespace, operatorSA, a) {
				t.Errorf("the single-namespace operator may %s", a)
			}
		}
		op := startOperator(t, "single-namespace", singleNamespace,
			"KUBECONFIG="+operatorKubeconfig(t),
			"CALIBAN_LEADER_ELECTION=true", "CALIBAN_LEASE_NAMESPACE="+operatorNamespace,
			"CALIBAN_LEASE_NAME=caliban-operator-single", "POD_NAME=single-0")
		createProviderSecret(t, singleNamespace)
		createReadyWorkspace(t, singleNamespace, "ws")
		createTask(t, singleNamespace, "task", "ws")
		waitForTask(t, singleNamespace, "task", 60*time.Second, isRunning)
		stop(t, op)
	})

	t.Run("the cluster-wide variant grants exactly what the RBAC table lists", func(t *testing.T) {
		if err := cluster.Apply(ctx, "", kustomize(t, "manifests")...); err != nil {
			t.Fatal(err)
		}
		ns := cluster.Namespace(t, nil)
		may := []access{
			{"get", calibanv1alpha1.GroupName, "calibantasks", "", ns},
			{"list", calibanv1alpha1.GroupName, "calibantasks", "", ""},
			{"watch", calibanv1alpha1.GroupName, "workspaces", "", ""},
			{"patch", calibanv1alpha1.GroupName, "calibantasks", "status", ns},
			{"patch", calibanv1alpha1.GroupName, "workspaces", "status", ns},
			// The drain finalizer, and ttlSecondsAfterFinished.
			{"patch", calibanv1alpha1.GroupName, "calibantasks", "", ns},
			{"delete", calibanv1alpha1.GroupName, "calibantasks", "", ns},
			{"get", "", "secrets", "", ns},
			// A task's pod, by name, before its old NetworkPolicy moves to
			// the task's UID.
			{"get", "", "pods", "", ns},
			{"create", "agents.x-k8s.io", "sandboxes", "", ns},
			{"patch", "", "serviceaccounts", "", ns},
			{"delete", "networking.k8s.io", "networkpolicies", "", ns},
			{"create", "events.k8s.io", "events", "", ns},
			{"update", "coordination.k8s.io", "leases", "", operatorNamespace},
			{"create", "", "secrets", "", operatorNamespace},
		}
		mayNot := []access{
			{"list", "", "secrets", "", ns},
			{"watch", "", "secrets", "", ns},
			{"list", "", "secrets", "", ""},
			{"update", "", "secrets", "", ns},
			{"create", "", "secrets", "", ns},
			{"update", "", "secrets", "", operatorNamespace},
			{"create", calibanv1alpha1.GroupName, "calibantasks", "", ns},
			{"deletecollection", calibanv1alpha1.GroupName, "calibantasks", "", ns},
			{"update", calibanv1alpha1.GroupName, "calibantasks", "", ns},
			{"patch", calibanv1alpha1.GroupName, "workspaces", "", ns},
			{"create", calibanv1alpha1.GroupName, "workspaces", "", ns},
			{"delete", calibanv1alpha1.GroupName, "workspaces", "", ns},
			{"list", "", "pods", "", ns},
			{"watch", "", "pods", "", ns},
			{"patch", "", "pods", "", ns},
			{"create", "", "pods", "", ns},
			{"delete", "", "pods", "", ns},
			{"get", "", "configmaps", "", ns},
			{"create", "rbac.authorization.k8s.io", "rolebindings", "", ns},
			{"update", "coordination.k8s.io", "leases", "", ns},
		}
		for _, a := range may {
			if !allowed(t, operatorNamespace, operatorSA, a) {
				t.Errorf("the operator may not %s", a)
			}
		}
		for _, a := range mayNot {
			if allowed(t, operatorNamespace, operatorSA, a) {
				t.Errorf("the operator may %s", a)
			}
		}
		// prospero's verb comes from prospero's own chart, never from the
		// operator's manifests.
		if allowed(t, "prospero", "prospero", access{"patch", calibanv1alpha1.GroupName, "calibantasks", "status", ns}) {
			t.Error("the operator's manifests let prospero patch calibantasks/status")
		}

		// The optional server-side bound (manifests/flowcontrol): the
		// operator's requests go to its own priority level.
		if err := cluster.Apply(ctx, "", kustomize(t, "manifests/flowcontrol")...); err != nil {
			t.Fatal(err)
		}
		dispatched := func() float64 {
			raw, err := cluster.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m, err := parseMetrics(string(raw))
			if err != nil {
				t.Fatal(err)
			}
			v, _ := m.Sum("apiserver_flowcontrol_dispatched_requests_total",
				map[string]string{"flow_schema": "caliban-operator", "priority_level": "caliban-operator"})
			return v
		}
		before := dispatched()

		startOperator(t, "cluster-wide", ns,
			"KUBECONFIG="+operatorKubeconfig(t),
			"CALIBAN_LEADER_ELECTION=true", "CALIBAN_LEASE_NAMESPACE="+operatorNamespace,
			"CALIBAN_LEASE_NAME=caliban-operator-cluster", "POD_NAME=cluster-0")
		createProviderSecret(t, ns)
		createSecret(t, ns, "caliban-session-plane-token", map[string]string{"token": "session-token-value"})
		// Private sources, one per Secret type: their values must reach
		// no argv or env, and only the clone container mounts them.
		createTypedSecret(t, ns, "git-https", corev1.SecretTypeBasicAuth,
			map[string]string{corev1.BasicAuthUsernameKey: "deploy-bot-user", corev1.BasicAuthPasswordKey: "ghp-deploy-token-value"})
		createTypedSecret(t, ns, "git-ssh", corev1.SecretTypeSSHAuth, map[string]string{
			corev1.SSHAuthPrivateKey:  "-----BEGIN OPENSSH PRIVATE KEY-----\ndeploy-key-value\n-----END OPENSSH PRIVATE KEY-----\n",
			builders.SSHKnownHostsKey: "git.example.com ssh-ed25519 AAAAdeploy-host-key-value\n",
		})
		createReadyWorkspace(t, ns, "ws", func(spec *calibanv1alpha1.WorkspaceSpec) {
			spec.Sources = append(spec.Sources,
				calibanv1alpha1.Source{Name: "private-https", Repo: "https://git.example.com/team/app.git", Path: "/work/app",
					CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-https"}},
				calibanv1alpha1.Source{Name: "private-ssh", Repo: "git@git.example.com:team/lib.git", Path: "/work/lib",
					CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-ssh"}})
		})
		createTask(t, ns, "task", "ws")
		waitForTask(t, ns, "task", 60*time.Second, isRunning)
		prosperoSettles(t, ns, "task", "Succeeded", "")
		waitForTask(t, ns, "task", 30*time.Second, hasPhase(calibanv1alpha1.TaskCompleted))
		if after := dispatched(); after <= before {
			t.Errorf("the caliban-operator FlowSchema dispatched %v requests before and %v after the operator's work; want more", before, after)
		}
		lease := getLease(t, operatorNamespace, "caliban-operator-cluster")
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "cluster-0" {
			t.Errorf("lease holder %v, want cluster-0", lease.Spec.HolderIdentity)
		}
		checkSandboxPodSecurity(t, ns, "task")
		checkNoSecretInTheClear(t, ns, "task")
		checkSourceCredentialsForTheCloneOnly(t, ns, "task", map[int]string{1: "git-https", 2: "git-ssh"})
	})
}

// checkSandboxPodSecurity creates (dry-run) the Pod agent-sandbox would
// create from the operator's Sandbox, in a namespace enforcing restricted.
func checkSandboxPodSecurity(t *testing.T, ns, task string) {
	t.Helper()
	u := getSandbox(t, ns, builders.SandboxName(task))
	sb, err := framework.SandboxOf(u)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: sb.Name, Labels: sb.Spec.PodTemplate.Metadata.Labels},
		Spec:       *sb.Spec.PodTemplate.Spec.DeepCopy(),
	}
	for _, vct := range sb.Spec.VolumeClaimTemplates {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vct.Metadata.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: vct.Metadata.Name + "-" + sb.Name}}})
	}
	// In the task's own namespace (its ServiceAccount is there), now
	// enforcing restricted.
	nsObj, err := cluster.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if _, err := cluster.Kube.CoreV1().Namespaces().Update(context.Background(), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Kube.CoreV1().Pods(ns).Create(context.Background(), pod,
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the Sandbox's pod is refused in a restricted namespace: %v", err)
	}
}

// checkNoSecretInTheClear: the session token and every Secret value in the
// namespace appear nowhere in the Sandbox as an argument or a literal env
// value.
func checkNoSecretInTheClear(t *testing.T, ns, task string) {
	t.Helper()
	u := getSandbox(t, ns, builders.SandboxName(task))
	sb, err := framework.SandboxOf(u)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := cluster.Kube.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, s := range secrets.Items {
		for _, v := range s.Data {
			values = append(values, string(v))
		}
	}
	if len(values) == 0 {
		t.Fatal("no Secret values to look for")
	}
	for _, c := range slices.Concat(sb.Spec.PodTemplate.Spec.InitContainers, sb.Spec.PodTemplate.Spec.Containers) {
		for _, v := range values {
			if slices.ContainsFunc(c.Args, func(a string) bool { return strings.Contains(a, v) }) ||
				slices.ContainsFunc(c.Command, func(a string) bool { return strings.Contains(a, v) }) {
				t.Errorf("container %s carries a Secret value in its argv", c.Name)
			}
			for _, e := range c.Env {
				if e.Value != "" && e.Value == v {
					t.Errorf("container %s env %s carries a Secret value literally", c.Name, e.Name)
				}
			}
		}
		for _, e := range c.Env {
			if e.Name == builders.EnvDaemonToken && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				t.Errorf("container %s: %s is not a secretKeyRef", c.Name, e.Name)
			}
		}
	}
}

// checkSourceCredentialsForTheCloneOnly: each private source's Secret
// (want: source index -> Secret name) is a read-only, 0400 volume that
// only the clone container mounts, and no other Secret volume is there
// beyond the session TLS one.
func checkSourceCredentialsForTheCloneOnly(t *testing.T, ns, task string, want map[int]string) {
	t.Helper()
	sb, err := framework.SandboxOf(getSandbox(t, ns, builders.SandboxName(task)))
	if err != nil {
		t.Fatal(err)
	}
	spec := sb.Spec.PodTemplate.Spec
	got := map[int]string{}
	credentialVolumes := map[string]bool{}
	for _, v := range spec.Volumes {
		index, ok := strings.CutPrefix(v.Name, builders.VolumeSourceCredentialsPrefix)
		if !ok {
			continue
		}
		i, err := strconv.Atoi(index)
		if err != nil || v.Secret == nil {
			t.Errorf("volume %s: %+v, want a Secret volume named by a source index", v.Name, v.VolumeSource)
			continue
		}
		if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400 {
			t.Errorf("volume %s: defaultMode %v, want 0400", v.Name, v.Secret.DefaultMode)
		}
		got[i] = v.Secret.SecretName
		credentialVolumes[v.Name] = true
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("source credential volumes (-want +got):\n%s", diff)
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		mounted := 0
		for _, m := range c.VolumeMounts {
			if credentialVolumes[m.Name] {
				mounted++
				if !m.ReadOnly {
					t.Errorf("container %s mounts %s writable", c.Name, m.Name)
				}
			}
		}
		if c.Name == builders.ContainerClone && mounted != len(want) {
			t.Errorf("the clone container mounts %d of the %d source credential volumes", mounted, len(want))
		}
		if c.Name != builders.ContainerClone && mounted != 0 {
			t.Errorf("container %s mounts %d source credential volumes; only the clone may", c.Name, mounted)
		}
	}
}

func TestTheOperatorsOwnPodIsAdmittedAsRestricted(t *testing.T) {
	var deploy *appsv1.Deployment
	for _, u := range kustomize(t, "manifests") {
		if u.GetKind() == "Deployment" {
			deploy = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, deploy); err != nil {
				t.Fatal(err)
			}
		}
	}
	if deploy == nil {
		t.Fatal("manifests/ renders no Deployment")
	}
	restricted := cluster.Namespace(t, map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"})
	pod := &corev1.Pod{ObjectMeta: *deploy.Spec.Template.ObjectMeta.DeepCopy(), Spec: *deploy.Spec.Template.Spec.DeepCopy()}
	pod.Name = "operator"
	pod.Spec.ServiceAccountName = "default"
	if _, err := cluster.Kube.CoreV1().Pods(restricted).Create(context.Background(), pod,
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the operator's pod is refused in a restricted namespace: %v", err)
	}
	c := deploy.Spec.Template.Spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the operator's root filesystem is writable")
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	for _, name := range []string{config.EnvPodName, config.EnvControllerPodName} {
		if e, ok := env[name]; !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Errorf("%s is not wired from the downward API: %+v", name, e)
		}
	}
	if e, ok := env["GOMEMLIMIT"]; !ok || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("GOMEMLIMIT is not the container's memory limit from the downward API: %+v", e)
	}
	// Every setting of docs/deploying.md#configuration is present in the
	// Deployment, so that a cluster operator edits a value rather than
	// discovers a name; except the OpenTelemetry ones, which are absent,
	// so that what a platform injects into the pod applies (ADR 0020).
	read := map[string]bool{}
	_, _ = config.Parse(func(name string) (string, bool) { read[name] = true; return "", false }, operatorNamespace)
	if len(read) < 30 {
		t.Fatalf("the settings parser reads only %d variables", len(read))
	}
	for name := range read {
		if name == config.EnvHostname || name == config.EnvCalibandCPULimit || name == config.EnvCalibandMemoryLimit {
			continue // HOSTNAME is the runtime's; limits are unset by default
		}
		if strings.HasPrefix(name, "OTEL_") {
			if _, ok := env[name]; ok {
				t.Errorf("the Deployment sets %s, which would override what a platform injects", name)
			}
			continue
		}
		if _, ok := env[name]; !ok {
			t.Errorf("the Deployment does not set %s", name)
		}
	}
}

// TestTheSamplesApplyInOrder: with their placeholder Secrets the samples
// apply, the Workspace turns Ready and both tasks run, the lifecycle sample
// holding the drain finalizer its onDelete asks for; without them the
// Workspace says which Secret is missing, the documented first signal.
func TestTheSamplesApplyInOrder(t *testing.T) {
	samples, err := framework.ReadManifests(filepath.Join(cluster.Root, "manifests", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("without the provider Secret the Workspace names it", func(t *testing.T) {
		ns := cluster.Namespace(t, nil)
		startOperator(t, "samples-missing", ns)
		var noSecrets []*unstructured.Unstructured
		for _, o := range samples {
			if o.GetKind() != "Secret" {
				noSecrets = append(noSecrets, o)
			}
		}
		if err := cluster.Apply(context.Background(), ns, noSecrets...); err != nil {
			t.Fatal(err)
		}
		waitForWorkspace(t, ns, "demo", 30*time.Second, func(ws *calibanv1alpha1.Workspace) error {
			want := "provider 'planner': secret 'anthropic-key' key 'api-key' not found"
			if ws.Status.Phase != calibanv1alpha1.WorkspaceFailed || ws.Status.Message != want {
				return fmt.Errorf("status %s %q, want Failed %q", ws.Status.Phase, ws.Status.Message, want)
			}
			return nil
		})
	})
	t.Run("with them the sample tasks run", func(t *testing.T) {
		ns := cluster.Namespace(t, nil)
		// Nothing answers the lifecycle sample's drain here. Registered
		// before the operator, this runs once it has stopped and removes
		// the finalizer the way docs/troubleshooting.md says, so the
		// namespace can go.
		t.Cleanup(func() {
			_, _ = cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Patch(context.Background(), "demo-lifecycle",
				types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		})
		startOperator(t, "samples", ns)
		if err := cluster.Apply(context.Background(), ns, samples...); err != nil {
			t.Fatal(err)
		}
		var tasks []string
		for _, o := range samples {
			if o.GetKind() == "CalibanTask" {
				tasks = append(tasks, o.GetName())
			}
		}
		if want := []string{"demo-task", "demo-lifecycle"}; !slices.Equal(tasks, want) {
			t.Fatalf("sample CalibanTasks %v, want %v", tasks, want)
		}
		demo := waitForTask(t, ns, "demo-task", 60*time.Second, isRunning)
		lc := waitForTask(t, ns, "demo-lifecycle", 60*time.Second, isRunning)
		// The sample's lifecycle is live, not merely stored: pinned with a
		// start for its deadline, and held for a drain before delete.
		if lc.Status.StartTime == nil {
			t.Errorf("demo-lifecycle is Running without a startTime for its activeDeadlineSeconds")
		}
		if lc.Status.CompletionTime != nil {
			t.Errorf("demo-lifecycle is Running with completionTime %s, want none", lc.Status.CompletionTime)
		}
		if !slices.Contains(lc.Finalizers, calibanv1alpha1.FinalizerDrain) {
			t.Errorf("demo-lifecycle (onDelete: checkpoint) has finalizers %v, want %s", lc.Finalizers, calibanv1alpha1.FinalizerDrain)
		}
		if slices.Contains(demo.Finalizers, calibanv1alpha1.FinalizerDrain) {
			t.Errorf("demo-task (no onDelete) has the drain finalizer: %v", demo.Finalizers)
		}
	})
}
