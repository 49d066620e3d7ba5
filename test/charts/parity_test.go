// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package charts_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

const (
	release   = "caliban-operator"
	namespace = framework.OperatorNamespace
)

// helmLabels are Helm's bookkeeping: the only difference allowed between a
// chart's object and manifests/' one.
var helmLabels = []string{
	"helm.sh/chart",
	"app.kubernetes.io/managed-by",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/version",
}

// keepAnnotation is the caliban-crds chart's resource policy.
const keepAnnotation = "helm.sh/resource-policy"

func root(t *testing.T) string {
	t.Helper()
	r, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func render(t *testing.T, chart string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := framework.RenderChart(root(t), chart, release, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// renderServed renders the operator chart as helm install does on a
// cluster that serves the admission policy kinds (Kubernetes 1.36 or
// later), and returns its NOTES.txt too.
func renderServed(t *testing.T, values map[string]any) ([]*unstructured.Unstructured, string) {
	t.Helper()
	objs, notes, err := framework.RenderChartOn(root(t), framework.OperatorChart, release, namespace, values, framework.AdmissionPolicyKinds...)
	if err != nil {
		t.Fatal(err)
	}
	return objs, notes
}

func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := framework.Kustomize(root(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func key(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// byKey indexes objects by kind, namespace and name, with Helm's labels
// (and, for CRDs, the keep annotation) taken off a copy. keep says which
// objects take part.
func byKey(t *testing.T, objs []*unstructured.Unstructured, keep func(*unstructured.Unstructured) bool) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if !keep(o) {
			continue
		}
		o = o.DeepCopy()
		if labels := o.GetLabels(); labels != nil {
			for _, l := range helmLabels {
				delete(labels, l)
			}
			if len(labels) == 0 {
				labels = nil
			}
			o.SetLabels(labels)
		}
		if o.GetKind() == "CustomResourceDefinition" {
			a := o.GetAnnotations()
			delete(a, keepAnnotation)
			o.SetAnnotations(a)
		}
		if o.GetKind() == "Deployment" {
			sortEnv(t, o)
		}
		k := key(o)
		if _, dup := out[k]; dup {
			t.Fatalf("%s is rendered twice", k)
		}
		out[k] = o
	}
	return out
}

// sameObjects fails t for every object one side has and the other lacks,
// and for every difference in a shared one.
func sameObjects(t *testing.T, wantName string, want map[string]*unstructured.Unstructured, gotName string, got map[string]*unstructured.Unstructured) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s renders nothing to compare", wantName)
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s has %s, %s does not", wantName, k, gotName)
			continue
		}
		if diff := cmp.Diff(want[k].Object, g.Object); diff != "" {
			t.Errorf("%s differs (-%s +%s):\n%s", k, wantName, gotName, diff)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s has %s, %s does not", gotName, k, wantName)
		}
	}
}

// sortEnv orders each container's env by name. The order carries no
// meaning here (no value refers to another with $(NAME)), and a Kustomize
// strategic-merge patch moves the entry it sets to the front.
func sortEnv(t *testing.T, deploy *unstructured.Unstructured) {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range containers {
		env, _ := c.(map[string]any)["env"].([]any)
		slices.SortStableFunc(env, func(a, b any) int {
			return strings.Compare(a.(map[string]any)["name"].(string), b.(map[string]any)["name"].(string))
		})
	}
	if err := unstructured.SetNestedSlice(deploy.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}

func not(kinds ...string) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool { return !slices.Contains(kinds, u.GetKind()) }
}

func all(*unstructured.Unstructured) bool { return true }

// The Namespace is the release's (helm install -n caliban-system
// --create-namespace); the CRDs are the caliban-crds chart's.
var notChart = not("Namespace", "CustomResourceDefinition")

// The admission component is on by default wherever the cluster serves
// its kinds: there the defaults render manifests/ and manifests/admission.
// helm template without a cluster knows no kinds, and renders manifests/.
func TestTheOperatorChartRendersWhatManifestsRenders(t *testing.T) {
	t.Run("on a cluster that serves the admission policies, manifests and manifests/admission", func(t *testing.T) {
		want := byKey(t, kustomize(t, "manifests"), notChart)
		for k, o := range byKey(t, kustomize(t, "manifests/admission"), all) {
			if _, dup := want[k]; dup {
				t.Fatalf("%s is in manifests and manifests/admission", k)
			}
			want[k] = o
		}
		objs, _ := renderServed(t, nil)
		sameObjects(t, "manifests and manifests/admission", want, "the operator chart", byKey(t, objs, all))
	})
	t.Run("without a cluster, manifests", func(t *testing.T) {
		sameObjects(t, "manifests", byKey(t, kustomize(t, "manifests"), notChart),
			"the operator chart", byKey(t, render(t, framework.OperatorChart, nil), all))
	})
}

// The single-namespace overlay also creates the namespace caliban-tasks; the
// chart creates no namespace (watchNamespace must exist, as the release's).
func TestTheOperatorChartWithAWatchNamespaceRendersTheSingleNamespaceOverlay(t *testing.T) {
	sameObjects(t, "manifests/overlays/single-namespace",
		byKey(t, kustomize(t, "manifests/overlays/single-namespace"), notChart),
		"the operator chart with watchNamespace caliban-tasks",
		byKey(t, render(t, framework.OperatorChart, map[string]any{"watchNamespace": "caliban-tasks"}), all))
}

// An optional part of the chart renders what its kustomization renders, and
// turning it on changes nothing else. The admission component is compared
// on a cluster that serves its kinds, where it is on unless turned off.
func TestTheOperatorChartsOptionalPartsRenderTheirKustomizations(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		dir    string
		// without is the render the part adds to; nil: the defaults
		// without a cluster.
		without []*unstructured.Unstructured
	}{
		"flowcontrol.enabled renders manifests/flowcontrol": {
			values: map[string]any{"flowcontrol": map[string]any{"enabled": true}},
			dir:    "manifests/flowcontrol",
		},
		"admission.enabled, the default, renders manifests/admission": {
			values: map[string]any{"admission": map[string]any{"enabled": true}},
			dir:    "manifests/admission",
			without: func() []*unstructured.Unstructured {
				objs, _ := renderServed(t, map[string]any{"admission": map[string]any{"enabled": false}})
				return objs
			}(),
		},
		"monitoring.podMonitor, .prometheusRule and .dashboard enabled render manifests/monitoring": {
			values: map[string]any{"monitoring": map[string]any{
				"podMonitor":     map[string]any{"enabled": true},
				"prometheusRule": map[string]any{"enabled": true},
				"dashboard":      map[string]any{"enabled": true},
			}},
			dir: "manifests/monitoring",
		},
	} {
		t.Run(name, func(t *testing.T) {
			base, with := byKey(t, render(t, framework.OperatorChart, nil), all), byKey(t, render(t, framework.OperatorChart, tc.values), all)
			if tc.without != nil {
				objs, _ := renderServed(t, tc.values)
				base, with = byKey(t, tc.without, all), byKey(t, objs, all)
			}
			added := map[string]*unstructured.Unstructured{}
			for k, o := range with {
				if b, ok := base[k]; !ok {
					added[k] = o
				} else if diff := cmp.Diff(b.Object, o.Object); diff != "" {
					t.Errorf("%s changes %s (-without +with):\n%s", name, k, diff)
				}
			}
			sameObjects(t, tc.dir, byKey(t, kustomize(t, tc.dir), all), "what "+name+" adds", added)
		})
	}
}

func TestTheCRDsChartRendersManifestsCRDs(t *testing.T) {
	sameObjects(t, "manifests/crds", byKey(t, kustomize(t, "manifests/crds"), all),
		"the caliban-crds chart", byKey(t, render(t, framework.CRDsChart, nil), all))
}

// Uninstalling the caliban-crds chart must not delete every task: by
// default each CRD carries the keep policy, and keep: false takes it off.
func TestTheCRDsChartKeepsItsCRDsUnlessToldNot(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{nil, "keep"},
		{map[string]any{"keep": false}, ""},
	} {
		objs := render(t, framework.CRDsChart, tc.values)
		if len(objs) != 2 {
			t.Fatalf("the caliban-crds chart renders %d objects, want 2", len(objs))
		}
		for _, o := range objs {
			if got := o.GetAnnotations()[keepAnnotation]; got != tc.want {
				t.Errorf("values %v: %s has %s %q, want %q", tc.values, key(o), keepAnnotation, got, tc.want)
			}
		}
	}
}

// The ServiceMonitor selects the metrics Service, which selects the
// operator's pods on the port the operator serves metrics on.
func TestTheServiceMonitorScrapesTheOperatorsMetricsPort(t *testing.T) {
	objs := byKey(t, render(t, framework.OperatorChart, map[string]any{
		"metrics": map[string]any{"port": 9090, "serviceMonitor": map[string]any{"enabled": true}}}), all)
	svc, sm, deploy := objs["Service "+namespace+"/caliban-operator-metrics"], objs["ServiceMonitor "+namespace+"/caliban-operator"],
		objs["Deployment "+namespace+"/caliban-operator"]
	if svc == nil || sm == nil {
		t.Fatalf("metrics.serviceMonitor.enabled renders %v", slices.Sorted(maps.Keys(objs)))
	}
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if svc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, the Service has %q", k, v, svc.GetLabels()[k])
		}
	}
	podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
	svcSelector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	for k, v := range svcSelector {
		if podLabels[k] != v {
			t.Errorf("the Service selects %s=%s, the pods have %q", k, v, podLabels[k])
		}
	}
	env := deploymentEnv(t, deploy)
	if got := env["CALIBAN_METRICS_BIND_ADDRESS"]; got != ":9090" {
		t.Errorf("CALIBAN_METRICS_BIND_ADDRESS %q, want :9090", got)
	}
	ports, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if got := fmt.Sprint(ports[0].(map[string]any)["ports"]); !strings.Contains(got, "containerPort:9090") {
		t.Errorf("container ports %s, want containerPort 9090", got)
	}
}

// deploymentEnv is the operator container's literal env values.
func deploymentEnv(t *testing.T, deploy *unstructured.Unstructured) map[string]string {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) != 1 {
		t.Fatalf("the Deployment has containers %v (%v), want one", containers, err)
	}
	env := map[string]string{}
	list, _ := containers[0].(map[string]any)["env"].([]any)
	for _, e := range list {
		m := e.(map[string]any)
		if v, ok := m["value"].(string); ok {
			env[m["name"].(string)] = v
		}
	}
	return env
}
