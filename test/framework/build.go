// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildOperator builds ./cmd/caliban-operator of the source tree at src
// (this repository's root, or a worktree of an earlier commit) into dir,
// which it creates, and returns the binary's path. flags go to go build
// before the package, such as "-ldflags", "-X main.version=..." to stamp
// a release as `make build` does.
func BuildOperator(src, dir string, flags ...string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "caliban-operator")
	args := append(append([]string{"build"}, flags...), "-o", path, "./cmd/caliban-operator")
	cmd := exec.Command("go", args...)
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/caliban-operator in %s: %w\n%s", src, err, out)
	}
	return path, nil
}

// OperatorBuild is a build of this tree's operator binary that runs while
// a test package's cluster starts (TestMain's setup), so that neither
// waits for the other.
type OperatorBuild struct {
	dir  string
	path string
	err  error
	done chan struct{}
}

// StartOperatorBuild starts building the operator into a fresh temporary
// directory named after prefix.
func StartOperatorBuild(prefix string) (*OperatorBuild, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	b := &OperatorBuild{dir: dir, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.path, b.err = BuildOperator(root, dir)
	}()
	return b, nil
}

// Teardown waits for the build and removes its directory.
func (b *OperatorBuild) Teardown() {
	<-b.done
	_ = os.RemoveAll(b.dir)
}

// Binary waits for the build and returns the binary's path, failing t if
// it did not build.
func (b *OperatorBuild) Binary(t testing.TB) string {
	t.Helper()
	if b == nil {
		t.Fatal(errors.New("the operator build was never started"))
	}
	<-b.done
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// BuildingOperator is a setup for MainWith or MainWithOptions: it starts
// building the operator into *build while the cluster starts, and its
// teardown removes the binary.
func BuildingOperator(build **OperatorBuild) func() (func(), error) {
	return func() (func(), error) {
		b, err := StartOperatorBuild("caliban-operator-it-")
		if err != nil {
			return nil, err
		}
		*build = b
		return b.Teardown, nil
	}
}

// MainBuildingOperator is MainWith for a test package that runs the
// operator binary: it builds the binary into *build while the cluster
// starts.
func MainBuildingOperator(m *testing.M, c **Cluster, build **OperatorBuild) {
	MainWith(m, c, BuildingOperator(build))
}
