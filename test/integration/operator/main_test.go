// Package operator_test runs the real caliban-operator binary, as its
// Deployment would, against a real kube-apiserver (the kwokctl test bed of
// test/framework) and checks what it leaves in the API: task and workspace
// status, children, Events, the Lease, metrics.
//
// Each test works in a namespace of its own with an operator process of its
// own, restricted to that namespace by CALIBAN_WATCH_NAMESPACE, so tests can
// run in parallel without seeing each other's operators. agent-sandbox is
// played by the kwok Stages in test/stages: a Sandbox turns Ready about
// 300 ms after it is created unless a test annotates it otherwise.
//
// A failing test shows the output of its operator processes and what the
// kwok controller complained about; SHOW_OPERATOR_OUTPUT=1 shows the
// operators' output for passing tests too.
package operator_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

// The operator binary is built once per package run, while the cluster
// starts; tests wait for it in operatorBinary.
var (
	binaryPath  string
	binaryErr   error
	binaryBuilt = make(chan struct{})
)

func TestMain(m *testing.M) { framework.MainWith(m, &cluster, buildOperator) }

// parallelTests is how many tests run at once unless -test.parallel says
// otherwise. The tests mostly wait on the cluster and on operator
// processes, so go test's default (GOMAXPROCS, 2 on a small machine) would
// serialise them for no gain.
const parallelTests = 16

// buildOperator starts `go build ./cmd/caliban-operator` into a temporary
// directory and returns the teardown that removes it. It also raises the
// default -test.parallel.
func buildOperator() (func(), error) {
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(parallelTests)); err != nil {
			return nil, err
		}
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "caliban-operator-it-")
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(binaryBuilt)
		path := filepath.Join(dir, "caliban-operator")
		cmd := exec.Command("go", "build", "-o", path, "./cmd/caliban-operator")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build ./cmd/caliban-operator: %w\n%s", err, out)
			return
		}
		binaryPath = path
	}()
	return func() {
		<-binaryBuilt
		_ = os.RemoveAll(dir)
	}, nil
}

// operatorBinary waits for the build and returns the binary's path.
func operatorBinary(t testing.TB) string {
	t.Helper()
	<-binaryBuilt
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	if binaryPath == "" {
		t.Fatal(errors.New("the operator binary was not built"))
	}
	return binaryPath
}
