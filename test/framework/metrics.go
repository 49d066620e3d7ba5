// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"fmt"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one value of a Prometheus text exposition, named as its line
// is: a counter, gauge or untyped value under its family's name, a
// histogram as name_bucket{le}, name_sum and name_count, a summary as
// name{quantile}, name_sum and name_count.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics is a scrape of /metrics.
type Metrics []Sample

// ParseMetrics reads the Prometheus text format with Prometheus' own
// parser, keeping the families named (all when none is). The apiserver's
// /metrics is megabytes; a scrape that needs three families asks for them.
func ParseMetrics(text string, families ...string) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	keep := map[string]bool{}
	for _, f := range families {
		keep[f] = true
	}
	var out Metrics
	for name, family := range parsed {
		if len(keep) > 0 && !keep[name] {
			continue
		}
		for _, m := range family.GetMetric() {
			out = append(out, samplesOf(name, m)...)
		}
	}
	return out, nil
}

func samplesOf(name string, m *dto.Metric) []Sample {
	labels := func(extra ...string) map[string]string {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	switch {
	case m.Counter != nil:
		return []Sample{{name, labels(), m.GetCounter().GetValue()}}
	case m.Gauge != nil:
		return []Sample{{name, labels(), m.GetGauge().GetValue()}}
	case m.Untyped != nil:
		return []Sample{{name, labels(), m.GetUntyped().GetValue()}}
	case m.Histogram != nil:
		h := m.GetHistogram()
		out := []Sample{
			{name + "_sum", labels(), h.GetSampleSum()},
			{name + "_count", labels(), float64(h.GetSampleCount())},
		}
		for _, b := range h.GetBucket() {
			out = append(out, Sample{name + "_bucket", labels("le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)), float64(b.GetCumulativeCount())})
		}
		return out
	case m.Summary != nil:
		s := m.GetSummary()
		out := []Sample{
			{name + "_sum", labels(), s.GetSampleSum()},
			{name + "_count", labels(), float64(s.GetSampleCount())},
		}
		for _, q := range s.GetQuantile() {
			out = append(out, Sample{name, labels("quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)), q.GetValue()})
		}
		return out
	}
	return nil
}

// Sum adds the samples of name whose labels include want, and reports
// whether there was any.
func (m Metrics) Sum(name string, want map[string]string) (float64, bool) {
	var total float64
	found := false
	for _, s := range m {
		if s.Name == name && hasLabels(s.Labels, want) {
			total += s.Value
			found = true
		}
	}
	return total, found
}

// By sums the samples of name whose labels include want, grouped by the
// values of the labels in by (joined with a space).
func (m Metrics) By(name string, want map[string]string, by ...string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.Name != name || !hasLabels(s.Labels, want) {
			continue
		}
		key := make([]string, len(by))
		for i, l := range by {
			key[i] = s.Labels[l]
		}
		out[strings.Join(key, " ")] += s.Value
	}
	return out
}

func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}
