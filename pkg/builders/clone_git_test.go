// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// gitHTTPBackend is where Debian's git keeps its smart-HTTP server, the one
// git hosts speak.
const gitHTTPBackend = "/usr/lib/git-core/git-http-backend"

// gitFixture is a repository to clone, origin, made in a fresh directory
// with a real git: main has three commits, first, tagged (tagged v1) and a
// tip, so that first is the tip of nothing. Every git these tests run, the
// clone script's included, runs with env: HOME is the fixture's directory,
// there is no system or global config, and no GIT_* or SSH_* variable of
// the host's gets through, so nothing on the machine can help a clone.
type gitFixture struct {
	dir, origin   string
	first, tagged string
	env           []string
}

func newGitFixture(t *testing.T) *gitFixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("these tests need git on PATH, as the clone image has: %v", err)
	}
	f := &gitFixture{dir: t.TempDir()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "SSH_") {
			f.env = append(f.env, kv)
		}
	}
	f.env = append(f.env, "HOME="+f.dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	f.origin = filepath.Join(f.dir, "origin")
	f.git(t, "init", "-q", "-b", "main", f.origin)
	commit := func(file string) string {
		if err := os.WriteFile(filepath.Join(f.origin, file), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		f.git(t, "-C", f.origin, "add", file)
		f.git(t, "-C", f.origin, "commit", "-q", "-m", file)
		return f.git(t, "-C", f.origin, "rev-parse", "HEAD")
	}
	f.first = commit("first")
	f.tagged = commit("tagged")
	f.git(t, "-C", f.origin, "tag", "v1")
	commit("tip")
	return f
}

// git runs git with the fixture's environment and returns its trimmed
// output, failing t if it fails.
func (f *gitFixture) git(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = f.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// sh runs a script under /bin/sh, as the init container does, with the
// fixture's environment and extraEnv; it returns the combined output.
func (f *gitFixture) sh(script string, extraEnv ...string) (string, error) {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(append([]string(nil), f.env...), extraEnv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// sources are the three refs every transport is tried with, cloned from
// repo into root: the branch main, the tag v1, and the commit first, which
// is the tip of nothing, in upper case and into a path with a quote. want
// is the HEAD each should have, by source name; main's is its tip now.
func (f *gitFixture) sources(t testing.TB, repo, root string, creds *calibanv1alpha1.SourceCredentialsRef) ([]calibanv1alpha1.Source, map[string]string) {
	t.Helper()
	sources := []calibanv1alpha1.Source{
		{Name: "branch", Repo: repo, Ref: "main", Path: root + "/branch", CredentialsRef: creds},
		{Name: "tag", Repo: repo, Ref: "v1", Path: root + "/tag", CredentialsRef: creds},
		{Name: "sha", Repo: repo, Ref: strings.ToUpper(f.first), Path: root + "/it's a sha", CredentialsRef: creds},
	}
	want := map[string]string{"branch": f.git(t, "-C", f.origin, "rev-parse", "main"), "tag": f.tagged, "sha": f.first}
	return sources, want
}

// cloneTwice runs CloneScript(sources, credentialsDir) and checks that
// every source is a shallow checkout at want[name]; then, as a restarted
// pod would over the same volume, runs it again after a new commit
// upstream and work in each checkout, and checks that it changed nothing.
func (f *gitFixture) cloneTwice(t *testing.T, sources []calibanv1alpha1.Source, want map[string]string, credentialsDir string, extraEnv ...string) {
	t.Helper()
	run := func() {
		t.Helper()
		if out, err := f.sh(CloneScript(sources, credentialsDir), extraEnv...); err != nil {
			t.Fatalf("the clone script failed: %v\n%s", err, out)
		}
	}
	run()
	for _, s := range sources {
		if got := f.git(t, "-C", s.Path, "rev-parse", "HEAD"); got != want[s.Name] {
			t.Errorf("source %s: HEAD %s, want %s", s.Name, got, want[s.Name])
		}
		if got := f.git(t, "-C", s.Path, "rev-list", "--count", "HEAD"); got != "1" {
			t.Errorf("source %s: %s commits of history, want a shallow checkout of 1", s.Name, got)
		}
	}

	// The volume outlives the pod: work in the checkouts and new commits
	// upstream must survive the next start untouched.
	f.git(t, "-C", f.origin, "commit", "-q", "--allow-empty", "-m", "later")
	for _, s := range sources {
		if err := os.WriteFile(filepath.Join(s.Path, "agent-work"), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run()
	for _, s := range sources {
		if got := f.git(t, "-C", s.Path, "rev-parse", "HEAD"); got != want[s.Name] {
			t.Errorf("source %s after a restart: HEAD %s, want %s still", s.Name, got, want[s.Name])
		}
		if _, err := os.Stat(filepath.Join(s.Path, "agent-work")); err != nil {
			t.Errorf("source %s after a restart lost the agents' work: %v", s.Name, err)
		}
	}
}

// gitHTTPHandler is git's smart-HTTP server for every repository in root.
func gitHTTPHandler(t *testing.T, root string) *cgi.Handler {
	t.Helper()
	if _, err := os.Stat(gitHTTPBackend); err != nil {
		t.Fatalf("the smart-HTTP cases need git's http-backend: %v", err)
	}
	return &cgi.Handler{Path: gitHTTPBackend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
}

// TestCloneScriptChecksOutWithARealGit runs the script as the init
// container does, with a real git, against a repository served over
// file:// and over smart HTTP (git http-backend, git protocol v2, as git
// hosts serve it): a branch, a tag and a commit that is not the tip of
// anything land as asked, and a second run over the same volume changes
// nothing.
func TestCloneScriptChecksOutWithARealGit(t *testing.T) {
	f := newGitFixture(t)
	server := httptest.NewServer(gitHTTPHandler(t, f.dir))
	defer server.Close()

	for transport, url := range map[string]string{"file": "file://" + f.origin, "smart HTTP": server.URL + "/origin"} {
		t.Run(transport, func(t *testing.T) {
			root := filepath.Join(f.dir, "ws-"+strings.ReplaceAll(transport, " ", "-"))
			sources, want := f.sources(t, url, root, nil)
			f.cloneTwice(t, sources, want, SourceCredentialsDir)
		})
	}
}
