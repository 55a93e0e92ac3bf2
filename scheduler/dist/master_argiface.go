package dist

import (
	"fmt"
	"reflect"

	"github.com/pzgo/pz/comm"
)

// Task arguments that hold interface values (a struct field of type
// Shape or any, []any, map[string]any): the codec alone would give the
// worker rank generic values inside them (map[any]any for a struct,
// uint64 for an int) or fail to decode into a non-empty interface, so
// the master sends such an argument as a tree that names the dynamic
// type of every interface value it holds, and the worker rank rebuilds
// each with that type. The tree follows the argument's Go type, which
// both ranks know:
//
//   - a part of a type that holds no interface: its encoding ([]byte),
//     decoded into its type on the worker (comm.Decode), as an argument
//     without interfaces is;
//   - an interface value: nil, or []any{description of its dynamic
//     type (describeArgType), the tree of its dynamic value};
//   - a pointer: nil, or []any{the tree of what it points to};
//   - a slice: nil, or []any of its elements' trees; an array likewise;
//   - a map: nil, or []any{key, value, key, value...} of trees;
//   - a struct: []any of its exported fields' trees, in field order.
//
// An interface value whose dynamic type cannot cross ranks (a named
// type no rank registered, a func) makes Submit fail, naming the field.

// hasIface reports whether values of t may hold an interface value.
func hasIface(t reflect.Type) bool {
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type) bool
	walk = func(t reflect.Type) bool {
		if seen[t] {
			return false
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Interface:
			return true
		case reflect.Pointer, reflect.Slice, reflect.Array:
			return walk(t.Elem())
		case reflect.Map:
			return walk(t.Key()) || walk(t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				if f := t.Field(i); f.IsExported() && walk(f.Type) {
					return true
				}
			}
		}
		return false
	}
	return walk(t)
}

// ifaceTypes memoizes hasIface for the parts of one argument.
type ifaceTypes map[reflect.Type]bool

func (m ifaceTypes) has(t reflect.Type) bool {
	h, ok := m[t]
	if !ok {
		h = hasIface(t)
		m[t] = h
	}
	return h
}

// argPath is where in a task argument of type t a value lies, for an
// error: the type's name for a named type, "argument" otherwise.
func argPath(t reflect.Type) string {
	if t.Name() != "" {
		return t.String()
	}
	return "argument"
}

// argTree returns the tree of v, a task argument or a part of it at
// path, or, with build false, only checks that every interface value
// in it can cross ranks.
func (m *Master) argTree(v reflect.Value, path string, build bool, memo ifaceTypes) (any, error) {
	t := v.Type()
	if !memo.has(t) {
		if !build {
			return nil, nil
		}
		b, err := comm.Encode(v.Interface())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return b, nil
	}
	switch t.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		e := v.Elem()
		d := m.argDesc(e.Type())
		if d.err != nil {
			return nil, fmt.Errorf("%s holds a %v: %w", path, e.Type(), d.err)
		}
		sub, err := m.argTree(e, path, build, memo)
		if err != nil {
			return nil, err
		}
		return []any{d.desc, sub}, nil
	case reflect.Pointer:
		if v.IsNil() {
			return nil, nil
		}
		sub, err := m.argTree(v.Elem(), path, build, memo)
		if err != nil {
			return nil, err
		}
		return []any{sub}, nil
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && v.IsNil() {
			return nil, nil
		}
		var out []any
		if build {
			out = make([]any, v.Len())
		}
		for i := range v.Len() {
			sub, err := m.argTree(v.Index(i), fmt.Sprintf("%s[%d]", path, i), build, memo)
			if err != nil {
				return nil, err
			}
			if build {
				out[i] = sub
			}
		}
		return out, nil
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		var out []any
		if build {
			out = make([]any, 0, 2*v.Len())
		}
		for it := v.MapRange(); it.Next(); {
			at := fmt.Sprintf("%s[%#v]", path, it.Key())
			k, err := m.argTree(it.Key(), at+" (its key)", build, memo)
			if err != nil {
				return nil, err
			}
			e, err := m.argTree(it.Value(), at, build, memo)
			if err != nil {
				return nil, err
			}
			if build {
				out = append(out, k, e)
			}
		}
		return out, nil
	case reflect.Struct:
		var out []any
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				if f.Anonymous && hasExportedFields(f.Type) {
					return nil, fmt.Errorf("%s: its embedded field of unexported type %v cannot cross ranks in a struct that holds interface values; export the type or name the field", path, f.Type)
				}
				continue
			}
			sub, err := m.argTree(v.Field(i), path+"."+f.Name, build, memo)
			if err != nil {
				return nil, err
			}
			if build {
				out = append(out, sub)
			}
		}
		return out, nil
	}
	// hasIface holds of no other kind.
	return nil, fmt.Errorf("%s: %v cannot cross ranks", path, t)
}

// hasExportedFields reports whether t, a struct or a pointer to one,
// has exported fields, which the codec would promote from an embedded
// field of t's type.
func hasExportedFields(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() || (f.Anonymous && hasExportedFields(f.Type)) {
			return true
		}
	}
	return false
}

// fromTree sets dst, settable and addressable, from g, the decoded tree
// (argTree) of a value of dst's type, at path.
func (r *slotRunner) fromTree(dst reflect.Value, g any, path string, memo ifaceTypes) error {
	t := dst.Type()
	if !memo.has(t) {
		b, ok := g.([]byte)
		if !ok {
			return fmt.Errorf("%s: a %T where the encoding of a %v was sent", path, g, t)
		}
		if err := comm.Decode(b, dst.Addr().Interface()); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	if g == nil {
		dst.SetZero()
		return nil
	}
	items, ok := g.([]any)
	if !ok {
		return fmt.Errorf("%s: a %T where a %v was sent", path, g, t)
	}
	want := -1 // the number of items t takes, -1 for any
	switch t.Kind() {
	case reflect.Interface:
		want = 2
	case reflect.Pointer:
		want = 1
	case reflect.Array:
		want = t.Len()
	}
	if want >= 0 && len(items) != want {
		return fmt.Errorf("%s: %d items for a %v", path, len(items), t)
	}
	switch t.Kind() {
	case reflect.Interface:
		desc, ok := items[0].(string)
		if !ok {
			return fmt.Errorf("%s: a %T where the description of a type was sent", path, items[0])
		}
		dt, err := r.argType(desc)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !dt.AssignableTo(t) {
			return fmt.Errorf("%s: a %v, which is not a %v", path, dt, t)
		}
		e := reflect.New(dt).Elem()
		if err := r.fromTree(e, items[1], path, memo); err != nil {
			return err
		}
		dst.Set(e)
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := r.fromTree(p.Elem(), items[0], path, memo); err != nil {
			return err
		}
		dst.Set(p)
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice {
			dst.Set(reflect.MakeSlice(t, len(items), len(items)))
		}
		for i, it := range items {
			if err := r.fromTree(dst.Index(i), it, fmt.Sprintf("%s[%d]", path, i), memo); err != nil {
				return err
			}
		}
	case reflect.Map:
		if len(items)%2 != 0 {
			return fmt.Errorf("%s: %d items for a %v's keys and values", path, len(items), t)
		}
		out := reflect.MakeMapWithSize(t, len(items)/2)
		for i := 0; i < len(items); i += 2 {
			k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
			if err := r.fromTree(k, items[i], path+"[key]", memo); err != nil {
				return err
			}
			if err := r.fromTree(e, items[i+1], fmt.Sprintf("%s[%#v]", path, k), memo); err != nil {
				return err
			}
			out.SetMapIndex(k, e)
		}
		dst.Set(out)
	case reflect.Struct:
		n := 0
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if n >= len(items) {
				return fmt.Errorf("%s: %d fields sent for a %v", path, len(items), t)
			}
			if err := r.fromTree(dst.Field(i), items[n], path+"."+f.Name, memo); err != nil {
				return err
			}
			n++
		}
		if n != len(items) {
			return fmt.Errorf("%s: %d fields sent for a %v of %d", path, len(items), t, n)
		}
	default:
		return fmt.Errorf("%s: cannot decode into %v", path, t)
	}
	return nil
}
