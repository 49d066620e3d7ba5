// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// ceilingNamespace holds the ceiling's objects. It is deleted, and gone,
// before the operator starts: the operator watches every namespace.
const ceilingNamespace = "bench-ceiling"

const ceilingManager = "bench-ceiling"

// ceiling is the apiserver's own write throughput, measured with an
// unthrottled client before any operator runs.
type ceiling struct {
	sa1, saN, status1, statusN float64
}

// taskLimit is the write-bound task rate: a task costs the operator three
// child applies (ServiceAccount, NetworkPolicy, Sandbox, each a small
// object) and two status applies (the pin with Provisioning, then Running).
func (c ceiling) taskLimit() float64 {
	return 1 / (3/c.saN + 2/c.statusN)
}

func (b *bench) measureCeiling(ctx context.Context) (ceiling, error) {
	var c ceiling
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ceilingNamespace}}
	if _, err := b.admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return c, err
	}
	conc := b.cfg.CeilingConcurrency

	// ServiceAccount applies that create: what the operator's first apply
	// of each child is.
	var saSeq atomic.Int64
	saApply := func(ctx context.Context, _ int) error {
		name := fmt.Sprintf("sa-%d", saSeq.Add(1))
		body, _ := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata":                     map[string]any{"name": name, "labels": map[string]string{"app.kubernetes.io/managed-by": ceilingManager}},
			"automountServiceAccountToken": false,
		})
		_, err := b.admin.CoreV1().ServiceAccounts(ceilingNamespace).Patch(ctx, name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: ceilingManager, Force: new(true)})
		return err
	}
	if _, err := b.rate(ctx, conc, 0, 2*conc, saApply); err != nil { // warm-up
		return c, err
	}
	var err error
	if c.sa1, err = b.rate(ctx, 1, b.cfg.CeilingDuration, 0, saApply); err != nil {
		return c, err
	}
	if c.saN, err = b.rate(ctx, conc, b.cfg.CeilingDuration, 0, saApply); err != nil {
		return c, err
	}
	b.logf("  ServiceAccount applies/s: %.0f at concurrency 1, %.0f at %d", c.sa1, c.saN, conc)

	// Status applies to CalibanTasks, one task per worker so that no two
	// applies contend for one object. No Workspace exists, and no operator
	// runs yet to read these tasks.
	for w := range conc {
		task := &calibanv1alpha1.CalibanTask{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ceiling-%d", w)},
			Spec: calibanv1alpha1.CalibanTaskSpec{
				WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "none"},
				Task:         calibanv1alpha1.TaskDefinition{Prompt: "ceiling"},
			},
		}
		if _, err := b.caliban.CalibanV1alpha1().CalibanTasks(ceilingNamespace).Create(ctx, task, metav1.CreateOptions{}); err != nil {
			return c, err
		}
	}
	var stSeq atomic.Int64
	statusApply := func(ctx context.Context, w int) error {
		name := fmt.Sprintf("ceiling-%d", w)
		n := stSeq.Add(1)
		// A status like the operator's Running one; the message changes
		// with every apply so that each one is a real write.
		body, _ := json.Marshal(map[string]any{
			"apiVersion": calibanv1alpha1.SchemeGroupVersion.String(), "kind": "CalibanTask",
			"metadata": map[string]any{"name": name},
			"status": map[string]any{
				"phase":              "Running",
				"calibandEndpoint":   name + "." + ceilingNamespace + ".svc.cluster.local:8443",
				"sandboxRef":         map[string]any{"name": name},
				"observedGeneration": 1,
				"conditions": []any{map[string]any{
					"type": "Ready", "status": "True", "reason": "Running", "observedGeneration": 1,
					"message":            fmt.Sprintf("apply %d", n),
					"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
				}},
			},
		})
		_, err := b.caliban.CalibanV1alpha1().CalibanTasks(ceilingNamespace).Patch(ctx, name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: ceilingManager, Force: new(true)}, "status")
		return err
	}
	if _, err := b.rate(ctx, conc, 0, 2*conc, statusApply); err != nil { // warm-up
		return c, err
	}
	if c.status1, err = b.rate(ctx, 1, b.cfg.CeilingDuration, 0, statusApply); err != nil {
		return c, err
	}
	if c.statusN, err = b.rate(ctx, conc, b.cfg.CeilingDuration, 0, statusApply); err != nil {
		return c, err
	}
	b.logf("  CalibanTask status applies/s: %.0f at concurrency 1, %.0f at %d", c.status1, c.statusN, conc)

	// Gone before the operator starts, objects and all.
	if err := b.admin.CoreV1().Namespaces().Delete(ctx, ceilingNamespace, metav1.DeleteOptions{}); err != nil {
		return c, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		_, err := b.admin.CoreV1().Namespaces().Get(ctx, ceilingNamespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return c, nil
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("namespace %s was not deleted within 5 minutes (last error: %v)", ceilingNamespace, err)
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// rate runs op on conc workers (worker index passed) for d, or until count
// operations are done when d is 0, and returns the operations per second.
// An error stops the measurement: the apiserver refusing a write is a
// broken test bed, not a number.
func (b *bench) rate(ctx context.Context, conc int, d time.Duration, count int, op func(context.Context, int) error) (float64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				if d > 0 && time.Now().After(end) {
					return
				}
				if d == 0 && done.Load() >= int64(count) {
					return
				}
				if err := op(ctx, w); err != nil {
					cancel(err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	return float64(done.Load()) / elapsed.Seconds(), nil
}
