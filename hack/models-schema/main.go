// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command models-schema prints the OpenAPI v2 definitions of the caliban API
// as JSON. applyconfiguration-gen reads it to generate Extract* functions and
// the structured-merge type information that lets the fake clientset serve
// server-side apply for the caliban CRDs.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/caliban-ai/caliban-operator/pkg/generated/openapi"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "models-schema: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	ref := func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + util.ToRESTFriendlyName(name))
	}
	defs := openapi.GetOpenAPIDefinitions(ref)
	schemas := make(map[string]spec.Schema, len(defs))
	for name, def := range defs {
		s := def.Schema
		// Some apimachinery types embed a separate v2 schema; the consumer
		// wants v2 throughout.
		if v2, ok := def.Schema.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
			s = v2
		}
		schemas[util.ToRESTFriendlyName(name)] = s
	}
	doc := spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "caliban", Version: "v1alpha1"}},
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: schemas,
	}}
	out, err := json.MarshalIndent(&doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}
