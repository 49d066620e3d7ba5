// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package agentsandbox_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibanoperator "github.com/caliban-ai/caliban-operator/pkg/operator"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// The Ready reason of a task whose status.launch is not the one the
// operator decided with its pin.
const reasonLaunchNotTrusted = "LaunchNotTrusted"

// status.launch decides whether a task gets a SandboxClaim or a Sandbox of
// its own, and which pod its NetworkPolicy selects. Without the admission
// component anyone who may patch calibantasks/status can flip it. After
// a restart, the operator follows no flipped launch: a running cold task
// gets no claim and keeps its policy on its own pod, a running warm task
// gets no second Sandbox; each is Failed with LaunchNotTrusted, and its
// Sandbox and pod are left as they are. A task pinned by the release
// before launches were signed (a v1 signature) keeps running across the
// restart, and a flip of its launch is not followed either. Put back, each
// launch is followed again, on the pod the task had.
func TestAFlippedLaunchRunsNothingNew(t *testing.T) {
	bed(t)
	ns := cluster.Namespace(t, nil)
	key := "pin-key-" + ns
	t.Cleanup(func() {
		_ = cluster.Kube.CoreV1().Secrets(framework.OperatorNamespace).Delete(ctx, key, metav1.DeleteOptions{})
	})
	first := startOperator(t, "before", ns, config.EnvPinKeySecret+"="+key)
	namespaceWithWorkspace(t, ns)
	setWarmPool(t, ns, "ws", 1)
	waitForFullPool(t, ns, "ws", "")
	cold := func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.State = &calibanv1alpha1.StateSpec{Mode: "local"} }
	createTask(t, ns, "warm")
	framework.WaitForPhase(t, cluster.Caliban, ns, "warm", calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	createTask(t, ns, "cold", cold)
	createTask(t, ns, "earlier", cold)

	type seen struct {
		launch     calibanv1alpha1.LaunchType
		sandbox    string
		generation int64
		pod        types.UID
		policy     any
	}
	look := func(name string) seen {
		t.Helper()
		task := getTask(t, ns, name)
		s := seen{sandbox: task.Status.SandboxRef.Name}
		if task.Status.Launch != nil {
			s.launch = task.Status.Launch.Type
		}
		s.generation = getSandbox(t, ns, s.sandbox).GetGeneration()
		if p, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, s.sandbox, metav1.GetOptions{}); err == nil && podReady(p) {
			s.pod = p.UID
		}
		np, err := cluster.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, builders.NetworkPolicyName(name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.policy = np.Spec
		return s
	}
	tasks := []string{"warm", "cold", "earlier"}
	before := map[string]seen{}
	for _, name := range tasks {
		framework.WaitForPhase(t, cluster.Caliban, ns, name, calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
		framework.Eventually(t, startTimeout, func() error {
			if before[name] = look(name); before[name].pod == "" {
				return fmt.Errorf("task %s has no ready pod yet", name)
			}
			return nil
		})
	}
	if before["warm"].launch != calibanv1alpha1.LaunchWarm || before["cold"].launch != calibanv1alpha1.LaunchCold {
		t.Fatalf("set-up: launches %s and %s, want Warm and Cold", before["warm"].launch, before["cold"].launch)
	}
	if err := first.Stop(30 * time.Second); err != nil {
		t.Fatalf("stopping the first operator: %v", err)
	}

	// While no operator runs: the launches flipped, and a pin signed as
	// the release before did.
	flip(t, ns, "cold", calibanv1alpha1.LaunchWarm)
	flip(t, ns, "warm", calibanv1alpha1.LaunchCold)
	signedV1(t, ns, "earlier", key)

	second := startOperator(t, "after", ns, config.EnvPinKeySecret+"="+key, config.EnvResyncSeconds+"=1")
	// Until every task was synced three times over.
	framework.Eventually(t, time.Minute, func() error {
		m, err := second.Metrics("caliban_controller_syncs_total")
		if err != nil {
			return err
		}
		want := float64(3 * len(tasks))
		if n, _ := m.Sum("caliban_controller_syncs_total", map[string]string{"controller": calibanoperator.TaskControllerName, "result": "success"}); n < want {
			return fmt.Errorf("the restarted operator ran %v successful task syncs, want at least %v", n, want)
		}
		return nil
	})
	// untouched checks that no child changed, none was made, and the
	// restarted operator wrote none.
	untouched := func(when string) {
		t.Helper()
		for _, name := range tasks {
			now := look(name)
			now.launch = before[name].launch
			if want := before[name]; now.sandbox != want.sandbox || now.generation != want.generation || now.pod != want.pod ||
				!apiequality.Semantic.DeepEqual(now.policy, want.policy) {
				t.Errorf("%s: task %s has Sandbox %s (generation %d), pod %s, policy %+v; want them untouched: %s (%d), %s, %+v", when, name,
					now.sandbox, now.generation, now.pod, now.policy, want.sandbox, want.generation, want.pod, want.policy)
			}
		}
		for name, what := range map[string]func() error{
			"a SandboxClaim for the cold task": func() error {
				_, err := cluster.Caliban.ExtensionsV1beta1().SandboxClaims(ns).Get(ctx, builders.ClaimName("cold"), metav1.GetOptions{})
				return err
			},
			"a SandboxClaim for the task pinned v1": func() error {
				_, err := cluster.Caliban.ExtensionsV1beta1().SandboxClaims(ns).Get(ctx, builders.ClaimName("earlier"), metav1.GetOptions{})
				return err
			},
			"a Sandbox of its own for the warm task": func() error {
				_, err := cluster.Dynamic.Resource(sandboxGVR).Namespace(ns).Get(ctx, builders.SandboxName("warm"), metav1.GetOptions{})
				return err
			},
		} {
			if err := what(); !apierrors.IsNotFound(err) {
				t.Errorf("%s: %s (%v)", when, name, err)
			}
		}
		for _, resource := range []string{builders.SandboxResource, "sandboxclaims", "networkpolicies", "serviceaccounts"} {
			if writes := second.writesTo(t, ns, resource); len(writes) > 0 {
				t.Errorf("%s: the restarted operator wrote %s %v", when, resource, writes)
			}
		}
	}
	untouched("after the restart, with two launches flipped")
	notTrusted := func(name string) {
		t.Helper()
		framework.Eventually(t, time.Minute, func() error {
			task := getTask(t, ns, name)
			ready := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady)
			if task.Status.Phase != calibanv1alpha1.TaskFailed || ready == nil || ready.Reason != reasonLaunchNotTrusted {
				return fmt.Errorf("task %s is %s, Ready %+v; want Failed, %s", name, task.Status.Phase, ready, reasonLaunchNotTrusted)
			}
			return nil
		})
	}
	notTrusted("cold")
	notTrusted("warm")
	if task := getTask(t, ns, "earlier"); task.Status.Phase != calibanv1alpha1.TaskRunning || !strings.HasPrefix(task.Status.PinSignature, "v1:") {
		t.Errorf("the task pinned v1 is %s, signed %q; want Running, still v1", task.Status.Phase, task.Status.PinSignature)
	}

	// Pinned v1, and flipped under a running operator.
	flip(t, ns, "earlier", calibanv1alpha1.LaunchWarm)
	notTrusted("earlier")
	time.Sleep(3 * time.Second) // three resyncs more

	untouched("with the launches flipped")

	for _, name := range tasks {
		flip(t, ns, name, before[name].launch)
	}
	for _, name := range tasks {
		framework.WaitForPhase(t, cluster.Caliban, ns, name, calibanv1alpha1.TaskRunning, builders.ReasonRunning, startTimeout)
	}
	time.Sleep(3 * time.Second) // three resyncs more
	// The restart's caches took their verdicts on the children against the
	// flipped launches; put back, they are taken again, and nothing is
	// applied.
	untouched("with the launches put back")
	if refused := second.refusedWrites(t, ns); len(refused) > 0 {
		t.Errorf("the apiserver refused writes of the restarted operator: %v", refused)
	}
}

// flip sets the type of the task's launch, as a writer of
// calibantasks/status would: a forced apply of its own.
func flip(t *testing.T, ns, name string, typ calibanv1alpha1.LaunchType) {
	t.Helper()
	applyStatus(t, ns, name, "status-writer", map[string]any{"launch": map[string]any{"type": string(typ)}})
}

// signedV1 gives the task's pin the signature the release before signed
// launches wrote: "v1:" and an HMAC-SHA256, under the operator's key, of
// the task's UID and the pin's JSON.
func signedV1(t *testing.T, ns, name, keySecret string) {
	t.Helper()
	secret, err := cluster.Kube.CoreV1().Secrets(framework.OperatorNamespace).Get(ctx, keySecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	task := getTask(t, ns, name)
	pin, err := json.Marshal(task.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, secret.Data[calibanoperator.PinKeyDataKey])
	mac.Write([]byte(task.UID))
	mac.Write([]byte{0})
	mac.Write(pin)
	body, err := json.Marshal(map[string]any{"status": map[string]any{"pinSignature": "v1:" + base64.RawStdEncoding.EncodeToString(mac.Sum(nil))}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Patch(ctx, name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: "earlier-release"}, "status"); err != nil {
		t.Fatalf("writing the v1 signature of %s: %v", name, err)
	}
}

// applyStatus force-applies status to the task's status subresource as
// field manager manager.
func applyStatus(t *testing.T, ns, name, manager string, status map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"apiVersion": calibanv1alpha1.SchemeGroupVersion.String(), "kind": "CalibanTask",
		"metadata": map[string]any{"name": name}, "status": status,
	})
	if err != nil {
		t.Fatal(err)
	}
	force := true
	if _, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Patch(ctx, name, types.ApplyYAMLPatchType, body,
		metav1.PatchOptions{FieldManager: manager, Force: &force}, "status"); err != nil {
		t.Fatalf("writing the status of %s (the test needs to): %v", name, err)
	}
}
