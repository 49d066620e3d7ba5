// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package agentsandbox_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// Warm start on agent-sandbox's own extensions (docs/warm-start.md): a
// Workspace's pool fills; a task claims a ready Sandbox from it and runs
// there; it suspends and resumes on its claim and volume; a Workspace edit
// rolls the pool and leaves the running task alone, and the next task
// gets the new rendering; a task that finds the pool empty still runs, on
// a Sandbox its claim makes; deleting a task takes everything with it.
func TestWarmTasksOnAgentSandbox(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	op := startOperator(t, "warm", ns)
	namespaceWithWorkspace(t, ns)
	setWarmPool(t, ns, "ws", 2)
	first := waitForFullPool(t, ns, "ws", "")

	// Warm: Running on a pool Sandbox, owned through the task's claim.
	createTask(t, ns, "warm")
	task := framework.WaitForPhase(t, cluster.Caliban, ns, "warm", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	l := task.Status.Launch
	if l == nil || l.Type != calibanv1alpha1.LaunchWarm || l.Reason != builders.ReasonLaunchWarmPool || l.Claim == nil {
		t.Fatalf("launch %+v, want Warm from the pool, with its claim", l)
	}
	name := task.Status.SandboxRef.Name
	if !strings.HasPrefix(name, builders.WarmPoolName("ws")+"-") {
		t.Errorf("the task runs in Sandbox %s, want one of pool %s", name, builders.WarmPoolName("ws"))
	}
	if want := fmt.Sprintf("%s.%s.svc.cluster.local:8443", name, ns); task.Status.CalibandEndpoint != want {
		t.Errorf("endpoint %q, want %q", task.Status.CalibandEndpoint, want)
	}
	sb := getSandbox(t, ns, name)
	if got := sb.GetLabels()[builders.LabelLaunchType]; got != builders.LaunchTypeWarm {
		t.Errorf("Sandbox %s is labelled %s=%q, want %q", name, builders.LabelLaunchType, got, builders.LaunchTypeWarm)
	}
	if got := sb.GetAnnotations()[builders.AnnotationSandboxTemplateRef]; got != first {
		t.Errorf("Sandbox %s was made from %q, want the pool's %q", name, got, first)
	}
	owner := metav1.GetControllerOf(sb)
	if owner == nil || owner.Kind != "SandboxClaim" || owner.Name != builders.ClaimName("warm") || owner.UID != l.Claim.UID {
		t.Errorf("Sandbox %s is controlled by %+v, want the task's claim %s", name, owner, l.Claim.UID)
	}
	if c := getClaim(t, ns, "warm"); !metav1.IsControlledBy(c, task) {
		t.Errorf("claim %s is controlled by %+v, want the task", c.Name, metav1.GetControllerOf(c))
	}
	np, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, builders.NetworkPolicyName("warm"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := np.Spec.PodSelector.MatchLabels; got[builders.LabelClaimUID] != string(l.Claim.UID) || len(got) != 1 {
		t.Errorf("the task's NetworkPolicy selects %v, want the pod of claim %s", got, l.Claim.UID)
	}
	// agent-sandbox relabels the adopted pod: the task's policy selects it,
	// the unclaimed pods' one does not.
	var podUID types.UID
	framework.Eventually(t, startTimeout, func() error {
		p, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Labels[builders.LabelClaimUID] != string(l.Claim.UID) || p.Labels[builders.LabelWarmPoolSandbox] != "" {
			return fmt.Errorf("pod %s has labels %v", name, p.Labels)
		}
		podUID = p.UID
		return nil
	})
	if _, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, builders.ServiceAccountName("warm"), metav1.GetOptions{}); err == nil {
		t.Error("a warm task has a ServiceAccount of its own; its pod runs as the pool's")
	}
	volume := getPVC(t, ns, builders.VolumeWorkspace+"-"+name)

	// Suspend and resume: the same claim, Sandbox and volume; a new pod.
	framework.UpdateTask(t, cluster.Caliban, ns, "warm", suspend(true))
	framework.WaitForPhase(t, cluster.Caliban, ns, "warm", calibanv1alpha1.TaskSuspended, builders.ReasonSuspended, startTimeout)
	waitForNoPodNamed(t, ns, name)
	framework.UpdateTask(t, cluster.Caliban, ns, "warm", suspend(false))
	task = framework.WaitForPhase(t, cluster.Caliban, ns, "warm", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	if task.Status.SandboxRef.Name != name || getClaim(t, ns, "warm").UID != l.Claim.UID {
		t.Errorf("after resume the task runs in %s with claim %s, want %s and %s", task.Status.SandboxRef.Name, getClaim(t, ns, "warm").UID, name, l.Claim.UID)
	}
	if v := getPVC(t, ns, volume.Name); v.UID != volume.UID {
		t.Errorf("resuming replaced the workspace volume claim (%s, was %s)", v.UID, volume.UID)
	}
	framework.Eventually(t, startTimeout, func() error {
		p, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == podUID || !podReady(p) {
			return fmt.Errorf("pod %s is %s (ready %v), want a new ready one", name, p.UID, podReady(p))
		}
		podUID = p.UID
		return nil
	})

	// An edit rolls the pool; the running task keeps its pod and spec.
	editWorkspace(t, ns, "ws", func(spec *calibanv1alpha1.WorkspaceSpec) {
		spec.Env = []calibanv1alpha1.EnvVar{{Name: "TEAM", Value: "warm"}}
	})
	second := waitForFullPool(t, ns, "ws", first)
	if p, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil || p.UID != podUID {
		t.Errorf("the pool's roll touched the running task's pod: %v", err)
	}
	if body, _ := json.Marshal(getSandbox(t, ns, name).Object["spec"]); strings.Contains(string(body), "TEAM") {
		t.Error("the running task's Sandbox got the Workspace's new env")
	}
	framework.WaitForPhase(t, cluster.Caliban, ns, "warm", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	createTask(t, ns, "after-edit")
	next := framework.WaitForPhase(t, cluster.Caliban, ns, "after-edit", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	if got := getSandbox(t, ns, next.Status.SandboxRef.Name).GetAnnotations()[builders.AnnotationSandboxTemplateRef]; got != second {
		t.Errorf("the task admitted after the edit runs on %q, want the new %q", got, second)
	}
	if _, err := cluster.Caliban.ExtensionsV1beta1().SandboxTemplates(ns).Get(ctx, first, metav1.GetOptions{}); err == nil {
		framework.Eventually(t, startTimeout, func() error {
			if _, err := cluster.Caliban.ExtensionsV1beta1().SandboxTemplates(ns).Get(ctx, first, metav1.GetOptions{}); err == nil {
				return fmt.Errorf("the old template %s is still there", first)
			}
			return nil
		})
	}

	// An empty pool: the claim makes a Sandbox from the template, and the
	// task runs there. With the nodes cordoned, the pool's two ready
	// Sandboxes are claimed and its refills get no pod address; the next
	// claim waits two seconds for one, then makes its own.
	waitForFullPool(t, ns, "ws", first)
	uncordon := cordonNodes(t)
	drainPool(t, ns, "drain", 2)
	createTask(t, ns, "empty")
	framework.Eventually(t, startTimeout, func() error {
		c, err := cluster.Caliban.ExtensionsV1beta1().SandboxClaims(ns).Get(ctx, builders.ClaimName("empty"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Sandbox.Name != builders.ClaimName("empty") {
			return fmt.Errorf("claim %s holds %q, want a Sandbox of its own", c.Name, c.Status.Sandbox.Name)
		}
		return nil
	})
	uncordon()
	empty := framework.WaitForPhase(t, cluster.Caliban, ns, "empty", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	if empty.Status.Launch.Type != calibanv1alpha1.LaunchWarm || empty.Status.SandboxRef.Name != builders.ClaimName("empty") {
		t.Errorf("launch %+v in %+v, want the warm path on the claim's own Sandbox", empty.Status.Launch, empty.Status.SandboxRef)
	}
	if got := getSandbox(t, ns, builders.ClaimName("empty")).GetLabels()[builders.LabelLaunchType]; got != builders.LaunchTypeCold {
		t.Errorf("the claim's own Sandbox is labelled %s=%q, want cold", builders.LabelLaunchType, got)
	}

	// Delete: the claim, the Sandbox, its pod and volume, the policy.
	if err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Delete(ctx, "warm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, "its claim", func() error {
		_, err := cluster.Caliban.ExtensionsV1beta1().SandboxClaims(ns).Get(ctx, builders.ClaimName("warm"), metav1.GetOptions{})
		return err
	})
	gone(t, "its Sandbox", func() error {
		_, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	gone(t, "its pod", func() error {
		_, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	gone(t, "its workspace volume claim", func() error {
		_, err := cluster.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, volume.Name, metav1.GetOptions{})
		return err
	})
	gone(t, "its NetworkPolicy", func() error {
		_, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, builders.NetworkPolicyName("warm"), metav1.GetOptions{})
		return err
	})

	if refused := op.refusedWrites(t, ns); len(refused) > 0 {
		t.Errorf("the apiserver refused writes of the operator: %v", refused)
	}
}

// A task the pool does not carry starts cold, on the cold path, and says
// why.
func TestATaskThePoolDoesNotCarryStartsCold(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	startOperator(t, "warm-cold", ns)
	namespaceWithWorkspace(t, ns)
	setWarmPool(t, ns, "ws", 1)
	waitForFullPool(t, ns, "ws", "")
	createTask(t, ns, "own-state", func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.State = &calibanv1alpha1.StateSpec{Mode: "local"}
	})
	task := framework.WaitForPhase(t, cluster.Caliban, ns, "own-state", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	if l := task.Status.Launch; l == nil || l.Type != calibanv1alpha1.LaunchCold || l.Reason != builders.ReasonPerTaskState {
		t.Errorf("launch %+v, want Cold, %s", l, builders.ReasonPerTaskState)
	}
	if task.Status.SandboxRef.Name != builders.SandboxName("own-state") {
		t.Errorf("the task runs in %s, want its own %s", task.Status.SandboxRef.Name, builders.SandboxName("own-state"))
	}
	if _, err := cluster.Caliban.ExtensionsV1beta1().SandboxClaims(ns).Get(ctx, builders.ClaimName("own-state"), metav1.GetOptions{}); err == nil {
		t.Error("a cold task has a SandboxClaim")
	}
}

func setWarmPool(t *testing.T, ns, ws string, replicas int32) {
	t.Helper()
	editWorkspace(t, ns, ws, func(spec *calibanv1alpha1.WorkspaceSpec) {
		spec.WarmPool = &calibanv1alpha1.WarmPool{Replicas: replicas}
	})
}

// editWorkspace changes the Workspace's spec, retrying on conflicts.
func editWorkspace(t *testing.T, ns, name string, mutate func(*calibanv1alpha1.WorkspaceSpec)) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, func() error {
		ws, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(&ws.Spec)
		_, err = cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Update(ctx, ws, metav1.UpdateOptions{FieldManager: framework.FieldManager})
		return err
	})
}

// waitForFullPool waits until the Workspace's pool serves a template
// other than not and is full, and returns the template.
func waitForFullPool(t *testing.T, ns, name, not string) string {
	t.Helper()
	var template string
	framework.Eventually(t, startTimeout, func() error {
		ws, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(ws.Status.Conditions, builders.ConditionWarmPoolReady)
		if ws.Status.WarmPool == nil || ws.Status.WarmPool.Template == not || cond == nil || cond.Status != metav1.ConditionTrue ||
			cond.ObservedGeneration != ws.Generation {
			return fmt.Errorf("warm pool %+v, WarmPoolReady %+v", ws.Status.WarmPool, cond)
		}
		template = ws.Status.WarmPool.Template
		return nil
	})
	return template
}

// drainPool claims n ready Sandboxes of the Workspace's pool with tasks
// named prefix-<i>, and waits for them to run.
func drainPool(t *testing.T, ns, prefix string, n int) {
	t.Helper()
	for i := range n {
		createTask(t, ns, fmt.Sprintf("%s-%d", prefix, i))
	}
	for i := range n {
		framework.WaitForPhase(t, cluster.Caliban, ns, fmt.Sprintf("%s-%d", prefix, i), calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	}
}

// cordonNodes marks every node unschedulable, and returns what undoes it
// (also run when the test ends).
func cordonNodes(t *testing.T) func() {
	t.Helper()
	set := func(unschedulable bool) {
		nodes, err := cluster.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
		for _, n := range nodes.Items {
			if _, err := cluster.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	set(true)
	done := false
	undo := func() {
		if !done {
			done = true
			set(false)
		}
	}
	t.Cleanup(undo)
	return undo
}

func getSandbox(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	sb, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Sandbox %s: %v", name, err)
	}
	return sb
}

func getClaim(t *testing.T, ns, task string) *extv1beta1.SandboxClaim {
	t.Helper()
	c, err := cluster.Caliban.ExtensionsV1beta1().SandboxClaims(ns).Get(ctx, builders.ClaimName(task), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the claim of task %s: %v", task, err)
	}
	return c
}

func getPVC(t *testing.T, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	c, err := cluster.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("volume claim %s: %v", name, err)
	}
	return c
}

// waitForNoPodNamed waits until agent-sandbox has deleted pod name.
func waitForNoPodNamed(t *testing.T, ns, name string) {
	t.Helper()
	framework.Eventually(t, startTimeout, func() error {
		if _, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("pod %s still exists", name)
		}
		return nil
	})
}

// The rest of a task's life on the warm path, with agent-sandbox doing
// what it does: a finish with onFinish suspend releases the pod and keeps
// the claim; the deadline fails a running task and releases its pod;
// ttlSecondsAfterFinished deletes a finished task and, with it, its claim;
// drain before delete keeps the pod until prospero answers, then
// everything goes.
func TestTheWarmLifecycle(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	op := startOperator(t, "warm-life", ns)
	namespaceWithWorkspace(t, ns)
	setWarmPool(t, ns, "ws", 4)
	waitForFullPool(t, ns, "ws", "")

	createTask(t, ns, "done")
	createTask(t, ns, "late")
	createTask(t, ns, "brief", func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{TTLSecondsAfterFinished: new(int32(1))}
	})
	createTask(t, ns, "drained", func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{OnDelete: calibanv1alpha1.OnDeleteCheckpoint}
	})
	sandbox := map[string]string{}
	for _, name := range []string{"done", "late", "brief", "drained"} {
		task := framework.WaitForPhase(t, cluster.Caliban, ns, name, calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
		if !builders.IsWarm(task) {
			t.Fatalf("task %s took launch %+v, want the warm path", name, task.Status.Launch)
		}
		sandbox[name] = task.Status.SandboxRef.Name
	}

	// A finish: onFinish suspend (the default) releases the pod, keeps the
	// claim and the Sandbox.
	prospero(t, ns, "done", map[string]any{"type": builders.ConditionAgentsSettled, "status": "True", "reason": builders.SettledSucceeded})
	framework.WaitForPhase(t, cluster.Caliban, ns, "done", calibanv1alpha1.TaskCompleted, builders.ReasonCompleted, startTimeout)
	waitForNoPodNamed(t, ns, sandbox["done"])
	getClaim(t, ns, "done")
	if mode, _, _ := unstructured.NestedString(getSandbox(t, ns, sandbox["done"]).Object, "spec", "operatingMode"); mode != "Suspended" {
		t.Errorf("the finished task's Sandbox is in mode %q, want Suspended", mode)
	}

	// The deadline, set on the running task, has passed already.
	framework.UpdateTask(t, cluster.Caliban, ns, "late", func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{ActiveDeadlineSeconds: new(int32(1))}
	})
	framework.WaitForPhase(t, cluster.Caliban, ns, "late", calibanv1alpha1.TaskFailed, builders.ReasonDeadlineExceeded, startTimeout)
	waitForNoPodNamed(t, ns, sandbox["late"])

	// ttlSecondsAfterFinished: the task goes, and the claim and its
	// Sandbox with it.
	prospero(t, ns, "brief", map[string]any{"type": builders.ConditionAgentsSettled, "status": "True", "reason": builders.SettledSucceeded})
	gone(t, "task brief", func() error {
		_, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "brief", metav1.GetOptions{})
		return err
	})
	gone(t, "brief's claim", func() error {
		_, err := cluster.Caliban.ExtensionsV1beta1().SandboxClaims(ns).Get(ctx, builders.ClaimName("brief"), metav1.GetOptions{})
		return err
	})
	gone(t, "brief's Sandbox", func() error {
		_, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Get(ctx, sandbox["brief"], metav1.GetOptions{})
		return err
	})

	// Drain before delete: the pod stays while prospero drains.
	if err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Delete(ctx, "drained", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitForPhase(t, cluster.Caliban, ns, "drained", calibanv1alpha1.TaskDraining, builders.ReasonDraining, startTimeout)
	if p, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, sandbox["drained"], metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("a Draining warm task's pod went before prospero answered (%v)", err)
	}
	prospero(t, ns, "drained", map[string]any{"type": builders.ConditionAgentsDrained, "status": "True",
		"reason": builders.DrainedCheckpointed, "message": "ckpt-1"})
	gone(t, "drained's claim", func() error {
		_, err := cluster.Caliban.ExtensionsV1beta1().SandboxClaims(ns).Get(ctx, builders.ClaimName("drained"), metav1.GetOptions{})
		return err
	})
	gone(t, "drained's pod", func() error {
		_, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, sandbox["drained"], metav1.GetOptions{})
		return err
	})

	if refused := op.refusedWrites(t, ns); len(refused) > 0 {
		t.Errorf("the apiserver refused writes of the operator: %v", refused)
	}
}

// A SandboxWarmPool of the name a Workspace's pool gets, made by someone
// else, is left exactly as it is: the Workspace keeps no pool, says
// ChildNameTaken in WarmPoolReady naming the holder, and its tasks start
// cold. The operator used to apply over it, taking it.
func TestAWarmPoolNameSomeoneElseHoldsIsLeftAlone(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	startOperator(t, "warm-taken", ns)
	namespaceWithWorkspace(t, ns)
	zero := int32(0)
	held, err := cluster.Caliban.ExtensionsV1beta1().SandboxWarmPools(ns).Create(ctx, &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: builders.WarmPoolName("ws")},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: &zero, TemplateRef: extv1beta1.SandboxTemplateRef{Name: "admins-template"}},
	}, metav1.CreateOptions{FieldManager: framework.FieldManager})
	if err != nil {
		t.Fatal(err)
	}
	setWarmPool(t, ns, "ws", 1)
	framework.Eventually(t, time.Minute, func() error {
		ws, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, "ws", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(ws.Status.Conditions, builders.ConditionWarmPoolReady)
		if cond == nil || cond.Reason != builders.ReasonChildNameTaken || !strings.Contains(cond.Message, "SandboxWarmPool '"+held.Name+"'") {
			return fmt.Errorf("WarmPoolReady %+v, want %s naming the pool", cond, builders.ReasonChildNameTaken)
		}
		return nil
	})
	time.Sleep(3 * time.Second)
	got, err := cluster.Caliban.ExtensionsV1beta1().SandboxWarmPools(ns).Get(ctx, held.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// agent-sandbox may write its status; nobody else may write the rest.
	if len(got.OwnerReferences) != 0 || got.Spec.TemplateRef.Name != "admins-template" || got.Spec.Replicas == nil || *got.Spec.Replicas != 0 || len(got.Labels) != 0 {
		t.Errorf("the held pool was written: owners %+v, spec %+v", got.OwnerReferences, got.Spec)
	}
	createTask(t, ns, "cold-one")
	task := framework.WaitForPhase(t, cluster.Caliban, ns, "cold-one", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	if l := task.Status.Launch; l == nil || l.Type != calibanv1alpha1.LaunchCold {
		t.Errorf("launch %+v, want Cold", l)
	}
}
