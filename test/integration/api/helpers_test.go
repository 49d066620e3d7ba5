// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package api_test

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// gvr maps a caliban object to its resource.
func gvr(u *unstructured.Unstructured) schema.GroupVersionResource {
	gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
	return gv.WithResource(strings.ToLower(u.GetKind()) + "s")
}
