// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command crd-postprocess adjusts the CalibanTask CRD that controller-gen
// writes, in place, as the last step of hack/update-codegen.sh.
//
// status.conditions is a []metav1.Condition, whose schema requires message.
// prospero applies its AgentsSettled condition without a message (its
// server-side-apply body carries type, status, reason and lastTransitionTime
// only), and the apiserver would reject that apply. controller-gen has no
// marker to relax a required field of a foreign type, so the requirement is
// dropped here. Nothing else changes, and the file stays byte-for-byte what
// this pipeline produces, so make verify still catches any hand edit.
package main

import (
	"bytes"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crd-postprocess <calibantasks CRD file>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "crd-postprocess: %v\n", err)
		os.Exit(1)
	}
}

func run(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(in, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	versions := lookup(doc.Content[0], "spec", "versions")
	if versions == nil || len(versions.Content) == 0 {
		return fmt.Errorf("%s: no spec.versions", path)
	}
	for _, v := range versions.Content {
		required := lookup(v, "schema", "openAPIV3Schema", "properties", "status",
			"properties", "conditions", "items", "required")
		if required == nil {
			return fmt.Errorf("%s: no status.conditions item schema with a required list", path)
		}
		kept := required.Content[:0]
		for _, n := range required.Content {
			if n.Value != "message" {
				kept = append(kept, n)
			}
		}
		required.Content = kept
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out.Bytes()...), 0o644)
}

// lookup follows mapping keys from n and returns the node found, or nil.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	return n
}
