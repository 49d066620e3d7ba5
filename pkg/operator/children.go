package operator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
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

var applyOptions = metav1.ApplyOptions{FieldManager: builders.FieldManager, Force: true}

// appliedHash is the applied-hash annotation's value for a desired object,
// taken before the annotation is added.
func appliedHash(desired any) (string, error) {
	body, err := json.Marshal(desired)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16]), nil
}

// upToDate reports whether a cached child carries the desired one (an
// object of its type or its apply configuration): the same applied hash,
// and every value desired sets. Fields others set
// (agent-sandbox's status, another manager's annotation) do not matter.
func upToDate(live metav1.Object, desired any, hash string) bool {
	return live.GetAnnotations()[AnnotationAppliedHash] == hash && holds(live, desired)
}
