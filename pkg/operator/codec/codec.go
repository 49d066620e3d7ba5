// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package codec

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// Custom resources travel as JSON, and decoding it is most of what the
// operator's CPU does: every watch event of a task or a Sandbox. client-go's
// JSON serializer first reads a document's apiVersion and kind with a full
// encoding/json pass, then decodes it in a second; for a watch event it does
// so for the envelope and again for the object inside, before the object's
// own decode. The custom resources' clients here use the same serializer
// with leadingKind, which stops reading as soon as it knows the answer.

// leadingKind finds a JSON object's apiVersion and kind among its leading
// members. The apiserver writes a custom resource's members in sorted order,
// so apiVersion and kind come first, and a watch event's envelope is
// {"type":…,"object":{…}}, whose kind comes from the type it is decoded
// into. Anything else is read in full, as client-go would. A document that
// repeats apiVersion or kind (which no apiserver writes, and strict decoding
// rejects) may get the first value where client-go takes the last.
type leadingKind struct{}

func (leadingKind) Interpret(data []byte) (*schema.GroupVersionKind, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '{' {
		return kjson.DefaultMetaFactory.Interpret(data)
	}
	var apiVersion, kind string
	envelope := false // the first member is "type"
members:
	for i := 0; apiVersion == "" || kind == ""; i++ {
		if dec.PeekKind() == '}' {
			break
		}
		k, err := dec.ReadToken()
		if err != nil {
			return kjson.DefaultMetaFactory.Interpret(data)
		}
		key := k.String()
		if next := dec.PeekKind(); next == '{' || next == '[' {
			if envelope && i == 1 && key == "object" {
				break members // a watch event's envelope
			}
			// The answer may lie beyond a nested value: read it all.
			return kjson.DefaultMetaFactory.Interpret(data)
		}
		v, err := dec.ReadToken()
		if err != nil {
			return kjson.DefaultMetaFactory.Interpret(data)
		}
		envelope = i == 0 && key == "type"
		// Matched like encoding/json matches them, ignoring case.
		isVersion, isKind := strings.EqualFold(key, "apiVersion"), strings.EqualFold(key, "kind")
		if (isVersion || isKind) && v.Kind() != '"' {
			// A number, a bool or null: encoding/json refuses the first
			// two and skips the last; client-go's answer is the answer.
			return kjson.DefaultMetaFactory.Interpret(data)
		}
		switch {
		case isVersion:
			apiVersion = v.String()
		case isKind:
			kind = v.String()
		}
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	return &schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}, nil
}

// watchEventSerializer decodes a watch event's envelope as the apiserver
// writes it, {"type":"ADDED","object":{…}}, by its fixed shape: the object's
// bytes are what lies between the prefix and the closing brace. client-go's
// serializer scans the whole event once to check it and again to find where
// the object ends, before the object's own decode scans it a third time.
// Anything else is decoded by the wrapped serializer. A member after the
// object (which no apiserver writes) is left inside the object's bytes,
// whose decode then fails: it is never read as a different object.
type watchEventSerializer struct{ runtime.Serializer }

const (
	watchTypePrefix   = `{"type":"`
	watchObjectMember = `","object":`
)

func (s watchEventSerializer) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if event, ok := into.(*metav1.WatchEvent); ok {
		if typ, object, ok := splitWatchEvent(data); ok {
			event.Type = typ
			event.Object = runtime.RawExtension{Raw: bytes.Clone(object)}
			return event, &watchEventKind, nil
		}
	}
	return s.Serializer.Decode(data, gvk, into)
}

var watchEventKind = metav1.SchemeGroupVersion.WithKind("WatchEvent")

// splitWatchEvent returns the type and the object's bytes of an envelope
// of exactly the shape the apiserver writes; ok is false for anything else.
func splitWatchEvent(data []byte) (typ string, object []byte, ok bool) {
	data = bytes.TrimRight(data, " \t\r\n")
	rest, found := bytes.CutPrefix(data, []byte(watchTypePrefix))
	if !found {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end <= 0 {
		return "", nil, false
	}
	for _, c := range rest[:end] {
		if c < 'A' || c > 'Z' {
			return "", nil, false // not a plain event type: no escapes to undo here
		}
	}
	typ = string(rest[:end])
	object, found = bytes.CutPrefix(rest[end:], []byte(watchObjectMember))
	if !found || len(object) < 3 || object[0] != '{' || object[len(object)-1] != '}' || object[len(object)-2] != '}' {
		return "", nil, false
	}
	return typ, object[:len(object)-1], true
}

// v2Decoder is client-go's JSON serializer with the unmarshalling of typed
// objects done by encoding/json/v2 (github.com/go-json-experiment/json, the
// standard library's implementation from Go 1.27 on), which decodes in one
// pass what encoding/json checks in one and decodes in a second, with far
// fewer allocations. Its options keep what client-go's decoder accepts:
// member names matched case-sensitively, unknown members ignored,
// duplicate names and invalid UTF-8 allowed. Anything it does not take, or
// fails on, goes to client-go's serializer, whose answer (object or error)
// is then the answer: v2 never turns into an error what client-go decodes.
type v2Decoder struct {
	runtime.Serializer
	scheme *runtime.Scheme
}

var v1Lenient = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

func (d v2Decoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if obj, gvk, ok := d.decodeTyped(data, defaults, into); ok {
		return obj, gvk, nil
	}
	return d.Serializer.Decode(data, defaults, into)
}

// decodeTyped decodes data into a registered type, as client-go's
// serializer would choose it; ok is false when it does not apply or fails.
func (d v2Decoder) decodeTyped(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, bool) {
	switch into.(type) {
	case *runtime.Unknown, runtime.Unstructured:
		return nil, nil, false
	}
	actual, err := leadingKind{}.Interpret(data)
	if err != nil {
		return nil, nil, false
	}
	if defaults != nil {
		*actual = withDefaults(*actual, *defaults)
	}
	if into != nil {
		kinds, _, err := d.scheme.ObjectKinds(into)
		if err != nil {
			return nil, nil, false
		}
		*actual = withDefaults(*actual, kinds[0])
	}
	if actual.Kind == "" || actual.Version == "" {
		return nil, nil, false
	}
	obj, err := runtime.UseOrCreateObject(d.scheme, d.scheme, *actual, into)
	if err != nil {
		return nil, nil, false
	}
	var before runtime.Object
	if obj == into {
		// What into held, for client-go's decoder to merge into should v2
		// fail halfway. Callers pass empty objects: the copy is cheap.
		before = into.DeepCopyObject()
	}
	if err := jsonv2.Unmarshal(data, obj, v1Lenient); err != nil {
		if before != nil {
			reflect.ValueOf(into).Elem().Set(reflect.ValueOf(before).Elem())
		}
		return nil, nil, false
	}
	return obj, actual, true
}

// withDefaults fills what actual lacks from defaults, as client-go's JSON
// serializer does.
func withDefaults(actual, defaults schema.GroupVersionKind) schema.GroupVersionKind {
	if actual.Kind == "" {
		actual.Kind = defaults.Kind
	}
	if actual.Version == "" && actual.Group == "" {
		actual.Group, actual.Version = defaults.Group, defaults.Version
	}
	if actual.Version == "" && actual.Group == defaults.Group {
		actual.Version = defaults.Version
	}
	return actual
}

// jsonCodecs is a runtime.NegotiatedSerializer for clients of custom
// resources: JSON alone, no conversion (what a generated clientset's
// WithoutConversion codec factory does), decoded by v2Decoder with
// leadingKind and, for watch streams, objectFramer and watchEventSerializer.
type jsonCodecs struct {
	scheme *runtime.Scheme
	info   runtime.SerializerInfo
}

// JSON is the codecs of a REST client for the custom resources scheme
// knows: client-go's JSON serializer with this package's shortcuts.
func JSON(scheme *runtime.Scheme) runtime.NegotiatedSerializer { return newJSONCodecs(scheme) }

func newJSONCodecs(scheme *runtime.Scheme) jsonCodecs {
	s := v2Decoder{Serializer: kjson.NewSerializerWithOptions(leadingKind{}, scheme, scheme, kjson.SerializerOptions{}), scheme: scheme}
	return jsonCodecs{scheme: scheme, info: runtime.SerializerInfo{
		MediaType: runtime.ContentTypeJSON, MediaTypeType: "application", MediaTypeSubType: "json",
		EncodesAsText: true, Serializer: s,
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: watchEventSerializer{s}, Framer: objectFramer{}},
	}}
}

func (c jsonCodecs) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{c.info}
}

func (c jsonCodecs) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return runtime.WithVersionEncoder{Version: gv, Encoder: e, ObjectTyper: c.scheme}
}

func (jsonCodecs) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return runtime.WithoutVersionDecoder{Decoder: d}
}

// objectFramer splits a watch stream into its JSON objects by counting
// braces outside strings, a byte loop, where client-go's JSON framer runs
// encoding/json's full scanner over every byte only to find where each
// object ends (the decode that follows checks the JSON anyway).
type objectFramer struct{}

func (objectFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &objectFrameReader{r: r, br: bufio.NewReaderSize(r, 32<<10)}
}

func (objectFramer) NewFrameWriter(w io.Writer) io.Writer { return kjson.Framer.NewFrameWriter(w) }

type objectFrameReader struct {
	r  io.ReadCloser
	br *bufio.Reader
	// frame is the current object; remaining, what of it Read has not
	// handed out yet.
	frame, remaining []byte
}

// Read follows client-go's framer contract: one whole object per call, or
// as much as fits with io.ErrShortBuffer and the rest on the next calls.
func (f *objectFrameReader) Read(data []byte) (int, error) {
	if len(f.remaining) == 0 {
		if err := f.next(); err != nil {
			return 0, err
		}
		f.remaining = f.frame
	}
	n := copy(data, f.remaining)
	f.remaining = f.remaining[n:]
	if len(f.remaining) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// next reads the next object into f.frame. io.EOF between objects is the
// stream's end; within one, io.ErrUnexpectedEOF.
func (f *objectFrameReader) next() error {
	f.frame = f.frame[:0]
	for {
		b, err := f.br.ReadByte()
		if err != nil {
			return err
		}
		if b == ' ' || b == '\n' || b == '\r' || b == '\t' {
			continue
		}
		if b != '{' {
			return fmt.Errorf("reading a watch stream: want a JSON object, found %q", b)
		}
		f.frame = append(f.frame, b)
		break
	}
	depth, inString, escaped := 1, false, false
	for depth > 0 {
		chunk, err := f.br.Peek(max(1, f.br.Buffered()))
		if len(chunk) == 0 {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		i := 0
		for ; i < len(chunk) && depth > 0; i++ {
			switch c := chunk[i]; {
			case inString:
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				depth--
			}
		}
		f.frame = append(f.frame, chunk[:i]...)
		_, _ = f.br.Discard(i)
	}
	return nil
}

func (f *objectFrameReader) Close() error { return f.r.Close() }

// ResourceVersion reads an object's metadata.resourceVersion, and nothing
// else, from its JSON: what a write's answer tells a caller that knows the
// rest of the object already. It stops there: every member before it is
// skipped, not decoded, and nothing after it is read (the apiserver writes
// a custom resource's members in sorted order, so a task's spec and status
// come after). Names match as v2Decoder matches them; of a name given
// twice, which no apiserver writes, the first counts.
func ResourceVersion(data []byte) (string, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if err := enterObject(dec); err != nil {
		return "", err
	}
	for inMetadata := false; ; {
		name, err := dec.ReadToken()
		if err != nil {
			return "", err
		}
		if name.Kind() == '}' {
			return "", errNoResourceVersion
		}
		switch key := name.String(); {
		case !inMetadata && key == "metadata":
			if err := enterObject(dec); err != nil {
				return "", fmt.Errorf("metadata: %w", err)
			}
			inMetadata = true
		case inMetadata && key == "resourceVersion":
			v, err := dec.ReadToken()
			if err != nil {
				return "", err
			}
			if v.Kind() != '"' || v.String() == "" {
				return "", errNoResourceVersion
			}
			return v.String(), nil
		default:
			if err := dec.SkipValue(); err != nil {
				return "", err
			}
		}
	}
}

var errNoResourceVersion = errors.New("the object has no metadata.resourceVersion")

// enterObject reads the opening brace of an object.
func enterObject(dec *jsontext.Decoder) error {
	t, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if t.Kind() != '{' {
		return fmt.Errorf("not an object but %v", t.Kind())
	}
	return nil
}
