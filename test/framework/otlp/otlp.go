// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package otlp is an OTLP trace receiver for tests: it listens on a
// loopback port, over OTLP/HTTP with protobuf bodies or over gRPC, keeps
// every span it is sent, and hands them to the test flattened into plain
// values. The operator's unit tests (cmd/caliban-operator/app) and the
// tracing integration test (test/integration/tracing) both point the real
// exporter at it. It is a package of its own so that a unit test does not
// link the whole test framework.
package otlp

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span.
type Span struct {
	TraceID, SpanID, ParentSpanID string // hex; ParentSpanID "" for a root
	Name                          string
	Kind                          string // SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT, ...
	Attributes                    map[string]any
	StatusCode                    string // STATUS_CODE_UNSET, STATUS_CODE_OK, STATUS_CODE_ERROR
	StatusMessage                 string
	// Scope is the instrumentation scope's name, Resource the attributes
	// of the process that sent the span.
	Scope    string
	Resource map[string]any
}

// Receiver keeps what the exporters send it.
type Receiver struct {
	// Endpoint is the value for OTEL_EXPORTER_OTLP_ENDPOINT:
	// http://127.0.0.1:<port>.
	Endpoint string

	mu       sync.Mutex
	spans    []Span
	requests int
}

// StartHTTP starts an OTLP/HTTP receiver (POST /v1/traces, protobuf,
// gzip or not) that stops when the test ends.
func StartHTTP(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.Endpoint = srv.URL
	return r
}

// StartGRPC starts an OTLP/gRPC receiver (TraceService/Export, no TLS)
// that stops when the test ends.
func StartGRPC(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Endpoint: "http://" + ln.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, grpcService{r: r})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r
}

// Spans is every span received so far, in the order they arrived.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Requests is how many export requests arrived.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, not "+ct, http.StatusUnsupportedMediaType)
		return
	}
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.keep(&msg)
	out, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s grpcService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.r.keep(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) keep(req *coltracepb.ExportTraceServiceRequest) {
	var spans []Span
	for _, rs := range req.GetResourceSpans() {
		res := attributes(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				spans = append(spans, Span{
					TraceID:       hex.EncodeToString(sp.GetTraceId()),
					SpanID:        hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(sp.GetParentSpanId()),
					Name:          sp.GetName(),
					Kind:          sp.GetKind().String(),
					Attributes:    attributes(sp.GetAttributes()),
					StatusCode:    sp.GetStatus().GetCode().String(),
					StatusMessage: sp.GetStatus().GetMessage(),
					Scope:         ss.GetScope().GetName(),
					Resource:      res,
				})
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	r.spans = append(r.spans, spans...)
}

func attributes(kvs []*commonpb.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		out[kv.GetKey()] = value(kv.GetValue())
	}
	return out
}

// value is an attribute's value as Go holds it: string, bool, int64,
// float64, []any, map[string]any or []byte.
func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		out := []any{}
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		return attributes(x.KvlistValue.GetValues())
	}
	return nil
}
