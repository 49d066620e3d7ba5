// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package tracing makes the spans of the operator's syncs and of the
// apiserver requests they make (docs/adr/0020-tracing.md): one span per
// sync, its writes recorded into it by the write path through the
// context, and a child span per request. It speaks only the
// OpenTelemetry API. cmd/caliban-operator builds the SDK when an endpoint
// is configured and nothing otherwise; with nothing, the zero Tracer
// starts no span and allocates nothing.
//
// A task's syncs share one trace, whose TraceID IDGenerator derives from
// the task's UID; see TraceIDFor.
package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apimachinery/pkg/types"
)

// ScopeName is the instrumentation scope of every span the operator makes.
const ScopeName = "github.com/caliban-ai/caliban-operator"

// The attributes of the sync spans (docs/deploying.md#tracing). The
// object's namespace is the semantic conventions' own.
const (
	KeyNamespace = semconv.K8SNamespaceNameKey

	KeyTaskName        = attribute.Key("caliban.task.name")
	KeyTaskUID         = attribute.Key("caliban.task.uid")
	KeyTaskPhaseBefore = attribute.Key("caliban.task.phase.before")
	KeyTaskPhaseAfter  = attribute.Key("caliban.task.phase.after")

	KeyWorkspaceName        = attribute.Key("caliban.workspace.name")
	KeyWorkspaceUID         = attribute.Key("caliban.workspace.uid")
	KeyWorkspacePhaseBefore = attribute.Key("caliban.workspace.phase.before")
	KeyWorkspacePhaseAfter  = attribute.Key("caliban.workspace.phase.after")

	// KeyWrites lists the writes a sync made, in order: status,
	// serviceaccount, networkpolicy, sandbox, finalizer, delete. Empty for
	// a sync that wrote nothing.
	KeyWrites = attribute.Key("caliban.sync.writes")
	// KeyRendered is true on a task sync that had to render the task's
	// children to learn what they hash to: the first after a change of
	// the task, or after a restart before the children's caches filled the
	// memo. A steady state renders nothing.
	KeyRendered = attribute.Key("caliban.sync.rendered_children")
	// KeyRequeueAfter is when the sync asked to look again, in seconds;
	// absent when it did not (an error retries with backoff instead).
	KeyRequeueAfter = attribute.Key("caliban.sync.requeue_after_seconds")
)

// Tracer starts the spans of syncs. The zero Tracer is tracing off.
type Tracer struct {
	tracer trace.Tracer
}

// NewTracer is a Tracer of tp's. A nil or no-op provider gives the zero
// Tracer: even the no-op tracer allocates a context per span, which a
// process that does not trace should not pay for every sync.
func NewTracer(tp trace.TracerProvider) Tracer {
	if tp == nil {
		return Tracer{}
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return Tracer{}
	}
	return Tracer{tracer: tp.Tracer(ScopeName)}
}

// Sync is the span of one sync while it records. Every method of a nil
// *Sync does nothing, so callers need no check of their own except to
// skip computing attributes.
type Sync struct {
	span trace.Span
	// A sync runs on one goroutine, and so do the writes it records.
	writes []string
}

type (
	syncKey   struct{}
	objectKey struct{}
)

// StartSync starts the span name for a sync of the object uid. With
// ownTrace, the span's trace is the object's (IDGenerator derives its
// TraceID from uid), so that every sync of the object lands in one trace;
// otherwise it is a trace of its own. It returns nil when the span does
// not record (tracing off, or not sampled); the returned context carries
// the span either way.
func (t Tracer) StartSync(ctx context.Context, name string, uid types.UID, ownTrace bool) (context.Context, *Sync) {
	if t.tracer == nil {
		return ctx, nil
	}
	if ownTrace {
		ctx = context.WithValue(ctx, objectKey{}, uid)
	}
	ctx, span := t.tracer.Start(ctx, name)
	if !span.IsRecording() {
		return ctx, nil
	}
	s := &Sync{span: span, writes: []string{}}
	return context.WithValue(ctx, syncKey{}, s), s
}

// SyncFrom is the recording sync span ctx belongs to, or nil.
func SyncFrom(ctx context.Context) *Sync {
	s, _ := ctx.Value(syncKey{}).(*Sync)
	return s
}

// RecordWrite adds write to the writes of the sync ctx belongs to.
func RecordWrite(ctx context.Context, write string) {
	if s := SyncFrom(ctx); s != nil {
		s.writes = append(s.writes, write)
	}
}

// SetAttributes sets attributes of the sync's span; a later value of a
// key replaces an earlier one.
func (s *Sync) SetAttributes(kv ...attribute.KeyValue) {
	if s != nil {
		s.span.SetAttributes(kv...)
	}
}

// End records the writes, when to look again (after) and the error of the
// sync, and ends its span.
func (s *Sync) End(after time.Duration, err error) {
	if s == nil {
		return
	}
	s.span.SetAttributes(KeyWrites.StringSlice(s.writes))
	if after > 0 {
		s.span.SetAttributes(KeyRequeueAfter.Float64(after.Seconds()))
	}
	if err != nil {
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}
