// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caliban-ai/caliban-operator/hack/internal/manifests"
)

// make deploy IMAGE=... deploys that image, and a later make deploy
// without IMAGE deploys it again rather than the tree's release.
func TestADeployedImageSurvivesTheNextDeploy(t *testing.T) {
	state := filepath.Join(t.TempDir(), "deploy", "image")
	steps := []struct {
		name, image string
		reset       bool
		want        string
	}{
		{name: "a first deploy without IMAGE runs the tree's release", want: ""},
		{name: "IMAGE is deployed", image: "kind.local/caliban-operator:e2e", want: "kind.local/caliban-operator:e2e"},
		{name: "a later deploy without IMAGE keeps it", want: "kind.local/caliban-operator:e2e"},
		{name: "a digest is an image too", image: "r.example:5000/x@sha256:" + strings.Repeat("a", 64), want: "r.example:5000/x@sha256:" + strings.Repeat("a", 64)},
		{name: "reset goes back to the tree's release", reset: true, want: ""},
	}
	for _, s := range steps {
		if s.reset {
			if err := os.Remove(state); err != nil {
				t.Fatal(err)
			}
		}
		got, err := chooseImage(s.image, state)
		if err != nil || got != s.want {
			t.Errorf("%s: %q, %v; want %q", s.name, got, err, s.want)
		}
	}
}

func TestAnImageWithoutTagOrDigestIsRefused(t *testing.T) {
	state := filepath.Join(t.TempDir(), "image")
	for _, image := range []string{"kind.local/caliban-operator", "localhost:5000/caliban-operator", "a b:c"} {
		if _, err := chooseImage(image, state); err == nil {
			t.Errorf("IMAGE %q was taken", image)
		}
	}
	if _, err := os.Stat(state); err == nil {
		t.Error("a refused IMAGE was remembered")
	}
}

// What deploy renders runs the chosen image in the operator's Deployment.
func TestTheRenderRunsTheChosenImage(t *testing.T) {
	out, err := manifests.Render(filepath.Join("..", ".."), "kind.local/caliban-operator:e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "image: kind.local/caliban-operator:e2e\n") || strings.Contains(string(out), manifests.TreeImage+":") {
		t.Errorf("the render does not run kind.local/caliban-operator:e2e alone:\n%s", out)
	}
}
