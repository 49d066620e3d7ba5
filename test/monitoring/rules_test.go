// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package monitoring

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// ruleFilesPlaceholder is what every rule test file names as its rule
// file: the PrometheusRule, which promtool cannot read. The test replaces
// it with the PrometheusRule's spec as a plain rules file.
const ruleFilesPlaceholder = "../prometheusrule.yaml"

func root(t *testing.T) string {
	t.Helper()
	r, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// promtool is the binary make tools (and make test-unit) builds from
// hack/tools/prometheus. Without it the rules are untested, so its absence
// fails the test rather than skipping it.
func promtool(t *testing.T) string {
	t.Helper()
	path := filepath.Join(root(t), "bin", "promtool")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%v: build promtool with `make bin/promtool` (make test-unit and make tools do it too)", err)
	}
	return path
}

// ruleTestFiles are the files of manifests/monitoring/tests, sorted.
func ruleTestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(t), TestsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no rule tests in %s", TestsDir)
	}
	return files
}

// ruleTestFile is the part of promtool's test file format the coverage
// check reads.
type ruleTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func TestTheAlertsPassPromtoolsUnitTests(t *testing.T) {
	bin := promtool(t)
	dir := t.TempDir()
	rules, err := RulesFile(root(t))
	if err != nil {
		t.Fatal(err)
	}
	rulesPath := filepath.Join(dir, "caliban-operator.rules.yaml")
	if err := os.WriteFile(rulesPath, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", rulesPath).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules refuses the PrometheusRule's spec: %v\n%s", err, out)
	}
	for _, file := range ruleTestFiles(t) {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := yamlv3.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]any{ruleFilesPlaceholder}, doc["rule_files"]); diff != "" {
				t.Fatalf("rule_files must name the PrometheusRule (-want +got):\n%s", diff)
			}
			doc["rule_files"] = []any{rulesPath}
			out, err := yamlv3.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, out, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "test", "rules", path).CombinedOutput(); err != nil {
				t.Errorf("promtool test rules %s: %v\n%s", name, err, out)
			}
		})
	}
}

// A rule test that only ever expects silence would pass for an alert that
// can never fire, and one that only expects an alert would pass for an
// alert that always fires: every alert needs both, and no test may name an
// alert the PrometheusRule does not have.
func TestEveryAlertHasAFiringAndAQuietRuleTest(t *testing.T) {
	rule, err := LoadRule(root(t))
	if err != nil {
		t.Fatal(err)
	}
	type cases struct{ Fires, Quiet bool }
	want := map[string]cases{}
	for _, a := range rule.Alerts() {
		want[a.Alert] = cases{Fires: true, Quiet: true}
	}
	if len(want) == 0 {
		t.Fatal("the PrometheusRule has no alerts")
	}
	got := map[string]cases{}
	for _, file := range ruleTestFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var f ruleTestFile
		if err := yamlv3.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, tc := range f.Tests {
			for _, at := range tc.AlertRuleTest {
				c := got[at.Alertname]
				if len(at.ExpAlerts) > 0 {
					c.Fires = true
				} else {
					c.Quiet = true
				}
				got[at.Alertname] = c
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the rule tests' cases per alert differ from a firing and a quiet case for each alert of the PrometheusRule (-want +got):\n%s", diff)
	}
}

// The routing and the on-call reader rely on these: a severity, a summary
// and a description, and a runbook_url that is a section of
// docs/observability.md.
func TestEveryAlertHasASeverityASummaryAndARunbook(t *testing.T) {
	rule, err := LoadRule(root(t))
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(t, filepath.Join(root(t), "docs", "observability.md"))
	for _, a := range rule.Alerts() {
		if s := a.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
			t.Errorf("%s: severity %q, want critical, warning or info", a.Alert, s)
		}
		for _, k := range []string{"summary", "description"} {
			if strings.TrimSpace(a.Annotations[k]) == "" {
				t.Errorf("%s has no %s", a.Alert, k)
			}
		}
		anchor := strings.ToLower(a.Alert)
		if got, want := a.Annotations["runbook_url"], RunbookBase+"#"+anchor; got != want {
			t.Errorf("%s: runbook_url %q, want %q", a.Alert, got, want)
		}
		if !anchors[anchor] {
			t.Errorf("%s: docs/observability.md has no section #%s", a.Alert, anchor)
		}
		if a.For == "" {
			t.Errorf("%s has no for: one bad scrape or evaluation would page", a.Alert)
		}
	}
}

// markdownAnchors are the anchors GitHub gives the headings of a Markdown
// file: lower case, punctuation other than '-' and '_' dropped, spaces as
// '-'.
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		anchor := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")
		out[anchor] = true
	}
	return out
}

func TestMarkdownAnchorsAreGitHubs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md") // verify-doc-refs: ignore (a scratch file)
	text := "# Title\n## CalibanOperatorAbsent\n### The rule tests: how they run\n```sh\n# not a heading\n```\nprose # not one either\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(markdownAnchors(t, path)))
	want := []string{"calibanoperatorabsent", "the-rule-tests-how-they-run", "title"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("anchors (-want +got):\n%s", diff)
	}
}

// YAML reads an unquoted `values: 0x30` (thirty zeros in promtool's series
// notation) as the hexadecimal number 48, and promtool then sees one sample
// of 48: a test over it can pass for the wrong reason. Every series' values
// must be a string in the file.
func TestEverySeriesOfTheRuleTestsIsWrittenAsAString(t *testing.T) {
	for _, file := range ruleTestFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc yamlv3.Node
		if err := yamlv3.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		seen := 0
		var walk func(n *yamlv3.Node)
		walk = func(n *yamlv3.Node) {
			if n.Kind == yamlv3.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if k, v := n.Content[i], n.Content[i+1]; k.Value == "values" {
						seen++
						if v.Kind != yamlv3.ScalarNode || v.Tag != "!!str" {
							t.Errorf("%s:%d: values %s is read as %s, not as a series: quote it", filepath.Base(file), v.Line, v.Value, v.Tag)
						}
					}
				}
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(&doc)
		if seen == 0 && !strings.Contains(string(data), "input_series: []") {
			t.Errorf("%s: found no series values to check", filepath.Base(file))
		}
	}
}
