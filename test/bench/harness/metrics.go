// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"sort"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// samples is a scrape of /metrics, restricted to the families asked for.
type samples struct{ framework.Metrics }

func parseMetrics(text string, families ...string) (samples, error) {
	m, err := framework.ParseMetrics(text, families...)
	return samples{m}, err
}

// sum adds the samples of name whose labels include want.
func (m samples) sum(name string, want map[string]string) float64 {
	v, _ := m.Sum(name, want)
	return v
}

// by sums the samples of name whose labels include want, grouped by the
// values of the labels in by (joined with a space).
func (m samples) by(name string, want map[string]string, by ...string) map[string]float64 {
	return m.By(name, want, by...)
}

// delta is after - before, key by key (keys only in before count as 0
// after: a counter does not disappear, a series that did is ignored).
func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, a := range after {
		if d := a - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// sortedKeys orders a breakdown by value, largest first, then by key.
func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}
