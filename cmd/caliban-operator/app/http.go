// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Handler serves /metrics from metrics, /healthz, and /readyz
// (docs/deploying.md#metrics-and-health). A standby is ready: it is healthy
// and may be needed at any moment. A leader is ready once its controllers
// run with synced caches. Under leader election, neither is ready once the
// apiserver has not answered a lease request for a lease duration: such a
// process can neither lead nor take over, and its Ready condition says so
// to whoever watches the pod.
func (p *Process) Handler(metrics prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if p.unreachable(time.Now()) {
			http.Error(w, fmt.Sprintf("no answer from the apiserver to a lease request for over %s", p.Settings.LeaseDuration), http.StatusServiceUnavailable)
			return
		}
		if p.leading.Load() && !p.Controllers.Running() {
			http.Error(w, "leading, waiting for caches to sync", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// unreachable reports whether, under leader election, the apiserver last
// answered a lease request more than a lease duration before now.
func (p *Process) unreachable(now time.Time) bool {
	last := p.answered.Load()
	return p.Settings.LeaderElection && last != 0 && now.Sub(time.Unix(0, last)) > p.Settings.LeaseDuration
}

// PprofHandler serves net/http/pprof under /debug/pprof/, on its own
// address so that profiles are never exposed where metrics are scraped.
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Serve serves h on addr until ctx ends. It listens before returning, so
// that an address it cannot bind stops start-up with the variable (name)
// named.
func Serve(ctx context.Context, name, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "HTTP server stopped", "address", addr)
		}
	}()
	context.AfterFunc(ctx, func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	})
	return nil
}
