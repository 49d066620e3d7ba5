// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// Timeouts of the waits. They bound how long a test waits for something
// the operator should do at once (a few hundred milliseconds on an idle
// machine); they are not what the tests assert, except where a test says
// so.
const (
	settleTimeout = 30 * time.Second
	// recheckTimeout covers a wait on the operator's 30 s failure requeue.
	recheckTimeout = 50 * time.Second
)

var sandboxes = sandboxv1beta1.SchemeGroupVersion.WithResource(builders.SandboxResource)

var ctx = context.Background()

// The provider credentials every test workspace refers to.
const (
	providerSecret = "anthropic-key"
	providerKey    = "api-key"
)

// createSecret creates a Secret with the given string data.
func createSecret(t testing.TB, ns, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}
	if _, err := cluster.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatalf("creating Secret %s/%s: %v", ns, name, err)
	}
}

// createTypedSecret creates a Secret of a built-in type, which the
// apiserver checks for the keys that type requires.
func createTypedSecret(t testing.TB, ns, name string, typ corev1.SecretType, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: typ, StringData: data}
	if _, err := cluster.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatalf("creating %s Secret %s/%s: %v", typ, ns, name, err)
	}
}

// createProviderSecret creates the credentials Secret of workspaceSpec.
func createProviderSecret(t testing.TB, ns string) {
	t.Helper()
	createSecret(t, ns, providerSecret, map[string]string{providerKey: "sk-ant-test"})
}

// workspaceSpec is a typical workspace: one source, one anthropic provider
// whose key is in providerSecret, one env entry, no agentPolicy.
func workspaceSpec() calibanv1alpha1.WorkspaceSpec {
	return calibanv1alpha1.WorkspaceSpec{
		DisplayName: "Integration workspace",
		Sources: []calibanv1alpha1.Source{{
			Name: "caliban", Repo: "https://github.com/caliban-ai/caliban.git", Ref: "main", Path: "/work/caliban",
		}},
		Providers: []calibanv1alpha1.Provider{{
			Name: "planner", Kind: "anthropic", Model: "claude-sonnet-4-5",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: providerSecret, Key: providerKey},
		}},
		Env: []calibanv1alpha1.EnvVar{{Name: "CALIBAN_OUTPUT_STYLE", Value: "concise"}},
	}
}

// createWorkspace creates workspace name from workspaceSpec changed by
// mutate.
func createWorkspace(t testing.TB, ns, name string, mutate ...func(*calibanv1alpha1.WorkspaceSpec)) *calibanv1alpha1.Workspace {
	t.Helper()
	return createAs(t, cluster.Caliban, newWorkspace(ns, name, mutate...))
}

// createReadyWorkspace creates a workspace (its Secret must exist) and
// waits until the operator has validated it.
func createReadyWorkspace(t testing.TB, ns, name string, mutate ...func(*calibanv1alpha1.WorkspaceSpec)) *calibanv1alpha1.Workspace {
	t.Helper()
	createWorkspace(t, ns, name, mutate...)
	return waitForWorkspace(t, ns, name, settleTimeout, workspaceReady)
}

// createTask creates task name on workspace ws, supervised, changed by
// mutate.
func createTask(t testing.TB, ns, name, ws string, mutate ...func(*calibanv1alpha1.CalibanTaskSpec)) *calibanv1alpha1.CalibanTask {
	t.Helper()
	return createAs(t, cluster.Caliban, newTask(ns, name, ws, mutate...))
}

func allowUnattended(spec *calibanv1alpha1.WorkspaceSpec) {
	spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true}
}

// workspace is the test Workspace name, from workspaceSpec changed by
// mutate.
func newWorkspace(ns, name string, mutate ...func(*calibanv1alpha1.WorkspaceSpec)) *calibanv1alpha1.Workspace {
	spec := workspaceSpec()
	for _, m := range mutate {
		m(&spec)
	}
	return &calibanv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
}

// task is the supervised test task name on Workspace ws, changed by mutate.
func newTask(ns, name, ws string, mutate ...func(*calibanv1alpha1.CalibanTaskSpec)) *calibanv1alpha1.CalibanTask {
	spec := calibanv1alpha1.CalibanTaskSpec{
		WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: ws},
		Task:         calibanv1alpha1.TaskDefinition{Prompt: "Summarise the repository layout in README form."},
	}
	for _, m := range mutate {
		m(&spec)
	}
	return &calibanv1alpha1.CalibanTask{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
}

// createAs creates a task or a Workspace through client and fails the test
// if it is refused.
func createAs[T *calibanv1alpha1.CalibanTask | *calibanv1alpha1.Workspace](t testing.TB, client calibanclient.Interface, obj T) T {
	t.Helper()
	var (
		out  any
		kind string
		meta metav1.ObjectMeta
		err  error
	)
	switch o := any(obj).(type) {
	case *calibanv1alpha1.CalibanTask:
		kind, meta = "CalibanTask", o.ObjectMeta
		out, err = client.CalibanV1alpha1().CalibanTasks(o.Namespace).Create(ctx, o, metav1.CreateOptions{FieldManager: framework.FieldManager})
	case *calibanv1alpha1.Workspace:
		kind, meta = "Workspace", o.ObjectMeta
		out, err = client.CalibanV1alpha1().Workspaces(o.Namespace).Create(ctx, o, metav1.CreateOptions{FieldManager: framework.FieldManager})
	}
	if err != nil {
		t.Fatalf("creating %s %s/%s: %v", kind, meta.Namespace, meta.Name, err)
	}
	return out.(T)
}

func unattended(spec *calibanv1alpha1.CalibanTaskSpec) {
	spec.Task.PermissionPosture = calibanv1alpha1.PostureUnattended
}

// touchTask changes a field the operator only carries (task.agentType), so
// the operator reconciles the task and records the new generation without
// anything it renders changing. It returns the new generation.
func touchTask(t testing.TB, ns, name string) int64 {
	t.Helper()
	return framework.UpdateTask(t, cluster.Caliban, ns, name, func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.Task.AgentType = "touched-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	})
}

type taskCheck func(*calibanv1alpha1.CalibanTask) error

// waitForTask polls the task until check passes and returns it.
func waitForTask(t testing.TB, ns, name string, timeout time.Duration, check taskCheck) *calibanv1alpha1.CalibanTask {
	t.Helper()
	var task *calibanv1alpha1.CalibanTask
	framework.Eventually(t, timeout, func() error {
		got, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := check(got); err != nil {
			return fmt.Errorf("CalibanTask %s: %w (status: %s)%s", name, err, statusJSON(got.Status), sandboxState(got))
		}
		task = got
		return nil
	})
	return task
}

// waitForWorkspace polls the workspace until check passes and returns it.
func waitForWorkspace(t testing.TB, ns, name string, timeout time.Duration, check func(*calibanv1alpha1.Workspace) error) *calibanv1alpha1.Workspace {
	t.Helper()
	var ws *calibanv1alpha1.Workspace
	framework.Eventually(t, timeout, func() error {
		got, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := check(got); err != nil {
			return fmt.Errorf("Workspace %s: %w (status: %s)", name, err, statusJSON(got.Status))
		}
		ws = got
		return nil
	})
	return ws
}

// sandboxState describes a provisioning task's Sandbox for a failure
// message: what the agent-sandbox stand-in was asked for and wrote.
func sandboxState(task *calibanv1alpha1.CalibanTask) string {
	if task.Status.Phase != calibanv1alpha1.TaskProvisioning || task.Status.SandboxRef == nil {
		return ""
	}
	u, err := cluster.Dynamic.Resource(sandboxes).Namespace(task.Namespace).Get(ctx, task.Status.SandboxRef.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("; reading its Sandbox: %v", err)
	}
	return fmt.Sprintf("; its Sandbox (resourceVersion %s) has annotations %v and status %s",
		u.GetResourceVersion(), u.GetAnnotations(), statusJSON(u.Object["status"]))
}

func statusJSON(status any) string {
	b, _ := json.Marshal(status)
	return string(b)
}

// waitForWorkspaceGeneration waits until the workspace is Ready for
// generation gen, so the operator has seen that edit.
func waitForWorkspaceGeneration(t testing.TB, ns, name string, gen int64) {
	t.Helper()
	waitForWorkspace(t, ns, name, settleTimeout, func(ws *calibanv1alpha1.Workspace) error {
		if ws.Status.ObservedGeneration != gen {
			return fmt.Errorf("observedGeneration %d, want %d", ws.Status.ObservedGeneration, gen)
		}
		return workspaceReady(ws)
	})
}

// workspaceReady: Ready for the current generation.
func workspaceReady(ws *calibanv1alpha1.Workspace) error {
	if ws.Status.Phase != calibanv1alpha1.WorkspaceReady {
		return fmt.Errorf("phase %q, want Ready", ws.Status.Phase)
	}
	if ws.Status.ObservedGeneration != ws.Generation {
		return fmt.Errorf("observedGeneration %d, want %d", ws.Status.ObservedGeneration, ws.Generation)
	}
	return nil
}

// isRunning: phase Running with everything prospero reads.
func isRunning(task *calibanv1alpha1.CalibanTask) error {
	st := task.Status
	if st.Phase != calibanv1alpha1.TaskRunning {
		return fmt.Errorf("phase %q, want Running", st.Phase)
	}
	if err := readyIs(task, metav1.ConditionTrue, builders.ReasonRunning); err != nil {
		return err
	}
	sandbox := builders.SandboxName(task.Name)
	if want := fmt.Sprintf("%s.%s.svc.cluster.local:8443", sandbox, task.Namespace); st.CalibandEndpoint != want {
		return fmt.Errorf("calibandEndpoint %q, want %q", st.CalibandEndpoint, want)
	}
	if st.SandboxRef == nil || st.SandboxRef.Name != sandbox {
		return fmt.Errorf("sandboxRef %+v, want name %s", st.SandboxRef, sandbox)
	}
	if st.ResolvedWorkspace == nil {
		return errors.New("no resolvedWorkspace")
	}
	if st.ObservedGeneration != task.Generation {
		return fmt.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, task.Generation)
	}
	return nil
}

// hasPhase: the phase, and the status reflects the current generation.
func hasPhase(phase calibanv1alpha1.TaskPhase) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		if task.Status.Phase != phase {
			return fmt.Errorf("phase %q, want %s", task.Status.Phase, phase)
		}
		if task.Status.ObservedGeneration != task.Generation {
			return fmt.Errorf("observedGeneration %d, want %d", task.Status.ObservedGeneration, task.Generation)
		}
		return nil
	}
}

// failedWith: phase Failed, Ready False with reason and exactly message,
// and no endpoint.
func failedWith(reason, message string) taskCheck {
	return parkedWith(calibanv1alpha1.TaskFailed, reason, message)
}

// parkedWith: the phase, Ready False with reason and exactly message, and
// no endpoint: a task nobody can reach (failed, suspended).
func parkedWith(phase calibanv1alpha1.TaskPhase, reason, message string) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		if err := hasPhase(phase)(task); err != nil {
			return err
		}
		if err := readyIs(task, metav1.ConditionFalse, reason); err != nil {
			return err
		}
		if got := readyCondition(task).Message; got != message {
			return fmt.Errorf("Ready message %q, want %q", got, message)
		}
		if task.Status.CalibandEndpoint != "" {
			return fmt.Errorf("calibandEndpoint %q on a %s task, want none", task.Status.CalibandEndpoint, phase)
		}
		return nil
	}
}

// failedNaming: phase Failed, Ready False with reason and a message that
// contains every one of words.
func failedNaming(reason string, words ...string) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		if err := hasPhase(calibanv1alpha1.TaskFailed)(task); err != nil {
			return err
		}
		if err := readyIs(task, metav1.ConditionFalse, reason); err != nil {
			return err
		}
		msg := readyCondition(task).Message
		for _, w := range words {
			if !strings.Contains(msg, w) {
				return fmt.Errorf("Ready message %q does not name %q", msg, w)
			}
		}
		return nil
	}
}

func readyCondition(task *calibanv1alpha1.CalibanTask) *metav1.Condition {
	return meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady)
}

func readyIs(task *calibanv1alpha1.CalibanTask, status metav1.ConditionStatus, reason string) error {
	c := readyCondition(task)
	if c == nil {
		return errors.New("no Ready condition")
	}
	if c.Status != status || c.Reason != reason {
		return fmt.Errorf("Ready %s/%s (%q), want %s/%s", c.Status, c.Reason, c.Message, status, reason)
	}
	return nil
}

// getSandbox reads a Sandbox; nil when it does not exist.
func getSandbox(t testing.TB, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading Sandbox %s/%s: %v", ns, name, err)
	}
	return u
}

// calibandEnv is the env of the caliband container of a Sandbox.
func calibandEnv(t testing.TB, u *unstructured.Unstructured) []corev1.EnvVar {
	t.Helper()
	sb, err := framework.SandboxOf(u)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sb.Spec.PodTemplate.Spec.Containers {
		if c.Name == "caliband" {
			return c.Env
		}
	}
	t.Fatalf("Sandbox %s has no caliband container", u.GetName())
	return nil
}

func envValue(env []corev1.EnvVar, name string) (string, bool) {
	i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return "", false
	}
	return env[i].Value, true
}

// annotateSandbox merge-patches the Sandbox's annotations under the test's
// field manager; a nil value removes the annotation.
func annotateSandbox(t testing.TB, ns, name string, annotations map[string]*string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).Patch(ctx, name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatalf("annotating Sandbox %s/%s: %v", ns, name, err)
	}
}

// prosperoSettles reports agent outcomes the way prospero does: a
// server-side apply of the AgentsSettled condition to the status
// subresource, as field manager "prospero", without force.
func prosperoSettles(t testing.TB, ns, name, reason, message string) {
	t.Helper()
	condition := map[string]any{
		"type":               builders.ConditionAgentsSettled,
		"status":             "True",
		"reason":             reason,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
	if message != "" {
		condition["message"] = message
	}
	if err := cluster.ProsperoApplies(ctx, ns, name, condition); err != nil {
		t.Fatal(err)
	}
}

// statusFieldsOf returns the status fields manager owns through Apply on
// the status subresource, as the managedFields' fieldsV1 tree (nil when it
// owns none).
func statusFieldsOf(obj metav1.Object, manager string) map[string]any {
	return appliedFieldsOf(obj, manager, "status")
}

// appliedFieldsOf returns the fields manager owns through Apply on the
// subresource ("" for the object itself), as the managedFields' fieldsV1
// tree (nil when it owns none).
func appliedFieldsOf(obj metav1.Object, manager, subresource string) map[string]any {
	for _, f := range obj.GetManagedFields() {
		if f.Manager != manager || f.Operation != metav1.ManagedFieldsOperationApply || f.Subresource != subresource || f.FieldsV1 == nil {
			continue
		}
		var tree map[string]any
		if err := json.Unmarshal(f.FieldsV1.Raw, &tree); err != nil {
			return nil
		}
		return tree
	}
	return nil
}

// ownsCondition reports whether a fieldsV1 tree holds the condition of the
// given type.
func ownsCondition(tree map[string]any, conditionType string) bool {
	status, _ := tree["f:status"].(map[string]any)
	conditions, _ := status["f:conditions"].(map[string]any)
	_, ok := conditions[fmt.Sprintf(`k:{"type":"%s"}`, conditionType)]
	return ok
}

// eventsAbout lists the events.k8s.io/v1 Events in ns regarding the named
// object of kind.
func eventsAbout(t testing.TB, ns, kind, name string) []eventsv1.Event {
	t.Helper()
	list, err := cluster.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing Events in %s: %v", ns, err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// waitForEvent polls until an Event about the task has the reason and type
// and passes check (nil: any), and returns it.
func waitForEvent(t testing.TB, ns, task, eventType, reason string, check func(eventsv1.Event) error) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	framework.Eventually(t, settleTimeout, func() error {
		var last error = fmt.Errorf("no %s Event %s about CalibanTask %s", eventType, reason, task)
		for _, e := range eventsAbout(t, ns, "CalibanTask", task) {
			if e.Type != eventType || e.Reason != reason {
				continue
			}
			if check != nil {
				if err := check(e); err != nil {
					last = err
					continue
				}
			}
			found = e
			return nil
		}
		return last
	})
	return found
}

// noteContains checks an Event's note.
func noteContains(words ...string) func(eventsv1.Event) error {
	return func(e eventsv1.Event) error {
		for _, w := range words {
			if !strings.Contains(e.Note, w) {
				return fmt.Errorf("Event %s note %q does not contain %q", e.Reason, e.Note, w)
			}
		}
		return nil
	}
}

// consistently checks f every 200ms for d and fails the test the first
// time it returns an error.
func consistently(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if err := f(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// metrics is a scrape of /metrics, read with Prometheus' own parser.
type metrics = framework.Metrics

func parseMetrics(text string) (metrics, error) { return framework.ParseMetrics(text) }

// clusterState is what a steady state must keep: the resourceVersion of
// each object, and every Event of the namespace with its series count.
func clusterState(ns string, objects map[string]func() (metav1.Object, error)) (map[string]string, error) {
	out := map[string]string{}
	for name, get := range objects {
		obj, err := get()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = obj.GetResourceVersion()
	}
	events, err := cluster.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, e := range events.Items {
		count := int32(1)
		if e.Series != nil {
			count = e.Series.Count
		}
		out["Event "+e.Reason+" "+e.Regarding.Name+" "+e.Note] = fmt.Sprint(count)
	}
	return out, nil
}

// settledClusterState waits until clusterState holds for quiet (Events are
// written asynchronously, and the Sandbox stand-in writes shortly after a
// Sandbox appears) and returns it.
func settledClusterState(t testing.TB, ns string, objects map[string]func() (metav1.Object, error), quiet time.Duration) map[string]string {
	t.Helper()
	return settledState(t, quiet, func() (map[string]string, error) { return clusterState(ns, objects) })
}

// settledState waits until state answers the same twice, quiet apart, and
// returns that answer.
func settledState(t testing.TB, quiet time.Duration, state func() (map[string]string, error)) map[string]string {
	t.Helper()
	var settled map[string]string
	framework.Eventually(t, settleTimeout, func() error {
		a, err := state()
		if err != nil {
			return err
		}
		time.Sleep(quiet)
		b, err := state()
		if err != nil {
			return err
		}
		if diff := cmp.Diff(a, b); diff != "" {
			return fmt.Errorf("still changing:\n%s", diff)
		}
		settled = b
		return nil
	})
	return settled
}
