// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// taskCache is the task informer's cache with the operator's own writes on
// top, until the informer brings them (docs/architecture.md#the-operators-own-writes).
// A sync that runs before the watch brings a status just written must not
// take the task for what it was and write the same move again, and the
// children's transform checks a child against a pin written moments
// before the child's event.
//
// A status write is recorded as the operator built it
// (builders.StoredTaskStatus over the task it read), not as the server
// answered, whose decoding cost more than the rest of the write. What the
// server holds can differ from that only by what someone else wrote in
// between; the watch event that brings the write tells (caughtUp), and the
// task is woken when the difference matters.
type taskCache struct {
	store cache.Store
	mu    sync.Mutex
	// written holds, by UID, the task as the operator's last write left
	// it, while the informer has an older version.
	written map[types.UID]*calibanv1alpha1.CalibanTask
}

func newTaskCache(store cache.Store) *taskCache {
	return &taskCache{store: store, written: map[types.UID]*calibanv1alpha1.CalibanTask{}}
}

// get is the task cached under key: as the operator's own last write left
// it, if the informer has not brought that write yet.
func (tc *taskCache) get(key string) (*calibanv1alpha1.CalibanTask, bool) {
	obj, exists, err := tc.store.GetByKey(key)
	if err != nil || !exists {
		return nil, false
	}
	task, ok := obj.(*calibanv1alpha1.CalibanTask)
	if !ok {
		return nil, false
	}
	tc.mu.Lock()
	w := tc.written[task.UID]
	tc.mu.Unlock()
	if w != nil && newer(w, task) {
		return w, true
	}
	return task, true
}

// wrote records task as a write of the operator left it, unless the
// informer already has that version or a later one.
func (tc *taskCache) wrote(task *calibanv1alpha1.CalibanTask) {
	if obj, exists, err := tc.store.Get(task); err == nil && exists {
		if cached, ok := obj.(*calibanv1alpha1.CalibanTask); ok && cached.UID == task.UID && !newer(task, cached) {
			return
		}
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if w := tc.written[task.UID]; w == nil || newer(task, w) {
		tc.written[task.UID] = task
	}
}

// caughtUp takes a version of a task the informer brought: the operator's
// write it brings, or one it passes, is no longer kept on top. It returns
// that write, as the syncs since it read the task, so that the caller can
// tell whether the cluster's version differs from it in a way that
// matters; nil when no write was kept.
func (tc *taskCache) caughtUp(task *calibanv1alpha1.CalibanTask) *calibanv1alpha1.CalibanTask {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	w := tc.written[task.UID]
	if w == nil || newer(w, task) {
		return nil
	}
	delete(tc.written, task.UID)
	return w
}

// forget drops what is kept of a deleted task.
func (tc *taskCache) forget(uid types.UID) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	delete(tc.written, uid)
}

// newer reports whether a is a later version than b. resourceVersions are
// opaque to clients in general; the apiserver's, from etcd, are integers
// that grow with every write, which client-go's mutation cache relies on
// too. A version that is not one is never newer.
func newer(a, b *calibanv1alpha1.CalibanTask) bool {
	av, errA := strconv.ParseUint(a.ResourceVersion, 10, 64)
	bv, errB := strconv.ParseUint(b.ResourceVersion, 10, 64)
	return errA == nil && errB == nil && av > bv
}
