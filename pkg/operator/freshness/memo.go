// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package freshness

import (
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// Hashes are the applied hashes of a task's three desired children, for
// one resourceVersion of the task.
type Hashes struct {
	ResourceVersion string
	builders.ChildHashes
}

// of is the hash of one kind of child.
func (h Hashes) of(kind Kind) string {
	switch kind {
	case ServiceAccount:
		return h.ServiceAccount
	case NetworkPolicy:
		return h.NetworkPolicy
	default:
		return h.Sandbox
	}
}

// complete reports that all three hashes are known.
func (h Hashes) complete() bool {
	return h.ServiceAccount != "" && h.NetworkPolicy != "" && h.Sandbox != ""
}

// memo remembers each task's Hashes: the children are a pure function of
// the task (spec and pin) and the settings, so while the task's
// resourceVersion stands a sync need not render them to know there is
// nothing to apply, which is every resync. The children's transform fills
// it kind by kind as their events arrive, so the first sync after a restart
// finds it complete.
type memo struct {
	mu     sync.Mutex
	byTask map[types.UID]Hashes
}

// get returns the task's three hashes, if all are known for its
// resourceVersion.
func (m *memo) get(task *calibanv1alpha1.CalibanTask) (Hashes, bool) {
	h := m.partial(task)
	return h, h.complete()
}

// partial returns what is known for the task's resourceVersion; a hash not
// known yet is "".
func (m *memo) partial(task *calibanv1alpha1.CalibanTask) Hashes {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.byTask[task.UID]; ok && h.ResourceVersion == task.ResourceVersion && task.ResourceVersion != "" {
		return h
	}
	return Hashes{}
}

// record sets one kind's hash for the task's resourceVersion, dropping what
// was known for an earlier one.
func (m *memo) record(task *calibanv1alpha1.CalibanTask, kind Kind, hash string) {
	m.update(task, func(h *Hashes) {
		switch kind {
		case ServiceAccount:
			h.ServiceAccount = hash
		case NetworkPolicy:
			h.NetworkPolicy = hash
		default:
			h.Sandbox = hash
		}
	})
}

// recordAll sets all three hashes for the task's resourceVersion.
func (m *memo) recordAll(task *calibanv1alpha1.CalibanTask, all builders.ChildHashes) {
	m.update(task, func(h *Hashes) { h.ChildHashes = all })
}

func (m *memo) update(task *calibanv1alpha1.CalibanTask, set func(*Hashes)) {
	if task.ResourceVersion == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byTask == nil {
		m.byTask = map[types.UID]Hashes{}
	}
	h := m.byTask[task.UID]
	if h.ResourceVersion != task.ResourceVersion {
		h = Hashes{ResourceVersion: task.ResourceVersion}
	}
	set(&h)
	h.ResourceVersion = task.ResourceVersion
	m.byTask[task.UID] = h
}

// carry keeps what is known for from for to, a later version of the same
// task that the operator's own write made: a status or finalizer write
// changes neither the spec (the generation stands) nor, once the task is
// pinned, the pin, which with the launch (a warm task's claim) are all the
// children are rendered from. Without it
// every such write would have the next sync, and every child event after
// it, render and hash the children again.
func (m *memo) carry(from, to *calibanv1alpha1.CalibanTask) {
	if from.UID != to.UID || from.Generation != to.Generation || to.ResourceVersion == "" ||
		from.Status.ResolvedWorkspace == nil || !apiequality.Semantic.DeepEqual(from.Status.ResolvedWorkspace, to.Status.ResolvedWorkspace) ||
		!apiequality.Semantic.DeepEqual(from.Status.Launch, to.Status.Launch) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.byTask[from.UID]; ok && h.ResourceVersion == from.ResourceVersion && from.ResourceVersion != "" {
		h.ResourceVersion = to.ResourceVersion
		m.byTask[from.UID] = h
	}
}

func (m *memo) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byTask, uid)
}
