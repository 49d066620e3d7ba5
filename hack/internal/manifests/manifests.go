// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package manifests renders manifests/ (what `kubectl apply -k
// manifests/` installs) with the operator's image set: the install
// manifest of a release, and what make deploy applies.
package manifests

import (
	"fmt"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// TreeImage is the image repository manifests/base's Deployment runs;
// Render replaces it.
const TreeImage = "ghcr.io/caliban-ai/caliban-operator"

// Render builds manifests/ under root (the CRDs, then the operator) as one
// YAML stream whose Deployment runs image, or the tree's when image is
// empty, with the literal values of its env entries named in env replaced
// (a release's agent images).
func Render(root, image string, env map[string]string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, "manifests"))
	if err != nil {
		return nil, fmt.Errorf("kustomize build manifests/: %w", err)
	}
	// Before the image: the operator's container is found by the tree's.
	if err := setEnv(m, env); err != nil {
		return nil, err
	}
	if image != "" {
		if err := setImage(m, image); err != nil {
			return nil, err
		}
	}
	return m.AsYaml()
}

// treeContainers are the containers of m's Deployments that run
// TreeImage: the operator's.
func treeContainers(m resmap.ResMap) ([]*yaml.RNode, error) {
	var out []*yaml.RNode
	for _, r := range m.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		containers, err := r.Pipe(yaml.Lookup("spec", "template", "spec", "containers"))
		if err != nil || containers == nil {
			continue
		}
		elements, err := containers.Elements()
		if err != nil {
			return nil, err
		}
		for _, c := range elements {
			current, err := c.Pipe(yaml.Lookup("image"))
			if err != nil || current == nil {
				continue
			}
			if repo, _, _ := strings.Cut(yaml.GetValue(current), ":"); repo == TreeImage {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// setImage points every container of the Deployment that runs TreeImage
// at image, and fails when none does: a renamed image must not ship a
// manifest that deploys the tree's.
func setImage(m resmap.ResMap, image string) error {
	containers, err := treeContainers(m)
	if err != nil {
		return err
	}
	if len(containers) == 0 {
		return fmt.Errorf("manifests/: no Deployment container runs %s", TreeImage)
	}
	for _, c := range containers {
		if err := c.PipeE(yaml.SetField("image", yaml.NewStringRNode(image))); err != nil {
			return err
		}
	}
	return nil
}

// setEnv replaces, in the container of the Deployment that runs TreeImage,
// the literal value of each env entry env names, and fails when that
// container has not exactly one such entry for a name: a renamed setting
// must not ship a manifest that runs the tree's value.
func setEnv(m resmap.ResMap, env map[string]string) error {
	if len(env) == 0 {
		return nil
	}
	containers, err := treeContainers(m)
	if err != nil {
		return err
	}
	set := map[string]int{}
	for _, c := range containers {
		entries, err := c.Pipe(yaml.Lookup("env"))
		if err != nil || entries == nil {
			continue
		}
		items, err := entries.Elements()
		if err != nil {
			return err
		}
		for _, e := range items {
			value, ok := env[yaml.GetValue(e.Field("name").Value)]
			if !ok || e.Field("value") == nil {
				continue
			}
			if err := e.PipeE(yaml.SetField("value", yaml.NewStringRNode(value))); err != nil {
				return err
			}
			set[yaml.GetValue(e.Field("name").Value)]++
		}
	}
	for name := range env {
		if set[name] != 1 {
			return fmt.Errorf("manifests/: the container running %s sets %s as a literal value %d times, want once", TreeImage, name, set[name])
		}
	}
	return nil
}
