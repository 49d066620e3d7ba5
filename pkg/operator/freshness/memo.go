// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package freshness

import (
	"sync"

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

// version is one version of a task: what the memo is keyed by.
type version struct {
	uid             types.UID
	resourceVersion string
}

func versionOf(task *calibanv1alpha1.CalibanTask) version {
	return version{uid: task.UID, resourceVersion: task.ResourceVersion}
}

// get returns the task version's three hashes, if all are known.
func (m *memo) get(v version) (Hashes, bool) {
	h := m.partial(v)
	return h, h.complete()
}

// partial returns what is known for the task version; a hash not known
// yet is "".
func (m *memo) partial(v version) Hashes {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.byTask[v.uid]; ok && h.ResourceVersion == v.resourceVersion && v.resourceVersion != "" {
		return h
	}
	return Hashes{}
}

// record sets one kind's hash for the task version, dropping what was
// known for an earlier one.
func (m *memo) record(v version, kind Kind, hash string) {
	m.update(v, func(h *Hashes) {
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

// recordAll sets all three hashes for the task version.
func (m *memo) recordAll(v version, all builders.ChildHashes) {
	m.update(v, func(h *Hashes) { h.ChildHashes = all })
}

func (m *memo) update(v version, set func(*Hashes)) {
	if v.resourceVersion == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byTask == nil {
		m.byTask = map[types.UID]Hashes{}
	}
	h := m.byTask[v.uid]
	if h.ResourceVersion != v.resourceVersion {
		h = Hashes{ResourceVersion: v.resourceVersion}
	}
	set(&h)
	h.ResourceVersion = v.resourceVersion
	m.byTask[v.uid] = h
}

// move re-keys what is known for version from to version to, of the same
// task (Tracker.Carry says when that is right).
func (m *memo) move(from, to version) {
	if from.uid != to.uid || from.resourceVersion == "" || to.resourceVersion == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.byTask[from.uid]; ok && h.ResourceVersion == from.resourceVersion {
		h.ResourceVersion = to.resourceVersion
		m.byTask[from.uid] = h
	}
}

func (m *memo) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byTask, uid)
}
