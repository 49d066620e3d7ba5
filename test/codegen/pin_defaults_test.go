// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package codegen_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The operator signs a task's pin with the defaults the apiserver applies
// to status.resolvedWorkspace already applied (builders.SignPin), so that
// the signature verifies on the pin as stored. A default the schema gains
// and the signer does not apply would fail every new task as
// PinNotTrusted: this lists them, so that such a change meets this test
// first.
func TestTheSignerAppliesEveryDefaultOfThePinSchema(t *testing.T) {
	pin, found, _ := unstructured.NestedMap(taskSchema(t), "properties", "status", "properties", "resolvedWorkspace")
	if !found {
		t.Fatal("the CalibanTask schema has no status.resolvedWorkspace")
	}
	got := defaultsUnder("resolvedWorkspace", pin)
	sort.Strings(got)
	// What storedPin in pkg/builders/pin.go applies (allowUnattended's
	// false encodes as absent, as the Go type omits it when false).
	want := []string{
		"resolvedWorkspace.agentPolicy.allowUnattended=false",
		"resolvedWorkspace.egress.allow=[]",
		"resolvedWorkspace.sources[].ref=\"main\"",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults of status.resolvedWorkspace (-signer applies +schema has):\n%s\nchange storedPin with the schema", diff)
	}
}

// defaultsUnder lists path=default for every default in schema.
func defaultsUnder(path string, schema map[string]any) []string {
	var out []string
	if d, ok := schema["default"]; ok {
		out = append(out, fmt.Sprintf("%s=%s", path, jsonish(d)))
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		for name, p := range props {
			out = append(out, defaultsUnder(path+"."+name, p.(map[string]any))...)
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		out = append(out, defaultsUnder(path+"[]", items)...)
	}
	return out
}

func jsonish(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case []any:
		if len(v) == 0 {
			return "[]"
		}
	}
	return fmt.Sprint(v)
}
