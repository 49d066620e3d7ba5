// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"testing"

	"k8s.io/client-go/tools/cache"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	informers "github.com/caliban-ai/caliban-operator/pkg/generated/informers/externalversions"
)

// WatchTasks hands observe every version of every task in ns that a watch
// delivers, the first list included, until the test ends: a test that must
// know a task never passed through some state (a re-pin, a flicker of its
// phase) cannot learn it from polling. It returns once the watch has
// listed; observe runs on the informer's goroutine.
func (c *Cluster) WatchTasks(t testing.TB, ctx context.Context, ns string, observe func(*calibanv1alpha1.CalibanTask)) {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(c.Caliban, 0, informers.WithNamespace(ns))
	informer := factory.Caliban().V1alpha1().CalibanTasks().Informer()
	deliver := func(obj any) {
		if task, ok := obj.(*calibanv1alpha1.CalibanTask); ok {
			observe(task)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    deliver,
		UpdateFunc: func(_, obj any) { deliver(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatalf("the watch of the tasks in %s never listed", ns)
	}
}
