// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	sandboxclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/typed/sandbox/v1beta1"
	calibanlisters "github.com/caliban-ai/caliban-operator/pkg/generated/listers/caliban/v1alpha1"
	extlisters "github.com/caliban-ai/caliban-operator/pkg/generated/listers/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// TaskControllerName names the CalibanTask queue (and its metrics).
const TaskControllerName = "calibantask"

// taskSyncSpan names the span of a task's sync.
const taskSyncSpan = TaskControllerName + " sync"

// workspaceIndex indexes tasks by the Workspace they name, as
// "<namespace>/<workspace>".
const workspaceIndex = "workspaceRef"

var taskGroupKind = schema.GroupKind{Group: calibanv1alpha1.GroupName, Kind: "CalibanTask"}

// TaskController admits CalibanTasks, pins their configuration, and keeps
// their Sandbox, ServiceAccount and NetworkPolicy applied.
type TaskController struct {
	*loop
	caliban calibanclient.Interface
	kube    kubernetes.Interface
	// sandboxes gets and applies Sandboxes (clients.go).
	sandboxes   *sandboxclient.AgentsV1beta1Client
	taskIndexer cache.Indexer
	// tasks is the task cache with the operator's own writes on top: every
	// sync reads it, and so does the children's transform.
	tasks *taskCache
	// taskREST writes the tasks' status (record).
	taskREST   rest.Interface
	workspaces calibanlisters.WorkspaceLister
	// children keeps the children's caches as views and knows whether each
	// holds what its task wants.
	children     *freshness.Tracker
	sandboxAPI   SandboxAPI
	settings     config.AgentSettings
	drainTimeout time.Duration
	pinKey       builders.PinKey
	recorder     Recorder
	clock        clock.PassiveClock
	// starts times the first starts in flight for
	// caliban_task_start_duration_seconds.
	starts *startTracker
	// warm is agent-sandbox's extensions: claims and pools are read from
	// their caches once the API is served.
	warm   WarmPoolInformers
	claims extlisters.SandboxClaimLister
	pools  extlisters.SandboxWarmPoolLister
	// taken holds, by task UID, the claimed Sandbox a warm task read
	// before it ran there, or labelled, until the Sandbox cache has it
	// (*takenSandbox); appliedPolicies the
	// applied hash of the NetworkPolicy it last applied.
	taken, appliedPolicies sync.Map
	// claimed indexes by controller UID the metadata of every Sandbox a
	// claim made or adopted (NewClaimedSandboxInformer); nil without it.
	claimed cache.Indexer
}

// NewTaskController wires the controller to its informers: tasks,
// workspaces (to admit, and to wake tasks when a workspace's status
// changes), the three kinds of children (to repair them) and the claims
// (warm starts). Child informers should be restricted to objects labelled
// managed-by caliban-operator.
func NewTaskController(d Deps) (*TaskController, error) {
	tasks := d.Tasks
	c := &TaskController{
		caliban:      d.Clients.Caliban,
		kube:         d.Clients.Kube,
		sandboxes:    sandboxClient(d.Clients.Sandboxes),
		taskIndexer:  tasks.Informer().GetIndexer(),
		tasks:        newTaskCache(tasks.Informer().GetStore()),
		taskREST:     d.Clients.Caliban.CalibanV1alpha1().RESTClient(),
		workspaces:   d.Workspaces.Lister(),
		sandboxAPI:   d.SandboxAPI,
		settings:     d.Settings,
		drainTimeout: d.DrainTimeout,
		pinKey:       d.PinKey,
		recorder:     d.Recorder,
		clock:        d.Clock,
		starts:       newStartTracker(),
		warm:         d.Warm,
		claims:       d.Warm.Claims.Lister(),
		pools:        d.Warm.Pools.Lister(),
	}
	if d.ClaimedSandboxes != nil {
		c.claimed = d.ClaimedSandboxes.GetIndexer()
	}
	children, err := freshness.New(d.Settings, c.controllingTask)
	if err != nil {
		return nil, err
	}
	c.children = children
	c.loop = newLoop(TaskControllerName, rateLimiter(500*time.Millisecond, 5*time.Minute), d, c.awaitsRunning)
	c.sync = syncOf(c.loop, c.cachedTask, span[*calibanv1alpha1.CalibanTask]{
		// Every sync of a task joins the task's own trace
		// (tracing.IDGenerator).
		name: taskSyncSpan, ownTrace: true, logKey: "calibantask",
		attributes: func(task *calibanv1alpha1.CalibanTask) []attribute.KeyValue {
			phase := string(task.Status.Phase)
			return []attribute.KeyValue{tracing.KeyNamespace.String(task.Namespace), tracing.KeyTaskName.String(task.Name),
				tracing.KeyTaskUID.String(string(task.UID)), tracing.KeyTaskPhaseBefore.String(phase),
				tracing.KeyTaskPhaseAfter.String(phase)}
		},
	}, c.syncTask)
	c.synced = []cache.InformerSynced{
		tasks.Informer().HasSynced, d.Workspaces.Informer().HasSynced,
		d.ServiceAccounts.Informer().HasSynced, d.NetworkPolicies.Informer().HasSynced,
		// The Sandbox informer runs only once agent-sandbox's API is served;
		// sandboxAPI says when its cache can be read. So do the extensions'.
		d.SandboxAPI.HasSynced, d.Warm.API.HasSynced,
	}
	if err := c.watch(d); err != nil {
		return nil, err
	}
	return c, nil
}

// cachedTask reads a task from the cache with the operator's own writes on
// top: a resync that comes before the watch brings the status just written
// must not take the task for what it was, and write the same phase again
// as new.
func (c *TaskController) cachedTask(key cache.ObjectName) (*calibanv1alpha1.CalibanTask, bool, error) {
	task, ok := c.tasks.get(key.String())
	return task, ok, nil
}

// watch adds the event handlers: what wakes a task
// (docs/architecture.md#what-wakes-a-task).
func (c *TaskController) watch(d Deps) error {
	tasks := d.Tasks
	if err := tasks.Informer().AddIndexers(cache.Indexers{workspaceIndex: indexByWorkspace}); err != nil {
		return fmt.Errorf("adding the CalibanTask workspace index: %w", err)
	}
	if _, err := tasks.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: c.taskAdded,
		// Resyncs (same resourceVersion) included: the resync is the safety
		// net for what no event announces, such as a deleted token Secret.
		UpdateFunc: c.taskUpdated,
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if task, ok := obj.(*calibanv1alpha1.CalibanTask); ok {
				c.tasks.forget(task.UID)
				c.children.Forget(task)
				c.starts.take(task.UID)
				c.taken.Delete(task.UID)
				c.appliedPolicies.Delete(task.UID)
			}
		},
	}); err != nil {
		return fmt.Errorf("adding CalibanTask event handler: %w", err)
	}
	if _, err := d.Workspaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueTasksOfWorkspace,
		UpdateFunc: func(old, new any) {
			o, n := old.(*calibanv1alpha1.Workspace), new.(*calibanv1alpha1.Workspace)
			if o.Status.Phase != n.Status.Phase || o.Status.ObservedGeneration != n.Status.ObservedGeneration || o.Status.Message != n.Status.Message {
				c.enqueueTasksOfWorkspace(n)
			}
		},
		DeleteFunc: c.enqueueTasksOfWorkspace,
	}); err != nil {
		return fmt.Errorf("adding Workspace event handler: %w", err)
	}
	// A child's creation wakes nobody: the operator created it, from a sync
	// that already read the result, and at start-up every task is enqueued
	// by its own informer.
	childEvents := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, new any) {
			if childUpdateMatters(old, new) {
				c.enqueueOwner(new)
			}
		},
		DeleteFunc: c.enqueueOwner,
	}
	for kind, inf := range map[freshness.Kind]cache.SharedIndexInformer{
		freshness.ServiceAccount: d.ServiceAccounts.Informer(),
		freshness.NetworkPolicy:  d.NetworkPolicies.Informer(),
		freshness.Sandbox:        d.Sandboxes,
	} {
		if err := c.children.Track(kind, inf); err != nil {
			return err
		}
		events := childEvents
		if kind == freshness.NetworkPolicy {
			events.DeleteFunc = c.policyDeleted
		}
		if _, err := inf.AddEventHandler(events); err != nil {
			return fmt.Errorf("adding %s event handler: %w", kind, err)
		}
	}
	if _, err := d.Sandboxes.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: c.sandboxUpdated}); err != nil {
		return fmt.Errorf("adding Sandbox readiness handler: %w", err)
	}
	// A Sandbox a claim comes to control wakes the claim's task: it may be
	// a second one (removeDuplicates).
	if d.ClaimedSandboxes != nil {
		if _, err := d.ClaimedSandboxes.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: c.enqueueOwner,
			UpdateFunc: func(old, new any) {
				o, okO := old.(metav1.Object)
				n, okN := new.(metav1.Object)
				if okO && okN && controllerUID(o) != controllerUID(n) {
					c.enqueueOwner(new)
				}
			},
		}); err != nil {
			return fmt.Errorf("adding claimed Sandbox event handler: %w", err)
		}
	}
	// A claim's status names the Sandbox it holds, and follows its
	// readiness.
	if _, err := d.Warm.Claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, new any) { c.enqueueOwner(new) },
		DeleteFunc: c.enqueueOwner,
	}); err != nil {
		return fmt.Errorf("adding SandboxClaim event handler: %w", err)
	}
	return nil
}

// policyDeleted wakes the task whose NetworkPolicy was deleted. A warm
// task's policy is not applied again while the watch has yet to bring the
// one just applied (appliedPolicies); a deleted one ends that, before the
// task's next sync, which makes it again.
func (c *TaskController) policyDeleted(obj any) {
	o := obj
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	if m, err := meta.Accessor(o); err == nil {
		if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
			c.appliedPolicies.Delete(ref.UID)
		}
	}
	c.enqueueOwner(obj)
}

// taskAdded caches and enqueues a task the informer delivered, and opens
// the timing of its start when it is new. A task listed at start-up was
// created before this process could see it: its start is timed from its
// creationTimestamp.
func (c *TaskController) taskAdded(obj any, isInInitialList bool) {
	task := obj.(*calibanv1alpha1.CalibanTask)
	c.tasks.caughtUp(task)
	if !isInInitialList && task.Status.Phase == "" {
		c.starts.created(task.UID, c.clock.Now())
	}
	c.enqueue(obj)
}

// taskUpdated wakes a task whose update matters (taskUpdateMatters). The
// syncs since the operator's last write read the task as that write left
// it (taskCache): the version that brings the write may differ from that
// as well as from the informer's previous version.
func (c *TaskController) taskUpdated(old, new any) {
	o, n := old.(*calibanv1alpha1.CalibanTask), new.(*calibanv1alpha1.CalibanTask)
	read := c.tasks.caughtUp(n)
	if taskUpdateMatters(o, n) || (read != nil && taskChangeMatters(read, n)) {
		c.enqueue(new)
	}
}

// sandboxUpdated marks when a Sandbox turned to serving: agent-sandbox's
// part of a start ends there, and what comes after, until Running, is the
// queue's wait and the sync, the operator's part.
func (c *TaskController) sandboxUpdated(old, new any) {
	o, okO := old.(*freshness.View)
	n, okN := new.(*freshness.View)
	if !okO || !okN || o.Sandbox == nil || n.Sandbox == nil || !builders.SandboxServing(&n.Sandbox.Status) || builders.SandboxServing(&o.Sandbox.Status) {
		return
	}
	if task := c.owningTask(n); task != nil {
		c.starts.sandboxReady(task.UID, c.clock.Now())
	}
}

// Run processes the queue with workers until ctx is done.
func (c *TaskController) Run(ctx context.Context, workers int) error { return c.run(ctx, workers) }

func indexByWorkspace(obj any) ([]string, error) {
	t, ok := obj.(*calibanv1alpha1.CalibanTask)
	if !ok {
		return nil, nil
	}
	return []string{t.Namespace + "/" + t.Spec.WorkspaceRef.Name}, nil
}

// enqueueTasksOfWorkspace wakes the tasks still waiting for admission
// against a workspace whose status changed. Pinned tasks never look at
// their workspace again.
func (c *TaskController) enqueueTasksOfWorkspace(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ws, ok := obj.(*calibanv1alpha1.Workspace)
	if !ok {
		return
	}
	tasks, err := c.taskIndexer.ByIndex(workspaceIndex, ws.Namespace+"/"+ws.Name)
	if err != nil {
		return
	}
	for _, t := range tasks {
		if task := t.(*calibanv1alpha1.CalibanTask); task.Status.ResolvedWorkspace == nil {
			c.enqueue(task)
		}
	}
}

// enqueueOwner wakes the task that controls a child. The owner reference
// must name a CalibanTask of this API group, and its UID must be the UID of
// the task the cache holds under that name: a task deleted and re-created
// with the same name is a different task.
func (c *TaskController) enqueueOwner(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	object, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	if task := c.owningTask(object); task != nil {
		c.enqueue(task)
	}
}

// owningTask is the task a child belongs to: the one that controls it, or
// the one whose claim controls it (a warm task's Sandbox).
func (c *TaskController) owningTask(child metav1.Object) *calibanv1alpha1.CalibanTask {
	if task := c.controllingTask(child); task != nil {
		return task
	}
	return c.taskOfClaimed(child)
}

// controllingTask is the task a child's controller reference names, from
// the task cache (with the operator's own recent writes on top), or nil. The
// reference must name a CalibanTask of this API group with the UID of the
// task the cache holds under that name.
func (c *TaskController) controllingTask(child metav1.Object) *calibanv1alpha1.CalibanTask {
	task, _ := controllerOf(child, taskGroupKind, func(ns, name string) (*calibanv1alpha1.CalibanTask, error) {
		if task, ok := c.tasks.get(ns + "/" + name); ok {
			return task, nil
		}
		return nil, errNotCached
	})
	return task
}

// errNotCached: the task cache holds no task of that name.
var errNotCached = errors.New("not in the cache")

// enqueueAll wakes every task, e.g. once agent-sandbox's API appeared.
func (c *TaskController) enqueueAll() {
	for _, obj := range c.taskIndexer.List() {
		c.enqueue(obj)
	}
}

// awaitsRunning reports that the task's Sandbox is Ready with an address
// while the task still says Provisioning: its next sync reports it
// Running, one write that prospero waits for, and goes ahead of the queue
// (lanes). It runs under the queue's lock: two cache reads, nothing that
// can block.
func (c *TaskController) awaitsRunning(key cache.ObjectName) bool {
	task, ok := c.tasks.get(key.String())
	if !ok || task.Status.Phase != calibanv1alpha1.TaskProvisioning {
		return false
	}
	sandbox := c.sandboxOf(task, c.claimOf(task))
	return sandbox != nil && builders.SandboxServing(&sandbox.Status)
}

// CheckChildrenAfter makes the children's checks wait until gate is
// closed (freshness.Tracker.CheckAfter). Call it before the child
// informers start.
func (c *TaskController) CheckChildrenAfter(gate <-chan struct{}) { c.children.CheckAfter(gate) }

// controllerUID is the UID of obj's controller, "" for none.
func controllerUID(obj metav1.Object) types.UID {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref.UID
	}
	return ""
}
