// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/caliban-ai/caliban-operator/pkg/config"
)

func TestTheClientSettingsReachTheRESTConfig(t *testing.T) {
	build := BuildInfo{Version: "v1.2.3"}
	tests := map[string]struct {
		settings func(*config.ProcessSettings)
		want     rest.Config
	}{
		"the defaults: no client-side limit, no compression": {
			settings: func(*config.ProcessSettings) {},
			want:     rest.Config{QPS: -1, Burst: 100, DisableCompression: true, UserAgent: "caliban-operator/v1.2.3"},
		},
		"a limit and compression asked for": {
			settings: func(s *config.ProcessSettings) { s.KubeAPIQPS, s.KubeAPIBurst, s.KubeAPICompression = 20, 40, true },
			want:     rest.Config{QPS: 20, Burst: 40, DisableCompression: false, UserAgent: "caliban-operator/v1.2.3"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := config.DefaultProcessSettings()
			tc.settings(&s)
			got := rest.Config{}
			configureClient(&got, s, build)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rest.Config (-want +got):\n%s", diff)
			}
		})
	}
}
