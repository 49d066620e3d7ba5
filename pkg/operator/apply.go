package operator

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
)

// statusApply is the body of a server-side apply to a status subresource:
// type, identity and the status, nothing else. It is marshalled from the API
// types rather than the generated applyconfigurations because those encode
// every list with omitempty, and the pin must keep an empty enabledPlugins or
// egress allow-list (ADR 0003). Every status field the operator owns is
// either omitempty or always set, so nothing is claimed by accident.
type statusApply struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   statusTarget `json:"metadata"`
	Status     any          `json:"status"`
}

type statusTarget struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// UID makes the apply fail rather than touch a different object that
	// took the name since the cache was read.
	UID types.UID `json:"uid"`
	// ResourceVersion, when set, makes the apply a compare-and-swap: it
	// fails with a conflict if the object changed since that version.
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

var applyStatusOptions = metav1.PatchOptions{FieldManager: builders.FieldManager, Force: new(true)}

// statusBody is the apply body of obj's status: type, identity, status,
// and obj's resourceVersion as a precondition when asked.
func statusBody(kind string, obj metav1.Object, status any, precondition bool) ([]byte, error) {
	target := statusTarget{Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID()}
	if precondition {
		target.ResourceVersion = obj.GetResourceVersion()
	}
	return json.Marshal(statusApply{
		APIVersion: calibanv1alpha1.SchemeGroupVersion.String(), Kind: kind,
		Metadata: target, Status: status,
	})
}

// applyTaskStatus server-side-applies the whole operator-owned status of a
// task. A field the operator owned before and omits now is removed.
func applyTaskStatus(ctx context.Context, c calibanclient.Interface, task *calibanv1alpha1.CalibanTask, status calibanv1alpha1.CalibanTaskStatus, precondition bool) (*calibanv1alpha1.CalibanTask, error) {
	body, err := statusBody("CalibanTask", task, status, precondition)
	if err != nil {
		return nil, err
	}
	return c.CalibanV1alpha1().CalibanTasks(task.Namespace).Patch(ctx, task.Name, types.ApplyPatchType, body, applyStatusOptions, "status")
}

// applyWorkspaceStatus server-side-applies the whole operator-owned status
// of a workspace.
func applyWorkspaceStatus(ctx context.Context, c calibanclient.Interface, ws *calibanv1alpha1.Workspace, status calibanv1alpha1.WorkspaceStatus) (*calibanv1alpha1.Workspace, error) {
	body, err := statusBody("Workspace", ws, status, false)
	if err != nil {
		return nil, err
	}
	return c.CalibanV1alpha1().Workspaces(ws.Namespace).Patch(ctx, ws.Name, types.ApplyPatchType, body, applyStatusOptions, "status")
}
