// Package operator holds caliban-operator's controllers: one per reconciled
// kind (Workspace, CalibanTask), each with its own named, rate-limited
// workqueue fed by shared informers. Sync handlers gather inputs from
// listers, call the pure functions of pkg/builders, and write the result with
// server-side apply under the field manager caliban-operator. Everything
// here is I/O and wiring; every decision is in pkg/builders.
package operator
