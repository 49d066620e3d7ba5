package harness

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// samples is a scrape of the Prometheus text format, restricted to the
// metric names asked for. The apiserver's /metrics is several megabytes;
// only the few families the report needs are decoded.
type samples []sample

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics reads `name{label="value",...} value [timestamp]` lines of
// the families in names (all when names is empty), skipping comments.
func parseMetrics(text string, names ...string) (samples, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out samples
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		name := line[:end]
		if len(want) > 0 && !want[name] {
			continue
		}
		s := sample{name: name, labels: map[string]string{}}
		rest := line[end:]
		if strings.HasPrefix(rest, "{") {
			var err error
			if rest, err = parseLabels(rest[1:], s.labels); err != nil {
				return nil, fmt.Errorf("metrics line of %s: %w", name, err)
			}
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line of %s has no value", name)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line of %s: %w", name, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, nil
}

// parseLabels reads `k="v",...}` into labels and returns what follows.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, ", ")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.Index(s, `="`)
		if eq < 0 {
			return "", fmt.Errorf("label in %q", s)
		}
		key := s[:eq]
		s = s[eq+2:]
		var value strings.Builder
		for {
			if s == "" {
				return "", errors.New("unterminated label value")
			}
			c := s[0]
			s = s[1:]
			if c == '"' {
				break
			}
			if c == '\\' && s != "" {
				if s[0] == 'n' {
					value.WriteByte('\n')
				} else {
					value.WriteByte(s[0])
				}
				s = s[1:]
				continue
			}
			value.WriteByte(c)
		}
		labels[key] = value.String()
	}
}

// sum adds the samples of name whose labels include want.
func (m samples) sum(name string, want map[string]string) float64 {
	var total float64
	for _, s := range m {
		if s.name == name && hasLabels(s.labels, want) {
			total += s.value
		}
	}
	return total
}

// by sums the samples of name whose labels include want, grouped by the
// values of the labels in by (joined with a space).
func (m samples) by(name string, want map[string]string, by ...string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.name != name || !hasLabels(s.labels, want) {
			continue
		}
		var key []string
		for _, l := range by {
			key = append(key, s.labels[l])
		}
		out[strings.Join(key, " ")] += s.value
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
