// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// ReasonPinNotTrusted: the task's pin carries no valid signature of this
// operator, so someone else wrote it through the status subresource.
const ReasonPinNotTrusted = "PinNotTrusted"

// PinKey is the operator's key for signing pins, and when it came to be:
// pins of tasks created before then were written by an operator that did
// not sign (docs/adr/0024-pins-the-operator-wrote.md).
type PinKey struct {
	Key   []byte
	Since time.Time
}

// pinSignatureVersion prefixes every signature, so that another scheme
// can be told apart from this one later.
const pinSignatureVersion = "v1:"

// SignPin is the pin's signature for the task with this UID: an
// HMAC-SHA256 under key over the UID and the pin's canonical JSON. The UID
// binds it to one task: a signed pin copied onto another task does not
// verify there.
func SignPin(key []byte, uid types.UID, pin *calibanv1alpha1.ResolvedWorkspace) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(uid))
	mac.Write([]byte{0})
	mac.Write(canonicalPin(pin))
	return pinSignatureVersion + base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

// canonicalPin is the pin's JSON as the apiserver stores it (storedPin):
// the signature must verify on what it stores. Nothing else is normalised,
// so every difference in meaning (an empty enabledPlugins list against
// none) is a difference in the signature.
func canonicalPin(pin *calibanv1alpha1.ResolvedWorkspace) []byte {
	raw, err := json.Marshal(storedPin(pin))
	if err != nil {
		// A struct of strings, numbers, booleans and lists of them always
		// marshals; this only keeps the function total.
		return []byte(fmt.Sprintf("%#v", pin))
	}
	return raw
}

// storedPin is the pin with the defaults the CRD's schema gives
// status.resolvedWorkspace applied (egress.allow, sources[].ref;
// allowUnattended false encodes as absent either way), which the apiserver
// applies to what the operator sends. test/codegen checks that these are
// all the schema's defaults. pin itself is left as it is.
func storedPin(pin *calibanv1alpha1.ResolvedWorkspace) *calibanv1alpha1.ResolvedWorkspace {
	if pin == nil {
		return nil
	}
	needs := pin.Egress != nil && pin.Egress.Allow == nil
	for i := range pin.Sources {
		needs = needs || pin.Sources[i].Ref == ""
	}
	if !needs {
		return pin
	}
	pin = pin.DeepCopy()
	if pin.Egress != nil && pin.Egress.Allow == nil {
		pin.Egress.Allow = []calibanv1alpha1.EgressRule{}
	}
	for i := range pin.Sources {
		if pin.Sources[i].Ref == "" {
			pin.Sources[i].Ref = DefaultSourceRef
		}
	}
	return pin
}

// DefaultSourceRef is the schema's default of a source's ref.
const DefaultSourceRef = "main"

// UntrustedPin returns why a pinned task's pin must not be run, or nil.
// The pin is trusted when its signature verifies under key, or when the
// task was created before the key existed (or in the same second): such a task was pinned by an
// operator that did not sign yet. Everything else was written by someone
// who may write the status subresource, not by this operator, and runs
// nothing.
func UntrustedPin(task *calibanv1alpha1.CalibanTask, key PinKey) *Failure {
	pin := task.Status.ResolvedWorkspace
	// Both times are in whole seconds: a task of the key's own second is
	// given the benefit of the doubt, rather than fail a task an earlier
	// release pinned as the upgrade began.
	if pin == nil || !task.CreationTimestamp.Time.After(key.Since) {
		return nil
	}
	want := SignPin(key.Key, task.UID, pin)
	if hmac.Equal([]byte(want), []byte(task.Status.PinSignature)) {
		return nil
	}
	why := "its status.pinSignature does not match it"
	if task.Status.PinSignature == "" {
		why = "it carries no status.pinSignature"
	}
	return &Failure{Reason: ReasonPinNotTrusted, Message: fmt.Sprintf(
		"status.resolvedWorkspace was not written by caliban-operator (%s): nothing is run from it; delete the task and create it again", why)}
}
