package runtimeview

import (
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"

	"github.com/pzgo/pz/scheduler"
)

// laterOptions checks the options of a later Scheduler call (later)
// against those of the call that made the scheduler (first), made at at,
// and returns nil when they agree: applying later over first's options
// changes no setting, and each setting later makes is the one first's
// options make, so that the scheduler is the one later asks for. It
// returns an error wrapping ErrOption that names the first option of
// later in conflict, the setting and both values otherwise.
//
// Options are functions that set fields of the scheduler's configuration:
// laterOptions applies each list to a configuration value of its own
// (the type an Option takes, made through reflection) and compares the
// results field by field, descending into structs. Fields that hold
// functions cannot be compared (two closures are not told apart), so a
// later option that sets one (WithGetenv, WithPolicyFunc, WithWatchdog's
// report) is a conflict; pointers (WithLogger's, WithCUDADriver's) agree
// when they are the same pointer.
func laterOptions(rank int, first, later []scheduler.Option, at string) error {
	cfg := reflect.TypeFor[scheduler.Option]().In(0)
	if cfg.Kind() != reflect.Pointer || cfg.Elem().Kind() != reflect.Struct {
		// Not func(*struct): nothing to compare with; refuse as a conflict.
		return fmt.Errorf("runtimeview: rank %d: Scheduler: %w: %d options given, but this rank's scheduler was made by an earlier call (%s) and is shared: its options cannot change now; call Scheduler without options to share it", rank, ErrOption, len(later), at)
	}
	zero := reflect.New(cfg.Elem()).Elem()
	a := applyOptions(zero, first)
	z := applyOptions(zero, later)
	b := applyOptions(a, later)
	for _, leaf := range leaves(cfg.Elem(), nil, "") {
		if !conflicts(leaf.index, a, z, b) {
			continue
		}
		opt, name := 0, "an option"
		for j, o := range later {
			one := []scheduler.Option{o}
			if touches(leaf.index, a, applyOptions(zero, one), applyOptions(a, one)) {
				opt, name = j+1, optionName(o)
			}
		}
		return fmt.Errorf("runtimeview: rank %d: Scheduler: %w: %s (option %d of this call) sets %s %s, but this rank's scheduler was made by an earlier call (%s) with %s %s; it is shared, and its options cannot change now: give a later call the same options as that one (or some of them), or none", rank, ErrOption, name, opt, leaf.name, describeSetting(z.FieldByIndex(leaf.index), true), at, leaf.name, describeSetting(a.FieldByIndex(leaf.index), false))
	}
	return nil
}

// applyOptions returns a copy of base with opts applied in order.
func applyOptions(base reflect.Value, opts []scheduler.Option) reflect.Value {
	p := reflect.New(base.Type())
	p.Elem().Set(base)
	for _, o := range opts {
		if o != nil {
			reflect.ValueOf(o).Call([]reflect.Value{p})
		}
	}
	return p.Elem()
}

// leaf is a field of the configuration that is not a struct: its index
// (for FieldByIndex) and its dotted name.
type leaf struct {
	index []int
	name  string
}

// leaves lists the non-struct fields of t, descending into struct fields.
func leaves(t reflect.Type, index []int, prefix string) []leaf {
	var out []leaf
	for i := range t.NumField() {
		f := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		name := prefix + f.Name
		if f.Type.Kind() == reflect.Struct {
			out = append(out, leaves(f.Type, idx, name+".")...)
			continue
		}
		out = append(out, leaf{idx, name})
	}
	return out
}

// touches reports whether options set the field at index: alone on a
// zero configuration (z) they give it a value, or over the first call's
// (a, giving b) they change it (an option that sets a zero value, such as
// WithStats(false)).
func touches(index []int, a, z, b reflect.Value) bool {
	return !z.FieldByIndex(index).IsZero() || !equal(b.FieldByIndex(index), a.FieldByIndex(index), false)
}

// conflicts reports whether the later options touch the field at index
// and set it to another value than the first call's options did.
func conflicts(index []int, a, z, b reflect.Value) bool {
	return touches(index, a, z, b) && !equal(z.FieldByIndex(index), a.FieldByIndex(index), true)
}

// equal reports whether x and y (values of the same type, read through
// reflection) hold the same setting. Pointers, channels and maps' entries
// compare as Go's == does for pointers; funcs are equal when both are nil,
// or, unless strict, when they are the same function value's code (a
// field copied unchanged).
func equal(x, y reflect.Value, strict bool) bool {
	switch x.Kind() {
	case reflect.Bool:
		return x.Bool() == y.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return x.Int() == y.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return x.Uint() == y.Uint()
	case reflect.Float32, reflect.Float64:
		return x.Float() == y.Float()
	case reflect.Complex64, reflect.Complex128:
		return x.Complex() == y.Complex()
	case reflect.String:
		return x.String() == y.String()
	case reflect.Pointer, reflect.Chan, reflect.UnsafePointer:
		return x.Pointer() == y.Pointer()
	case reflect.Func:
		if x.IsNil() || y.IsNil() {
			return x.IsNil() && y.IsNil()
		}
		return !strict && x.Pointer() == y.Pointer()
	case reflect.Interface:
		if x.IsNil() || y.IsNil() {
			return x.IsNil() && y.IsNil()
		}
		return x.Elem().Type() == y.Elem().Type() && equal(x.Elem(), y.Elem(), strict)
	case reflect.Array, reflect.Slice:
		if x.Len() != y.Len() {
			return false
		}
		for i := range x.Len() {
			if !equal(x.Index(i), y.Index(i), strict) {
				return false
			}
		}
		return true
	case reflect.Map:
		if x.Len() != y.Len() {
			return false
		}
		for _, k := range x.MapKeys() {
			yv := y.MapIndex(k)
			if !yv.IsValid() || !equal(x.MapIndex(k), yv, strict) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range x.NumField() {
			if !equal(x.Field(i), y.Field(i), strict) {
				return false
			}
		}
		return true
	}
	return false
}

// describeSetting is a setting's value for an error: quoted strings, "to a
// function" for a func (set, the later call's side), "none" for a zero
// value other than a bool or a number on the first call's side.
func describeSetting(v reflect.Value, set bool) string {
	switch {
	case v.Kind() == reflect.Func && !v.IsNil():
		if set {
			return "to a function (options that hold functions cannot be compared)"
		}
		return "a function"
	case !set && v.IsZero() && v.Kind() != reflect.Bool && !isNumber(v.Kind()):
		return "none"
	case v.Kind() == reflect.String:
		return strconv.Quote(v.String())
	}
	return fmt.Sprint(v)
}

func isNumber(k reflect.Kind) bool {
	return reflect.Int <= k && k <= reflect.Complex128
}

// optionName names the exported function of package scheduler that made
// o ("scheduler.WithPolicy"), from its code's symbol: the function
// literal it returns is WithPolicy.func1, or, inlined where it was
// called, CALLER.WithPolicy.3. Only package scheduler can make an
// Option (its argument's type is unexported there).
func optionName(o scheduler.Option) string {
	f := runtime.FuncForPC(reflect.ValueOf(o).Pointer())
	if f == nil {
		return "an option"
	}
	name := f.Name()
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	parts := strings.Split(name, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		if strings.HasPrefix(parts[i], "With") {
			return "scheduler." + parts[i]
		}
	}
	return "an option"
}
