// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// startTracker keeps, for each task on its first start that this process
// saw created or pinned, the instants it saw the stages pass
// (builders.StartMarks). Only those two events open an entry: a task met
// half-way (after a restart) is timed from its objects, and a task that
// runs, parks, fails or goes away closes its entry, so the map holds only
// starts in flight.
type startTracker struct {
	mu    sync.Mutex
	marks map[types.UID]*builders.StartMarks
}

func newStartTracker() *startTracker {
	return &startTracker{marks: map[types.UID]*builders.StartMarks{}}
}

// created opens the entry of a task whose creation the informer just
// delivered.
func (s *startTracker) created(uid types.UID, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.marks[uid]; !ok {
		s.marks[uid] = &builders.StartMarks{Created: at}
	}
}

// pinned records the pin, opening the entry if the creation was missed.
func (s *startTracker) pinned(uid types.UID, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.marks[uid]
	if !ok {
		m = &builders.StartMarks{}
		s.marks[uid] = m
	}
	m.Pinned = at
}

// childrenApplied records the first sync that found every child applied.
func (s *startTracker) childrenApplied(uid types.UID, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.marks[uid]; ok && m.ChildrenApplied.IsZero() {
		m.ChildrenApplied = at
	}
}

// sandboxReady records when the Sandbox's turn to serving arrived.
func (s *startTracker) sandboxReady(uid types.UID, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.marks[uid]; ok && m.SandboxReady.IsZero() {
		m.SandboxReady = at
	}
}

// take closes the task's entry and returns what it held (zero marks when
// there was none).
func (s *startTracker) take(uid types.UID) builders.StartMarks {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.marks[uid]
	if !ok {
		return builders.StartMarks{}
	}
	delete(s.marks, uid)
	return *m
}
