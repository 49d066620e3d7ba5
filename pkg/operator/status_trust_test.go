// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
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

// afterTheKey: a task created after the fixtures' pin key, so held to its
// signature.
func afterTheKey(t *calibanv1alpha1.CalibanTask) {
	t.CreationTimestamp = metav1.NewTime(fixturePinKey.Since.Add(time.Hour))
}

// launchType sets the type of the stored task's launch, as a writer of
// calibantasks/status would.
func launchType(typ calibanv1alpha1.LaunchType) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.Status.Launch = t.Status.Launch.DeepCopy()
		t.Status.Launch.Type = typ
	}
}

// childWrites are the writes of anything but the task's status.
func childWrites(writes []string) []string {
	var out []string
	for _, w := range writes {
		if !strings.HasPrefix(w, "patch calibantasks/status ") {
			out = append(out, w)
		}
	}
	return out
}

// v1Signature is a pin's signature as the release before signed launches
// wrote it: "v1:" and an HMAC-SHA256 of the UID and the pin's JSON.
func v1Signature(key []byte, uid types.UID, pin *calibanv1alpha1.ResolvedWorkspace) string {
	body, _ := json.Marshal(pin)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(uid))
	mac.Write([]byte{0})
	mac.Write(body)
	return "v1:" + base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

// A Running cold task whose status.launch someone flipped to Warm (with
// agent-sandbox's extensions served, so a claim could be made) gets no
// claim, and its NetworkPolicy and Sandbox are not touched: it fails with
// LaunchNotTrusted, keeping what the operator last wrote of its launch and
// Sandbox. Put back, the launch is followed again, and the task runs as it
// did, with nothing re-applied.
func TestAFlippedLaunchMakesNoClaimAndMovesNoPolicy(t *testing.T) {
	f := lifecycleFixture(t)
	f.extensionsAPI.missing = false
	c, tk := f.runningTask(afterTheKey)
	if !strings.HasPrefix(tk.Status.PinSignature, "v2:") || tk.Status.Launch == nil || tk.Status.Launch.Type != calibanv1alpha1.LaunchCold {
		t.Fatalf("set-up: signature %q launch %+v, want v2 and Cold", tk.Status.PinSignature, tk.Status.Launch)
	}
	_, policy := f.servedChildren(tk)

	tk = f.edit(tk, "prospero", launchType(calibanv1alpha1.LaunchWarm))
	f.mustSync(c, tk)
	if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
		t.Errorf("writes after the flip (-want +got):\n%s", diff)
	}
	st := lastStatus(t, f)
	ready := readyOf(st)
	if st.Phase != calibanv1alpha1.TaskFailed || ready == nil || ready.Reason != builders.ReasonLaunchNotTrusted ||
		!strings.Contains(ready.Message, "signed Cold with the pin") || st.CalibandEndpoint != "" {
		t.Errorf("status %s Ready %+v endpoint %q, want Failed, %s naming the launch signed, no endpoint", st.Phase, ready, st.CalibandEndpoint, builders.ReasonLaunchNotTrusted)
	}
	if st.Launch == nil || st.Launch.Type != calibanv1alpha1.LaunchWarm || st.Launch.Claim != nil ||
		st.SandboxRef == nil || st.SandboxRef.Name != "fix-bug-sbx" {
		t.Errorf("launch %+v sandboxRef %+v, want them as they were stored", st.Launch, st.SandboxRef)
	}
	if !slices.Contains(f.events.reasons(), builders.ReasonLaunchNotTrusted) {
		t.Errorf("Events %v, want a %s Warning", f.events.reasons(), builders.ReasonLaunchNotTrusted)
	}
	if _, err := f.caliban.ExtensionsV1beta1().SandboxClaims("team").Get(f.ctx, builders.ClaimName(tk.Name), metaGet); !apierrors.IsNotFound(err) {
		t.Errorf("a SandboxClaim for the flipped task: %v", err)
	}
	if _, now := f.servedChildren(tk); !apiequality.Semantic.DeepEqual(policy.Spec, now.Spec) {
		t.Errorf("the NetworkPolicy changed:\n%s", cmp.Diff(policy.Spec, now.Spec))
	}

	// Again, and after a restart: still nothing but the first status.
	tk = f.feedTask(tk)
	f.resetActions()
	// The restarted operator's caches take their verdicts on the children
	// against the flipped launch, as its start-up list brings them.
	restartWith(t, f, c, config.DefaultAgentSettings()) // a new term: an empty memo
	sa, np := f.servedChildren(tk)
	f.cache(f.kubeInformers.Core().V1().ServiceAccounts().Informer(), sa)
	f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), np)
	f.sandboxAnswers()
	f.mustSync(c, tk)
	if w := f.writes(); len(w) != 0 {
		t.Errorf("a restarted operator wrote %v for the flipped task", w)
	}

	// Put back: the verdicts are taken again, so nothing is applied, now
	// or on the next pass.
	tk = f.edit(tk, "prospero", launchType(calibanv1alpha1.LaunchCold))
	f.mustSync(c, tk)
	if w := childWrites(f.writes()); len(w) != 0 {
		t.Errorf("the launch put back: child writes %v, want none", w)
	}
	if st := lastStatus(t, f); st.Phase != calibanv1alpha1.TaskRunning || st.CalibandEndpoint != "fix-bug-sbx.team.svc.cluster.local:8443" {
		t.Errorf("the launch put back: status %s endpoint %q, want Running where it was", st.Phase, st.CalibandEndpoint)
	}
	tk = f.feedTask(tk)
	f.resetActions()
	f.mustSync(c, tk)
	if w := f.writes(); len(w) != 0 {
		t.Errorf("the pass after the launch was put back wrote %v, want nothing", w)
	}
}

// A Running warm task whose status.launch someone flipped to Cold gets no
// Sandbox, ServiceAccount or policy of its own beside the one its claim
// holds.
func TestAFlippedLaunchStartsNoSecondSandbox(t *testing.T) {
	f, tc, tk, template := warmFixture(t)
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	stored := f.storedTask(tk)
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), stored)
	np, err := f.kube.NetworkingV1().NetworkPolicies("team").Get(f.ctx, "fix-bug-netpol", metaGet)
	if err != nil {
		t.Fatal(err)
	}
	f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), np)
	f.holdSandbox(tk, "ws-warm-x7k2p", template)
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	if tk = f.feedTask(tk); tk.Status.Phase != calibanv1alpha1.TaskRunning {
		t.Fatalf("set-up: phase %s, want Running", tk.Status.Phase)
	}

	tk = f.edit(tk, "prospero", launchType(calibanv1alpha1.LaunchCold))
	f.resetActions()
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
		t.Errorf("writes after the flip (-want +got):\n%s", diff)
	}
	if n := len(f.appliedSandboxes()); n != 0 {
		t.Errorf("%d Sandboxes applied, want none beside the claim's", n)
	}
	st := lastStatus(t, f)
	if r := readyOf(st); st.Phase != calibanv1alpha1.TaskFailed || r == nil || r.Reason != builders.ReasonLaunchNotTrusted ||
		st.SandboxRef == nil || st.SandboxRef.Name != "ws-warm-x7k2p" {
		t.Errorf("status %s Ready %+v sandboxRef %+v, want Failed, %s, the claim's Sandbox", st.Phase, r, st.SandboxRef, builders.ReasonLaunchNotTrusted)
	}
}

// A task pinned by the release before launches were signed (a v1
// signature) keeps running: its launch is what its children show. Flipped,
// it is not followed either.
func TestAPinSignedBeforeLaunchesWereKeepsRunning(t *testing.T) {
	f := lifecycleFixture(t)
	f.extensionsAPI.missing = false
	c, tk := f.runningTask(afterTheKey)
	tk = f.edit(tk, builders.FieldManager, func(t *calibanv1alpha1.CalibanTask) {
		t.Status.PinSignature = v1Signature(fixturePinKey.Key, t.UID, t.Status.ResolvedWorkspace)
	})
	// A restart, as after the upgrade.
	restartWith(t, f, c, config.DefaultAgentSettings())
	f.resetActions()
	f.mustSync(c, tk)
	if w := f.writes(); len(w) != 0 {
		t.Errorf("a task pinned v1: writes %v, want none", w)
	}
	if st := f.storedTask(tk).Status; st.Phase != calibanv1alpha1.TaskRunning || !strings.HasPrefix(st.PinSignature, "v1:") {
		t.Errorf("phase %s signature %q, want Running, still v1", st.Phase, st.PinSignature)
	}

	tk = f.edit(tk, "prospero", launchType(calibanv1alpha1.LaunchWarm))
	f.mustSync(c, tk)
	if diff := cmp.Diff([]string{"patch calibantasks/status fix-bug"}, f.writes()); diff != "" {
		t.Errorf("writes after the flip (-want +got):\n%s", diff)
	}
	if r := readyOf(lastStatus(t, f)); r == nil || r.Reason != builders.ReasonLaunchNotTrusted || !strings.Contains(r.Message, "own Sandbox fix-bug-sbx says Cold") {
		t.Errorf("Ready %+v, want %s naming the task's own Sandbox", r, builders.ReasonLaunchNotTrusted)
	}
}

// The operator's own change of path (a warm pool that rolled before the
// claim was served) is signed with the pin, so the cold start it leads to
// is followed.
func TestAWarmTaskStartedColdIsSignedCold(t *testing.T) {
	f, tc, tk, _ := warmFixture(t)
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	f.cache(f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer(), f.storedTask(tk))
	f.holdSandbox(tk, "ws-warm-x7k2p", "ws-warm-0000000000")
	if _, err := tc.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	st := f.storedTask(tk).Status
	if want := builders.SignPin(fixturePinKey.Key, tk.UID, st.ResolvedWorkspace, calibanv1alpha1.LaunchCold); st.Launch == nil ||
		st.Launch.Type != calibanv1alpha1.LaunchCold || st.PinSignature != want {
		t.Errorf("launch %+v signature %q, want Cold signed %q", st.Launch, st.PinSignature, want)
	}
}
