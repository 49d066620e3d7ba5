// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package charts_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// Each monitoring value renders its own object of manifests/monitoring and
// nothing else, so that a Prometheus without Grafana (or the reverse) gets
// no object its cluster cannot use.
func TestEachMonitoringValueRendersItsOwnObject(t *testing.T) {
	base := byKey(t, render(t, framework.OperatorChart, nil), all)
	for name, tc := range map[string]struct {
		values map[string]any
		want   []string
	}{
		"monitoring.podMonitor.enabled": {
			values: map[string]any{"podMonitor": map[string]any{"enabled": true}},
			want:   []string{"PodMonitor " + namespace + "/caliban-operator"},
		},
		"monitoring.prometheusRule.enabled": {
			values: map[string]any{"prometheusRule": map[string]any{"enabled": true}},
			want:   []string{"PrometheusRule " + namespace + "/caliban-operator"},
		},
		"monitoring.dashboard.enabled": {
			values: map[string]any{"dashboard": map[string]any{"enabled": true}},
			want:   []string{"ConfigMap " + namespace + "/caliban-operator-dashboard"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var added []string
			for k := range byKey(t, render(t, framework.OperatorChart, map[string]any{"monitoring": tc.values}), all) {
				if _, ok := base[k]; !ok {
					added = append(added, k)
				}
			}
			slices.Sort(added)
			if diff := cmp.Diff(tc.want, added); diff != "" {
				t.Errorf("%s adds (-want +got):\n%s", name, diff)
			}
		})
	}
}

// The labels a Prometheus selects rules by, and the namespace a Grafana
// sidecar searches, are the installation's to choose.
func TestTheMonitoringObjectsTakeTheirLabelsAndNamespace(t *testing.T) {
	objs := byKey(t, render(t, framework.OperatorChart, map[string]any{"monitoring": map[string]any{
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}},
		"dashboard":      map[string]any{"enabled": true, "namespace": "grafana"},
	}}), all)
	rule := objs["PrometheusRule "+namespace+"/caliban-operator"]
	if rule == nil {
		t.Fatalf("no PrometheusRule in %v", slices.Sorted(maps.Keys(objs)))
	}
	want := map[string]string{
		"app.kubernetes.io/name":      "caliban-operator",
		"app.kubernetes.io/component": "monitoring",
		"release":                     "kube-prometheus-stack",
	}
	if diff := cmp.Diff(want, rule.GetLabels()); diff != "" {
		t.Errorf("the PrometheusRule's labels, Helm's aside (-want +got):\n%s", diff)
	}
	if objs["ConfigMap grafana/caliban-operator-dashboard"] == nil {
		t.Errorf("monitoring.dashboard.namespace grafana: no dashboard ConfigMap there among %v", slices.Sorted(maps.Keys(objs)))
	}
}
