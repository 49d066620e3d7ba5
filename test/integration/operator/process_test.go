// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// stopTimeout is how long a SIGTERMed operator may take to exit before it
// is killed.
const stopTimeout = 20 * time.Second

// startOperator runs the operator binary configured like a Deployment
// would configure it, watching only namespace ns, with leader election off
// and metrics on a free loopback port. env entries ("NAME=value") are added
// or replace those defaults. The process is stopped with SIGTERM (SIGKILL
// after 20 s, which fails the test) when the test ends, and its output is
// shown if the test failed, with what kwok complained about.
func startOperator(t *testing.T, name, ns string, env ...string) *framework.Operator {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SHOW_OPERATOR_OUTPUT") != "" {
			if trouble := kwokTrouble(); trouble != "" {
				t.Logf("kwok-controller (the Sandbox stand-in) reported:\n%s", trouble)
			}
		}
	})
	op, err := framework.RunOperator(t, framework.OperatorOptions{
		Name:        name,
		Binary:      operatorBinary(t),
		Env:         cluster.NamespaceOperatorEnv(ns, env...),
		StopTimeout: stopTimeout,
		CheckStop:   framework.StopInTime,
	})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// stop sends op SIGTERM, waits for the exit (SIGKILL after stopTimeout,
// which fails the test) and returns the exit code, -1 when the process died
// of a signal. Calling it again returns the first result.
func stop(t testing.TB, op *framework.Operator) int {
	t.Helper()
	if err := op.Stop(stopTimeout); errors.Is(err, framework.ErrStopTimedOut) {
		t.Error(err)
	}
	return op.ExitCode()
}

// waitReady polls /readyz until it answers 200.
func waitReady(t testing.TB, op *framework.Operator, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, func() error {
		if err := op.Running(); err != nil {
			return err
		}
		code, body, err := op.Get("/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", code, body)
		}
		return nil
	})
}

// runOperatorToExit runs the binary with env (added to the defaults of
// startOperator but the namespace) and waits up to timeout for it to exit
// on its own.
func runOperatorToExit(t testing.TB, timeout time.Duration, env ...string) (code int, stdout, stderr string, err error) {
	t.Helper()
	op, err := framework.RunOperator(t, framework.OperatorOptions{
		Name:   "to-exit",
		Binary: operatorBinary(t),
		Env:    append([]string{"KUBECONFIG=" + cluster.Kubeconfig, "CALIBAN_LEADER_ELECTION=false"}, env...),
	})
	if err != nil {
		return 0, "", "", err
	}
	code, err = op.Wait(timeout)
	return code, op.Stdout(), op.Stderr(), err
}

// kwokTrouble is the tail of what the kwok controller, which plays
// agent-sandbox, logged above INFO or about retries: a Sandbox that never
// turns Ready is usually explained there.
func kwokTrouble() string {
	data, err := os.ReadFile(filepath.Join(cluster.LogsDir, "kwok-controller.log"))
	if err != nil {
		return ""
	}
	var lines []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && (!strings.Contains(line, `"level":"INFO"`) || strings.Contains(line, "retry")) {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
