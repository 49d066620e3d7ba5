// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
	"github.com/caliban-ai/caliban-operator/test/framework/otlp"
)

// tracingEnv sets the tracing variables for the test, every other one
// blank (unset, as the specification reads blank), and parses them as
// main does.
func tracingEnv(t *testing.T, env map[string]string) config.TracingSettings {
	t.Helper()
	for _, name := range []string{
		config.EnvOTelSDKDisabled, config.EnvOTelTracesExporter, config.EnvOTLPProtocol, config.EnvOTLPTracesProtocol,
		config.EnvOTLPEndpoint, config.EnvOTLPTracesEndpoint, config.EnvOTelTracesSampler, config.EnvOTelTracesSamplerArg,
		config.EnvOTelServiceName, config.EnvOTelResourceAttributes,
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_COMPRESSION",
	} {
		t.Setenv(name, env[name])
	}
	s, err := config.Parse(os.LookupEnv, "caliban-system")
	if err != nil {
		t.Fatal(err)
	}
	return s.Tracing
}

func TestTracingOffBuildsNothingAndLeavesTheTransportAlone(t *testing.T) {
	s := tracingEnv(t, map[string]string{config.EnvOTelSDKDisabled: "true", config.EnvOTLPEndpoint: "http://127.0.0.1:1"})
	tp, shutdown, err := newTracerProvider(context.Background(), s, BuildInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.(noop.TracerProvider); !ok {
		t.Errorf("tracing off gives a %T, want the no-op provider", tp)
	}
	if tr := tracing.NewTracer(tp); tr != (tracing.Tracer{}) {
		t.Error("the controllers' tracer of the no-op provider is not the zero Tracer")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Errorf("shutting down nothing: %v", err)
	}
	cfg := &rest.Config{}
	traceAPIRequests(cfg, s, tp)
	if cfg.WrapTransport != nil {
		t.Error("tracing off wraps the API client's transport")
	}
}

func TestTheSamplerIsTheOneNamed(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		want string
	}{
		"the default follows the parent, and samples every root": {
			want: "ParentBased{root:AlwaysOnSampler,remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler,localParentSampled:AlwaysOnSampler,localParentNotSampled:AlwaysOffSampler}",
		},
		"always_off": {
			env:  map[string]string{config.EnvOTelTracesSampler: "always_off"},
			want: "AlwaysOffSampler",
		},
		"always_on": {
			env:  map[string]string{config.EnvOTelTracesSampler: "always_on"},
			want: "AlwaysOnSampler",
		},
		"traceidratio with its ratio": {
			env:  map[string]string{config.EnvOTelTracesSampler: "traceidratio", config.EnvOTelTracesSamplerArg: "0.1"},
			want: "TraceIDRatioBased{0.1}",
		},
		"parentbased_traceidratio with its ratio": {
			env:  map[string]string{config.EnvOTelTracesSampler: "parentbased_traceidratio", config.EnvOTelTracesSamplerArg: "0.5"},
			want: "ParentBased{root:TraceIDRatioBased{0.5},remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler,localParentSampled:AlwaysOnSampler,localParentNotSampled:AlwaysOffSampler}",
		},
		"parentbased_always_off": {
			env:  map[string]string{config.EnvOTelTracesSampler: "parentbased_always_off"},
			want: "ParentBased{root:AlwaysOffSampler,remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler,localParentSampled:AlwaysOnSampler,localParentNotSampled:AlwaysOffSampler}",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := sampler(tracingEnv(t, tc.env)).Description(); got != tc.want {
				t.Errorf("sampler %s, want %s", got, tc.want)
			}
		})
	}
}

func TestStartUpSaysWhetherItTraces(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		want string
	}{
		"off, and what has no effect": {
			env:  map[string]string{config.EnvOTelServiceName: "ops"},
			want: `"level"=0 "msg"="Tracing off" "reason"="neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set" "withoutEffect"=["OTEL_SERVICE_NAME"]`,
		},
		"on, with where and how": {
			env:  map[string]string{config.EnvOTLPEndpoint: "http://collector:4318", config.EnvOTelTracesSampler: "traceidratio", config.EnvOTelTracesSamplerArg: "0.5"},
			want: `"level"=0 "msg"="Tracing on" "endpoint"="http://collector:4318/v1/traces" "from"="OTEL_EXPORTER_OTLP_ENDPOINT" "protocol"="http/protobuf" "sampler"="traceidratio" "serviceName"="caliban-operator" "ratio"=0.5`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var lines []string
			logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
			logTracing(logger, tracingEnv(t, tc.env))
			if diff := cmp.Diff([]string{tc.want}, lines); diff != "" {
				t.Errorf("log lines (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeAPIServer answers GET of the Secret team/key, and nothing else.
func fakeAPIServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/namespaces/team/secrets/key" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&corev1.Secret{
			TypeMeta:   metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: "team"},
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The provider is built from the environment alone, as in the binary, and
// what it sends is read back by a receiver of each protocol: the service,
// the sync spans with their attributes, one trace for two syncs of a UID,
// and the apiserver request inside each sync as its child.
func TestSyncSpansReachAnOTLPReceiverOverEitherProtocol(t *testing.T) {
	for protocol, start := range map[string]func(testing.TB) *otlp.Receiver{
		config.TracingProtocolHTTPProtobuf: otlp.StartHTTP,
		config.TracingProtocolGRPC:         otlp.StartGRPC,
	} {
		t.Run(protocol, func(t *testing.T) {
			receiver := start(t)
			// The spans wait in the batch until the flush at shutdown.
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
			s := tracingEnv(t, map[string]string{
				config.EnvOTLPEndpoint:           receiver.Endpoint,
				config.EnvOTLPProtocol:           protocol,
				config.EnvOTelResourceAttributes: "deployment.environment.name=test",
			})
			ctx := context.Background()
			tp, shutdown, err := newTracerProvider(ctx, s, BuildInfo{Version: "v9.9.9"})
			if err != nil {
				t.Fatal(err)
			}
			cfg := &rest.Config{Host: fakeAPIServer(t).URL}
			traceAPIRequests(cfg, s, tp)
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}

			tracer := tracing.NewTracer(tp)
			for i := range 2 {
				syncCtx, span := tracer.StartSync(ctx, "calibantask sync", "task-uid", true)
				if span == nil {
					t.Fatal("the sync span does not record")
				}
				span.SetAttributes(tracing.KeyTaskUID.String("task-uid"), tracing.KeyTaskPhaseBefore.String(fmt.Sprint("phase-", i)))
				if _, err := kube.CoreV1().Secrets("team").Get(syncCtx, "key", metav1.GetOptions{}); err != nil {
					t.Fatal(err)
				}
				tracing.RecordWrite(syncCtx, "status")
				span.End(0, nil)
			}
			// Outside a sync: an informer's request, which makes no span.
			if _, err := kube.CoreV1().Secrets("team").Get(ctx, "key", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := receiver.Requests(); got != 0 {
				t.Fatalf("%d exports before the flush; the batch should still hold the spans", got)
			}
			if err := shutdown(ctx); err != nil {
				t.Fatalf("flushing: %v", err)
			}

			spans := receiver.Spans()
			if len(spans) != 4 {
				t.Fatalf("received %d spans, want 2 syncs and 2 requests: %+v", len(spans), spans)
			}
			wantTrace := tracing.TraceIDFor("task-uid").String()
			var syncs, requests []otlp.Span
			for _, sp := range spans {
				if sp.Resource["service.name"] != "caliban-operator" || sp.Resource["service.version"] != "v9.9.9" ||
					sp.Resource["deployment.environment.name"] != "test" {
					t.Errorf("span %q comes from resource %v", sp.Name, sp.Resource)
				}
				if sp.TraceID != wantTrace {
					t.Errorf("span %q is in trace %s, want the task's %s", sp.Name, sp.TraceID, wantTrace)
				}
				if sp.Scope != tracing.ScopeName {
					t.Errorf("span %q has scope %q", sp.Name, sp.Scope)
				}
				if sp.ParentSpanID == "" {
					syncs = append(syncs, sp)
				} else {
					requests = append(requests, sp)
				}
			}
			if len(syncs) != 2 || len(requests) != 2 {
				t.Fatalf("%d roots and %d children, want 2 and 2", len(syncs), len(requests))
			}
			slices.SortFunc(syncs, func(a, b otlp.Span) int {
				return strings.Compare(fmt.Sprint(a.Attributes["caliban.task.phase.before"]), fmt.Sprint(b.Attributes["caliban.task.phase.before"]))
			})
			for i, sp := range syncs {
				want := otlp.Span{
					TraceID: wantTrace, SpanID: sp.SpanID, Name: "calibantask sync", Kind: "SPAN_KIND_INTERNAL",
					Attributes: map[string]any{
						"caliban.task.uid":          "task-uid",
						"caliban.task.phase.before": fmt.Sprint("phase-", i),
						"caliban.sync.writes":       []any{"status"},
					},
					StatusCode: "STATUS_CODE_UNSET", Scope: tracing.ScopeName, Resource: sp.Resource,
				}
				if diff := cmp.Diff(want, sp); diff != "" {
					t.Errorf("sync span %d (-want +got):\n%s", i, diff)
				}
			}
			for _, req := range requests {
				if !slices.ContainsFunc(syncs, func(s otlp.Span) bool { return s.SpanID == req.ParentSpanID }) {
					t.Errorf("request span %q has parent %s, which is no sync", req.Name, req.ParentSpanID)
				}
				if req.Name != "GET /api/v1/namespaces/{namespace}/secrets/{name}" || req.Kind != "SPAN_KIND_CLIENT" ||
					req.Attributes["http.request.method"] != "GET" || req.Attributes["http.response.status_code"] != int64(200) ||
					req.Attributes["url.path"] != "/api/v1/namespaces/team/secrets/key" {
					t.Errorf("request span %q (%s): %v", req.Name, req.Kind, req.Attributes)
				}
			}
			if syncs[0].SpanID == syncs[1].SpanID {
				t.Error("the two syncs have one span ID")
			}
		})
	}
}
