package main

import (
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

func TestChartVersion(t *testing.T) {
	for version, want := range map[string]string{
		"v0.3.0":                  "0.3.0",
		"0.3.0":                   "0.3.0",
		"v0.3.0-rc.1":             "0.3.0-rc.1",
		"v0.3.0-4-g1a2b3c4":       "0.3.0-4-g1a2b3c4",
		"v0.3.0-4-g1a2b3c4-dirty": "0.3.0-4-g1a2b3c4-dirty",
		"1a2b3c4":                 "0.0.0-1a2b3c4",
		"1a2b3c4-dirty":           "0.0.0-1a2b3c4-dirty",
		"dev":                     "0.0.0-dev",
	} {
		got, err := ChartVersion(version)
		if err != nil || got != want {
			t.Errorf("ChartVersion(%q) = %q, %v; want %q", version, got, err, want)
		}
	}
	for _, bad := range []string{"", "a b"} {
		if got, err := ChartVersion(bad); err == nil {
			t.Errorf("ChartVersion(%q) = %q, want an error", bad, got)
		}
	}
}

// The packages carry the stamped version and appVersion.
func TestRunStampsBothCharts(t *testing.T) {
	out := t.TempDir()
	charts := []string{filepath.Join("..", "..", "charts", "caliban-crds"), filepath.Join("..", "..", "charts", "caliban-operator")}
	if err := run("v1.2.3", out, charts); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"caliban-crds-1.2.3.tgz", "caliban-operator-1.2.3.tgz"} {
		path := filepath.Join(out, name)
		if _, err := os.Stat(path); err != nil {
			t.Fatal(err)
		}
		ch, err := loader.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.Version != "1.2.3" || ch.Metadata.AppVersion != "1.2.3" {
			t.Errorf("%s: version %q appVersion %q, want 1.2.3", name, ch.Metadata.Version, ch.Metadata.AppVersion)
		}
		if ch.Schema == nil && ch.Metadata.Name == "caliban-operator" {
			t.Errorf("%s carries no values.schema.json", name)
		}
	}
}
