// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// FuzzCloneScript runs the clone script for arbitrary source values, with
// or without credentials, and holds it to the contract: git gets exactly
// clone --depth 1 --branch <ref> -- <repo> <path> (or, for a full commit
// SHA, init, remote add, fetch of the commit and checkout) for each source
// whose <path>/.git is not a directory, the call that talks to the remote
// of a credentialed https://, ssh:// or git@ repo (and no other call) with
// the credential options in front of it or GIT_SSH_COMMAND, the script
// prints nothing, succeeds, and nothing but git runs (no file appears, and
// the credentialed source after the fuzzed one is still cloned, so no value
// can end the script early). The credentials directory is itself hostile.
func FuzzCloneScript(f *testing.F) {
	for _, s := range adversarialSources("/ws") {
		f.Add(s.Name, s.Repo, s.Ref, s.Path, false)
		for _, prefix := range []string{"", "https://", "ssh://", "git@"} {
			f.Add(s.Name, prefix+s.Repo, s.Ref, s.Path, true)
		}
	}
	for _, repo := range adversarialHostRepos {
		f.Add("host", repo, "main", "/ws/host", true)
		f.Add("host", repo, sha1Ref, "/ws/host", true)
	}
	f.Add("", "", "", "", false)
	f.Add("", "", "", "", true)
	f.Add("n", "r", "main", "/", false)
	f.Add("n", "'", "'", "'", false)
	f.Add("n", `'\''`, `'"'"'`, `\'`, false)
	f.Add("n", "\xff\xfe", "\x01\x7f", "\t\r\n", false)
	f.Add("n", "$(touch pwned)", sha1Ref, "-C", false)
	f.Add("n", "r", sha256Ref, "'; touch pwned; '", false)
	f.Add("n", "r", "0123abc", "/ws/abbrev", false)
	f.Add("n", `https://h'o"st:1/r`, sha256Ref, "/ws/s", true)
	f.Add("n", "https://[::1]:8443/r'", "main", "/ws/v6", true)
	f.Add("n", "https://", "main", "/ws/empty-host", true)
	f.Add("n", "git@", "main", "/ws/empty-host", true)
	f.Add("n", "HTTPS://git.example.com/r", "main", "/ws/upper", true)
	f.Add("n", "file:///srv/r", "main", "/ws/file", true)

	rig := newShellRig(f, f.TempDir())
	credentialsDir := `/run/it's "creds" $(touch pwned) $HOME`
	creds := &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-creds"}
	f.Fuzz(func(t *testing.T, name, repo, ref, path string, credentialed bool) {
		if strings.ContainsRune(name+repo+ref+path, 0) {
			t.Skip("argv cannot carry NUL")
		}
		dir := t.TempDir()
		work := filepath.Join(dir, "work")
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		fuzzed := calibanv1alpha1.Source{Name: name, Repo: repo, Ref: ref, Path: path}
		if credentialed {
			fuzzed.CredentialsRef = creds
		}
		after := calibanv1alpha1.Source{Name: "after", Repo: "https://example.com/after.git", Ref: "main", Path: "after", CredentialsRef: creds}
		res := rig.run(t, work, CloneScript([]calibanv1alpha1.Source{fuzzed, after}, credentialsDir))
		if res.err != nil {
			t.Fatalf("script failed: %v\nstdout: %q\nstderr: %q", res.err, res.stdout, res.stderr)
		}
		if res.stdout != "" || res.stderr != "" {
			t.Fatalf("the script printed: stdout %q, stderr %q", res.stdout, res.stderr)
		}
		var want []authedCall
		if !gitDirExists(work, path) {
			want = append(want, wantAuthedCalls([]calibanv1alpha1.Source{fuzzed})...)
		}
		want = append(want, authedCall{Args: cloneArgv("main", "https://example.com/after.git", "after"), Auth: "https"})
		if diff := cmp.Diff(want, authedCalls(res)); diff != "" {
			t.Fatalf("git calls (-want +got):\n%s", diff)
		}
		entries, err := os.ReadDir(work)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) > 0 {
			t.Fatalf("something other than git ran and left %v in the work directory", entries)
		}
	})
}

// gitDirExists is the kernel's answer to "is <path>/.git a directory" for
// a shell whose working directory is work, with no lexical cleaning.
func gitDirExists(work, path string) bool {
	p := path + "/.git"
	if !strings.HasPrefix(p, "/") {
		p = work + "/" + p
	}
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
