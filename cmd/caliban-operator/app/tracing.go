// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing/otlp"
)

// tracingFlushTimeout bounds the flush of the last spans at exit, which
// waits on the collector; the Deployment allows 30 s for the whole exit.
const tracingFlushTimeout = 5 * time.Second

// newTracerProvider builds what s asks for: with tracing off, the no-op
// provider and no SDK, exporter or connection at all; with it on, the
// SDK's provider exporting in batches over OTLP (package otlp, with the
// exporter's settings s holds). The returned shutdown flushes the spans
// still queued.
func newTracerProvider(ctx context.Context, s config.TracingSettings, build BuildInfo) (trace.TracerProvider, func(context.Context) error, error) {
	if !s.Enabled() {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	client, err := otlp.New(s, "caliban-operator/"+build.Version)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the OTLP exporter (%s, %s): %w", s.Protocol, s.Target(), err)
	}
	exporter, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the OTLP exporter (%s, %s): %w", s.Protocol, s.Target(), err)
	}
	res, err := resource.New(ctx, resource.WithSchemaURL(semconv.SchemaURL), resource.WithTelemetrySDK(),
		resource.WithAttributes(resourceAttributes(s, build)...))
	if err != nil {
		return nil, nil, fmt.Errorf("describing the operator to OpenTelemetry: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler(s)),
		sdktrace.WithIDGenerator(tracing.IDGenerator{}),
	)
	return tp, tp.Shutdown, nil
}

// resourceAttributes describe the process: its version, then
// OTEL_RESOURCE_ATTRIBUTES (which may override it), then the service name
// (which OTEL_SERVICE_NAME has settled). A later value of a key wins.
func resourceAttributes(s config.TracingSettings, build BuildInfo) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.ServiceVersion(build.Version)}
	for k, v := range s.ResourceAttributes {
		attrs = append(attrs, attribute.String(k, v))
	}
	return append(attrs, semconv.ServiceName(s.ServiceName))
}

// sampler is the sampler OTEL_TRACES_SAMPLER names. The operator's sync
// spans are roots, so the parentbased_ ones decide like their root
// sampler; the apiserver requests follow their sync's decision.
func sampler(s config.TracingSettings) sdktrace.Sampler {
	switch s.Sampler {
	case config.SamplerAlwaysOn:
		return sdktrace.AlwaysSample()
	case config.SamplerAlwaysOff:
		return sdktrace.NeverSample()
	case config.SamplerTraceIDRatio:
		return sdktrace.TraceIDRatioBased(s.SamplerRatio)
	case config.SamplerParentBasedAlwaysOff:
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case config.SamplerParentBasedTraceIDRatio:
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.SamplerRatio))
	default:
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
}

// traceAPIRequests gives the apiserver requests of traced syncs spans of
// their own. With tracing off the transport is left as it is.
func traceAPIRequests(cfg *rest.Config, s config.TracingSettings, tp trace.TracerProvider) {
	if s.Enabled() {
		cfg.Wrap(tracing.WrapTransport(tp))
	}
}

// logTracing says once, at start-up, whether the operator traces, and
// routes what the OpenTelemetry SDK reports (a failed export, a setting
// of the exporter's it cannot read) to the operator's log.
func logTracing(logger klog.Logger, s config.TracingSettings) {
	if !s.Enabled() {
		kv := []any{"reason", s.Off}
		if len(s.Unused) > 0 {
			kv = append(kv, "withoutEffect", s.Unused)
		}
		logger.Info("Tracing off", kv...)
		return
	}
	otel.SetLogger(logger.WithName("opentelemetry"))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Error(err, "OpenTelemetry")
	}))
	kv := []any{"endpoint", s.Target(), "from", s.EndpointVariable, "protocol", s.Protocol,
		"sampler", s.Sampler, "serviceName", s.ServiceName}
	if s.Sampler == config.SamplerTraceIDRatio || s.Sampler == config.SamplerParentBasedTraceIDRatio {
		kv = append(kv, "ratio", s.SamplerRatio)
	}
	logger.Info("Tracing on", kv...)
}
