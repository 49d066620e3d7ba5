// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package tracing

import (
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// WrapTransport is a rest.Config WrapTransport that gives each apiserver
// request made under a recording span a client span of its own, named and
// described after the HTTP semantic conventions, and passes the trace on
// in a traceparent header (an apiserver that traces joins it). Requests
// made under no recording span pass untouched: the informers' lists and
// watches, the leader election, the Events.
//
// Why not otelhttp: it would start a span for every request, informers'
// included, unless filtered by the same check; it brings a contrib module
// whose releases pin their own OpenTelemetry versions; and its metrics
// and body wrapping are not wanted here. The rule that matters, a span
// only inside a traced sync, is the first line of RoundTrip.
func WrapTransport(tp trace.TracerProvider) func(http.RoundTripper) http.RoundTripper {
	tracer := tp.Tracer(ScopeName)
	return func(next http.RoundTripper) http.RoundTripper {
		return &transport{next: next, tracer: tracer}
	}
}

type transport struct {
	next   http.RoundTripper
	tracer trace.Tracer
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanFromContext(req.Context()).IsRecording() {
		return t.next.RoundTrip(req)
	}
	template := URLTemplate(req.URL.Path)
	ctx, span := t.tracer.Start(req.Context(), req.Method+" "+template, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	full := *req.URL
	full.User = nil
	span.SetAttributes(
		semconv.HTTPRequestMethodKey.String(req.Method),
		semconv.URLFull(full.String()),
		semconv.URLPath(req.URL.Path),
		semconv.URLTemplate(template),
		semconv.ServerAddress(req.URL.Hostname()),
	)
	if port, err := strconv.Atoi(req.URL.Port()); err == nil {
		span.SetAttributes(semconv.ServerPort(port))
	}

	// A RoundTripper must not change the request it was given.
	req = req.Clone(ctx)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		span.SetAttributes(semconv.ErrorType(err))
		span.SetStatus(codes.Error, err.Error())
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= http.StatusBadRequest {
		// The conventions' rule for a client span; a 404 the sync takes as
		// an answer is marked too, and the sync's own span says whether
		// the sync failed.
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	}
	return resp, nil
}

// URLTemplate is the path of an apiserver request with the namespace and
// the object's name replaced by {namespace} and {name}, as the
// conventions' url.template: requests for different objects of one kind
// get one span name.
//
//	/api/v1/namespaces/team/secrets/key → /api/v1/namespaces/{namespace}/secrets/{name}
//	/apis/caliban.caliban-ai.dev/v1alpha1/namespaces/team/calibantasks/t/status → …/namespaces/{namespace}/calibantasks/{name}/status
//
// A path of another shape is returned as it is.
func URLTemplate(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var prefix int
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		prefix = 2 // api/<version>
	case len(segs) >= 3 && segs[0] == "apis":
		prefix = 3 // apis/<group>/<version>
	default:
		return path
	}
	rest := segs[prefix:]
	if len(rest) >= 2 && rest[0] == "namespaces" {
		rest[1] = "{name}"
		if len(rest) >= 3 {
			// namespaces/<ns>/<resource>[/<name>[/<subresource>]]
			rest[1] = "{namespace}"
			if len(rest) >= 4 {
				rest[3] = "{name}"
			}
		}
	} else if len(rest) >= 2 {
		// <cluster-scoped resource>/<name>[/<subresource>]
		rest[1] = "{name}"
	}
	return "/" + strings.Join(segs, "/")
}
