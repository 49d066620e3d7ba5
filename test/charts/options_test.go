// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package charts_test

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// Each switch renders exactly the objects it promises.
func TestTheChartsSwitchesRenderWhatTheyPromise(t *testing.T) {
	le := []string{"Role " + namespace + "/caliban-operator-leader-election", "RoleBinding " + namespace + "/caliban-operator-leader-election"}
	cluster := []string{"ClusterRole /caliban-operator", "ClusterRoleBinding /caliban-operator"}
	// The pin key Role comes with every RBAC, leader election or not.
	pinKey := []string{"Role " + namespace + "/caliban-operator-pin-key", "RoleBinding " + namespace + "/caliban-operator-pin-key"}
	sa := "ServiceAccount " + namespace + "/caliban-operator"
	deploy := "Deployment " + namespace + "/caliban-operator"
	admission := []string{
		"ValidatingAdmissionPolicy /caliban-unattended", "ValidatingAdmissionPolicyBinding /caliban-unattended",
		"MutatingAdmissionPolicy /caliban-requested-by", "MutatingAdmissionPolicyBinding /caliban-requested-by",
		"ValidatingAdmissionPolicy /caliban-requested-by", "ValidatingAdmissionPolicyBinding /caliban-requested-by",
		"ValidatingAdmissionPolicy /caliban-status", "ValidatingAdmissionPolicyBinding /caliban-status",
		"ValidatingAdmissionPolicy /caliban-secret-refs", "ValidatingAdmissionPolicyBinding /caliban-secret-refs",
		"ValidatingAdmissionPolicy /caliban-pod-labels", "ValidatingAdmissionPolicyBinding /caliban-pod-labels",
		"ConfigMap " + namespace + "/caliban-unattended",
	}
	tests := map[string]struct {
		values map[string]any
		// served: the cluster serves the admission policy kinds.
		served bool
		want   []string
	}{
		"the defaults render the identity, the RBAC and the Deployment": {
			values: nil,
			want:   slices.Concat([]string{sa, deploy}, cluster, le, pinKey),
		},
		"on a cluster that serves the admission policies the defaults add the admission component": {
			values: nil,
			served: true,
			want:   slices.Concat([]string{sa, deploy}, cluster, le, pinKey, admission),
		},
		"admission.enabled false renders no admission object, also where it is served": {
			values: map[string]any{"admission": map[string]any{"enabled": false}},
			served: true,
			want:   slices.Concat([]string{sa, deploy}, cluster, le, pinKey),
		},
		"without leader election there is no leader-election Role": {
			values: map[string]any{"leaderElection": map[string]any{"enabled": false}},
			want:   slices.Concat([]string{sa, deploy}, cluster, pinKey),
		},
		"without rbac.create there is no RBAC at all, leader election or not": {
			values: map[string]any{"rbac": map[string]any{"create": false}},
			want:   []string{sa, deploy},
		},
		"without serviceAccount.create there is no ServiceAccount": {
			values: map[string]any{"serviceAccount": map[string]any{"create": false}},
			want:   slices.Concat([]string{deploy}, cluster, le, pinKey),
		},
		"a watch namespace swaps the ClusterRole for a Role there": {
			values: map[string]any{"watchNamespace": "team-a"},
			want:   slices.Concat([]string{sa, deploy, "Role team-a/caliban-operator", "RoleBinding team-a/caliban-operator"}, le, pinKey),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := render(t, framework.OperatorChart, tc.values)
			if tc.served {
				objs, _ = renderServed(t, tc.values)
			}
			got := slices.Sorted(maps.Keys(byKey(t, objs, all)))
			want := slices.Sorted(slices.Values(tc.want))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

// A ServiceAccount of another name is the one the pod runs as and every
// binding names.
func TestAServiceAccountNameReachesThePodAndTheBindings(t *testing.T) {
	objs := byKey(t, render(t, framework.OperatorChart, map[string]any{"serviceAccount": map[string]any{"name": "ops"}}), all)
	if _, ok := objs["ServiceAccount "+namespace+"/ops"]; !ok {
		t.Errorf("no ServiceAccount ops: %v", slices.Sorted(maps.Keys(objs)))
	}
	d := objs["Deployment "+namespace+"/caliban-operator"]
	if got := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["serviceAccountName"]; got != "ops" {
		t.Errorf("the pod runs as %v, want ops", got)
	}
	for _, k := range []string{"ClusterRoleBinding /caliban-operator", "RoleBinding " + namespace + "/caliban-operator-leader-election"} {
		subject := objs[k].Object["subjects"].([]any)[0].(map[string]any)
		if subject["name"] != "ops" || subject["namespace"] != namespace {
			t.Errorf("%s binds %v, want %s/ops", k, subject, namespace)
		}
	}
}

// helm lint finds nothing above information in either chart.
func TestTheChartsLintClean(t *testing.T) {
	for _, chart := range []string{framework.CRDsChart, framework.OperatorChart} {
		res := action.NewLint().Run([]string{filepath.Join(root(t), chart)}, nil)
		for _, err := range res.Errors {
			t.Errorf("%s: %v", chart, err)
		}
		if action.HasWarningsOrErrors(res) {
			for _, m := range res.Messages {
				t.Errorf("%s: %s", chart, m)
			}
		}
	}
}
