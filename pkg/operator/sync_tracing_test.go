// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// recordSpans makes the controllers the fixture builds from now on trace
// every sync into memory, with the process's IDs.
func (f *fixture) recordSpans() *tracetest.InMemoryExporter {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(tracing.IDGenerator{}))
	f.t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f.tracer = tracing.NewTracer(tp)
	return exp
}

// spanAttributes are a span's attributes by key, their values as Go holds
// them.
func spanAttributes(s tracetest.SpanStub) map[string]any {
	out := map[string]any{}
	for _, kv := range s.Attributes {
		out[string(kv.Key)] = kv.Value.AsInterface()
	}
	return out
}

// The life of a task with a drain finalizer and a TTL, sync by sync: each
// span says what the sync found, what it wrote, in order, what it left,
// and when it will look again.
func TestATasksSyncSpansFollowItsLifeInOneTrace(t *testing.T) {
	f := lifecycleFixture(t)
	exp := f.recordSpans()
	c, tk := f.runningTask(onDelete(calibanv1alpha1.OnDeleteCheckpoint), ttlAfterFinished(300))

	settledAt := f.clock.Now()
	f.clock.Step(time.Minute)
	tk = f.edit(tk, "prospero", settled(builders.SettledSucceeded, "", settledAt))
	f.mustSync(c, tk)
	f.sandboxAnswers()
	tk = f.feedTask(tk)
	f.clock.Step(4 * time.Minute)
	f.mustSync(c, tk)

	task := func(before, after string, writes []string, requeue float64, rendered bool) map[string]any {
		m := map[string]any{
			"k8s.namespace.name":        "team",
			"caliban.task.name":         "fix-bug",
			"caliban.task.uid":          "task-uid",
			"caliban.task.phase.before": before,
			"caliban.task.phase.after":  after,
			"caliban.sync.writes":       writes,
		}
		if requeue > 0 {
			m["caliban.sync.requeue_after_seconds"] = requeue
		}
		if rendered {
			m["caliban.sync.rendered_children"] = true
		}
		return m
	}
	want := []map[string]any{
		// The pin's sync renders the children; the next finds their hashes
		// in the memo; prospero's verdict is a new version of the task,
		// whose children are rendered again to know them unchanged.
		task("", "Provisioning", []string{"status", "finalizer", "serviceaccount", "networkpolicy", "sandbox"}, 0, true),
		task("Provisioning", "Running", []string{"status"}, 0, false),
		task("Running", "Completed", []string{"sandbox", "status"}, 240, true),
		task("Completed", "Completed", []string{"delete"}, 0, false),
	}
	spans := exp.GetSpans()
	var got []map[string]any
	for _, s := range spans {
		got = append(got, spanAttributes(s))
		if s.Name != "calibantask sync" || s.Parent.IsValid() {
			t.Errorf("span %q with parent %s, want a root calibantask sync", s.Name, s.Parent.SpanID())
		}
		if s.SpanContext.TraceID() != tracing.TraceIDFor("task-uid") {
			t.Errorf("a sync of the task is in trace %s, want the one its UID names, %s", s.SpanContext.TraceID(), tracing.TraceIDFor("task-uid"))
		}
		if s.Status.Code != codes.Unset {
			t.Errorf("a sync that succeeded has status %v", s.Status)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the syncs' attributes (-want +got):\n%s", diff)
	}
}

func TestAFailedSyncsSpanSaysWhyAndWhatItWroteFirst(t *testing.T) {
	f := lifecycleFixture(t)
	exp := f.recordSpans()
	f.onSandboxApply = func(string, string) error { return errors.New("admission webhook refused it") }
	tk := task()
	f.seed(tk, workspace(), secret("key", "api-key"))
	c := f.taskController()
	if _, err := c.sync(f.ctx, key(tk)); err == nil {
		t.Fatal("the sync did not fail")
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Status.Code != codes.Error || !strings.Contains(s.Status.Description, "admission webhook refused it") {
		t.Errorf("status %+v, want Error with the apply's answer", s.Status)
	}
	attrs := spanAttributes(s)
	// The pin, the two children, and the status that records the problem.
	if diff := cmp.Diff([]string{"status", "serviceaccount", "networkpolicy", "status"}, attrs["caliban.sync.writes"]); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if _, ok := attrs["caliban.sync.requeue_after_seconds"]; ok {
		t.Error("a failed sync names a requeue; its retry is the queue's backoff")
	}
}

func TestAWorkspacesSyncSpanIsATraceOfItsOwn(t *testing.T) {
	f := newFixture(t)
	exp := f.recordSpans()
	ws := workspace(func(ws *calibanv1alpha1.Workspace) { ws.Status = calibanv1alpha1.WorkspaceStatus{} })
	f.seed(ws, secret("key", "api-key"))
	c := f.workspaceController()
	for range 2 {
		if _, err := c.sync(f.ctx, key(ws)); err != nil {
			t.Fatal(err)
		}
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	want := map[string]any{
		"k8s.namespace.name":                 "team",
		"caliban.workspace.name":             "ws",
		"caliban.workspace.uid":              "ws-uid",
		"caliban.workspace.phase.before":     "",
		"caliban.workspace.phase.after":      "Ready",
		"caliban.sync.writes":                []string{"status"},
		"caliban.sync.requeue_after_seconds": 300.0,
	}
	if diff := cmp.Diff(want, spanAttributes(spans[0])); diff != "" {
		t.Errorf("the Workspace's sync span (-want +got):\n%s", diff)
	}
	if spans[0].Name != "workspace sync" {
		t.Errorf("span name %q, want workspace sync", spans[0].Name)
	}
	// The cache was not fed back, so the second sync wrote the same again:
	// what matters is that it is another trace.
	if a, b := spans[0].SpanContext.TraceID(), spans[1].SpanContext.TraceID(); a == b || a == tracing.TraceIDFor("ws-uid") {
		t.Errorf("two syncs of a Workspace are in traces %s and %s, want two random ones", a, b)
	}
}

// BenchmarkASteadyStateTaskSync is the sync of a Running task that finds
// nothing to do, the one every resync runs for every task, with tracing
// off (as by default) and on. Off, its allocations are the sync's own:
// the tracing calls add none (tracing.TestTracingOffAllocatesNothing).
func BenchmarkASteadyStateTaskSync(b *testing.B) {
	for _, traced := range []bool{false, true} {
		name := "tracing off"
		if traced {
			name = "tracing on"
		}
		b.Run(name, func(b *testing.B) {
			f := newFixture(b)
			f.applyPerSubresource()
			var exp *tracetest.InMemoryExporter
			if traced {
				// Sampled and exported, into memory: the cost of a span, not
				// of a network.
				exp = f.recordSpans()
			}
			c, tk := f.runningTask()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.sync(f.ctx, key(tk)); err != nil {
					b.Fatal(err)
				}
				f.kube.ClearActions()
				f.caliban.ClearActions()
				if exp != nil {
					exp.Reset()
				}
			}
		})
	}
}
