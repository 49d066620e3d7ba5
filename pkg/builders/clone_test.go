// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

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
// argument count, then each argument, then the two variables credentials
// reach git by, GIT_SSH_COMMAND and GIT_TERMINAL_PROMPT (each "" when unset
// and "=" followed by the value when set, so that set-but-empty is not
// unset), then the whole exported environment as `export -p` prints it.
// Arguments and environment values cannot contain NUL, and the fields after
// the arguments are a fixed number, so the log is unambiguous whatever they
// contain.
const fakeGitScript = `#!/bin/sh
{ printf '%s\0' "$#"; for a in "$@"; do printf '%s\0' "$a"; done
  printf '%s\0' "${GIT_SSH_COMMAND+=}${GIT_SSH_COMMAND-}" "${GIT_TERMINAL_PROMPT+=}${GIT_TERMINAL_PROMPT-}" "$(export -p)"; } >> "$GIT_LOG"
`

// gitCredentialVars are the variables the fake git records by name, in the
// order of its log.
var gitCredentialVars = []string{"GIT_SSH_COMMAND", "GIT_TERMINAL_PROMPT"}

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

// scriptRun is what one execution of the script did. calls, env and
// exported are parallel: for each git call, its argv, the gitCredentialVars
// it found set (an empty map when none was), and its exported environment.
type scriptRun struct {
	calls          [][]string
	env            []map[string]string
	exported       []string
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
	res.calls, res.env, res.exported = parseGitLog(t, data)
	return res
}

func parseGitLog(t testing.TB, data []byte) (calls [][]string, env []map[string]string, exported []string) {
	t.Helper()
	fields := strings.Split(string(data), "\x00")
	if len(fields) > 0 && fields[len(fields)-1] == "" {
		fields = fields[:len(fields)-1]
	}
	trailer := len(gitCredentialVars) + 1
	for i := 0; i < len(fields); {
		n, err := strconv.Atoi(fields[i])
		if err != nil || n < 0 || i+1+n+trailer > len(fields) {
			t.Fatalf("corrupt git log at field %d: %q", i, fields)
		}
		calls = append(calls, append([]string{}, fields[i+1:i+1+n]...))
		vars := map[string]string{}
		for k, name := range gitCredentialVars {
			if v, set := strings.CutPrefix(fields[i+1+n+k], "="); set {
				vars[name] = v
			} else if v != "" {
				t.Fatalf("corrupt git log at field %d: %s recorded as %q", i+1+n+k, name, v)
			}
		}
		env = append(env, vars)
		exported = append(exported, fields[i+n+trailer])
		i += 1 + n + trailer
	}
	return calls, env, exported
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
	// The credential options as the script spells them, for a Secret
	// mounted at dir; host and dir hold no quote here, so these are the
	// contract's words with the two values dropped in.
	helper := func(host, dir string) string {
		return `GIT_TERMINAL_PROMPT=0 GIT_ASKPASS= git -c credential.helper= -c 'credential.helper=!f() { test "$1" = get || exit 0; p=; h=; ` +
			`while IFS= read -r l; do case "$l" in protocol=*) p=${l#protocol=};; host=*) h=${l#host=};; esac; done; ` +
			`test "$p" = https && test -n "$h" && test "$h" = '\''` + host + `'\'' || exit 0; ` +
			`printf '\''username=%s\npassword=%s\n'\'' "$(cat '\''` + dir + `/username'\'')" "$(cat '\''` + dir + `/password'\'')"; }; f'`
	}
	sshCommand := func(dir string) string {
		return `GIT_SSH_COMMAND='ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none -i '\''` + dir + `/ssh-privatekey'\''` +
			` -o StrictHostKeyChecking=yes -o UserKnownHostsFile='\''` + dir + `/known_hosts'\'' -o GlobalKnownHostsFile=/dev/null -o UpdateHostKeys=no' git`
	}
	creds := &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-creds"}
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
		"a credentialed https branch is cloned with a helper for its own host:port, reading the files of its index, prompts off": {
			sources: []calibanv1alpha1.Source{srcDocs, {Name: "app", Repo: "https://git.example.com:8443/team/app.git", Ref: "v2", Path: "/work/app", CredentialsRef: creds}},
			want: "set -eu\n" +
				"if [ ! -e '/work/docs/.git' ]; then git clone --depth 1 --branch 'release-1.2' -- 'https://example.com/docs.git' '/work/docs'; fi\n" +
				"if [ ! -e '/work/app/.git' ]; then " + helper("git.example.com:8443", "/var/run/caliban/source-credentials/1") +
				" clone --depth 1 --branch 'v2' -- 'https://git.example.com:8443/team/app.git' '/work/app'; fi\n",
		},
		"a credentialed https SHA gives the credentials to the fetch alone": {
			sources: []calibanv1alpha1.Source{{Name: "s", Repo: "https://git.example.com/s.git", Ref: sha1Ref, Path: "/work/s", CredentialsRef: creds}},
			want: "set -eu\n" +
				"if [ ! -e '/work/s/.git' ]; then { git init -q -- '/work/s' && git -C '/work/s' remote add origin -- 'https://git.example.com/s.git'" +
				" && " + helper("git.example.com", "/var/run/caliban/source-credentials/0") + " -C '/work/s' fetch -q --depth 1 origin '" + sha1Ref + "'" +
				" && git -C '/work/s' checkout -q --detach '" + sha1Ref + "'; }" +
				" || { rm -rf -- '/work/s/.git'; exit 1; }; fi\n",
		},
		"ssh:// and git@ repos are cloned with the key and known_hosts of their index, host keys checked": {
			sources: []calibanv1alpha1.Source{
				{Name: "app", Repo: "ssh://git@git.example.com:2222/team/app.git", Ref: "main", Path: "/work/app", CredentialsRef: creds},
				{Name: "lib", Repo: "git@git.example.com:team/lib.git", Ref: "v1", Path: "/work/lib", CredentialsRef: creds},
			},
			want: "set -eu\n" +
				"if [ ! -e '/work/app/.git' ]; then " + sshCommand("/var/run/caliban/source-credentials/0") +
				" clone --depth 1 --branch 'main' -- 'ssh://git@git.example.com:2222/team/app.git' '/work/app'; fi\n" +
				"if [ ! -e '/work/lib/.git' ]; then " + sshCommand("/var/run/caliban/source-credentials/1") +
				" clone --depth 1 --branch 'v1' -- 'git@git.example.com:team/lib.git' '/work/lib'; fi\n",
		},
		"a git@ SHA gives GIT_SSH_COMMAND to the fetch alone": {
			sources: []calibanv1alpha1.Source{{Name: "s", Repo: "git@git.example.com:s.git", Ref: sha1Ref, Path: "/work/s", CredentialsRef: creds}},
			want: "set -eu\n" +
				"if [ ! -e '/work/s/.git' ]; then { git init -q -- '/work/s' && git -C '/work/s' remote add origin -- 'git@git.example.com:s.git'" +
				" && " + sshCommand("/var/run/caliban/source-credentials/0") + " -C '/work/s' fetch -q --depth 1 origin '" + sha1Ref + "'" +
				" && git -C '/work/s' checkout -q --detach '" + sha1Ref + "'; }" +
				" || { rm -rf -- '/work/s/.git'; exit 1; }; fi\n",
		},
		"credentials on a file://, http:// or HTTPS:// repo render as a public source": {
			sources: []calibanv1alpha1.Source{
				{Name: "f", Repo: "file:///srv/git/app.git", Ref: "main", Path: "/work/f", CredentialsRef: creds},
				{Name: "h", Repo: "http://git.example.com/app.git", Ref: "main", Path: "/work/h", CredentialsRef: creds},
				{Name: "u", Repo: "HTTPS://git.example.com/app.git", Ref: "main", Path: "/work/u", CredentialsRef: creds},
			},
			want: "set -eu\n" +
				"if [ ! -e '/work/f/.git' ]; then git clone --depth 1 --branch 'main' -- 'file:///srv/git/app.git' '/work/f'; fi\n" +
				"if [ ! -e '/work/h/.git' ]; then git clone --depth 1 --branch 'main' -- 'http://git.example.com/app.git' '/work/h'; fi\n" +
				"if [ ! -e '/work/u/.git' ]; then git clone --depth 1 --branch 'main' -- 'HTTPS://git.example.com/app.git' '/work/u'; fi\n",
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
	// Public sources: no call is given anything to authenticate with.
	for i, env := range res.env {
		if len(env) > 0 {
			t.Errorf("git call %d %q ran with %v, want neither of %v set", i, res.calls[i], env, gitCredentialVars)
		}
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
	if diff := cmp.Diff([]map[string]string{{}}, res.env); diff != "" {
		t.Errorf("git env (-want +got):\n%s", diff)
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
	// It records the credential variables by value, tells set-but-empty
	// from unset, and sees the whole exported environment.
	res = rig.run(t, work, `GIT_SSH_COMMAND="ssh -i 'a b'" git a; GIT_TERMINAL_PROMPT= git b; git c; SOMETHING_ELSE=zq-exported git d`)
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantEnv := []map[string]string{{"GIT_SSH_COMMAND": "ssh -i 'a b'"}, {"GIT_TERMINAL_PROMPT": ""}, {}, {}}
	if diff := cmp.Diff(wantEnv, res.env); diff != "" {
		t.Errorf("git env (-want +got):\n%s", diff)
	}
	if len(res.exported) != 4 || !strings.Contains(res.exported[3], "zq-exported") || strings.Contains(res.exported[2], "zq-exported") {
		t.Errorf("exported environments = %q, want the fourth call's alone to hold zq-exported", res.exported)
	}
}

// Private sources. The script points git at the Secret's files by path; the
// tests below run it against the fake git and then run what git was handed
// (the credential helper, GIT_SSH_COMMAND) the way git would, with a
// credentials directory whose name holds spaces, quotes and substitutions.

// adversarialHostRepos are repos whose user or host is written to break out
// of the quoting around the host in the credential helper, which is quoted
// twice (once for the helper's own shell, once for the script's).
var adversarialHostRepos = []string{
	`https://x'$(touch pwned)@h'o"st:1/r`,
	`https://h'o"st$(>pwned);&:1/r`,
	`https://u'$(:)@h'o"st<pwned>pwned:1/r`,
	`ssh://x'$(touch pwned)@h'o"st:1/r`,
	`git@h'o"st$(touch pwned):r`,
}

// credentialedAdversarialSources are adversarialSources with credentials,
// each under every prefix that takes them (as written, and behind https://,
// ssh:// and git@), the adversarialHostRepos with a branch and with a SHA,
// and a public source among them.
func credentialedAdversarialSources(root string) []calibanv1alpha1.Source {
	creds := &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-creds"}
	out := []calibanv1alpha1.Source{{Name: "public", Repo: "https://example.com/public.git", Ref: "main", Path: root + "/public"}}
	for _, s := range adversarialSources(root) {
		for _, prefix := range []string{"", "https://", "ssh://", "git@"} {
			c := s
			c.Name, c.Repo, c.CredentialsRef = prefix+s.Name, prefix+s.Repo, creds
			out = append(out, c)
		}
	}
	for _, repo := range adversarialHostRepos {
		out = append(out,
			calibanv1alpha1.Source{Name: repo, Repo: repo, Ref: "main", Path: root + "/host $(touch pwned)", CredentialsRef: creds},
			calibanv1alpha1.Source{Name: repo, Repo: repo, Ref: sha1Ref, Path: root + "/host 'sha'", CredentialsRef: creds})
	}
	return out
}

// expectedAuth is how the contract says a source authenticates: "https"
// (credential helper, prompts off) for an https:// repo with credentials,
// "ssh" (GIT_SSH_COMMAND) for an ssh:// or git@ one, and "" (as a public
// source) otherwise. The prefixes are case-sensitive, as git reads them.
func expectedAuth(s calibanv1alpha1.Source) string {
	switch {
	case s.CredentialsRef == nil:
		return ""
	case strings.HasPrefix(s.Repo, "https://"):
		return "https"
	case strings.HasPrefix(s.Repo, "ssh://"), strings.HasPrefix(s.Repo, "git@"):
		return "ssh"
	}
	return ""
}

// authedCall is a recorded git call as the public contract reads it, with
// how it was authenticated.
type authedCall struct {
	Args []string
	Auth string
}

// wantAuthedCalls are sourceCalls for each source, with the source's
// credentials on the call that talks to the remote (the clone, or the fetch
// of a SHA) and on no other: init, remote add and checkout never get any.
func wantAuthedCalls(sources []calibanv1alpha1.Source) []authedCall {
	var want []authedCall
	for _, s := range sources {
		for _, c := range sourceCalls(s.Ref, s.Repo, s.Path) {
			call := authedCall{Args: c}
			if c[0] == "clone" || len(c) > 2 && c[2] == "fetch" {
				call.Auth = expectedAuth(s)
			}
			want = append(want, call)
		}
	}
	return want
}

// authedCalls reads the recorded calls back: "https" is the two
// credential.helper options in front (the first resetting any helper the
// image configures) with GIT_TERMINAL_PROMPT=0 and nothing else; "ssh" is
// a non-empty GIT_SSH_COMMAND alone; "" is no variable set. Anything else
// is spelled out so that a diff shows it.
func authedCalls(res scriptRun) []authedCall {
	var got []authedCall
	for i, args := range res.calls {
		env := res.env[i]
		switch {
		case len(args) >= 4 && args[0] == "-c" && args[1] == "credential.helper=" && args[2] == "-c" &&
			strings.HasPrefix(args[3], "credential.helper=!") && cmp.Equal(env, map[string]string{"GIT_TERMINAL_PROMPT": "0"}):
			got = append(got, authedCall{Args: args[4:], Auth: "https"})
		case len(env) == 1 && env["GIT_SSH_COMMAND"] != "":
			got = append(got, authedCall{Args: args, Auth: "ssh"})
		case len(env) == 0:
			got = append(got, authedCall{Args: args})
		default:
			got = append(got, authedCall{Args: args, Auth: fmt.Sprintf("unexpected environment %q", env)})
		}
	}
	return got
}

// credentialHelperOf is the body of the helper a call hands git, the
// second credential.helper option without its "!", or "" when it has none.
func credentialHelperOf(args []string) string {
	var helpers []string
	for _, a := range args {
		if h, ok := strings.CutPrefix(a, "credential.helper="); ok {
			helpers = append(helpers, h)
		}
	}
	if len(helpers) != 2 || helpers[0] != "" || !strings.HasPrefix(helpers[1], "!") {
		return ""
	}
	return strings.TrimPrefix(helpers[1], "!")
}

// rigSecret is what the rig's Secret for source i holds under key: a
// marker found nowhere else, which no quoting alters, and in the password
// shell and printf syntax that must reach git as written.
func rigSecret(key string, i int) (value, marker string) {
	marker = fmt.Sprintf("zq-%s-%d", key, i)
	if key == "password" {
		return marker + `  'q' "d" $HOME %s`, marker
	}
	return marker, marker
}

// writeRigSecrets lays out, for each source with credentials, every key an
// https or ssh Secret can hold under credentialsDir/<index>, as the pod
// mounts them, and returns their markers. The username file ends in a
// newline, as `echo x > username` leaves it.
func writeRigSecrets(t testing.TB, credentialsDir string, sources []calibanv1alpha1.Source) []string {
	t.Helper()
	var markers []string
	for i, s := range sources {
		if s.CredentialsRef == nil {
			continue
		}
		dir := filepath.Join(credentialsDir, strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"username", "password", "ssh-privatekey", "known_hosts"} {
			content, marker := rigSecret(key, i)
			if key == "username" {
				content += "\n"
			}
			if err := os.WriteFile(filepath.Join(dir, key), []byte(content), 0o400); err != nil {
				t.Fatal(err)
			}
			markers = append(markers, marker)
		}
	}
	return markers
}

// hostileCredentialsDir is a credentials directory whose name the shell
// would split, unquote and substitute if the script let it.
func hostileCredentialsDir(t testing.TB) string {
	return filepath.Join(t.TempDir(), `creds 'q' "d" $(touch pwned) $HOME`)
}

func TestCloneScriptWithCredentialsPassesEveryValueAsOneArgument(t *testing.T) {
	dir := t.TempDir()
	rig := newShellRig(t, dir)
	work := newWorkDir(t, dir)
	sources := credentialedAdversarialSources(filepath.Join(dir, "ws"))
	credentialsDir := hostileCredentialsDir(t)
	markers := writeRigSecrets(t, credentialsDir, sources)

	res := rig.run(t, work, CloneScript(sources, credentialsDir))
	if res.err != nil {
		t.Fatalf("script failed: %v\nstderr: %s", res.err, res.stderr)
	}
	want := wantAuthedCalls(sources)
	if diff := cmp.Diff(want, authedCalls(res)); diff != "" {
		t.Errorf("git calls (-want +got):\n%s", diff)
	}
	// The rows above must exercise all three ways, or they prove little.
	seen := map[string]int{}
	for _, c := range want {
		seen[c.Auth]++
	}
	if seen["https"] < 10 || seen["ssh"] < 10 || seen[""] < 10 {
		t.Errorf("the sources exercise too little: %v calls by auth", seen)
	}
	if res.stdout != "" || res.stderr != "" {
		t.Errorf("the script printed: stdout %q, stderr %q", res.stdout, res.stderr)
	}
	expected := map[string]bool{"work": true, "work/a.git": true, "work/b": true, "work/main": true,
		"bin": true, "bin/git": true, "bin/touch": true, "work.git-log": true}
	if stray := strayFiles(t, dir, expected); len(stray) > 0 {
		t.Errorf("something other than git ran and left %q", stray)
	}
	// No secret value reaches git's argv or environment: git is told where
	// the files are, never what they hold.
	for i := range res.calls {
		recorded := append(append([]string{res.exported[i]}, res.calls[i]...), res.env[i]["GIT_SSH_COMMAND"], res.env[i]["GIT_TERMINAL_PROMPT"])
		for _, marker := range markers {
			for _, v := range recorded {
				if strings.Contains(v, marker) {
					t.Errorf("git call %d carries the secret %q in %q", i, marker, v)
				}
			}
		}
	}
}

// The helper git is handed, run as git runs a "!" helper:
// sh -c '<helper> "$@"' '<helper>' <action>, with the request on stdin.
func TestCloneScriptCredentialHelperAnswersOnlyItsRepoHost(t *testing.T) {
	username, _ := rigSecret("username", 0)
	password, _ := rigSecret("password", 0)
	answer := "username=" + username + "\npassword=" + password + "\n"
	tests := map[string]struct {
		repo, action, host string
		// protocol is the request's; "" means https.
		protocol string
		// expected
		answers bool
	}{
		"plain http to the repo's own host gets nothing": {
			repo: "https://git.example.com/team/app.git", action: "get", host: "git.example.com", protocol: "http",
		},
		"a request naming no protocol gets nothing": {
			repo: "https://git.example.com/team/app.git", action: "get", host: "git.example.com", protocol: "-",
		},
		"the repo's own host gets the username and password": {
			repo: "https://git.example.com/team/app.git", action: "get", host: "git.example.com", answers: true,
		},
		"a repo's own host:port gets them": {
			repo: "https://git.example.com:8443/team/app.git", action: "get", host: "git.example.com:8443", answers: true,
		},
		"a userinfo in the repo does not change the host": {
			repo: "https://bot@git.example.com/team/app.git", action: "get", host: "git.example.com", answers: true,
		},
		"another host gets nothing": {
			repo: "https://git.example.com/team/app.git", action: "get", host: "evil.example.com",
		},
		"a host that only starts with the repo's host gets nothing": {
			repo: "https://git.example.com/team/app.git", action: "get", host: "git.example.com.evil.example",
		},
		"the repo's host on another port gets nothing": {
			repo: "https://git.example.com:8443/team/app.git", action: "get", host: "git.example.com:9443",
		},
		"the repo's host without the repo's port gets nothing": {
			repo: "https://git.example.com:8443/team/app.git", action: "get", host: "git.example.com",
		},
		"the repo's host with a port the repo does not name gets nothing": {
			repo: "https://git.example.com/team/app.git", action: "get", host: "git.example.com:443",
		},
		"a request naming no host gets nothing": {
			repo: "https://git.example.com/team/app.git", action: "get", host: "",
		},
		"store is not answered": {
			repo: "https://git.example.com/team/app.git", action: "store", host: "git.example.com",
		},
		"erase is not answered": {
			repo: "https://git.example.com/team/app.git", action: "erase", host: "git.example.com",
		},
		"a host with quotes, a substitution and separators gets them for itself": {
			repo: `https://h'o"st$(>pwned);&:1/r`, action: "get", host: `h'o"st$(>pwned);&:1`, answers: true,
		},
		"a host with quotes, a substitution and separators on another port gets nothing": {
			repo: `https://h'o"st$(>pwned);&:1/r`, action: "get", host: `h'o"st$(>pwned);&:2`,
		},
		"a host with quotes and redirects behind a quoted userinfo gets them for itself": {
			repo: `https://u'$(:)@h'o"st<pwned>pwned:1/r`, action: "get", host: `h'o"st<pwned>pwned:1`, answers: true,
		},
		"a host with quotes and redirects does not answer its bare name": {
			repo: `https://u'$(:)@h'o"st<pwned>pwned:1/r`, action: "get", host: `h'o"st<pwned>pwned`,
		},
		// Go's URL parser refuses this userinfo (a space), so repoHost is
		// "" and the helper answers no host, not even the repo's own (the
		// Workspace validation refuses credentials on such a repo). These
		// rows pin that nothing leaks and nothing runs.
		"a repo Go cannot parse answers no host, not even its own": {
			repo: `https://x'$(touch pwned)@h'o"st:1/r`, action: "get", host: `h'o"st:1`,
		},
		"a repo Go cannot parse answers no other host either": {
			repo: `https://x'$(touch pwned)@h'o"st:1/r`, action: "get", host: "evil.example.com",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			rig := newShellRig(t, dir)
			work := newWorkDir(t, dir)
			cat, err := exec.LookPath("cat")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(cat, filepath.Join(rig.bin, "cat")); err != nil {
				t.Fatal(err)
			}
			credentialsDir := hostileCredentialsDir(t)
			sources := []calibanv1alpha1.Source{{Name: "s", Repo: test.repo, Ref: "main", Path: "/ws/s",
				CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-creds"}}}
			writeRigSecrets(t, credentialsDir, sources)
			res := rig.run(t, work, CloneScript(sources, credentialsDir))
			if res.err != nil || len(res.calls) != 1 {
				t.Fatalf("script: %v, calls %q\nstderr: %s", res.err, res.calls, res.stderr)
			}
			helper := credentialHelperOf(res.calls[0])
			if helper == "" {
				t.Fatalf("git was handed no credential helper: %q", res.calls[0])
			}

			cmd := exec.Command("/bin/sh", "-c", helper+` "$@"`, helper, test.action)
			cmd.Dir = work
			cmd.Env = []string{"PATH=" + rig.bin}
			request := "protocol=https\n"
			switch test.protocol {
			case "-":
				request = ""
			case "":
			default:
				request = "protocol=" + test.protocol + "\n"
			}
			if test.host != "" {
				request += "host=" + test.host + "\n"
			}
			cmd.Stdin = strings.NewReader(request + "\n")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Errorf("the helper failed: %v\nstderr: %s", err, stderr.String())
			}
			want := ""
			if test.answers {
				want = answer
			}
			if diff := cmp.Diff(want, stdout.String()); diff != "" {
				t.Errorf("helper %s for host %q (-want +got):\n%s", test.action, test.host, diff)
			}
			if stderr.Len() > 0 {
				t.Errorf("the helper printed to stderr: %q", stderr.String())
			}
			expected := map[string]bool{"work": true, "work/a.git": true, "work/b": true, "work/main": true,
				"bin": true, "bin/git": true, "bin/touch": true, "bin/cat": true, "work.git-log": true}
			if stray := strayFiles(t, dir, expected); len(stray) > 0 {
				t.Errorf("something other than the helper's cat ran and left %q", stray)
			}
		})
	}
}

// GIT_SSH_COMMAND, split into words by the shell as git has it run:
// the Secret's key and known_hosts by path, host keys checked against that
// file alone, and nothing the image or an agent could add.
func TestCloneScriptSSHCommandChecksHostKeysWithTheSecretsFiles(t *testing.T) {
	dir := t.TempDir()
	rig := newShellRig(t, dir)
	work := newWorkDir(t, dir)
	credentialsDir := hostileCredentialsDir(t)
	creds := &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-ssh"}
	sources := []calibanv1alpha1.Source{
		{Name: "public", Repo: "ssh://git@git.example.com/public.git", Ref: "main", Path: "/ws/public"},
		{Name: "ssh", Repo: "ssh://git@git.example.com:2222/team/app.git", Ref: "main", Path: "/ws/app", CredentialsRef: creds},
		{Name: "scp", Repo: "git@git.example.com:team/lib.git", Ref: sha1Ref, Path: "/ws/lib", CredentialsRef: creds},
	}
	res := rig.run(t, work, CloneScript(sources, credentialsDir))
	if res.err != nil {
		t.Fatalf("script failed: %v\nstderr: %s", res.err, res.stderr)
	}
	if diff := cmp.Diff(wantAuthedCalls(sources), authedCalls(res)); diff != "" {
		t.Fatalf("git calls (-want +got):\n%s", diff)
	}
	words := func(dir string) []string {
		return []string{"ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
			"-i", dir + "/ssh-privatekey", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + dir + "/known_hosts",
			"-o", "GlobalKnownHostsFile=/dev/null", "-o", "UpdateHostKeys=no"}
	}
	// The calls: the public clone, the ssh clone (source 1), then init,
	// remote add, fetch (source 2) and checkout.
	want := map[int][]string{1: words(credentialsDir + "/1"), 4: words(credentialsDir + "/2")}
	for i := range res.calls {
		command, set := res.env[i]["GIT_SSH_COMMAND"]
		if _, ok := want[i]; !ok {
			if set {
				t.Errorf("git call %d %q got GIT_SSH_COMMAND %q", i, res.calls[i], command)
			}
			continue
		}
		for _, must := range []string{"StrictHostKeyChecking=yes", "BatchMode=yes", "IdentitiesOnly=yes"} {
			if !strings.Contains(command, must) {
				t.Errorf("GIT_SSH_COMMAND of call %d lacks %s: %q", i, must, command)
			}
		}
		for _, never := range []string{"StrictHostKeyChecking=no", "StrictHostKeyChecking=accept-new", "StrictHostKeyChecking=off"} {
			if strings.Contains(command, never) {
				t.Errorf("GIT_SSH_COMMAND of call %d turns host-key checking off: %q", i, command)
			}
		}
		cmd := exec.Command("/bin/sh", "-c", "set -- "+command+`; printf '%s\0' "$@"`)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + rig.bin, "HOME=/nonexistent"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("splitting GIT_SSH_COMMAND %q: %v\n%s", command, err, out)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if diff := cmp.Diff(want[i], got); diff != "" {
			t.Errorf("GIT_SSH_COMMAND of call %d as words (-want +got):\n%s", i, diff)
		}
	}
	expected := map[string]bool{"work": true, "work/a.git": true, "work/b": true, "work/main": true,
		"bin": true, "bin/git": true, "bin/touch": true, "work.git-log": true}
	if stray := strayFiles(t, dir, expected); len(stray) > 0 {
		t.Errorf("something other than git ran and left %q", stray)
	}
}
