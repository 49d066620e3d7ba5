// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package charts_test

import (
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// NOTES.txt says after every install and upgrade whether the admission
// component is on, and when it is off, why and what that leaves open.
func TestTheNotesSayWhetherTheAdmissionComponentIsOn(t *testing.T) {
	offConsequences := []string{
		"Without it",
		"may let its agents run unattended",
		"may patch calibantasks/status",
		"pinned configuration",
		"may name any Secret of its namespace",
		"may take an agent pod's isolation labels off",
	}
	tests := map[string]struct {
		values  map[string]any
		served  bool
		want    []string
		wantNot []string
	}{
		"on, by default, where the cluster serves the policies": {
			served: true,
			want: []string{"The admission component is on", "ConfigMap " + namespace + "/caliban-unattended", "admission.params",
				"agent-sandbox's controller (system:serviceaccount:agent-sandbox-system:agent-sandbox-controller)"},
			wantNot: []string{"OFF", "Without it"},
		},
		"off by value": {
			values:  map[string]any{"admission": map[string]any{"enabled": false}},
			served:  true,
			want:    append([]string{"THE ADMISSION COMPONENT IS OFF: admission.enabled is false."}, offConsequences...),
			wantNot: []string{"is on", "does not serve"},
		},
		"off because the cluster does not serve the policies": {
			want: append([]string{"THE ADMISSION COMPONENT IS OFF: this cluster does not serve", "Kubernetes 1.36 or later",
				"although admission.enabled is true", "helm upgrade"}, offConsequences...),
			wantNot: []string{"is on", "admission.enabled is false."},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var apiVersions []string
			if tc.served {
				apiVersions = framework.AdmissionPolicyKinds
			}
			_, notes, err := framework.RenderChartOn(root(t), framework.OperatorChart, release, namespace, tc.values, apiVersions...)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES.txt does not say %q:\n%s", w, notes)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(notes, w) {
					t.Errorf("NOTES.txt says %q:\n%s", w, notes)
				}
			}
		})
	}
}

// One kind without the other is a cluster the component cannot work on
// (the record of who asked needs the mutating kind): nothing is rendered.
func TestTheAdmissionComponentNeedsBothPolicyKinds(t *testing.T) {
	for _, kind := range framework.AdmissionPolicyKinds {
		objs, notes, err := framework.RenderChartOn(root(t), framework.OperatorChart, release, namespace, nil, kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetLabels()["app.kubernetes.io/component"] == "admission" {
				t.Errorf("a cluster serving only %s gets %s", kind, key(o))
			}
		}
		if !strings.Contains(notes, "does not serve") {
			t.Errorf("a cluster serving only %s: NOTES.txt does not say the component is off:\n%s", kind, notes)
		}
	}
}

// The operator's identity, which the status and pod-label policies let
// through, and the parameters' namespace are the release's: in another
// namespace and with another ServiceAccount name, nothing of the component
// names caliban-system or caliban-operator's ServiceAccount. agent-sandbox's
// controller is admission.agentSandboxController.
func TestTheAdmissionComponentNamesTheReleasesOperator(t *testing.T) {
	const agentSandbox = "system:serviceaccount:sandboxes:agent-sandbox-controller"
	objs, _, err := framework.RenderChartOn(root(t), framework.OperatorChart, release, "platform", map[string]any{
		"serviceAccount": map[string]any{"name": "ops"},
		"admission":      map[string]any{"agentSandboxController": agentSandbox},
	}, framework.AdmissionPolicyKinds...)
	if err != nil {
		t.Fatal(err)
	}
	policies := map[string]*unstructured.Unstructured{}
	n := 0
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] != "admission" {
			continue
		}
		n++
		text, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(text), "caliban-system") || strings.Contains(string(text), "serviceaccount:platform:caliban-operator") ||
			strings.Contains(string(text), "agent-sandbox-system") {
			t.Errorf("%s names caliban-system, the default ServiceAccount or agent-sandbox's default namespace:\n%s", key(o), text)
		}
		if o.GetKind() == "ValidatingAdmissionPolicy" {
			policies[o.GetName()] = o
		}
	}
	if n != 13 || policies["caliban-status"] == nil || policies["caliban-pod-labels"] == nil {
		t.Fatalf("%d admission objects, policies %v; want 13 with caliban-status and caliban-pod-labels", n, slices.Sorted(maps.Keys(policies)))
	}
	operator := "request.userInfo.username != 'system:serviceaccount:platform:ops'"
	for name, want := range map[string][]string{
		"caliban-status":     {operator},
		"caliban-pod-labels": {"request.userInfo.username != '" + agentSandbox + "'", operator},
	} {
		conditions, _, _ := unstructured.NestedSlice(policies[name].Object, "spec", "matchConditions")
		for i, w := range want {
			if len(conditions) <= i || conditions[i].(map[string]any)["expression"] != w {
				t.Errorf("%s's matchConditions are %v, want %q at %d", name, conditions, w, i)
			}
		}
	}
	// Its refusals name who may.
	variables, _, _ := unstructured.NestedSlice(policies["caliban-pod-labels"].Object, "spec", "variables")
	named := false
	for _, v := range variables {
		v := v.(map[string]any)
		named = named || v["name"] == "mayChange" && strings.Contains(v["expression"].(string), "("+agentSandbox+")") &&
			strings.Contains(v["expression"].(string), "(system:serviceaccount:platform:ops)")
	}
	if !named {
		t.Errorf("caliban-pod-labels's mayChange does not name %s and the release's operator: %v", agentSandbox, variables)
	}
}

// The status policy guards every field of a task's status that the
// operator writes, as manifests/admission and the chart render it: a field
// the operator gains (status.launch, whose type decides between a claim
// and a Sandbox of the task's own) is refused to other writers too, or
// named here with the reason it need not be.
func TestTheStatusPolicyGuardsEveryStatusFieldTheOperatorWrites(t *testing.T) {
	notGuarded := map[string]string{
		// Ready is guarded by a rule of its own; the other conditions are
		// prospero's.
		"conditions": "",
		// When the phase was entered: read by the oldest-task metric and
		// kubectl caliban, by no decision of the operator.
		"phaseTransitionTime": "",
	}
	var want []string
	status := reflect.TypeFor[calibanv1alpha1.CalibanTaskStatus]()
	for i := range status.NumField() {
		name, _, _ := strings.Cut(status.Field(i).Tag.Get("json"), ",")
		if _, skip := notGuarded[name]; !skip {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	chart, _ := renderServed(t, nil)
	for what, objs := range map[string][]*unstructured.Unstructured{"manifests/admission": kustomize(t, "manifests/admission"), "the operator chart": chart} {
		var expr string
		for _, o := range objs {
			if o.GetKind() != "ValidatingAdmissionPolicy" || o.GetName() != "caliban-status" {
				continue
			}
			variables, _, _ := unstructured.NestedSlice(o.Object, "spec", "variables")
			for _, v := range variables {
				if v := v.(map[string]any); v["name"] == "owned" {
					expr, _ = v["expression"].(string)
				}
			}
		}
		tasks, _, found := strings.Cut(strings.TrimPrefix(expr, "variables.task ?"), "] :")
		if !found {
			t.Fatalf("%s: caliban-status has no list of a task's owned fields in %q", what, expr)
		}
		var got []string
		for _, m := range regexp.MustCompile(`'([A-Za-z]+)'`).FindAllStringSubmatch(tasks, -1) {
			got = append(got, m[1])
		}
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the fields caliban-status guards in a task's status (-the operator's +guarded):\n%s", what, diff)
		}
	}
}
