// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibaninformers "github.com/caliban-ai/caliban-operator/pkg/generated/informers/externalversions/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// Deps are what both controllers are built from: the clients, the
// informers, the settings and the process's instruments. A controller is
// complete when its constructor returns.
type Deps struct {
	Clients         Clients
	Tasks           calibaninformers.CalibanTaskInformer
	Workspaces      calibaninformers.WorkspaceInformer
	ServiceAccounts coreinformers.ServiceAccountInformer
	NetworkPolicies networkinginformers.NetworkPolicyInformer
	// Sandboxes is agent-sandbox's Sandbox informer (NewSandboxInformer),
	// run once SandboxAPI says the API is served.
	Sandboxes cache.SharedIndexInformer
	// ClaimedSandboxes is the metadata of every Sandbox a SandboxClaim
	// made or adopted (NewClaimedSandboxInformer), run with Sandboxes;
	// nil runs without the duplicate check.
	ClaimedSandboxes cache.SharedIndexInformer
	SandboxAPI       SandboxAPI
	Warm             WarmPoolInformers
	Settings         config.AgentSettings
	// DrainTimeout bounds a deleted task's drain
	// (CALIBAN_DRAIN_TIMEOUT_SECONDS).
	DrainTimeout time.Duration
	// ShutdownGrace bounds how long syncs in flight may go on once a
	// controller stops.
	ShutdownGrace time.Duration
	// PinKey signs the pins this operator writes and tells them from pins
	// someone else wrote into the status (LoadPinKey).
	PinKey   builders.PinKey
	Recorder Recorder
	Metrics  *Metrics
	// Tracer starts the span of each sync; the zero Tracer traces nothing.
	Tracer tracing.Tracer
	Clock  clock.PassiveClock
}

// syncFunc reconciles one object. A nil error with after > 0 asks to look
// again after that long (the object waits on time, not on an event); an
// error asks for a rate-limited retry and is returned only when a retry can
// help.
type syncFunc func(ctx context.Context, key cache.ObjectName) (after time.Duration, err error)

// loop is the queue-and-workers part every controller shares: named queue,
// cache-sync wait, workers, and a shutdown that lets in-flight syncs finish.
type loop struct {
	name    string
	queue   workqueue.TypedRateLimitingInterface[cache.ObjectName]
	synced  []cache.InformerSynced
	sync    syncFunc
	metrics *Metrics
	// shutdownGrace bounds how long syncs in flight may go on once the
	// controller stops; under leader election it comes from the lease grace,
	// so a deposed leader has stopped writing before another can take over.
	shutdownGrace time.Duration
	// tracer starts the span of each sync; the zero value (the default)
	// traces nothing.
	tracer tracing.Tracer
}

// newLoop makes a controller's loop. With urgent, the queue serves the
// items urgent reports before the others (lanes); without, it is one FIFO.
func newLoop(name string, limiter workqueue.TypedRateLimiter[cache.ObjectName], d Deps, urgent func(cache.ObjectName) bool) *loop {
	cfg := workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: name, MetricsProvider: d.Metrics.WorkqueueProvider()}
	if urgent != nil {
		// The layers client-go would build, with the store swapped.
		cfg.DelayingQueue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[cache.ObjectName]{
			Name: name, MetricsProvider: cfg.MetricsProvider,
			Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[cache.ObjectName]{
				Name: name, MetricsProvider: cfg.MetricsProvider, Queue: newLanes(urgent),
			}),
		})
	}
	return &loop{name: name, queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter, cfg), metrics: d.Metrics,
		shutdownGrace: d.ShutdownGrace, tracer: d.Tracer}
}

// span says how a controller's syncs are traced and logged.
type span[T metav1.Object] struct {
	name string
	// ownTrace: every sync of one object joins the object's trace.
	ownTrace bool
	// logKey names the object in the sync's log lines.
	logKey string
	// attributes describe the object on the span, its phase before and
	// (until a status write says otherwise) after included.
	attributes func(T) []attribute.KeyValue
}

// syncOf is the preamble both controllers share, around a sync of one
// object: get it from its cache (nothing to do once it is gone), start the
// sync's span, and name the object in the log.
func syncOf[T metav1.Object](l *loop, get func(cache.ObjectName) (T, bool, error), sp span[T], sync func(context.Context, T) (time.Duration, error)) syncFunc {
	return func(ctx context.Context, key cache.ObjectName) (after time.Duration, err error) {
		obj, ok, err := get(key)
		if err != nil || !ok {
			return 0, err
		}
		ctx, s := l.tracer.StartSync(ctx, sp.name, obj.GetUID(), sp.ownTrace)
		if s != nil {
			s.SetAttributes(sp.attributes(obj)...)
		}
		defer func() { s.End(after, err) }()
		ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues(sp.logKey, klog.KObj(obj)))
		return sync(ctx, obj)
	}
}

// rateLimiter is the retry policy of a controller's queue: per-item
// exponential backoff for failing objects, and an overall bucket so a burst
// of failures cannot flood the apiserver.
func rateLimiter(base, max time.Duration) workqueue.TypedRateLimiter[cache.ObjectName] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](base, max),
		&workqueue.TypedBucketRateLimiter[cache.ObjectName]{Limiter: newBucket(50, 300)},
	)
}

func (l *loop) enqueue(obj any) {
	key, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	l.queue.Add(key)
}

// run blocks until ctx is done, then stops taking work and waits for the
// syncs in flight.
func (l *loop) run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithValues("controller", l.name)
	ctx = klog.NewContext(ctx, logger)

	if !cache.WaitForNamedCacheSyncWithContext(ctx, l.synced...) {
		l.queue.ShutDown()
		if ctx.Err() != nil {
			return nil // shut down before the caches synced: nothing in flight
		}
		return fmt.Errorf("%s: caches did not sync", l.name)
	}
	// Syncs in flight when ctx ends may finish their API calls, for at
	// most shutdownGrace: a half-written status is worse than a late exit.
	// No sync starts after ctx ended, though the queue still holds items.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()

	logger.Info("Starting workers", "count", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for l.processNextWorkItem(ctx, workCtx) {
			}
		})
	}
	<-ctx.Done()
	logger.Info("Shutting down: waiting for syncs in flight", "atMost", l.shutdownGrace)
	timer := time.AfterFunc(l.shutdownGrace, cancelWork)
	defer timer.Stop()
	l.queue.ShutDownWithDrain()
	wg.Wait()
	return nil
}

// processNextWorkItem syncs one item under workCtx. termCtx is the
// controller's own context: once it has ended, an item taken from the queue
// is left alone (the next term or process syncs it again from the informer).
func (l *loop) processNextWorkItem(termCtx, ctx context.Context) bool {
	key, shutdown := l.queue.Get()
	if shutdown {
		return false
	}
	defer l.queue.Done(key)
	if termCtx.Err() != nil {
		return false
	}

	start := time.Now()
	after, err := l.sync(ctx, key)
	l.metrics.observeSync(l.name, time.Since(start), err)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Error syncing; requeuing for later retry", "controller", l.name, "object", key)
		l.queue.AddRateLimited(key)
		return true
	}
	l.queue.Forget(key)
	if after > 0 {
		l.queue.AddAfter(key, after)
	}
	return true
}

// cacheSyncedAll waits for every informer of every controller.
// cacheSyncedNow reports whether every informer has synced, without
// waiting.
func cacheSyncedNow(synced []cache.InformerSynced) bool {
	for _, s := range synced {
		if !s() {
			return false
		}
	}
	return true
}

func cacheSyncedAll(ctx context.Context, synced ...[]cache.InformerSynced) bool {
	var all []cache.InformerSynced
	for _, s := range synced {
		all = append(all, s...)
	}
	return cache.WaitForCacheSync(ctx.Done(), all...)
}

// controllerOf is the object of kind gk that controls child, as get reads
// it from a cache by namespace and name. The controller reference must name
// that group and kind, and the object read must have the UID it names: an
// object deleted and made again under the name is another object, whose
// children these are not.
func controllerOf[T metav1.Object](child metav1.Object, gk schema.GroupKind, get func(namespace, name string) (T, error)) (T, bool) {
	var none T
	ref := metav1.GetControllerOfNoCopy(child)
	if ref == nil || ref.Kind != gk.Kind {
		return none, false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != gk.Group {
		return none, false
	}
	owner, err := get(child.GetNamespace(), ref.Name)
	if err != nil || owner.GetUID() != ref.UID {
		return none, false
	}
	return owner, true
}
