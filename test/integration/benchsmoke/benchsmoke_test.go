// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package benchsmoke runs the benchmark harness of `make bench` end to end
// at a tiny size, so that `make test-integration` catches a harness that no
// longer runs: a broken phase, a metric the report can no longer find, a
// plot that is not written. It checks that every figure is there, never
// what it is.
package benchsmoke

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/test/bench/harness"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

func TestTheBenchmarkRunsAndReportsEveryFigure(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := framework.BuildOperator(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := harness.Run(ctx, harness.Config{
		N:                  20,
		Paced:              20,
		CeilingDuration:    time.Second,
		CeilingConcurrency: 8,
		ResyncSeconds:      3,
		CPUProfile:         2 * time.Second,
		ColdStartProfile:   2 * time.Second,
		RunningTimeout:     2 * time.Minute,
		OperatorBinary:     bin,
		ResultsDir:         dir,
		Log:                testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}

	rows := 0
	values := map[string]float64{} // by measure, the last phase's when several share one
	for line := range strings.Lines(res.Table) {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 4 || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") || strings.TrimSpace(cells[0]) == "Phase" {
			continue
		}
		rows++
		v, err := strconv.ParseFloat(strings.TrimSpace(cells[2]), 64)
		if err != nil {
			t.Errorf("row %q has no number: %v", line, err)
		}
		values[strings.TrimSpace(cells[1])] = v
	}
	// The bare client is a floor only if it does the operator's work: the
	// pin, three children, Running and an Event per task, no more.
	if got := values["bare client API requests per task (apiserver)"]; got < 6 || got > 6.5 {
		t.Errorf("the bare client sent %v requests per task, want the operator's 6", got)
	}
	for _, m := range []string{"bare client CPU per task", "bare client CPU until caches synced"} {
		if got := values[m]; got <= 0 {
			t.Errorf("%s is %v, want a measurement", m, got)
		}
	}
	if rows < 30 {
		t.Errorf("the table has %d rows, want every figure:\n%s", rows, res.Table)
	}
	for _, want := range []string{"write-bound task limit", "Sandbox Ready → Running p99", "operator API writes per task", "start → leader", "start → caches synced"} {
		if !strings.Contains(res.Table, want) {
			t.Errorf("the table has no %q row", want)
		}
	}
	for _, f := range append([]string{res.Report, res.Latest, res.Plot}, res.Profiles...) {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s was not written (%v)", f, err)
		}
	}
	if png, err := os.ReadFile(res.Plot); err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Errorf("%s is not a PNG (%v)", res.Plot, err)
	}
	if len(res.Profiles) != 5 {
		t.Errorf("profiles %v, want three CPU profiles (burst, cold start, steady state) and a heap profile from the operator's pprof endpoint, and the apiserver's CPU profile of the cold start", res.Profiles)
	}
	if !slices.ContainsFunc(res.Profiles, func(p string) bool { return strings.HasSuffix(p, "-coldstart-apiserver-cpu.pprof") }) {
		t.Errorf("profiles %v: none is the apiserver's", res.Profiles)
	}
	// A Go binary always says whether it carries VCS stamps; "unknown"
	// alone means the harness could not read the binary it ran.
	if !strings.Contains(res.Markdown, "- operator binary: ") || strings.Contains(res.Markdown, "- operator binary: unknown\n") {
		t.Errorf("the report does not say what the operator binary was built from:\n%s", res.Markdown)
	}
	t.Logf("report:\n%s", res.Markdown)
}

// testWriter sends the harness's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
