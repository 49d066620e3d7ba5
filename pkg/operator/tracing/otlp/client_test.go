// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // as collectors have it
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// batch is what the SDK's exporter would hand the client.
func batch() []*tracepb.ResourceSpans {
	return []*tracepb.ResourceSpans{
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "calibantask sync", TraceId: make([]byte, 16), SpanId: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}}}},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "workspace sync"}}}}},
	}
}

// received is one export request as an endpoint saw it.
type received struct {
	header http.Header // gRPC metadata for the gRPC endpoint
	req    *coltracepb.ExportTraceServiceRequest
}

// endpoint is a test OTLP endpoint of either protocol. Each export is
// answered by the next of answers (the last repeats): nil to accept, or
// the failure to return.
type endpoint struct {
	url string
	mu  sync.Mutex
	got []received
	// answers are HTTP statuses for OTLP/HTTP and gRPC codes for gRPC; 0
	// accepts.
	answers []int
	// partial, when set, is the success answer's partial_success.
	partial *coltracepb.ExportTracePartialSuccess
}

func (e *endpoint) next(r received) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, r)
	if len(e.answers) == 0 {
		return 0
	}
	a := e.answers[0]
	if len(e.answers) > 1 {
		e.answers = e.answers[1:]
	}
	return a
}

func (e *endpoint) requests() []received {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]received(nil), e.got...)
}

// startHTTP serves OTLP/HTTP, over TLS when tlsServer is set.
func startHTTP(t *testing.T, e *endpoint, useTLS bool) *httptest.Server {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := io.Reader(r.Body)
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		data, err := io.ReadAll(body)
		msg := &coltracepb.ExportTraceServiceRequest{}
		if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(data, msg) != nil {
			http.Error(w, "not an OTLP/HTTP export", http.StatusBadRequest)
			return
		}
		if code := e.next(received{header: r.Header.Clone(), req: msg}); code != 0 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "try later", code)
			return
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: e.partial})
		_, _ = w.Write(out)
	})
	var srv *httptest.Server
	if useTLS {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return srv
}

type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	e *endpoint
}

func (s grpcService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if code := s.e.next(received{header: http.Header(md), req: req}); code != 0 {
		return nil, status.Error(codes.Code(code), "try later: 100% busy")
	}
	return &coltracepb.ExportTraceServiceResponse{PartialSuccess: s.e.partial}, nil
}

// startGRPC serves OTLP/gRPC with grpc-go, over TLS with cert when given.
func startGRPC(t *testing.T, e *endpoint, cert *httptest.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	e.url = "http://" + ln.Addr().String()
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewServerTLSFromCert(&cert.TLS.Certificates[0])))
		e.url = "https://" + ln.Addr().String()
	}
	srv := grpc.NewServer(opts...)
	coltracepb.RegisterTraceServiceServer(srv, grpcService{e: e})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
}

// caFile writes the test server's certificate as a PEM bundle.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func settings(protocol, url string, export config.OTLPExport) config.TracingSettings {
	s := config.DefaultTracingSettings()
	s.Protocol, s.Endpoint, s.EndpointVariable, s.Off = protocol, url, config.EnvOTLPEndpoint, ""
	if export.Timeout == 0 {
		export.Timeout = 5 * time.Second
	}
	s.Export = export
	return s
}

func newClient(t *testing.T, s config.TracingSettings) *Client {
	t.Helper()
	c, err := New(s, "caliban-operator/v9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	c.firstRetry = time.Millisecond
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

var protocols = map[string]func(t *testing.T, e *endpoint){
	config.TracingProtocolHTTPProtobuf: func(t *testing.T, e *endpoint) { startHTTP(t, e, false) },
	config.TracingProtocolGRPC:         func(t *testing.T, e *endpoint) { startGRPC(t, e, nil) },
}

func TestABatchArrivesWithItsHeadersOverEitherProtocol(t *testing.T) {
	for protocol, start := range protocols {
		for _, gz := range []bool{false, true} {
			t.Run(protocol+map[bool]string{false: "", true: " gzip"}[gz], func(t *testing.T) {
				e := &endpoint{}
				start(t, e)
				c := newClient(t, settings(protocol, e.url, config.OTLPExport{
					Headers: map[string]string{"authorization": "Bearer t0ken", "x-scope": "a,b"}, Gzip: gz,
				}))
				if err := c.UploadTraces(context.Background(), batch()); err != nil {
					t.Fatal(err)
				}
				got := e.requests()
				if len(got) != 1 {
					t.Fatalf("%d requests, want 1", len(got))
				}
				want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: batch()}
				if diff := cmp.Diff(want, got[0].req, protocmp.Transform()); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
				h := got[0].header
				for k, v := range map[string]string{"authorization": "Bearer t0ken", "x-scope": "a,b"} {
					if g := headerValues(h, k); len(g) != 1 || g[0] != v {
						t.Errorf("header %s: %q, want %q", k, g, v)
					}
				}
				// grpc-go appends its own name to the user agent it was sent.
				if ua := strings.Join(headerValues(h, "user-agent"), " "); !strings.HasPrefix(ua, "caliban-operator/v9.9.9") {
					t.Errorf("user agent %q", ua)
				}
			})
		}
	}
}

// headerValues reads a header whether it is keyed the HTTP way or, as
// gRPC metadata, in lower case.
func headerValues(h http.Header, key string) []string {
	if v := h.Values(key); len(v) > 0 {
		return v
	}
	return h[strings.ToLower(key)]
}

func TestWhatMayPassIsRetriedAndWhatCannotIsNot(t *testing.T) {
	tests := map[string]struct {
		protocol string
		answers  []int
		// wantRequests is how many arrive; wantErr whether the upload fails.
		wantRequests int
		wantErr      string
	}{
		"OTLP/HTTP: 503 twice, then accepted": {
			protocol: config.TracingProtocolHTTPProtobuf, answers: []int{503, 503, 0}, wantRequests: 3,
		},
		"OTLP/HTTP: 429, then accepted": {
			protocol: config.TracingProtocolHTTPProtobuf, answers: []int{429, 0}, wantRequests: 2,
		},
		"OTLP/HTTP: 400 is final": {
			protocol: config.TracingProtocolHTTPProtobuf, answers: []int{400, 0}, wantRequests: 1,
			wantErr: "OTLP/HTTP export: 400 Bad Request: try later",
		},
		"OTLP/gRPC: UNAVAILABLE twice, then accepted": {
			protocol: config.TracingProtocolGRPC, answers: []int{int(codes.Unavailable), int(codes.Unavailable), 0}, wantRequests: 3,
		},
		"OTLP/gRPC: INVALID_ARGUMENT is final, its message decoded": {
			protocol: config.TracingProtocolGRPC, answers: []int{int(codes.InvalidArgument), 0}, wantRequests: 1,
			wantErr: "OTLP/gRPC export: status 3: try later: 100% busy",
		},
		"OTLP/gRPC: UNAUTHENTICATED is final": {
			protocol: config.TracingProtocolGRPC, answers: []int{int(codes.Unauthenticated), 0}, wantRequests: 1,
			wantErr: "OTLP/gRPC export: status 16: try later: 100% busy",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := &endpoint{answers: tc.answers}
			protocols[tc.protocol](t, e)
			err := newClient(t, settings(tc.protocol, e.url, config.OTLPExport{})).UploadTraces(context.Background(), batch())
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if got := len(e.requests()); got != tc.wantRequests {
				t.Errorf("%d requests, want %d", got, tc.wantRequests)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestTheTimeoutEndsTheRetries(t *testing.T) {
	for protocol, start := range protocols {
		t.Run(protocol, func(t *testing.T) {
			e := &endpoint{answers: []int{503}}
			if protocol == config.TracingProtocolGRPC {
				e.answers = []int{int(codes.Unavailable)}
			}
			start(t, e)
			c := newClient(t, settings(protocol, e.url, config.OTLPExport{Timeout: 200 * time.Millisecond}))
			c.firstRetry = 50 * time.Millisecond
			err := c.UploadTraces(context.Background(), batch())
			if err == nil {
				t.Fatal("an endpoint that never accepts was taken for a success")
			}
			// The waits are at least 50, 75 and 112 ms: however slow the
			// machine, no more than four requests fit in 200 ms. (That a
			// retry comes at all is TestWhatMayPassIsRetried's; here a slow
			// machine may spend the timeout on the first request.)
			if n := len(e.requests()); n < 1 || n > 4 {
				t.Errorf("%d requests in 200 ms of retries every 50 ms or more", n)
			}
		})
	}
}

func TestAnEndpointDownIsRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c := newClient(t, settings(config.TracingProtocolHTTPProtobuf, "http://"+addr, config.OTLPExport{Timeout: 100 * time.Millisecond}))
	c.firstRetry = 10 * time.Millisecond
	var tries int
	c.http.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		tries++
		return http.DefaultTransport.RoundTrip(r)
	})
	if err := c.UploadTraces(context.Background(), batch()); err == nil {
		t.Fatal("no error from an endpoint nobody listens on")
	}
	if tries < 2 {
		t.Errorf("%d tries: a refused connection was not retried", tries)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTLSTrustsTheNamedCABundle(t *testing.T) {
	for _, protocol := range []string{config.TracingProtocolHTTPProtobuf, config.TracingProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			e := &endpoint{}
			srv := startHTTP(t, e, true)
			if protocol == config.TracingProtocolGRPC {
				startGRPC(t, e, srv)
			}
			untrusted := newClient(t, settings(protocol, e.url, config.OTLPExport{}))
			var verify *tls.CertificateVerificationError
			if err := untrusted.UploadTraces(context.Background(), batch()); !errors.As(err, &verify) {
				t.Errorf("a certificate no system root signed: error %v, want a verification error at once", err)
			}
			trusted := newClient(t, settings(protocol, e.url, config.OTLPExport{
				Certificate: caFile(t, srv), CertificateVariable: "OTEL_EXPORTER_OTLP_CERTIFICATE",
			}))
			if err := trusted.UploadTraces(context.Background(), batch()); err != nil {
				t.Fatalf("with the CA bundle: %v", err)
			}
			if n := len(e.requests()); n != 1 {
				t.Errorf("%d requests arrived, want the trusted one", n)
			}
		})
	}
}

func TestUnusableTLSFilesNameTheirVariable(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		export config.OTLPExport
		want   string
	}{
		"a missing CA bundle": {
			export: config.OTLPExport{Certificate: filepath.Join(dir, "none.pem"), CertificateVariable: "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"},
			want:   "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: open " + filepath.Join(dir, "none.pem") + ": no such file or directory",
		},
		"a CA bundle without a certificate": {
			export: config.OTLPExport{Certificate: notPEM, CertificateVariable: "OTEL_EXPORTER_OTLP_CERTIFICATE"},
			want:   "OTEL_EXPORTER_OTLP_CERTIFICATE: " + notPEM + " holds no PEM certificate",
		},
		"a client pair that is no pair": {
			export: config.OTLPExport{
				ClientCertificate: notPEM, ClientCertificateVariable: "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
				ClientKey: notPEM, ClientKeyVariable: "OTEL_EXPORTER_OTLP_CLIENT_KEY",
			},
			want: "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY: tls: failed to find any PEM data in certificate input",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := New(settings(config.TracingProtocolHTTPProtobuf, "https://collector:4318", tc.export), "x")
			if got := errString(err); got != tc.want {
				t.Errorf("error %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPartialSuccessIsReportedNotRetried(t *testing.T) {
	var reported []error
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { reported = append(reported, err) }))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	for protocol, start := range protocols {
		t.Run(protocol, func(t *testing.T) {
			reported = nil
			e := &endpoint{partial: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 1, ErrorMessage: "span too old"}}
			start(t, e)
			if err := newClient(t, settings(protocol, e.url, config.OTLPExport{})).UploadTraces(context.Background(), batch()); err != nil {
				t.Fatal(err)
			}
			want := "OTLP endpoint rejected 1 of the spans: span too old"
			if len(reported) != 1 || reported[0].Error() != want {
				t.Errorf("reported %v, want %q", reported, want)
			}
			if n := len(e.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestTheEncodedRequestIsTheCollectorsMessage(t *testing.T) {
	msg, err := exportRequest(batch())
	if err != nil {
		t.Fatal(err)
	}
	got := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(msg, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&coltracepb.ExportTraceServiceRequest{ResourceSpans: batch()}, got, protocmp.Transform()); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	if _, err := exportRequest([]*tracepb.ResourceSpans{{SchemaUrl: "\xff"}}); err == nil {
		t.Error("a batch protobuf cannot encode (invalid UTF-8) encoded without error")
	}
}

// recorder is a server that records every request reaching it: the place
// a redirect points to.
type recorder struct {
	mu  sync.Mutex
	got []http.Header
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.got = append(r.got, req.Header.Clone())
	r.mu.Unlock()
	http.Error(w, "not a collector", http.StatusNotFound)
}

func (r *recorder) requests() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.got...)
}

// startRecorder serves plain HTTP/1.1 and h2c, so that it would see a
// followed redirect of either protocol.
func startRecorder(t *testing.T) (*recorder, *httptest.Server) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewUnstartedServer(rec)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return rec, srv
}

// An endpoint that answers with a redirect gets the export once, and the
// export fails as a refusal does, naming where it was sent; the server
// the redirect names never sees the request, nor its headers, which may
// carry the collector's credentials. That holds from https to http too.
func TestARedirectIsNotFollowedAndTheHeadersGoNowhereElse(t *testing.T) {
	secret := map[string]string{"authorization": "Bearer t0ken", "x-api-key": "k3y"}
	tests := map[string]struct {
		protocol string
		status   int
		tls      bool
		// wantErr is the error, %s being where the redirect points
		wantErr string
	}{
		"OTLP/HTTP: 307 to another host": {
			protocol: config.TracingProtocolHTTPProtobuf, status: http.StatusTemporaryRedirect,
			wantErr: "OTLP/HTTP export: 307 Temporary Redirect: the endpoint redirects to %s; the exporter follows no redirect, so that its headers reach no other host: set the endpoint to the URL that takes the spans",
		},
		"OTLP/HTTP: 308 from https to http": {
			protocol: config.TracingProtocolHTTPProtobuf, status: http.StatusPermanentRedirect, tls: true,
			wantErr: "OTLP/HTTP export: 308 Permanent Redirect: the endpoint redirects to %s; the exporter follows no redirect, so that its headers reach no other host: set the endpoint to the URL that takes the spans",
		},
		"OTLP/HTTP: 302, which would turn the export into a GET": {
			protocol: config.TracingProtocolHTTPProtobuf, status: http.StatusFound,
			wantErr: "OTLP/HTTP export: 302 Found: the endpoint redirects to %s; the exporter follows no redirect, so that its headers reach no other host: set the endpoint to the URL that takes the spans",
		},
		"OTLP/HTTP: 301": {
			protocol: config.TracingProtocolHTTPProtobuf, status: http.StatusMovedPermanently,
			wantErr: "OTLP/HTTP export: 301 Moved Permanently: the endpoint redirects to %s; the exporter follows no redirect, so that its headers reach no other host: set the endpoint to the URL that takes the spans",
		},
		"OTLP/gRPC: 307 from https to http": {
			protocol: config.TracingProtocolGRPC, status: http.StatusTemporaryRedirect, tls: true,
			wantErr: "OTLP/gRPC export: HTTP 307 Temporary Redirect: the endpoint redirects to %s; the exporter follows no redirect, so that its headers reach no other host: set the endpoint to the URL that takes the spans",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			elsewhere, target := startRecorder(t)
			var mu sync.Mutex
			redirected := 0
			redirect := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				redirected++
				mu.Unlock()
				http.Redirect(w, r, target.URL+r.URL.Path, tc.status)
			}))
			export := config.OTLPExport{Headers: secret}
			if tc.tls {
				redirect.EnableHTTP2 = true
				redirect.StartTLS()
				export.Certificate, export.CertificateVariable = caFile(t, redirect), "OTEL_EXPORTER_OTLP_CERTIFICATE"
			} else {
				redirect.Start()
			}
			t.Cleanup(redirect.Close)

			err := newClient(t, settings(tc.protocol, redirect.URL, export)).UploadTraces(context.Background(), batch())
			if diff := cmp.Diff(fmt.Sprintf(tc.wantErr, target.URL), errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			mu.Lock()
			if redirected != 1 {
				t.Errorf("the redirecting endpoint got %d requests, want 1 (a redirect is final, not retried)", redirected)
			}
			mu.Unlock()
			if got := elsewhere.requests(); len(got) != 0 {
				t.Errorf("the redirect was followed: the other server got %d requests, with headers %v", len(got), got)
			}

			// The other server does see an export sent to it: its silence
			// above is the client's doing.
			_ = newClient(t, settings(tc.protocol, target.URL, config.OTLPExport{Headers: secret})).UploadTraces(context.Background(), batch())
			if got := elsewhere.requests(); len(got) == 0 || headerValues(got[0], "x-api-key")[0] != "k3y" {
				t.Errorf("an export sent to the other server directly: it recorded %v", got)
			}
		})
	}
}
