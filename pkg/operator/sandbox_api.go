package operator

import (
	"context"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// SandboxAPI says whether agent-sandbox's Sandbox API can be used: served by
// the apiserver and its informer synced.
type SandboxAPI interface {
	// Served reports that Sandboxes can be applied and read from the cache.
	Served() bool
	// HasSynced reports that the first answer is in: the API is served and
	// the cache synced, or it is known not to be served. Until then no task
	// sync runs, so a restart never flaps tasks through SandboxAPIUnavailable.
	HasSynced() bool
}

// sandboxAPIPollInterval is how often discovery is asked while agent-sandbox
// is not installed: one cheap GET, and a CRD installed later is picked up
// within seconds without a restart.
const sandboxAPIPollInterval = 5 * time.Second

// sandboxAPIWatcher waits for agent-sandbox's API, then starts the Sandbox
// informer. The operator does not need RBAC on CRDs for this: discovery is
// open to every authenticated client.
type sandboxAPIWatcher struct {
	discovery discovery.DiscoveryInterface
	// start starts the Sandbox informer; synced reports it synced.
	start  func()
	synced cache.InformerSynced
	// onServed runs once the API is usable, to look again at the tasks that
	// waited for it.
	onServed func()
	interval time.Duration

	served  atomic.Bool
	settled atomic.Bool
}

func (w *sandboxAPIWatcher) Served() bool    { return w.served.Load() }
func (w *sandboxAPIWatcher) HasSynced() bool { return w.settled.Load() }

// run returns once the API is served and its cache synced, or when ctx ends.
func (w *sandboxAPIWatcher) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	gv := sandboxv1beta1.SchemeGroupVersion.String()
	waited := false
	for {
		served, err := sandboxAPIServed(w.discovery)
		switch {
		case err != nil:
			logger.Error(err, "Cannot tell whether agent-sandbox's Sandbox API is served; asking again", "groupVersion", gv, "in", w.interval)
		case served:
			w.start()
			if !cache.WaitForNamedCacheSyncWithContext(ctx, w.synced) {
				return
			}
			w.served.Store(true)
			w.settled.Store(true)
			if waited {
				logger.Info("agent-sandbox's Sandbox API is served now; provisioning the tasks that waited for it", "groupVersion", gv)
				w.onServed()
			}
			return
		default:
			if !waited {
				logger.Info("agent-sandbox's Sandbox API is not served: install agent-sandbox. Workspaces are validated and tasks admitted meanwhile; tasks stay Provisioning until it is",
					"resource", builders.SandboxResource+"."+gv, "checkingEvery", w.interval)
			}
			waited = true
			w.settled.Store(true)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.interval):
		}
	}
}

// sandboxAPIServed asks discovery whether the Sandbox resource is served. A
// group version that is not served is an answer, not an error.
func sandboxAPIServed(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(sandboxv1beta1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == builders.SandboxResource {
			return true, nil
		}
	}
	return false, nil
}
