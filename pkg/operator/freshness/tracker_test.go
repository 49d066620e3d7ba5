// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package freshness

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// pinnedTask is a task as the task cache holds it once pinned.
func pinnedTask(mods ...func(*calibanv1alpha1.CalibanTask)) *calibanv1alpha1.CalibanTask {
	t := &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-bug", Namespace: "team", UID: "u1", Generation: 1, ResourceVersion: "1"},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "fix it", PermissionPosture: calibanv1alpha1.PostureSupervised},
		},
		Status: calibanv1alpha1.CalibanTaskStatus{ResolvedWorkspace: &calibanv1alpha1.ResolvedWorkspace{
			Env: []calibanv1alpha1.EnvVar{{Name: "MODE", Value: "fast"}},
		}},
	}
	for _, m := range mods {
		m(t)
	}
	return t
}

// trackerOf is a Tracker under the default settings whose every child is
// controlled by task (none when task is nil).
func trackerOf(t *testing.T, task *calibanv1alpha1.CalibanTask) *Tracker {
	t.Helper()
	tr, err := New(config.DefaultAgentSettings(), func(metav1.Object) *calibanv1alpha1.CalibanTask { return task })
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// served decodes into obj the child pick chooses of what task wants, as
// the server holds it after its apply and a watch decodes it: without its
// type meta.
func served(t *testing.T, tr *Tracker, task *calibanv1alpha1.CalibanTask, pick func(*builders.Children) any, obj interface{ GetObjectKind() schema.ObjectKind }) {
	t.Helper()
	w, err := tr.Want(task, task.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	d, err := w.Render()
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(pick(d))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, obj); err != nil {
		t.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
}

// servedServiceAccount is the ServiceAccount the server holds after the
// apply of what task wants.
func servedServiceAccount(t *testing.T, tr *Tracker, task *calibanv1alpha1.CalibanTask) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{}
	served(t, tr, task, func(d *builders.Children) any { return d.ServiceAccount }, sa)
	return sa
}

func TestWantRendersOncePerTaskVersion(t *testing.T) {
	pinned := pinnedTask()
	tr := trackerOf(t, pinned)
	first, err := tr.Want(pinned, pinned.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Rendered() {
		t.Fatal("nothing was known, yet the first Want did not render")
	}
	// Same resourceVersion: the memo answers, whatever the object says
	// (a real task cannot change without a new resourceVersion).
	same := pinned.DeepCopy()
	same.Labels = map[string]string{"changed": "yes"}
	again, err := tr.Want(same, same.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	if again.Rendered() || again.Hashes != first.Hashes {
		t.Errorf("the same task version rendered again: %+v, then %+v", first.Hashes, again.Hashes)
	}
	// A new version is rendered anew.
	edited := same.DeepCopy()
	edited.ResourceVersion = "2"
	edited.Status.ResolvedWorkspace.Env[0].Value = "slow"
	next, err := tr.Want(edited, edited.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Rendered() || next.Sandbox == first.Sandbox || next.ResourceVersion != "2" {
		t.Errorf("a new task version kept the old hashes: %+v", next.Hashes)
	}
	// Another pin than the task's own (the one about to be written) is
	// never memoized.
	if _, err := tr.Want(edited, &calibanv1alpha1.ResolvedWorkspace{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := tr.memo.get(versionOf(edited)); got != next.Hashes {
		t.Errorf("a foreign pin replaced the memo: %+v", got)
	}
}

func TestAChildIsCheckedAgainstWhatItsTaskWants(t *testing.T) {
	task := pinnedTask()
	sa := servedServiceAccount(t, trackerOf(t, task), task)
	tests := map[string]struct {
		owner *calibanv1alpha1.CalibanTask
		child func(*corev1.ServiceAccount)
		holds bool
	}{
		"the child as applied holds": {owner: task, holds: true},
		"a child someone changed does not": {
			owner: task, child: func(sa *corev1.ServiceAccount) { sa.AutomountServiceAccountToken = new(true) },
		},
		"a child of an earlier rendering does not": {
			owner: task, child: func(sa *corev1.ServiceAccount) { sa.Annotations[builders.AnnotationAppliedHash] = "older" },
		},
		"a child of no known task vouches for nothing": {},
		"a child of a task not pinned yet vouches for nothing": {
			owner: pinnedTask(func(t *calibanv1alpha1.CalibanTask) { t.Status.ResolvedWorkspace = nil }),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			child := sa.DeepCopy()
			if tc.child != nil {
				tc.child(child)
			}
			v, err := trackerOf(t, tc.owner).Transform(child)
			if err != nil {
				t.Fatal(err)
			}
			view := v.(*View)
			if got := view.Holds != ""; got != tc.holds {
				t.Errorf("holds = %v (%q), want %v", got, view.Holds, tc.holds)
			}
			if view.Annotations != nil || view.Name != sa.Name || view.Namespace != sa.Namespace {
				t.Errorf("the view keeps %+v, want identity without annotations", view.ObjectMeta)
			}
		})
	}
}

// A restart checks no child before the task cache has synced: a child
// checked against a task not listed yet would be found wanting and applied
// again.
func TestAChildIsCheckedOnlyOnceTheGateOpens(t *testing.T) {
	task := pinnedTask()
	tr := trackerOf(t, task)
	sa := servedServiceAccount(t, tr, task)
	gate := make(chan struct{})
	tr.CheckAfter(gate)
	viewed := make(chan *View, 1)
	go func() {
		v, _ := tr.Transform(sa)
		viewed <- v.(*View)
	}()
	select {
	case <-viewed:
		t.Fatal("the child was checked before the gate opened")
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	if v := <-viewed; v.Holds == "" {
		t.Error("once the gate opened, the child was found wanting")
	}
}

func TestTheOperatorsOwnWriteKeepsTheChildHashes(t *testing.T) {
	written := func(mods ...func(*calibanv1alpha1.CalibanTask)) *calibanv1alpha1.CalibanTask {
		return pinnedTask(append([]func(*calibanv1alpha1.CalibanTask){func(t *calibanv1alpha1.CalibanTask) {
			t.ResourceVersion = "2"
			t.Status.Phase = calibanv1alpha1.TaskRunning
		}}, mods...)...)
	}
	tests := map[string]struct {
		from, to *calibanv1alpha1.CalibanTask
		carried  bool
	}{
		"a status write under the same spec and pin keeps them": {
			from: pinnedTask(), to: written(), carried: true,
		},
		"a new generation (the spec changed) drops them": {
			from: pinnedTask(), to: written(func(t *calibanv1alpha1.CalibanTask) { t.Generation = 2 }),
		},
		"another pin drops them": {
			from: pinnedTask(), to: written(func(t *calibanv1alpha1.CalibanTask) { t.Status.ResolvedWorkspace.Env[0].Value = "slow" }),
		},
		"a task that was not pinned has nothing to keep": {
			from: pinnedTask(func(t *calibanv1alpha1.CalibanTask) { t.Status.ResolvedWorkspace = nil }), to: written(),
		},
		"another task with the name drops them": {
			from: pinnedTask(), to: written(func(t *calibanv1alpha1.CalibanTask) { t.UID = "u2" }),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := &Tracker{}
			known := builders.ChildHashes{ServiceAccount: "sa", NetworkPolicy: "np", Sandbox: "sb"}
			tr.memo.recordAll(versionOf(tc.from), known)
			tr.Carry(tc.from, tc.to)
			got, ok := tr.memo.get(versionOf(tc.to))
			if ok != tc.carried {
				t.Fatalf("known for the written version = %v (%+v), want %v", ok, got, tc.carried)
			}
			if ok && (got.ServiceAccount != known.ServiceAccount || got.NetworkPolicy != known.NetworkPolicy || got.Sandbox != known.Sandbox) {
				t.Errorf("carried %+v, want %+v", got, known)
			}
		})
	}
}

func TestPlanSaysWhatASyncWrites(t *testing.T) {
	task := pinnedTask()
	tr := trackerOf(t, task)
	w, err := tr.Want(task, task.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	fp := tr.renderer.Fingerprint
	running, suspended := sandboxv1beta1.OperatingModeRunning, sandboxv1beta1.OperatingModeSuspended
	sandbox := func(holds, renderedBy string, mode sandboxv1beta1.OperatingMode) *View {
		return &View{Holds: holds, RenderedBy: renderedBy, Sandbox: &builders.ObservedSandbox{Mode: mode}}
	}
	tests := map[string]struct {
		kind Kind
		view *View
		mode sandboxv1beta1.OperatingMode
		want Plan
	}{
		"a missing child is applied":                {kind: ServiceAccount, want: Apply},
		"a child that holds what is wanted is kept": {kind: NetworkPolicy, view: &View{Holds: w.NetworkPolicy, RenderedBy: fp}, want: Keep},
		"a child of this rendering that does not hold it is applied": {
			kind: Sandbox, view: sandbox("", fp, running), mode: running, want: Apply,
		},
		"a Sandbox that holds it in another mode gets its mode only": {
			kind: Sandbox, view: sandbox(w.Sandbox, fp, running), mode: suspended, want: ModeOnly,
		},
		"a Sandbox that holds it in the mode wanted is kept": {
			kind: Sandbox, view: sandbox(w.Sandbox, fp, suspended), mode: suspended, want: Keep,
		},
		"a Sandbox of another rendering is kept":                {kind: Sandbox, view: sandbox("", "other", running), mode: running, want: Keep},
		"a Sandbox of another rendering gets its mode only":     {kind: Sandbox, view: sandbox("", "other", running), mode: suspended, want: ModeOnly},
		"a Sandbox of a release before the fingerprint is kept": {kind: Sandbox, view: sandbox("", "", running), mode: running, want: Keep},
		"a ServiceAccount carries no fingerprint and is never kept": {
			kind: ServiceAccount, view: &View{}, want: Apply,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := w.Plan(tc.kind, tc.view, tc.mode); got != tc.want {
				t.Errorf("Plan = %v, want %v", got, tc.want)
			}
		})
	}
}

// servedSandbox is the Sandbox the server holds after the apply of what
// task wants, at generation 1.
func servedSandbox(t *testing.T, tr *Tracker, task *calibanv1alpha1.CalibanTask) *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{}
	served(t, tr, task, func(d *builders.Children) any { return d.Sandbox }, sb)
	sb.UID, sb.Generation, sb.ResourceVersion = "sb1", 1, "10"
	return sb
}

// Most events of a Sandbox are agent-sandbox writing its status. The
// verdict of the view cached before stands for them; anything a check
// reads that changed has the event checked again.
func TestAnEventThatChangedNothingCheckedKeepsTheVerdict(t *testing.T) {
	task := pinnedTask()
	served := servedSandbox(t, trackerOf(t, task), task)
	tests := map[string]struct {
		// cached is the Sandbox the cache's view was made from.
		cached func(*sandboxv1beta1.Sandbox)
		// event is the Sandbox of the next event.
		event func(*sandboxv1beta1.Sandbox)
		holds bool
	}{
		"its status written keeps it": {
			event: func(sb *sandboxv1beta1.Sandbox) { sb.Status.ServiceFQDN = "fix-bug.team.svc" },
			holds: true,
		},
		// The server counts every change of spec in the generation: an
		// event at the same generation is not compared again, so this
		// change, which no server would make, goes unseen.
		"a spec at the same generation is not compared again": {
			event: func(sb *sandboxv1beta1.Sandbox) { sb.Spec.PodTemplate.Spec.Containers[0].Image = "other" },
			holds: true,
		},
		"a spec at a new generation is": {
			event: func(sb *sandboxv1beta1.Sandbox) {
				sb.Generation = 2
				sb.Spec.PodTemplate.Spec.Containers[0].Image = "other"
			},
		},
		"a label changed is": {
			event: func(sb *sandboxv1beta1.Sandbox) { sb.Labels[builders.LabelManagedBy] = "someone" },
		},
		"an annotation changed is": {
			event: func(sb *sandboxv1beta1.Sandbox) { sb.Annotations[builders.AnnotationAppliedHash] = "older" },
		},
		"an owner changed is": {
			event: func(sb *sandboxv1beta1.Sandbox) { sb.OwnerReferences[0].Controller = new(false) },
		},
		"another Sandbox with the name is": {
			event: func(sb *sandboxv1beta1.Sandbox) {
				sb.UID = "sb2"
				sb.Spec.PodTemplate.Spec.Containers[0].Image = "other"
			},
		},
		"a view that held nothing is": {
			cached: func(sb *sandboxv1beta1.Sandbox) { sb.Spec.PodTemplate.Spec.Containers[0].Image = "other" },
			holds:  true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := trackerOf(t, task)
			tr.stores[Sandbox] = cache.NewStore(cache.MetaNamespaceKeyFunc)
			cached, event := served.DeepCopy(), served.DeepCopy()
			if tc.cached != nil {
				tc.cached(cached)
			}
			if tc.event != nil {
				tc.event(event)
			}
			before, err := tr.Transform(cached)
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.stores[Sandbox].Add(before); err != nil {
				t.Fatal(err)
			}
			if held := before.(*View).Holds != ""; held != (tc.cached == nil) {
				t.Fatalf("the cached view holds = %v, want %v", held, tc.cached == nil)
			}
			after, err := tr.Transform(event)
			if err != nil {
				t.Fatal(err)
			}
			if got := after.(*View).Holds != ""; got != tc.holds {
				t.Errorf("holds = %v, want %v", got, tc.holds)
			}
		})
	}
}

func TestMetaSumCountsEveryEntryInAnyOrder(t *testing.T) {
	object := func(labels, annotations map[string]string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Labels: labels, Annotations: annotations}
	}
	base := metaSum(object(map[string]string{"a": "1", "b": "2"}, map[string]string{"c": "3"}))
	tests := map[string]struct {
		object *metav1.ObjectMeta
		same   bool
	}{
		"the same entries": {object: object(map[string]string{"b": "2", "a": "1"}, map[string]string{"c": "3"}), same: true},
		"a value changed":  {object: object(map[string]string{"a": "1", "b": "9"}, map[string]string{"c": "3"})},
		"an entry gone":    {object: object(map[string]string{"a": "1"}, map[string]string{"c": "3"})},
		"a label moved to the annotations": {
			object: object(map[string]string{"a": "1"}, map[string]string{"b": "2", "c": "3"}),
		},
		"a key and value split elsewhere": {object: object(map[string]string{"a": "1", "b2": ""}, map[string]string{"c": "3"})},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := metaSum(tc.object) == base; got != tc.same {
				t.Errorf("same sum = %v, want %v", got, tc.same)
			}
		})
	}
}
