// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// statusApplies decodes the status applies the caliban fake saw.
func statusApplies(t *testing.T, actions []core.Action) []calibanv1alpha1.CalibanTaskStatus {
	t.Helper()
	var out []calibanv1alpha1.CalibanTaskStatus
	for _, a := range actions {
		p, ok := a.(core.PatchAction)
		if !ok || a.GetSubresource() != "status" || a.GetResource().Resource != "calibantasks" {
			continue
		}
		if p.GetPatchType() != types.ApplyPatchType {
			t.Errorf("status written with %s, want server-side apply", p.GetPatchType())
		}
		var body struct {
			Status calibanv1alpha1.CalibanTaskStatus `json:"status"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		out = append(out, body.Status)
	}
	return out
}

func TestSyncTaskAdmissionOutcomes(t *testing.T) {
	tests := map[string]struct {
		// inputs
		task    *calibanv1alpha1.CalibanTask
		objects []any
		// expected
		after      time.Duration
		phase      calibanv1alpha1.TaskPhase // of the last status write; "" = no status write
		reason     string
		statuses   int // status writes when phase is set; 0 means 1
		events     []string
		sandboxes  int
		apiMissing bool // agent-sandbox's API is not served
	}{
		"a task whose workspace is missing fails and waits 30s": {
			task: task(), after: 30 * time.Second, phase: calibanv1alpha1.TaskFailed, reason: builders.ReasonWorkspaceUnresolved,
			events: []string{builders.ReasonWorkspaceUnresolved},
		},
		"a task whose workspace is Pending is marked Pending once and waits 10s": {
			task:    task(),
			objects: []any{workspace(func(ws *calibanv1alpha1.Workspace) { ws.Status = calibanv1alpha1.WorkspaceStatus{} })},
			after:   10 * time.Second, phase: calibanv1alpha1.TaskPending,
		},
		"a task that already has a status writes nothing while its workspace is Pending": {
			task: task(func(t *calibanv1alpha1.CalibanTask) {
				t.Status.Phase = calibanv1alpha1.TaskFailed
			}),
			objects: []any{workspace(func(ws *calibanv1alpha1.Workspace) { ws.Status = calibanv1alpha1.WorkspaceStatus{} })},
			after:   10 * time.Second,
		},
		"an unattended task without permission fails before anything is applied": {
			task: task(func(t *calibanv1alpha1.CalibanTask) {
				t.Spec.Task.PermissionPosture = calibanv1alpha1.PostureUnattended
			}),
			objects: []any{workspace()},
			after:   30 * time.Second, phase: calibanv1alpha1.TaskFailed, reason: builders.ReasonPostureNotPermitted,
			events: []string{builders.ReasonPostureNotPermitted},
		},
		"an admitted task is pinned, applies its children and is Provisioning, in one status write": {
			task: task(), objects: []any{workspace()},
			phase: calibanv1alpha1.TaskProvisioning, reason: builders.ReasonSandboxNotReady, sandboxes: 1,
		},
		"without agent-sandbox's API an admitted task is pinned in one write and waits in Provisioning": {
			task: task(), objects: []any{workspace()}, apiMissing: true,
			phase: calibanv1alpha1.TaskProvisioning, reason: builders.ReasonSandboxAPIUnavailable,
			events: []string{EventSandboxAPIUnavailable},
		},
		"an unattended admission is announced even when the state check fails": {
			task: task(func(t *calibanv1alpha1.CalibanTask) {
				t.Spec.Task.PermissionPosture = calibanv1alpha1.PostureUnattended
				t.Spec.State = &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080", TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "tok", Key: "k"}}
			}),
			objects: []any{workspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true}
			})},
			after: 30 * time.Second, phase: calibanv1alpha1.TaskFailed, reason: builders.ReasonInvalidState,
			events: []string{EventUnattendedAdmitted, builders.ReasonInvalidState},
		},
		"an unattended admission is announced": {
			task: task(func(t *calibanv1alpha1.CalibanTask) {
				t.Spec.Task.PermissionPosture = calibanv1alpha1.PostureUnattended
			}),
			objects: []any{workspace(func(ws *calibanv1alpha1.Workspace) {
				ws.Spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true}
			})},
			phase: calibanv1alpha1.TaskProvisioning, reason: builders.ReasonSandboxNotReady, sandboxes: 1,
			events: []string{EventUnattendedAdmitted},
		},
		"a pin whose env carries an agentPolicy variable fails without applying children": {
			task: task(func(t *calibanv1alpha1.CalibanTask) {
				t.Status.ResolvedWorkspace = &calibanv1alpha1.ResolvedWorkspace{
					Provider: calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"},
					Env:      []calibanv1alpha1.EnvVar{{Name: "CALIBAN_AUTO_ALLOW", Value: "true"}},
				}
			}),
			after: 30 * time.Second, phase: calibanv1alpha1.TaskFailed, reason: builders.ReasonPostureNotPermitted,
			events: []string{builders.ReasonPostureNotPermitted},
		},
		"a pin whose env carries a loader fails without applying children": {
			task: task(func(t *calibanv1alpha1.CalibanTask) {
				t.Status.ResolvedWorkspace = &calibanv1alpha1.ResolvedWorkspace{
					Provider: calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"},
					Env:      []calibanv1alpha1.EnvVar{{Name: "NODE_OPTIONS", Value: "--require /work/app/hook.js"}},
				}
			}),
			after: 30 * time.Second, phase: calibanv1alpha1.TaskFailed, reason: builders.ReasonPostureNotPermitted,
			events: []string{builders.ReasonPostureNotPermitted},
		},
		"a missing state token secret fails the pinned task without applying children": {
			task: task(func(t *calibanv1alpha1.CalibanTask) {
				t.Spec.State = &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080", TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "tok", Key: "k"}}
			}),
			objects: []any{workspace()},
			after:   30 * time.Second, phase: calibanv1alpha1.TaskFailed, reason: builders.ReasonInvalidState,
			events: []string{builders.ReasonInvalidState},
		},
		"a pin someone else wrote into the status fails the task without applying children": {
			task: task(forgedPin(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))), objects: []any{workspace()},
			after: 30 * time.Second, phase: calibanv1alpha1.TaskFailed, reason: builders.ReasonPinNotTrusted,
			events: []string{builders.ReasonPinNotTrusted},
		},
		"an unsigned pin of a task created before the key was written by an operator that did not sign, and runs": {
			task: task(forgedPin(time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC))), objects: []any{workspace()},
			phase: calibanv1alpha1.TaskProvisioning, reason: builders.ReasonSandboxNotReady, sandboxes: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(tc.task)
			for _, o := range tc.objects {
				f.seed(o.(*calibanv1alpha1.Workspace))
			}
			f.sandboxAPI.missing = tc.apiMissing
			c := f.taskController()
			after, err := c.sync(f.ctx, key(tc.task))
			if err != nil {
				t.Fatal(err)
			}
			if after != tc.after {
				t.Errorf("requeue after %s, want %s", after, tc.after)
			}
			applies := statusApplies(t, f.caliban.Actions())
			statuses := max(tc.statuses, 1)
			switch {
			case tc.phase == "" && len(applies) != 0:
				t.Errorf("wrote status %+v, want no write", applies)
			case tc.phase != "" && len(applies) != statuses:
				t.Fatalf("wrote %d statuses, want %d", len(applies), statuses)
			case tc.phase != "":
				last := applies[len(applies)-1]
				if last.Phase != tc.phase {
					t.Errorf("phase %q, want %q", last.Phase, tc.phase)
				}
				if got := readyReason(last); got != tc.reason {
					t.Errorf("Ready reason %q, want %q", got, tc.reason)
				}
			}
			if len(f.appliedSandboxes()) != tc.sandboxes {
				t.Errorf("applied %d Sandboxes, want %d", len(f.appliedSandboxes()), tc.sandboxes)
			}
			if diff := cmp.Diff(tc.events, f.events.reasons()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func readyReason(s calibanv1alpha1.CalibanTaskStatus) string {
	for _, c := range s.Conditions {
		if c.Type == builders.ConditionReady {
			return c.Reason
		}
	}
	return ""
}

// TestASteadyStateSyncWritesNothing follows a task from admission to
// Running, feeding each write back into the caches as the informers would,
// and then proves that another sync performs no write at all.
func TestASteadyStateSyncWritesNothing(t *testing.T) {
	f := newFixture(t)
	// Pass 1: admission, children, Provisioning.
	c, tk := f.provisionedTask()
	// The Stage stand-in's part: the Sandbox becomes Ready.
	sb := f.lastSandboxApply().DeepCopy()
	_ = unstructured.SetNestedField(sb.Object, "fix-bug-sbx.team.svc.cluster.local", "status", "serviceFQDN")
	_ = unstructured.SetNestedSlice(sb.Object, []any{map[string]any{
		"type": "Ready", "status": "True", "reason": "DependenciesReady", "message": "Pod is Ready", "lastTransitionTime": "2026-09-01T12:00:00Z",
	}}, "status", "conditions")
	f.cacheSandbox(sb)

	// Pass 2: Running.
	f.resetActions()
	if _, err := c.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	applies := statusApplies(t, f.caliban.Actions())
	if len(applies) != 1 || applies[0].Phase != calibanv1alpha1.TaskRunning {
		t.Fatalf("pass 2 wrote %+v, want one Running status", applies)
	}
	if applies[0].CalibandEndpoint != "fix-bug-sbx.team.svc.cluster.local:8443" {
		t.Errorf("endpoint %q", applies[0].CalibandEndpoint)
	}
	want := []recordedEvent{{corev1.EventTypeNormal, EventPhaseChanged, "Provisioning → Running"}}
	if diff := cmp.Diff(want, f.events.events, cmp.AllowUnexported(recordedEvent{})); diff != "" {
		t.Errorf("pass 2 Events (-want +got):\n%s", diff)
	}
	f.feedBack(c, tk)

	// Pass 3, and a resync later: nothing to do.
	for pass := 3; pass <= 4; pass++ {
		f.resetActions()
		f.clock.Step(5 * time.Minute)
		if _, err := c.sync(f.ctx, key(tk)); err != nil {
			t.Fatal(err)
		}
		if w := f.writes(); len(w) != 0 {
			t.Errorf("pass %d wrote: %v", pass, w)
		}
		if len(f.events.events) != 0 {
			t.Errorf("pass %d emitted events: %v", pass, f.events.events)
		}
	}
}

// feedBack puts what the fakes now hold into the informer caches.
func (f *fixture) feedBack(c *TaskController, tk *calibanv1alpha1.CalibanTask) {
	f.t.Helper()
	stored, err := f.caliban.CalibanV1alpha1().CalibanTasks(tk.Namespace).Get(f.ctx, tk.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	sa, np := f.servedChildren(tk)
	f.cache(f.kubeInformers.Core().V1().ServiceAccounts().Informer(), sa)
	f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), np)
	if c.sandboxOf(stored, c.claimOf(stored)) == nil && len(f.appliedSandboxes()) > 0 {
		f.cacheSandbox(f.lastSandboxApply().DeepCopy())
	}
}

func TestEnqueueOwner(t *testing.T) {
	tk := task()
	yes := true
	ownedBy := func(apiVersion, kind string, uid types.UID) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace("team")
		u.SetName("fix-bug-sbx")
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "fix-bug", UID: uid, Controller: &yes}})
		return u
	}
	tests := map[string]struct {
		child    any
		enqueued bool
	}{
		"a child of the task wakes the task":                       {child: ownedBy("caliban.caliban-ai.dev/v1alpha1", "CalibanTask", "task-uid"), enqueued: true},
		"a child of an earlier task with the same name is ignored": {child: ownedBy("caliban.caliban-ai.dev/v1alpha1", "CalibanTask", "old-uid")},
		"a CalibanTask of another group is ignored":                {child: ownedBy("other.example.com/v1", "CalibanTask", "task-uid")},
		"another kind of owner is ignored":                         {child: ownedBy("caliban.caliban-ai.dev/v1alpha1", "Workspace", "task-uid")},
		"a deleted child still wakes its task": {
			child:    cache.DeletedFinalStateUnknown{Key: "team/fix-bug-sbx", Obj: ownedBy("caliban.caliban-ai.dev/v1alpha1", "CalibanTask", "task-uid")},
			enqueued: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(tk)
			c := f.taskController()
			c.enqueueOwner(tc.child)
			if got := c.queue.Len() == 1; got != tc.enqueued {
				t.Errorf("enqueued = %v, want %v", got, tc.enqueued)
			}
		})
	}
}

// forgedPin is an unattended task with an unsigned pin that allows it,
// created at created: what whoever may write the status subresource could
// write on a task whose Workspace does not allow unattended work.
func forgedPin(created time.Time) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.CreationTimestamp = metav1.NewTime(created)
		t.Spec.Task.PermissionPosture = calibanv1alpha1.PostureUnattended
		t.Status.ResolvedWorkspace = &calibanv1alpha1.ResolvedWorkspace{
			Provider:    calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"},
			AgentPolicy: &calibanv1alpha1.AgentPolicy{AllowUnattended: true, AutoAllow: new(true)},
		}
		t.Status.PermissionPosture = calibanv1alpha1.PostureUnattended
	}
}

func TestAWorkspaceStatusChangeWakesOnlyItsUnpinnedTasks(t *testing.T) {
	f := newFixture(t)
	waiting := task(func(t *calibanv1alpha1.CalibanTask) { t.Name = "waiting" })
	pinned := task(func(t *calibanv1alpha1.CalibanTask) {
		t.Name = "pinned"
		t.Status.ResolvedWorkspace = &calibanv1alpha1.ResolvedWorkspace{Provider: calibanv1alpha1.Provider{Name: "p", Kind: "x"}}
	})
	elsewhere := task(func(t *calibanv1alpha1.CalibanTask) { t.Name = "elsewhere"; t.Spec.WorkspaceRef.Name = "other" })
	f.seed(waiting, pinned, elsewhere)
	c := f.taskController()
	c.enqueueTasksOfWorkspace(workspace())
	if c.queue.Len() != 1 {
		t.Fatalf("queue holds %d tasks, want 1", c.queue.Len())
	}
	got, _ := c.queue.Get()
	if got.Name != "waiting" {
		t.Errorf("woke %v, want the waiting task", got)
	}
}

// A cache that lags behind the pin this controller just wrote must not
// lead to a second admission (which could pin a Workspace edited since).
func TestAStaleCacheNeverPinsTwice(t *testing.T) {
	f := newFixture(t)
	cached := task(func(t *calibanv1alpha1.CalibanTask) { t.ResourceVersion = "41" })
	f.seed(cached, workspace(), secret("key", "api-key"))
	// The server already holds a pin the cache has not seen: version 42.
	// It answers a conditional apply on version 41 as the apiserver does.
	var sentVersion string
	f.caliban.PrependReactor("patch", "calibantasks", func(a core.Action) (bool, runtime.Object, error) {
		var body struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(a.(core.PatchAction).GetPatch(), &body); err != nil {
			return true, nil, err
		}
		sentVersion = body.Metadata.ResourceVersion
		return true, nil, apierrors.NewConflict(calibanv1alpha1.Resource("calibantasks"), cached.Name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	})
	c := f.taskController()
	f.resetActions()
	after, err := c.sync(f.ctx, key(cached))
	if err != nil || after != conflictRequeue {
		t.Fatalf("sync = %s, %v; want to look again after %s without an error", after, err, conflictRequeue)
	}
	if sentVersion != "41" {
		t.Errorf("the pin was applied on resourceVersion %q, want the cached 41", sentVersion)
	}
	if w := f.writes(); len(w) != 1 || w[0] != "patch calibantasks/status fix-bug" {
		t.Errorf("writes %v, want only the refused conditional pin", w)
	}
	if len(f.events.events) != 0 {
		t.Errorf("events %v, want none for a refused pin", f.events.events)
	}
}

// A status write the server refuses fails the sync with the server's
// reason and message, which the ReconcileError Event carries.
func TestARefusedStatusWriteSaysWhy(t *testing.T) {
	f := newFixture(t)
	tk := task()
	f.seed(tk, workspace(), secret("key", "api-key"))
	f.caliban.PrependReactor("patch", "calibantasks", func(a core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(calibanv1alpha1.Resource("calibantasks"), tk.Name, errors.New("statuses are frozen in this namespace"))
	})
	c := f.taskController()
	_, err := c.sync(f.ctx, key(tk))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "statuses are frozen in this namespace") {
		t.Errorf("sync error = %v, want the server's Forbidden and its message", err)
	}
}

func TestAChildThatNoLongerCarriesWhatWasAppliedIsAppliedAgain(t *testing.T) {
	tests := map[string]struct {
		change func(f *fixture, c *TaskController, tk *calibanv1alpha1.CalibanTask)
		want   []string
	}{
		"nothing changed": {
			change: func(*fixture, *TaskController, *calibanv1alpha1.CalibanTask) {},
		},
		"someone let the ServiceAccount mount a token": {
			change: func(f *fixture, _ *TaskController, tk *calibanv1alpha1.CalibanTask) {
				sa := f.servedServiceAccount(tk)
				sa.AutomountServiceAccountToken = new(true)
				f.cache(f.kubeInformers.Core().V1().ServiceAccounts().Informer(), sa)
			},
			want: []string{"patch serviceaccounts fix-bug-sa"},
		},
		"the ServiceAccount was applied by an operator that set something else": {
			change: func(f *fixture, _ *TaskController, tk *calibanv1alpha1.CalibanTask) {
				sa := f.servedServiceAccount(tk)
				sa.Annotations[builders.AnnotationAppliedHash] = "older"
				f.cache(f.kubeInformers.Core().V1().ServiceAccounts().Informer(), sa)
			},
			want: []string{"patch serviceaccounts fix-bug-sa"},
		},
		"someone opened the NetworkPolicy to all egress": {
			change: func(f *fixture, _ *TaskController, tk *calibanv1alpha1.CalibanTask) {
				np, err := f.kube.NetworkingV1().NetworkPolicies(tk.Namespace).Get(f.ctx, builders.NetworkPolicyName(tk.Name), metaGet)
				if err != nil {
					t.Fatal(err)
				}
				np = np.DeepCopy()
				np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
				f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), np)
			},
			want: []string{"patch networkpolicies fix-bug-netpol"},
		},
		"someone changed the caliband image in the Sandbox": {
			change: func(f *fixture, _ *TaskController, _ *calibanv1alpha1.CalibanTask) {
				sb := f.lastSandboxApply().DeepCopy()
				containers, _, _ := unstructured.NestedSlice(sb.Object, "spec", "podTemplate", "spec", "containers")
				containers[0].(map[string]any)["image"] = "evil:latest"
				_ = unstructured.SetNestedSlice(sb.Object, containers, "spec", "podTemplate", "spec", "containers")
				f.cacheSandbox(sb)
			},
			want: []string{"patch sandboxes fix-bug-sbx"},
		},
		"another controller labelled the Sandbox and set its status": {
			change: func(f *fixture, _ *TaskController, _ *calibanv1alpha1.CalibanTask) {
				sb := f.lastSandboxApply().DeepCopy()
				_ = unstructured.SetNestedField(sb.Object, "a", "metadata", "labels", "team")
				_ = unstructured.SetNestedField(sb.Object, "x=y", "status", "selector")
				f.cacheSandbox(sb)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			c, tk := f.provisionedTask()
			tc.change(f, c, tk)
			f.resetActions()
			if _, err := c.sync(f.ctx, key(tk)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, f.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

func (f *fixture) servedServiceAccount(tk *calibanv1alpha1.CalibanTask) *corev1.ServiceAccount {
	f.t.Helper()
	sa, err := f.kube.CoreV1().ServiceAccounts(tk.Namespace).Get(f.ctx, builders.ServiceAccountName(tk.Name), metaGet)
	if err != nil {
		f.t.Fatal(err)
	}
	return sa.DeepCopy()
}

// An apply the apiserver refuses (an admission policy, a quota) leaves the
// task Provisioning with the refusal in its Ready message, and the sync
// returns the error so that the queue retries it with backoff; the same
// refusal again writes nothing more.
func TestARefusedChildApplyIsInTheStatusAndRetried(t *testing.T) {
	f := newFixture(t)
	tk := task()
	f.seed(tk, workspace(), secret("key", "api-key"))
	f.kube.PrependReactor("create", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(networkingv1.Resource("networkpolicies"), "fix-bug-netpol",
			errors.New("denied by policy no-egress-changes"))
	})
	c := f.taskController()
	if _, err := c.sync(f.ctx, key(tk)); err == nil || !strings.Contains(err.Error(), "denied by policy no-egress-changes") {
		t.Fatalf("sync error %v, want the refusal, so that the queue retries", err)
	}
	applied := statusApplies(t, f.caliban.Actions())
	if len(applied) != 2 {
		t.Fatalf("%d status applies, want the pin and the problem", len(applied))
	}
	ready := meta.FindStatusCondition(applied[1].Conditions, builders.ConditionReady)
	want := `retrying: applying NetworkPolicy fix-bug-netpol: networkpolicies.networking.k8s.io "fix-bug-netpol" is forbidden: denied by policy no-egress-changes`
	if applied[1].Phase != calibanv1alpha1.TaskProvisioning || ready == nil || ready.Message != want {
		t.Errorf("status %s %+v, want Provisioning with Ready message %q", applied[1].Phase, ready, want)
	}

	// What the informers bring after those writes: the task as stored, and
	// the ServiceAccount that was applied.
	stored, err := f.caliban.CalibanV1alpha1().CalibanTasks(tk.Namespace).Get(f.ctx, tk.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	sa, err := f.kube.CoreV1().ServiceAccounts(tk.Namespace).Get(f.ctx, builders.ServiceAccountName(tk.Name), metaGet)
	if err != nil {
		t.Fatal(err)
	}
	f.cache(f.kubeInformers.Core().V1().ServiceAccounts().Informer(), sa)
	f.resetActions()
	if _, err := c.sync(f.ctx, key(tk)); err == nil {
		t.Fatal("the second sync succeeded, want the same refusal")
	}
	if w := f.writes(); len(w) != 1 || w[0] != "create networkpolicies fix-bug-netpol" {
		t.Errorf("writes %v, want only the retried NetworkPolicy create", w)
	}
}
