package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// treeImage is the image name manifests/base's Deployment deploys; the
// release render replaces it.
const treeImage = "ghcr.io/caliban-ai/caliban-operator"

// installManifest renders manifests/ (the CRDs, then the operator: what
// `kubectl apply -k manifests/` installs) as one YAML stream whose
// Deployment runs image, a full reference pinned by tag and digest.
func installManifest(root, image string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, "manifests"))
	if err != nil {
		return nil, fmt.Errorf("kustomize build manifests/: %w", err)
	}
	if err := setImage(m, image); err != nil {
		return nil, err
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# caliban-operator %s: the CRDs, then the operator (namespace caliban-system,\n# RBAC, Deployment). kubectl apply --server-side -f caliban-operator.yaml\n", imageTag(image))
	return append([]byte(header), out...), nil
}

// setImage points every container of the Deployment that runs treeImage
// at image, and fails when none does: a renamed image must not ship a
// manifest that deploys the tree's.
func setImage(m resmap.ResMap, image string) error {
	set := 0
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
			return err
		}
		for _, c := range elements {
			current, err := c.Pipe(yaml.Lookup("image"))
			if err != nil || current == nil {
				continue
			}
			if repo, _, _ := strings.Cut(yaml.GetValue(current), ":"); repo != treeImage {
				continue
			}
			if err := c.PipeE(yaml.SetField("image", yaml.NewStringRNode(image))); err != nil {
				return err
			}
			set++
		}
	}
	if set == 0 {
		return fmt.Errorf("manifests/: no Deployment container runs %s", treeImage)
	}
	return nil
}

// imageTag is the tag of a reference repo:tag@digest.
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return ""
}
