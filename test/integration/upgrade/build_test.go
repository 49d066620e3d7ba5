// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package upgrade_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// previousRelease is the commit whose operator the upgrade starts from:
// "5667061" (fuzz: a raced target is retried ...), the last commit before
// the test bed moved to agent-sandbox v1.0.3's own Sandbox CRD. Move it
// forward when a release is cut; a full SHA, so that no later commit can
// make it ambiguous.
const previousRelease = "5667061341a5f8c884568098c8a80476ddd2a301"

// oldLDFlags stamp the previous release's binary; startedAs is what its
// process then logs on start-up.
const (
	oldLDFlags = "-X main.version=previous-release -X main.commit=" + previousRelease
	startedAs  = `commit="` + previousRelease + `"`
)

// builds are the two operator binaries of the upgrade.
type builds struct {
	old, current string
}

// buildBoth builds the operator at previousRelease (from a git worktree
// of this repository, removed when the test ends) and of the working tree,
// at the same time: each is mostly a link step once the Go build cache is
// warm.
func buildBoth(t *testing.T) builds {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// CI runs on a full clone; a shallow one lacks the commit, and skipping
	// would let an upgrade break unnoticed, so say what is missing instead.
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the upgrade starts from commit %s (previousRelease), which this clone of %s does not have (git cat-file -e: %v %s). "+
			"The test needs the repository's history: clone it in full (in GitHub Actions, actions/checkout with fetch-depth: 0), "+
			"or run `git fetch --unshallow`.", previousRelease, root, err, strings.TrimSpace(string(out)))
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "previous-release")
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", src, previousRelease).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add --detach %s %s: %v\n%s", src, previousRelease, err, out)
	}
	// Registered after t.TempDir, so it runs before the directory goes:
	// git forgets the worktree rather than keep a dangling entry.
	t.Cleanup(func() {
		if out, err := exec.Command("git", "-C", root, "worktree", "remove", "--force", src).CombinedOutput(); err != nil {
			t.Errorf("git worktree remove --force %s: %v\n%s", src, err, out)
		}
	})
	if out, err := exec.Command("git", "-C", src, "rev-parse", "HEAD").Output(); err != nil || strings.TrimSpace(string(out)) != previousRelease {
		t.Fatalf("the worktree %s is at %q (%v), want %s", src, strings.TrimSpace(string(out)), err, previousRelease)
	}

	var b builds
	var oldErr, curErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		// Stamped as `make build` stamps a release, so that the process
		// names the commit in its first log line (checked by the test).
		// Go's own VCS stamp cannot serve: go build finds no repository in
		// a git worktree (its .git is a file).
		b.old, oldErr = framework.BuildOperator(src, filepath.Join(dir, "old"), "-ldflags", oldLDFlags)
	})
	wg.Go(func() {
		b.current, curErr = framework.BuildOperator(root, dir) // dir/caliban-operator
	})
	wg.Wait()
	if oldErr != nil || curErr != nil {
		t.Fatalf("building the operators: previous release: %v; current tree: %v", oldErr, curErr)
	}
	return b
}
