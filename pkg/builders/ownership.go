// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"bytes"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// ReasonChildNameTaken: an object the operator names for a task (or a
// Workspace's pool) is held by something else, which is left as it is.
const ReasonChildNameTaken = "ChildNameTaken"

// NameTakenMessage says that the object name of kind, which the operator
// wants for a task or a Workspace's pool, is held by holder, and that
// nothing was written to it.
func NameTakenMessage(kind, name string, holder metav1.Object) string {
	by := "it is not controlled by anything the operator made"
	if ref := metav1.GetControllerOfNoCopy(holder); ref != nil {
		by = fmt.Sprintf("it is controlled by %s '%s' (uid %s)", ref.Kind, ref.Name, ref.UID)
	}
	return fmt.Sprintf("%s '%s' is taken: %s; it is left as it is and nothing was applied (delete it, or use another name)", kind, name, by)
}

// AppliedOwnership is the JSON patch that moves the fields live's create
// gave the operator (its Update entry in live's managed fields) to the
// operator's applies (its Apply entry), so that a later apply that leaves
// a field out removes it: a field an Update entry also owns stays. ok is
// false when live has no such Update entry. The patch tests live's
// resourceVersion first, so it changes nothing on an object that moved on.
func AppliedOwnership(live metav1.Object) (patch []byte, ok bool, err error) {
	entries := live.GetManagedFields()
	updated, applied := -1, -1
	for i, e := range entries {
		if e.Manager != FieldManager || e.Subresource != "" {
			continue
		}
		switch e.Operation {
		case metav1.ManagedFieldsOperationUpdate:
			updated = i
		case metav1.ManagedFieldsOperationApply:
			applied = i
		}
	}
	if updated < 0 {
		return nil, false, nil
	}
	moved := make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for i, e := range entries {
		switch {
		case i == updated && applied < 0:
			e.Operation = metav1.ManagedFieldsOperationApply
			moved = append(moved, e)
		case i == updated:
		case i == applied:
			if e.APIVersion != entries[updated].APIVersion {
				// Fields of two versions cannot be added up here; the
				// create's stay its own.
				return nil, false, nil
			}
			union, err := unionFields(e.FieldsV1, entries[updated].FieldsV1)
			if err != nil {
				return nil, false, err
			}
			e.FieldsV1 = union
			moved = append(moved, e)
		default:
			moved = append(moved, e)
		}
	}
	patch, err = json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/managedFields", "value": moved},
	})
	return patch, err == nil, err
}

// unionFields is the set of fields either a or b names.
func unionFields(a, b *metav1.FieldsV1) (*metav1.FieldsV1, error) {
	var sa, sb fieldpath.Set
	for _, f := range []struct {
		set *fieldpath.Set
		raw *metav1.FieldsV1
	}{{&sa, a}, {&sb, b}} {
		if f.raw == nil {
			continue
		}
		if err := f.set.FromJSON(bytes.NewReader(f.raw.Raw)); err != nil {
			return nil, fmt.Errorf("reading managed fields: %w", err)
		}
	}
	raw, err := sa.Union(&sb).ToJSON()
	if err != nil {
		return nil, err
	}
	return &metav1.FieldsV1{Raw: raw}, nil
}
