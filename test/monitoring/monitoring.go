// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package monitoring reads the monitoring artefacts of manifests/monitoring,
// the PrometheusRule, the Grafana dashboard and promtool's rule tests, for
// the tests that hold them to each other and to promtool (this package) and
// to the metrics the operator exports (test/integration/monitoring).
//
// The PrometheusRule is the one source of the rules: RulesFile turns its
// spec into the plain rules file promtool reads, so no second copy of the
// rules is kept.
package monitoring

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// The artefacts, relative to the repository root.
const (
	RuleFile      = "manifests/monitoring/prometheusrule.yaml"
	DashboardFile = "manifests/monitoring/dashboards/caliban-operator.json"
	TestsDir      = "manifests/monitoring/tests"
	// RunbookBase is where every alert's runbook_url points, followed by
	// "#" and the alert's name in lower case.
	RunbookBase = "https://github.com/caliban-ai/caliban-operator/blob/main/docs/observability.md"
)

// PrometheusRule is manifests/monitoring/prometheusrule.yaml, read strictly:
// a misspelt field is an error rather than a rule Prometheus ignores.
type PrometheusRule struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       RuleSpec `json:"spec"`
}

// Metadata is the part of an object's metadata the file sets.
type Metadata struct {
	Name string `json:"name"`
}

// RuleSpec is the PrometheusRule's spec, which is also a Prometheus rules
// file.
type RuleSpec struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is one group of rules.
type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []Rule `json:"rules"`
}

// Rule is an alerting rule (Alert set) or a recording rule (Record set).
type Rule struct {
	Alert         string            `json:"alert,omitempty"`
	Record        string            `json:"record,omitempty"`
	Expr          string            `json:"expr"`
	For           string            `json:"for,omitempty"`
	KeepFiringFor string            `json:"keep_firing_for,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// LoadRule reads the PrometheusRule of the repository at root.
func LoadRule(root string) (*PrometheusRule, error) {
	data, err := os.ReadFile(filepath.Join(root, RuleFile))
	if err != nil {
		return nil, err
	}
	var r PrometheusRule
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", RuleFile, err)
	}
	if r.APIVersion != "monitoring.coreos.com/v1" || r.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%s is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", RuleFile, r.APIVersion, r.Kind)
	}
	return &r, nil
}

// Alerts are the PrometheusRule's alerting rules, in file order.
func (r *PrometheusRule) Alerts() []Rule {
	var out []Rule
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			if rule.Alert != "" {
				out = append(out, rule)
			}
		}
	}
	return out
}

// RulesFile is the PrometheusRule's spec as a Prometheus rules file, the
// form promtool reads. The spec is copied as it is, field for field, not
// through Rule: a field Rule does not know still reaches promtool, which
// refuses what Prometheus would refuse.
func RulesFile(root string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(root, RuleFile))
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", RuleFile, err)
	}
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s has no spec", RuleFile)
	}
	return yaml.Marshal(spec)
}

// Query is one PromQL expression of the artefacts and where it is.
type Query struct {
	// Where names the alert, or the dashboard panel, the expression is in.
	Where string
	Expr  string
}

// dashboard is the part of Grafana's dashboard JSON the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title      string      `json:"title"`
	Type       string      `json:"type"`
	Datasource *datasource `json:"datasource"`
	Targets    []struct {
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	// A row holds its panels here while it is collapsed.
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func loadDashboard(root string) (*dashboard, error) {
	data, err := os.ReadFile(filepath.Join(root, DashboardFile))
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", DashboardFile, err)
	}
	return &d, nil
}

// flatPanels is every panel of the dashboard, those in collapsed rows too.
func (d *dashboard) flatPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// DashboardQueries are the expressions of every panel of the dashboard.
func DashboardQueries(root string) ([]Query, error) {
	d, err := loadDashboard(root)
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, p := range d.flatPanels() {
		for _, t := range p.Targets {
			if t.Expr != "" {
				out = append(out, Query{Where: "dashboard panel " + p.Title, Expr: t.Expr})
			}
		}
	}
	return out, nil
}

// RuleQueries are the expressions of every rule of the PrometheusRule.
func RuleQueries(root string) ([]Query, error) {
	r, err := LoadRule(root)
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			name := "alert " + rule.Alert
			if rule.Record != "" {
				name = "recording rule " + rule.Record
			}
			out = append(out, Query{Where: name, Expr: rule.Expr})
		}
	}
	return out, nil
}

// grafanaIntervals are the interval variables Grafana fills in itself; a
// duration stands in for them so that the expression parses as PromQL.
var grafanaIntervals = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)

// MetricNames are the names of the series an expression selects, sorted
// and without repeats. Grafana's interval variables are allowed; any other
// variable, and a selector without a literal metric name (a regular
// expression on __name__), is an error, because the names it reads could
// not be checked.
func MetricNames(expr string) ([]string, error) {
	e := grafanaIntervals.ReplaceAllString(expr, "5m")
	if i := strings.Index(e, "$"); i >= 0 {
		return nil, fmt.Errorf("%q uses a Grafana variable other than the interval ones at %q", expr, e[i:])
	}
	parsed, err := parser.NewParser(parser.Options{}).ParseExpr(e)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	names := map[string]bool{}
	var bad error
	parser.Inspect(parsed, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			bad = fmt.Errorf("%q selects %s, which names no metric", expr, vs)
			return nil
		}
		names[name] = true
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	return slices.Sorted(maps.Keys(names)), nil
}

// PrometheusOwn are series Prometheus writes itself (for every scrape
// target, and for the alerts it evaluates), never the operator: an
// expression may read them, and the operator's /metrics need not have them.
var PrometheusOwn = map[string]bool{
	"up":                                    true,
	"scrape_duration_seconds":               true,
	"scrape_samples_scraped":                true,
	"scrape_samples_post_metric_relabeling": true,
	"scrape_series_added":                   true,
	"ALERTS":                                true,
	"ALERTS_FOR_STATE":                      true,
}

// ReferencedMetrics maps the name of every series the dashboard and the
// rules read, except Prometheus' own, to where each is read. A histogram
// appears under the series name the expression uses: name_bucket, name_sum
// or name_count.
func ReferencedMetrics(root string) (map[string][]string, error) {
	rules, err := RuleQueries(root)
	if err != nil {
		return nil, err
	}
	panels, err := DashboardQueries(root)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, q := range append(rules, panels...) {
		names, err := MetricNames(q.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q.Where, err)
		}
		for _, n := range names {
			if PrometheusOwn[n] {
				continue
			}
			if !slices.Contains(out[n], q.Where) {
				out[n] = append(out[n], q.Where)
			}
		}
	}
	return out, nil
}
