package builders

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

// SandboxToUnstructured renders a Sandbox for the dynamic client, with its
// apiVersion and kind set. Zero-valued fields that the JSON encoding would
// still emit (metadata.creationTimestamp: null, an empty status) are dropped:
// in a server-side apply body every field present is a field claimed.
func SandboxToUnstructured(sb *sandboxv1beta1.Sandbox) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sb)
	if err != nil {
		return nil, fmt.Errorf("converting Sandbox %s/%s: %w", sb.Namespace, sb.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(sandboxv1beta1.SchemeGroupVersion.WithKind("Sandbox"))
	if md, ok := obj["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	if st, ok := obj["status"].(map[string]any); ok && len(st) == 0 {
		delete(obj, "status")
	}
	// A container's resources is a struct, so it is encoded even when
	// empty; "nothing configured" must omit it rather than claim it empty.
	for _, list := range []string{"initContainers", "containers"} {
		containers, _, _ := unstructured.NestedSlice(obj, "spec", "podTemplate", "spec", list)
		for _, c := range containers {
			if c, ok := c.(map[string]any); ok {
				if r, ok := c["resources"].(map[string]any); ok && len(r) == 0 {
					delete(c, "resources")
				}
			}
		}
		if containers != nil {
			_ = unstructured.SetNestedSlice(obj, containers, "spec", "podTemplate", "spec", list)
		}
	}
	return u, nil
}

// SandboxFromUnstructured reads a Sandbox the dynamic client returned. Fields
// the view does not declare are ignored; every declared field round-trips.
func SandboxFromUnstructured(u *unstructured.Unstructured) (*sandboxv1beta1.Sandbox, error) {
	sb := &sandboxv1beta1.Sandbox{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, sb); err != nil {
		return nil, fmt.Errorf("reading Sandbox %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return sb, nil
}
