// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestTheBuildInfoNamesTheRunningBuild(t *testing.T) {
	m := NewMetrics()
	m.RegisterBuildInfo("v0.3.0", "1a2b3c4")
	want := `
# HELP caliban_build_info Always 1; the labels say which build of the operator runs.
# TYPE caliban_build_info gauge
caliban_build_info{commit="1a2b3c4",goversion="` + runtime.Version() + `",version="v0.3.0"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "caliban_build_info"); err != nil {
		t.Error(err)
	}
}

// A healthy operator that has synced nothing yet already exports every
// series its alerts and dashboard read: a panel shows 0, not "No data".
func TestTheSeriesTheDashboardReadsExistFromTheStart(t *testing.T) {
	m := NewMetrics()
	for family, want := range map[string]int{
		// Two controllers, each with its errors and two results.
		"caliban_controller_sync_errors_total": 2,
		"caliban_controller_syncs_total":       4,
		// A healthy start's two moves.
		"caliban_task_phase_transitions_total": 2,
		// Five stages, warm and cold.
		"caliban_task_start_duration_seconds": 10,
	} {
		if n, err := testutil.GatherAndCount(m.Registry, family); err != nil || n != want {
			t.Errorf("%s has %d series at start (%v), want %d", family, n, err, want)
		}
	}
}

// client-go's request metrics reach the vectors by their labels, each
// request once, however often the same labels come back.
func TestTheRequestAdaptersCountEachRequestUnderItsLabels(t *testing.T) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests"}, []string{"code", "method", "host"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "latency"}, []string{"verb", "host"})
	results, latencies := newResultAdapter(requests), newLatencyAdapter(latency)
	for range 3 {
		results.Increment(t.Context(), "200", "PATCH", "api")
		latencies.Observe(t.Context(), "PATCH", url.URL{Host: "api", Path: "/x"}, time.Second)
	}
	results.Increment(t.Context(), "409", "PATCH", "api")
	latencies.Observe(t.Context(), "POST", url.URL{Host: "api"}, time.Second)
	for labels, want := range map[[3]string]float64{{"200", "PATCH", "api"}: 3, {"409", "PATCH", "api"}: 1, {"200", "POST", "api"}: 0} {
		if got := testutil.ToFloat64(requests.WithLabelValues(labels[0], labels[1], labels[2])); got != want {
			t.Errorf("requests %v = %v, want %v", labels, got, want)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(latency)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	observed := map[string]uint64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "verb" {
					observed[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if diff := cmp.Diff(map[string]uint64{"PATCH": 3, "POST": 1}, observed); diff != "" {
		t.Errorf("latency observations by verb (-want +got):\n%s", diff)
	}
}
