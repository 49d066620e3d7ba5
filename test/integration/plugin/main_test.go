// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package plugin_test drives kubectl-caliban (its app.Run, in process,
// with a kubeconfig for the test cluster) against tasks the real
// caliban-operator binary manages on a real kube-apiserver. agent-sandbox
// is played by the kwok Stages of test/stages, so Sandboxes turn Ready but
// no pod exists; test/integration/agentsandbox runs the plugin against real
// pods.
package plugin_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/app"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

var (
	cluster *framework.Cluster
	binary  string
	ctx     = context.Background()
)

func TestMain(m *testing.M) { framework.MainWith(m, &cluster, build) }

// build compiles the operator before the cluster starts.
func build() (func(), error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "caliban-plugin-it-")
	if err != nil {
		return nil, err
	}
	if binary, err = framework.BuildOperator(root, dir); err != nil {
		return nil, err
	}
	return func() { _ = os.RemoveAll(dir) }, nil
}

// startOperator runs the operator for namespace ns until the test ends,
// showing its output if the test failed.
func startOperator(t *testing.T, ns string) {
	t.Helper()
	addr, err := framework.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	op, err := framework.StartOperator("plugin", binary, addr,
		"KUBECONFIG="+cluster.Kubeconfig,
		"CALIBAN_LEADER_ELECTION=false",
		"CALIBAN_WATCH_NAMESPACE="+ns,
		"CALIBAN_LOG_VERBOSITY=2",
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = op.Stop(20 * time.Second)
		if t.Failed() {
			out := strings.Split(strings.TrimRight(op.Output(), "\n"), "\n")
			if len(out) > 60 {
				out = out[len(out)-60:]
			}
			t.Logf("operator output (last 60 lines):\n%s", strings.Join(out, "\n"))
		}
	})
}

// result is one run of the plugin.
type result struct {
	code        int
	out, errOut string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.errOut)
}

// plugin runs `kubectl caliban <args> --kubeconfig <test cluster>`.
func plugin(args ...string) result {
	var out, errOut bytes.Buffer
	args = append(args, "--kubeconfig", cluster.Kubeconfig)
	code := app.Run(ctx, args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		app.BuildInfo{Version: "test", Commit: "test"})
	return result{code: code, out: out.String(), errOut: errOut.String()}
}
