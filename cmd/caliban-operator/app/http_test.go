// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caliban-ai/caliban-operator/pkg/config"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	type answer struct {
		Code int
		Body string
	}
	s := config.DefaultProcessSettings()
	tests := []struct {
		name             string
		leading, running bool
		// answeredAgo is how long before the request the apiserver last
		// answered a lease request, under leader election; 0 is never.
		answeredAgo time.Duration
		path        string
		want        answer
	}{
		{name: "a standby is ready", path: "/readyz",
			want: answer{http.StatusOK, "ok\n"}},
		{name: "a leader whose caches have not synced is not ready", leading: true, path: "/readyz",
			want: answer{http.StatusServiceUnavailable, "leading, waiting for caches to sync\n"}},
		{name: "a leader whose controllers run is ready", leading: true, running: true, path: "/readyz",
			want: answer{http.StatusOK, "ok\n"}},
		{name: "a leader the apiserver answered within a lease duration is ready", leading: true, running: true,
			answeredAgo: s.LeaseDuration - time.Second, path: "/readyz",
			want: answer{http.StatusOK, "ok\n"}},
		{name: "a leader the apiserver has not answered for over a lease duration is not ready", leading: true, running: true,
			answeredAgo: s.LeaseDuration + time.Second, path: "/readyz",
			want: answer{http.StatusServiceUnavailable, "no answer from the apiserver to a lease request for over 15s\n"}},
		{name: "a standby the apiserver has not answered for over a lease duration is not ready",
			answeredAgo: s.LeaseDuration + time.Second, path: "/readyz",
			want: answer{http.StatusServiceUnavailable, "no answer from the apiserver to a lease request for over 15s\n"}},
		{name: "a process the apiserver has not answered for over a lease duration is healthy",
			answeredAgo: s.LeaseDuration + time.Second, path: "/healthz",
			want: answer{http.StatusOK, "ok\n"}},
		{name: "a standby is healthy", path: "/healthz",
			want: answer{http.StatusOK, "ok\n"}},
		{name: "a leader whose caches have not synced is healthy", leading: true, path: "/healthz",
			want: answer{http.StatusOK, "ok\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeControllers(&writers{})
			f.running.Store(tc.running)
			p := &Process{Settings: s, Controllers: f}
			p.leading.Store(tc.leading)
			if tc.answeredAgo != 0 {
				p.answered.Store(time.Now().Add(-tc.answeredAgo).UnixNano())
			}
			srv := httptest.NewServer(p.Handler(prometheus.NewRegistry()))
			defer srv.Close()

			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, answer{resp.StatusCode, string(body)}); diff != "" {
				t.Errorf("GET %s (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

func TestHandlerServesTheGivenMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "caliban_test_marker_total", Help: "marker"}))
	p := &Process{Controllers: newFakeControllers(&writers{})}
	rec := httptest.NewRecorder()
	p.Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "caliban_test_marker_total 0") {
		t.Errorf("GET /metrics = %d %q, want 200 with caliban_test_marker_total", rec.Code, rec.Body.String())
	}
}

func TestServeNamesTheVariableWhenItCannotListen(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, name := range []string{config.EnvMetricsBindAddress, config.EnvPprofBindAddress} {
		err = Serve(context.Background(), name, taken.Addr().String(), http.NotFoundHandler())
		if err == nil || !strings.HasPrefix(err.Error(), name+" ") {
			t.Errorf("Serve on a taken address = %v, want an error naming %s", err, name)
		}
	}
}

func TestPprofHandlerServesProfiles(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1"} {
		rec := httptest.NewRecorder()
		PprofHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Errorf("GET %s = %d with %d bytes, want 200 with a profile", path, rec.Code, rec.Body.Len())
		}
	}
}
