// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
)

// newSettings are what an operator restarted with another storage size,
// caliband image and control port renders.
func newSettings() config.AgentSettings {
	s := config.DefaultAgentSettings()
	s.WorkspaceStorage = resource.MustParse("20Gi")
	s.CalibandImage = "ghcr.io/caliban-ai/caliban:v2"
	s.CalibandPort = 9443
	return s
}

// rendered is what a Sandbox apply body says about the settings that
// rendered it.
type rendered struct {
	Image, Storage, RenderedBy, Mode string
	Port                             int64
}

func renderedOf(t *testing.T, u *unstructured.Unstructured) rendered {
	t.Helper()
	var r rendered
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "podTemplate", "spec", "containers")
	for _, c := range containers {
		cm := c.(map[string]any)
		if cm["name"] != builders.ContainerCaliband {
			continue
		}
		r.Image, _ = cm["image"].(string)
		ports, _ := cm["ports"].([]any)
		for _, p := range ports {
			if pm := p.(map[string]any); pm["name"] == builders.PortNameCaliband {
				switch p := pm["containerPort"].(type) {
				case int64:
					r.Port = p
				case float64:
					r.Port = int64(p)
				}
			}
		}
	}
	vcts, _, _ := unstructured.NestedSlice(u.Object, "spec", "volumeClaimTemplates")
	if len(vcts) == 1 {
		r.Storage, _, _ = unstructured.NestedString(vcts[0].(map[string]any), "spec", "resources", "requests", "storage")
	}
	r.RenderedBy = u.GetAnnotations()[builders.AnnotationRenderedBy]
	r.Mode, _, _ = unstructured.NestedString(u.Object, "spec", "operatingMode")
	return r
}

func fingerprintOf(t *testing.T, s config.AgentSettings) string {
	t.Helper()
	fp, err := builders.RenderingFingerprint(s)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// An operator restarted with other settings leaves a Running task's
// children alone, suspends and resumes its Sandbox with the spec it has
// (never one agent-sandbox would refuse: its claims are immutable), keeps
// reporting the endpoint the pod listens on, and renders a new task with
// the new settings.
func TestARestartWithOtherSettingsKeepsTheChildrenOfExistingTasks(t *testing.T) {
	f := lifecycleFixture(t)
	restarted, tk := f.runningTask()
	oldFP, newFP := fingerprintOf(t, config.DefaultAgentSettings()), fingerprintOf(t, newSettings())
	if oldFP == newFP {
		t.Fatal("the two settings have the same fingerprint")
	}
	first := renderedOf(t, f.lastSandboxApply())
	if want := (rendered{Image: "ghcr.io/caliban-ai/caliban:0.15.0", Storage: "10Gi", RenderedBy: oldFP, Mode: "Running", Port: 8443}); first != want {
		t.Fatalf("set-up: the Sandbox was applied as %+v, want %+v", first, want)
	}

	restartWith(t, f, restarted, newSettings())
	for pass := 1; pass <= 2; pass++ {
		f.resetActions()
		f.mustSync(restarted, tk)
		if w := f.writes(); len(w) != 0 {
			t.Errorf("restarted, pass %d: writes %v, want none", pass, w)
		}
	}
	if st := f.storedTask(tk); st.Status.CalibandEndpoint != "fix-bug-sbx.team.svc.cluster.local:8443" {
		t.Errorf("restarted: endpoint %q, want the port the pod listens on (8443)", st.Status.CalibandEndpoint)
	}

	// Suspended and resumed under the new settings: only the mode changes.
	for _, step := range []struct {
		suspend bool
		mode    string
		phase   calibanv1alpha1.TaskPhase
	}{{true, "Suspended", calibanv1alpha1.TaskSuspended}, {false, "Running", calibanv1alpha1.TaskRunning}} {
		f.resetActions()
		gets := f.sandboxGets
		tk = f.edit(tk, "kubectl", func(t *calibanv1alpha1.CalibanTask) { t.Spec.Suspend = step.suspend })
		f.mustSync(restarted, tk)
		if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug", "patch sandboxes fix-bug-sbx"}, f.writes()); diff != "" {
			t.Errorf("%s: writes (-want +got):\n%s", step.mode, diff)
		}
		want := first
		want.Mode = step.mode
		if got := renderedOf(t, f.lastSandboxApply()); got != want {
			t.Errorf("%s: the Sandbox was applied as %+v, want its own spec %+v", step.mode, got, want)
		}
		if f.sandboxGets != gets+1 {
			t.Errorf("%s: %d GETs of the Sandbox, want 1 (its spec is not in the cache)", step.mode, f.sandboxGets-gets)
		}
		f.sandboxAnswers()
		tk = f.feedTask(tk)
		f.mustSync(restarted, tk)
		if st := f.storedTask(tk); st.Status.Phase != step.phase {
			t.Errorf("%s: phase %s, want %s", step.mode, st.Status.Phase, step.phase)
		}
	}
	if st := f.storedTask(tk); st.Status.CalibandEndpoint != "fix-bug-sbx.team.svc.cluster.local:8443" {
		t.Errorf("resumed: endpoint %q, want 8443, the port of the Sandbox it kept", st.Status.CalibandEndpoint)
	}

	// A new task gets the new settings.
	f.resetActions()
	fresh := task(func(t *calibanv1alpha1.CalibanTask) { t.Name, t.UID = "new-bug", "new-uid" })
	f.seed(fresh)
	f.mustSync(restarted, fresh)
	if got, want := renderedOf(t, f.lastSandboxApply()), (rendered{Image: "ghcr.io/caliban-ai/caliban:v2", Storage: "20Gi", RenderedBy: newFP, Mode: "Running", Port: 9443}); got != want {
		t.Errorf("new task: the Sandbox was applied as %+v, want %+v", got, want)
	}
}

// A Sandbox this operator rendered is applied again when the task's own
// spec changes what it renders, with the claims the Sandbox has: agent-
// sandbox refuses any change to them, even one the CRD's defaulting made.
func TestARenderingChangeKeepsTheLiveVolumeClaimTemplates(t *testing.T) {
	f := lifecycleFixture(t)
	c, tk := f.runningTask()
	live := f.lastSandboxApply().DeepCopy()
	vcts, _, _ := unstructured.NestedSlice(live.Object, "spec", "volumeClaimTemplates")
	vct := vcts[0].(map[string]any)
	if err := unstructured.SetNestedField(vct, "Filesystem", "spec", "volumeMode"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(live.Object, []any{vct}, "spec", "volumeClaimTemplates"); err != nil {
		t.Fatal(err)
	}
	f.cacheSandbox(live)

	tk = f.edit(tk, "kubectl", func(t *calibanv1alpha1.CalibanTask) {
		t.Spec.Model = &calibanv1alpha1.ModelSpec{RouterConfigRef: "router-v2"}
	})
	f.mustSync(c, tk)
	applied := f.lastSandboxApply()
	got, _, _ := unstructured.NestedSlice(applied.Object, "spec", "volumeClaimTemplates")
	if diff := cmp.Diff([]any{vct}, got); diff != "" {
		t.Errorf("volumeClaimTemplates applied (-live +applied):\n%s", diff)
	}
	volumes, _, _ := unstructured.NestedSlice(applied.Object, "spec", "podTemplate", "spec", "volumes")
	found := false
	for _, v := range volumes {
		found = found || v.(map[string]any)["name"] == builders.VolumeRouterConfig
	}
	if !found {
		t.Error("the task's edit (a router config) did not reach the pod template")
	}
}

// restartWith makes c what a restart with settings s would make it: the
// settings replaced, nothing remembered. (A second controller cannot share
// the fixture's informers.)
func restartWith(t *testing.T, f *fixture, c *TaskController, s config.AgentSettings) {
	t.Helper()
	children, err := freshness.New(s, c.controllingTask)
	if err != nil {
		t.Fatal(err)
	}
	for kind, inf := range f.childInformers() {
		if err := children.Track(kind, inf); err != nil {
			t.Fatal(err)
		}
	}
	c.settings, c.children = s, children
	f.children = children
}

// A suspend the apiserver refuses leaves the task in the phase the cluster
// shows (Running), says why in its Ready message, and the error is
// retried; once the apply goes through and agent-sandbox has suspended the
// Sandbox, the task is Suspended.
func TestARefusedSuspendKeepsTheTaskRunningAndSaysWhy(t *testing.T) {
	f := lifecycleFixture(t)
	c, tk := f.runningTask()
	refusal := `admission webhook "quota.example" denied the request: frozen namespace`
	f.mu.Lock()
	f.onSandboxApply = func(string, string) error { return errors.New(refusal) }
	f.mu.Unlock()

	tk = f.edit(tk, "kubectl", func(t *calibanv1alpha1.CalibanTask) { t.Spec.Suspend = true })
	if _, err := c.sync(f.ctx, key(tk)); err == nil {
		t.Fatal("a refused apply returned no error: it would not be retried")
	}
	st := lastStatus(t, f)
	ready := readyOf(st)
	if st.Phase != calibanv1alpha1.TaskRunning || ready == nil || ready.Status != metav1.ConditionTrue ||
		!strings.HasPrefix(ready.Message, "retrying: applying Sandbox fix-bug-sbx: ") || !strings.Contains(ready.Message, "frozen namespace") {
		t.Errorf("status %s, Ready %+v; want Running, Ready True, message retrying: <the refusal>", st.Phase, ready)
	}
	if got := f.events.reasons(); len(got) != 1 || got[0] != EventReconcileError {
		t.Errorf("Events %v, want one %s", got, EventReconcileError)
	}

	// The same refusal again writes nothing new.
	tk = f.feedTask(tk)
	f.resetActions()
	if _, err := c.sync(f.ctx, key(tk)); err == nil {
		t.Fatal("the second refused apply returned no error")
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("the same refusal again wrote %v, want nothing", w)
	}

	// Accepted, then suspended by agent-sandbox.
	f.mu.Lock()
	f.onSandboxApply = nil
	f.mu.Unlock()
	f.mustSync(c, tk)
	f.sandboxAnswers()
	tk = f.feedTask(tk)
	f.mustSync(c, tk)
	if st := f.storedTask(tk); st.Status.Phase != calibanv1alpha1.TaskSuspended {
		t.Errorf("once the apply went through and the Sandbox was suspended: phase %s, want Suspended", st.Status.Phase)
	}
}
