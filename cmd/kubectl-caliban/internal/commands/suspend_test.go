// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSuspendApplyCarriesOnlySuspendAndTheUID(t *testing.T) {
	tests := map[string]struct {
		on   bool
		want string
	}{
		"suspend sets spec.suspend true": {on: true,
			want: `{"kind":"CalibanTask","apiVersion":"caliban.caliban-ai.dev/v1alpha1","metadata":{"name":"fix-login","namespace":"team-a","uid":"uid-1"},"spec":{"suspend":true}}`},
		"resume sends spec.suspend false rather than omitting it": {on: false,
			want: `{"kind":"CalibanTask","apiVersion":"caliban.caliban-ai.dev/v1alpha1","metadata":{"name":"fix-login","namespace":"team-a","uid":"uid-1"},"spec":{"suspend":false}}`},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(SuspendApply("fix-login", "team-a", "uid-1", test.on))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(test.want, string(got)); diff != "" {
				t.Errorf("apply configuration (-want +got):\n%s", diff)
			}
		})
	}
}
