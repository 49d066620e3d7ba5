package operator

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	quantityType    = reflect.TypeFor[resource.Quantity]()
	timeType        = reflect.TypeFor[metav1.Time]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
)

// holds reports whether live, an object of the same Go type as desired,
// carries every value desired sets: what an apply of desired would leave
// unchanged. It reads the typed objects in place, with no conversion, so a
// steady-state sync costs microseconds rather than an unstructured round
// trip.
//
// "Sets" follows the apply body: a zero scalar, an empty list or map and a
// nil pointer are not sent, so they are not compared (the server may have
// defaulted them); a value behind a pointer, in a list or in a map is sent
// even when zero. Lists must match element by element with the same length,
// maps by the desired keys. What desired no longer sets at all is not seen
// here: the applied-hash annotation covers that.
func holds(live, desired any) bool {
	l, d := reflect.ValueOf(live), reflect.ValueOf(desired)
	if !l.IsValid() || !d.IsValid() || l.Type() != d.Type() {
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
		if live.IsNil() {
			return false
		}
		if live.Elem().Type() != desired.Elem().Type() {
			return false
		}
		return holdsValue(live.Elem(), desired.Elem(), true)
	case reflect.Struct:
		switch desired.Type() {
		case quantityType:
			d, l := desired.Interface().(resource.Quantity), live.Interface().(resource.Quantity)
			return (!explicit && d.IsZero()) || l.Cmp(d) == 0
		case timeType:
			d, l := desired.Interface().(metav1.Time), live.Interface().(metav1.Time)
			return d.IsZero() || l.Equal(&d)
		case intOrStringType:
			return (!explicit && desired.IsZero()) || live.Interface() == desired.Interface()
		}
		for i := range desired.NumField() {
			if !desired.Type().Field(i).IsExported() {
				continue
			}
			if !holdsValue(live.Field(i), desired.Field(i), false) {
				return false
			}
		}
		return true
	case reflect.Map:
		for it := desired.MapRange(); it.Next(); {
			lv := live.MapIndex(it.Key())
			if !lv.IsValid() || !holdsValue(lv, it.Value(), true) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if desired.Len() == 0 {
			return true
		}
		if live.Len() != desired.Len() {
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
		return live.Equal(desired)
	}
}
