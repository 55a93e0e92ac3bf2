package cuda

import (
	"reflect"
	"slices"
)

// WithoutEntryPoints returns a copy of d whose optional entry points named
// (by their first symbol name) are unbound, as in a driver that predates
// them; with no names, all optional ones are. Tests only.
func WithoutEntryPoints(d *Driver, names ...string) *Driver {
	old := *d
	for _, s := range old.api.symbols() {
		if s.optional && (len(names) == 0 || slices.Contains(names, s.names[0])) {
			f := reflect.ValueOf(s.fptr).Elem()
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return &old
}

// OptionalEntryPoints lists the first symbol names of the optional entry
// points: those Open does without. Tests only.
func OptionalEntryPoints() []string {
	var names []string
	for _, s := range (&api{}).symbols() {
		if s.optional {
			names = append(names, s.names[0])
		}
	}
	return names
}

// PoolWithContext returns p with its calls made through c, a Context of
// the same device. Tests only.
func PoolWithContext(p *MemPool, c *Context) *MemPool {
	return &MemPool{c: c, handle: p.handle}
}
