// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"runtime"
	"strings"
	"testing"

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
