// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
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

// Signature versions prefix every signature. v1 signed the UID and the
// pin; v2, written since the launch is signed too, signs the UID, the pin
// and the type of the launch decided with it. Both verify.
const (
	pinSignatureV1 = "v1:"
	pinSignatureV2 = "v2:"
)

// SignPin is the pin's signature for the task with this UID, written with
// the pin and the launch decided with it: "v2:" and an HMAC-SHA256 under
// key over the UID, the pin's canonical JSON and the launch's type. The
// UID binds it to one task: a signed pin copied onto another task does not
// verify there. The launch's type binds the path the task's Sandbox takes
// (a claim on a warm pool, or a Sandbox of its own) to the pin: a launch
// flipped afterwards does not verify either.
func SignPin(key []byte, uid types.UID, pin *calibanv1alpha1.ResolvedWorkspace, launch calibanv1alpha1.LaunchType) string {
	return pinSignatureV2 + pinMAC(key, uid, pin, []byte(launch))
}

// signPinV1 is the signature of a pin written before the launch was
// signed: the UID and the pin alone.
func signPinV1(key []byte, uid types.UID, pin *calibanv1alpha1.ResolvedWorkspace) string {
	return pinSignatureV1 + pinMAC(key, uid, pin)
}

// pinMAC is the base64 HMAC-SHA256 under key of the UID, the pin's
// canonical JSON and more, each part after a NUL (which neither a UID nor
// JSON holds).
func pinMAC(key []byte, uid types.UID, pin *calibanv1alpha1.ResolvedWorkspace, more ...[]byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(uid))
	mac.Write([]byte{0})
	mac.Write(canonicalPin(pin))
	for _, m := range more {
		mac.Write([]byte{0})
		mac.Write(m)
	}
	return base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
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
// The pin is trusted when its signature verifies under key (v2 with either
// launch type: whether the launch is the one signed is UntrustedLaunch's
// question), or when the task was created before the key existed (or in
// the same second): such a task was pinned by an operator that did not
// sign yet. Everything else was written by someone who may write the
// status subresource, not by this operator, and runs nothing.
func UntrustedPin(task *calibanv1alpha1.CalibanTask, key PinKey) *Failure {
	pin := task.Status.ResolvedWorkspace
	if pin == nil || !heldToSignature(task, key) {
		return nil
	}
	if _, ok := signedLaunch(task, key); ok {
		return nil
	}
	why := "its status.pinSignature does not match it"
	if task.Status.PinSignature == "" {
		why = "it carries no status.pinSignature"
	}
	return &Failure{Reason: ReasonPinNotTrusted, Message: fmt.Sprintf(
		"status.resolvedWorkspace was not written by caliban-operator (%s): nothing is run from it; delete the task and create it again", why)}
}

// heldToSignature reports that the task was created after the key, so its
// pin must carry the key's signature. Both times are in whole seconds: a
// task of the key's own second is given the benefit of the doubt, rather
// than fail a task an earlier release pinned as the upgrade began.
func heldToSignature(task *calibanv1alpha1.CalibanTask, key PinKey) bool {
	return task.CreationTimestamp.Time.After(key.Since)
}

// signedLaunch says whether the task's pin signature verifies under key,
// and for a v2 signature the launch type it was signed with ("" for a v1
// signature, which signed none).
func signedLaunch(task *calibanv1alpha1.CalibanTask, key PinKey) (calibanv1alpha1.LaunchType, bool) {
	pin, sig := task.Status.ResolvedWorkspace, []byte(task.Status.PinSignature)
	if !strings.HasPrefix(task.Status.PinSignature, pinSignatureV2) {
		return "", hmac.Equal([]byte(signPinV1(key.Key, task.UID, pin)), sig)
	}
	// The stored type first: a verified launch costs one HMAC.
	for _, t := range []calibanv1alpha1.LaunchType{taskLaunchType(task), calibanv1alpha1.LaunchWarm, calibanv1alpha1.LaunchCold} {
		if hmac.Equal([]byte(SignPin(key.Key, task.UID, pin, t)), sig) {
			return t, true
		}
	}
	return "", false
}

// ReasonLaunchNotTrusted: the task's status.launch is not the launch the
// operator decided with its pin, so someone else changed it through the
// status subresource.
const ReasonLaunchNotTrusted = "LaunchNotTrusted"

// taskLaunchType is the type of the task's launch as its sync follows it:
// Warm, or Cold (also for a task without a launch: pinned before warm
// start, it has a Sandbox of its own).
func taskLaunchType(task *calibanv1alpha1.CalibanTask) calibanv1alpha1.LaunchType {
	if IsWarm(task) {
		return calibanv1alpha1.LaunchWarm
	}
	return calibanv1alpha1.LaunchCold
}

// LaunchChildren is what the caches show of the path a task took: whether
// it controls a SandboxClaim <task>-claim that is not being deleted, and
// a Sandbox <task>-sbx of its own. Only the operator makes either for a
// task, and nobody can make a task their controller but the one who
// creates them.
type LaunchChildren struct {
	Claim, Sandbox bool
}

// UntrustedLaunch returns why a pinned task's launch must not be followed,
// or nil. It is asked of a task whose pin is trusted (UntrustedPin). The
// launch decides whether the task gets a claim or a Sandbox of its own,
// and which pod its NetworkPolicy selects: followed after someone flipped
// it, the operator would make a claim for a running cold task and move its
// policy to the claim's pod, leaving the running one selected by no policy,
// or start a second Sandbox beside a warm one. A v2 signature verifies the
// launch's type with the pin. A pin signed v1 (or none, older than the
// key) signed no launch: its launch is what the task's children show, a
// claim (Warm) or a Sandbox of its own (Cold), and one that shows neither
// yet is taken as stored. The claim's name and UID are never trusted as
// stored: the sync replaces them with the claim the task controls.
func UntrustedLaunch(task *calibanv1alpha1.CalibanTask, key PinKey, children LaunchChildren) *Failure {
	if task.Status.ResolvedWorkspace == nil {
		return nil
	}
	stored := taskLaunchType(task)
	if strings.HasPrefix(task.Status.PinSignature, pinSignatureV2) {
		// A v2 signature that verifies is the operator's, whenever the
		// task was created (a task admitted before the key and relaunched
		// since is signed too).
		signed, ok := signedLaunch(task, key)
		switch {
		case ok && signed == stored:
			return nil
		case ok:
			return launchNotTrusted(task, fmt.Sprintf("caliban-operator signed %s with the pin", signed))
		case heldToSignature(task, key):
			// The pin does not verify: UntrustedPin's to say.
			return nil
		}
		// Older than the key and signed under another: the key was made
		// again, and the task is trusted as stored, as its pin is.
	}
	var shown calibanv1alpha1.LaunchType
	why := ""
	switch {
	case children.Claim && children.Sandbox:
		return launchNotTrusted(task, fmt.Sprintf("the task has both SandboxClaim %s and Sandbox %s", ClaimName(task.Name), SandboxName(task.Name)))
	case children.Claim:
		shown, why = calibanv1alpha1.LaunchWarm, "the task's SandboxClaim "+ClaimName(task.Name)
	case children.Sandbox:
		shown, why = calibanv1alpha1.LaunchCold, "the task's own Sandbox "+SandboxName(task.Name)
	}
	if shown == "" || shown == stored {
		return nil
	}
	return launchNotTrusted(task, fmt.Sprintf("the pin was signed before launches were, and %s says %s", why, shown))
}

func launchNotTrusted(task *calibanv1alpha1.CalibanTask, why string) *Failure {
	return &Failure{Reason: ReasonLaunchNotTrusted, Message: fmt.Sprintf(
		"status.launch.type %s is not the launch caliban-operator decided (%s): nothing new is run from it, and the Sandbox the task has is left as it is; "+
			"put status.launch back, or delete the task and create it again", taskLaunchType(task), why)}
}
