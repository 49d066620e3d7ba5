// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package freshness answers, without a request, whether a task's
// ServiceAccount, NetworkPolicy and Sandbox already carry what the task
// wants, so that a sync applies only what changed and a steady state, a
// resync or a restart writes nothing (docs/architecture.md#applying-only-what-changed).
//
// The children's caches keep a View of each child instead of the object:
// identity, owners, a Sandbox's status and mode, and Holds, the verdict of
// checking the full object once, in the informer's transform, against what
// its task wants (the applied-hash annotation and the comparator holds).
// What a task wants is rendered by pkg/builders and stamped here; its
// hashes are memoized per task version, so neither a sync nor a child's
// event renders anything while the task stands still.
//
// The controller needs four things of it: Track (the transform and the
// store of each kind), Want (the desired hashes, and the children rendered
// only when one is Stale), View (a child as its cache keeps it) and Carry
// (the memo follows the operator's own writes to a task).
package freshness
