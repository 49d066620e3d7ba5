// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package freshness

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
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
	settings config.AgentSettings
	// fingerprint names how settings render children
	// (builders.RenderingFingerprint).
	fingerprint string
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
	fingerprint, err := builders.RenderingFingerprint(settings)
	if err != nil {
		return nil, err
	}
	return &Tracker{settings: settings, fingerprint: fingerprint, owner: owner}, nil
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

// Stale reports that a child of kind, as its cache keeps it (v, nil when
// there is none), must be applied for w: it is missing, or does not hold
// what w wants and is not kept.
func (t *Tracker) Stale(kind Kind, v *View, w *Want) bool {
	return v == nil || (v.Holds != w.of(kind) && !t.Kept(kind, v))
}

// Kept reports that a child of kind was rendered under other settings or
// by another operator version, so it is kept as it is (ADR 0015).
func (t *Tracker) Kept(kind Kind, v *View) bool {
	return kind.keepsRendering() && v.RenderedBy != t.fingerprint
}

// Carry keeps the hashes known for from for to, a later version of the same
// task that the operator's own status or finalizer write made.
func (t *Tracker) Carry(from, to *calibanv1alpha1.CalibanTask) { t.memo.carry(from, to) }

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
			if want, hash, err := desiredServiceAccount(task, t.memo.partial(task).ServiceAccount); err == nil {
				t.memo.record(task, ServiceAccount, hash)
				if want != nil && upToDate(o, want, hash) {
					v.Holds = hash
				}
			}
		}
		return v, nil
	case *networkingv1.NetworkPolicy:
		v := &View{ObjectMeta: compactMeta(o), RenderedBy: t.renderedBy(o), Applied: appliedOfNonTask(o)}
		if task := t.pinnedOwner(o); task != nil {
			if want, hash, err := t.desiredNetworkPolicy(task, task.Status.ResolvedWorkspace, t.memo.partial(task).NetworkPolicy); err == nil {
				t.memo.record(task, NetworkPolicy, hash)
				if want != nil && upToDate(o, want, hash) {
					v.Holds = hash
				}
			}
		}
		return v, nil
	case *sandboxv1beta1.Sandbox:
		// A copy: a pointer into o would keep all of o, pod template and
		// all, alive for as long as the view.
		status := o.Status
		v := &View{ObjectMeta: compactMeta(o), SandboxStatus: &status, OperatingMode: o.Spec.OperatingMode,
			RenderedBy: t.renderedBy(o), CalibandPort: builders.CalibandPortOf(&o.Spec.PodTemplate.Spec), Launch: launchType(o.Labels)}
		if task := t.pinnedOwner(o); task != nil {
			// Hashing the rendered Sandbox costs more than rendering it; the
			// hash is taken once per version of the task.
			if want, hash, err := t.desiredSandbox(task, task.Status.ResolvedWorkspace, t.memo.partial(task).Sandbox); err == nil && want != nil {
				t.memo.record(task, Sandbox, hash)
				// The comparison skips the apply configuration's kind, which
				// a watch does not decode; the mode is compared on its own
				// (see View.OperatingMode). want is this call's own
				// rendering, and its hash was taken before.
				want.Spec.OperatingMode = nil
				if upToDate(o, want, hash) {
					v.Holds = hash
				}
			}
		}
		return v, nil
	}
	return obj, nil
}

// launchType is a Sandbox's launch-type label, as one of two shared
// strings.
func launchType(labels map[string]string) string {
	switch labels[builders.LabelLaunchType] {
	case builders.LaunchTypeWarm:
		return builders.LaunchTypeWarm
	case builders.LaunchTypeCold:
		return builders.LaunchTypeCold
	}
	return ""
}

// appliedOfNonTask is the applied-hash annotation of an object no task
// controls (a warm pool's), which its own controller compares; "" for a
// task's child, whose verdict is Holds.
func appliedOfNonTask(o metav1.Object) string {
	if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == "CalibanTask" {
		return ""
	}
	return o.GetAnnotations()[AnnotationAppliedHash]
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
	v := obj.GetAnnotations()[AnnotationRenderedBy]
	if v == t.fingerprint {
		return t.fingerprint
	}
	return v
}

// upToDate reports whether a cached child carries the desired one (an
// object of its type or its apply configuration): the same applied hash,
// and every value desired sets. Fields others set (agent-sandbox's status,
// another manager's annotation) do not matter.
func upToDate(live metav1.Object, desired any, hash string) bool {
	return live.GetAnnotations()[AnnotationAppliedHash] == hash && holds(live, desired)
}
