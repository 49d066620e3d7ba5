// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package monitoring

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

func TestMetricNamesAreTheSeriesAnExpressionReads(t *testing.T) {
	for name, tc := range map[string]struct {
		expr string
		want []string
	}{
		"a quantile reads the histogram's buckets": {
			expr: `histogram_quantile(0.99, sum by (verb, le) (rate(rest_client_request_duration_seconds_bucket[$__rate_interval])))`,
			want: []string{"rest_client_request_duration_seconds_bucket"},
		},
		"a ratio reads both sides": {
			expr: `sum by (controller) (rate(caliban_controller_sync_errors_total[5m])) / sum by (controller) (rate(caliban_controller_syncs_total[5m])) > 0.1`,
			want: []string{"caliban_controller_sync_errors_total", "caliban_controller_syncs_total"},
		},
		"absent reads what it misses": {
			expr: `absent(caliban_build_info)`,
			want: []string{"caliban_build_info"},
		},
		"a name given as a matcher": {
			expr: `{__name__="workqueue_depth", name="calibantask"}`,
			want: []string{"workqueue_depth"},
		},
		"up is read like any series": {
			expr: `up == 0 and on (instance) caliban_build_info`,
			want: []string{"caliban_build_info", "up"},
		},
		"Grafana's interval variables": {
			expr: `rate(caliban_task_phase_transitions_total[${__rate_interval}]) + rate(caliban_task_phase_transitions_total[$__interval]) + increase(caliban_task_phase_transitions_total[$__range])`,
			want: []string{"caliban_task_phase_transitions_total"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := MetricNames(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MetricNames(%q) (-want +got):\n%s", tc.expr, diff)
			}
		})
	}
}

// A name the check cannot see would be a name it cannot check.
func TestMetricNamesRefusesWhatItCannotName(t *testing.T) {
	for name, expr := range map[string]string{
		"a regular expression on the name": `{__name__=~"caliban_.*"}`,
		"a dashboard variable":             `workqueue_depth{name="$queue"}`,
		"not PromQL":                       `sum by (phase (caliban_tasks)`,
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := MetricNames(expr); err == nil {
				t.Errorf("MetricNames(%q) = %v, want an error", expr, got)
			}
		})
	}
}

// Prometheus' own series are not the operator's to export; everything
// else the rules and the dashboard read is, by the name the expression
// uses, and each is listed with where it is read.
func TestReferencedMetricsAreTheOperatorsSeriesAndWhereTheyAreRead(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		RuleFile: `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: fixture}
spec:
  groups:
  - name: g
    rules:
    - alert: Down
      expr: up == 0 and on (instance) caliban_build_info
      for: 5m
    - record: job:caliban_tasks:sum
      expr: sum by (job) (caliban_tasks)
`,
		DashboardFile: `{"panels": [
  {"type": "row", "title": "collapsed", "panels": [
    {"type": "timeseries", "title": "Latency", "targets": [
      {"expr": "histogram_quantile(0.99, sum by (le) (rate(workqueue_queue_duration_seconds_bucket[$__rate_interval])))"}]}]},
  {"type": "timeseries", "title": "Tasks", "targets": [{"expr": "sum(caliban_tasks)"}, {"expr": "sum(ALERTS)"}]}
]}`,
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReferencedMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"caliban_build_info":                      {"alert Down"},
		"caliban_tasks":                           {"recording rule job:caliban_tasks:sum", "dashboard panel Tasks"},
		"workqueue_queue_duration_seconds_bucket": {"dashboard panel Latency"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReferencedMetrics (-want +got):\n%s", diff)
	}
}

// Each of the panels reads the series it is about; a panel
// dropped, or pointed at another series, fails here by name.
func TestTheDashboardShowsWhatOperatorsNeed(t *testing.T) {
	queries, err := DashboardQueries(root(t))
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	quantiles := map[string]bool{}
	for _, q := range queries {
		names, err := MetricNames(q.Expr)
		if err != nil {
			t.Fatalf("%s: %v", q.Where, err)
		}
		for _, n := range names {
			read[n] = true
			if strings.Contains(q.Expr, "histogram_quantile(") && strings.HasSuffix(n, "_bucket") {
				quantiles[n] = true
			}
		}
	}
	for what, series := range map[string]string{
		"tasks by phase":            "caliban_tasks",
		"queue depth":               "workqueue_depth",
		"sync errors":               "caliban_controller_sync_errors_total",
		"apiserver errors by code":  "rest_client_requests_total",
		"the leader":                "leader_election_master_status",
		"the Sandbox API":           "caliban_sandbox_api_available",
		"phase transitions":         "caliban_task_phase_transitions_total",
		"the oldest task per phase": "caliban_task_oldest_seconds",
	} {
		if !read[series] {
			t.Errorf("no panel shows %s (%s)", what, series)
		}
	}
	for what, buckets := range map[string]string{
		"task start latency by stage": "caliban_task_start_duration_seconds_bucket",
		"queue wait":                  "workqueue_queue_duration_seconds_bucket",
		"apiserver request latency":   "rest_client_request_duration_seconds_bucket",
	} {
		if !quantiles[buckets] {
			t.Errorf("no panel shows %s as quantiles of %s", what, buckets)
		}
	}
}

// The dashboard is imported into Grafanas whose Prometheus data source has
// any name: every panel and query reads the ${datasource} variable, never
// a data source of the exporting Grafana.
func TestTheDashboardReadsOnlyItsDatasourceVariable(t *testing.T) {
	d, err := loadDashboard(root(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: the sidecar needs both", d.UID, d.Title)
	}
	found := false
	for _, v := range d.Templating.List {
		found = found || (v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus")
	}
	if !found {
		t.Errorf("no Prometheus data source variable named datasource among %+v", d.Templating.List)
	}
	want := &datasource{Type: "prometheus", UID: "${datasource}"}
	queries := 0
	for _, p := range d.flatPanels() {
		if p.Type == "row" {
			continue
		}
		if diff := cmp.Diff(want, p.Datasource); diff != "" {
			t.Errorf("panel %q data source (-want +got):\n%s", p.Title, diff)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			if diff := cmp.Diff(want, q.Datasource); diff != "" {
				t.Errorf("a query of panel %q: data source (-want +got):\n%s", p.Title, diff)
			}
		}
	}
	if queries == 0 {
		t.Error("the dashboard has no queries")
	}
}

// kubectl apply -k manifests/monitoring ships the dashboard file byte for
// byte, under a name that does not change with it, labelled for Grafana's
// sidecar, the PrometheusRule as it is written, and the PodMonitor that
// scrapes the operator's pods by their port.
func TestTheKustomizationShipsTheDashboardAndTheRule(t *testing.T) {
	objs, err := framework.Kustomize(root(t), "manifests/monitoring")
	if err != nil {
		t.Fatal(err)
	}
	dashboard, err := os.ReadFile(filepath.Join(root(t), DashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	rule, err := LoadRule(root(t))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		switch o.GetKind() {
		case "ConfigMap":
			if got := o.GetLabels()["grafana_dashboard"]; got != "1" {
				t.Errorf("the dashboard ConfigMap's grafana_dashboard label is %q, want \"1\"", got)
			}
			data := o.Object["data"].(map[string]any)
			if diff := cmp.Diff(string(dashboard), data[filepath.Base(DashboardFile)]); diff != "" {
				t.Errorf("the ConfigMap's dashboard differs from %s (-file +ConfigMap):\n%s", DashboardFile, diff)
			}
		case "PodMonitor":
			spec := o.Object["spec"].(map[string]any)
			selector, _ := spec["selector"].(map[string]any)["matchLabels"].(map[string]any)
			endpoint := spec["podMetricsEndpoints"].([]any)[0].(map[string]any)
			if selector["app.kubernetes.io/name"] != "caliban-operator" || endpoint["port"] != "metrics" {
				t.Errorf("the PodMonitor selects %v on port %v, want the operator's pods on port metrics", selector, endpoint["port"])
			}
		case "PrometheusRule":
			groups := o.Object["spec"].(map[string]any)["groups"].([]any)
			if len(groups) != len(rule.Spec.Groups) {
				t.Errorf("the rendered PrometheusRule has %d groups, the file %d", len(groups), len(rule.Spec.Groups))
			}
		}
	}
	want := []string{"ConfigMap caliban-system/caliban-operator-dashboard", "PodMonitor caliban-system/caliban-operator", "PrometheusRule caliban-system/caliban-operator"}
	slices.Sort(kinds)
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("manifests/monitoring renders (-want +got):\n%s", diff)
	}
}
