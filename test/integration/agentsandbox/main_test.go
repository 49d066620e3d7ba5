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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var (
	cluster *framework.Cluster
	binary  string
	ctx     = context.Background()
)

func TestMain(m *testing.M) {
	framework.MainWithOptions(m, &cluster, build, framework.Options{RealAgentSandbox: true, AuditOperator: true})
}

// build compiles the operator before the cluster starts.
func build() (func(), error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "caliban-agentsandbox-it-")
	if err != nil {
		return nil, err
	}
	binary = filepath.Join(dir, "caliban-operator")
	cmd := exec.Command("go", "build", "-o", binary, "./cmd/caliban-operator")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/caliban-operator: %w\n%s", err, out)
	}
	return func() { _ = os.RemoveAll(dir) }, nil
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
	addr, err := framework.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	op, err := framework.StartOperator(name, binary, addr, append([]string{
		"KUBECONFIG=" + kc,
		"CALIBAN_LEADER_ELECTION=false",
		// The operator's namespace, where its ServiceAccount may keep the
		// pin key, as in its pod.
		"CALIBAN_LEASE_NAMESPACE=" + framework.OperatorNamespace,
		"CALIBAN_WATCH_NAMESPACE=" + ns,
		"CALIBAN_LOG_VERBOSITY=4",
		"CALIBAN_DRAIN_TIMEOUT_SECONDS=600",
	}, env...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = op.Stop(30 * time.Second)
		out := op.Output()
		if t.Failed() {
			t.Logf("operator %s output (last 60 lines):\n%s", name, lastLines(out, 60))
		}
		for _, sign := range []string{"panic:", "fatal error:"} {
			if i := strings.Index(out, sign); i >= 0 {
				t.Errorf("operator %s wrote %q:\n%s", name, sign, lastLines(out[i:], 30))
			}
		}
	})
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

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
