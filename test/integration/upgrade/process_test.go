// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package upgrade_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// stopTimeout bounds how long a SIGTERMed operator may take to stop; its own
// shutdown grace is a few seconds.
const stopTimeout = 30 * time.Second

// drainTimeout is CALIBAN_DRAIN_TIMEOUT_SECONDS for both builds: long
// enough that the deleted task stays Draining for the whole test.
const drainTimeout = time.Hour

// identity is a token of the operator's ServiceAccount for one process:
// its kubeconfig, and the credential id the audit log records its
// requests under.
type identity struct {
	kubeconfig, credential string
}

func mintIdentity(t *testing.T, ctx context.Context) identity {
	t.Helper()
	kc, err := cluster.OperatorKubeconfig(ctx, t.TempDir(), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id, err := framework.CredentialID(kc)
	if err != nil {
		t.Fatal(err)
	}
	return identity{kubeconfig: kc, credential: id}
}

// operatorSettings are what both builds run with: one namespace, no leader
// election (so that /readyz means "controllers running"), and a drain
// that outlasts the test.
func operatorSettings(ns string, id identity) []string {
	return cluster.NamespaceOperatorEnv(ns,
		"KUBECONFIG="+id.kubeconfig,
		// The operator's namespace, where its ServiceAccount may keep the
		// pin key, as in its pod.
		"CALIBAN_LEASE_NAMESPACE="+framework.OperatorNamespace,
		fmt.Sprintf("CALIBAN_DRAIN_TIMEOUT_SECONDS=%d", int(drainTimeout/time.Second)),
		"CALIBAN_LOG_VERBOSITY=2",
	)
}

// startOperator runs bin with the settings and waits until its
// controllers run with synced caches. When the test ends it is killed
// (if still running), its output shown if the test failed, and a panic in
// it fails the test.
func startOperator(t *testing.T, name, bin string, env []string) *framework.Operator {
	t.Helper()
	op, err := framework.RunOperator(t, framework.OperatorOptions{
		Name: name, Binary: bin, Env: env,
		ShowLines: 60, FailOnPanic: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitRunning(op, time.Minute); err != nil {
		t.Fatalf("operator %s never ran its controllers: %v\nits output:\n%s", name, err, framework.LastLines(op.Output(), 40))
	}
	return op
}

// waitRunning waits until /readyz answers 200 and the process has logged
// that its controllers run. /readyz alone is not enough: between the
// metrics server's start and the controllers' it answers 200 too.
func waitRunning(op *framework.Operator, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if op.Exited() {
			return fmt.Errorf("operator %s exited", op.Name)
		}
		code, body, err := op.Get("/readyz")
		switch {
		case err != nil:
		case code != http.StatusOK:
			err = fmt.Errorf("/readyz: %d %s", code, strings.TrimSpace(body))
		case !strings.Contains(op.Output(), `"Controllers running"`):
			err = fmt.Errorf("/readyz answers 200, but the process has not logged \"Controllers running\"")
		default:
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not running within %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
