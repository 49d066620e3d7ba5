// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package codegen_test checks the generated CRDs: that the committed YAML is
// exactly what the API types generate, that the schema says what
// docs/crd-reference.md#spec and #spec-1 say, field by field, and that the
// operator's view of the Sandbox fits agent-sandbox's own CRD.
package codegen_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// TestSandboxViewFitsAgentSandboxCRD generates a schema from the operator's
// view of the Sandbox (pkg/apis/sandbox) and checks that every field in it
// is a field of agent-sandbox's CRD (test/crds, copied from the pinned
// module) with the same type: a field the real schema lacks would be pruned
// from every apply, and one of another type refused.
func TestSandboxViewFitsAgentSandboxCRD(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	run(t, root, "go", "tool", "controller-gen", "crd", "paths=./pkg/apis/sandbox/...", "output:crd:artifacts:config="+out)
	view := crdSchema(t, out, "Sandbox")
	real := crdSchema(t, filepath.Join(root, "test", "crds"), "Sandbox")
	missing := schemaMisfits("", view, real)
	if len(missing) > 0 {
		t.Errorf("the operator's Sandbox view has fields agent-sandbox's CRD does not accept as they are:\n%s", strings.Join(missing, "\n"))
	}
	// The check must be able to fail: a field the real CRD lacks is found.
	fake := map[string]any{"type": "object", "properties": map[string]any{"spec": map[string]any{"type": "object",
		"properties": map[string]any{"notAField": map[string]any{"type": "string"}}}}}
	if got := schemaMisfits("", fake, real); len(got) != 1 || !strings.Contains(got[0], "spec.notAField") {
		t.Errorf("schemaMisfits missed a field the CRD lacks: %v", got)
	}
}

// TestExtensionsViewFitsAgentSandboxCRDs is TestSandboxViewFitsAgentSandboxCRD
// for the view of agent-sandbox's extensions (pkg/apis/extensions): the
// template, the warm pool and the claim, against test/crds/extensions.
func TestExtensionsViewFitsAgentSandboxCRDs(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	run(t, root, "go", "tool", "controller-gen", "crd", "paths=./pkg/apis/extensions/...", "output:crd:artifacts:config="+out)
	for _, kind := range []string{"SandboxTemplate", "SandboxWarmPool", "SandboxClaim"} {
		view := crdSchema(t, out, kind)
		real := crdSchema(t, filepath.Join(root, "test", "crds", "extensions"), kind)
		if missing := schemaMisfits("", view, real); len(missing) > 0 {
			t.Errorf("the operator's %s view has fields agent-sandbox's CRD does not accept as they are:\n%s", kind, strings.Join(missing, "\n"))
		}
	}
}

// crdSchema is the v1beta1 openAPIV3Schema of the CRD of kind in dir.
func crdSchema(t *testing.T, dir, kind string) map[string]any {
	t.Helper()
	objs, err := framework.ReadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if k, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind"); k != kind {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			if vm["name"] != "v1beta1" {
				continue
			}
			s, found, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema")
			if found {
				return s
			}
		}
	}
	t.Fatalf("%s has no v1beta1 %s schema", dir, kind)
	return nil
}

// schemaMisfits lists the paths under view whose field real lacks or types
// differently.
func schemaMisfits(path string, view, real map[string]any) []string {
	var out []string
	if vt, rt := view["type"], real["type"]; vt != nil && rt != nil && vt != rt {
		out = append(out, fmt.Sprintf("%s: type %v, agent-sandbox says %v", path, vt, rt))
	}
	if items, ok := view["items"].(map[string]any); ok {
		realItems, _ := real["items"].(map[string]any)
		if realItems == nil {
			return append(out, path+"[]: not a list in agent-sandbox's CRD")
		}
		out = append(out, schemaMisfits(path+"[]", items, realItems)...)
	}
	props, _ := view["properties"].(map[string]any)
	realProps, _ := real["properties"].(map[string]any)
	for name, p := range props {
		child := strings.TrimPrefix(path+"."+name, ".")
		rp, ok := realProps[name].(map[string]any)
		if !ok {
			if real["x-kubernetes-preserve-unknown-fields"] == true {
				continue
			}
			out = append(out, child+": not in agent-sandbox's CRD")
			continue
		}
		pm, _ := p.(map[string]any)
		out = append(out, schemaMisfits(child, pm, rp)...)
	}
	sort.Strings(out)
	return out
}
