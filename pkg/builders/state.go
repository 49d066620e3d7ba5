// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"fmt"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// State modes of spec.state.mode.
const (
	StateModeRemote = "remote"
	StateModeLocal  = "local"
)

// StateProblem checks a task's spec.state on every reconcile (the schema's
// CEL rules cannot vouch for objects stored before they existed, nor for the
// token Secret). It returns nil when the state is usable, a Failure with
// reason InvalidState when not, and an error when the Secret lookup failed.
func StateProblem(state *calibanv1alpha1.StateSpec, getSecret SecretGetter) (*Failure, error) {
	if state == nil {
		return nil, nil
	}
	fail := func(format string, args ...any) (*Failure, error) {
		return &Failure{Reason: ReasonInvalidState, Message: fmt.Sprintf(format, args...)}, nil
	}
	endpoint := state.GonzaloEndpoint != ""
	switch state.Mode {
	case "", StateModeRemote, StateModeLocal:
	default:
		return fail("state.mode '%s' is not one of: remote, local", state.Mode)
	}
	if state.Mode == StateModeRemote && !endpoint {
		return fail("state.mode remote requires state.gonzaloEndpoint")
	}
	if state.Mode == StateModeLocal && endpoint {
		return fail("state.gonzaloEndpoint is set, but state.mode local never uses it")
	}
	if state.TokenRef == nil {
		return nil, nil
	}
	if !endpoint {
		return fail("state.tokenRef requires remote storage (set state.gonzaloEndpoint)")
	}
	if msg := secretNameProblem(state.TokenRef.SecretName); msg != "" {
		return fail("state.tokenRef.secretName '%s' %s", state.TokenRef.SecretName, msg)
	}
	secret, err := getSecret(state.TokenRef.SecretName)
	if err != nil {
		return nil, fmt.Errorf("state.tokenRef: reading secret '%s': %w", state.TokenRef.SecretName, err)
	}
	if secret == nil {
		return fail("state.tokenRef: secret '%s' not found", state.TokenRef.SecretName)
	}
	if !secretHasKey(secret, state.TokenRef.Key) {
		return fail("state.tokenRef: secret '%s' has no key '%s'", state.TokenRef.SecretName, state.TokenRef.Key)
	}
	return nil, nil
}
