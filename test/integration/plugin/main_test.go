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
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/app"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

var (
	cluster *framework.Cluster
	// build is the operator binary, built while the cluster starts.
	build *framework.OperatorBuild
	ctx   = context.Background()
)

func TestMain(m *testing.M) { framework.MainBuildingOperator(m, &cluster, &build) }

// startOperator runs the operator for namespace ns until the test ends,
// showing its output if the test failed.
func startOperator(t *testing.T, ns string) {
	t.Helper()
	if _, err := framework.RunOperator(t, framework.OperatorOptions{
		Name:        "plugin",
		Binary:      build.Binary(t),
		Env:         cluster.NamespaceOperatorEnv(ns, "CALIBAN_LOG_VERBOSITY=2"),
		StopTimeout: 20 * time.Second,
		ShowLines:   60,
	}); err != nil {
		t.Fatal(err)
	}
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
