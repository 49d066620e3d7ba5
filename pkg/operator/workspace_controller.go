package operator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	calibaninformers "github.com/caliban-ai/caliban-operator/pkg/generated/informers/externalversions/caliban/v1alpha1"
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
)

// WorkspaceController validates Workspaces and writes their status. It
// creates nothing.
type WorkspaceController struct {
	*loop
	caliban  calibanclient.Interface
	kube     kubernetes.Interface
	lister   calibanlisters.WorkspaceLister
	settings config.AgentSettings
	recorder Recorder
	clock    clock.PassiveClock
}

// NewWorkspaceController wires the controller to the Workspace informer.
func NewWorkspaceController(
	caliban calibanclient.Interface,
	kube kubernetes.Interface,
	workspaces calibaninformers.WorkspaceInformer,
	settings config.AgentSettings,
	recorder Recorder,
	metrics *Metrics,
	clk clock.PassiveClock,
) (*WorkspaceController, error) {
	c := &WorkspaceController{
		loop:     newLoop(WorkspaceControllerName, rateLimiter(500*time.Millisecond, 5*time.Minute), metrics, nil),
		caliban:  caliban,
		kube:     kube,
		lister:   workspaces.Lister(),
		settings: settings,
		recorder: recorder,
		clock:    clk,
	}
	c.sync = c.syncWorkspace
	c.synced = []cache.InformerSynced{workspaces.Informer().HasSynced}
	if _, err := workspaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
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
	return c, nil
}

// Run processes the queue with workers until ctx is done.
func (c *WorkspaceController) Run(ctx context.Context, workers int) error { return c.run(ctx, workers) }

func (c *WorkspaceController) syncWorkspace(ctx context.Context, key cache.ObjectName) (after time.Duration, err error) {
	logger := klog.FromContext(ctx).WithValues("workspace", key)
	ws, err := c.lister.Workspaces(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// A trace per sync, not per Workspace: a Workspace lives on
	// indefinitely and is looked at every 15 s while it is not Ready, which
	// would grow one trace without end (docs/adr/0020-tracing.md).
	ctx, span := c.tracer.StartSync(ctx, workspaceSyncSpan, ws.UID, false)
	if span != nil {
		phase := string(ws.Status.Phase)
		span.SetAttributes(tracing.KeyNamespace.String(ws.Namespace), tracing.KeyWorkspaceName.String(ws.Name),
			tracing.KeyWorkspaceUID.String(string(ws.UID)), tracing.KeyWorkspacePhaseBefore.String(phase),
			tracing.KeyWorkspacePhaseAfter.String(phase))
	}
	defer func() { span.End(after, err) }()
	if ws.DeletionTimestamp != nil {
		return 0, nil
	}

	problem, err := builders.ValidateWorkspace(&ws.Spec, c.settings.WorkspaceRoot, secretGetter(ctx, c.kube, ws.Namespace))
	if err != nil {
		return 0, err
	}
	desired := builders.WorkspaceStatus(ws, problem, metav1.NewTime(c.clock.Now()))
	if builders.WorkspaceStatusChanged(ws.Status, desired) {
		logger.V(4).Info("Applying status", "phase", desired.Phase)
		if _, err := applyWorkspaceStatus(ctx, c.caliban, ws, desired); err != nil {
			return 0, fmt.Errorf("applying status of Workspace %s: %w", key, err)
		}
		if span != nil {
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
