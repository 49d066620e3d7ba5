package operator

import (
	"bytes"
	"encoding/json"
	"strings"

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
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return kjson.DefaultMetaFactory.Interpret(data)
	}
	var apiVersion, kind string
	envelope := false // the first member is "type"
	for i := 0; dec.More(); i++ {
		k, err := dec.Token()
		if err != nil {
			return kjson.DefaultMetaFactory.Interpret(data)
		}
		key, _ := k.(string)
		v, err := dec.Token()
		if err != nil {
			return kjson.DefaultMetaFactory.Interpret(data)
		}
		if _, nested := v.(json.Delim); nested {
			if envelope && i == 1 && key == "object" {
				break // a watch event's envelope
			}
			// The answer may lie beyond a nested value: read it all.
			return kjson.DefaultMetaFactory.Interpret(data)
		}
		envelope = i == 0 && key == "type"
		// Matched like encoding/json matches them, ignoring case.
		s, _ := v.(string)
		switch {
		case strings.EqualFold(key, "apiVersion"):
			apiVersion = s
		case strings.EqualFold(key, "kind"):
			kind = s
		}
		if apiVersion != "" && kind != "" {
			break
		}
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	return &schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}, nil
}

// jsonCodecs is a runtime.NegotiatedSerializer for clients of custom
// resources: JSON alone, no conversion (what a generated clientset's
// WithoutConversion codec factory does), with leadingKind.
type jsonCodecs struct {
	scheme *runtime.Scheme
	info   runtime.SerializerInfo
}

func newJSONCodecs(scheme *runtime.Scheme) jsonCodecs {
	s := kjson.NewSerializerWithOptions(leadingKind{}, scheme, scheme, kjson.SerializerOptions{})
	return jsonCodecs{scheme: scheme, info: runtime.SerializerInfo{
		MediaType: runtime.ContentTypeJSON, MediaTypeType: "application", MediaTypeSubType: "json",
		EncodesAsText: true, Serializer: s,
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: s, Framer: kjson.Framer},
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
