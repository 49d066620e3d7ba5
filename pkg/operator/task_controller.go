// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	sandboxclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/typed/sandbox/v1beta1"
	calibaninformers "github.com/caliban-ai/caliban-operator/pkg/generated/informers/externalversions/caliban/v1alpha1"
	calibanlisters "github.com/caliban-ai/caliban-operator/pkg/generated/listers/caliban/v1alpha1"
	extlisters "github.com/caliban-ai/caliban-operator/pkg/generated/listers/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// TaskControllerName names the CalibanTask queue (and its metrics).
const TaskControllerName = "calibantask"

// Requeue intervals (docs/crd-reference.md#requeue-intervals): a task waiting
// on a Pending workspace looks again soon (the workspace index usually wakes
// it sooner); a failed admission waits longer, since a person has to change
// something.
const (
	pendingWorkspaceRequeue = 10 * time.Second
	failureRequeue          = 30 * time.Second
	// conflictRequeue: a conditional pin met a newer version of the task.
	conflictRequeue = time.Second
)

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
	sandboxes   sandboxclient.SandboxesGetter
	tasks       calibanlisters.CalibanTaskLister
	taskIndexer cache.Indexer
	// taskCache is the task cache with the operator's own status writes on
	// top, until the informer brings them: the children's transform reads
	// a task's pin from it, and the pin is written moments before the
	// children whose events it checks.
	taskCache  cache.MutationCache
	workspaces calibanlisters.WorkspaceLister
	// children keeps the children's caches as views and knows whether each
	// holds what its task wants.
	children   *freshness.Tracker
	sandboxAPI SandboxAPI
	settings   config.AgentSettings
	recorder   Recorder
	clock      clock.PassiveClock
	// taskDrainTimeout bounds a deleted task's drain
	// (CALIBAN_DRAIN_TIMEOUT_SECONDS).
	taskDrainTimeout time.Duration
	// pinKey signs the pins this operator writes and tells them from pins
	// someone else wrote into the status (LoadPinKey).
	pinKey builders.PinKey
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
}

// NewTaskController wires the controller to its informers: tasks,
// workspaces (to admit, and to wake tasks when a workspace's status
// changes), and the three kinds of children (to repair them). Child
// informers should be restricted to objects labelled managed-by
// caliban-operator.
func NewTaskController(
	caliban calibanclient.Interface,
	kube kubernetes.Interface,
	sandboxRESTClient rest.Interface,
	tasks calibaninformers.CalibanTaskInformer,
	workspaces calibaninformers.WorkspaceInformer,
	serviceAccounts coreinformers.ServiceAccountInformer,
	networkPolicies networkinginformers.NetworkPolicyInformer,
	sandboxes cache.SharedIndexInformer,
	sandboxAPI SandboxAPI,
	warm WarmPoolInformers,
	settings config.AgentSettings,
	recorder Recorder,
	metrics *Metrics,
	clk clock.PassiveClock,
) (*TaskController, error) {
	c := &TaskController{
		caliban:     caliban,
		kube:        kube,
		sandboxes:   sandboxClient(sandboxRESTClient),
		tasks:       tasks.Lister(),
		taskIndexer: tasks.Informer().GetIndexer(),
		taskCache: cache.NewIntegerResourceVersionMutationCacheWithOptions(klog.Background(), tasks.Informer().GetStore(),
			cache.MutationCacheOptions{TTL: time.Minute, MaxCacheSize: 4096}),
		workspaces: workspaces.Lister(),
		sandboxAPI: sandboxAPI,
		settings:   settings,
		recorder:   recorder,
		clock:      clk,
		// The setting's default; cmd sets what the environment says.
		taskDrainTimeout: config.DefaultTaskDrainTimeout,
		starts:           newStartTracker(),
		warm:             warm,
		claims:           warm.Claims.Lister(),
		pools:            warm.Pools.Lister(),
	}
	children, err := freshness.New(settings, c.controllingTask)
	if err != nil {
		return nil, err
	}
	c.children = children
	c.loop = newLoop(TaskControllerName, rateLimiter(500*time.Millisecond, 5*time.Minute), metrics, c.awaitsRunning)
	c.sync = c.syncTask
	c.synced = []cache.InformerSynced{
		tasks.Informer().HasSynced, workspaces.Informer().HasSynced,
		serviceAccounts.Informer().HasSynced, networkPolicies.Informer().HasSynced,
		// The Sandbox informer runs only once agent-sandbox's API is served;
		// sandboxAPI says when its cache can be read. So do the extensions'.
		sandboxAPI.HasSynced, warm.API.HasSynced,
	}

	if err := tasks.Informer().AddIndexers(cache.Indexers{workspaceIndex: indexByWorkspace}); err != nil {
		return nil, fmt.Errorf("adding the CalibanTask workspace index: %w", err)
	}
	if _, err := tasks.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: c.taskAdded,
		// Resyncs (same resourceVersion) included: the resync is the safety
		// net for what no event announces, such as a deleted token Secret.
		UpdateFunc: func(old, new any) {
			c.taskCache.OnAddOrUpdate(new.(*calibanv1alpha1.CalibanTask))
			if taskUpdateMatters(old.(*calibanv1alpha1.CalibanTask), new.(*calibanv1alpha1.CalibanTask)) {
				c.enqueue(new)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if task, ok := obj.(*calibanv1alpha1.CalibanTask); ok {
				c.taskCache.OnDelete(task)
				c.children.Forget(task)
				c.starts.take(task.UID)
				c.taken.Delete(task.UID)
				c.appliedPolicies.Delete(task.UID)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("adding CalibanTask event handler: %w", err)
	}
	if _, err := workspaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueTasksOfWorkspace,
		UpdateFunc: func(old, new any) {
			o, n := old.(*calibanv1alpha1.Workspace), new.(*calibanv1alpha1.Workspace)
			if o.Status.Phase != n.Status.Phase || o.Status.ObservedGeneration != n.Status.ObservedGeneration || o.Status.Message != n.Status.Message {
				c.enqueueTasksOfWorkspace(n)
			}
		},
		DeleteFunc: c.enqueueTasksOfWorkspace,
	}); err != nil {
		return nil, fmt.Errorf("adding Workspace event handler: %w", err)
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
		freshness.ServiceAccount: serviceAccounts.Informer(),
		freshness.NetworkPolicy:  networkPolicies.Informer(),
		freshness.Sandbox:        sandboxes,
	} {
		if err := c.children.Track(kind, inf); err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(childEvents); err != nil {
			return nil, fmt.Errorf("adding %s event handler: %w", kind, err)
		}
	}
	if _, err := sandboxes.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: c.sandboxUpdated}); err != nil {
		return nil, fmt.Errorf("adding Sandbox readiness handler: %w", err)
	}
	// A claim's status names the Sandbox it holds, and follows its
	// readiness.
	if _, err := warm.Claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, new any) { c.enqueueOwner(new) },
		DeleteFunc: c.enqueueOwner,
	}); err != nil {
		return nil, fmt.Errorf("adding SandboxClaim event handler: %w", err)
	}
	return c, nil
}

// taskAdded caches and enqueues a task the informer delivered, and opens
// the timing of its start when it is new. A task listed at start-up was
// created before this process could see it: its start is timed from its
// creationTimestamp.
func (c *TaskController) taskAdded(obj any, isInInitialList bool) {
	task := obj.(*calibanv1alpha1.CalibanTask)
	c.taskCache.OnAddOrUpdate(task)
	if !isInInitialList && task.Status.Phase == "" {
		c.starts.created(task.UID, c.clock.Now())
	}
	c.enqueue(obj)
}

// sandboxUpdated marks when a Sandbox turned to serving: agent-sandbox's
// part of a start ends there, and what comes after, until Running, is the
// queue's wait and the sync, the operator's part.
func (c *TaskController) sandboxUpdated(old, new any) {
	o, okO := old.(*freshness.View)
	n, okN := new.(*freshness.View)
	if !okO || !okN || !builders.SandboxServing(n.SandboxStatus) || builders.SandboxServing(o.SandboxStatus) {
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
	ref := metav1.GetControllerOf(child)
	if ref == nil || ref.Kind != taskGroupKind.Kind {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != taskGroupKind.Group {
		return nil
	}
	obj, exists, err := c.taskCache.GetByKey(child.GetNamespace() + "/" + ref.Name)
	if err != nil || !exists {
		return nil
	}
	task, ok := obj.(*calibanv1alpha1.CalibanTask)
	if !ok || task.UID != ref.UID {
		return nil
	}
	return task
}

func (c *TaskController) syncTask(ctx context.Context, key cache.ObjectName) (after time.Duration, err error) {
	// The cache with the operator's own writes on top: a resync that comes
	// before the watch brings the status just written must not take the
	// task for what it was, and write the same phase again as new.
	obj, exists, err := c.taskCache.GetByKey(key.String())
	if err != nil {
		return 0, err
	}
	task, ok := obj.(*calibanv1alpha1.CalibanTask)
	if !exists || !ok {
		return 0, nil
	}
	// Every sync of a task joins the task's own trace (tracing.IDGenerator).
	ctx, span := c.tracer.StartSync(ctx, taskSyncSpan, task.UID, true)
	if span != nil {
		phase := string(task.Status.Phase)
		span.SetAttributes(tracing.KeyNamespace.String(task.Namespace), tracing.KeyTaskName.String(task.Name),
			tracing.KeyTaskUID.String(string(task.UID)), tracing.KeyTaskPhaseBefore.String(phase),
			// Until a status write says otherwise (writeStatusIf).
			tracing.KeyTaskPhaseAfter.String(phase))
	}
	defer func() { span.End(after, err) }()
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("calibantask", klog.KObj(task)))
	switch {
	case task.DeletionTimestamp != nil && builders.HasDrainFinalizer(task):
		after, err = c.drain(ctx, task)
	case task.DeletionTimestamp != nil:
		// The garbage collector removes the children; applying now would
		// only race it.
		return 0, nil
	default:
		after, err = c.reconcile(ctx, task)
	}
	if err != nil {
		c.recorder.Event(task, corev1.EventTypeWarning, EventReconcileError, "Reconcile", err.Error())
	}
	return after, err
}

// reconcile follows docs/crd-reference.md#admission (pseudo-code in
// docs/architecture.md#task-sync): decide admission and the checks, pin
// once, keep the finalizer and the children, then derive and write the
// status.
func (c *TaskController) reconcile(ctx context.Context, task *calibanv1alpha1.CalibanTask) (time.Duration, error) {
	d, err := c.decide(ctx, task)
	if err != nil {
		return 0, err
	}
	if d.waitForWorkspace {
		return pendingWorkspaceRequeue, c.recordPending(ctx, task)
	}
	now := c.clock.Now()
	in := builders.TaskStatusInput{Task: task, Failure: d.failure, Pin: d.pin, Posture: d.posture, PinSignature: d.pinSignature,
		Now: metav1.NewTime(now), DrainTimeout: c.taskDrainTimeout, Launch: d.launch}
	if d.failure != nil || d.pin == nil {
		return d.after, c.recordWithoutApplying(ctx, task, in)
	}

	// fresh is the claim this pass applied, which the cache may not have.
	var fresh *extv1beta1.SandboxClaim
	if d.newlyPinned {
		if d.launch != nil && d.launch.Type == calibanv1alpha1.LaunchWarm && d.launch.Claim == nil {
			// The claim first, so that agent-sandbox hands over a Sandbox
			// while the pin is written, and written with its UID: the
			// NetworkPolicy selects the pod by it.
			claim, err := c.applyClaim(ctx, task)
			if err != nil {
				c.recordApplyProblem(ctx, task, in, err)
				return 0, err
			}
			d.launch.Claim = &calibanv1alpha1.ClaimReference{Name: claim.Name, UID: claim.UID}
			fresh = claim
		}
		written, err := c.writePin(ctx, task, in)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The newer version may differ only in what the operator wrote
			// itself, which wakes nobody: look again shortly.
			klog.FromContext(ctx).V(4).Info("The task changed since the cache saw it; looking again", "error", err)
			return conflictRequeue, nil
		}
		if err != nil {
			return 0, err
		}
		// From here on the task is pinned like any other: the children are
		// rendered from the pin as the server stored it.
		task, in.Task = written, written
		if written.Status.ResolvedWorkspace != nil {
			in.Pin = written.Status.ResolvedWorkspace
		}
	}

	// The finalizer before any child: a task deleted once it has children
	// must find it there.
	if task, err = c.syncDrainFinalizer(ctx, task); err != nil {
		return 0, err
	}
	in.Task = task

	var (
		sandbox    *sandboxv1beta1.Sandbox
		apiMissing bool
		warmAfter  time.Duration
	)
	if builders.IsWarm(task) {
		task, sandbox, apiMissing, warmAfter, err = c.applyWarm(ctx, task, &in, fresh, builders.SandboxMode(task, now))
	} else {
		sandbox, apiMissing, err = c.applyChildren(ctx, task, in.Pin, builders.SandboxMode(task, now))
	}
	if err != nil {
		c.recordApplyProblem(ctx, task, in, err)
		return 0, err
	}
	if sandbox != nil {
		c.starts.childrenApplied(task.UID, c.clock.Now())
	}
	in.Sandbox, in.SandboxAPIMissing = sandbox, apiMissing
	written, err := c.writeStatus(ctx, task, in)
	if err != nil {
		return 0, err
	}
	completion := written.Status.CompletionTime
	if expiry := builders.Expiry(task, completion); !expiry.IsZero() && !now.Before(expiry) {
		return 0, c.deleteExpired(ctx, task)
	}
	after := d.after
	if apiMissing && c.sandboxAPI.Served() {
		// Served by discovery, yet the apply found no such resource: the
		// CRD went away. Look again later rather than wait for an event.
		after = failureRequeue
	}
	return soonest(soonest(after, warmAfter), builders.NextLifecycleWake(task, completion, now)), nil
}

// decision is what a task's sync decided before writing anything.
type decision struct {
	// waitForWorkspace: no pin yet, and the Workspace is not validated.
	waitForWorkspace bool
	// failure, when set, is why nothing is applied; after is when to look
	// again.
	failure *builders.Failure
	after   time.Duration
	pin     *calibanv1alpha1.ResolvedWorkspace
	posture calibanv1alpha1.PermissionPosture
	// pinSignature is the stored signature, or the new pin's.
	pinSignature string
	// newlyPinned: pin is the admission's, not in the task yet.
	newlyPinned bool
	// launch is decided with a new pin; nil keeps the stored one.
	launch *calibanv1alpha1.Launch
}

// decide gathers what the checks read (the Workspace while there is no
// pin, the state token Secret) and runs them in order: the lifecycle, then
// admission and the pin (once) or the pinned posture and env, then the
// state.
func (c *TaskController) decide(ctx context.Context, task *calibanv1alpha1.CalibanTask) (decision, error) {
	d := decision{pin: task.Status.ResolvedWorkspace, posture: task.Status.PermissionPosture, pinSignature: task.Status.PinSignature}
	if f := builders.LifecycleProblem(task); f != nil {
		// Checked before admission: a task is never pinned under a
		// deletion the operator would not honour.
		d.failure, d.after = f, failureRequeue
		return d, nil
	}
	if d.pin == nil {
		// A missing Workspace is an answer (nil), not an error.
		ws, err := c.workspaces.Workspaces(task.Namespace).Get(task.Spec.WorkspaceRef.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			return d, err
		}
		adm := builders.Admit(task, ws)
		switch adm.Verdict {
		case builders.WaitForWorkspace:
			d.waitForWorkspace = true
			return d, nil
		case builders.Rejected:
			d.failure, d.after = &adm.Failure, failureRequeue
			return d, nil
		}
		d.pin, d.posture, d.newlyPinned = adm.Pin, adm.Posture, true
		d.pinSignature = builders.SignPin(c.pinKey.Key, task.UID, adm.Pin)
		// With the pin, and written with it: a restart finds the path
		// taken before any child exists.
		launch, err := builders.DecideLaunch(task, adm.Pin, c.warmOffer(ws), c.settings)
		if err != nil {
			return d, err
		}
		if claim := c.claimOf(task); claim != nil {
			// A claim made for this pin before its write was lost (a
			// restart, a conflict): the path was taken already.
			launch = builders.WarmClaimed(task, claim.Name, claim.UID)
		}
		d.launch = &launch
	} else if f := builders.UntrustedPin(task, c.pinKey); f != nil {
		// Before every check that reads the pin: a pin someone else wrote
		// can say whatever passes them.
		d.failure, d.after = f, failureRequeue
		return d, nil
	} else if f := builders.PinnedPostureProblem(task); f != nil {
		d.failure, d.after = f, failureRequeue
		return d, nil
	} else if f := builders.PinnedEnvProblem(task); f != nil {
		d.failure, d.after = f, failureRequeue
		return d, nil
	} else {
		d.posture = builders.RequestedPosture(task)
	}
	f, err := builders.StateProblem(task.Spec.State, secretGetter(ctx, c.kube, task.Namespace))
	if err != nil {
		return d, err
	}
	if f != nil {
		d.failure, d.after = f, failureRequeue
	}
	return d, nil
}

// recordPending writes Pending into a task's empty status while its
// Workspace is not validated; a task that already says something keeps
// saying it until admission decides.
func (c *TaskController) recordPending(ctx context.Context, task *calibanv1alpha1.CalibanTask) error {
	klog.FromContext(ctx).V(4).Info("Waiting for the workspace to be validated", "workspace", task.Spec.WorkspaceRef.Name)
	if task.Status.Phase != "" {
		return nil
	}
	_, err := c.writeStatus(ctx, task, builders.TaskStatusInput{Task: task})
	return err
}

// recordWithoutApplying writes the status of a task nothing is applied
// for (a failure, or no pin): a Sandbox it already has is still its
// Sandbox. A pinned task keeps the finalizer its onDelete asks for, failed
// or not: it is deleted like any other.
func (c *TaskController) recordWithoutApplying(ctx context.Context, task *calibanv1alpha1.CalibanTask, in builders.TaskStatusInput) error {
	in.Sandbox = c.observedSandbox(task)
	written, err := c.writeStatus(ctx, task, in)
	if err != nil || in.Pin == nil {
		return err
	}
	_, err = c.syncDrainFinalizer(ctx, written)
	return err
}

// writePin writes the pin, the admitted posture and Provisioning in one
// write before any child, so a child apply that keeps failing retries
// under this pin instead of re-admitting against whatever the Workspace
// says by then. The write is conditional on the resourceVersion the
// decision was made from: a cache that lags behind a pin written moments
// ago gets a conflict, never a second pin of a Workspace edited since.
func (c *TaskController) writePin(ctx context.Context, task *calibanv1alpha1.CalibanTask, in builders.TaskStatusInput) (*calibanv1alpha1.CalibanTask, error) {
	in.SandboxAPIMissing = !c.sandboxAPI.Served()
	written, err := c.writeStatusIf(ctx, task, in, true)
	if err != nil {
		return nil, err
	}
	c.starts.pinned(written.UID, c.clock.Now())
	return written, nil
}

// recordApplyProblem says in the task's status why it is stuck (once: the
// same problem again changes nothing to write); the error itself retries
// with backoff.
func (c *TaskController) recordApplyProblem(ctx context.Context, task *calibanv1alpha1.CalibanTask, in builders.TaskStatusInput, problem error) {
	in.ApplyProblem, in.Sandbox = problem.Error(), c.observedSandbox(task)
	if _, err := c.writeStatus(ctx, task, in); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not record the apply problem in the status", "error", err)
	}
}

// soonest is the earlier of two requeue delays, where zero is none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// writeStatus derives the status and applies it when anything the operator
// owns changed, emitting Events for the transitions. It returns the task as
// it stands after the write (the input when nothing was written).
func (c *TaskController) writeStatus(ctx context.Context, task *calibanv1alpha1.CalibanTask, in builders.TaskStatusInput) (*calibanv1alpha1.CalibanTask, error) {
	return c.writeStatusIf(ctx, task, in, false)
}

// writeStatusIf is writeStatus, with the write conditional on task's
// resourceVersion when precondition is set.
func (c *TaskController) writeStatusIf(ctx context.Context, task *calibanv1alpha1.CalibanTask, in builders.TaskStatusInput, precondition bool) (*calibanv1alpha1.CalibanTask, error) {
	desired := builders.TaskStatus(in, c.settings)
	if !builders.TaskStatusChanged(task.Status, desired) {
		return task, nil
	}
	written, err := applyTaskStatus(ctx, c.caliban, task, desired, precondition)
	if err != nil {
		return nil, fmt.Errorf("applying status of CalibanTask %s/%s: %w", task.Namespace, task.Name, err)
	}
	if span := tracing.SyncFrom(ctx); span != nil {
		span.SetAttributes(tracing.KeyTaskPhaseAfter.String(string(desired.Phase)))
	}
	c.children.Carry(task, written)
	// Every sync reads the task cache with the operator's own writes on
	// top: one that runs before the watch brings this write must not take
	// the task for what it was and write the same move again.
	c.taskCache.Mutation(written)
	logger := klog.FromContext(ctx)
	oldReady := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady)
	newReady := meta.FindStatusCondition(desired.Conditions, builders.ConditionReady)
	if task.Status.Phase != desired.Phase {
		msg, reason := "", ""
		if newReady != nil {
			msg, reason = newReady.Message, newReady.Reason
		}
		logger.Info("CalibanTask phase changed", "from", task.Status.Phase, "to", desired.Phase, "message", msg)
		c.metrics.observeTransition(task.Status.Phase, desired.Phase, reason)
	}
	if !builders.Starting(desired) {
		marks := c.starts.take(task.UID)
		if desired.Phase == calibanv1alpha1.TaskRunning && builders.Starting(task.Status) {
			c.metrics.observeStart(builders.StartLaunch(in.Sandbox), builders.StartDurations(task, in.Sandbox, marks, c.clock.Now()))
		}
	}
	if note := coldStartNote(task.Status.Launch, desired.Launch); note != "" {
		c.recorder.Event(task, corev1.EventTypeNormal, EventColdStart, "Launch", note)
	}
	// A task's first phase is not a move: the Event would cost a request
	// per task in a burst and say nothing the status does not (a first
	// phase that is a failure has its Warning Event below).
	if task.Status.Phase != "" && task.Status.Phase != desired.Phase {
		c.recorder.Event(task, corev1.EventTypeNormal, EventPhaseChanged, "Reconcile", phaseNote(string(task.Status.Phase), string(desired.Phase), ""))
	}
	// The admitted posture is recorded in the write that pins the task (or
	// that follows an allowed edit), whatever else that write says: a state
	// problem fixed later must not lose the news.
	if desired.PermissionPosture == calibanv1alpha1.PostureUnattended && task.Status.PermissionPosture != desired.PermissionPosture {
		c.recorder.Event(task, corev1.EventTypeNormal, EventUnattendedAdmitted, "Admit", builders.UnattendedAdmittedNote(task.Spec.WorkspaceRef.Name, desired.RequestedBy))
	}
	if warning := warningOf(in, newReady); warning != "" && newReady != nil {
		if oldReady == nil || oldReady.Reason != newReady.Reason || oldReady.Message != newReady.Message || task.Status.Phase != desired.Phase {
			c.recorder.Event(task, corev1.EventTypeWarning, warning, "Reconcile", newReady.Message)
		}
	}
	return written, nil
}

// warningOf is the reason of the Warning Event a status derived from in
// (whose Ready condition is ready) calls for, "" for none: failures, a
// passed deadline, and a task held up by a missing agent-sandbox.
func warningOf(in builders.TaskStatusInput, ready *metav1.Condition) string {
	switch {
	case in.Failure != nil:
		return in.Failure.Reason
	case ready != nil && ready.Reason == builders.ReasonDeadlineExceeded:
		return EventDeadlineExceeded
	case in.SandboxAPIMissing:
		return EventSandboxAPIUnavailable
	}
	return ""
}

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
	obj, exists, err := c.taskCache.GetByKey(key.String())
	if err != nil || !exists {
		return false
	}
	task, ok := obj.(*calibanv1alpha1.CalibanTask)
	if !ok || task.Status.Phase != calibanv1alpha1.TaskProvisioning {
		return false
	}
	if builders.IsWarm(task) {
		sandbox := c.claimedSandbox(task)
		return sandbox != nil && builders.SandboxServing(sandbox.SandboxStatus)
	}
	sandbox := c.children.View(freshness.Sandbox, key.Namespace, builders.SandboxName(key.Name))
	return sandbox != nil && metav1.IsControlledBy(sandbox, task) && builders.SandboxServing(sandbox.SandboxStatus)
}

// CheckChildrenAfter makes the children's checks wait until gate is
// closed (freshness.Tracker.CheckAfter). Call it before the child
// informers start.
func (c *TaskController) CheckChildrenAfter(gate <-chan struct{}) { c.children.CheckAfter(gate) }
