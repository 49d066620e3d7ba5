// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package freshness

import (
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

var (
	quantityType    = reflect.TypeFor[resource.Quantity]()
	timeType        = reflect.TypeFor[metav1.Time]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	typeMetaACType  = reflect.TypeFor[metav1ac.TypeMetaApplyConfiguration]()
)

// holds is the comparator behind a view's Holds: whether live carries
// every value desired sets, what an apply of desired would leave
// unchanged. desired is an object of live's Go
// type, or the apply configuration of that type (a generated type whose
// name ends in ApplyConfiguration), whose fields are matched to live's by
// JSON name. It reads both in place, with no conversion, so a
// steady-state sync costs microseconds rather than an unstructured round
// trip, and checking an apply configuration needs no typed copy of it.
//
// "Sets" follows the apply body: a zero scalar, an empty list or map and a
// nil pointer are not sent, so they are not compared (the server may have
// defaulted them); a value behind a pointer, in a list or in a map is sent
// even when zero. Lists must match element by element with the same length,
// maps by the desired keys. What desired no longer sets at all is not seen
// here: the applied-hash annotation covers that. The type meta of an apply
// configuration is not compared: the cache's objects carry none.
func holds(live, desired any) bool {
	l, d := reflect.ValueOf(live), reflect.ValueOf(desired)
	if !l.IsValid() || !d.IsValid() {
		return false
	}
	return holdsValue(l, d, true)
}

// holdsValue is holds for one value; explicit says desired's value is sent
// even when zero (it is behind a pointer, or an element of a list or map).
func holdsValue(live, desired reflect.Value, explicit bool) bool {
	switch desired.Kind() {
	case reflect.Pointer, reflect.Interface:
		if desired.IsNil() {
			return true
		}
		if live.Kind() == reflect.Pointer || live.Kind() == reflect.Interface {
			if live.IsNil() {
				return false
			}
			live = live.Elem()
		}
		return holdsValue(live, desired.Elem(), true)
	case reflect.Struct:
		if live.Kind() != reflect.Struct {
			return false
		}
		switch desired.Type() {
		case quantityType:
			d := desired.Interface().(resource.Quantity)
			l, ok := live.Interface().(resource.Quantity)
			return (!explicit && d.IsZero()) || (ok && l.Cmp(d) == 0)
		case timeType:
			d := desired.Interface().(metav1.Time)
			l, ok := live.Interface().(metav1.Time)
			return d.IsZero() || (ok && l.Equal(&d))
		case intOrStringType:
			return (!explicit && desired.IsZero()) || live.Interface() == desired.Interface()
		}
		if live.Type() == desired.Type() {
			for i := range desired.NumField() {
				if desired.Type().Field(i).IsExported() && !holdsValue(live.Field(i), desired.Field(i), false) {
					return false
				}
			}
			return true
		}
		if !strings.HasSuffix(desired.Type().Name(), "ApplyConfiguration") {
			return false
		}
		for _, f := range fieldPairs(live.Type(), desired.Type()) {
			d, ok := fieldAt(desired, f.desired)
			if !ok {
				continue // behind a nil embedded pointer: nothing sent
			}
			if f.live == nil {
				if d.IsZero() {
					continue
				}
				return false
			}
			l, ok := fieldAt(live, f.live)
			if !ok || !holdsValue(l, d, false) {
				return false
			}
		}
		return true
	case reflect.Map:
		if live.Kind() != reflect.Map {
			return false
		}
		for it := desired.MapRange(); it.Next(); {
			k := it.Key()
			if k.Type() != live.Type().Key() {
				if !k.Type().ConvertibleTo(live.Type().Key()) {
					return false
				}
				k = k.Convert(live.Type().Key())
			}
			lv := live.MapIndex(k)
			if !lv.IsValid() || !holdsValue(lv, it.Value(), true) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if desired.Len() == 0 {
			return true
		}
		if (live.Kind() != reflect.Slice && live.Kind() != reflect.Array) || live.Len() != desired.Len() {
			return false
		}
		for i := range desired.Len() {
			if !holdsValue(live.Index(i), desired.Index(i), true) {
				return false
			}
		}
		return true
	default:
		if !explicit && desired.IsZero() {
			return true
		}
		if live.Type() != desired.Type() {
			if live.Kind() != desired.Kind() || !desired.Type().ConvertibleTo(live.Type()) {
				return false
			}
			desired = desired.Convert(live.Type())
		}
		return live.Equal(desired)
	}
}

// fieldPair is a field of an apply configuration and the field of the
// same JSON name in the object type (nil when it has none).
type fieldPair struct {
	desired, live []int
}

var fieldPairCache sync.Map // [2]reflect.Type{live, desired} → []fieldPair

// fieldPairs matches desired's fields to live's by JSON name, once per pair
// of types: a steady-state check then walks index paths instead of
// looking names up.
func fieldPairs(live, desired reflect.Type) []fieldPair {
	key := [2]reflect.Type{live, desired}
	if p, ok := fieldPairCache.Load(key); ok {
		return p.([]fieldPair)
	}
	liveFields := jsonFields(live)
	var pairs []fieldPair
	for _, f := range jsonFields(desired).list {
		p := fieldPair{desired: f.index}
		if lf, ok := liveFields.byName[f.name]; ok {
			p.live = lf.index
		}
		pairs = append(pairs, p)
	}
	p, _ := fieldPairCache.LoadOrStore(key, pairs)
	return p.([]fieldPair)
}

// fieldAt is v's field at index, through embedded structs; false when an
// embedded pointer on the way is nil.
func fieldAt(v reflect.Value, index []int) (reflect.Value, bool) {
	if len(index) == 1 {
		return v.Field(index[0]), true
	}
	f, err := v.FieldByIndexErr(index)
	return f, err == nil
}

// jsonField is a field of a struct as its JSON encoding names it, with the
// path to it through inlined embedded structs.
type jsonField struct {
	name  string
	index []int
}

type structFields struct {
	list   []jsonField
	byName map[string]jsonField
}

var jsonFieldCache sync.Map // reflect.Type → *structFields

// jsonFields lists t's fields by JSON name, embedded structs without a name
// inlined, as encoding/json sees them for the API types (a name taken at a
// shallower level wins). An apply configuration's type meta is left out.
func jsonFields(t reflect.Type) *structFields {
	if f, ok := jsonFieldCache.Load(t); ok {
		return f.(*structFields)
	}
	fs := &structFields{byName: map[string]jsonField{}}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		var inline []reflect.StructField
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" || (!sf.IsExported() && !sf.Anonymous) {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			path := append(append([]int(nil), index...), i)
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				if ft != typeMetaACType {
					sf.Index = path
					inline = append(inline, sf)
				}
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if _, taken := fs.byName[name]; !taken {
				f := jsonField{name: name, index: path}
				fs.byName[name] = f
				fs.list = append(fs.list, f)
			}
		}
		for _, sf := range inline {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			walk(ft, sf.Index)
		}
	}
	walk(t, nil)
	f, _ := jsonFieldCache.LoadOrStore(t, fs)
	return f.(*structFields)
}
