package comm

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/fxamacker/cbor/v2"
)

// CBOR has no complex numbers and the codec refuses them, so pz carries a
// complex value as a tagged pair (tags from the first-come range of the
// IANA registry's unassigned space): the real and imaginary parts, in the
// precision of the value.
const (
	tagComplex64  = 27464
	tagComplex128 = 27465
)

// marshal encodes v with the codec, complex numbers included.
func marshal(v any) ([]byte, error) {
	if v == nil || !carries(reflect.TypeOf(v), map[reflect.Type]bool{}) {
		return cbor.Marshal(v)
	}
	return cbor.Marshal(tagged(reflect.ValueOf(v)))
}

// unmarshal decodes data made by marshal into the value ptr points to.
func unmarshal(data []byte, ptr any) error {
	dst := reflect.ValueOf(ptr).Elem()
	if !carries(dst.Type(), map[reflect.Type]bool{}) {
		return decMode.Unmarshal(data, ptr)
	}
	var g any
	if err := decMode.Unmarshal(data, &g); err != nil {
		return err
	}
	return assign(dst, g)
}

// carries reports whether values of t may hold a complex number: t has a
// complex or interface type somewhere inside.
func carries(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Complex64, reflect.Complex128, reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return carries(t.Elem(), seen)
	case reflect.Map:
		return carries(t.Key(), seen) || carries(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && carries(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// tagged returns a value the codec can encode in place of v: complex
// numbers become tagged pairs; what holds them, generic slices and maps,
// and structs maps of their exported fields by name.
func tagged(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	switch t.Kind() {
	case reflect.Complex64:
		c := v.Complex()
		return cbor.Tag{Number: tagComplex64, Content: []float32{float32(real(c)), float32(imag(c))}}
	case reflect.Complex128:
		c := v.Complex()
		return cbor.Tag{Number: tagComplex128, Content: []float64{real(c), imag(c)}}
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return tagged(v.Elem())
	}
	if !carries(t, map[reflect.Type]bool{}) {
		return v.Interface()
	}
	switch t.Kind() {
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		fallthrough
	case reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = tagged(v.Index(i))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		out := make(map[any]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[tagged(it.Key())] = tagged(it.Value())
		}
		return out
	case reflect.Struct:
		out := map[string]any{}
		structFields(v, out)
		return out
	}
	return v.Interface()
}

// structFields adds v's exported fields to out by name, those of embedded
// structs flattened.
func structFields(v reflect.Value, out map[string]any) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			structFields(v.Field(i), out)
			continue
		}
		if f.IsExported() {
			out[f.Name] = tagged(v.Field(i))
		}
	}
}

// untag turns the tagged pairs inside a decoded generic value back into
// complex numbers.
func untag(g any) any {
	switch x := g.(type) {
	case cbor.Tag:
		if c, ok := complexOf(x); ok {
			return c
		}
	case []any:
		for i := range x {
			x[i] = untag(x[i])
		}
	case map[any]any:
		for k, v := range x {
			x[k] = untag(v)
		}
	}
	return g
}

// complexOf reads a tagged pair: a complex64 or complex128.
func complexOf(t cbor.Tag) (any, bool) {
	parts, ok := t.Content.([]any)
	if !ok || len(parts) != 2 || (t.Number != tagComplex64 && t.Number != tagComplex128) {
		return nil, false
	}
	re, ok1 := parts[0].(float64)
	im, ok2 := parts[1].(float64)
	if !ok1 || !ok2 {
		return nil, false
	}
	if t.Number == tagComplex64 {
		return complex64(complex(re, im)), true
	}
	return complex(re, im), true
}

// assign stores the decoded generic value g into dst, converting as the
// codec would.
func assign(dst reflect.Value, g any) error {
	if g == nil {
		dst.SetZero()
		return nil
	}
	t := dst.Type()
	switch t.Kind() {
	case reflect.Complex64, reflect.Complex128:
		tag, ok := g.(cbor.Tag)
		c, ok2 := complexOf(tag)
		if !ok || !ok2 {
			return fmt.Errorf("a %T where a %v was sent", g, t)
		}
		dst.SetComplex(reflect.ValueOf(c).Complex())
		return nil
	case reflect.Interface:
		v := reflect.ValueOf(untag(g))
		if !v.Type().AssignableTo(t) {
			return fmt.Errorf("a %v does not implement %v", v.Type(), t)
		}
		dst.Set(v)
		return nil
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := assign(p.Elem(), g); err != nil {
			return err
		}
		dst.Set(p)
		return nil
	}
	if !carries(t, map[reflect.Type]bool{}) {
		// No complex inside: let the codec convert, as it would have.
		b, err := cbor.Marshal(g)
		if err != nil {
			return err
		}
		return decMode.Unmarshal(b, dst.Addr().Interface())
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		items, ok := g.([]any)
		if !ok {
			return fmt.Errorf("a %T where a %v was sent", g, t)
		}
		if t.Kind() == reflect.Slice {
			dst.Set(reflect.MakeSlice(t, len(items), len(items)))
		} else if len(items) != t.Len() {
			return fmt.Errorf("%d elements for a %v", len(items), t)
		}
		for i, it := range items {
			if err := assign(dst.Index(i), it); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		m, ok := g.(map[any]any)
		if !ok {
			return fmt.Errorf("a %T where a %v was sent", g, t)
		}
		out := reflect.MakeMapWithSize(t, len(m))
		for k, v := range m {
			kv, vv := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
			if err := assign(kv, k); err != nil {
				return err
			}
			if err := assign(vv, v); err != nil {
				return err
			}
			out.SetMapIndex(kv, vv)
		}
		dst.Set(out)
		return nil
	case reflect.Struct:
		m, ok := g.(map[any]any)
		if !ok {
			return fmt.Errorf("a %T where a %v was sent", g, t)
		}
		return assignFields(dst, m)
	}
	return fmt.Errorf("cannot decode into %v", t)
}

// assignFields sets dst's exported fields (embedded structs flattened)
// from a map keyed by field name.
func assignFields(dst reflect.Value, m map[any]any) error {
	t := dst.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if err := assignFields(dst.Field(i), m); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		for k, v := range m {
			if name, ok := k.(string); ok && strings.EqualFold(name, f.Name) {
				if err := assign(dst.Field(i), v); err != nil {
					return fmt.Errorf("field %s: %w", f.Name, err)
				}
				break
			}
		}
	}
	return nil
}
