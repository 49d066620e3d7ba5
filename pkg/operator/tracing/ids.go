// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"
)

// IDGenerator is the SDK's IDGenerator (sdktrace.WithIDGenerator) for the
// operator: the root span of a sync started with its object's own trace
// (Tracer.StartSync) gets TraceIDFor the object's UID, every other span
// random IDs. So every sync of a task joins one trace, also across
// restarts and leader changes, and a ratio sampler, which reads the
// TraceID, decides once per task.
type IDGenerator struct{}

// NewIDs returns the IDs of a root span.
func (IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if uid, ok := ctx.Value(objectKey{}).(types.UID); ok && uid != "" {
		return TraceIDFor(uid), newSpanID()
	}
	return newTraceID(), newSpanID()
}

// NewSpanID returns the ID of a span in an existing trace.
func (IDGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

// TraceIDFor is the TraceID of the object uid: the first 16 bytes of the
// SHA-256 of the UID's text. Not the UUID's own 16 bytes, though they
// would read more easily: the SDK's ratio sampler compares bytes 8-15 of
// the TraceID with the ratio, and byte 8 of a version 4 UUID always
// starts with the bits 10 (its variant), so every task would fall on the
// same side of most ratios. A hash spreads them evenly. Anyone with the
// UID can compute it, prospero included, to find the trace or add to it.
func TraceIDFor(uid types.UID) trace.TraceID {
	sum := sha256.Sum256([]byte(uid))
	var id trace.TraceID
	copy(id[:], sum[:len(id)])
	return id
}

// The random IDs come from math/rand/v2's generator, which is seeded from
// the operating system, safe for concurrent use and lock-free.
func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}
