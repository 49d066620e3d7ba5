// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMetrics(t *testing.T) {
	const text = `# HELP rest_client_requests_total Requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",method="GET"} 3
rest_client_requests_total{code="201",method="PATCH"} 5
# HELP workqueue_depth Depth.
# TYPE workqueue_depth gauge
workqueue_depth{name="calibantask"} 2
# HELP sync_seconds Sync time.
# TYPE sync_seconds histogram
sync_seconds_bucket{controller="a\"b",le="0.1"} 1
sync_seconds_bucket{controller="a\"b",le="+Inf"} 4
sync_seconds_sum{controller="a\"b"} 0.9
sync_seconds_count{controller="a\"b"} 4
`
	all, err := ParseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		name  string
		want  map[string]string
		sum   float64
		found bool
	}{
		"a counter sums over the series that match": {name: "rest_client_requests_total", sum: 8, found: true},
		"labels narrow the sum":                     {name: "rest_client_requests_total", want: map[string]string{"method": "PATCH"}, sum: 5, found: true},
		"a gauge":                                   {name: "workqueue_depth", sum: 2, found: true},
		"a histogram's count, with an escaped label value": {
			name: "sync_seconds_count", want: map[string]string{"controller": `a"b`}, sum: 4, found: true,
		},
		"a histogram's buckets by le":   {name: "sync_seconds_bucket", want: map[string]string{"le": "+Inf"}, sum: 4, found: true},
		"an absent family is not found": {name: "nothing"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sum, found := all.Sum(tc.name, tc.want)
			if sum != tc.sum || found != tc.found {
				t.Errorf("Sum = %v, %v; want %v, %v", sum, found, tc.sum, tc.found)
			}
		})
	}
	only, err := ParseMetrics(text, "workqueue_depth")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Metrics{{Name: "workqueue_depth", Labels: map[string]string{"name": "calibantask"}, Value: 2}}, only); diff != "" {
		t.Errorf("families filter (-want +got):\n%s", diff)
	}
	if got := all.By("rest_client_requests_total", nil, "method", "code"); !cmp.Equal(got, map[string]float64{"GET 200": 3, "PATCH 201": 5}) {
		t.Errorf("By = %v", got)
	}
	if _, err := ParseMetrics("not a metric line {"); err == nil {
		t.Error("a malformed scrape parsed")
	}
}
