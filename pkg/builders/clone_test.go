package builders

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// These tests run the clone script with /bin/sh, the way the init container
// does, against a fake git that records its argv. The script is the only
// place where user input meets a shell, so the proof is by execution: git
// receives each value as exactly one argument, and nothing but git runs.

// fakeGitScript records one invocation as NUL-terminated fields: the
// argument count, then each argument. Arguments cannot contain NUL, so the
// log is unambiguous whatever they contain.
const fakeGitScript = `#!/bin/sh
{ printf '%s\0' "$#"; for a in "$@"; do printf '%s\0' "$a"; done; } >> "$GIT_LOG"
`

// fakeTouchScript creates its operands. An injected "touch pwned" that ran
// would leave a file behind.
const fakeTouchScript = `#!/bin/sh
for f in "$@"; do : > "$f"; done
`

// shellRig is a directory holding the only commands the script may find
// (git and touch), and runs scripts with nothing else on PATH: [ and test
// are sh builtins.
type shellRig struct {
	bin string
}

func newShellRig(t testing.TB, dir string) shellRig {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"git": fakeGitScript, "touch": fakeTouchScript} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return shellRig{bin: bin}
}

// gitThen makes the rig's git record its call as before and then run
// tail: a git that fails, or that leaves files behind.
func (r shellRig) gitThen(t testing.TB, tail string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(r.bin, "git"), []byte(fakeGitScript+tail), 0o755); err != nil {
		t.Fatal(err)
	}
}

// scriptRun is what one execution of the script did.
type scriptRun struct {
	calls          [][]string
	stdout, stderr string
	err            error
}

// run executes script with /bin/sh -c in workDir and returns git's calls.
func (r shellRig) run(t testing.TB, workDir, script string) scriptRun {
	t.Helper()
	logFile := filepath.Join(workDir, "..", filepath.Base(workDir)+".git-log")
	_ = os.Remove(logFile)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = workDir
	cmd.Env = []string{"PATH=" + r.bin, "GIT_LOG=" + logFile}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	res := scriptRun{err: cmd.Run(), stdout: stdout.String(), stderr: stderr.String()}
	data, err := os.ReadFile(logFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	res.calls = parseGitLog(t, data)
	return res
}

func parseGitLog(t testing.TB, data []byte) [][]string {
	t.Helper()
	var calls [][]string
	fields := strings.Split(string(data), "\x00")
	if len(fields) > 0 && fields[len(fields)-1] == "" {
		fields = fields[:len(fields)-1]
	}
	for i := 0; i < len(fields); {
		n, err := strconv.Atoi(fields[i])
		if err != nil || i+1+n > len(fields) {
			t.Fatalf("corrupt git log at field %d: %q", i, fields)
		}
		calls = append(calls, append([]string{}, fields[i+1:i+1+n]...))
		i += 1 + n
	}
	return calls
}

// cloneArgv is the argv the contract promises for one source with a branch
// or tag ref.
func cloneArgv(ref, repo, path string) []string {
	if ref == "" {
		ref = "main"
	}
	return []string{"clone", "--depth", "1", "--branch", ref, "--", repo, path}
}

// sourceCalls are the git calls the contract promises for one source: a
// clone for a branch or tag, and for a full commit SHA an init, the
// remote, a fetch of that commit alone and its checkout.
func sourceCalls(ref, repo, path string) [][]string {
	if !IsCommitSHA(ref) {
		return [][]string{cloneArgv(ref, repo, path)}
	}
	sha := strings.ToLower(ref)
	return [][]string{
		{"init", "-q", "--", path},
		{"-C", path, "remote", "add", "origin", "--", repo},
		{"-C", path, "fetch", "-q", "--depth", "1", "origin", sha},
		{"-C", path, "checkout", "-q", "--detach", sha},
	}
}

const (
	sha1Ref   = "0123456789abcdef0123456789abcdef01234567"
	sha256Ref = "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"
)

// newWorkDir makes a working directory with a few files in it, so that an
// unquoted glob would expand to something visible.
func newWorkDir(t testing.TB, parent string) string {
	t.Helper()
	work := filepath.Join(parent, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.git", "b", "main"} {
		if err := os.WriteFile(filepath.Join(work, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return work
}

// strayFiles lists files under dir that the setup did not create.
func strayFiles(t testing.TB, dir string, expected map[string]bool) []string {
	t.Helper()
	var stray []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel != "." && !expected[rel] {
			stray = append(stray, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return stray
}

func TestCloneScriptText(t *testing.T) {
	tests := map[string]struct {
		sources []calibanv1alpha1.Source
		want    string
	}{
		"no sources is just set -eu": {
			sources: nil,
			want:    "set -eu\n",
		},
		"one line per source, every value single-quoted": {
			sources: []calibanv1alpha1.Source{srcCaliban, {Name: "q", Repo: "https://x/it's.git", Ref: "", Path: "/work/o'brien"}},
			want: "set -eu\n" +
				"if [ ! -e '/work/caliban/.git' ]; then git clone --depth 1 --branch 'main' -- 'git@x:caliban' '/work/caliban'; fi\n" +
				`if [ ! -e '/work/o'\''brien/.git' ]; then git clone --depth 1 --branch 'main' -- 'https://x/it'\''s.git' '/work/o'\''brien'; fi` + "\n",
		},
		"a full commit SHA is fetched by id, and a failed step leaves no .git behind": {
			sources: []calibanv1alpha1.Source{{Name: "s", Repo: "https://x/r.git", Ref: sha1Ref, Path: "/work/s"}},
			want: "set -eu\n" +
				"if [ ! -e '/work/s/.git' ]; then { git init -q -- '/work/s' && git -C '/work/s' remote add origin -- 'https://x/r.git'" +
				" && git -C '/work/s' fetch -q --depth 1 origin '" + sha1Ref + "' && git -C '/work/s' checkout -q --detach '" + sha1Ref + "'; }" +
				" || { rm -rf -- '/work/s/.git'; exit 1; }; fi\n",
		},
		"an abbreviated SHA is not a SHA": {
			sources: []calibanv1alpha1.Source{{Name: "s", Repo: "r", Ref: "0123abc", Path: "/work/s"}},
			want:    "set -eu\nif [ ! -e '/work/s/.git' ]; then git clone --depth 1 --branch '0123abc' -- 'r' '/work/s'; fi\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(test.want, CloneScript(test.sources, SourceCredentialsDir)); diff != "" {
				t.Errorf("script (-want +got):\n%s", diff)
			}
		})
	}
}

// adversarialSources are values a Workspace may hold (the schema only asks
// for non-empty strings) written to break out of quoting.
func adversarialSources(root string) []calibanv1alpha1.Source {
	return []calibanv1alpha1.Source{
		{Name: "quotes", Repo: `https://example.com/it's'.git`, Ref: `it's`, Path: root + `/o'brien`},
		{Name: "command substitution", Repo: `$(touch pwned)`, Ref: `$(touch pwned)`, Path: root + `/$(touch pwned)`},
		{Name: "backticks", Repo: "`touch pwned`", Ref: "`touch pwned`", Path: root + "/`touch pwned`"},
		{Name: "spaces", Repo: "https://example.com/a b.git", Ref: "release 1", Path: root + "/with space"},
		{Name: "newlines", Repo: "https://example.com/a\ntouch pwned\n", Ref: "x\ntouch pwned", Path: root + "/nl\ntouch pwned"},
		{Name: "semicolons", Repo: "x; touch pwned; ", Ref: ";touch pwned;", Path: root + "/semi;touch pwned"},
		{Name: "leading dashes", Repo: "--upload-pack=touch pwned", Ref: "--config=core.sshCommand=touch pwned", Path: "-rf"},
		{Name: "double dash path", Repo: "-", Ref: "-b", Path: "--"},
		{Name: "globs", Repo: "*", Ref: "?", Path: "[ab]*"},
		{Name: "variables", Repo: "$HOME${PATH}$1$@", Ref: "${GIT_LOG:?}", Path: root + "/$GIT_LOG"},
		{Name: "escapes", Repo: `\'\\"`, Ref: `"\"`, Path: root + `/back\slash`},
		{Name: "and-or", Repo: "a && touch pwned || touch pwned", Ref: "a|touch pwned", Path: root + "/x&touch pwned&"},
		{Name: "redirects", Repo: ">pwned", Ref: "<pwned", Path: root + "/>pwned"},
		{Name: "closing the if", Repo: "'; fi; touch pwned; if '", Ref: "' ]; then touch pwned; fi; if [ '", Path: root + "/fi"},
		{Name: "empty ref defaults to main", Repo: "https://example.com/r.git", Ref: "", Path: root + "/r"},
		{Name: "a SHA with a hostile repo", Repo: "'; touch pwned; '$(touch pwned)", Ref: sha1Ref, Path: root + "/sha $(touch pwned)"},
		{Name: "a SHA-256 into a dashed path", Repo: "--upload-pack=touch pwned", Ref: sha256Ref, Path: "-rf"},
	}
}

func TestCloneScriptPassesEveryValueAsOneArgument(t *testing.T) {
	dir := t.TempDir()
	rig := newShellRig(t, dir)
	work := newWorkDir(t, dir)
	root := filepath.Join(dir, "ws")
	sources := adversarialSources(root)

	res := rig.run(t, work, CloneScript(sources, SourceCredentialsDir))
	if res.err != nil {
		t.Fatalf("script failed: %v\nstderr: %s", res.err, res.stderr)
	}
	var want [][]string
	for _, s := range sources {
		want = append(want, sourceCalls(s.Ref, s.Repo, s.Path)...)
	}
	if diff := cmp.Diff(want, res.calls); diff != "" {
		t.Errorf("git calls (-want +got):\n%s", diff)
	}
	if res.stdout != "" || res.stderr != "" {
		t.Errorf("the script printed: stdout %q, stderr %q", res.stdout, res.stderr)
	}
	// Nothing but git ran: no marker file anywhere, and the work directory
	// holds only what the setup put there.
	expected := map[string]bool{"work": true, "work/a.git": true, "work/b": true, "work/main": true,
		"bin": true, "bin/git": true, "bin/touch": true, "work.git-log": true}
	if stray := strayFiles(t, dir, expected); len(stray) > 0 {
		t.Errorf("something other than git ran and left %q", stray)
	}
}

func TestCloneScriptRefDefaultsToMain(t *testing.T) {
	dir := t.TempDir()
	rig := newShellRig(t, dir)
	work := newWorkDir(t, dir)
	res := rig.run(t, work, CloneScript([]calibanv1alpha1.Source{{Name: "r", Repo: "https://example.com/r.git", Path: "/ws/r"}}, SourceCredentialsDir))
	if res.err != nil {
		t.Fatalf("script failed: %v\nstderr: %s", res.err, res.stderr)
	}
	want := [][]string{{"clone", "--depth", "1", "--branch", "main", "--", "https://example.com/r.git", "/ws/r"}}
	if diff := cmp.Diff(want, res.calls); diff != "" {
		t.Errorf("git calls (-want +got):\n%s", diff)
	}
}

// The workspace volume outlives the pod, so the script runs again after a
// restart: a checkout that is already there is left alone.
func TestCloneScriptIsIdempotent(t *testing.T) {
	tests := map[string]struct {
		// which sources already have <path>/.git
		present []int
		// which sources are cloned
		cloned []int
	}{
		"a first run clones every source":                     {present: nil, cloned: []int{0, 1, 2}},
		"a second run clones nothing":                         {present: []int{0, 1, 2}, cloned: nil},
		"a partial earlier run clones only what is missing":   {present: []int{0, 2}, cloned: []int{1}},
		"an adversarial path is checked under its own name":   {present: []int{1}, cloned: []int{0, 2}},
		"the check is per source, not for the first one only": {present: []int{0}, cloned: []int{1, 2}},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			rig := newShellRig(t, dir)
			work := newWorkDir(t, dir)
			root := filepath.Join(dir, "ws")
			sources := []calibanv1alpha1.Source{
				{Name: "a", Repo: "https://example.com/a.git", Ref: "main", Path: root + "/a"},
				{Name: "b", Repo: "https://example.com/b.git", Ref: sha1Ref, Path: root + "/it's $(b)"},
				{Name: "c", Repo: "https://example.com/c.git", Path: "-c dir"},
			}
			for _, i := range test.present {
				p := sources[i].Path
				if !filepath.IsAbs(p) {
					p = filepath.Join(work, p)
				}
				if err := os.MkdirAll(filepath.Join(p, ".git"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			res := rig.run(t, work, CloneScript(sources, SourceCredentialsDir))
			if res.err != nil {
				t.Fatalf("script failed: %v\nstderr: %s", res.err, res.stderr)
			}
			var want [][]string
			for _, i := range test.cloned {
				want = append(want, sourceCalls(sources[i].Ref, sources[i].Repo, sources[i].Path)...)
			}
			if diff := cmp.Diff(want, res.calls); diff != "" {
				t.Errorf("git calls (-want +got):\n%s", diff)
			}
		})
	}
}

// set -e: a failed clone fails the init container (and so the pod) instead
// of starting caliband on a half-made workspace.
func TestCloneScriptStopsAtTheFirstFailedClone(t *testing.T) {
	dir := t.TempDir()
	rig := newShellRig(t, dir)
	work := newWorkDir(t, dir)
	rig.gitThen(t, "exit 128\n")
	sources := []calibanv1alpha1.Source{
		{Name: "a", Repo: "ra", Ref: "main", Path: "/ws/a"},
		{Name: "b", Repo: "rb", Ref: "main", Path: "/ws/b"},
	}
	res := rig.run(t, work, CloneScript(sources, SourceCredentialsDir))
	if res.err == nil {
		t.Error("the script succeeded although git failed")
	}
	if diff := cmp.Diff([][]string{cloneArgv("main", "ra", "/ws/a")}, res.calls); diff != "" {
		t.Errorf("git calls (-want +got):\n%s", diff)
	}
}

// A commit fetched by id into a fresh repository: if any step fails, the
// .git it made goes again, or the next start would skip the source and run
// caliband on an empty checkout.
func TestCloneScriptUndoesAFailedFetchBySHA(t *testing.T) {
	dir := t.TempDir()
	rig := newShellRig(t, dir)
	work := newWorkDir(t, dir)
	// git init makes the .git; the fetch fails as an unreachable remote does.
	rig.gitThen(t, `case "$1" in init) mkdir -p "$4/.git" ;; esac
case "$3" in fetch) exit 128 ;; esac
`)
	for _, cmd := range []string{"rm", "mkdir"} {
		real, err := exec.LookPath(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(rig.bin, cmd)); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(dir, "ws")
	sources := []calibanv1alpha1.Source{
		{Name: "s", Repo: "https://example.com/s.git", Ref: sha1Ref, Path: root + "/s"},
		{Name: "after", Repo: "https://example.com/a.git", Ref: "main", Path: root + "/after"},
	}
	res := rig.run(t, work, CloneScript(sources, SourceCredentialsDir))
	if res.err == nil {
		t.Error("the script succeeded although the fetch failed")
	}
	if diff := cmp.Diff(sourceCalls(sha1Ref, sources[0].Repo, sources[0].Path)[:3], res.calls); diff != "" {
		t.Errorf("git calls (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(root, "s", ".git")); !os.IsNotExist(err) {
		t.Errorf("the failed checkout's .git is still there (stat: %v)", err)
	}
}

func TestShellRigDetectsAnInjection(t *testing.T) {
	// The rig itself must be able to see what the script tests rule out.
	dir := t.TempDir()
	rig := newShellRig(t, dir)
	work := newWorkDir(t, dir)
	res := rig.run(t, work, "git clone x; touch pwned; echo hi")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if diff := cmp.Diff([][]string{{"clone", "x"}}, res.calls); diff != "" {
		t.Errorf("git calls (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(work, "pwned")); err != nil {
		t.Errorf("the fake touch left no marker: %v", err)
	}
	if res.stdout != "hi\n" {
		t.Errorf("stdout = %q", res.stdout)
	}
	if got := fmt.Sprint(rig.run(t, work, "ls").err); got == "<nil>" {
		t.Error("a command outside the rig ran")
	}
}
