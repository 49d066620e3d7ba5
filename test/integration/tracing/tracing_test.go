// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package tracing_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
	"github.com/caliban-ai/caliban-operator/test/framework"
	"github.com/caliban-ai/caliban-operator/test/framework/otlp"
)

var ctx = context.Background()

const (
	settleTimeout = 30 * time.Second
	stopTimeout   = 20 * time.Second
	taskSync      = "calibantask sync"
	workspaceSync = "workspace sync"
)

// startOperator runs the operator binary for namespace ns alone, without
// leader election, with env added. It is stopped when the test ends, and
// its output shown if the test failed.
func startOperator(t *testing.T, name, ns string, env ...string) *framework.Operator {
	t.Helper()
	p, err := framework.RunOperator(t, framework.OperatorOptions{
		Name:        name,
		Binary:      build.Binary(t),
		Env:         cluster.NamespaceOperatorEnv(ns, env...),
		StopTimeout: stopTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// syncs is how many syncs of controller the operator has run, from its
// /metrics.
func syncs(p *framework.Operator, controller string) (float64, error) {
	m, err := p.Metrics("caliban_controller_syncs_total")
	if err != nil {
		return 0, err
	}
	n, _ := m.Sum("caliban_controller_syncs_total", map[string]string{"controller": controller})
	return n, nil
}

func TestATasksSyncSpansShareOneTraceAcrossRestartsAndShowTheirAPIServerRequests(t *testing.T) {
	receiver := otlp.StartHTTP(t)
	ns := cluster.Namespace(t, nil)
	env := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.Endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		// The spans stay queued until the operator exits, so that their
		// arrival shows the flush at shutdown.
		"OTEL_BSP_SCHEDULE_DELAY=600000",
	}
	first := startOperator(t, "first", ns, env...)

	cluster.CreateDemoWorkspace(t, ns, "demo", "Traced workspace")
	framework.Eventually(t, settleTimeout, func() error {
		ws, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ws.Status.Phase != calibanv1alpha1.WorkspaceReady {
			return fmt.Errorf("Workspace demo is %q, want Ready", ws.Status.Phase)
		}
		return nil
	})
	task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: "traced"},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "demo"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "Summarise the repository layout in README form."},
		},
	}, metav1.CreateOptions{FieldManager: framework.FieldManager})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settleTimeout, func() error {
		got, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "traced", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != calibanv1alpha1.TaskRunning {
			return fmt.Errorf("CalibanTask traced is %q, want Running", got.Status.Phase)
		}
		return nil
	})

	if want := `"Tracing on" endpoint="` + receiver.Endpoint + `/v1/traces" from="OTEL_EXPORTER_OTLP_ENDPOINT" protocol="http/protobuf"`; !strings.Contains(first.Output(), want) {
		t.Errorf("the operator's start-up does not say %s", want)
	}
	if n := receiver.Requests(); n != 0 {
		t.Errorf("%d exports before the operator stopped, with a batch delay of ten minutes", n)
	}
	if err := first.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	spans := receiver.Spans()
	if len(spans) == 0 {
		t.Fatal("no span arrived: the operator did not flush its spans when it stopped")
	}

	uid := string(task.UID)
	traceID := tracing.TraceIDFor(task.UID).String()
	byID := map[string]otlp.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	isSync := func(s otlp.Span) bool { return s.ParentSpanID == "" && (s.Name == taskSync || s.Name == workspaceSync) }

	t.Run("every span is a sync or an apiserver request inside one, none an informer's", func(t *testing.T) {
		for _, s := range spans {
			if s.Resource["service.name"] != "caliban-operator" {
				t.Errorf("span %q comes from service %v", s.Name, s.Resource["service.name"])
			}
			if isSync(s) {
				continue
			}
			parent, ok := byID[s.ParentSpanID]
			if s.Kind != "SPAN_KIND_CLIENT" || !ok || !isSync(parent) {
				t.Errorf("span %q (%s, %s %v) is neither a sync nor a request inside one", s.Name, s.Kind, s.Attributes["http.request.method"], s.Attributes["url.path"])
			}
		}
	})

	var ofTask []otlp.Span
	for _, s := range spans {
		if s.Name == taskSync && s.Attributes["caliban.task.uid"] == uid {
			ofTask = append(ofTask, s)
		}
	}
	t.Run("the task's syncs carry its identity and share the trace its UID names", func(t *testing.T) {
		if len(ofTask) < 2 {
			t.Fatalf("%d sync spans of the task, want at least the pin's and the Running one's", len(ofTask))
		}
		for _, s := range ofTask {
			if s.TraceID != traceID {
				t.Errorf("a sync of the task is in trace %s, want %s", s.TraceID, traceID)
			}
			if s.Attributes["k8s.namespace.name"] != ns || s.Attributes["caliban.task.name"] != "traced" {
				t.Errorf("a sync of the task names %v/%v", s.Attributes["k8s.namespace.name"], s.Attributes["caliban.task.name"])
			}
		}
	})

	t.Run("the task's phase goes to Running, and the writes that took it there are listed", func(t *testing.T) {
		var changes []string
		written := map[string]bool{}
		for _, s := range ofTask {
			before, after := s.Attributes["caliban.task.phase.before"], s.Attributes["caliban.task.phase.after"]
			if before != after {
				changes = append(changes, fmt.Sprintf("%v -> %v", before, after))
			}
			writes, _ := s.Attributes["caliban.sync.writes"].([]any)
			for _, w := range writes {
				written[fmt.Sprint(w)] = true
			}
		}
		if diff := cmp.Diff([]string{" -> Provisioning", "Provisioning -> Running"}, changes); diff != "" {
			t.Errorf("phase changes in the task's sync spans (-want +got):\n%s", diff)
		}
		for _, w := range []string{"status", "serviceaccount", "networkpolicy", "sandbox"} {
			if !written[w] {
				t.Errorf("no sync of the task lists the write %q: %v", w, written)
			}
		}
	})

	t.Run("the task's apiserver requests are children of its syncs", func(t *testing.T) {
		requests := map[string]bool{}
		for _, s := range spans {
			if parent, ok := byID[s.ParentSpanID]; ok && parent.Name == taskSync && parent.Attributes["caliban.task.uid"] == uid {
				code, _ := s.Attributes["http.response.status_code"].(int64)
				if s.TraceID != traceID || code < 200 || code > 299 {
					t.Errorf("request %q in trace %s answered %v", s.Name, s.TraceID, s.Attributes["http.response.status_code"])
				}
				requests[s.Name] = true
			}
		}
		for _, want := range []string{
			"PATCH /apis/caliban.caliban-ai.dev/v1alpha1/namespaces/{namespace}/calibantasks/{name}/status",
			// A child's first write is a create (ADR 0029).
			"POST /api/v1/namespaces/{namespace}/serviceaccounts",
			"POST /apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies",
			"POST /apis/agents.x-k8s.io/v1beta1/namespaces/{namespace}/sandboxes",
		} {
			if !requests[want] {
				t.Errorf("no request span %q under the task's syncs; got %v", want, slices.Sorted(maps.Keys(requests)))
			}
		}
	})

	t.Run("the Workspace's sync says it turned Ready and read its Secret", func(t *testing.T) {
		found := false
		for _, s := range spans {
			if s.Name != workspaceSync || s.Attributes["caliban.workspace.name"] != "demo" || s.Attributes["caliban.workspace.phase.after"] != "Ready" {
				continue
			}
			for _, c := range spans {
				if c.ParentSpanID == s.SpanID && c.Name == "GET /api/v1/namespaces/{namespace}/secrets/{name}" {
					found = true
				}
			}
		}
		if !found {
			t.Error("no Workspace sync span turning demo Ready with a Secret GET beneath it")
		}
	})

	// A new process: the task's next sync joins the same trace.
	seen := len(spans)
	second := startOperator(t, "second", ns, env...)
	framework.Eventually(t, settleTimeout, func() error {
		n, err := syncs(second, "calibantask")
		if err == nil && n < 1 {
			err = fmt.Errorf("the restarted operator has synced %v tasks", n)
		}
		return err
	})
	if err := second.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	var afterRestart []otlp.Span
	for _, s := range receiver.Spans()[seen:] {
		if s.Name == taskSync && s.Attributes["caliban.task.uid"] == uid {
			afterRestart = append(afterRestart, s)
		}
	}
	if len(afterRestart) == 0 {
		t.Fatal("the restarted operator sent no sync span of the task")
	}
	for _, s := range afterRestart {
		if s.TraceID != traceID {
			t.Errorf("after a restart the task's sync is in trace %s, want %s", s.TraceID, traceID)
		}
		if s.Attributes["caliban.task.phase.before"] != "Running" {
			t.Errorf("after a restart the task's sync starts from %v, want Running", s.Attributes["caliban.task.phase.before"])
		}
	}
}
