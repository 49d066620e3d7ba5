// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
)

// What wakes a task, and what does not (docs/architecture.md#what-wakes-a-task).
// Every sync that finds nothing to do still costs CPU; at a burst of tasks
// the echoes of the operator's own writes were most of the syncs.

// taskUpdateMatters reports whether an update of a task can change what its
// sync does. A resync (same resourceVersion) always does: it is the safety
// net. Otherwise a change of the spec, of the deletion state, or of a
// condition another writer owns (prospero's AgentsSettled) matters; a change
// of nothing but the status fields the operator owns is the echo of its own
// write, and a foreign edit of those fields is put back at the next resync;
// except an edit of what the operator never writes twice or always derives
// (the pin and its signature, requestedBy, the type of the launch signed
// with the pin), which someone else made and which the sync must answer now
// (docs/security.md#pins-the-operator-wrote).
func taskUpdateMatters(old, new *calibanv1alpha1.CalibanTask) bool {
	return old.ResourceVersion == new.ResourceVersion || taskChangeMatters(old, new)
}

// taskChangeMatters reports whether new, a later version of the task than
// old, differs from it in anything but the status fields the operator owns
// (taskUpdateMatters).
func taskChangeMatters(old, new *calibanv1alpha1.CalibanTask) bool {
	if old.Generation != new.Generation || !old.DeletionTimestamp.Equal(new.DeletionTimestamp) ||
		!apiequality.Semantic.DeepEqual(old.Finalizers, new.Finalizers) {
		return true
	}
	if foreignStatusEdit(old, new) {
		return true
	}
	return !apiequality.Semantic.DeepEqual(builders.ForeignConditions(old.Status.Conditions), builders.ForeignConditions(new.Status.Conditions))
}

// foreignStatusEdit reports an update the operator cannot have written: a
// pin, or its signature, changed once written (the operator writes them
// once), a launch of another type (the operator changes it only with a new
// signature), or a requestedBy that is not the annotation (the operator
// always copies it). A pin written on a task that had none may be the echo
// of the operator's own admission; an unpinned task is synced again within
// 30 s anyway.
func foreignStatusEdit(old, new *calibanv1alpha1.CalibanTask) bool {
	if old.Status.ResolvedWorkspace != nil && (old.Status.PinSignature != new.Status.PinSignature ||
		!apiequality.Semantic.DeepEqual(old.Status.ResolvedWorkspace, new.Status.ResolvedWorkspace) ||
		builders.IsWarm(old) != builders.IsWarm(new)) {
		return true
	}
	return new.Status.ResolvedWorkspace != nil && new.Status.RequestedBy != builders.RequestedBy(new)
}

// childUpdateMatters reports whether an update of a ServiceAccount,
// NetworkPolicy or Sandbox, as its view (freshness.View), can change what its
// task's sync does: whether it still carries what the task wants, its
// owners, its deletion, a Sandbox's status. Updates that change none of
// these (another manager's label, managedFields, agent-sandbox's pod-name
// annotation), and resyncs, do not.
func childUpdateMatters(old, new any) bool {
	o, okO := old.(*freshness.View)
	n, okN := new.(*freshness.View)
	if !okO || !okN {
		return true
	}
	if o.ResourceVersion == n.ResourceVersion {
		return false
	}
	if o.Holds != n.Holds || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) || !apiequality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) {
		return true
	}
	if o.Sandbox == nil || n.Sandbox == nil {
		return o.Sandbox != n.Sandbox
	}
	return o.Sandbox.Mode != n.Sandbox.Mode || !apiequality.Semantic.DeepEqual(o.Sandbox.Status, n.Sandbox.Status)
}
