// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package freshness

import (
	"hash/maphash"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// View is what the caches keep of a task's ServiceAccount, NetworkPolicy or
// Sandbox: identity, owner, and the verdict of the check that matters,
// taken once when the object arrived, instead of the object. A task has
// three children, each a few kilobytes when decoded (a Sandbox is a pod
// template), and the caches hold every one of them; the verdict is a
// string.
type View struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// Holds is the applied hash of the desired child this object was found
	// to carry in full (the annotation and every value, see holds) when it
	// was cached, against its task as the task cache held it then; "" when
	// it did not, or there was no pinned task to render it from. A sync
	// whose desired child has this hash has nothing to apply.
	Holds string
	// RenderedBy is the child's rendered-by annotation: which settings and
	// operator version rendered it ("" for a child of a version before the
	// annotation).
	RenderedBy string
	// Applied is the applied-hash annotation of a ServiceAccount or
	// NetworkPolicy no task controls: a warm pool's, which the Workspace
	// controller applies only when its rendering's hash differs.
	Applied string
	// Sandbox is what a task's status reads of a Sandbox; nil for the
	// other kinds. Its Mode is left out of Holds: the mode follows the
	// task's lifecycle (suspend, finish, the deadline: the clock), the
	// rest follows spec and pin, and only the rest is hashed.
	Sandbox *builders.ObservedSandbox
	// ByName: a NetworkPolicy that selects its pod by the task's name
	// labels, or a Sandbox whose pod template lacks the task-UID label, as
	// a task's children rendered before that label are
	// (builders.SelectsPodByName, builders.LabelsPodByName). A kept one is
	// moved over (Relabel, Reselect).
	ByName bool
	// meta sums the labels, annotations and owners the object had
	// (metaSum), for Tracker.unchanged.
	meta uint64
}

// DeepCopyObject makes a View a runtime.Object, which a cache stores.
func (v *View) DeepCopyObject() runtime.Object {
	out := &View{TypeMeta: v.TypeMeta, Holds: v.Holds, RenderedBy: v.RenderedBy, Applied: v.Applied, ByName: v.ByName, meta: v.meta}
	v.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if v.Sandbox != nil {
		sb := *v.Sandbox
		v.Sandbox.Status.DeepCopyInto(&sb.Status)
		out.Sandbox = &sb
	}
	return out
}

// compactMeta keeps of an object's metadata what the task controller reads:
// identity, owners, creation, deletion. Labels and annotations were read by the check
// behind Holds.
func compactMeta(m metav1.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
		ResourceVersion: m.GetResourceVersion(), Generation: m.GetGeneration(),
		// When the children were applied, for a start timed after a restart.
		CreationTimestamp: m.GetCreationTimestamp(),
		OwnerReferences:   m.GetOwnerReferences(), DeletionTimestamp: m.GetDeletionTimestamp(),
	}
}

// metaSeed seeds metaSum; a sum lives only as long as the process.
var metaSeed = maphash.MakeSeed()

// metaSum sums an object's labels, annotations and owner references, each
// entry hashed on its own and added up, so that the maps' order does not
// count: two objects with the same sum have, but for a 64-bit collision,
// the same of each.
func metaSum(o metav1.Object) uint64 {
	var h maphash.Hash
	h.SetSeed(metaSeed)
	entry := func(kind byte, fields ...string) uint64 {
		h.Reset()
		h.WriteByte(kind)
		for _, f := range fields {
			h.WriteString(f)
			h.WriteByte(0)
		}
		return h.Sum64()
	}
	var sum uint64
	for k, v := range o.GetLabels() {
		sum += entry('l', k, v)
	}
	for k, v := range o.GetAnnotations() {
		sum += entry('a', k, v)
	}
	for _, r := range o.GetOwnerReferences() {
		sum += entry('o', r.APIVersion, r.Kind, r.Name, string(r.UID), flag(r.Controller), flag(r.BlockOwnerDeletion))
	}
	return sum
}

// flag spells an optional boolean for metaSum.
func flag(b *bool) string {
	switch {
	case b == nil:
		return ""
	case *b:
		return "true"
	}
	return "false"
}
