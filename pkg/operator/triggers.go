package operator

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// What wakes a task, and what does not (docs/architecture.md#what-wakes-a-task).
// Every sync that finds nothing to do still costs CPU; at a burst of tasks
// the echoes of the operator's own writes were most of the syncs.

// taskUpdateMatters reports whether an update of a task can change what its
// sync does. A resync (same resourceVersion) always does: it is the safety
// net. Otherwise a change of the spec, of the deletion state, or of a
// condition another writer owns (prospero's AgentsSettled) matters; a change
// of nothing but the status fields the operator owns is the echo of its own
// write, and a foreign edit of those fields is put back at the next resync.
func taskUpdateMatters(old, new *calibanv1alpha1.CalibanTask) bool {
	if old.ResourceVersion == new.ResourceVersion {
		return true
	}
	if old.Generation != new.Generation || !old.DeletionTimestamp.Equal(new.DeletionTimestamp) ||
		!apiequality.Semantic.DeepEqual(old.Finalizers, new.Finalizers) {
		return true
	}
	return !apiequality.Semantic.DeepEqual(foreignConditions(old.Status.Conditions), foreignConditions(new.Status.Conditions))
}

// foreignConditions are the conditions the operator does not own.
func foreignConditions(conds []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conds {
		if c.Type != builders.ConditionReady {
			out = append(out, c)
		}
	}
	return out
}

// childUpdateMatters reports whether an update of a ServiceAccount,
// NetworkPolicy or Sandbox can change what its task's sync does: a change
// of its spec (generation), of the metadata the operator applies, of a
// ServiceAccount's token automount, or of a Sandbox's status. Updates that
// only move the resourceVersion or managedFields, and resyncs, do not.
func childUpdateMatters(old, new any) bool {
	o, errO := meta.Accessor(old)
	n, errN := meta.Accessor(new)
	if errO != nil || errN != nil {
		return true
	}
	if o.GetResourceVersion() == n.GetResourceVersion() {
		return false
	}
	if o.GetGeneration() != n.GetGeneration() || !o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
		!apiequality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
		!apiequality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
		!apiequality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) {
		return true
	}
	switch n := new.(type) {
	case *corev1.ServiceAccount:
		o, ok := old.(*corev1.ServiceAccount)
		return !ok || !apiequality.Semantic.DeepEqual(o.AutomountServiceAccountToken, n.AutomountServiceAccountToken)
	case *sandboxv1beta1.Sandbox:
		o, ok := old.(*sandboxv1beta1.Sandbox)
		return !ok || !apiequality.Semantic.DeepEqual(o.Status, n.Status)
	}
	return false
}
