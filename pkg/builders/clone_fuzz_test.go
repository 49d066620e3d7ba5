package builders

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// FuzzCloneScript runs the clone script for arbitrary source values and
// holds it to the contract: git gets exactly
// clone --depth 1 --branch <ref> -- <repo> <path> (or, for a full commit
// SHA, init, remote add, fetch of the commit and checkout) for each source
// whose <path>/.git is not a directory, the script prints nothing, succeeds, and
// nothing but git runs (no file appears, and the source after the fuzzed
// one is still cloned, so no value can end the script early).
func FuzzCloneScript(f *testing.F) {
	for _, s := range adversarialSources("/ws") {
		f.Add(s.Name, s.Repo, s.Ref, s.Path)
	}
	f.Add("", "", "", "")
	f.Add("n", "r", "main", "/")
	f.Add("n", "'", "'", "'")
	f.Add("n", `'\''`, `'"'"'`, `\'`)
	f.Add("n", "\xff\xfe", "\x01\x7f", "\t\r\n")
	f.Add("n", "$(touch pwned)", sha1Ref, "-C")
	f.Add("n", "r", sha256Ref, "'; touch pwned; '")
	f.Add("n", "r", "0123abc", "/ws/abbrev")

	rig := newShellRig(f, f.TempDir())
	f.Fuzz(func(t *testing.T, name, repo, ref, path string) {
		if strings.ContainsRune(name+repo+ref+path, 0) {
			t.Skip("argv cannot carry NUL")
		}
		dir := t.TempDir()
		work := filepath.Join(dir, "work")
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		sources := []calibanv1alpha1.Source{
			{Name: name, Repo: repo, Ref: ref, Path: path},
			{Name: "after", Repo: "https://example.com/after.git", Ref: "main", Path: "after"},
		}
		res := rig.run(t, work, CloneScript(sources, SourceCredentialsDir))
		if res.err != nil {
			t.Fatalf("script failed: %v\nstdout: %q\nstderr: %q", res.err, res.stdout, res.stderr)
		}
		if res.stdout != "" || res.stderr != "" {
			t.Fatalf("the script printed: stdout %q, stderr %q", res.stdout, res.stderr)
		}
		var want [][]string
		if !gitDirExists(work, path) {
			want = append(want, sourceCalls(ref, repo, path)...)
		}
		want = append(want, cloneArgv("main", "https://example.com/after.git", "after"))
		if diff := cmp.Diff(want, res.calls); diff != "" {
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
