// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/caliban-ai/caliban-operator/hack/internal/manifests"
)

// installManifest is manifests/ rendered as one YAML stream whose
// Deployment runs image, a full reference pinned by tag and digest, and
// renders the agent pods with agents, under a header naming the release.
func installManifest(root, image string, agents agentImages) ([]byte, error) {
	out, err := manifests.Render(root, image, agents)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# caliban-operator %s: the CRDs, then the operator (namespace caliban-system,\n# RBAC, Deployment). kubectl apply --server-side -f caliban-operator.yaml\n", imageTag(image))
	return append([]byte(header), out...), nil
}

// imageTag is the tag of a reference repo:tag@digest.
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return ""
}
