// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// lanes is a workqueue's store (workqueue.Queue) with two FIFO lanes: an
// item that urgent reports when it is added is served before every item of
// the other lane. In a burst the task queue holds thousands of tasks
// waiting to be pinned and given their children, four writes each; a task
// whose Sandbox has just turned Ready needs one write to be reported
// Running, and prospero is waiting for it. In one FIFO that write waited
// behind the whole backlog (ADR 0009).
//
// The workqueue calls every method under its own lock, and holds an item
// at most once: Push for an item it does not hold, Touch for one it holds
// that is added again, which may have become urgent while it waited.
// urgent runs under that lock, so it must be quick and must not add to the
// queue.
type lanes struct {
	urgent func(cache.ObjectName) bool

	first, rest []cache.ObjectName
	// inRest marks the items waiting in rest; promoted counts copies left
	// in rest of items Touch moved to first, skipped when they come up.
	inRest   map[cache.ObjectName]struct{}
	promoted map[cache.ObjectName]int
	live     int
}

var _ workqueue.Queue[cache.ObjectName] = &lanes{}

func newLanes(urgent func(cache.ObjectName) bool) *lanes {
	return &lanes{urgent: urgent, inRest: map[cache.ObjectName]struct{}{}, promoted: map[cache.ObjectName]int{}}
}

func (l *lanes) Push(item cache.ObjectName) {
	l.live++
	if l.urgent(item) {
		l.first = append(l.first, item)
		return
	}
	l.rest = append(l.rest, item)
	l.inRest[item] = struct{}{}
}

func (l *lanes) Touch(item cache.ObjectName) {
	if _, waiting := l.inRest[item]; !waiting || !l.urgent(item) {
		return
	}
	delete(l.inRest, item)
	l.promoted[item]++
	l.first = append(l.first, item)
}

func (l *lanes) Len() int { return l.live }

// Pop is called only when Len is above zero.
func (l *lanes) Pop() cache.ObjectName {
	l.live--
	if len(l.first) > 0 {
		return pop(&l.first)
	}
	for {
		item := pop(&l.rest)
		if n := l.promoted[item]; n > 0 {
			if n == 1 {
				delete(l.promoted, item)
			} else {
				l.promoted[item] = n - 1
			}
			continue // served from first already
		}
		delete(l.inRest, item)
		return item
	}
}

func pop(lane *[]cache.ObjectName) cache.ObjectName {
	item := (*lane)[0]
	// Cleared so that the backing array does not keep the name alive.
	(*lane)[0] = cache.ObjectName{}
	*lane = (*lane)[1:]
	return item
}
