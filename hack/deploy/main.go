// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command deploy prints what make deploy applies: manifests/ (the CRDs,
// then the operator) with the operator's image the one make deploy was
// last given.
//
//	go run ./hack/deploy -image registry.example/caliban-operator:dev | kubectl apply --server-side -f -
//
// -image is remembered in -state (.cache/deploy/image, git-ignored), so a
// later make deploy without IMAGE deploys the same image instead of
// switching back to the tree's release; -reset forgets it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/caliban-ai/caliban-operator/hack/internal/manifests"
)

func main() {
	image := flag.String("image", "", "the operator image to deploy, repository:tag or repository@digest (make deploy: IMAGE)")
	state := flag.String("state", filepath.Join(".cache", "deploy", "image"), "where the last -image is remembered")
	reset := flag.Bool("reset", false, "forget the remembered image: deploy the tree's release")
	flag.Parse()
	if err := run(*image, *state, *reset); err != nil {
		fmt.Fprintf(os.Stderr, "deploy: %v\n", err)
		os.Exit(1)
	}
}

func run(image, state string, reset bool) error {
	if reset {
		if err := os.Remove(state); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	chosen, err := chooseImage(image, state)
	if err != nil {
		return err
	}
	out, err := manifests.Render(".", chosen, nil)
	if err != nil {
		return err
	}
	if chosen == "" {
		fmt.Fprintln(os.Stderr, "deploy: the tree's release image (manifests/base)")
	} else {
		fmt.Fprintf(os.Stderr, "deploy: image %s (make deploy IMAGE=... remembers it in %s; make deploy-reset forgets it)\n", chosen, state)
	}
	_, err = os.Stdout.Write(out)
	return err
}

// chooseImage is image, which it remembers in state, or else the image
// state remembers, or else "" (the tree's).
func chooseImage(image, state string) (string, error) {
	if image != "" {
		if err := validImage(image); err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
			return "", err
		}
		return image, os.WriteFile(state, []byte(image+"\n"), 0o644)
	}
	data, err := os.ReadFile(state)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	remembered := strings.TrimSpace(string(data))
	return remembered, validImage(remembered)
}

// validImage refuses what a Deployment could not pull by name: an image
// without a tag or digest would run whatever "latest" is that day.
func validImage(image string) error {
	repo, _, digest := strings.Cut(image, "@")
	tagged := strings.LastIndex(repo, ":") > strings.LastIndex(repo, "/")
	switch {
	case strings.ContainsAny(image, " \t\n"):
		return fmt.Errorf("IMAGE %q has white space", image)
	case !digest && !tagged:
		return fmt.Errorf("IMAGE %q has neither a tag nor a digest: name the one to run, e.g. %s:v0.1.0", image, repo)
	}
	return nil
}
