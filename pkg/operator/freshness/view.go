// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package freshness

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// View is what the caches keep of a task's ServiceAccount, NetworkPolicy or
// Sandbox: identity, owner, and the verdict of the check that matters,
// taken once when the object arrived, instead of the object. A task has
// three children, each a few kilobytes when decoded (a Sandbox is a pod
// template), and the caches hold every one of them; the verdict is a
// string.
type View struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// Holds is the applied hash of the desired child this object was found
	// to carry in full (the annotation and every value, see holds) when it
	// was cached, against its task as the task cache held it then; "" when
	// it did not, or there was no pinned task to render it from. A sync
	// whose desired child has this hash has nothing to apply.
	Holds string
	// SandboxStatus is a Sandbox's status, which the task's status is
	// derived from; nil for the other kinds.
	SandboxStatus *sandboxv1beta1.SandboxStatus
	// OperatingMode is a Sandbox's spec.operatingMode. Holds leaves it
	// out: the mode follows the task's lifecycle (suspend, finish, the
	// deadline: the clock), the rest follows spec and pin, and only the
	// rest is hashed.
	OperatingMode sandboxv1beta1.OperatingMode
	// RenderedBy is the child's rendered-by annotation: which settings and
	// operator version rendered it ("" for a child of a version before the
	// annotation).
	RenderedBy string
	// CalibandPort is the control port of a Sandbox's caliband container,
	// where the task's endpoint is (0 when it has none).
	CalibandPort int32
	// Applied is the applied-hash annotation of a ServiceAccount or
	// NetworkPolicy no task controls: a warm pool's, which the Workspace
	// controller applies only when its rendering's hash differs.
	Applied string
	// Launch is a Sandbox's agents.x-k8s.io/launch-type label: warm when a
	// claim took it from a pool, cold when the claim made it, "" for a
	// task's own.
	Launch string
}

// DeepCopyObject makes a View a runtime.Object, which a cache stores.
func (v *View) DeepCopyObject() runtime.Object {
	out := &View{TypeMeta: v.TypeMeta, Holds: v.Holds, OperatingMode: v.OperatingMode, RenderedBy: v.RenderedBy, CalibandPort: v.CalibandPort,
		Applied: v.Applied, Launch: v.Launch}
	v.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if v.SandboxStatus != nil {
		out.SandboxStatus = v.SandboxStatus.DeepCopy()
	}
	return out
}

// Sandbox is a Sandbox's view as the status derivation reads it: its name,
// the operatingMode agent-sandbox accepted, caliband's port and the status.
func (v *View) Sandbox() *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: v.Namespace, CreationTimestamp: v.CreationTimestamp}}
	if v.Launch != "" {
		sb.Labels = map[string]string{builders.LabelLaunchType: v.Launch}
	}
	sb.Spec.OperatingMode = LiveMode(v.OperatingMode)
	if v.CalibandPort != 0 {
		sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: builders.ContainerCaliband,
			Ports: []corev1.ContainerPort{{Name: builders.PortNameCaliband, ContainerPort: v.CalibandPort}}}}
	}
	if v.SandboxStatus != nil {
		sb.Status = *v.SandboxStatus
	}
	return sb
}

// LiveMode is a Sandbox's operatingMode as agent-sandbox reads it: unset
// is Running, the CRD's default.
func LiveMode(m sandboxv1beta1.OperatingMode) sandboxv1beta1.OperatingMode {
	if m == "" {
		return sandboxv1beta1.OperatingModeRunning
	}
	return m
}

// compactMeta keeps of an object's metadata what the task controller reads:
// identity, owners, creation, deletion. Labels and annotations were read by the check
// behind Holds.
func compactMeta(m metav1.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
		ResourceVersion: m.GetResourceVersion(), Generation: m.GetGeneration(),
		// When the children were applied, for a start timed after a restart.
		CreationTimestamp: m.GetCreationTimestamp(),
		OwnerReferences:   m.GetOwnerReferences(), DeletionTimestamp: m.GetDeletionTimestamp(),
	}
}
