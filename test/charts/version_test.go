// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package charts_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// The tree deploys one release everywhere, never "latest": manifests/base's
// image tag, the operator chart's image.tag and its appVersion (the
// release without its v) name the same version, and the CRD chart's
// appVersion too. Cutting a release moves all four (CONTRIBUTING.md).
func TestTheTreeDeploysOneReleaseEverywhere(t *testing.T) {
	r := root(t)
	deployment, err := os.ReadFile(filepath.Join(r, "manifests", "base", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+image: ghcr\.io/caliban-ai/caliban-operator:(\S+)$`).FindSubmatch(deployment)
	if m == nil {
		t.Fatal("manifests/base/deployment.yaml names no tagged ghcr.io/caliban-ai/caliban-operator image")
	}
	tag := string(m[1])
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(tag) {
		t.Fatalf("manifests/base deploys tag %q, want a release vX.Y.Z", tag)
	}
	for _, name := range []string{"caliban-operator", "caliban-crds"} {
		ch, err := loader.Load(filepath.Join(r, "charts", name))
		if err != nil {
			t.Fatal(err)
		}
		if "v"+ch.Metadata.AppVersion != tag {
			t.Errorf("charts/%s appVersion %q, want %s without its v", name, ch.Metadata.AppVersion, tag)
		}
		if image, ok := ch.Values["image"].(map[string]any); ok && image["tag"] != tag {
			t.Errorf("charts/%s image.tag %v, want %s", name, image["tag"], tag)
		}
	}
}
