// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	core "k8s.io/client-go/testing"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// earlierFingerprint stands for the rendering of an operator version
// before the task-UID label.
const earlierFingerprint = "an-earlier-version"

// byNameLabels are the labels a NetworkPolicy of such a version selected a
// task's pod by.
func byNameLabels(tk *calibanv1alpha1.CalibanTask) map[string]string {
	l := builders.TaskLabels(tk)
	delete(l, builders.LabelTaskUID)
	return l
}

// earlierChildren turns the Running task's Sandbox and NetworkPolicy into
// what an operator version before the task-UID label left: rendered under
// another fingerprint, the policy applied by the operator selecting the
// pod by name, the pod template without the label. It returns the policy.
func (f *fixture) earlierChildren(tk *calibanv1alpha1.CalibanTask) *networkingv1.NetworkPolicy {
	f.t.Helper()
	name := builders.SandboxName(tk.Name)
	f.mu.Lock()
	sb := f.servedSandboxes[tk.Namespace+"/"+name].DeepCopy()
	f.mu.Unlock()
	delete(sb.Spec.PodTemplate.Metadata.Labels, builders.LabelTaskUID)
	sb.Annotations[builders.AnnotationRenderedBy] = earlierFingerprint
	f.cacheServedSandbox(sb)

	_, live := f.servedChildren(tk)
	spec := live.Spec.DeepCopy()
	spec.PodSelector = metav1.LabelSelector{MatchLabels: byNameLabels(tk)}
	body, err := json.Marshal(spec)
	if err != nil {
		f.t.Fatal(err)
	}
	specAC := &networkingv1ac.NetworkPolicySpecApplyConfiguration{}
	if err := json.Unmarshal(body, specAC); err != nil {
		f.t.Fatal(err)
	}
	owner := live.OwnerReferences[0]
	np := networkingv1ac.NetworkPolicy(live.Name, live.Namespace).
		WithLabels(byNameLabels(tk)).
		WithAnnotations(map[string]string{builders.AnnotationRenderedBy: earlierFingerprint, builders.AnnotationAppliedHash: "earlier"}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(owner.APIVersion).WithKind(owner.Kind).WithName(owner.Name).
			WithUID(owner.UID).WithController(true).WithBlockOwnerDeletion(true)).
		WithSpec(specAC)
	policies := f.kube.NetworkingV1().NetworkPolicies(tk.Namespace)
	if err := policies.Delete(f.ctx, live.Name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
	applied, err := policies.Apply(f.ctx, np, metav1.ApplyOptions{FieldManager: builders.FieldManager, Force: true})
	if err != nil {
		f.t.Fatal(err)
	}
	f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), applied)
	return applied
}

// cacheServedSandbox makes sb the Sandbox the fixture serves and caches.
func (f *fixture) cacheServedSandbox(sb *sandboxv1beta1.Sandbox) {
	f.t.Helper()
	f.mu.Lock()
	f.servedSandboxes[sb.Namespace+"/"+sb.Name] = sb.DeepCopy()
	f.mu.Unlock()
	f.cache(f.sandboxInformer, sb)
}

// agentPod is the pod agent-sandbox runs for the task's Sandbox, labelled
// from the Sandbox's pod template as it is now.
func (f *fixture) agentPod(tk *calibanv1alpha1.CalibanTask) {
	f.t.Helper()
	name := builders.SandboxName(tk.Name)
	f.mu.Lock()
	sb := f.servedSandboxes[tk.Namespace+"/"+name].DeepCopy()
	f.mu.Unlock()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tk.Namespace, Labels: sb.Spec.PodTemplate.Metadata.Labels}}
	pods := f.kube.CoreV1().Pods(tk.Namespace)
	if _, err := pods.Update(f.ctx, pod, metav1.UpdateOptions{}); err != nil {
		if _, err := pods.Create(f.ctx, pod, metav1.CreateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}

// The relabelled Sandbox, as agent-sandbox's watch brings it back.
func (f *fixture) sandboxAsApplied(tk *calibanv1alpha1.CalibanTask) {
	f.t.Helper()
	applied := watchedSandbox(f.t, f.lastSandboxApply())
	f.mu.Lock()
	sb := f.servedSandboxes[tk.Namespace+"/"+applied.Name].DeepCopy()
	f.mu.Unlock()
	sb.Spec, sb.Annotations, sb.Generation = applied.Spec, applied.Annotations, sb.Generation+1
	f.cacheServedSandbox(sb)
}

// A task whose children an operator version before the task-UID label
// made, selecting its pod by name: its Sandbox's pod template gains the
// label and nothing else of its spec changes; its NetworkPolicy keeps
// selecting by name while the running pod lacks the label, and the sync
// looks again soon; once the pod carries it, the policy selects by the
// task's UID, its rules and rendering as they were, and then nothing is
// written.
func TestAPolicyMadeBeforeTheUIDLabelMovesToItOnlyOnceThePodCarriesIt(t *testing.T) {
	f := lifecycleFixture(t)
	c, tk := f.runningTask()
	old := f.earlierChildren(tk)
	f.mu.Lock()
	oldSpec := f.servedSandboxes[tk.Namespace+"/"+builders.SandboxName(tk.Name)].Spec.DeepCopy()
	f.mu.Unlock()
	f.agentPod(tk)

	f.resetActions()
	after := f.mustSync(c, tk)
	if diff := cmp.Diff([]string{"patch sandboxes fix-bug-sbx"}, f.writes()); diff != "" {
		t.Errorf("first pass: writes (-want +got):\n%s", diff)
	}
	if after <= 0 || after > reselectRequeue {
		t.Errorf("first pass: look again after %v, want within %v (the pod's label brings no event)", after, reselectRequeue)
	}
	relabelled := watchedSandbox(t, f.lastSandboxApply())
	if got := relabelled.Spec.PodTemplate.Metadata.Labels[builders.LabelTaskUID]; got != string(tk.UID) {
		t.Errorf("the Sandbox's pod template carries %s=%q, want the task's UID", builders.LabelTaskUID, got)
	}
	wantSpec := oldSpec.DeepCopy()
	wantSpec.PodTemplate.Metadata.Labels[builders.LabelTaskUID] = string(tk.UID)
	wantSpec.OperatingMode = sandboxv1beta1.OperatingModeRunning
	if diff := cmp.Diff(wantSpec, &relabelled.Spec); diff != "" {
		t.Errorf("the kept Sandbox's spec changed beyond the label (-want +got):\n%s", diff)
	}

	// agent-sandbox has not relabelled the pod yet.
	f.sandboxAsApplied(tk)
	f.resetActions()
	if after := f.mustSync(c, tk); after <= 0 || after > reselectRequeue {
		t.Errorf("the pod unlabelled: look again after %v, want within %v", after, reselectRequeue)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("the pod unlabelled: writes %v, want none (the policy must not select by a label no pod carries)", w)
	}

	// Now it has.
	f.agentPod(tk)
	f.resetActions()
	f.mustSync(c, tk)
	if diff := cmp.Diff([]string{"patch networkpolicies fix-bug-netpol"}, f.writes()); diff != "" {
		t.Errorf("the pod labelled: writes (-want +got):\n%s", diff)
	}
	_, moved := f.servedChildren(tk)
	if diff := cmp.Diff(map[string]string{builders.LabelTaskUID: string(tk.UID)}, moved.Spec.PodSelector.MatchLabels); diff != "" {
		t.Errorf("the policy's pod selector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(old.Spec.Ingress, moved.Spec.Ingress); diff != "" {
		t.Errorf("the policy's ingress changed (-was +now):\n%s", diff)
	}
	if diff := cmp.Diff(old.Spec.Egress, moved.Spec.Egress); diff != "" {
		t.Errorf("the policy's egress changed (-was +now):\n%s", diff)
	}
	if got := moved.Annotations[builders.AnnotationRenderedBy]; got != earlierFingerprint {
		t.Errorf("the policy is marked rendered by %q, want %q still (its rules are that rendering's)", got, earlierFingerprint)
	}

	f.cache(f.kubeInformers.Networking().V1().NetworkPolicies().Informer(), moved)
	f.resetActions()
	if after := f.mustSync(c, tk); after != 0 {
		t.Errorf("moved: look again after %v, want no time", after)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("moved: writes %v, want none", w)
	}
}

// A suspended task of that version has no pod: its policy moves as soon as
// the Sandbox's pod template gives the next pod the label.
func TestAPolicyOfATaskWithoutAPodMovesOnceItsSandboxLabelsTheNextOne(t *testing.T) {
	f := lifecycleFixture(t)
	c, tk := f.runningTask()
	f.earlierChildren(tk)
	// No pod.
	f.resetActions()
	f.mustSync(c, tk)
	if diff := cmp.Diff([]string{"patch sandboxes fix-bug-sbx"}, f.writes()); diff != "" {
		t.Errorf("first pass: writes (-want +got):\n%s", diff)
	}
	f.sandboxAsApplied(tk)
	f.resetActions()
	if after := f.mustSync(c, tk); after != 0 {
		t.Errorf("after the relabel: look again after %v, want no time", after)
	}
	if diff := cmp.Diff([]string{"patch networkpolicies fix-bug-netpol"}, f.writes()); diff != "" {
		t.Errorf("after the relabel: writes (-want +got):\n%s", diff)
	}
	if _, moved := f.servedChildren(tk); moved.Spec.PodSelector.MatchLabels[builders.LabelTaskUID] != string(tk.UID) {
		t.Errorf("the policy selects %v, want the task's UID", moved.Spec.PodSelector.MatchLabels)
	}
}

// A pod the operator may not read (a role without get on pods) keeps the
// policy as it is, and the rest of the sync goes on: the Sandbox is still
// relabelled, and the sync is no failure.
func TestAPodTheOperatorMayNotReadKeepsThePolicyAndFailsNothing(t *testing.T) {
	f := lifecycleFixture(t)
	c, tk := f.runningTask()
	f.earlierChildren(tk)
	f.kube.PrependReactor("get", "pods", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), builders.SandboxName(tk.Name), errors.New("no get on pods"))
	})
	f.resetActions()
	if after := f.mustSync(c, tk); after <= 0 || after > reselectRequeue {
		t.Errorf("look again after %v, want within %v", after, reselectRequeue)
	}
	if diff := cmp.Diff([]string{"patch sandboxes fix-bug-sbx"}, f.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if _, np := f.servedChildren(tk); !builders.SelectsPodByName(np) {
		t.Errorf("the policy selects %v, want the name labels still", np.Spec.PodSelector.MatchLabels)
	}
}
