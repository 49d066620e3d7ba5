package operator

import (
	"context"
	"fmt"
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
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	sandboxac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/sandbox/v1beta1"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	calibaninformers "github.com/caliban-ai/caliban-operator/pkg/generated/informers/externalversions/caliban/v1alpha1"
	calibanlisters "github.com/caliban-ai/caliban-operator/pkg/generated/listers/caliban/v1alpha1"
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
	// sandboxClient writes Sandboxes (sandbox_client.go).
	sandboxClient rest.Interface
	tasks         calibanlisters.CalibanTaskLister
	taskIndexer   cache.Indexer
	// taskCache is the task cache with the operator's own status writes on
	// top, until the informer brings them: the children's transform reads
	// a task's pin from it, and the pin is written moments before the
	// children whose events it checks.
	taskCache cache.MutationCache
	hashes    hashMemo
	// childGate, when set, holds the children's transform back until it
	// is closed (checkChildrenAfter).
	childGate  <-chan struct{}
	workspaces calibanlisters.WorkspaceLister
	// The children's stores hold views (childView, the informers'
	// transform viewOf), not the objects: the generated listers would
	// insist on the objects' types.
	serviceAccounts cache.Store
	networkPolicies cache.Store
	sandboxes       cache.Store
	sandboxAPI      SandboxAPI
	settings        builders.AgentSettings
	// fingerprint names how settings render children
	// (builders.RenderingFingerprint); children stamped with another are
	// kept as they are.
	fingerprint string
	recorder    Recorder
	clock       clock.PassiveClock
	// taskDrainTimeout bounds a deleted task's drain
	// (CALIBAN_DRAIN_TIMEOUT_SECONDS).
	taskDrainTimeout time.Duration
}

// NewTaskController wires the controller to its informers: tasks,
// workspaces (to admit, and to wake tasks when a workspace's status
// changes), and the three kinds of children (to repair them). Child
// informers should be restricted to objects labelled managed-by
// caliban-operator.
func NewTaskController(
	caliban calibanclient.Interface,
	kube kubernetes.Interface,
	sandboxClient rest.Interface,
	tasks calibaninformers.CalibanTaskInformer,
	workspaces calibaninformers.WorkspaceInformer,
	serviceAccounts coreinformers.ServiceAccountInformer,
	networkPolicies networkinginformers.NetworkPolicyInformer,
	sandboxes cache.SharedIndexInformer,
	sandboxAPI SandboxAPI,
	settings builders.AgentSettings,
	recorder Recorder,
	metrics *Metrics,
	clk clock.PassiveClock,
) (*TaskController, error) {
	c := &TaskController{
		caliban:       caliban,
		kube:          kube,
		sandboxClient: sandboxClient,
		tasks:         tasks.Lister(),
		taskIndexer:   tasks.Informer().GetIndexer(),
		taskCache: cache.NewIntegerResourceVersionMutationCacheWithOptions(klog.Background(), tasks.Informer().GetStore(),
			cache.MutationCacheOptions{TTL: time.Minute, MaxCacheSize: 4096}),
		workspaces:      workspaces.Lister(),
		serviceAccounts: serviceAccounts.Informer().GetStore(),
		networkPolicies: networkPolicies.Informer().GetStore(),
		sandboxes:       sandboxes.GetStore(),
		sandboxAPI:      sandboxAPI,
		settings:        settings,
		recorder:        recorder,
		clock:           clk,
		// The setting's default; cmd sets what the environment says.
		taskDrainTimeout: builders.DefaultTaskDrainTimeout,
	}
	fingerprint, err := builders.RenderingFingerprint(settings)
	if err != nil {
		return nil, err
	}
	c.fingerprint = fingerprint
	c.loop = newLoop(TaskControllerName, rateLimiter(500*time.Millisecond, 5*time.Minute), metrics, c.awaitsRunning)
	c.sync = c.syncTask
	c.synced = []cache.InformerSynced{
		tasks.Informer().HasSynced, workspaces.Informer().HasSynced,
		serviceAccounts.Informer().HasSynced, networkPolicies.Informer().HasSynced,
		// The Sandbox informer runs only once agent-sandbox's API is served;
		// sandboxAPI says when its cache can be read.
		sandboxAPI.HasSynced,
	}

	if err := tasks.Informer().AddIndexers(cache.Indexers{workspaceIndex: indexByWorkspace}); err != nil {
		return nil, fmt.Errorf("adding the CalibanTask workspace index: %w", err)
	}
	if _, err := tasks.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.taskCache.OnAddOrUpdate(obj.(*calibanv1alpha1.CalibanTask))
			c.enqueue(obj)
		},
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
				c.hashes.forget(task.UID)
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
	children := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, new any) {
			if childUpdateMatters(old, new) {
				c.enqueueOwner(new)
			}
		},
		DeleteFunc: c.enqueueOwner,
	}
	for kind, inf := range map[string]cache.SharedIndexInformer{
		"ServiceAccount": serviceAccounts.Informer(),
		"NetworkPolicy":  networkPolicies.Informer(),
		"Sandbox":        sandboxes,
	} {
		if err := inf.SetTransform(c.viewOf); err != nil {
			return nil, fmt.Errorf("setting the %s transform: %w", kind, err)
		}
		if _, err := inf.AddEventHandler(children); err != nil {
			return nil, fmt.Errorf("adding %s event handler: %w", kind, err)
		}
	}
	return c, nil
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
	task := c.controllingTask(object)
	if task == nil {
		return
	}
	c.enqueue(task)
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

func (c *TaskController) syncTask(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	task, err := c.tasks.CalibanTasks(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("calibantask", klog.KObj(task)))
	var after time.Duration
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
// docs/architecture.md#task-sync): admission and the pin (once), the
// per-reconcile posture and state checks, the children, then the status.
func (c *TaskController) reconcile(ctx context.Context, task *calibanv1alpha1.CalibanTask) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	var (
		failure     *builders.Failure
		after       time.Duration
		pin         = task.Status.ResolvedWorkspace
		posture     = task.Status.PermissionPosture
		newlyPinned bool
	)

	if f := builders.LifecycleProblem(task); f != nil {
		// Checked before admission: a task is never pinned under a
		// deletion the operator would not honour.
		failure, after = f, failureRequeue
	} else if pin == nil {
		// A missing Workspace is an answer (nil), not an error.
		ws, err := c.workspaces.Workspaces(task.Namespace).Get(task.Spec.WorkspaceRef.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
		adm := builders.Admit(task, ws)
		switch adm.Verdict {
		case builders.WaitForWorkspace:
			// Pending is written once, into an empty status; a task that
			// already says something keeps saying it until admission decides.
			if task.Status.Phase == "" {
				if _, err := c.writeStatus(ctx, task, builders.TaskStatusInput{Task: task}); err != nil {
					return 0, err
				}
			}
			logger.V(4).Info("Waiting for the workspace to be validated", "workspace", task.Spec.WorkspaceRef.Name)
			return pendingWorkspaceRequeue, nil
		case builders.Rejected:
			failure, after = &adm.Failure, failureRequeue
		case builders.Admitted:
			pin, posture, newlyPinned = adm.Pin, adm.Posture, true
		}
	} else if f := builders.PinnedPostureProblem(task); f != nil {
		failure, after = f, failureRequeue
	} else {
		posture = builders.RequestedPosture(task)
	}

	if failure == nil && pin != nil {
		f, err := builders.StateProblem(task.Spec.State, secretGetter(ctx, c.kube, task.Namespace))
		if err != nil {
			return 0, err
		}
		if f != nil {
			failure, after = f, failureRequeue
		}
	}

	now := c.clock.Now()
	in := builders.TaskStatusInput{Task: task, Failure: failure, Pin: pin, Posture: posture, Now: metav1.NewTime(now), DrainTimeout: c.taskDrainTimeout}
	if failure != nil || pin == nil {
		// Nothing is applied for a failed task, but a Sandbox it already has
		// is still its Sandbox.
		in.Sandbox = c.observedSandbox(task)
		written, err := c.writeStatus(ctx, task, in)
		if err != nil || pin == nil {
			return after, err
		}
		// A pinned task keeps the finalizer its onDelete asks for, failed
		// or not: it is deleted like any other.
		_, err = c.syncDrainFinalizer(ctx, written)
		return after, err
	}

	if newlyPinned {
		// Pin first: the pin, the admitted posture and Provisioning in one
		// write before any child, so a child apply that keeps failing
		// retries under this pin instead of re-admitting against whatever
		// the Workspace says by then. The write is conditional on the
		// resourceVersion the decision was made from: a cache that lags
		// behind a pin written moments ago gets a conflict, never a second
		// pin of a Workspace edited since.
		pinIn := in
		pinIn.SandboxAPIMissing = !c.sandboxAPI.Served()
		written, err := c.writeStatusIf(ctx, task, pinIn, true)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The newer version may differ only in what the operator wrote
			// itself, which wakes nobody: look again shortly.
			logger.V(4).Info("The task changed since the cache saw it; looking again", "error", err)
			return conflictRequeue, nil
		}
		if err != nil {
			return 0, err
		}
		task, in.Task = written, written
		c.taskCache.Mutation(written)
		// From here on the task is pinned like any other: the children are
		// rendered from the pin as the server stored it, and their hashes
		// are remembered for the version just written, which the
		// children's events will be checked against.
		if written.Status.ResolvedWorkspace != nil {
			pin, in.Pin = written.Status.ResolvedWorkspace, written.Status.ResolvedWorkspace
		}
	}

	// The finalizer before any child: a task deleted once it has children
	// must find it there.
	task, err := c.syncDrainFinalizer(ctx, task)
	if err != nil {
		return 0, err
	}
	in.Task = task

	sandbox, apiMissing, err := c.applyChildren(ctx, task, pin, builders.SandboxMode(task, now))
	if err != nil {
		// The task says why it is stuck (once: the same problem again
		// changes nothing to write); the error retries with backoff.
		in.ApplyProblem, in.Sandbox = err.Error(), c.observedSandbox(task)
		if _, werr := c.writeStatus(ctx, task, in); werr != nil {
			logger.V(2).Info("Could not record the apply problem in the status", "error", werr)
		}
		return 0, err
	}
	in.Sandbox, in.SandboxAPIMissing = sandbox, apiMissing
	if apiMissing && c.sandboxAPI.Served() {
		// Served by discovery, yet the apply found no such resource: the
		// CRD went away. Look again later rather than wait for an event.
		after = failureRequeue
	}
	written, err := c.writeStatus(ctx, task, in)
	if err != nil {
		return 0, err
	}
	completion := written.Status.CompletionTime
	if expiry := builders.Expiry(task, completion); !expiry.IsZero() && !now.Before(expiry) {
		return 0, c.deleteExpired(ctx, task)
	}
	return soonest(after, builders.NextLifecycleWake(task, completion, now)), nil
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
	c.hashes.carry(task, written)
	logger := klog.FromContext(ctx)
	oldReady := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady)
	newReady := meta.FindStatusCondition(desired.Conditions, builders.ConditionReady)
	if task.Status.Phase != desired.Phase {
		msg := ""
		if newReady != nil {
			msg = newReady.Message
		}
		logger.Info("CalibanTask phase changed", "from", task.Status.Phase, "to", desired.Phase, "message", msg)
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
		c.recorder.Event(task, corev1.EventTypeNormal, EventUnattendedAdmitted, "Admit",
			fmt.Sprintf("admitted unattended: the configuration pinned from workspace '%s' sets agentPolicy.allowUnattended", task.Spec.WorkspaceRef.Name))
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

// applyChildren applies the ServiceAccount, the NetworkPolicy and the
// Sandbox, each only when the live object does not already carry what the
// operator wants, and returns the Sandbox as the server has it. apiMissing
// says agent-sandbox's API is not served, so there is no Sandbox to apply.
func (c *TaskController) applyChildren(ctx context.Context, task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, mode sandboxv1beta1.OperatingMode) (sandbox *sandboxv1beta1.Sandbox, apiMissing bool, err error) {
	logger := klog.FromContext(ctx)

	hashes, rendered, err := c.desiredHashes(task, pin)
	if err != nil {
		return nil, false, err
	}
	// What is up to date needs no rendering; what is not is rendered once.
	render := func() (*desiredChildren, error) {
		if rendered == nil {
			rendered, err = c.renderChildren(task, pin)
		}
		return rendered, err
	}
	if v := c.cachedView(c.serviceAccounts, task.Namespace, builders.ServiceAccountName(task.Name)); v == nil || v.Holds != hashes.serviceAccount {
		d, err := render()
		if err != nil {
			return nil, false, err
		}
		logger.V(4).Info("Applying ServiceAccount", "name", *d.serviceAccount.Name)
		if _, err := c.kube.CoreV1().ServiceAccounts(task.Namespace).Apply(ctx, d.serviceAccount, applyOptions); err != nil {
			return nil, false, fmt.Errorf("applying ServiceAccount %s: %w", *d.serviceAccount.Name, err)
		}
	}

	// A NetworkPolicy rendered under other settings is kept: its ports are
	// the ones the task's pod listens on.
	if v := c.cachedView(c.networkPolicies, task.Namespace, builders.NetworkPolicyName(task.Name)); v == nil || (v.Holds != hashes.networkPolicy && !v.keptFrom(c.fingerprint)) {
		d, err := render()
		if err != nil {
			return nil, false, err
		}
		logger.V(4).Info("Applying NetworkPolicy", "name", *d.networkPolicy.Name)
		if _, err := c.kube.NetworkingV1().NetworkPolicies(task.Namespace).Apply(ctx, d.networkPolicy, applyOptions); err != nil {
			return nil, false, fmt.Errorf("applying NetworkPolicy %s: %w", *d.networkPolicy.Name, err)
		}
	}

	if !c.sandboxAPI.Served() {
		return nil, true, nil
	}
	current := c.liveSandbox(task)
	// A Sandbox rendered under other settings or by another version is
	// kept (ADR 0015): only its operatingMode follows the lifecycle.
	kept := current != nil && current.Holds != hashes.sandbox && current.keptFrom(c.fingerprint)
	if current != nil && (current.Holds == hashes.sandbox || kept) && liveMode(current.OperatingMode) == mode {
		return current.sandbox(), false, nil
	}
	var desired *sandboxac.SandboxApplyConfiguration
	if current != nil {
		// What agent-sandbox keeps immutable (volumeClaimTemplates) comes
		// from the Sandbox as it is, and so does everything else of a kept
		// one: an apply over an existing Sandbox is never refused for a
		// change the operator made to itself.
		live, err := c.getSandbox(ctx, task.Namespace, current.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, false, fmt.Errorf("reading Sandbox %s: %w", current.Name, err)
		}
		if live != nil && metav1.IsControlledBy(live, task) {
			if desired, err = c.overLive(task, pin, live, render); err != nil {
				return nil, false, err
			}
		}
	}
	if desired == nil {
		d, err := render()
		if err != nil {
			return nil, false, err
		}
		desired = d.sandbox
	}
	desired.Spec.WithOperatingMode(mode)
	logger.V(4).Info("Applying Sandbox", "name", *desired.Name, "kept", kept)
	err = c.applySandbox(ctx, desired)
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("applying Sandbox %s: %w", *desired.Name, err)
	}
	// The apply changed the spec, never the status agent-sandbox writes:
	// the task reads the status it had (none for a new Sandbox) with the
	// mode the server just accepted, and the informer brings whatever
	// comes next.
	var applied *sandboxv1beta1.Sandbox
	if current == nil {
		// A new Sandbox is the rendering under c.settings, so caliband
		// listens on the settings' port.
		applied = (&childView{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: *desired.Namespace},
			CalibandPort: c.settings.CalibandPort}).sandbox()
	} else {
		applied = current.sandbox()
	}
	applied.Spec.OperatingMode = mode
	return applied, false, nil
}

// overLive is the Sandbox to apply over live, the task's Sandbox as the
// server has it. One rendered by this operator's settings and version gets
// the rendering, with live's volumeClaimTemplates (equal unless the CRD
// defaulted something in them, which must not count as a change). A kept
// one gets its own spec back: the apply then changes nothing but what the
// caller sets (the operatingMode), and claims nothing the operator did not
// own, its labels and annotations being the operator's own keys.
func (c *TaskController) overLive(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, live *sandboxv1beta1.Sandbox, render func() (*desiredChildren, error)) (*sandboxac.SandboxApplyConfiguration, error) {
	liveSpec, err := builders.SandboxSpecApply(&live.Spec)
	if err != nil {
		return nil, fmt.Errorf("encoding Sandbox %s/%s: %w", live.Namespace, live.Name, err)
	}
	if c.renderedBy(live) == c.fingerprint {
		d, err := render()
		if err != nil {
			return nil, err
		}
		desired, spec := *d.sandbox, *d.sandbox.Spec
		spec.VolumeClaimTemplates = liveSpec.VolumeClaimTemplates
		desired.Spec = &spec
		return &desired, nil
	}
	kept := builders.BuildSandbox(task, pin, c.settings)
	kept.Annotations = map[string]string{}
	for _, key := range []string{AnnotationAppliedHash, AnnotationRenderedBy} {
		if v, ok := live.Annotations[key]; ok {
			kept.Annotations[key] = v
		}
	}
	kept.Spec = liveSpec
	return kept, nil
}

// liveMode is a Sandbox's operatingMode as agent-sandbox reads it: unset
// is Running, the CRD's default.
func liveMode(m sandboxv1beta1.OperatingMode) sandboxv1beta1.OperatingMode {
	if m == "" {
		return sandboxv1beta1.OperatingModeRunning
	}
	return m
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
	obj, exists, err = c.sandboxes.GetByKey(key.Namespace + "/" + builders.SandboxName(key.Name))
	if err != nil || !exists {
		return false
	}
	// Read in place: cachedView would wait on the children's gate, under
	// the queue's lock.
	var (
		sandbox metav1.Object
		status  *sandboxv1beta1.SandboxStatus
	)
	switch sb := obj.(type) {
	case *childView:
		sandbox, status = sb, sb.SandboxStatus
	case *sandboxv1beta1.Sandbox: // a unit test's store, filled without the transform
		sandbox, status = sb, &sb.Status
	default:
		return false
	}
	return metav1.IsControlledBy(sandbox, task) && builders.SandboxServing(status)
}

// liveSandbox is the view of the task's Sandbox from the cache, or nil.
func (c *TaskController) liveSandbox(task *calibanv1alpha1.CalibanTask) *childView {
	v := c.cachedView(c.sandboxes, task.Namespace, builders.SandboxName(task.Name))
	if v == nil || !metav1.IsControlledBy(v, task) {
		return nil
	}
	return v
}

// observedSandbox is the task's Sandbox as the status derivation reads it,
// or nil.
func (c *TaskController) observedSandbox(task *calibanv1alpha1.CalibanTask) *sandboxv1beta1.Sandbox {
	if v := c.liveSandbox(task); v != nil {
		return v.sandbox()
	}
	return nil
}
