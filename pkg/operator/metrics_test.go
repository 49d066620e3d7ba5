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
