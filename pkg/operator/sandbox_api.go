// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
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

// apiPollInterval is how often discovery is asked while an API agent-sandbox
// serves is not installed: one cheap GET, and a CRD installed later is picked up
// within seconds without a restart.
const apiPollInterval = 5 * time.Second

// servedAPI is an API the operator can run without, and what it logs while
// it waits for it.
type servedAPI struct {
	groupVersion string
	// resources must all be served.
	resources []string
	// absent is logged once while the API is not served, arrived once it
	// is after that.
	absent, arrived string
}

// sandboxesAPI is agent-sandbox's Sandbox API.
var sandboxesAPI = servedAPI{
	groupVersion: sandboxv1beta1.SchemeGroupVersion.String(),
	resources:    []string{builders.SandboxResource},
	absent:       "agent-sandbox's Sandbox API is not served: install agent-sandbox. Workspaces are validated and tasks admitted meanwhile; tasks stay Provisioning until it is",
	arrived:      "agent-sandbox's Sandbox API is served now; provisioning the tasks that waited for it",
}

// extensionsAPI is agent-sandbox's extensions API, which warm pools need.
var extensionsAPI = servedAPI{
	groupVersion: extv1beta1.SchemeGroupVersion.String(),
	resources:    []string{"sandboxtemplates", "sandboxwarmpools", "sandboxclaims"},
	absent:       "agent-sandbox's extensions API is not served: run its controller with --extensions and install its extension CRDs. Workspaces with a warm pool say WarmPoolUnavailable meanwhile, and their tasks start cold",
	arrived:      "agent-sandbox's extensions API is served now; making the warm pools that waited for it",
}

// apiWatcher waits for an API, then starts its informers. The operator
// does not need RBAC on CRDs for this: discovery is open to every
// authenticated client.
type apiWatcher struct {
	api       servedAPI
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

func (w *apiWatcher) Served() bool    { return w.served.Load() }
func (w *apiWatcher) HasSynced() bool { return w.settled.Load() }

// run returns once the API is served and its cache synced, or when ctx ends.
func (w *apiWatcher) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	gv := w.api.groupVersion
	waited := false
	for {
		served, err := apiServed(w.discovery, w.api)
		switch {
		case err != nil:
			logger.Error(err, "Cannot tell whether an API is served; asking again", "groupVersion", gv, "in", w.interval)
		case served:
			w.start()
			if !cache.WaitForNamedCacheSyncWithContext(ctx, w.synced) {
				return
			}
			w.served.Store(true)
			w.settled.Store(true)
			if waited {
				logger.Info(w.api.arrived, "groupVersion", gv)
				w.onServed()
			}
			return
		default:
			if !waited {
				logger.Info(w.api.absent, "groupVersion", gv, "resources", w.api.resources, "checkingEvery", w.interval)
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

// apiServed asks discovery whether all of api's resources are served. A
// group version that is not served is an answer, not an error.
func apiServed(d discovery.DiscoveryInterface, api servedAPI) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(api.groupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, want := range api.resources {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
			return false, nil
		}
	}
	return true, nil
}
