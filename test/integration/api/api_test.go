// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package api_test proves the caliban API on a real kube-apiserver: the CRDs
// install, the samples apply, the schema rejects what it must and fills the
// defaults it should, kubectl's columns exist, and a Sandbox rendered from the
// operator's view survives server-side apply with nothing pruned. No
// controller runs here.
package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	calibanclientv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/typed/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) { framework.Main(m, &cluster) }

func TestCRDsAreEstablishedWithTheirNames(t *testing.T) {
	tests := map[string]struct {
		crd        string
		shortNames []string
	}{
		"workspaces are served as cws in the caliban category":     {crd: "workspaces.caliban.caliban-ai.dev", shortNames: []string{"cws"}},
		"calibantasks are served as ctask in the caliban category": {crd: "calibantasks.caliban.caliban-ai.dev", shortNames: []string{"ctask"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			crd, err := cluster.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), tc.crd, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			established := false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				t.Errorf("not Established: %+v", crd.Status.Conditions)
			}
			if diff := cmp.Diff(tc.shortNames, crd.Status.AcceptedNames.ShortNames); diff != "" {
				t.Errorf("short names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"caliban"}, crd.Status.AcceptedNames.Categories); diff != "" {
				t.Errorf("categories (-want +got):\n%s", diff)
			}
			if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Subresources == nil || crd.Spec.Versions[0].Subresources.Status == nil {
				t.Errorf("want one version with a status subresource, got %+v", crd.Spec.Versions)
			}
		})
	}
}

func TestSamplesApplyInOrder(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, nil)
	objs, err := framework.ReadManifests(filepath.Join(cluster.Root, "manifests", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if diff := cmp.Diff([]string{"Secret", "Secret", "Secret", "Workspace", "CalibanTask", "CalibanTask", "Secret", "Workspace"}, kinds); diff != "" {
		t.Fatalf("sample kinds in apply order (-want +got):\n%s", diff)
	}
	if err := cluster.Apply(ctx, ns, objs...); err != nil {
		t.Fatal(err)
	}
	ws, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ws.Spec.Providers[0].CredentialsRef; got == nil || got.SecretName != "anthropic-key" {
		t.Errorf("workspace provider credentials = %+v, want the sample Secret", got)
	}
	task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "demo-task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if task.Spec.WorkspaceRef.Name != ws.Name {
		t.Errorf("task refers to workspace %q, want %q", task.Spec.WorkspaceRef.Name, ws.Name)
	}
	// The lifecycle sample stores every lifecycle field it documents, with
	// the values docs/deploying.md names.
	lc, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "demo-lifecycle", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lc.Spec.WorkspaceRef.Name != ws.Name {
		t.Errorf("lifecycle task refers to workspace %q, want %q", lc.Spec.WorkspaceRef.Name, ws.Name)
	}
	ttl, deadline := int32(86400), int32(28800)
	want := &calibanv1alpha1.LifecycleSpec{
		OnDelete:                calibanv1alpha1.OnDeleteCheckpoint,
		OnFinish:                calibanv1alpha1.OnFinishSuspend,
		TTLSecondsAfterFinished: &ttl,
		ActiveDeadlineSeconds:   &deadline,
	}
	if diff := cmp.Diff(want, lc.Spec.Lifecycle); diff != "" {
		t.Errorf("lifecycle sample's lifecycle (-want +got):\n%s", diff)
	}
	if lc.Spec.Suspend {
		t.Errorf("lifecycle sample is suspended; it should run")
	}
}

// validTask and validWorkspace are the smallest objects the schema accepts;
// each rejection case breaks exactly one thing in one of them.
func validTask() map[string]any {
	return map[string]any{
		"apiVersion": "caliban.caliban-ai.dev/v1alpha1",
		"kind":       "CalibanTask",
		"metadata":   map[string]any{"name": "task"},
		"spec": map[string]any{
			"workspaceRef": map[string]any{"name": "ws"},
			"task":         map[string]any{"prompt": "do the thing"},
		},
	}
}

func validWorkspace() map[string]any {
	return map[string]any{
		"apiVersion": "caliban.caliban-ai.dev/v1alpha1",
		"kind":       "Workspace",
		"metadata":   map[string]any{"name": "ws"},
		"spec": map[string]any{
			"displayName": "ws",
			"providers":   []any{map[string]any{"name": "p", "kind": "anthropic"}},
		},
	}
}

func set(obj map[string]any, value any, path ...string) map[string]any {
	m := obj
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
	return obj
}

func TestSchemaRejectsInvalidObjects(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	for name, tc := range schemaRejections() {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: tc.obj}
			_, err := cluster.Dynamic.Resource(gvr(u)).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
			if err := framework.IsInvalid(err, tc.field, tc.message); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestSchemaAcceptsTheValidStateCombinations(t *testing.T) {
	tests := map[string]map[string]any{
		"an endpoint alone":         {"gonzaloEndpoint": "http://gonzalod:8080"},
		"remote with an endpoint":   {"mode": "remote", "gonzaloEndpoint": "http://gonzalod:8080"},
		"an endpoint with a token":  {"gonzaloEndpoint": "http://gonzalod:8080", "tokenRef": map[string]any{"secretName": "s", "key": "k"}},
		"local without an endpoint": {"mode": "local"},
		"an empty state":            {},
	}
	ns := cluster.Namespace(t, nil)
	i := 0
	for name, state := range tests {
		i++
		obj := set(validTask(), state, "spec", "state")
		set(obj, "task-"+string(rune('a'+i)), "metadata", "name")
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: obj}
			if _, err := cluster.Dynamic.Resource(gvr(u)).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
				t.Errorf("rejected: %v", err)
			}
		})
	}
}

func TestSchemaFillsDefaults(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, nil)

	ws := validWorkspace()
	set(ws, []any{map[string]any{"name": "s", "repo": "https://example.com/r.git", "path": "/work/r"}}, "spec", "sources")
	set(ws, map[string]any{}, "spec", "agentPolicy")
	set(ws, map[string]any{}, "spec", "egress")
	created, err := cluster.Dynamic.Resource(gvr(&unstructured.Unstructured{Object: ws})).Namespace(ns).
		Create(ctx, &unstructured.Unstructured{Object: ws}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantWS := map[string]any{
		"displayName": "ws",
		"providers":   []any{map[string]any{"name": "p", "kind": "anthropic"}},
		"sources":     []any{map[string]any{"name": "s", "repo": "https://example.com/r.git", "path": "/work/r", "ref": "main"}},
		"env":         []any{},
		"agentPolicy": map[string]any{"allowUnattended": false},
		"egress":      map[string]any{"allow": []any{}},
	}
	if diff := cmp.Diff(wantWS, created.Object["spec"]); diff != "" {
		t.Errorf("workspace spec as stored (-want +got):\n%s", diff)
	}

	task := validTask()
	createdTask, err := cluster.Dynamic.Resource(gvr(&unstructured.Unstructured{Object: task})).Namespace(ns).
		Create(ctx, &unstructured.Unstructured{Object: task}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantTask := map[string]any{"prompt": "do the thing", "interactive": false, "permissionPosture": "supervised"}
	if diff := cmp.Diff(wantTask, createdTask.Object["spec"].(map[string]any)["task"]); diff != "" {
		t.Errorf("task.spec.task as stored (-want +got):\n%s", diff)
	}
}

// An empty enabledPlugins list means "enable no plugin" and must not collapse
// into an omitted list ("enable all") anywhere between the apiserver and the
// Go types.
func TestAnEmptyEnabledPluginsListSurvivesTheRoundTrip(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, nil)
	ws := &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "plugins"},
		Spec: calibanv1alpha1.WorkspaceSpec{
			DisplayName: "plugins",
			Providers:   []calibanv1alpha1.Provider{{Name: "p", Kind: "openai"}},
			AgentPolicy: &calibanv1alpha1.AgentPolicy{EnabledPlugins: []string{}},
		},
	}
	if _, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Create(ctx, ws, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, "plugins", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Spec.AgentPolicy.EnabledPlugins; p == nil || len(p) != 0 {
		t.Errorf("enabledPlugins = %#v, want an empty, non-nil list", p)
	}
}

func TestKubectlColumns(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, nil)
	for _, obj := range []map[string]any{validWorkspace(), validTask()} {
		u := &unstructured.Unstructured{Object: obj}
		if _, err := cluster.Dynamic.Resource(gvr(u)).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string]struct {
		resource string
		columns  []string
		wide     []string
	}{
		"kubectl get cws shows Phase and Age, and Message and the warm pool when wide": {
			resource: "workspaces", columns: []string{"Name", "Phase", "Age"}, wide: []string{"Message", "Warm", "Pool"},
		},
		"kubectl get ctask shows Phase, Posture and Age, and Endpoint, Reason, Suspend, Finished, Launch and Requested-By when wide": {
			resource: "calibantasks", columns: []string{"Name", "Phase", "Posture", "Age"}, wide: []string{"Endpoint", "Reason", "Suspend", "Finished", "Launch", "Requested-By"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw, err := cluster.Caliban.CalibanV1alpha1().RESTClient().Get().
				Namespace(ns).Resource(tc.resource).
				SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
				Do(ctx).Raw()
			if err != nil {
				t.Fatal(err)
			}
			var table metav1.Table
			if err := json.Unmarshal(raw, &table); err != nil {
				t.Fatal(err)
			}
			var normal, wide []string
			for _, c := range table.ColumnDefinitions {
				if c.Priority == 0 {
					normal = append(normal, c.Name)
				} else {
					wide = append(wide, c.Name)
				}
			}
			if diff := cmp.Diff(tc.columns, normal); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wide, wide); diff != "" {
				t.Errorf("wide columns (-want +got):\n%s", diff)
			}
			if len(table.Rows) != 1 {
				t.Errorf("want one row, got %d", len(table.Rows))
			}
		})
	}
	// A task that asked for unattended and was not admitted must not look
	// unattended: the column reads the admitted posture from the status.
	t.Run("the Posture column shows the admitted posture, not the requested one", func(t *testing.T) {
		u := &unstructured.Unstructured{Object: set(set(validTask(), "asks-unattended", "metadata", "name"),
			"unattended", "spec", "task", "permissionPosture")}
		if _, err := cluster.Dynamic.Resource(gvr(u)).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := postureCell(ctx, t, ns, "asks-unattended"); got != "" {
			t.Errorf("Posture of a task not yet admitted = %q, want empty", got)
		}
		admitted := []byte(`{"apiVersion":"caliban.caliban-ai.dev/v1alpha1","kind":"CalibanTask","metadata":{"name":"asks-unattended"},
			"status":{"permissionPosture":"supervised"}}`)
		if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Patch(ctx, "asks-unattended", types.ApplyPatchType, admitted,
			metav1.PatchOptions{FieldManager: "caliban-operator", Force: new(true)}, "status"); err != nil {
			t.Fatal(err)
		}
		if got := postureCell(ctx, t, ns, "asks-unattended"); got != "supervised" {
			t.Errorf("Posture = %q, want the admitted supervised", got)
		}
	})
}

// postureCell is the Posture cell of one task in the apiserver's Table
// rendering, the one kubectl get prints.
func postureCell(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	raw, err := cluster.Caliban.CalibanV1alpha1().RESTClient().Get().
		Namespace(ns).Resource("calibantasks").Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		Do(ctx).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	col := slices.IndexFunc(table.ColumnDefinitions, func(c metav1.TableColumnDefinition) bool { return c.Name == "Posture" })
	if col < 0 || len(table.Rows) != 1 {
		t.Fatalf("no Posture column or not one row: %s", raw)
	}
	cell := table.Rows[0].Cells[col]
	if cell == nil {
		return ""
	}
	return fmt.Sprint(cell)
}

// prospero writes AgentsSettled with its own field manager, unforced, with
// no message. The schema must accept that body, and the operator's Ready
// condition must live beside it in the same map-list.
func TestProsperoAndTheOperatorShareStatusConditions(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, nil)
	tasks := createValidTask(t, ns)

	operator := []byte(`{"apiVersion":"caliban.caliban-ai.dev/v1alpha1","kind":"CalibanTask","metadata":{"name":"task"},
		"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","reason":"Running","message":"","lastTransitionTime":"2026-09-15T00:00:00Z"}]}}`)
	if _, err := tasks.Patch(ctx, "task", types.ApplyPatchType, operator,
		metav1.PatchOptions{FieldManager: "caliban-operator", Force: new(true)}, "status"); err != nil {
		t.Fatalf("operator status apply: %v", err)
	}
	prospero := []byte(`{"apiVersion":"caliban.caliban-ai.dev/v1alpha1","kind":"CalibanTask","metadata":{"name":"task"},
		"status":{"conditions":[{"type":"AgentsSettled","status":"True","reason":"Succeeded","lastTransitionTime":"2026-09-15T00:00:00Z"}]}}`)
	if _, err := tasks.Patch(ctx, "task", types.ApplyPatchType, prospero,
		metav1.PatchOptions{FieldManager: "prospero"}, "status"); err != nil {
		t.Fatalf("prospero status apply: %v", err)
	}
	got, err := tasks.Get(ctx, "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var conds []string
	for _, c := range got.Status.Conditions {
		conds = append(conds, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	if diff := cmp.Diff([]string{"Ready=True/Running", "AgentsSettled=True/Succeeded"}, conds); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	owners := map[string]bool{}
	for _, mf := range got.ManagedFields {
		if mf.Subresource == "status" {
			owners[mf.Manager] = true
		}
	}
	if !owners["prospero"] || !owners["caliban-operator"] {
		t.Errorf("status managers = %v, want prospero and caliban-operator", owners)
	}
}

func TestASandboxFromTheViewAppliesWithNothingPruned(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, nil)
	// A real owner, so the garbage collector does not remove the Sandbox for
	// pointing at a missing one.
	owner, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "p"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	want := handFilledSandbox(ns, owner)
	u, err := framework.Unstructured(want)
	if err != nil {
		t.Fatal(err)
	}
	u.SetGroupVersionKind(sandboxv1beta1.SchemeGroupVersion.WithKind("Sandbox"))
	// The typed encoding writes an empty status; an apply claims every
	// field it carries, and the status is agent-sandbox's.
	delete(u.Object, "status")
	if _, err := cluster.Dynamic.Resource(sandboxv1beta1.SchemeGroupVersion.WithResource("sandboxes")).Namespace(ns).
		Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "caliban-operator", Force: true}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	// Strict validation on a second apply: the server names any field its
	// schema does not know instead of silently dropping it.
	body, _ := u.MarshalJSON()
	if _, err := cluster.Dynamic.Resource(sandboxv1beta1.SchemeGroupVersion.WithResource("sandboxes")).Namespace(ns).
		Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "caliban-operator", Force: new(true), FieldValidation: "Strict"}); err != nil {
		t.Fatalf("strict apply: %v", err)
	}

	readBack, err := cluster.Dynamic.Resource(sandboxv1beta1.SchemeGroupVersion.WithResource("sandboxes")).Namespace(ns).
		Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := framework.SandboxOf(readBack)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Errorf("spec after the round trip (-sent +stored):\n%s", diff)
	}
	if diff := cmp.Diff(want.Labels, got.Labels); diff != "" {
		t.Errorf("labels (-sent +stored):\n%s", diff)
	}
	if diff := cmp.Diff(want.OwnerReferences, got.OwnerReferences); diff != "" {
		t.Errorf("owner references (-sent +stored):\n%s", diff)
	}
	// The claim template must reach the server without type metadata.
	vct := readBack.Object["spec"].(map[string]any)["volumeClaimTemplates"].([]any)[0].(map[string]any)
	if _, ok := vct["apiVersion"]; ok {
		t.Errorf("claim template carries apiVersion: %v", vct)
	}

	// The Stage stand-in answers like agent-sandbox's controller.
	framework.Eventually(t, 10*time.Second, func() error {
		obj, err := cluster.Dynamic.Resource(sandboxv1beta1.SchemeGroupVersion.WithResource("sandboxes")).Namespace(ns).
			Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		sb, err := framework.SandboxOf(obj)
		if err != nil {
			return err
		}
		wantFQDN := u.GetName() + "." + ns + ".svc.cluster.local"
		if sb.Status.ServiceFQDN != wantFQDN || len(sb.Status.Conditions) != 1 || sb.Status.Conditions[0].Status != metav1.ConditionTrue {
			return fmt.Errorf("status = %+v, want Ready with serviceFQDN %s", sb.Status, wantFQDN)
		}
		return nil
	})
}

func handFilledSandbox(ns string, owner *calibanv1alpha1.CalibanTask) *sandboxv1beta1.Sandbox {
	labels := map[string]string{
		"app.kubernetes.io/managed-by": "caliban-operator",
		"app.kubernetes.io/name":       "caliband",
		"caliban.caliban-ai.dev/task":  owner.Name,
	}
	nonRoot, no, yes := true, false, true
	uid := int64(10001)
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	runtimeClass := "gvisor"
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("caliband")}},
		PeriodSeconds: 5, FailureThreshold: 3}
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Name: owner.Name + "-sbx", Namespace: ns, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "caliban.caliban-ai.dev/v1alpha1", Kind: "CalibanTask",
				Name: owner.Name, UID: owner.UID, Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: sandboxv1beta1.SandboxSpec{
			Service:       &yes,
			OperatingMode: sandboxv1beta1.OperatingModeRunning,
			VolumeClaimTemplates: []sandboxv1beta1.PersistentVolumeClaimTemplate{{
				Metadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: "workspace"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
				},
			}},
			PodTemplate: sandboxv1beta1.PodTemplate{
				Metadata: sandboxv1beta1.PodMetadata{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName:           owner.Name + "-sa",
					AutomountServiceAccountToken: &no,
					RuntimeClassName:             &runtimeClass,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid, RunAsNonRoot: &nonRoot,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					InitContainers: []corev1.Container{{
						Name: "clone-workspace", Image: "alpine/git:latest",
						Command:         []string{"/bin/sh", "-c", "set -eu\nif [ ! -d '/work/r/.git' ]; then git clone --depth 1 --branch 'main' 'https://example.com/r.git' '/work/r'; fi\n"},
						VolumeMounts:    []corev1.VolumeMount{{Name: "workspace", MountPath: "/work"}},
						Resources:       resources,
						SecurityContext: sc,
					}},
					Containers: []corev1.Container{{
						Name:  "caliband",
						Image: "ghcr.io/caliban-ai/caliban:latest",
						Args:  []string{"--workspace-root", "/work", "--listen", "0.0.0.0:8443"},
						Ports: []corev1.ContainerPort{{Name: "caliband", ContainerPort: 8443, Protocol: corev1.ProtocolTCP}},
						Env: []corev1.EnvVar{
							{Name: "CALIBAN_PROVIDER", Value: "anthropic"},
							{Name: "ANTHROPIC_API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
								LocalObjectReference: corev1.LocalObjectReference{Name: "anthropic-key"}, Key: "api-key", Optional: &no}}},
						},
						ReadinessProbe:  probe,
						StartupProbe:    probe,
						Resources:       resources,
						SecurityContext: sc,
						VolumeMounts: []corev1.VolumeMount{
							{Name: "workspace", MountPath: "/work"},
							{Name: "session-tls", MountPath: "/etc/caliband/tls", ReadOnly: true},
							{Name: "router-config", MountPath: "/etc/caliban/router", ReadOnly: true},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "session-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "caliban-session-plane-tls"}}},
						{Name: "router-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "router"}}}},
					},
				},
			},
		},
	}
}

// The operator pins a task with a status apply that carries the
// resourceVersion its decision was made from; the apiserver must refuse it
// once the task has changed, or a lagging cache could pin twice.
func TestAStatusApplyOnAStaleResourceVersionIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, nil)
	tasks := createValidTask(t, ns)
	seen, err := tasks.Get(ctx, "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(rv, model string) error {
		body := fmt.Sprintf(`{"apiVersion":"caliban.caliban-ai.dev/v1alpha1","kind":"CalibanTask",
			"metadata":{"name":"task","uid":%q,"resourceVersion":%q},
			"status":{"phase":"Provisioning","resolvedWorkspace":{"provider":{"name":"p","kind":"anthropic","model":%q}}}}`,
			seen.UID, rv, model)
		_, err := tasks.Patch(ctx, "task", types.ApplyPatchType, []byte(body),
			metav1.PatchOptions{FieldManager: "caliban-operator", Force: new(true)}, "status")
		return err
	}
	if err := apply(seen.ResourceVersion, "first"); err != nil {
		t.Fatalf("the first conditional apply: %v", err)
	}
	err = apply(seen.ResourceVersion, "second")
	if !apierrors.IsConflict(err) {
		t.Fatalf("an apply on the stale resourceVersion returned %v, want a conflict", err)
	}
	got, err := tasks.Get(ctx, "task", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ResolvedWorkspace == nil || got.Status.ResolvedWorkspace.Provider.Model != "first" {
		t.Errorf("pin %+v, want the first one kept", got.Status.ResolvedWorkspace)
	}
}

// createValidTask creates validTask ("task") in ns and returns the typed
// client of that namespace's tasks.
func createValidTask(t *testing.T, ns string) calibanclientv1alpha1.CalibanTaskInterface {
	t.Helper()
	u := &unstructured.Unstructured{Object: validTask()}
	if _, err := cluster.Dynamic.Resource(gvr(u)).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns)
}
