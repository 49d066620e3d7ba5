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

// TestCloneScriptChecksOutWithARealGit runs the script as the init
// container does, with a real git, against a repository served over
// file:// and over smart HTTP (git http-backend, git protocol v2, as git
// hosts serve it): a branch, a tag and a commit that is not the tip of
// anything land as asked, and a second run over the same volume changes
// nothing.
func TestCloneScriptChecksOutWithARealGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("these tests need git on PATH, as the clone image has: %v", err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	gitT := func(t testing.TB, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git := func(args ...string) string { t.Helper(); return gitT(t, args...) }
	origin := filepath.Join(dir, "origin")
	git("init", "-q", "-b", "main", origin)
	commit := func(file string) string {
		if err := os.WriteFile(filepath.Join(origin, file), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		git("-C", origin, "add", file)
		git("-C", origin, "commit", "-q", "-m", file)
		return git("-C", origin, "rev-parse", "HEAD")
	}
	first := commit("first")
	tagged := commit("tagged")
	git("-C", origin, "tag", "v1")
	commit("tip")

	if _, err := os.Stat(gitHTTPBackend); err != nil {
		t.Fatalf("the smart-HTTP case needs git's http-backend: %v", err)
	}
	server := httptest.NewServer(&cgi.Handler{Path: gitHTTPBackend, Env: []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1"}})
	defer server.Close()

	for transport, url := range map[string]string{"file": "file://" + origin, "smart HTTP": server.URL + "/origin"} {
		t.Run(transport, func(t *testing.T) {
			root := filepath.Join(dir, "ws-"+strings.ReplaceAll(transport, " ", "-"))
			sources := []calibanv1alpha1.Source{
				{Name: "branch", Repo: url, Ref: "main", Path: root + "/branch"},
				{Name: "tag", Repo: url, Ref: "v1", Path: root + "/tag"},
				{Name: "sha", Repo: url, Ref: strings.ToUpper(first), Path: root + "/it's a sha"},
			}
			// The tip of main is whatever it is when this transport starts.
			want := map[string]string{"branch": gitT(t, "-C", origin, "rev-parse", "main"), "tag": tagged, "sha": first}
			run := func() {
				t.Helper()
				cmd := exec.Command("/bin/sh", "-c", CloneScript(sources, SourceCredentialsDir))
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("the clone script failed: %v\n%s", err, out)
				}
			}
			run()
			for _, s := range sources {
				if got := gitT(t, "-C", s.Path, "rev-parse", "HEAD"); got != want[s.Name] {
					t.Errorf("source %s: HEAD %s, want %s", s.Name, got, want[s.Name])
				}
				if got := gitT(t, "-C", s.Path, "rev-list", "--count", "HEAD"); got != "1" {
					t.Errorf("source %s: %s commits of history, want a shallow checkout of 1", s.Name, got)
				}
			}

			// The volume outlives the pod: work in the checkouts and new commits
			// upstream must survive the next start untouched.
			gitT(t, "-C", origin, "commit", "-q", "--allow-empty", "-m", "later")
			for _, s := range sources {
				if err := os.WriteFile(filepath.Join(s.Path, "agent-work"), []byte("keep"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			run()
			for _, s := range sources {
				if got := gitT(t, "-C", s.Path, "rev-parse", "HEAD"); got != want[s.Name] {
					t.Errorf("source %s after a restart: HEAD %s, want %s still", s.Name, got, want[s.Name])
				}
				if _, err := os.Stat(filepath.Join(s.Path, "agent-work")); err != nil {
					t.Errorf("source %s after a restart lost the agents' work: %v", s.Name, err)
				}
			}
		})
	}
}
