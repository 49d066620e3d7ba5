// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

func TestStateProblem(t *testing.T) {
	token := &calibanv1alpha1.SecretKeyRef{SecretName: "gonzalo", Key: "token"}
	tests := map[string]struct {
		state   *calibanv1alpha1.StateSpec
		secrets []*corev1.Secret
		want    string // "" for no problem
	}{
		"no state has no problem":                  {},
		"an endpoint alone selects remote":         {state: &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080"}},
		"remote with an endpoint is well formed":   {state: &calibanv1alpha1.StateSpec{Mode: "remote", GonzaloEndpoint: "http://g:8080"}},
		"local without an endpoint is well formed": {state: &calibanv1alpha1.StateSpec{Mode: "local"}},
		"a token whose secret has the key is fine": {
			state:   &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080", TokenRef: token},
			secrets: []*corev1.Secret{fxSecret("gonzalo", "token")},
		},
		"an unknown mode is a problem naming it": {
			state: &calibanv1alpha1.StateSpec{Mode: "s3"}, want: "state.mode 's3' is not one of: remote, local",
		},
		"remote mode without an endpoint is a problem": {
			state: &calibanv1alpha1.StateSpec{Mode: "remote"}, want: "state.mode remote requires state.gonzaloEndpoint",
		},
		"an endpoint with local mode is a problem": {
			state: &calibanv1alpha1.StateSpec{Mode: "local", GonzaloEndpoint: "http://g:8080"},
			want:  "state.gonzaloEndpoint is set, but state.mode local never uses it",
		},
		"a token ref without remote storage is a problem": {
			state: &calibanv1alpha1.StateSpec{Mode: "local", TokenRef: token},
			want:  "state.tokenRef requires remote storage (set state.gonzaloEndpoint)",
		},
		"a missing token secret is a problem": {
			state: &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080", TokenRef: token},
			want:  "state.tokenRef: secret 'gonzalo' not found",
		},
		// client-go refuses to GET such a name, so the lookup used to fail
		// on every retry and the task never got a status.
		"a token Secret name with '/' is a problem, found before any lookup": {
			state: &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080",
				TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "../x", Key: "token"}},
			secrets: []*corev1.Secret{fxSecret("../x", "token")},
			want:    "state.tokenRef.secretName '../x' is not a valid Secret name: it must be " + subdomainWords,
		},
		"a token secret without the key is a problem": {
			state:   &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080", TokenRef: token},
			secrets: []*corev1.Secret{fxSecret("gonzalo", "other")},
			want:    "state.tokenRef: secret 'gonzalo' has no key 'token'",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := StateProblem(tc.state, fxSecrets(tc.secrets...))
			if err != nil {
				t.Fatal(err)
			}
			var want *Failure
			if tc.want != "" {
				want = &Failure{Reason: ReasonInvalidState, Message: tc.want}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStateProblemReturnsLookupErrors(t *testing.T) {
	boom := errors.New("timeout")
	state := &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://g:8080", TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "s", Key: "k"}}
	got, err := StateProblem(state, func(string) (*corev1.Secret, error) { return nil, boom })
	if !errors.Is(err, boom) || got != nil {
		t.Errorf("got %+v, %v; want no verdict and the lookup error", got, err)
	}
}
