// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	if err := run("v1.2.3", out, charts, imageStamp{}); err != nil {
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
		if ch.Metadata.Name != "caliban-operator" {
			continue
		}
		if ch.Schema == nil {
			t.Errorf("%s carries no values.schema.json", name)
		}
		// The image make image builds for this version, v and all.
		image, _ := ch.Values["image"].(map[string]any)
		if got := image["tag"]; got != "v1.2.3" {
			t.Errorf("%s: image.tag %v, want v1.2.3", name, got)
		}
	}
}

// A values.yaml whose image tag line was reworded is refused rather than
// packaged with a tag that does not follow the version.
func TestRunRefusesAnUnstampableImageTag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "caliban-operator")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "charts", "caliban-operator"))); err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(dir, "values.yaml")
	data, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	reworded := strings.Replace(string(data), "\n  tag: ", "\n  imageTag: ", 1)
	if reworded == string(data) {
		t.Fatal("charts/caliban-operator/values.yaml has no \"  tag:\" line")
	}
	if err := os.WriteFile(values, []byte(reworded), 0o644); err != nil {
		t.Fatal(err)
	}
	err = run("v1.2.3", t.TempDir(), []string{dir}, imageStamp{})
	if err == nil || !strings.Contains(err.Error(), "tag:") {
		t.Fatalf("run = %v, want an error naming the tag line", err)
	}
}

// make release stamps the operator chart with the release image's
// repository and digest too.
func TestRunStampsTheReleaseImage(t *testing.T) {
	out := t.TempDir()
	digest := "sha256:" + strings.Repeat("a", 64)
	chart := filepath.Join("..", "..", "charts", "caliban-operator")
	if err := run("v1.2.3", out, []string{chart}, imageStamp{repository: "registry.example/team/caliban-operator", digest: digest}); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(filepath.Join(out, "caliban-operator-1.2.3.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	image, _ := ch.Values["image"].(map[string]any)
	if image["repository"] != "registry.example/team/caliban-operator" || image["tag"] != "v1.2.3" || image["digest"] != digest {
		t.Errorf("image %v, want the release's repository, tag and digest", image)
	}
}

// make release stamps the agent images it pins into the operator chart,
// so that the chart runs the agent pods as the install manifest does.
func TestRunStampsThePinnedAgentImages(t *testing.T) {
	out := t.TempDir()
	caliband := "ghcr.io/caliban-ai/caliban:0.15.0@sha256:" + strings.Repeat("1a", 32)
	git := "alpine/git:v2.54.0@sha256:" + strings.Repeat("2b", 32)
	chart := filepath.Join("..", "..", "charts", "caliban-operator")
	if err := run("v1.2.3", out, []string{chart}, imageStamp{calibandImage: caliband, gitImage: git}); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(filepath.Join(out, "caliban-operator-1.2.3.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := ch.Values["agent"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"calibandImage": caliband, "gitImage": git},
		map[string]any{"calibandImage": agent["calibandImage"], "gitImage": agent["gitImage"]}); diff != "" {
		t.Errorf("agent images (-want +got):\n%s", diff)
	}
}
