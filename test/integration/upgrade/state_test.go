// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package upgrade_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

var sandboxes = sandboxv1beta1.SchemeGroupVersion.WithResource(builders.SandboxResource)

// The Workspace every task runs on, and its provider's credentials.
const (
	workspaceName  = "ws"
	providerSecret = "anthropic-key"
	providerKey    = "api-key"
)

// createReadyWorkspace creates the provider Secret and a typical Workspace
// (one source, one anthropic provider, one env entry) and waits until the
// operator has validated it.
func createReadyWorkspace(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: providerSecret}, StringData: map[string]string{providerKey: "sk-ant-upgrade"}}
	if _, err := cluster.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatalf("creating Secret %s/%s: %v", ns, providerSecret, err)
	}
	ws := &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: workspaceName},
		Spec: calibanv1alpha1.WorkspaceSpec{
			DisplayName: "Upgrade workspace",
			Sources: []calibanv1alpha1.Source{{
				Name: "caliban", Repo: "https://github.com/caliban-ai/caliban.git", Ref: "main", Path: "/work/caliban",
			}},
			Providers: []calibanv1alpha1.Provider{{
				Name: "planner", Kind: "anthropic", Model: "claude-sonnet-4-5",
				CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: providerSecret, Key: providerKey},
			}},
			Env: []calibanv1alpha1.EnvVar{{Name: "CALIBAN_OUTPUT_STYLE", Value: "concise"}},
		},
	}
	if _, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Create(ctx, ws, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
		t.Fatalf("creating Workspace %s/%s: %v", ns, workspaceName, err)
	}
	framework.Eventually(t, time.Minute, func() error {
		got, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, workspaceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != calibanv1alpha1.WorkspaceReady || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("Workspace %s: phase %q at observedGeneration %d of %d, want Ready (status %s)",
				workspaceName, got.Status.Phase, got.Status.ObservedGeneration, got.Generation, statusJSON(got.Status))
		}
		return nil
	})
}

// createTasks creates the named supervised tasks on the Workspace.
func createTasks(t *testing.T, ctx context.Context, ns string, names []string) {
	t.Helper()
	for _, name := range names {
		task := &calibanv1alpha1.CalibanTask{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: calibanv1alpha1.CalibanTaskSpec{
				WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: workspaceName},
				Task:         calibanv1alpha1.TaskDefinition{Prompt: "Summarise the repository layout in README form."},
			},
		}
		if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, task, metav1.CreateOptions{FieldManager: framework.FieldManager}); err != nil {
			t.Fatalf("creating CalibanTask %s/%s: %v", ns, name, err)
		}
	}
}

// taskCheck is what a wait expects of one task.
type taskCheck func(*calibanv1alpha1.CalibanTask) error

// waitTasks polls the namespace's tasks until check passes for every
// named one, and fails naming a few that do not.
func waitTasks(t *testing.T, ctx context.Context, ns string, names []string, timeout time.Duration, check taskCheck) {
	t.Helper()
	framework.Eventually(t, timeout, func() error { return tasksPass(ctx, ns, names, check) })
}

func tasksPass(ctx context.Context, ns string, names []string, check taskCheck) error {
	list, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	byName := map[string]*calibanv1alpha1.CalibanTask{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var wrong []string
	for _, name := range names {
		task := byName[name]
		if task == nil {
			wrong = append(wrong, name+": does not exist")
			continue
		}
		if err := check(task); err != nil {
			wrong = append(wrong, fmt.Sprintf("%s: %v (status %s)", name, err, statusJSON(task.Status)))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%d of %d tasks are not there yet, e.g.\n  %s", len(wrong), len(names), strings.Join(wrong[:min(3, len(wrong))], "\n  "))
	}
	return nil
}

func readyCondition(task *calibanv1alpha1.CalibanTask) *metav1.Condition {
	return meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady)
}

// atPhase: the phase, for the current generation.
func atPhase(phase calibanv1alpha1.TaskPhase) taskCheck {
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

// isRunning: Running for the current generation, Ready True, with the
// endpoint prospero dials.
func isRunning(task *calibanv1alpha1.CalibanTask) error {
	if err := atPhase(calibanv1alpha1.TaskRunning)(task); err != nil {
		return err
	}
	if c := readyCondition(task); c == nil || c.Status != metav1.ConditionTrue {
		return fmt.Errorf("Ready %+v, want True", c)
	}
	if task.Status.CalibandEndpoint == "" {
		return errors.New("no calibandEndpoint")
	}
	return nil
}

// withDrainFinalizer: the operator holds the deleted task for its drain.
func withDrainFinalizer(task *calibanv1alpha1.CalibanTask) error {
	if !slices.Contains(task.Finalizers, calibanv1alpha1.FinalizerDrain) {
		return fmt.Errorf("finalizers %v lack %s", task.Finalizers, calibanv1alpha1.FinalizerDrain)
	}
	return nil
}

// isDraining: deleted, held by the drain finalizer, phase Draining.
func isDraining(task *calibanv1alpha1.CalibanTask) error {
	if task.DeletionTimestamp == nil {
		return errors.New("no deletionTimestamp")
	}
	if task.Status.Phase != calibanv1alpha1.TaskDraining {
		return fmt.Errorf("phase %q, want Draining", task.Status.Phase)
	}
	return withDrainFinalizer(task)
}

func allOf(checks ...taskCheck) taskCheck {
	return func(task *calibanv1alpha1.CalibanTask) error {
		for _, c := range checks {
			if err := c(task); err != nil {
				return err
			}
		}
		return nil
	}
}

// taskState is what the upgrade must keep of a task.
type taskState struct {
	Phase       calibanv1alpha1.TaskPhase
	ReadyStatus metav1.ConditionStatus
	ReadyReason string
	// ReadyMessage is reported on a difference, not compared: its wording
	// is the operator's to improve.
	ReadyMessage string
}

func stateOf(task *calibanv1alpha1.CalibanTask) taskState {
	s := taskState{Phase: task.Status.Phase}
	if c := readyCondition(task); c != nil {
		s.ReadyStatus, s.ReadyReason, s.ReadyMessage = c.Status, c.Reason, c.Message
	}
	return s
}

func (s taskState) String() string {
	return fmt.Sprintf("%s (Ready %s/%s %q)", s.Phase, s.ReadyStatus, s.ReadyReason, s.ReadyMessage)
}

func (s taskState) same(o taskState) bool {
	return s.Phase == o.Phase && s.ReadyStatus == o.ReadyStatus && s.ReadyReason == o.ReadyReason
}

// taskStates reads every task of the namespace.
func taskStates(ctx context.Context, ns string) (map[string]taskState, error) {
	list, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]taskState{}
	for i := range list.Items {
		out[list.Items[i].Name] = stateOf(&list.Items[i])
	}
	return out, nil
}

// child is one object the operator made for a task, as it was recorded.
type child struct {
	Kind, Name      string
	UID             types.UID
	ResourceVersion string
	// Task is the name of the task that controls it.
	Task string
}

// key names a child in messages and maps: "Sandbox task-07-sandbox".
func (c child) key() string { return c.Kind + " " + c.Name }

// childKinds maps the audit log's resource names to kinds.
var childKinds = map[string]string{
	builders.SandboxResource: "Sandbox",
	"serviceaccounts":        "ServiceAccount",
	"networkpolicies":        "NetworkPolicy",
}

// listChildren lists every Sandbox, ServiceAccount and NetworkPolicy of
// the namespace that a CalibanTask controls, by key. (The namespace's
// "default" ServiceAccount is nobody's child.)
func listChildren(ctx context.Context, ns string) (map[string]child, error) {
	tasks, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	taskByUID := map[types.UID]string{}
	for _, task := range tasks.Items {
		taskByUID[task.UID] = task.Name
	}
	out := map[string]child{}
	var strays []string
	add := func(kind string, o metav1.Object) {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.Kind != "CalibanTask" {
			return
		}
		c := child{Kind: kind, Name: o.GetName(), UID: o.GetUID(), ResourceVersion: o.GetResourceVersion(), Task: taskByUID[ref.UID]}
		if c.Task == "" {
			strays = append(strays, fmt.Sprintf("%s (controller %s %s, uid %s)", c.key(), ref.Kind, ref.Name, ref.UID))
		}
		out[c.key()] = c
	}
	sbs, err := cluster.Dynamic.Resource(sandboxes).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range sbs.Items {
		add("Sandbox", &sbs.Items[i])
	}
	sas, err := cluster.Kube.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range sas.Items {
		add("ServiceAccount", &sas.Items[i])
	}
	nps, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range nps.Items {
		add("NetworkPolicy", &nps.Items[i])
	}
	if len(strays) > 0 {
		sort.Strings(strays)
		return nil, fmt.Errorf("children controlled by no task of the namespace: %v", strays)
	}
	return out, nil
}

// settledChildren waits until the children's resourceVersions hold for
// quiet (the Sandbox stand-in writes a status shortly after a change) and
// returns them.
func settledChildren(t *testing.T, ctx context.Context, ns string, quiet time.Duration) map[string]child {
	t.Helper()
	var settled map[string]child
	framework.Eventually(t, time.Minute, func() error {
		a, err := listChildren(ctx, ns)
		if err != nil {
			return err
		}
		time.Sleep(quiet)
		b, err := listChildren(ctx, ns)
		if err != nil {
			return err
		}
		if !maps.Equal(a, b) {
			var moved []string
			for k, c := range b {
				if a[k] != c {
					moved = append(moved, k)
				}
			}
			sort.Strings(moved)
			return fmt.Errorf("children still changing (%d of them, e.g. %v)", len(moved), moved[:min(3, len(moved))])
		}
		settled = b
		return nil
	})
	return settled
}

// phaseWatch records, from an informer on the namespace's tasks, every
// state a task was seen in that differs from the one it was recorded with,
// while it is on: a task that flickers through Provisioning and back while
// the new build takes over ends where it began, but is caught here.
type phaseWatch struct {
	mu      sync.Mutex
	want    map[string]taskState
	on      bool
	strayed map[string][]string
}

func watchStates(t *testing.T, ctx context.Context, ns string, want map[string]taskState) *phaseWatch {
	t.Helper()
	w := &phaseWatch{want: want, on: true, strayed: map[string][]string{}}
	cluster.WatchTasks(t, ctx, ns, func(task *calibanv1alpha1.CalibanTask) {
		got := stateOf(task)
		w.mu.Lock()
		defer w.mu.Unlock()
		want, known := w.want[task.Name]
		if !w.on || !known || got.same(want) {
			return
		}
		seen := w.strayed[task.Name]
		if desc := got.String(); len(seen) == 0 || seen[len(seen)-1] != desc {
			w.strayed[task.Name] = append(seen, desc)
		}
	})
	return w
}

// stop ends the recording and returns, per task, the states it strayed
// into, in order.
func (w *phaseWatch) stop() map[string][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on = false
	return maps.Clone(w.strayed)
}

// releaseTasksAtEnd removes every finalizer from the namespace's tasks
// when the test ends. Registered before the operators start, it runs after
// they are gone, so the drain finalizer no operator will finish does not
// hold the namespace's deletion.
func releaseTasksAtEnd(t *testing.T, ns string) {
	t.Cleanup(func() {
		ctx := context.Background()
		list, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, task := range list.Items {
			if len(task.Finalizers) > 0 {
				_, _ = cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Patch(ctx, task.Name, types.MergePatchType,
					[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
		}
	})
}

func statusJSON(status any) string {
	b, _ := json.Marshal(status)
	return string(b)
}
