// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	calibanlisters "github.com/caliban-ai/caliban-operator/pkg/generated/listers/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// WorkspaceControllerName names the Workspace queue (and its metrics).
const WorkspaceControllerName = "workspace"

// workspaceSyncSpan names the span of a Workspace's sync.
const workspaceSyncSpan = WorkspaceControllerName + " sync"

// Workspace re-check intervals (docs/crd-reference.md#requeue-intervals).
// Secrets are read, never watched, so a Failed workspace is polled: creating
// the missing Secret recovers it within seconds.
const (
	workspaceReadyRecheck    = 300 * time.Second
	workspaceNotReadyRecheck = 15 * time.Second
	// warmPoolStatusDelay gathers a pool's readiness changes into one
	// Workspace sync.
	warmPoolStatusDelay = time.Second
)

// WorkspaceController validates Workspaces and writes their status, and
// keeps the warm pool of each Workspace that asks for one.
type WorkspaceController struct {
	*loop
	caliban  calibanclient.Interface
	kube     kubernetes.Interface
	lister   calibanlisters.WorkspaceLister
	settings config.AgentSettings
	recorder Recorder
	clock    clock.PassiveClock
	warm     warmPools
}

// NewWorkspaceController wires the controller to the Workspace informer
// and the warm pools' informers.
func NewWorkspaceController(d Deps) (*WorkspaceController, error) {
	warm := d.Warm
	c := &WorkspaceController{
		caliban:  d.Clients.Caliban,
		kube:     d.Clients.Kube,
		lister:   d.Workspaces.Lister(),
		settings: d.Settings,
		recorder: d.Recorder,
		clock:    d.Clock,
		warm: warmPools{
			ext: warm.API, client: warm.Client, templates: warm.Templates.Lister(), pools: warm.Pools.Lister(),
			serviceAccounts: warm.ServiceAccounts.Informer().GetStore(), networkPolicies: warm.NetworkPolicies.Informer().GetStore(),
		},
	}
	c.loop = newLoop(WorkspaceControllerName, rateLimiter(500*time.Millisecond, 5*time.Minute), d, nil)
	// A trace per sync, not per Workspace: a Workspace lives on
	// indefinitely and is looked at every 15 s while it is not Ready, which
	// would grow one trace without end (docs/adr/0020-tracing.md).
	c.sync = syncOf(c.loop, c.cachedWorkspace, span[*calibanv1alpha1.Workspace]{
		name: workspaceSyncSpan, logKey: "workspace",
		attributes: func(ws *calibanv1alpha1.Workspace) []attribute.KeyValue {
			phase := string(ws.Status.Phase)
			return []attribute.KeyValue{tracing.KeyNamespace.String(ws.Namespace), tracing.KeyWorkspaceName.String(ws.Name),
				tracing.KeyWorkspaceUID.String(string(ws.UID)), tracing.KeyWorkspacePhaseBefore.String(phase),
				tracing.KeyWorkspacePhaseAfter.String(phase)}
		},
	}, c.syncWorkspace)
	c.synced = []cache.InformerSynced{d.Workspaces.Informer().HasSynced,
		warm.ServiceAccounts.Informer().HasSynced, warm.NetworkPolicies.Informer().HasSynced,
		// The extensions' caches run only once the API is served.
		warm.API.HasSynced}
	if _, err := d.Workspaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, new any) {
			if old.(*calibanv1alpha1.Workspace).ResourceVersion == new.(*calibanv1alpha1.Workspace).ResourceVersion {
				return
			}
			c.enqueue(new)
		},
	}); err != nil {
		return nil, fmt.Errorf("adding Workspace event handler: %w", err)
	}
	// A pool child's change or deletion wakes its Workspace: the pool's
	// readiness is in its status, and a child deleted by someone else is
	// made again.
	if _, err := warm.Pools.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueOwningWorkspace,
		UpdateFunc: func(old, new any) {
			o, n := old.(*extv1beta1.SandboxWarmPool), new.(*extv1beta1.SandboxWarmPool)
			if o.Generation == n.Generation {
				// Readiness counts move with every claim and refill: a
				// burst of tasks is reported in a few writes, not two per
				// task.
				c.enqueueOwningWorkspaceAfter(new, warmPoolStatusDelay)
				return
			}
			c.enqueueOwningWorkspace(new)
		},
		DeleteFunc: c.enqueueOwningWorkspace,
	}); err != nil {
		return nil, fmt.Errorf("adding SandboxWarmPool event handler: %w", err)
	}
	if _, err := warm.Templates.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.enqueueOwningWorkspace,
	}); err != nil {
		return nil, fmt.Errorf("adding SandboxTemplate event handler: %w", err)
	}
	childEvents := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, new any) {
			if childUpdateMatters(old, new) {
				c.enqueueOwningWorkspace(new)
			}
		},
		DeleteFunc: c.enqueueOwningWorkspace,
	}
	for name, inf := range map[string]cache.SharedIndexInformer{
		"ServiceAccount": warm.ServiceAccounts.Informer(), "NetworkPolicy": warm.NetworkPolicies.Informer(),
	} {
		if _, err := inf.AddEventHandler(childEvents); err != nil {
			return nil, fmt.Errorf("adding %s event handler: %w", name, err)
		}
	}
	return c, nil
}

// enqueueOwningWorkspace wakes the Workspace that controls obj: the
// reference must name a Workspace of this API group with the UID of the
// one the cache holds.
func (c *WorkspaceController) enqueueOwningWorkspace(obj any) { c.enqueueOwningWorkspaceAfter(obj, 0) }

// enqueueOwningWorkspaceAfter is enqueueOwningWorkspace after delay.
func (c *WorkspaceController) enqueueOwningWorkspaceAfter(obj any, delay time.Duration) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	object, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	ws, ok := controllerOf(object, workspaceGroupKind, func(ns, name string) (*calibanv1alpha1.Workspace, error) {
		return c.lister.Workspaces(ns).Get(name)
	})
	if !ok {
		return
	}
	c.queue.AddAfter(cache.ObjectName{Namespace: ws.Namespace, Name: ws.Name}, delay)
}

// enqueueWarm wakes every Workspace that asks for a pool: the extensions
// API has just become served.
func (c *WorkspaceController) enqueueWarm() {
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ws := range all {
		if builders.WarmReplicas(ws) > 0 {
			c.enqueue(ws)
		}
	}
}

// Run processes the queue with workers until ctx is done.
func (c *WorkspaceController) Run(ctx context.Context, workers int) error { return c.run(ctx, workers) }

// cachedWorkspace reads a Workspace from its cache.
func (c *WorkspaceController) cachedWorkspace(key cache.ObjectName) (*calibanv1alpha1.Workspace, bool, error) {
	ws, err := c.lister.Workspaces(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	return ws, err == nil, err
}

func (c *WorkspaceController) syncWorkspace(ctx context.Context, ws *calibanv1alpha1.Workspace) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	if ws.DeletionTimestamp != nil {
		return 0, nil
	}

	problem, err := builders.ValidateWorkspace(&ws.Spec, c.settings.WorkspaceRoot, secretGetter(ctx, c.kube, ws.Namespace))
	if err != nil {
		return 0, err
	}
	pool, err := c.syncWarmPool(ctx, ws, problem)
	if taken := takenBy(err); taken != nil {
		// The pool cannot have a name something else holds: its condition
		// says so (tasks start cold), once, and the Workspace's recheck
		// looks again (the holder may go).
		if cond := meta.FindStatusCondition(ws.Status.Conditions, builders.ConditionWarmPoolReady); cond == nil || cond.Reason != builders.ReasonChildNameTaken {
			c.recorder.Event(ws, corev1.EventTypeWarning, builders.ReasonChildNameTaken, "WarmPool", taken.Error())
		}
		pool, err = &builders.WarmPoolObservation{Reason: builders.ReasonChildNameTaken, Problem: taken.Error()}, nil
	}
	if err != nil {
		return 0, err
	}
	desired := builders.WorkspaceStatus(ws, problem, pool, metav1.NewTime(c.clock.Now()))
	if builders.WorkspaceStatusChanged(ws.Status, desired) {
		logger.V(4).Info("Applying status", "phase", desired.Phase)
		if _, err := applyWorkspaceStatus(ctx, c.caliban, ws, desired); err != nil {
			return 0, fmt.Errorf("applying status of Workspace %s/%s: %w", ws.Namespace, ws.Name, err)
		}
		if span := tracing.SyncFrom(ctx); span != nil {
			span.SetAttributes(tracing.KeyWorkspacePhaseAfter.String(string(desired.Phase)))
		}
		if ws.Status.Phase != desired.Phase {
			logger.Info("Workspace phase changed", "from", ws.Status.Phase, "to", desired.Phase, "message", desired.Message)
			eventType := corev1.EventTypeNormal
			if desired.Phase == calibanv1alpha1.WorkspaceFailed {
				eventType = corev1.EventTypeWarning
			}
			c.recorder.Event(ws, eventType, EventPhaseChanged, "Validate", phaseNote(string(ws.Status.Phase), string(desired.Phase), desired.Message))
		}
	}
	if desired.Phase == calibanv1alpha1.WorkspaceReady {
		return workspaceReadyRecheck, nil
	}
	return workspaceNotReadyRecheck, nil
}
