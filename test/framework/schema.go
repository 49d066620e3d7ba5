// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// SpecField is one field under spec in a CRD's openAPIV3Schema.
type SpecField struct {
	// Path is the field's path as the apiserver spells it in errors, with
	// "[*]" for every list index: spec.sources[*].ref.
	Path string
	// Required is whether the enclosing object lists the field as required.
	Required bool
	// Schema is the field's own schema; Properties and Items are left for
	// the fields below it.
	Schema apiextensionsv1.JSONSchemaProps
}

// SpecFields reads the CRD of kind from the repository's manifests/crds and
// lists every field under spec, sorted by path, so that tests can check
// they say something about each field, including the ones added later.
func SpecFields(root, kind string) ([]SpecField, error) {
	objs, err := ReadManifests(filepath.Join(root, "manifests", "crds"))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", o.GetName(), err)
		}
		if crd.Spec.Names.Kind != kind {
			continue
		}
		if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil || crd.Spec.Versions[0].Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("%s: want one version with a schema", o.GetName())
		}
		spec, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return nil, fmt.Errorf("%s: no spec in the schema", o.GetName())
		}
		var fields []SpecField
		walkSchema("spec", spec, &fields)
		sort.Slice(fields, func(i, j int) bool { return fields[i].Path < fields[j].Path })
		return fields, nil
	}
	return nil, fmt.Errorf("no CRD of kind %s in manifests/crds", kind)
}

func walkSchema(path string, s apiextensionsv1.JSONSchemaProps, out *[]SpecField) {
	for name, child := range s.Properties {
		p := path + "." + name
		*out = append(*out, SpecField{Path: p, Required: slices.Contains(s.Required, name), Schema: leaf(child)})
		walkSchema(p, child, out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		p := path + "[*]"
		*out = append(*out, SpecField{Path: p, Schema: leaf(*s.Items.Schema)})
		walkSchema(p, *s.Items.Schema, out)
	}
}

func leaf(s apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	s.Properties, s.Items = nil, nil
	return s
}
