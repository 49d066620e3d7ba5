// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package operator runs caliban-operator's two controllers, one per
// reconciled kind (Workspace, CalibanTask), for one leadership term
// (operator.go): the shared informers and their caches, one named,
// rate-limited workqueue per controller (the task queue in two lanes,
// lanes.go), and the syncs. Both controllers are built from one Deps
// (controller.go) and share the loop and the preamble of a sync (get the
// object from its cache, start its span, name it in the log). A task's
// sync reads top to bottom in task_sync.go: gather, decide with the pure
// functions of pkg/builders, write what changed (server-side apply under
// the field manager caliban-operator, write.go), record the status, report
// the change (log, metrics, span, Events). Its children are applied in
// task_children.go, a warm task's claim and claimed Sandbox in
// task_warm.go, a deleted task's drain in drain.go. The Workspace
// controller keeps each Workspace's warm pool (warm_pool.go). The Sandbox
// and extensions informers start once their APIs are served
// (sandbox_api.go); the pin signing key is loaded before any sync
// (pinkey.go).
//
// Three parts have packages of their own: freshness answers, from the
// children's cached views, whether each child is what a sync would write;
// codec is the JSON codec of the REST clients for custom resources;
// tracing makes the spans of syncs and their apiserver requests, and its
// otlp package sends them.
package operator
