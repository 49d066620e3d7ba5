// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package codegen_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// The operator's cache takes a task as its own status write left it from
// builders.StoredTaskStatus, not from the write's answer. Whatever status
// it sends, that must be what the apiserver stores and its watch brings:
// the status as the operator encodes it, defaulted by the CRD's schema as
// the apiserver defaults it, read back.
func TestTheStatusAWriteStoresIsTheOneTheOperatorBuilds(t *testing.T) {
	schema := taskSchema(t)
	fill := randfill.NewWithSeed(1).NilChance(0.3).NumElements(0, 3).Funcs(
		// The operator's times carry nanoseconds until they are encoded.
		func(tm *metav1.Time, c randfill.Continue) {
			*tm = metav1.NewTime(time.Unix(c.Int63n(4e9), c.Int63n(1e9)))
		},
	)
	for i := range 500 {
		var sent calibanv1alpha1.CalibanTaskStatus
		fill.Fill(&sent)
		got := builders.StoredTaskStatus(calibanv1alpha1.CalibanTaskStatus{}, sent)
		want := storedBy(t, schema, sent)
		if !apiequality.Semantic.DeepEqual(want, got) {
			t.Fatalf("status %d: what the operator takes as stored differs from what the apiserver stores (-stored +taken):\n%s",
				i, cmp.Diff(want, got))
		}
	}
}

// taskSchema is the OpenAPI schema of the CalibanTask CRD's one version.
func taskSchema(t *testing.T) map[string]any {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.ReadManifests(filepath.Join(root, "manifests", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetName() != "calibantasks.caliban.caliban-ai.dev" {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		if len(versions) != 1 {
			t.Fatalf("the CalibanTask CRD has %d versions, want 1", len(versions))
		}
		schema, found, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema")
		if !found {
			t.Fatal("the CalibanTask CRD has no schema")
		}
		return schema
	}
	t.Fatal("no CalibanTask CRD in manifests/crds")
	return nil
}

// storedBy is sent as the apiserver stores it: encoded as the operator
// encodes it, the schema's defaults applied, and decoded.
func storedBy(t *testing.T, schema map[string]any, sent calibanv1alpha1.CalibanTaskStatus) calibanv1alpha1.CalibanTaskStatus {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"status": sent})
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // int64s stay whole
	if err := dec.Decode(&obj); err != nil {
		t.Fatal(err)
	}
	applyDefaults(obj, schema)
	if raw, err = json.Marshal(obj); err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Status calibanv1alpha1.CalibanTaskStatus `json:"status"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	return stored.Status
}

// applyDefaults gives every member of an object in obj that is missing
// and has a default in schema that default, as the apiserver's structural
// defaulting does: into objects that are there, and every item of a list.
func applyDefaults(obj any, schema map[string]any) {
	switch o := obj.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for name, p := range props {
			prop := p.(map[string]any)
			if _, there := o[name]; !there {
				if d, ok := prop["default"]; ok {
					o[name] = runtime.DeepCopyJSONValue(d)
				}
			}
			if v, there := o[name]; there {
				applyDefaults(v, prop)
			}
		}
	case []any:
		items, _ := schema["items"].(map[string]any)
		for _, v := range o {
			applyDefaults(v, items)
		}
	}
}
