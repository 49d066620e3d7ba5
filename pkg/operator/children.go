package operator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// AnnotationAppliedHash records a hash of the Sandbox the operator last
// applied. Together with a check that every field it applies still has the
// applied value, it lets a steady-state sync skip the apply, and still
// notices a field the operator stopped setting (which a subset check alone
// cannot see).
const AnnotationAppliedHash = "caliban.caliban-ai.dev/applied-hash"

var sandboxGVR = sandboxv1beta1.SchemeGroupVersion.WithResource(builders.SandboxResource)

var applyOptions = metav1.ApplyOptions{FieldManager: builders.FieldManager, Force: true}

// serviceAccountUpToDate reports whether the fields the operator owns on the
// live ServiceAccount are exactly the desired ones.
func serviceAccountUpToDate(live *corev1.ServiceAccount, desired *corev1ac.ServiceAccountApplyConfiguration) bool {
	if live == nil {
		return false
	}
	owned, err := corev1ac.ExtractServiceAccount(live, builders.FieldManager)
	return err == nil && apiequality.Semantic.DeepEqual(owned, desired)
}

// networkPolicyUpToDate is serviceAccountUpToDate for the NetworkPolicy.
func networkPolicyUpToDate(live *networkingv1.NetworkPolicy, desired *networkingv1ac.NetworkPolicyApplyConfiguration) bool {
	if live == nil {
		return false
	}
	owned, err := networkingv1ac.ExtractNetworkPolicy(live, builders.FieldManager)
	return err == nil && apiequality.Semantic.DeepEqual(owned, desired)
}

// stampSandbox adds the applied-hash annotation to the desired Sandbox.
func stampSandbox(desired *unstructured.Unstructured) error {
	body, err := json.Marshal(desired.Object)
	if err != nil {
		return fmt.Errorf("hashing Sandbox %s: %w", desired.GetName(), err)
	}
	sum := sha256.Sum256(body)
	ann := desired.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationAppliedHash] = hex.EncodeToString(sum[:16])
	desired.SetAnnotations(ann)
	return nil
}

// sandboxUpToDate reports whether the live Sandbox carries the desired
// (stamped) one: the same applied hash, and every desired field with its
// desired value. Fields others set (agent-sandbox's status, another
// manager's annotation) do not matter.
func sandboxUpToDate(live, desired *unstructured.Unstructured) bool {
	if live == nil {
		return false
	}
	if live.GetAnnotations()[AnnotationAppliedHash] != desired.GetAnnotations()[AnnotationAppliedHash] {
		return false
	}
	return contains(live.Object, desired.Object)
}

// contains reports whether want is contained in got: maps by key (got may
// have more), lists element by element (same length), scalars equal.
func contains(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !contains(gv, wv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !contains(g[i], w[i]) {
				return false
			}
		}
		return true
	default:
		gn, gok := number(got)
		wn, wok := number(want)
		if gok && wok {
			return gn == wn
		}
		return reflect.DeepEqual(got, want)
	}
}

// number reads the numeric types unstructured content can hold, from the
// decoder (int64, float64) or from a typed conversion (int, int32).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// applySandbox is the Sandbox write through the dynamic client.
func (c *TaskController) applySandbox(ctx context.Context, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return c.dynamic.Resource(sandboxGVR).Namespace(desired.GetNamespace()).
		Apply(ctx, desired.GetName(), desired, applyOptions)
}
