// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package freshness

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	sandboxac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/sandbox/v1beta1"
)

// AnnotationAppliedHash records, on every child, a hash of what the operator
// last applied to it. Together with a check that every value it applies is
// still in place (holds), it lets a steady-state sync skip the apply, and
// still notices a field the operator stopped setting, which a containment
// check alone cannot see.
const AnnotationAppliedHash = "caliban.caliban-ai.dev/applied-hash"

// AnnotationRenderedBy records, on a Sandbox and a NetworkPolicy, the
// fingerprint of the settings and operator version that rendered it
// (builders.RenderingFingerprint). A child rendered by another one is kept
// as it is (ADR 0015): the operator never re-renders what a running or
// resumed agent relies on because its own settings or version changed.
const AnnotationRenderedBy = "caliban.caliban-ai.dev/rendered-by"

// HashNone is the hash of a child a task does not want: a warm task has
// no ServiceAccount or Sandbox of its own, and no NetworkPolicy before it
// knows its claim's UID. No object carries it.
const HashNone = "none"

// Desired are a task's three desired children, rendered and stamped with
// their applied hash (and, for the NetworkPolicy and the Sandbox, the
// rendering's fingerprint), with their hashes. A child the task does not
// want is nil, its hash HashNone. The sync applies them and
// the transform checks the cache against them, so both agree on what "up
// to date" means.
type Desired struct {
	ServiceAccount *corev1ac.ServiceAccountApplyConfiguration
	NetworkPolicy  *networkingv1ac.NetworkPolicyApplyConfiguration
	Sandbox        *sandboxac.SandboxApplyConfiguration
	Hashes         Hashes
}

// Want is what one sync wants of a task's children: their hashes, from the
// memo when the task has not changed since they were taken, and the
// children themselves, rendered only when something has to be applied.
type Want struct {
	Hashes
	tracker  *Tracker
	task     *calibanv1alpha1.CalibanTask
	pin      *calibanv1alpha1.ResolvedWorkspace
	rendered *Desired
}

// Want is what task wants under pin (its own pin, or the one about to be
// written).
func (t *Tracker) Want(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace) (*Want, error) {
	w := &Want{tracker: t, task: task, pin: pin}
	// The memo is keyed by the task alone: it serves only the task's own pin.
	memoized := pin == task.Status.ResolvedWorkspace
	if memoized {
		if h, ok := t.memo.get(task); ok {
			w.Hashes = h
			return w, nil
		}
	}
	d, err := t.render(task, pin)
	if err != nil {
		return nil, err
	}
	if memoized {
		t.memo.recordAll(task, d.Hashes)
	}
	w.Hashes, w.rendered = d.Hashes, d
	return w, nil
}

// Render is the desired children, rendered once per Want.
func (w *Want) Render() (*Desired, error) {
	if w.rendered == nil {
		d, err := w.tracker.render(w.task, w.pin)
		if err != nil {
			return nil, err
		}
		w.rendered = d
	}
	return w.rendered, nil
}

// Rendered reports whether the Want had to render its children.
func (w *Want) Rendered() bool { return w.rendered != nil }

func (t *Tracker) render(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace) (*Desired, error) {
	d := &Desired{Hashes: Hashes{ResourceVersion: task.ResourceVersion}}
	var err error
	if d.ServiceAccount, d.Hashes.ServiceAccount, err = desiredServiceAccount(task, ""); err != nil {
		return nil, err
	}
	if d.NetworkPolicy, d.Hashes.NetworkPolicy, err = t.desiredNetworkPolicy(task, pin, ""); err != nil {
		return nil, err
	}
	if d.Sandbox, d.Hashes.Sandbox, err = t.desiredSandbox(task, pin, ""); err != nil {
		return nil, err
	}
	return d, nil
}

// desiredServiceAccount is the ServiceAccount task wants, stamped with its
// applied hash: known when the memo has it, taken otherwise.
func desiredServiceAccount(task *calibanv1alpha1.CalibanTask, known string) (*corev1ac.ServiceAccountApplyConfiguration, string, error) {
	if builders.IsWarm(task) {
		// A warm pod runs as its pool's ServiceAccount.
		return nil, HashNone, nil
	}
	sa := builders.BuildServiceAccount(task)
	return stamp(ServiceAccount, *sa.Name, sa, known, map[string]string{})
}

// desiredNetworkPolicy is desiredServiceAccount for the NetworkPolicy, also
// stamped with the rendering's fingerprint.
func (t *Tracker) desiredNetworkPolicy(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, known string) (*networkingv1ac.NetworkPolicyApplyConfiguration, string, error) {
	np := builders.BuildNetworkPolicy(task, pin, t.settings)
	if builders.IsWarm(task) {
		// The pod its claim holds carries the claim's UID; until the task
		// records it, the pool's isolation policy cuts the pod off.
		claim := task.Status.Launch.Claim
		if claim == nil {
			return nil, HashNone, nil
		}
		np = builders.BuildWarmNetworkPolicy(task, pin, t.settings, string(claim.UID))
	}
	return stamp(NetworkPolicy, *np.Name, np, known, map[string]string{AnnotationRenderedBy: t.fingerprint})
}

// desiredSandbox is desiredNetworkPolicy for the Sandbox.
func (t *Tracker) desiredSandbox(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, known string) (*sandboxac.SandboxApplyConfiguration, string, error) {
	if builders.IsWarm(task) {
		// The pool rendered it; the task applies only its labels and mode
		// (builders.BuildClaimedSandbox).
		return nil, HashNone, nil
	}
	sb := builders.BuildSandbox(task, pin, t.settings)
	return stamp(Sandbox, *sb.Name, sb, known, map[string]string{AnnotationRenderedBy: t.fingerprint})
}

// stamp adds annotations and the applied hash of child (known, when the
// memo had it) to child's annotations.
func stamp[T interface{ WithAnnotations(map[string]string) T }](kind Kind, name string, child T, known string, annotations map[string]string) (T, string, error) {
	hash, err := knownOrHash(known, child)
	if err != nil {
		var none T
		return none, "", fmt.Errorf("rendering %s %s: %w", kind, name, err)
	}
	annotations[AnnotationAppliedHash] = hash
	return child.WithAnnotations(annotations), hash, nil
}

// knownOrHash is the applied hash of desired: known, when the memo had it.
func knownOrHash(known string, desired any) (string, error) {
	if known != "" {
		return known, nil
	}
	return AppliedHash(desired)
}

// AppliedHash is the applied-hash annotation's value for a desired object,
// taken before the annotation is added.
func AppliedHash(desired any) (string, error) {
	body, err := json.Marshal(desired)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16]), nil
}

// SandboxOver is the Sandbox to apply over live, the task's Sandbox as the
// server has it. One rendered by this operator's settings and version gets
// the rendering, with live's volumeClaimTemplates (equal unless the CRD
// defaulted something in them, which must not count as a change): what
// agent-sandbox keeps immutable comes from the Sandbox as it is. A kept one
// (ADR 0015) gets its own spec back: the apply then changes nothing but
// what the caller sets (the operatingMode), and claims nothing the operator
// did not own, its labels and annotations being the operator's own keys.
func (w *Want) SandboxOver(live *sandboxv1beta1.Sandbox) (*sandboxac.SandboxApplyConfiguration, error) {
	liveSpec, err := builders.SandboxSpecApply(&live.Spec)
	if err != nil {
		return nil, fmt.Errorf("encoding Sandbox %s/%s: %w", live.Namespace, live.Name, err)
	}
	if w.tracker.renderedBy(live) == w.tracker.fingerprint {
		d, err := w.Render()
		if err != nil {
			return nil, err
		}
		desired, spec := *d.Sandbox, *d.Sandbox.Spec
		spec.VolumeClaimTemplates = liveSpec.VolumeClaimTemplates
		desired.Spec = &spec
		return &desired, nil
	}
	kept := builders.BuildSandbox(w.task, w.pin, w.tracker.settings)
	kept.Annotations = map[string]string{}
	for _, key := range []string{AnnotationAppliedHash, AnnotationRenderedBy} {
		if v, ok := live.Annotations[key]; ok {
			kept.Annotations[key] = v
		}
	}
	kept.Spec = liveSpec
	return kept, nil
}
