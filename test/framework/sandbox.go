// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

// SandboxOf reads a Sandbox into the operator's view of it, through its JSON
// document: obj is what the dynamic client returned or an apply
// configuration the operator would send. Fields the view does not declare
// are dropped.
func SandboxOf(obj any) (*sandboxv1beta1.Sandbox, error) {
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding a Sandbox: %w", err)
	}
	sb := &sandboxv1beta1.Sandbox{}
	if err := json.Unmarshal(body, sb); err != nil {
		return nil, fmt.Errorf("reading a Sandbox: %w", err)
	}
	return sb, nil
}

// Unstructured is obj, an apply configuration say, as the dynamic client
// takes it: its JSON document, with whole numbers as int64 like the
// client's answers, and no kind required.
func Unstructured(obj any) (*unstructured.Unstructured, error) {
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(body, &u.Object); err != nil {
		return nil, err
	}
	return u, nil
}
