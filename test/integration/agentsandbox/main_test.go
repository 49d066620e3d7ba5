// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package agentsandbox_test runs the operator against agent-sandbox's own
// controller (v1.0.3, built from its module by `make tools`) and its own
// CRD, instead of the kwok Stages that play it elsewhere: Sandboxes get
// real Pods (scheduled onto kwok nodes, Running and Ready there), headless
// Services and PersistentVolumeClaims, bound by the controller-manager to
// volumes the test provides. It proves the lifecycle end to end (create,
// suspend, resume, finish, deadline, drain, delete) and that an operator
// restarted with other settings breaks nothing that runs (ADR 0015).
//
// The operator runs as a process under its own ServiceAccount (the RBAC of
// manifests/base) so that the apiserver's audit log tells which of its
// writes were refused.
package agentsandbox_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var (
	cluster *framework.Cluster
	// build is the operator binary, built while the cluster starts.
	build *framework.OperatorBuild
	ctx   = context.Background()
)

func TestMain(m *testing.M) {
	framework.MainWithOptions(m, &cluster, framework.BuildingOperator(&build), framework.Options{RealAgentSandbox: true, AuditOperator: true})
}

// volumes is how many PersistentVolumes the package provides: one per
// workspace claim its tests make, and some to spare. A warm pool takes one
// for every Sandbox it ever makes: each refill, each roll; a released
// volume is never bound again.
const volumes = 64

var (
	bedOnce sync.Once
	bedErr  error
)

// bed installs, once, what every test needs: the operator's RBAC (so it
// can run under its own ServiceAccount) and the volumes the claims bind to.
func bed(t *testing.T) {
	t.Helper()
	bedOnce.Do(func() {
		if bedErr = cluster.InstallOperatorIdentity(ctx); bedErr != nil {
			return
		}
		bedErr = cluster.ProvideVolumes(ctx, "workspace", volumes, "50Gi")
	})
	if bedErr != nil {
		t.Fatal(bedErr)
	}
	if !cluster.AgentSandboxRunning() {
		t.Fatalf("agent-sandbox's controller is not running; see %s", filepath.Join(cluster.LogsDir, framework.AgentSandboxController+".log"))
	}
}

// operator is one run of the operator binary, watching one namespace with
// a token of its own.
type operator struct {
	*framework.Operator
	// credential tells its requests apart in the audit log.
	credential string
}

// startOperator runs the operator for namespace ns with env added, and
// stops it when the test ends (showing its output if the test failed).
func startOperator(t *testing.T, name, ns string, env ...string) *operator {
	t.Helper()
	kc, err := cluster.OperatorKubeconfig(ctx, t.TempDir(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := framework.CredentialID(kc)
	if err != nil {
		t.Fatal(err)
	}
	op, err := framework.RunOperator(t, framework.OperatorOptions{
		Name:   name,
		Binary: build.Binary(t),
		Env: cluster.NamespaceOperatorEnv(ns, append([]string{
			"KUBECONFIG=" + kc,
			// The operator's namespace, where its ServiceAccount may keep the
			// pin key, as in its pod.
			"CALIBAN_LEASE_NAMESPACE=" + framework.OperatorNamespace,
			"CALIBAN_DRAIN_TIMEOUT_SECONDS=600",
		}, env...)...),
		StopTimeout: 30 * time.Second,
		ShowLines:   60,
		FailOnPanic: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &operator{Operator: op, credential: cred}
}

// refusedWrites are the writes the operator (by its credential) sent to
// ns and the apiserver refused, as "<verb> <resource>/<name>: <code>".
func (o *operator) refusedWrites(t *testing.T, ns string) []string {
	t.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, e := range events {
		if e.CredentialID() != o.credential || !e.Write() || e.ObjectRef == nil || e.ObjectRef.Namespace != ns {
			continue
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 && e.ResponseStatus.Code != 404 && e.ResponseStatus.Code != 409 {
			refused = append(refused, fmt.Sprintf("%s %s/%s: %d", e.Verb, e.Resource(), e.ObjectRef.Name, e.ResponseStatus.Code))
		}
	}
	return refused
}

// writesTo counts the operator's successful writes to each object of
// resource (e.g. "sandboxes") in ns, by name.
func (o *operator) writesTo(t *testing.T, ns, resource string) map[string]int {
	t.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range events {
		if e.CredentialID() == o.credential && e.Write() && e.Succeeded() && e.ObjectRef != nil &&
			e.ObjectRef.Namespace == ns && e.ObjectRef.Resource == resource && e.ObjectRef.Subresource == "" {
			n[e.ObjectRef.Name]++
		}
	}
	return n
}
