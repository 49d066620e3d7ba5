// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// Backoff of a retried export, as the OpenTelemetry exporters wait: from
// the first interval, growing by half each time with up to a fifth of
// jitter, never beyond the last; the export's timeout ends it.
const (
	firstRetryInterval = 5 * time.Second
	lastRetryInterval  = 30 * time.Second
)

// Client sends spans to an OTLP endpoint over one of the two protocols. It
// is the otlptrace.Client of the SDK's exporter, which batches, converts
// and hands it the spans.
type Client struct {
	protocol protocol
	url      string
	http     *http.Client
	header   http.Header
	timeout  time.Duration
	gzip     bool
	// firstRetry is firstRetryInterval but in tests.
	firstRetry time.Duration
}

var _ otlptrace.Client = (*Client)(nil)

// protocol is what differs between OTLP/HTTP and OTLP/gRPC: the request's
// body and headers, and how the answer is read.
type protocol interface {
	// request frames the encoded ExportTraceServiceRequest.
	request(msg []byte, gzip bool, header http.Header) ([]byte, error)
	// outcome reads the answer: nil, a *retryable, or a final error. On
	// success it returns the ExportTraceServiceResponse's bytes.
	outcome(resp *http.Response) ([]byte, error)
}

// retryable is a failure the specification says to retry: the endpoint
// is there but cannot take the spans now.
type retryable struct {
	err error
	// after is the wait the endpoint asked for, 0 for none.
	after time.Duration
}

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// New makes the client s asks for, reading the TLS files it names. An
// error names the variable whose file could not be used.
func New(s config.TracingSettings, userAgent string) (*Client, error) {
	tlsConfig, err := newTLSConfig(s.Export)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	c := &Client{
		url: s.Target(),
		// A redirect is answered, never followed: net/http would send the
		// export again, with the headers the variables set (credentials,
		// as a rule), to whatever host the endpoint names, from https to
		// http as well. The 3xx reaches outcome, which fails the export.
		http: &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		header:     http.Header{},
		timeout:    s.Export.Timeout,
		gzip:       s.Export.Gzip,
		firstRetry: firstRetryInterval,
	}
	if s.Protocol == config.TracingProtocolGRPC {
		// gRPC is HTTP/2 only: with TLS by ALPN, without it by prior
		// knowledge (h2c), as grpc-go dials.
		transport.Protocols = new(http.Protocols)
		transport.Protocols.SetHTTP2(true)
		transport.Protocols.SetUnencryptedHTTP2(true)
		c.protocol, c.url = grpcProtocol{}, strings.TrimSuffix(s.Endpoint, "/")+grpcExportPath
	} else {
		c.protocol = httpProtocol{}
	}
	for k, v := range s.Export.Headers {
		c.header.Set(k, v)
	}
	c.header.Set("User-Agent", userAgent)
	return c, nil
}

// newTLSConfig is the TLS the exporter's variables ask for, nil for the
// system's roots and no client certificate.
func newTLSConfig(e config.OTLPExport) (*tls.Config, error) {
	if e.Certificate == "" && e.ClientCertificate == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.Certificate != "" {
		pem, err := os.ReadFile(e.Certificate)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.CertificateVariable, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", e.CertificateVariable, e.Certificate)
		}
	}
	if e.ClientCertificate != "" {
		pair, err := tls.LoadX509KeyPair(e.ClientCertificate, e.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", e.ClientCertificateVariable, e.ClientKeyVariable, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Start does nothing: connections are made by the first export.
func (c *Client) Start(context.Context) error { return nil }

// Stop closes the idle connections; an export in flight ends with its
// context.
func (c *Client) Stop(context.Context) error {
	c.http.CloseIdleConnections()
	return nil
}

// UploadTraces sends one batch, retrying what may pass until the timeout.
func (c *Client) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	msg, err := exportRequest(spans)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	interval := c.firstRetry
	for {
		err := c.send(ctx, msg)
		var r *retryable
		if !errors.As(err, &r) {
			return err
		}
		wait := r.after
		if wait == 0 {
			wait = interval + time.Duration(rand.Int64N(int64(interval)/5+1))
			interval = min(interval*3/2, lastRetryInterval)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return r.err
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return r.err
		case <-timer.C:
		}
	}
}

func (c *Client) send(ctx context.Context, msg []byte) error {
	header := c.header.Clone()
	body, err := c.protocol.request(msg, c.gzip, header)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = header
	resp, err := c.http.Do(req)
	if err != nil {
		var verify *tls.CertificateVerificationError
		if ctx.Err() != nil || errors.As(err, &verify) {
			return err
		}
		// The collector restarting, or not up yet.
		return &retryable{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := c.protocol.outcome(resp)
	if err != nil {
		return err
	}
	if rejected, why := partialSuccess(answer); rejected > 0 || why != "" {
		// The batch was taken; what the endpoint dropped of it is news for
		// the log, not a failure to retry.
		otel.Handle(fmt.Errorf("OTLP endpoint rejected %d of the spans: %s", rejected, why))
	}
	return nil
}

// exportRequest encodes an ExportTraceServiceRequest: its one field, 1,
// holds each ResourceSpans. Encoded here so as not to link the collector's
// generated service package, which brings a gRPC stack along.
func exportRequest(spans []*tracepb.ResourceSpans) ([]byte, error) {
	var msg []byte
	for _, rs := range spans {
		b, err := proto.Marshal(rs)
		if err != nil {
			return nil, fmt.Errorf("encoding spans: %w", err)
		}
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendBytes(msg, b)
	}
	return msg, nil
}

// partialSuccess reads an ExportTraceServiceResponse's partial_success
// (field 1: rejected_spans = 1, error_message = 2). What cannot be read is
// taken as full success: the endpoint answered OK.
func partialSuccess(msg []byte) (rejected int64, why string) {
	forEachField(msg, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) {
		if num != 1 || typ != protowire.BytesType {
			return
		}
		forEachField(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) {
			switch {
			case num == 1 && typ == protowire.VarintType:
				rejected = int64(n)
			case num == 2 && typ == protowire.BytesType:
				why = string(v)
			}
		})
	})
	return rejected, why
}

// forEachField calls f with each field of an encoded message: its bytes
// for a length-delimited one, its value for a varint. It stops at the
// first malformed field.
func forEachField(msg []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64)) {
	for len(msg) > 0 {
		num, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return
		}
		msg = msg[l:]
		var (
			v []byte
			n uint64
		)
		switch typ {
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(msg)
		case protowire.VarintType:
			n, l = protowire.ConsumeVarint(msg)
		default:
			l = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if l < 0 {
			return
		}
		f(num, typ, v, n)
		msg = msg[l:]
	}
}

// httpProtocol is OTLP/HTTP with protobuf bodies.
type httpProtocol struct{}

func (httpProtocol) request(msg []byte, gz bool, header http.Header) ([]byte, error) {
	header.Set("Content-Type", "application/x-protobuf")
	if !gz {
		return msg, nil
	}
	header.Set("Content-Encoding", "gzip")
	return gzipped(msg)
}

func (httpProtocol) outcome(resp *http.Response) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusOK {
		return body, err
	}
	if isRedirect(resp) {
		return nil, fmt.Errorf("OTLP/HTTP export: %s: %s", resp.Status, redirectProblem(resp))
	}
	failure := fmt.Errorf("OTLP/HTTP export: %s: %s", resp.Status, bytes.TrimSpace(body[:min(len(body), 512)]))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return nil, &retryable{err: failure, after: retryAfter(resp.Header.Get("Retry-After"))}
	}
	return nil, failure
}

// isRedirect reports whether the endpoint answered with a redirect.
func isRedirect(resp *http.Response) bool {
	return resp.StatusCode >= 300 && resp.StatusCode < 400
}

// redirectProblem says why a redirect fails the export, naming where it
// points by scheme and host alone: its path and query are the other
// server's, and may carry anything.
func redirectProblem(resp *http.Response) string {
	where := "another URL"
	if u, err := resp.Location(); err == nil && u.Host != "" {
		where = u.Scheme + "://" + u.Host
	}
	return "the endpoint redirects to " + where + "; the exporter follows no redirect, so that its headers reach no other host: set the endpoint to the URL that takes the spans"
}

// retryAfter reads a Retry-After header given in seconds; 0 for none.
func retryAfter(v string) time.Duration {
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

func gzipped(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
