// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	calibanscheme "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/scheme"
	calibaninformerfactory "github.com/caliban-ai/caliban-operator/pkg/generated/informers/externalversions"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// Clients are the API clients the controllers use.
type Clients struct {
	Kube    kubernetes.Interface
	Caliban calibanclient.Interface
	// Sandboxes is a REST client for agent-sandbox's Sandboxes
	// (NewSandboxRESTClient).
	Sandboxes rest.Interface
	// Extensions is the clientset for agent-sandbox's extensions
	// (NewExtensionsClient).
	Extensions calibanclient.Interface
}

// Operator runs both controllers for one leadership term.
type Operator struct {
	Clients  Clients
	Settings config.Settings
	// Metrics is where the controllers' metrics go (NewMetrics).
	Metrics *Metrics
	Clock   clock.PassiveClock
	// TracerProvider makes the syncs' spans; nil, or a no-op provider,
	// makes none.
	TracerProvider trace.TracerProvider

	running atomic.Bool
}

// Running reports whether controllers are running with synced caches
// (what /readyz reports while leading).
func (o *Operator) Running() bool { return o.running.Load() }

// Run builds fresh informers and controllers, runs them until ctx is done
// and waits for them to stop. Each leadership term calls it anew, so no
// state survives from a previous term.
func (o *Operator) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	s := o.Settings
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}

	scheme := clientgoscheme.Scheme
	if err := calibanscheme.AddToScheme(scheme); err != nil {
		return err
	}
	recorder := NewEventRecorder(o.Clients.Kube.EventsV1(), scheme, s.ControllerPodName, clk)

	ownedOnly := func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{builders.LabelManagedBy: builders.FieldManager}.String()
	}
	calibanFactory := calibaninformerfactory.NewSharedInformerFactoryWithOptions(o.Clients.Caliban, s.ResyncPeriod,
		calibaninformerfactory.WithNamespace(s.WatchNamespace), calibaninformerfactory.WithTransform((&cacheTransform{}).transform))
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(o.Clients.Kube, s.ResyncPeriod,
		informers.WithNamespace(s.WatchNamespace), informers.WithTweakListOptions(ownedOnly))
	sandboxes := NewSandboxInformer(o.Clients.Sandboxes, s.WatchNamespace, s.ResyncPeriod, ownedOnly)
	// Every Sandbox a claim made or adopted, the operator's labels or not,
	// as metadata: a warm task's claim that agent-sandbox gave two
	// Sandboxes shows there (docs/adr/0034-one-sandbox-per-warm-task.md).
	claimed := NewClaimedSandboxInformer(o.Clients.Sandboxes, s.WatchNamespace, s.ResyncPeriod)
	// Waited for like the factories' informers when the term ends.
	var sandboxInformer sync.WaitGroup

	// agent-sandbox's extensions, for warm pools: a factory of their own,
	// started once the API is served, like the Sandbox informer.
	extFactory := calibaninformerfactory.NewSharedInformerFactoryWithOptions(o.Clients.Extensions, s.ResyncPeriod,
		calibaninformerfactory.WithNamespace(s.WatchNamespace), calibaninformerfactory.WithTweakListOptions(ownedOnly),
		calibaninformerfactory.WithTransform((&cacheTransform{}).transform))
	warm := WarmPoolInformers{
		Client:          o.Clients.Extensions.ExtensionsV1beta1(),
		Templates:       extFactory.Extensions().V1beta1().SandboxTemplates(),
		Pools:           extFactory.Extensions().V1beta1().SandboxWarmPools(),
		Claims:          extFactory.Extensions().V1beta1().SandboxClaims(),
		ServiceAccounts: kubeFactory.Core().V1().ServiceAccounts(),
		NetworkPolicies: kubeFactory.Networking().V1().NetworkPolicies(),
	}
	extSynced := []cache.InformerSynced{warm.Templates.Informer().HasSynced, warm.Pools.Informer().HasSynced, warm.Claims.Informer().HasSynced}
	extAPI := &apiWatcher{
		api:       extensionsAPI,
		discovery: o.Clients.Kube.Discovery(),
		start:     func() { extFactory.Start(ctx.Done()) },
		synced:    func() bool { return cacheSyncedNow(extSynced) },
		interval:  apiPollInterval,
	}
	warm.API = extAPI

	workspaces := calibanFactory.Caliban().V1alpha1().Workspaces()
	tasks := calibanFactory.Caliban().V1alpha1().CalibanTasks()
	// The Sandbox informer starts only once agent-sandbox's API is served:
	// both controllers run without it, and tasks wait in Provisioning.
	sandboxAPI := &apiWatcher{
		api:       sandboxesAPI,
		discovery: o.Clients.Kube.Discovery(),
		start: func() {
			sandboxInformer.Go(func() { sandboxes.RunWithContext(ctx) })
			sandboxInformer.Go(func() { claimed.RunWithContext(ctx) })
		},
		synced:   func() bool { return sandboxes.HasSynced() && claimed.HasSynced() },
		interval: apiPollInterval,
	}
	// Before any sync: a task pinned without the key could never be
	// trusted again.
	pinKey, err := LoadPinKey(ctx, o.Clients.Kube.CoreV1(), s.PinKeyNamespace(), s.PinKeySecret)
	if err != nil {
		return err
	}
	d := Deps{
		Clients: o.Clients, Tasks: tasks, Workspaces: workspaces,
		ServiceAccounts: kubeFactory.Core().V1().ServiceAccounts(), NetworkPolicies: kubeFactory.Networking().V1().NetworkPolicies(),
		Sandboxes: sandboxes, ClaimedSandboxes: claimed, SandboxAPI: sandboxAPI, Warm: warm,
		Settings: s.AgentSettings, DrainTimeout: s.TaskDrainTimeout, ShutdownGrace: s.ShutdownGrace(), PinKey: pinKey,
		Recorder: recorder, Metrics: o.Metrics, Tracer: tracing.NewTracer(o.TracerProvider), Clock: clk,
	}
	wc, err := NewWorkspaceController(d)
	if err != nil {
		return err
	}
	tc, err := NewTaskController(d)
	if err != nil {
		return err
	}
	sandboxAPI.onServed = tc.enqueueAll
	extAPI.onServed = wc.enqueueWarm
	o.Metrics.SetTerm(&Term{Tasks: tasks.Lister(), Workspaces: workspaces.Lister(), SandboxServed: sandboxAPI.Served})
	// The gauges go when the term ends, not after the shutdown grace: a
	// deposed leader must not report from a cache it stopped keeping.
	stop := context.AfterFunc(ctx, func() { o.Metrics.SetTerm(nil) })
	defer func() {
		if stop() {
			o.Metrics.SetTerm(nil)
		}
	}()

	calibanFactory.Start(ctx.Done())
	defer func() {
		calibanFactory.Shutdown()
		kubeFactory.Shutdown()
		extFactory.Shutdown()
		sandboxInformer.Wait()
	}()
	// The children's transform checks each child against its task as the
	// task cache holds it, so it waits for that cache to sync, or a restart
	// would find every child wanting and apply it again. The child
	// informers start now all the same: their lists travel and decode
	// while the tasks' do, and only the checks wait.
	tasksSynced := make(chan struct{})
	go func() {
		defer close(tasksSynced) // also when the term ends unsynced: nothing may wait forever
		cache.WaitForCacheSync(ctx.Done(), tasks.Informer().HasSynced)
	}()
	tc.CheckChildrenAfter(tasksSynced)
	kubeFactory.Start(ctx.Done())

	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs <- wc.Run(ctx, s.Workers) })
	wg.Go(func() { errs <- tc.Run(ctx, s.Workers) })
	wg.Go(func() { sandboxAPI.run(ctx) })
	wg.Go(func() { extAPI.run(ctx) })
	wg.Go(func() { recorder.Run(ctx) })
	// Waited for like the controllers: a late Store(true) must not outlive
	// the term and report a next term ready before its caches synced.
	wg.Go(func() {
		// Ready once both controllers have synced caches and started.
		if cacheSyncedAll(ctx, wc.synced, tc.synced) && ctx.Err() == nil {
			o.running.Store(true)
			logger.Info("Controllers running")
		}
	})
	wg.Wait()
	o.running.Store(false)
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// cacheTransform is the transform of the task and Workspace informers. It
// drops managedFields: no sync reads them, and server-side apply makes them
// a large part of each object. (The children's caches keep views, see
// freshness.Tracker.Transform.) And it lets tasks pinned alike share one pin: the tasks of a
// Workspace mostly carry the same pinned configuration, a fifth of a
// cached task. Cached objects are never written to, so sharing is safe.
type cacheTransform struct {
	mu sync.Mutex
	// pins holds the last pin seen per Workspace ("namespace/name").
	pins map[string]*calibanv1alpha1.ResolvedWorkspace
}

func (t *cacheTransform) transform(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	if task, ok := obj.(*calibanv1alpha1.CalibanTask); ok && task.Status.ResolvedWorkspace != nil {
		task.Status.ResolvedWorkspace = t.sharedPin(task.Namespace+"/"+task.Spec.WorkspaceRef.Name, task.Status.ResolvedWorkspace)
	}
	return obj, nil
}

// sharedPin returns the pin last seen for the Workspace if it equals pin,
// or else remembers pin and returns it.
func (t *cacheTransform) sharedPin(workspace string, pin *calibanv1alpha1.ResolvedWorkspace) *calibanv1alpha1.ResolvedWorkspace {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last := t.pins[workspace]; last != nil && apiequality.Semantic.DeepEqual(last, pin) {
		return last
	}
	if t.pins == nil {
		t.pins = map[string]*calibanv1alpha1.ResolvedWorkspace{}
	}
	t.pins[workspace] = pin
	return pin
}
