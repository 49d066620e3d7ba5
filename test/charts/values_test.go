// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package charts_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// The chart's defaults are the binary's: the operator reads the default
// Deployment's env as exactly an empty environment, the one source of
// defaults.
func TestTheChartsDefaultSettingsAreTheOperatorsDefaults(t *testing.T) {
	var env map[string]string
	for _, o := range render(t, framework.OperatorChart, nil) {
		if o.GetKind() == "Deployment" {
			env = deploymentEnv(t, o)
		}
	}
	if len(env) < 30 {
		t.Fatalf("the chart's Deployment sets only %d literal env values", len(env))
	}
	got, err := config.Parse(func(name string) (string, bool) { v, ok := env[name]; return v, ok }, namespace)
	if err != nil {
		t.Fatalf("the operator refuses the chart's default env: %v", err)
	}
	want, err := config.Parse(func(string) (string, bool) { return "", false }, namespace)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("the chart's default settings differ from an empty environment's (-want +got):\n%s", diff)
	}
}

// The values schema (and, for rules between values, the chart's own checks)
// refuses a bad value before anything reaches the cluster, with a message
// that names the value.
func TestTheValuesSchemaRefusesBadValuesByName(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		// every string must appear in the refusal
		want []string
	}{
		"an unknown pull policy": {
			values: map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}},
			want:   []string{"/image/pullPolicy", "IfNotPresent"},
		},
		"an unknown log format": {
			values: map[string]any{"log": map[string]any{"format": "xml"}},
			want:   []string{"/log/format", "json"},
		},
		"a misspelt top-level value": {
			values: map[string]any{"worker": 8},
			want:   []string{"worker"},
		},
		"a misspelt nested value": {
			values: map[string]any{"leaderElection": map[string]any{"leaseDuration": 30}},
			want:   []string{"/leaderElection", "leaseDuration"},
		},
		"workers as a string": {
			values: map[string]any{"workers": "eight"},
			want:   []string{"/workers", "integer"},
		},
		"no workers": {
			values: map[string]any{"workers": 0},
			want:   []string{"/workers", "minimum"},
		},
		"a metrics port beyond 65535": {
			values: map[string]any{"metrics": map[string]any{"port": 70000}},
			want:   []string{"/metrics/port", "maximum"},
		},
		"a negative replica count": {
			values: map[string]any{"replicaCount": -1},
			want:   []string{"/replicaCount", "minimum"},
		},
		"a caliband port of zero": {
			values: map[string]any{"agent": map[string]any{"calibandPort": 0}},
			want:   []string{"/agent/calibandPort", "minimum"},
		},
		"a workspace size that is not a quantity": {
			values: map[string]any{"agent": map[string]any{"workspaceStorage": "ten gigs"}},
			want:   []string{"/agent/workspaceStorage"},
		},
		"a caliband CPU limit that is not a quantity": {
			values: map[string]any{"agent": map[string]any{"calibandResources": map[string]any{"cpuLimit": "1 core"}}},
			want:   []string{"/agent/calibandResources/cpuLimit"},
		},
		"an unknown seccomp profile": {
			values: map[string]any{"agent": map[string]any{"seccompProfile": "Localhost"}},
			want:   []string{"/agent/seccompProfile", "RuntimeDefault"},
		},
		"a relative workspace root": {
			values: map[string]any{"agent": map[string]any{"workspaceRoot": "work"}},
			want:   []string{"/agent/workspaceRoot"},
		},
		"a watch namespace that is no namespace name": {
			values: map[string]any{"watchNamespace": "Team_A"},
			want:   []string{"/watchNamespace"},
		},
		"a DNS namespace that is no namespace name": {
			values: map[string]any{"network": map[string]any{"dnsNamespace": "kube.system"}},
			want:   []string{"/network/dnsNamespace"},
		},
		"an empty DNS namespace": {
			values: map[string]any{"network": map[string]any{"dnsNamespace": ""}},
			want:   []string{"/network/dnsNamespace"},
		},
		"a QPS of zero": {
			values: map[string]any{"kubeAPI": map[string]any{"qps": 0}},
			want:   []string{"/kubeAPI/qps"},
		},
		"leader election as a string": {
			values: map[string]any{"leaderElection": map[string]any{"enabled": "yes"}},
			want:   []string{"/leaderElection/enabled", "boolean"},
		},
		"a dashboard namespace that is no namespace name": {
			values: map[string]any{"monitoring": map[string]any{"dashboard": map[string]any{"namespace": "Grafana"}}},
			want:   []string{"/monitoring/dashboard/namespace"},
		},
		"a rule label that is not a string": {
			values: map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{"labels": map[string]any{"release": 1}}}},
			want:   []string{"/monitoring/prometheusRule/labels/release", "string"},
		},
		"an alerts switch as a string": {
			values: map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": "yes"}}},
			want:   []string{"/monitoring/prometheusRule/enabled", "boolean"},
		},
		"an admission parameter of an unknown key": {
			values: map[string]any{"admission": map[string]any{"params": map[string]any{"admins": "me"}}},
			want:   []string{"/admission/params", "admins"},
		},
		"an agent-sandbox identity that would end the policy's CEL string": {
			values: map[string]any{"admission": map[string]any{"agentSandboxController": "system:serviceaccount:x:y' || true || '"}},
			want:   []string{"/admission/agentSandboxController"},
		},
		"a lease grace as long as the lease": {
			values: map[string]any{"leaderElection": map[string]any{"durationSeconds": 10, "graceSeconds": 10}},
			want:   []string{"leaderElection.graceSeconds 10 must be less than leaderElection.durationSeconds 10"},
		},
		"an empty agent port window": {
			values: map[string]any{"agent": map[string]any{"portBase": 8000, "portEnd": 7999}},
			want:   []string{"agent.portBase 8000 is greater than agent.portEnd 7999"},
		},
		"caliband's port inside the agent port window": {
			values: map[string]any{"agent": map[string]any{"calibandPort": 7500}},
			want:   []string{"agent.calibandPort 7500 falls inside the agent port window 7100-7999"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := framework.RenderChart(root(t), framework.OperatorChart, release, namespace, tc.values)
			if err == nil {
				t.Fatalf("values %v are accepted", tc.values)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestTheCRDsChartRefusesUnknownValues(t *testing.T) {
	_, err := framework.RenderChart(root(t), framework.CRDsChart, "caliban-crds", "", map[string]any{"keep": "yes"})
	if err == nil || !strings.Contains(err.Error(), "/keep") {
		t.Errorf("keep: \"yes\" is not refused by name: %v", err)
	}
}
