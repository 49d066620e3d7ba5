// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func fields(raw string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(raw)} }

func entry(manager string, op metav1.ManagedFieldsOperationType, subresource, raw string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fields(raw), Subresource: subresource}
}

func TestAppliedOwnership(t *testing.T) {
	const (
		update  = metav1.ManagedFieldsOperationUpdate
		applyOp = metav1.ManagedFieldsOperationApply
	)
	other := entry("agent-sandbox-controller", update, "status", `{"f:status":{}}`)
	tests := map[string]struct {
		entries []metav1.ManagedFieldsEntry
		// want is the managed fields the patch writes; nil for no patch.
		want []metav1.ManagedFieldsEntry
	}{
		"an object the operator only ever applied needs nothing": {
			entries: []metav1.ManagedFieldsEntry{entry(FieldManager, applyOp, "", `{"f:data":{"f:a":{}}}`), other},
		},
		"an object someone else created needs nothing": {
			entries: []metav1.ManagedFieldsEntry{entry("kubectl-create", update, "", `{"f:data":{"f:a":{}}}`)},
		},
		"the operator's create becomes its apply": {
			entries: []metav1.ManagedFieldsEntry{entry(FieldManager, update, "", `{"f:data":{"f:a":{},"f:b":{}}}`), other},
			want:    []metav1.ManagedFieldsEntry{entry(FieldManager, applyOp, "", `{"f:data":{"f:a":{},"f:b":{}}}`), other},
		},
		"a create and an apply since become one apply of both's fields": {
			entries: []metav1.ManagedFieldsEntry{
				entry(FieldManager, applyOp, "", `{"f:data":{"f:a":{}}}`),
				entry(FieldManager, update, "", `{"f:data":{"f:b":{}}}`),
				other,
			},
			want: []metav1.ManagedFieldsEntry{entry(FieldManager, applyOp, "", `{"f:data":{"f:a":{},"f:b":{}}}`), other},
		},
		"the operator's status writes are left as they are": {
			entries: []metav1.ManagedFieldsEntry{entry(FieldManager, update, "status", `{"f:status":{}}`)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: "42", UID: types.UID("u"), ManagedFields: tc.entries}}
			patch, ok, err := AppliedOwnership(live)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if ok {
					t.Fatalf("patch %s, want none", patch)
				}
				return
			}
			if !ok {
				t.Fatal("no patch, want one")
			}
			var ops []struct {
				Op    string          `json:"op"`
				Path  string          `json:"path"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(patch, &ops); err != nil {
				t.Fatal(err)
			}
			if len(ops) != 2 || ops[0].Op != "test" || ops[0].Path != "/metadata/resourceVersion" || string(ops[0].Value) != `"42"` {
				t.Fatalf("patch %s, want a test of the resourceVersion first", patch)
			}
			var got []metav1.ManagedFieldsEntry
			if err := json.Unmarshal(ops[1].Value, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("managed fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNameTakenMessage(t *testing.T) {
	yes := true
	tests := map[string]struct {
		holder metav1.Object
		want   string
	}{
		"another task's child names its controller": {
			holder: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
				{Kind: "CalibanTask", Name: "7c1e", UID: "u-1", Controller: &yes}}}},
			want: "ServiceAccount 'x-sa' is taken: it is controlled by CalibanTask '7c1e' (uid u-1); it is left as it is and nothing was applied (delete it, or use another name)",
		},
		"an object with no controller says so": {
			holder: &corev1.ServiceAccount{},
			want:   "ServiceAccount 'x-sa' is taken: it is not controlled by anything the operator made; it is left as it is and nothing was applied (delete it, or use another name)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NameTakenMessage("ServiceAccount", "x-sa", tc.holder)); diff != "" {
				t.Error(diff)
			}
		})
	}
}
