// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package charts_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Every value of the operator chart is in the values table of
// docs/deploying.md#values, and the table names no value the chart lacks.
// A map value documented as a whole (resources, admission.params) covers
// its keys.
func TestTheValuesTableDocumentsEveryValue(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root(t), "charts", "caliban-operator", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + k
			paths[p] = true
			if sub, ok := v.(map[string]any); ok {
				walk(p+".", sub)
			}
		}
	}
	walk("", values)

	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "deploying.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "\n### Values\n")
	if start < 0 {
		t.Fatal("docs/deploying.md has no ### Values section")
	}
	section := text[start+1:]
	if end := strings.Index(section, "\n### "); end > 0 {
		section = section[:end]
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z0-9.]+)` \\|").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}
	if len(documented) < 40 {
		t.Fatalf("the values table documents only %d values", len(documented))
	}
	for _, p := range slices.Sorted(maps.Keys(documented)) {
		if !paths[p] {
			t.Errorf("docs/deploying.md#values documents %s, which the chart does not have", p)
		}
	}
	for p := range paths {
		covered := false
		for q := p; ; {
			if documented[q] {
				covered = true
				break
			}
			i := strings.LastIndex(q, ".")
			if i < 0 {
				break
			}
			q = q[:i]
		}
		// A group (image, leaderElection ...) is covered by its members.
		hasMember := false
		for d := range documented {
			hasMember = hasMember || strings.HasPrefix(d, p+".")
		}
		if !covered && !hasMember {
			t.Errorf("value %s is not in docs/deploying.md#values", p)
		}
	}
}
