// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package codec

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/yaml"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanscheme "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/scheme"
)

// sandboxAsServed is the every-feature golden Sandbox as the apiserver
// sends it: sorted members, managedFields, a status.
func sandboxAsServed(t testing.TB) []byte {
	t.Helper()
	golden, err := os.ReadFile("../../builders/testdata/every-feature.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.Split(string(golden), "\n---\n")[0]), &u.Object); err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "Sandbox" {
		t.Fatalf("the golden file's first object is a %s", u.GetKind())
	}
	u.SetUID("0d6f5a4e-1b7c-4d1e-9a55-3c2f1e0b9a77")
	u.SetResourceVersion("12345")
	u.SetGeneration(2)
	u.SetCreationTimestamp(metav1.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC))
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager: builders.FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "agents.x-k8s.io/v1beta1",
		Time: &metav1.Time{Time: time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)}, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}}},"f:spec":{"f:podTemplate":{"f:spec":{"f:containers":{"k:{\"name\":\"caliband\"}":{".":{},"f:image":{}}}}}}}`)},
	}})
	status := map[string]any{
		"serviceFQDN": "fix-bug.team.svc.cluster.local", "service": "fix-bug", "selector": "agents.x-k8s.io/sandbox-name-hash=abc",
		"replicas": int64(1), "podIPs": []any{"10.0.0.7"},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "DependenciesReady",
			"message": "Pod is Ready; Service Exists", "lastTransitionTime": "2026-09-01T12:00:05Z", "observedGeneration": int64(2)}},
	}
	if err := unstructured.SetNestedField(u.Object, status, "status"); err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// taskAsServed is a pinned, running CalibanTask as the apiserver sends it.
func taskAsServed(t testing.TB) []byte {
	t.Helper()
	ws := calibanv1alpha1.WorkspaceSpec{
		Providers: []calibanv1alpha1.Provider{{Name: "planner", Kind: "anthropic",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "key", Key: "api-key"}}},
		Sources: []calibanv1alpha1.Source{{Name: "caliban", Repo: "https://github.com/caliban-ai/caliban.git", Ref: "main", Path: "/work/caliban"}},
		Env:     []calibanv1alpha1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}},
		Egress:  &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.0/8", Ports: []int32{443, 8080}}}},
	}
	tk := &calibanv1alpha1.CalibanTask{
		TypeMeta: metav1.TypeMeta{APIVersion: calibanv1alpha1.SchemeGroupVersion.String(), Kind: "CalibanTask"},
		ObjectMeta: metav1.ObjectMeta{Name: "fix-bug", Namespace: "team", UID: "task-uid", Generation: 1, ResourceVersion: "1",
			Labels: map[string]string{"team": "core"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "prospero", Operation: metav1.ManagedFieldsOperationApply,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{}}}`)}, Subresource: "status"}}},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "fix it", PermissionPosture: calibanv1alpha1.PostureSupervised},
		},
	}
	provider, _ := builders.ResolveProvider(&ws, "")
	tk.Status = calibanv1alpha1.CalibanTaskStatus{
		Phase: calibanv1alpha1.TaskRunning, CalibandEndpoint: "http://fix-bug.team.svc:8080",
		SandboxRef:         &calibanv1alpha1.SandboxReference{Name: "fix-bug"},
		ResolvedWorkspace:  builders.PinWorkspace(tk, &ws, provider),
		ObservedGeneration: 1,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Running",
			LastTransitionTime: metav1.Date(2026, 9, 1, 12, 0, 5, 0, time.UTC), Message: "caliband answers"}},
	}
	doc, err := json.Marshal(tk)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// decodeBoth decodes doc with client-go's JSON serializer and with
// jsonCodecs', each into a fresh copy of into (nil: a new object).
func decodeBoth(scheme *runtime.Scheme, doc []byte, into runtime.Object) (want, got runtime.Object, wantErr, err error) {
	std := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{})
	ours := newJSONCodecs(scheme).info.Serializer
	fresh := func() runtime.Object {
		if into == nil {
			return nil
		}
		return into.DeepCopyObject()
	}
	want, _, wantErr = std.Decode(doc, nil, fresh())
	got, _, err = ours.Decode(doc, nil, fresh())
	return want, got, wantErr, err
}

// agree fails t unless both decodes failed, or both gave the same object.
func agree(t *testing.T, doc []byte, want, got runtime.Object, wantErr, err error) {
	t.Helper()
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, client-go's %v", doc, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%s: decoded (-client-go +ours):\n%s", doc, cmp.Diff(want, got, cmp.Exporter(func(reflect.Type) bool { return true })))
	}
}

// v2Decoder must give client-go's answer, object or error, for everything
// the apiserver sends and for what it never sends.
func TestTheV2DecoderAgreesWithClientGo(t *testing.T) {
	sandbox, tk := string(sandboxAsServed(t)), string(taskAsServed(t))
	const sb = `{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox",`
	tests := map[string]struct {
		scheme *runtime.Scheme
		doc    string
		into   runtime.Object
	}{
		"a Sandbox as the apiserver sends it":           {doc: sandbox},
		"a Sandbox into a typed object":                 {doc: sandbox, into: &sandboxv1beta1.Sandbox{}},
		"a list of Sandboxes":                           {doc: `{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"SandboxList","metadata":{"resourceVersion":"9"},"items":[` + sandbox + `,` + sandbox + `]}`, into: &sandboxv1beta1.SandboxList{}},
		"an empty list":                                 {doc: `{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"SandboxList","metadata":{},"items":[]}`, into: &sandboxv1beta1.SandboxList{}},
		"a CalibanTask with its pin and status":         {scheme: calibanscheme.Scheme, doc: tk},
		"a CalibanTask into a typed object":             {scheme: calibanscheme.Scheme, doc: tk, into: &calibanv1alpha1.CalibanTask{}},
		"a Status":                                      {doc: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"gone","reason":"Expired","code":410}`},
		"a watch event":                                 {doc: `{"type":"ADDED","object":` + sandbox + `}`, into: &metav1.WatchEvent{}},
		"no kind, into a typed object":                  {doc: `{"metadata":{"name":"a"},"spec":{"service":true}}`, into: &sandboxv1beta1.Sandbox{}},
		"no kind and nothing to decode into":            {doc: `{"metadata":{"name":"a"}}`},
		"a kind no scheme knows":                        {doc: `{"apiVersion":"x/v1","kind":"Nothing","metadata":{"name":"a"}}`},
		"into an object that holds other values":        {doc: sb + `"metadata":{"name":"a"}}`, into: &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "old", Labels: map[string]string{"a": "b"}}, Spec: sandboxv1beta1.SandboxSpec{Service: new(true)}}},
		"into an unstructured object":                   {doc: sandbox, into: &unstructured.Unstructured{}},
		"members named in another case":                 {doc: sb + `"Metadata":{"name":"a"},"metadata":{"Name":"b"}}`},
		"a member twice":                                {doc: sb + `"metadata":{"name":"a","name":"b","labels":{"x":"1"},"labels":{"y":"2"}}}`},
		"unknown members":                               {doc: sb + `"metadata":{"name":"a","futureField":{"x":[1,2]}},"futureTop":true}`},
		"null members":                                  {doc: sb + `"metadata":null,"spec":null,"status":{"conditions":null}}`},
		"invalid UTF-8 in a string":                     {doc: sb + "\"metadata\":{\"name\":\"a\xff\xfeb\"}}"},
		"escapes in strings":                            {doc: sb + `"metadata":{"name":"a\u0062\n\"\\\/","annotations":{"e":"\ud83d\ude00"}}}`},
		"a lone surrogate escape":                       {doc: sb + `"metadata":{"name":"\ud800"}}`},
		"a string where a number belongs":               {doc: sb + `"spec":{"podTemplate":{"spec":{"priority":"1"}}}}`},
		"a fraction where an integer belongs":           {doc: sb + `"spec":{"podTemplate":{"spec":{"priority":1.5}}}}`},
		"an integral fraction where an integer belongs": {doc: sb + `"spec":{"podTemplate":{"spec":{"priority":1.0}}}}`},
		"an exponent where an integer belongs":          {doc: sb + `"spec":{"podTemplate":{"spec":{"priority":1e0}}}}`},
		"an integer too large":                          {doc: sb + `"spec":{"podTemplate":{"spec":{"priority":99999999999}}}}`},
		"a negative zero":                               {doc: sb + `"spec":{"podTemplate":{"spec":{"priority":-0}}}}`},
		"an object where a string belongs":              {doc: sb + `"metadata":{"name":{}}}`},
		"a bad time":                                    {doc: sb + `"metadata":{"creationTimestamp":"yesterday"}}`},
		"a bad quantity":                                {doc: sb + `"spec":{"podTemplate":{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"lots"}}}]}}}}`},
		"trailing data":                                 {doc: sb + `"metadata":{"name":"a"}} {}`},
		"truncated":                                     {doc: sb + `"metadata":{"name":"a"`},
		"not an object":                                 {doc: `["apiVersion","kind"]`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			scheme := tc.scheme
			if scheme == nil {
				scheme = sandboxScheme
			}
			want, got, wantErr, err := decodeBoth(scheme, []byte(tc.doc), tc.into)
			agree(t, []byte(tc.doc), want, got, wantErr, err)
		})
	}
}

// The fast path must be the one taken for what the apiserver sends, or the
// agreement above would prove nothing about it.
func TestTheV2DecoderTakesWhatTheApiserverSends(t *testing.T) {
	d := newJSONCodecs(sandboxScheme).info.Serializer.(v2Decoder)
	for name, doc := range map[string][]byte{"a Sandbox": sandboxAsServed(t), "a list": []byte(`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"SandboxList","metadata":{},"items":[]}`)} {
		if _, _, ok := d.decodeTyped(doc, nil, nil); !ok {
			t.Errorf("%s was left to client-go's decoder", name)
		}
	}
	tasks := newJSONCodecs(calibanscheme.Scheme).info.Serializer.(v2Decoder)
	if _, _, ok := tasks.decodeTyped(taskAsServed(t), nil, &calibanv1alpha1.CalibanTask{}); !ok {
		t.Error("a CalibanTask was left to client-go's decoder")
	}
}

func FuzzTheV2DecoderAgreesWithClientGo(f *testing.F) {
	f.Add(sandboxAsServed(f))
	for _, seed := range []string{
		`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"service":true,"podTemplate":{"spec":{"priority":1}}}}`,
		`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"SandboxList","items":[{"metadata":{"name":"a"}}]}`,
		`{"kind":"Status","apiVersion":"v1","code":409}`,
		`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","status":{"conditions":[{"type":"Ready","lastTransitionTime":"2026-09-01T12:00:05Z"}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		want, got, wantErr, err := decodeBoth(sandboxScheme, doc, nil)
		agree(t, doc, want, got, wantErr, err)
		want, got, wantErr, err = decodeBoth(sandboxScheme, doc, &sandboxv1beta1.Sandbox{})
		agree(t, doc, want, got, wantErr, err)
	})
}

// client-go's decoder merges a document into what into holds, so a v2
// decode that fails halfway must leave into as it found it before that
// decoder gets it.
func TestAFailedV2DecodeLeavesIntoAsItWas(t *testing.T) {
	d := newJSONCodecs(sandboxScheme).info.Serializer.(v2Decoder)
	into := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "kept", Labels: map[string]string{"a": "b"}}}
	want := into.DeepCopy()
	// metadata decodes, then spec.service (a bool) fails.
	doc := `{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"namespace":"half","labels":{"c":"d"}},"spec":{"service":"yes"}}`
	if _, _, ok := d.decodeTyped([]byte(doc), nil, into); ok {
		t.Fatal("v2 decoded a string into a bool")
	}
	if !reflect.DeepEqual(want, into) {
		t.Errorf("into after the failed decode:\n%+v\nwant\n%+v", into, want)
	}
}
