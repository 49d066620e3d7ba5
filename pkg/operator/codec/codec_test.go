// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package codec

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	restclientwatch "k8s.io/client-go/rest/watch"

	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

// sandboxScheme knows the Sandbox view, as the Sandbox client's does.
var sandboxScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := sandboxv1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// leadingKind must give client-go's answer for every valid document but a
// watch event's envelope ("type", then "object"), which it takes to have no
// kind of its own without reading on; it may only read less.
func TestLeadingKindAgreesWithClientGo(t *testing.T) {
	tests := map[string]string{
		"a custom resource as the apiserver writes it": `{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":"a"},"spec":{}}`,
		"kind before apiVersion":                       `{"kind":"CalibanTask","apiVersion":"caliban.caliban-ai.dev/v1alpha1","spec":{"x":1}}`,
		"a core kind, no group":                        `{"apiVersion":"v1","kind":"Status","status":"Failure","code":409}`,
		"a list, whose kind follows its items":         `{"apiVersion":"agents.x-k8s.io/v1beta1","items":[{"apiVersion":"x/v1","kind":"Inner"}],"kind":"SandboxList","metadata":{}}`,
		"kind after a nested object":                   `{"metadata":{"kind":"Decoy"},"apiVersion":"x/v1","kind":"Real"}`,
		"a watch event's envelope":                     `{"type":"ADDED","object":{"apiVersion":"x/v1","kind":"Inner"}}`,
		"a type member that is not an envelope's":      `{"apiVersion":"x/v1","type":"Opaque","data":{},"kind":"Secret"}`,
		"scalars of every sort before the kind":        `{"n":1.5,"b":true,"z":null,"s":"x","apiVersion":"x/v1","kind":"K"}`,
		"no kind at all":                               `{"metadata":{},"spec":{}}`,
		"an empty object":                              `{}`,
		"escaped strings":                              `{"apiVersion":"x\/v1","kind":"K\u0069nd"}`,
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			want, wantErr := kjson.DefaultMetaFactory.Interpret([]byte(doc))
			got, err := leadingKind{}.Interpret([]byte(doc))
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("error %v, client-go's %v", err, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("kind (-client-go +leadingKind):\n%s", diff)
			}
		})
	}
	// The one exception: an envelope is not read past its object.
	got, err := leadingKind{}.Interpret([]byte(`{"type":"ADDED","object":{},"kind":"Outer","apiVersion":"x/v1"}`))
	if err != nil || *got != (schema.GroupVersionKind{}) {
		t.Errorf("an envelope's kind = %v, %v; want none", got, err)
	}
}

// isEnvelope reports whether doc's first two members are "type", a
// scalar, then "object", an object or array.
func isEnvelope(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	var toks []any
	for range 5 {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		toks = append(toks, tok)
	}
	_, typeNested := toks[2].(json.Delim)
	_, objectNested := toks[4].(json.Delim)
	return toks[0] == json.Delim('{') && toks[1] == "type" && !typeNested && toks[3] == "object" && objectNested
}

// repeatsKind reports whether doc's top level has more than one member
// named apiVersion or kind, in any case.
func repeatsKind(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	seen := map[string]int{}
	depth, expectKey := 0, false
	for {
		tok, err := dec.Token()
		if err != nil {
			return seen["apiversion"] > 1 || seen["kind"] > 1
		}
		switch tok {
		case json.Delim('{'):
			depth++
			expectKey = depth == 1
			continue
		case json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		default:
			if depth == 1 && expectKey {
				seen[strings.ToLower(tok.(string))]++
				expectKey = false
				continue
			}
		}
		expectKey = depth == 1
	}
}

func FuzzLeadingKindAgreesWithClientGo(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"a/v1","kind":"K","spec":{}}`,
		`{"type":"ADDED","object":{"kind":"K"}}`,
		`{"items":[],"kind":"L","apiVersion":"v1"}`,
		`{"type":1,"object":[],"kind":"K"}`,
		`[]`, `"x"`, `{"kind":"K"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		want, wantErr := kjson.DefaultMetaFactory.Interpret(doc)
		if wantErr != nil {
			return // invalid JSON: the decode that follows fails either way
		}
		if repeatsKind(doc) {
			return // the documented exception
		}
		got, err := leadingKind{}.Interpret(doc)
		if err != nil {
			t.Fatalf("error %v on %q, which client-go reads as %v", err, doc, want)
		}
		if *got != *want && !(isEnvelope(doc) && *got == schema.GroupVersionKind{}) {
			t.Fatalf("%q: kind %v, client-go's %v", doc, got, want)
		}
	})
}

// BenchmarkSandboxWatchEvent decodes Sandbox watch events the way the REST
// client does (frame, envelope, object), with client-go's own codecs, with
// jsonCodecs, and with jsonCodecs short of one of its parts.
func BenchmarkSandboxWatchEvent(b *testing.B) {
	sb := &unstructured.Unstructured{}
	if err := sb.UnmarshalJSON(sandboxAsServed(b)); err != nil {
		b.Fatal(err)
	}
	sb.SetResourceVersion("12345")
	sb.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "caliban-operator", Operation: metav1.ManagedFieldsOperationApply,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}},"f:spec":{"f:podTemplate":{}}}`)}}})
	// As the apiserver writes it: the envelope's members in its struct's
	// order, the custom resource's sorted (a map).
	event, err := json.Marshal(metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Object: sb}})
	if err != nil {
		b.Fatal(err)
	}
	withoutShortcut := newJSONCodecs(sandboxScheme)
	withoutShortcut.info.StreamSerializer = &runtime.StreamSerializerInfo{
		Serializer: withoutShortcut.info.Serializer, Framer: withoutShortcut.info.StreamSerializer.Framer,
	}
	withoutV2 := newJSONCodecs(sandboxScheme)
	v1 := withoutV2.info.Serializer.(v2Decoder).Serializer
	withoutV2.info.Serializer = v1
	withoutV2.info.StreamSerializer = &runtime.StreamSerializerInfo{
		EncodesAsText: true, Serializer: watchEventSerializer{v1}, Framer: objectFramer{},
	}
	for name, codecs := range map[string]runtime.NegotiatedSerializer{
		"client-go codecs":                    serializer.NewCodecFactory(sandboxScheme).WithoutConversion(),
		"jsonCodecs without the envelope cut": withoutShortcut,
		"jsonCodecs without encoding/json/v2": withoutV2,
		"jsonCodecs":                          newJSONCodecs(sandboxScheme),
	} {
		b.Run(name, func(b *testing.B) {
			info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
			embedded := codecs.DecoderToVersion(info.Serializer, sandboxv1beta1.SchemeGroupVersion)
			// One watch stream carries many events: a decoder per 1,000.
			const perStream = 1000
			stream := bytes.Repeat(append(event, '\n'), perStream)
			var d *restclientwatch.Decoder
			b.SetBytes(int64(len(event)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%perStream == 0 {
					frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
					d = restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), embedded)
				}
				i++
				if _, obj, err := d.Decode(); err != nil || obj.(*sandboxv1beta1.Sandbox).ResourceVersion != "12345" {
					b.Fatalf("decoded %v, %v", obj, err)
				}
			}
		})
	}
}

// frames reads every frame of stream through framer, delivering the
// stream a byte at a time and reading into a buffer of size bufSize that
// grows on io.ErrShortBuffer, as client-go's streaming decoder does.
func frames(framer runtime.Framer, stream []byte, bufSize int) ([]string, error) {
	r := framer.NewFrameReader(io.NopCloser(iotest.OneByteReader(bytes.NewReader(stream))))
	var out []string
	for {
		buf, base := make([]byte, bufSize), 0
		for {
			n, err := r.Read(buf[base:])
			if err == io.ErrShortBuffer {
				base += n
				buf = append(buf, make([]byte, len(buf))...)
				continue
			}
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			base += n
			break
		}
		out = append(out, string(buf[:base]))
	}
}

func TestObjectFramerCutsWhereClientGoDoes(t *testing.T) {
	tests := map[string]string{
		"watch events, one per line":               `{"type":"ADDED","object":{"kind":"K","spec":{"a":[1,{"b":2}]}}}` + "\n" + `{"type":"DELETED","object":{}}` + "\n",
		"braces and quotes inside strings":         `{"s":"}{][\"\\","t":"\\\\"}{"u":"\\\"}"}`,
		"whitespace of every sort between objects": " \t\r\n{}\n\n{\"a\":{}}  ",
		"unicode and escapes":                      `{"msg":"caf\u00e9 ☕ \n \" }"}`,
		"nothing":                                  "",
	}
	for name, stream := range tests {
		for _, size := range []int{1, 7, 1024} {
			want, wantErr := frames(kjson.Framer, []byte(stream), size)
			got, err := frames(objectFramer{}, []byte(stream), size)
			if wantErr != nil || err != nil {
				t.Fatalf("%s, buffer %d: errors %v, client-go's %v", name, size, err, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s, buffer %d: frames (-client-go +objectFramer):\n%s", name, size, diff)
			}
		}
	}
}

func TestObjectFramerFailsOnATruncatedObject(t *testing.T) {
	if _, err := frames(objectFramer{}, []byte(`{"a":{"b":1}`), 8); err != io.ErrUnexpectedEOF {
		t.Errorf("error %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := frames(objectFramer{}, []byte(`[1]`), 8); err == nil {
		t.Error("a stream of something else than objects was framed")
	}
}

func FuzzObjectFramerCutsWhereClientGoDoes(f *testing.F) {
	for _, seed := range []string{`{"a":"}"}{"b":[{}]}`, `{"s":"\\\""}` + "\n{}", ` {} `} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		want, err := frames(kjson.Framer, stream, 16)
		if err != nil {
			return // not a stream of JSON values
		}
		for _, fr := range want {
			if !strings.HasPrefix(fr, "{") {
				return // a watch stream holds objects alone
			}
		}
		got, err := frames(objectFramer{}, stream, 16)
		if err != nil {
			t.Fatalf("%q: %v, where client-go framed %q", stream, err, want)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%q: frames (-client-go +objectFramer):\n%s", stream, diff)
		}
	})
}

// watchEventSerializer must give client-go's serializer's answer for every
// envelope, taking the shortcut only for the apiserver's own shape.
func TestWatchEventSerializerAgreesWithClientGo(t *testing.T) {
	tests := map[string]struct {
		event string
		cut   bool
	}{
		"an event as the apiserver writes it": {
			event: `{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"K","metadata":{"name":"a","annotations":{"x":"}\\\""}}}}`, cut: true,
		},
		"with the newline that ends it on the wire": {event: `{"type":"ADDED","object":{"kind":"K"}}` + "\n", cut: true},
		"an error event carrying a Status":          {event: `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410}}`, cut: true},
		"members in the other order":                {event: `{"object":{"kind":"K"},"type":"ADDED"}`},
		"spaces inside the envelope":                {event: `{ "type": "ADDED", "object": {"kind":"K"} }`},
		"a space before the closing brace":          {event: `{"type":"ADDED","object":{"kind":"K"} }`},
		"an escaped type":                           {event: `{"type":"ADD\u0045D","object":{}}`},
		"an object that is a list":                  {event: `{"type":"ADDED","object":[{}]}`},
		"a null object":                             {event: `{"type":"ADDED","object":null}`},
		"no object":                                 {event: `{"type":"ADDED"}`},
		"an empty type":                             {event: `{"type":"","object":{}}`},
	}
	std := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, sandboxScheme, sandboxScheme, kjson.SerializerOptions{})
	ours := newJSONCodecs(sandboxScheme).info.StreamSerializer.Serializer
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, _, cut := splitWatchEvent([]byte(tc.event)); cut != tc.cut {
				t.Errorf("shortcut taken = %v, want %v", cut, tc.cut)
			}
			var want, got metav1.WatchEvent
			_, _, wantErr := std.Decode([]byte(tc.event), nil, &want)
			_, _, err := ours.Decode([]byte(tc.event), nil, &got)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("error %v, client-go's %v", err, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("event (-client-go +ours):\n%s", diff)
			}
		})
	}
}

func FuzzWatchEventSerializerAgreesWithClientGo(f *testing.F) {
	for _, seed := range []string{
		`{"type":"ADDED","object":{"kind":"K","spec":{"a":"}"}}}`,
		`{"type":"ADDED","object":{},"object":{"kind":"K"}}`,
		`{"type":"DELETED","object":{"a":1},"type":"ADDED"}`,
	} {
		f.Add([]byte(seed))
	}
	std := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, sandboxScheme, sandboxScheme, kjson.SerializerOptions{})
	f.Fuzz(func(t *testing.T, event []byte) {
		typ, object, cut := splitWatchEvent(event)
		if !cut {
			return // client-go's serializer decodes it
		}
		var want metav1.WatchEvent
		if _, _, err := std.Decode(event, nil, &want); err == nil && want.Type == typ && bytes.Equal(want.Object.Raw, object) {
			return
		}
		// The documented exception: what follows the object stays in its
		// bytes, which then are no valid JSON, so its decode fails.
		if json.Valid(object) {
			t.Fatalf("%q: cut into %q and %q; client-go reads %q and %q", event, typ, object, want.Type, want.Object.Raw)
		}
	})
}

func TestResourceVersionReadsMetadataAlone(t *testing.T) {
	tests := map[string]struct {
		json    string
		want    string
		wantErr bool
	}{
		"an answer as the apiserver writes it": {
			json: `{"apiVersion":"caliban.caliban-ai.dev/v1alpha1","kind":"CalibanTask","metadata":{"annotations":{"resourceVersion":"1"},` +
				`"managedFields":[{"fieldsV1":{"f:metadata":{"f:resourceVersion":{}}},"manager":"m"}],"name":"t","resourceVersion":"42","uid":"u"},` +
				`"spec":{"resourceVersion":"2"},"status":{"phase":"Running"}}`,
			want: "42",
		},
		"a version outside metadata is not the object's": {
			json: `{"resourceVersion":"7","metadata":{"name":"t","resourceVersion":"8"}}`, want: "8",
		},
		"metadata without a version":     {json: `{"metadata":{"name":"t"},"resourceVersion":"7"}`, wantErr: true},
		"no metadata":                    {json: `{"kind":"CalibanTask"}`, wantErr: true},
		"an empty version":               {json: `{"metadata":{"resourceVersion":""}}`, wantErr: true},
		"a version that is not a string": {json: `{"metadata":{"resourceVersion":42}}`, wantErr: true},
		"metadata that is not an object": {json: `{"metadata":"t"}`, wantErr: true},
		"not an object":                  {json: `["metadata"]`, wantErr: true},
		"cut short before the version":   {json: `{"metadata":{"name":"t"`, wantErr: true},
		"names match with their case":    {json: `{"Metadata":{"resourceVersion":"1"},"metadata":{"ResourceVersion":"2","resourceVersion":"3"}}`, want: "3"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ResourceVersion([]byte(tc.json))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ResourceVersion = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// On any valid document without a name given twice, ResourceVersion reads
// what a full decode of metadata.resourceVersion reads, or fails where
// that finds none.
func FuzzResourceVersionAgreesWithAFullDecode(f *testing.F) {
	for _, seed := range []string{
		`{"metadata":{"managedFields":[{"manager":"m"}],"resourceVersion":"42"},"status":{}}`,
		`{"metadata":{"annotations":{"resourceVersion":"1"}},"resourceVersion":"2"}`,
		`{"metadata":{"resourceVersion":7}}`, `{"metadata":null}`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var full struct {
			Metadata *struct {
				ResourceVersion *string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := jsonv2.Unmarshal(doc, &full); err != nil {
			return // invalid, or a name given twice: the documented exceptions
		}
		want := ""
		if full.Metadata != nil && full.Metadata.ResourceVersion != nil {
			want = *full.Metadata.ResourceVersion
		}
		got, err := ResourceVersion(doc)
		if want == "" {
			if err == nil {
				t.Fatalf("%q: version %q, a full decode finds none", doc, got)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("%q: version %q, %v; a full decode reads %q", doc, got, err, want)
		}
	})
}
