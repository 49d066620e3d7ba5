// Package helm_test installs the operator the Helm way, with the Helm Go SDK
// against a real kube-apiserver (the kwokctl test bed of test/framework):
// the caliban-crds chart, then the caliban-operator chart into
// caliban-system. It runs the operator binary with the installed
// Deployment's env as the chart's ServiceAccount, takes a task to Running,
// upgrades the release with a changed value, and uninstalls both charts.
package helm_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

// The operator binary is built once, while the cluster starts.
var (
	binaryPath  string
	binaryErr   error
	binaryBuilt = make(chan struct{})
)

func TestMain(m *testing.M) { framework.MainWith(m, &cluster, buildOperator) }

// buildOperator starts `go build ./cmd/caliban-operator` into a temporary
// directory and returns the teardown that removes it.
func buildOperator() (func(), error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "caliban-operator-helm-it-")
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
