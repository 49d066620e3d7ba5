// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package freshness answers, without a request, whether a task's
// ServiceAccount, NetworkPolicy and Sandbox are what a sync would write, so
// that a sync applies only what changed and a steady state, a resync or a
// restart writes nothing (docs/architecture.md#applying-only-what-changed).
//
// The children's caches keep a View of each object instead of the object:
// identity, owners, the rendered-by fingerprint, a Sandbox as the task's
// status reads it (builders.ObservedSandbox), the applied hash of a warm
// pool's own objects, and Holds, the verdict of checking the full object
// once, in the informer's transform, against what its task wants (the
// applied-hash annotation and the comparator holds). What a task wants is
// rendered and stamped by pkg/builders (Renderer); its hashes are memoized
// per task version, so neither a sync nor a child's event renders anything
// while the task stands still.
//
// A sync asks Want(task, pin), then one question per child, Want.Plan:
// Keep, Apply, or ModeOnly (a Sandbox that holds it, or is kept as another
// rendering made it, ADR 0015, in another operatingMode). Want.Render and
// Want.SandboxOver give what to apply. Carry lets the memo follow the
// operator's own writes to a task; Track, CheckAfter and Forget are the
// wiring.
package freshness
