package dist

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
)

// Task arguments in master/worker mode: the master sends, beside the
// argument's encoded value, a description of its Go type, from which the
// worker rank rebuilds the type (reflect) and decodes the value into it,
// so that the codelet sees the same Go value on every rank. The
// description is Go's syntax for the type: the predeclared types by
// name ("int", "float32", "string", "any"), "[]E", "[N]E", "map[K]V" and
// "*E", and named types (structs, type Celsius float64) as their
// registered name (Registry.RegisterArgTypes), quoted:
// `[]"example.com/m.Celsius"`.

// basicTypes are the types a description names without registration.
var basicTypes = func() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for _, t := range []reflect.Type{
		reflect.TypeFor[bool](), reflect.TypeFor[string](),
		reflect.TypeFor[int](), reflect.TypeFor[int8](), reflect.TypeFor[int16](), reflect.TypeFor[int32](), reflect.TypeFor[int64](),
		reflect.TypeFor[uint](), reflect.TypeFor[uint8](), reflect.TypeFor[uint16](), reflect.TypeFor[uint32](), reflect.TypeFor[uint64](),
		reflect.TypeFor[float32](), reflect.TypeFor[float64](), reflect.TypeFor[complex64](), reflect.TypeFor[complex128](),
	} {
		m[t.Name()] = t
	}
	m["any"] = reflect.TypeFor[any]()
	return m
}() // read-only once made

// argTypeName is the name a named type is registered and sent under: its
// package path and name.
func argTypeName(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// RegisterArgTypes registers named types of task arguments
// (scheduler.WithArg) for master/worker mode (RunMaster): structs, and
// named types of any other kind (type Celsius float64), which a worker
// rank cannot rebuild from a description of their kind. Each of types is
// a reflect.Type or a value of the type (Params{}). A task argument of
// such a type, or built of one ([]Celsius, *Params), arrives on every
// rank with its Go type; one of a type no rank registered is refused at
// Master.Submit, naming the type. Types built only of Go's predeclared
// types ([]int, map[string][3]float32, *complex64) need no registration.
// A value held in an interface inside an argument (a struct field of
// type Shape or any, an element of []any) arrives with its dynamic type
// too, under the same rule: register the concrete types (Circle{}), and
// an interface type only where it is part of the argument's own type
// outside a registered struct ([]Shape: reflect.TypeFor[Shape]()).
// Every rank registers the same types, before RunMaster.
func (r *Registry) RegisterArgTypes(types ...any) error {
	for i, x := range types {
		t, ok := x.(reflect.Type)
		if !ok {
			t = reflect.TypeOf(x)
		}
		switch {
		case t == nil:
			return fmt.Errorf("dist: Registry.RegisterArgTypes: %w: argument %d is nil; pass a value of the type or its reflect.Type", comm.ErrInvalidArg, i)
		case t.Name() == "" || t.PkgPath() == "":
			return fmt.Errorf("dist: Registry.RegisterArgTypes: %w: %v is not a named type of a package: it needs no registration (or, an unnamed struct, cannot be registered: declare a named type)", comm.ErrInvalidArg, t)
		}
		name := argTypeName(t)
		if old, ok := r.argTypes[name]; ok && old != t {
			return fmt.Errorf("dist: Registry.RegisterArgTypes: %w: two types named %q (types declared in functions share their package's name space); declare one at package level", comm.ErrInvalidArg, name)
		}
		if r.argTypes == nil {
			r.argTypes = map[string]reflect.Type{}
		}
		r.argTypes[name] = t
	}
	return nil
}

// argTypeNames returns the registered argument types' names.
func (r *Registry) argTypeNames() []string {
	out := make([]string, 0, len(r.argTypes))
	for n := range r.argTypes {
		out = append(out, n)
	}
	return out
}

// describeArgType returns t's description, and the registered names it
// uses, or an error naming the type that cannot travel and how to fix it.
func (r *Registry) describeArgType(t reflect.Type) (string, []string, error) {
	var b strings.Builder
	var named []string
	var walk func(t reflect.Type) error
	walk = func(t reflect.Type) error {
		if t.Name() != "" && t.PkgPath() != "" {
			name := argTypeName(t)
			if r.argTypes[name] != t {
				return fmt.Errorf("a task argument of type %v (%s) cannot cross ranks: its type is not registered; call RegisterArgTypes(%v{}) on every rank's dist.Registry before RunMaster", t, name, t)
			}
			named = append(named, name)
			b.WriteString(strconv.Quote(name))
			return nil
		}
		if bt, ok := basicTypes[t.Name()]; ok && bt == t {
			b.WriteString(t.Name())
			return nil
		}
		if t == basicTypes["any"] {
			b.WriteString("any")
			return nil
		}
		switch t.Kind() {
		case reflect.Slice:
			b.WriteString("[]")
			return walk(t.Elem())
		case reflect.Array:
			fmt.Fprintf(&b, "[%d]", t.Len())
			return walk(t.Elem())
		case reflect.Pointer:
			b.WriteString("*")
			return walk(t.Elem())
		case reflect.Map:
			b.WriteString("map[")
			if err := walk(t.Key()); err != nil {
				return err
			}
			b.WriteString("]")
			return walk(t.Elem())
		}
		return fmt.Errorf("a task argument of type %v cannot cross ranks: it takes predeclared types (bool, numbers but uintptr, string, any), slices, arrays, maps and pointers of them, and named types registered with RegisterArgTypes (an unnamed struct: declare a named type and register it)", t)
	}
	if err := walk(t); err != nil {
		return "", nil, err
	}
	return b.String(), named, nil
}

// parseArgType rebuilds the type a description names.
func (r *Registry) parseArgType(s string) (reflect.Type, error) {
	t, rest, err := r.parseType(s)
	if err == nil && rest != "" {
		err = fmt.Errorf("%q after the type", rest)
	}
	if err != nil {
		return nil, fmt.Errorf("task argument type %q: %w", s, err)
	}
	return t, nil
}

func (r *Registry) parseType(s string) (reflect.Type, string, error) {
	switch {
	case strings.HasPrefix(s, `"`):
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil, "", err
		}
		name, _ := strconv.Unquote(q)
		t := r.argTypes[name]
		if t == nil {
			return nil, "", fmt.Errorf("type %s is not registered on this rank; call RegisterArgTypes with it on every rank's dist.Registry before RunMaster", name)
		}
		return t, s[len(q):], nil
	case strings.HasPrefix(s, "[]"):
		e, rest, err := r.parseType(s[2:])
		if err != nil {
			return nil, "", err
		}
		return reflect.SliceOf(e), rest, nil
	case strings.HasPrefix(s, "["):
		n, after, ok := strings.Cut(s[1:], "]")
		l, err := strconv.Atoi(n)
		if !ok || err != nil || l < 0 {
			return nil, "", fmt.Errorf("bad array length in %q", s)
		}
		e, rest, err := r.parseType(after)
		if err != nil {
			return nil, "", err
		}
		return reflect.ArrayOf(l, e), rest, nil
	case strings.HasPrefix(s, "*"):
		e, rest, err := r.parseType(s[1:])
		if err != nil {
			return nil, "", err
		}
		return reflect.PointerTo(e), rest, nil
	case strings.HasPrefix(s, "map["):
		k, rest, err := r.parseType(s[4:])
		if err != nil {
			return nil, "", err
		}
		if !strings.HasPrefix(rest, "]") || !k.Comparable() {
			return nil, "", fmt.Errorf("bad map key in %q", s)
		}
		v, rest, err := r.parseType(rest[1:])
		if err != nil {
			return nil, "", err
		}
		return reflect.MapOf(k, v), rest, nil
	}
	end := strings.IndexFunc(s, func(c rune) bool { return (c < 'a' || c > 'z') && (c < '0' || c > '9') })
	if end < 0 {
		end = len(s)
	}
	if t, ok := basicTypes[s[:end]]; ok {
		return t, s[end:], nil
	}
	return nil, "", fmt.Errorf("unknown type at %q", s)
}

// argValue returns the value of the WithArg among args (the last one,
// as the scheduler takes it), nil when there is none.
func argValue(args []scheduler.Arg) any {
	var v any
	for _, a := range args {
		if x, ok := a.ArgValue(); ok {
			v = x
		}
	}
	return v
}

// argDesc is the description of a task argument's type, or why it
// cannot cross ranks.
type argDesc struct {
	desc string
	err  error
	// iface: values of the type may hold interface values, and travel
	// as a tree that names their dynamic types (master_argiface.go).
	iface bool
}

// argDesc returns the description of t, a task argument's type, cached.
func (m *Master) argDesc(t reflect.Type) argDesc {
	if d, ok := m.argDescs.Load(t); ok {
		return d.(argDesc)
	}
	desc, named, err := m.reg.describeArgType(t)
	for _, n := range named {
		if ranks := m.missingTypes[n]; err == nil && len(ranks) > 0 {
			err = fmt.Errorf("a task argument of type %v cannot cross ranks: ranks %v have not registered %s; call RegisterArgTypes with it on every rank's dist.Registry, not only on the master", t, ranks, n)
		}
	}
	d := argDesc{desc, err, err == nil && hasIface(t)}
	m.argDescs.Store(t, d)
	return d
}

// checkArg returns why v, a task argument, cannot cross ranks, or nil.
func (m *Master) checkArg(v any) error {
	t := reflect.TypeOf(v)
	if t == nil {
		return nil
	}
	d := m.argDesc(t)
	if d.err == nil && d.iface {
		_, err := m.argTree(reflect.ValueOf(v), argPath(t), false, ifaceTypes{})
		return err
	}
	return d.err
}

// encodeArg returns the description of v's type and v's encoding, as
// the worker rank's arg reads them.
func (m *Master) encodeArg(v any) (desc string, b []byte, err error) {
	t := reflect.TypeOf(v)
	d := m.argDesc(t)
	if d.err != nil {
		return "", nil, d.err
	}
	x := v
	if d.iface {
		if x, err = m.argTree(reflect.ValueOf(v), argPath(t), true, ifaceTypes{}); err != nil {
			return "", nil, err
		}
	}
	if b, err = comm.Encode(x); err != nil {
		return "", nil, fmt.Errorf("its argument: %w", err)
	}
	return d.desc, b, nil
}

// argType returns the type desc describes, cached.
func (r *slotRunner) argType(desc string) (reflect.Type, error) {
	t := r.argTypes[desc]
	if t == nil {
		var err error
		if t, err = r.reg.parseArgType(desc); err != nil {
			return nil, err
		}
		r.argTypes[desc] = t
	}
	return t, nil
}

// arg decodes h's task argument into the Go type it describes.
func (r *slotRunner) arg(h taskHeader) (any, error) {
	t, err := r.argType(h.ArgType)
	if err != nil {
		return nil, err
	}
	p := reflect.New(t)
	if memo := (ifaceTypes{}); memo.has(t) {
		var g any
		if err := comm.Decode(h.Arg, &g); err == nil {
			err = r.fromTree(p.Elem(), g, argPath(t), memo)
		}
		if err != nil {
			return nil, fmt.Errorf("task %q: its argument: %w", h.Codelet, err)
		}
		return p.Elem().Interface(), nil
	}
	if err := comm.Decode(h.Arg, p.Interface()); err != nil {
		return nil, fmt.Errorf("task %q: its argument: %w", h.Codelet, err)
	}
	return p.Elem().Interface(), nil
}
