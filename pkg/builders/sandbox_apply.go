package builders

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

// SandboxApplyBody is the server-side apply body of a Sandbox: the same
// document as SandboxToUnstructured, encoded straight from the typed object.
// The unstructured conversion and the encoding of its maps cost more than
// everything else a sync does to apply a Sandbox.
//
// In an apply body every field present is a field claimed. The status is
// left out, and a container's resources, a struct the JSON encoding of the
// API types emits even when nothing is configured, is hidden behind a
// shadowing field of the same JSON name (encoding/json prefers the
// shallower field) that is nil then.
func SandboxApplyBody(sb *sandboxv1beta1.Sandbox) ([]byte, error) {
	body, err := json.Marshal(sandboxApply{
		APIVersion: sandboxv1beta1.SchemeGroupVersion.String(),
		Kind:       "Sandbox",
		Metadata:   sb.ObjectMeta,
		Spec:       specApplyOf(sb.Spec),
	})
	if err != nil {
		return nil, fmt.Errorf("encoding Sandbox %s/%s: %w", sb.Namespace, sb.Name, err)
	}
	return body, nil
}

type sandboxApply struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       sandboxSpecApply  `json:"spec"`
}

type sandboxSpecApply struct {
	sandboxv1beta1.SandboxSpec
	PodTemplate podTemplateApply `json:"podTemplate"`
}

func specApplyOf(s sandboxv1beta1.SandboxSpec) sandboxSpecApply {
	return sandboxSpecApply{SandboxSpec: s, PodTemplate: podTemplateApply{
		PodTemplate: s.PodTemplate,
		Spec: podSpecApply{
			PodSpec:        s.PodTemplate.Spec,
			InitContainers: containersApply(s.PodTemplate.Spec.InitContainers),
			Containers:     containersApply(s.PodTemplate.Spec.Containers),
		},
	}}
}

type podTemplateApply struct {
	sandboxv1beta1.PodTemplate
	Spec podSpecApply `json:"spec"`
}

type podSpecApply struct {
	corev1.PodSpec
	InitContainers []containerApply `json:"initContainers,omitempty"`
	Containers     []containerApply `json:"containers"`
}

type containerApply struct {
	corev1.Container
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

func containersApply(cs []corev1.Container) []containerApply {
	if cs == nil {
		return nil
	}
	out := make([]containerApply, len(cs))
	for i := range cs {
		out[i].Container = cs[i]
		if r := &cs[i].Resources; len(r.Limits) > 0 || len(r.Requests) > 0 || len(r.Claims) > 0 {
			out[i].Resources = r
		}
	}
	return out
}
