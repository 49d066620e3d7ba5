// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package freshness

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	sandboxac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/sandbox/v1beta1"
)

// Kind is a kind of child of a task.
type Kind int

// The three kinds of children.
const (
	ServiceAccount Kind = iota
	NetworkPolicy
	Sandbox
)

func (k Kind) String() string {
	return [...]string{"ServiceAccount", "NetworkPolicy", "Sandbox"}[k]
}

// keepsRendering reports that a child of this kind rendered under other
// settings or by another version is kept as it is (ADR 0015): its ports,
// uid and claims are what the task's pod relies on. A ServiceAccount
// renders the same under any settings and carries no fingerprint.
func (k Kind) keepsRendering() bool { return k != ServiceAccount }

// Tracker keeps the children's caches as views and answers whether a child
// holds what its task wants. One per leadership term, like the caches.
type Tracker struct {
	// renderer renders what a task wants, stamped with the fingerprint of
	// the settings (builders.RenderingFingerprint).
	renderer builders.Renderer
	// owner is the pinned or unpinned task that controls a child, from the
	// task cache with the operator's own recent writes on top, or nil.
	owner  func(child metav1.Object) *calibanv1alpha1.CalibanTask
	memo   memo
	stores [3]cache.Store
	// gate, when set, holds the transform back until it is closed
	// (CheckAfter).
	gate <-chan struct{}
}

// New is a Tracker rendering under settings; owner finds the task that
// controls a child (nil for none).
func New(settings config.AgentSettings, owner func(child metav1.Object) *calibanv1alpha1.CalibanTask) (*Tracker, error) {
	renderer, err := builders.NewRenderer(settings)
	if err != nil {
		return nil, err
	}
	return &Tracker{renderer: renderer, owner: owner}, nil
}

// Track makes inf, the informer of one kind of child, keep views: the
// check runs once per change of the child, in the informer's transform.
// Call it before the informer starts.
func (t *Tracker) Track(kind Kind, inf cache.SharedIndexInformer) error {
	if err := inf.SetTransform(t.Transform); err != nil {
		return fmt.Errorf("setting the %s transform: %w", kind, err)
	}
	t.stores[kind] = inf.GetStore()
	return nil
}

// CheckAfter makes the transform wait until gate is closed: the task cache
// must have synced before a child is checked against its task, or every
// child would be found wanting and applied again at start-up. Call it
// before the child informers start.
func (t *Tracker) CheckAfter(gate <-chan struct{}) { t.gate = gate }

// View is a child's view from its cache, or nil. It reads the store and
// nothing else, so it is safe under a lock.
func (t *Tracker) View(kind Kind, namespace, name string) *View {
	store := t.stores[kind]
	if store == nil {
		return nil
	}
	obj, exists, err := store.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	v, _ := obj.(*View)
	return v
}

// Plan is what a sync has to do for one child.
type Plan int

const (
	// Keep: the child is there and holds what the task wants, or is kept
	// as it is (ADR 0015), and is in the mode wanted.
	Keep Plan = iota
	// Apply: the child is missing, or does not hold what the task wants.
	Apply
	// ModeOnly: a Sandbox that holds what the task wants, or is kept,
	// but is in another operatingMode, or is kept and its pod template
	// lacks the task-UID label (ByName), which the apply adds
	// (builders.Renderer.SandboxOver).
	ModeOnly
	// Reselect: a kept NetworkPolicy that selects its pod by the task's
	// name: to be moved to the task's UID once the pod carries it
	// (builders.ReselectedNetworkPolicy).
	Reselect
)

// Want is what one sync wants of a task's children: their hashes, from the
// memo when the task has not changed since they were taken, and the
// children themselves, rendered only when something has to be applied.
type Want struct {
	Hashes
	tracker  *Tracker
	task     *calibanv1alpha1.CalibanTask
	pin      *calibanv1alpha1.ResolvedWorkspace
	rendered *builders.Children
}

// Want is what task wants under pin (its own pin, or the one about to be
// written).
func (t *Tracker) Want(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace) (*Want, error) {
	w := &Want{tracker: t, task: task, pin: pin}
	// The memo is keyed by the task alone: it serves only the task's own pin.
	memoized, v := pin == task.Status.ResolvedWorkspace, version{task.UID, task.ResourceVersion}
	if memoized {
		if h, ok := t.memo.get(v); ok {
			w.Hashes = h
			return w, nil
		}
	}
	d, err := t.renderer.Children(task, pin)
	if err != nil {
		return nil, err
	}
	if memoized {
		t.memo.recordAll(v, d.Hashes)
	}
	w.Hashes, w.rendered = Hashes{ResourceVersion: task.ResourceVersion, ChildHashes: d.Hashes}, d
	return w, nil
}

// Plan answers, for the child of kind as its cache keeps it (v, nil when
// there is none), whether it is what the sync would write: a Sandbox in
// mode, the others in none ("").
func (w *Want) Plan(kind Kind, v *View, mode sandboxv1beta1.OperatingMode) Plan {
	switch {
	case v == nil:
		return Apply
	case v.Holds != w.of(kind) && !w.tracker.kept(kind, v):
		return Apply
	case v.Sandbox != nil && mode != "" && v.Sandbox.Mode != mode:
		return ModeOnly
	case v.ByName && w.tracker.kept(kind, v) && kind == Sandbox:
		return ModeOnly
	case v.ByName && w.tracker.kept(kind, v) && kind == NetworkPolicy:
		return Reselect
	}
	return Keep
}

// Kept reports that a child was rendered under other settings or by
// another operator version, so it is kept as it is (ADR 0015).
func (w *Want) Kept(kind Kind, v *View) bool { return v != nil && w.tracker.kept(kind, v) }

func (t *Tracker) kept(kind Kind, v *View) bool {
	return kind.keepsRendering() && v.RenderedBy != t.renderer.Fingerprint
}

// Render is the desired children, rendered once per Want.
func (w *Want) Render() (*builders.Children, error) {
	if w.rendered == nil {
		d, err := w.tracker.renderer.Children(w.task, w.pin)
		if err != nil {
			return nil, err
		}
		w.rendered = d
	}
	return w.rendered, nil
}

// Rendered reports whether the Want had to render its children: the memo
// did not know their hashes. The task sync's span says so.
func (w *Want) Rendered() bool { return w.rendered != nil }

// SandboxOver is the Sandbox to apply over live in mode
// (builders.Renderer.SandboxOver).
func (w *Want) SandboxOver(live *sandboxv1beta1.Sandbox, mode sandboxv1beta1.OperatingMode) (*sandboxac.SandboxApplyConfiguration, error) {
	d, err := w.Render()
	if err != nil {
		return nil, err
	}
	return w.tracker.renderer.SandboxOver(w.task, w.pin, live, d.Sandbox, mode)
}

// Carry keeps the hashes known for from for to, a later version of the
// same task that the operator's own write made: a status or finalizer
// write changes neither the spec (the generation stands) nor, once the
// task is pinned, the pin, which with the launch (a warm task's claim) are
// all the children are rendered from. Without it every such write would
// have the next sync, and every child event after it, render and hash the
// children again.
func (t *Tracker) Carry(from, to *calibanv1alpha1.CalibanTask) {
	if from.Generation != to.Generation || from.Status.ResolvedWorkspace == nil ||
		!apiequality.Semantic.DeepEqual(from.Status.ResolvedWorkspace, to.Status.ResolvedWorkspace) ||
		!apiequality.Semantic.DeepEqual(from.Status.Launch, to.Status.Launch) {
		return
	}
	t.memo.move(version{from.UID, from.ResourceVersion}, version{to.UID, to.ResourceVersion})
}

// Recheck takes the verdict on obj, a child of kind as read from the
// apiserver, again against its task as the task cache holds it now, and
// keeps it when the cache still has that very version of the child. A
// verdict is taken when the child's event arrives; one taken against a
// status someone else wrote (a flipped launch) and put back since would
// otherwise stand until the child's next event, and every sync would
// apply the child again, changing nothing, so making no event.
func (t *Tracker) Recheck(kind Kind, obj metav1.Object) error {
	cur := t.View(kind, obj.GetNamespace(), obj.GetName())
	if cur == nil || cur.UID != obj.GetUID() || cur.ResourceVersion != obj.GetResourceVersion() {
		// The cache has another version: its event brought a verdict of its own.
		return nil
	}
	v, err := t.Transform(obj)
	if err != nil {
		return err
	}
	return t.stores[kind].Update(v)
}

// Forget drops what is known of a deleted task.
func (t *Tracker) Forget(task *calibanv1alpha1.CalibanTask) { t.memo.forget(task.UID) }

// Transform is the transform of the three child informers: it checks the
// full object against what its task wants now and keeps the view. It
// waits for the gate set by CheckAfter, if any.
func (t *Tracker) Transform(obj any) (any, error) {
	if t.gate != nil {
		<-t.gate
	}
	switch o := obj.(type) {
	case *View:
		return o, nil
	case *corev1.ServiceAccount:
		v := &View{ObjectMeta: compactMeta(o), Applied: appliedOfNonTask(o)}
		if task := t.pinnedOwner(o); task != nil {
			if want, hash, err := t.renderer.ServiceAccount(task, t.memo.partial(versionOf(task)).ServiceAccount); err == nil {
				t.memo.record(versionOf(task), ServiceAccount, hash)
				if want != nil && upToDate(o, want, hash) {
					v.Holds = hash
				}
			}
		}
		return v, nil
	case *networkingv1.NetworkPolicy:
		v := &View{ObjectMeta: compactMeta(o), RenderedBy: t.renderedBy(o), Applied: appliedOfNonTask(o), ByName: builders.SelectsPodByName(o), meta: metaSum(o)}
		if task := t.pinnedOwner(o); task != nil {
			v.Holds = t.verdict(NetworkPolicy, task, o, v, func(known string) (any, string, error) {
				want, hash, err := t.renderer.NetworkPolicy(task, task.Status.ResolvedWorkspace, known)
				if want == nil { // a typed nil is not a nil any
					return nil, hash, err
				}
				return want, hash, err
			})
		}
		return v, nil
	case *sandboxv1beta1.Sandbox:
		// A copy: a pointer into o would keep all of o, pod template and
		// all, alive for as long as the view.
		v := &View{ObjectMeta: compactMeta(o), RenderedBy: t.renderedBy(o), Sandbox: builders.ObserveSandbox(o), ByName: builders.LabelsPodByName(o), meta: metaSum(o)}
		if task := t.pinnedOwner(o); task != nil {
			v.Holds = t.verdict(Sandbox, task, o, v, func(known string) (any, string, error) {
				want, hash, err := t.renderer.Sandbox(task, task.Status.ResolvedWorkspace, known)
				if err != nil || want == nil {
					return nil, hash, err
				}
				// The comparison skips the apply configuration's kind, which
				// a watch does not decode; the mode is compared on its own
				// (see View.Sandbox). want is this call's own rendering.
				want.Spec.OperatingMode = nil
				return want, hash, nil
			})
		}
		return v, nil
	}
	return obj, nil
}

// verdict is the Holds of o, a NetworkPolicy or Sandbox of task whose new
// view is v. Most events of a Sandbox are agent-sandbox writing its status:
// when o changed nothing the check reads since the view cached before it
// (unchanged), and its task still wants what that view was found to hold,
// the verdict stands without rendering or comparing anything. Otherwise o
// is checked against what render (given the hash already known for the
// task's version, "" for none) returns.
func (t *Tracker) verdict(kind Kind, task *calibanv1alpha1.CalibanTask, o metav1.Object, v *View, render func(known string) (want any, hash string, err error)) string {
	ver := versionOf(task)
	known := t.memo.partial(ver).of(kind)
	if known != "" && t.unchanged(kind, v, known) {
		return known
	}
	want, hash, err := render(known)
	if err != nil {
		return ""
	}
	t.memo.record(ver, kind, hash)
	if want != nil && upToDate(o, want, hash) {
		return hash
	}
	return ""
}

// unchanged reports that the view cached for v's object held the hash and
// was of the same object at the same generation, with the same labels,
// annotations and owners: all a check of a NetworkPolicy or Sandbox reads,
// since what the operator applies of them is metadata and spec, and the
// server counts every change of spec in the generation. The cache may lag
// the event; an older view of the same generation still has the same spec.
func (t *Tracker) unchanged(kind Kind, v *View, hash string) bool {
	prev := t.View(kind, v.Namespace, v.Name)
	return prev != nil && prev.Holds == hash && prev.UID == v.UID &&
		v.Generation != 0 && prev.Generation == v.Generation && prev.meta == v.meta
}

// appliedOfNonTask is the applied-hash annotation of an object no task
// controls (a warm pool's), which its own controller compares; "" for a
// task's child, whose verdict is Holds.
func appliedOfNonTask(o metav1.Object) string {
	if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == "CalibanTask" {
		return ""
	}
	return o.GetAnnotations()[builders.AnnotationAppliedHash]
}

// pinnedOwner is the pinned task that controls a child, or nil.
func (t *Tracker) pinnedOwner(child metav1.Object) *calibanv1alpha1.CalibanTask {
	if task := t.owner(child); task != nil && task.Status.ResolvedWorkspace != nil {
		return task
	}
	return nil
}

// renderedBy is the child's rendered-by annotation, sharing the
// fingerprint's string when it is the same: every child of a fleet carries
// the same few values, and the caches keep one copy of each.
func (t *Tracker) renderedBy(obj metav1.Object) string {
	v := obj.GetAnnotations()[builders.AnnotationRenderedBy]
	if v == t.renderer.Fingerprint {
		return t.renderer.Fingerprint
	}
	return v
}

// upToDate reports whether a cached child carries the desired one (an
// object of its type or its apply configuration): the same applied hash,
// and every value desired sets. Fields others set (agent-sandbox's status,
// another manager's annotation) do not matter.
func upToDate(live metav1.Object, desired any, hash string) bool {
	return live.GetAnnotations()[builders.AnnotationAppliedHash] == hash && holds(live, desired)
}
