// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package operator runs caliban-operator's two controllers, one per
// reconciled kind (Workspace, CalibanTask), for one leadership term: the
// shared informers and their caches, one named, rate-limited workqueue per
// controller (the task queue in two lanes, lanes.go), and the sync
// handlers. A sync gets its object from a cache, gathers what else it
// reads (caches, Secrets by GET), calls the pure decisions and renderers of
// pkg/builders, writes what changed through the one write path (write.go:
// server-side apply under the field manager caliban-operator), and records
// an Event on a transition.
//
// Two parts have packages of their own, behind narrow interfaces:
// freshness knows, from the children's cached views, whether a task's
// ServiceAccount, NetworkPolicy and Sandbox hold what it wants; codec is
// the JSON codec of the REST clients for custom resources.
package operator
