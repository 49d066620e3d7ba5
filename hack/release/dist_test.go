// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build release

package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// dist is the release directory make release wrote, whose artefacts
// TestTheReleaseAgreesWithItself checks against each other. The file
// builds only with the release tag: the check needs a release.
var dist = flag.String("dist", "", "a release directory to check (make release)")

// The artefacts of a release directory agree with each other: the image
// the manifest and the chart run is the layout's, the krew manifest's and
// SHA256SUMS's sums are the files', and the same commit builds the same
// image again. make release runs it on what it wrote (-dist).
func TestTheReleaseAgreesWithItself(t *testing.T) {
	if *dist == "" {
		t.Fatal("no -dist: run it as make release does, on the release it wrote")
	}
	rec, err := readRecord(*dist)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := readLayout(filepath.Join(*dist, layoutDir))
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := idx.Digest()
	if digest.String() != rec.Digest {
		t.Errorf("layout index %s, release.json %s", digest, rec.Digest)
	}
	pinned := rec.Image + ":" + rec.Version + "@" + rec.Digest
	checkLayoutArchive(t, filepath.Join(*dist, layoutArchive), rec)

	manifest, err := os.ReadFile(filepath.Join(*dist, installFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(manifest), "image: "+pinned); n != 1 {
		t.Errorf("%s names %s %d times, want the Deployment's once", installFile, pinned, n)
	}
	// The agent pods' images: pinned, and the manifest's and the chart's
	// the ones release.json names (ADR 0031).
	for _, setting := range agentImageSettings {
		image := rec.AgentImages[setting]
		if err := checkPinned(setting, image, recordFile); err != nil {
			t.Error(err)
		}
		if n := strings.Count(string(manifest), fmt.Sprintf("name: %s\n          value: %s\n", setting, image)); n != 1 {
			t.Errorf("%s sets %s to %s %d times, want the Deployment's once", installFile, setting, image, n)
		}
	}
	if strings.Contains(string(manifest), ":latest") {
		t.Errorf("%s names a :latest image", installFile)
	}

	var chartImage string
	for _, c := range rec.Charts {
		ch, err := loader.Load(filepath.Join(*dist, c))
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.AppVersion != strings.TrimPrefix(rec.Version, "v") {
			t.Errorf("%s: appVersion %s, want %s", c, ch.Metadata.AppVersion, rec.Version)
		}
		img, ok := ch.Values["image"].(map[string]any)
		if !ok {
			continue
		}
		chartImage = img["repository"].(string) + ":" + img["tag"].(string) + "@" + img["digest"].(string)
		agent, _ := ch.Values["agent"].(map[string]any)
		got := agentImages{config.EnvCalibandImage: fmt.Sprint(agent["calibandImage"]), config.EnvGitImage: fmt.Sprint(agent["gitImage"])}
		if diff := cmp.Diff(rec.AgentImages, got); diff != "" {
			t.Errorf("%s: agent images (-release.json +chart):\n%s", c, diff)
		}
	}
	if chartImage != pinned {
		t.Errorf("the operator chart runs %q, want %s", chartImage, pinned)
	}

	sums, err := readSums(filepath.Join(*dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	for file, sum := range sums {
		if got, err := sha256File(filepath.Join(*dist, file)); err != nil || got != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s (%v)", file, got, sum, err)
		}
	}
	krew, err := os.ReadFile(filepath.Join(*dist, krewFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pluginPlatforms {
		archive := pluginArchive(p)
		if sums[archive] == "" || !strings.Contains(string(krew), sums[archive]) {
			t.Errorf("the krew manifest lacks %s's sha256 %q", archive, sums[archive])
		}
		checkPluginArchive(t, filepath.Join(*dist, archive))
	}

	// Built again from the same commit, into another directory: one digest.
	again := t.TempDir()
	o := options{version: rec.Version, image: rec.Image, registry: rec.Registry, out: again, source: "https://github.com/caliban-ai/caliban-operator",
		calibandImage: rec.AgentImages[config.EnvCalibandImage], gitImage: rec.AgentImages[config.EnvGitImage]}
	if err := o.run(); err != nil {
		t.Fatal(err)
	}
	rec2, err := readRecord(again)
	if err != nil {
		t.Fatal(err)
	}
	if rec2.Digest != rec.Digest || !cmp.Equal(rec2.Plugins, rec.Plugins) {
		t.Errorf("a second build of the same commit: image %s, plugins %v; the first: %s, %v", rec2.Digest, rec2.Plugins, rec.Digest, rec.Plugins)
	}
	sums2, err := readSums(filepath.Join(again, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sums, sums2); diff != "" {
		t.Errorf("a second build of the same commit differs in its files' sums (-first +second):\n%s", diff)
	}
}

// checkPluginArchive: the archive holds kubectl-caliban at its top level.
func checkPluginArchive(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	h, err := tar.NewReader(zr).Next()
	if err != nil || h.Name != "kubectl-caliban" || h.Size == 0 {
		t.Errorf("%s: first entry %v (%v), want kubectl-caliban", path, h, err)
	}
}

// checkLayoutArchive: the OCI archive's index names the release's image
// and digest, as kind and containerd read it.
func checkLayoutArchive(t *testing.T, path string, rec record) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no index.json (%v)", path, err)
		}
		if h.Name != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct {
				Digest      string            `json:"digest"`
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			t.Fatal(err)
		}
		ref := rec.Image + ":" + rec.Version
		if len(index.Manifests) != 1 || index.Manifests[0].Digest != rec.Digest || index.Manifests[0].Annotations["io.containerd.image.name"] != ref {
			t.Errorf("%s: index %+v, want one entry, %s named %s", path, index.Manifests, rec.Digest, ref)
		}
		return
	}
}
