// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// ProsperoManager is the field manager prospero writes a task's status
// conditions with.
const ProsperoManager = "prospero"

// ProsperoApplies writes conditions into a task's status the way prospero
// does: a server-side apply to the status subresource as field manager
// "prospero", without force. prospero applies everything it owns each
// time: a condition it wrote before and leaves out is removed.
func (c *Cluster) ProsperoApplies(ctx context.Context, ns, name string, conditions ...map[string]any) error {
	list := make([]any, len(conditions))
	for i, cond := range conditions {
		list[i] = cond
	}
	// JSON is YAML: the content type is prospero's.
	body, err := json.Marshal(map[string]any{
		"apiVersion": calibanv1alpha1.SchemeGroupVersion.String(),
		"kind":       "CalibanTask",
		"metadata":   map[string]any{"name": name},
		"status":     map[string]any{"conditions": list},
	})
	if err != nil {
		return err
	}
	if _, err := c.Caliban.CalibanV1alpha1().CalibanTasks(ns).Patch(ctx, name, types.ApplyYAMLPatchType, body,
		metav1.PatchOptions{FieldManager: ProsperoManager}, "status"); err != nil {
		return fmt.Errorf("prospero's status apply to %s/%s: %w", ns, name, err)
	}
	return nil
}
