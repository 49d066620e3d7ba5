// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package upgrade_test proves that replacing a running operator by the
// current build leaves what the previous release made alone. It builds the
// operator at a recorded earlier commit of this repository
// (previousRelease) and at the working tree, lets the old build bring
// tasks to Running, Suspended and Draining on the test bed (a real
// kube-apiserver with agent-sandbox's own Sandbox CRD, kwok Stages playing
// its controller), stops it as a rolling Deployment would, starts the new
// build with the same settings, and checks from the API and from the
// apiserver's audit log that the new build
//
//   - keeps every task's phase (no task flickers through another phase
//     while it takes over),
//   - re-creates no child (each Sandbox, ServiceAccount and NetworkPolicy
//     keeps its UID),
//   - has none of its writes to a child refused (an immutable field such
//     as a Sandbox's spec.volumeClaimTemplates rendered differently would
//     be refused on every retry),
//   - writes each child at most once (one re-apply of a changed rendering,
//     not a loop),
//
// and that it can still drive a child the old build made: a suspended
// task resumed under the new build runs again.
//
// Both processes run with the operator's own ServiceAccount identity
// (manifests/base's RBAC), each with a token of its own, so the audit log
// tells their requests apart (framework.CredentialID). The old commit is
// checked out with `git worktree`, so the test needs the repository's
// history: it fails, naming the commit, on a shallow clone.
package upgrade_test

import (
	"testing"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

// AuditOperator: the assertions on writes are read from the apiserver's
// audit log of the operator's ServiceAccount.
func TestMain(m *testing.M) {
	framework.MainWithOptions(m, &cluster, nil, framework.Options{AuditOperator: true})
}
