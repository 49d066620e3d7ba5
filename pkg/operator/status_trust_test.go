// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// The sync against what someone else may write in a status the operator
// reads: the task's own (status.launch) and its Sandbox's (serviceFQDN).
// docs/security.md#pins-the-operator-wrote.

// A Sandbox whose status reports an address other than its own Service
// gives its task no endpoint: the task drops to Provisioning, says why,
// warns once, and nothing is written to a child.
func TestASandboxThatReportsAnotherAddressGivesNoEndpoint(t *testing.T) {
	f := lifecycleFixture(t)
	c, tk := f.runningTask()
	sb := f.lastSandboxApply().DeepCopy()
	_ = unstructured.SetNestedField(sb.Object, "collector.example.com", "status", "serviceFQDN")
	_ = unstructured.SetNestedSlice(sb.Object, []any{map[string]any{"type": "Ready", "status": "True", "reason": "DependenciesReady",
		"message": "Pod is Ready", "lastTransitionTime": "2026-09-01T12:00:00Z"}}, "status", "conditions")
	f.cacheSandbox(sb)

	f.mustSync(c, tk)
	if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	st := lastStatus(t, f)
	ready := readyOf(st)
	if st.Phase != calibanv1alpha1.TaskProvisioning || st.CalibandEndpoint != "" || ready == nil ||
		ready.Reason != builders.ReasonServiceFQDNMismatch || !strings.Contains(ready.Message, "'collector.example.com'") ||
		!strings.Contains(ready.Message, "fix-bug-sbx.team.svc.cluster.local") {
		t.Errorf("status %s endpoint %q Ready %+v, want Provisioning, no endpoint, %s naming both addresses",
			st.Phase, st.CalibandEndpoint, ready, builders.ReasonServiceFQDNMismatch)
	}
	want := []recordedEvent{
		{corev1.EventTypeNormal, EventPhaseChanged, "Running → Provisioning"},
		{corev1.EventTypeWarning, EventServiceFQDNMismatch, ready.Message},
	}
	if diff := cmp.Diff(want, f.events.events, allowUnexported); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}

	// Once said, it is not said again.
	tk = f.feedTask(tk)
	f.resetActions()
	f.mustSync(c, tk)
	if w := f.writes(); len(w) != 0 || len(f.events.events) != 0 {
		t.Errorf("the next sync wrote %v, Events %v; want none", w, f.events.events)
	}

	// agent-sandbox reports the Service again: Running, at its own address.
	f.sandboxAnswers()
	f.mustSync(c, tk)
	if st := lastStatus(t, f); st.Phase != calibanv1alpha1.TaskRunning || st.CalibandEndpoint != "fix-bug-sbx.team.svc.cluster.local:8443" {
		t.Errorf("status %s endpoint %q, want Running at the Sandbox's Service", st.Phase, st.CalibandEndpoint)
	}
}
