// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the caliban-operator process once its settings are parsed:
// the API clients, the HTTP endpoints and the controllers, run under leader
// election or once. It lives apart from main so that the lifecycle can be
// tested without a cluster (docs/adr/0006-process-lifecycle-package.md).
package app

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/pkg/operator"
)

// BuildInfo identifies the binary in the logs and in the API user agent.
type BuildInfo struct {
	Version string
	Commit  string
}

// Run runs the operator until ctx ends; see Process.Run for what it
// returns. It reaches the cluster through KUBECONFIG when set and the
// in-cluster configuration otherwise, and starts the controllers whether or
// not agent-sandbox's Sandbox API is served (docs/architecture.md#process-start-up).
func Run(ctx context.Context, s config.Settings, build BuildInfo) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting caliban-operator", "version", build.Version, "commit", build.Commit,
		"leaderElection", s.LeaderElection, "watchNamespace", s.WatchNamespace, "workers", s.Workers)
	logTracing(logger, s.Tracing)

	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the cluster configuration (KUBECONFIG, else in-cluster): %w", err)
	}
	tp, shutdownTracing, err := newTracerProvider(ctx, s.Tracing, build)
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: after the controllers have stopped
	// and the lease is released, the spans of the last syncs are queued.
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlushTimeout)
		defer cancel()
		if err := shutdownTracing(flushCtx); err != nil {
			logger.Error(err, "Could not send the last spans", "endpoint", s.Tracing.Target())
		}
	}()
	configureClient(cfg, s.ProcessSettings, build)
	traceAPIRequests(cfg, s.Tracing, tp)
	clients, err := newClients(cfg)
	if err != nil {
		return err
	}

	metrics := operator.NewMetrics()
	metrics.RegisterBuildInfo(build.Version, build.Commit)
	operator.RegisterClientMetrics(metrics.Registry)
	p := &Process{
		Settings:    s.ProcessSettings,
		Leases:      clients.Kube.CoordinationV1(),
		Controllers: &operator.Operator{Clients: clients, Settings: s, Metrics: metrics, TracerProvider: tp},
	}
	if s.MetricsBindAddress != "" {
		// Probes and metrics stay up until the controllers have stopped
		// and the lease is released, not just until the signal.
		serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
		defer stopServing()
		if err := Serve(serveCtx, config.EnvMetricsBindAddress, s.MetricsBindAddress, p.Handler(metrics.Registry)); err != nil {
			return err
		}
	}
	if s.PprofBindAddress != "" {
		if err := Serve(ctx, config.EnvPprofBindAddress, s.PprofBindAddress, PprofHandler()); err != nil {
			return err
		}
	}
	return p.Run(ctx)
}

// configureClient applies the process's API client settings to cfg, from
// which every client of the operator is made.
func configureClient(cfg *rest.Config, s config.ProcessSettings, build BuildInfo) {
	cfg.QPS, cfg.Burst = s.KubeAPIQPS, s.KubeAPIBurst
	cfg.DisableCompression = !s.KubeAPICompression
	cfg.UserAgent = builders.FieldManager + "/" + build.Version
}

func newClients(cfg *rest.Config) (operator.Clients, error) {
	// Built-in kinds (ServiceAccounts, NetworkPolicies, Secrets, Events,
	// Leases) travel as protobuf, which is cheaper to decode than JSON; the
	// custom resources have no protobuf form.
	kubeCfg := rest.CopyConfig(cfg)
	kubeCfg.ContentType = runtime.ContentTypeProtobuf
	kubeCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return operator.Clients{}, err
	}
	cal, err := operator.NewCalibanClient(cfg)
	if err != nil {
		return operator.Clients{}, err
	}
	sandboxes, err := operator.NewSandboxRESTClient(cfg)
	if err != nil {
		return operator.Clients{}, err
	}
	ext, err := operator.NewExtensionsClient(cfg)
	if err != nil {
		return operator.Clients{}, err
	}
	return operator.Clients{Kube: kube, Caliban: cal, Sandboxes: sandboxes, Extensions: ext}, nil
}
