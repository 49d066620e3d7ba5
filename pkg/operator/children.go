package operator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// AnnotationAppliedHash records, on every child, a hash of what the operator
// last applied to it. Together with a check that every value it applies is
// still in place (holds), it lets a steady-state sync skip the apply, and
// still notices a field the operator stopped setting, which a containment
// check alone cannot see.
const AnnotationAppliedHash = "caliban.caliban-ai.dev/applied-hash"

var applyOptions = metav1.ApplyOptions{FieldManager: builders.FieldManager, Force: true}

// appliedHash is the applied-hash annotation's value for a desired object,
// taken before the annotation is added.
func appliedHash(desired any) (string, []byte, error) {
	body, err := json.Marshal(desired)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16]), body, nil
}

// upToDate reports whether a cached child carries the desired one: the same
// applied hash, and every value desired sets. Fields others set
// (agent-sandbox's status, another manager's annotation) do not matter.
func upToDate(live metav1.Object, desired any, hash string) bool {
	return live.GetAnnotations()[AnnotationAppliedHash] == hash && holds(live, desired)
}

// stampedServiceAccount is the desired ServiceAccount with its applied hash,
// and the same object typed, for comparison with the cache.
func stampedServiceAccount(sa *corev1ac.ServiceAccountApplyConfiguration) (*corev1.ServiceAccount, string, error) {
	want := &corev1.ServiceAccount{}
	hash, err := stamp(sa, want)
	sa.WithAnnotations(map[string]string{AnnotationAppliedHash: hash})
	return want, hash, err
}

// stampedNetworkPolicy is stampedServiceAccount for the NetworkPolicy.
func stampedNetworkPolicy(np *networkingv1ac.NetworkPolicyApplyConfiguration) (*networkingv1.NetworkPolicy, string, error) {
	want := &networkingv1.NetworkPolicy{}
	hash, err := stamp(np, want)
	np.WithAnnotations(map[string]string{AnnotationAppliedHash: hash})
	return want, hash, err
}

// stamp hashes an apply configuration and decodes it into typed, which then
// carries the hash annotation too.
func stamp(ac any, typed metav1.Object) (string, error) {
	hash, body, err := appliedHash(ac)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(body, typed); err != nil {
		return "", err
	}
	// The cache's objects carry no type meta (protobuf lists leave it
	// empty), so the comparison must not ask for it.
	if o, ok := typed.(runtime.Object); ok {
		o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	}
	typed.SetAnnotations(withHash(typed.GetAnnotations(), hash))
	return hash, nil
}

// stampSandbox adds the applied-hash annotation to the desired Sandbox.
func stampSandbox(desired *sandboxv1beta1.Sandbox) (string, error) {
	hash, _, err := appliedHash(desired)
	if err != nil {
		return "", fmt.Errorf("hashing Sandbox %s: %w", desired.Name, err)
	}
	desired.Annotations = withHash(desired.Annotations, hash)
	return hash, nil
}

func withHash(ann map[string]string, hash string) map[string]string {
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationAppliedHash] = hash
	return ann
}
