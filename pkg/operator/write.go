// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/caliban/v1alpha1"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// The operator's write path: every object it writes (a task's
// ServiceAccount, NetworkPolicy, Sandbox and claim, a task's drain
// finalizer, the status of tasks and Workspaces, a warm pool's objects) is
// a server-side apply of an apply configuration, under the field manager
// caliban-operator, forced, through apply (applyUnread where the sync does
// not read the answer), except the first write of each object the operator
// names, which is a create of the same body (create.go: a name is taken,
// never shared). The other requests are a JSON patch that moves a created
// object's fields to the applies (create.go), two
// tested JSON patches (drain.go: the drain finalizer another manager wrote;
// task_warm.go: the take of a claimed Sandbox) and three deletes (a task
// whose TTL ran out, a claim of another rendering, a warm pool's objects).
// Each write made is recorded in the span of the sync that made it
// (tracing.RecordWrite), under one of these names.
const (
	writeStatus         = "status"
	writeServiceAccount = "serviceaccount"
	writeNetworkPolicy  = "networkpolicy"
	writeSandbox        = "sandbox"
	writeFinalizer      = "finalizer"
	writeDelete         = "delete"
	// writeOwnership: the operator's fields of an object it created moved
	// from its create to its applies (create.go).
	writeOwnership = "ownership"
)

// taskResource is the CalibanTask resource, whose status record writes
// through the REST client.
const taskResource = "calibantasks"

var applyPatchOptions = metav1.PatchOptions{FieldManager: builders.FieldManager, Force: new(true)}

// patcher is the Patch method every generated typed client has, which
// takes an apply body as it is.
type patcher[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// apply server-side-applies body to the object name of client (to its
// subresource, if one is given), records the write in the sync's span
// under the name write, and returns the object as the server stored it.
func apply[T any](ctx context.Context, write string, client patcher[T], name string, body runtime.ApplyConfiguration, subresource ...string) (T, error) {
	data, err := json.Marshal(body)
	if err != nil {
		var none T
		return none, fmt.Errorf("encoding the apply of %s: %w", name, err)
	}
	obj, err := client.Patch(ctx, name, types.ApplyPatchType, data, applyPatchOptions, subresource...)
	if err == nil {
		tracing.RecordWrite(ctx, write)
	}
	return obj, err
}

// applyUnread is apply for a write whose answer the sync does not decode:
// a Sandbox's answer is its pod template, a task's the whole task, pin and
// all, and decoding either cost more CPU than anything else the sync does
// with it. It applies body to the object name of resource in namespace
// (to its subresource, if one is given) through rc, and returns the answer
// as it came.
func applyUnread(ctx context.Context, write string, rc rest.Interface, resource, namespace, name string, body runtime.ApplyConfiguration, subresource ...string) ([]byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding the apply of %s: %w", name, err)
	}
	res := rc.Patch(types.ApplyPatchType).Namespace(namespace).Resource(resource).Name(name).SubResource(subresource...).
		Param("fieldManager", builders.FieldManager).Param("force", "true").Body(data).Do(ctx)
	// Error, not Raw, makes the server's Status of a refusal the error:
	// its reason and message.
	if err := res.Error(); err != nil {
		return nil, err
	}
	tracing.RecordWrite(ctx, write)
	answer, _ := res.Raw()
	return answer, nil
}

// statusApply is the apply configuration of an object's status: type and
// identity from the generated apply configuration, the status from the API
// types. The generated status apply configurations encode every list with
// omitempty, so they cannot keep the pin's empty enabledPlugins or egress
// allow-list, which the API types' omitzero does (ADR 0003). Every status
// field the operator owns is either omitempty or always set, so nothing is
// claimed by accident.
type statusApply struct {
	metav1ac.TypeMetaApplyConfiguration `json:",inline"`
	// Metadata carries the UID, so the apply fails rather than touch a
	// different object that took the name since the cache was read, and,
	// for a conditional write, the resourceVersion.
	Metadata *metav1ac.ObjectMetaApplyConfiguration `json:"metadata"`
	Status   any                                    `json:"status"`
}

func (statusApply) IsApplyConfiguration() {}

// applyWorkspaceStatus applies the whole operator-owned status of a
// Workspace.
func applyWorkspaceStatus(ctx context.Context, c calibanclient.Interface, ws *calibanv1alpha1.Workspace, status calibanv1alpha1.WorkspaceStatus) (*calibanv1alpha1.Workspace, error) {
	id := calibanac.Workspace(ws.Name, ws.Namespace).WithUID(ws.UID)
	return apply(ctx, writeStatus, c.CalibanV1alpha1().Workspaces(ws.Namespace), ws.Name,
		statusApply{TypeMetaApplyConfiguration: id.TypeMetaApplyConfiguration, Metadata: id.ObjectMetaApplyConfiguration, Status: status}, "status")
}
