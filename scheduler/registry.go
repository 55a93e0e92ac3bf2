package scheduler

import (
	"fmt"
	"reflect"
	"sort"
	"sync"
)

// registry is the memory registered with every Scheduler of this
// process. It is the package's one piece of process-wide mutable state,
// on purpose: in-process ranks share one address space, and the same
// memory registered with two ranks' schedulers (or twice with one) would
// let tasks of both write it at once, a data race no single scheduler
// could see. It holds the registered ranges, sorted by their first byte,
// under a mutex. A matrix with a leading dimension larger than its
// columns is a strided range: its rows leave gaps that another matrix
// may fill (the tiles of one big matrix, each registered in place, as
// StarPU's users register them); those ranges' extents overlap without
// sharing a byte.
var registry memRegistry

type memRegistry struct {
	mu      sync.Mutex
	spans   []span  // sorted by lo; no two share a byte
	longest uintptr // the largest hi-lo registered so far: how far back a range may reach
	nextID  int     // the last scheduler number given
}

// A span is a registered memory range: the bytes [lo, hi), or with ld
// set, rows of row bytes every ld bytes from lo up to hi.
type span struct {
	lo, hi  uintptr
	row, ld uintptr
	h       *Handle
}

// rows is the number of rows of a strided span (1 when contiguous).
func (a span) rows() uintptr {
	if a.ld == 0 {
		return 1
	}
	return (a.hi-a.lo-a.row)/a.ld + 1
}

// seg returns row k of a as [start, end).
func (a span) seg(k uintptr) (uintptr, uintptr) {
	if a.ld == 0 {
		return a.lo, a.hi
	}
	s := a.lo + k*a.ld
	return s, s + a.row
}

// hits reports whether a holds a byte of [s, e).
func (a span) hits(s, e uintptr) bool {
	if s >= a.hi || a.lo >= e {
		return false
	}
	if a.ld == 0 {
		return true
	}
	// The rows k with lo+k*ld < e and lo+k*ld+row > s.
	khi := min((e-1-a.lo)/a.ld, a.rows()-1)
	var klo uintptr
	if s >= a.lo+a.row {
		klo = (s-a.lo-a.row)/a.ld + 1
	}
	return klo <= khi
}

// overlaps reports whether a and b share a byte: row by row of the one
// with fewer rows (a tile has a few hundred).
func (a span) overlaps(b span) bool {
	if a.lo >= b.hi || b.lo >= a.hi {
		return false
	}
	if a.rows() > b.rows() {
		a, b = b, a
	}
	for k := range a.rows() {
		if b.hits(a.seg(k)) {
			return true
		}
	}
	return false
}

// newSchedulerID numbers schedulers for messages ("scheduler 2").
func (r *memRegistry) newSchedulerID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	return r.nextID
}

// addSpan registers the memory of v (a slice or a pointer) for h, or
// returns ErrOverlap naming both registrations. A matrix registered
// with a leading dimension larger than its columns holds only its rows.
func (s *Scheduler) addSpan(h *Handle, v reflect.Value) error {
	if s.closed.Load() {
		return fmt.Errorf("registering %v: %w", h, ErrClosed)
	}
	var lo, size uintptr
	switch v.Kind() {
	case reflect.Slice:
		if v.Len() == 0 {
			return nil
		}
		lo, size = v.Pointer(), uintptr(v.Len())*v.Type().Elem().Size()
	case reflect.Pointer:
		lo, size = v.Pointer(), v.Type().Elem().Size()
	case reflect.Map:
		// The map itself: the same map registered twice overlaps.
		lo, size = v.Pointer(), 1
	}
	if size == 0 {
		return nil
	}
	sp := span{lo: lo, hi: lo + size, h: h}
	if b := h.ram; h.kind == kindMatrix && b.rows > 1 && b.ld > b.cols {
		sp.row, sp.ld = uintptr(b.cols)*b.elemSize, uintptr(b.ld)*b.elemSize
	}
	r := &registry
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].lo >= sp.lo })
	// A registered range that shares a byte with sp starts before sp.hi
	// and at most longest bytes before sp.lo.
	from := 0
	if sp.lo > r.longest {
		from = sort.Search(len(r.spans), func(i int) bool { return r.spans[i].lo >= sp.lo-r.longest })
	}
	for j := from; j < len(r.spans) && r.spans[j].lo < sp.hi; j++ {
		if !r.spans[j].overlaps(sp) {
			continue
		}
		o := r.spans[j].h
		if o.s == s {
			return fmt.Errorf("%w: %v overlaps %v, registered with the same scheduler: %s", ErrOverlap, h, o, overlapFix(o))
		}
		return fmt.Errorf("%w: %v for scheduler %d overlaps %v registered with scheduler %d of this process (in-process ranks share memory: give each rank its own data, or unregister it there first)", ErrOverlap, h, s.id, o, o.s.id)
	}
	r.spans = append(r.spans, span{})
	copy(r.spans[i+1:], r.spans[i:])
	r.spans[i] = sp
	r.longest = max(r.longest, sp.hi-sp.lo)
	h.span = sp
	return nil
}

// overlapFix says what to do instead of registering memory that o,
// registered with the same scheduler, holds: a value can only be used
// whole; a vector or matrix can also be cut into tiles.
func overlapFix(o *Handle) string {
	if o.kind == kindValue {
		return "use that handle, or unregister it first"
	}
	return "use that handle, Partition it and use the tiles over this memory, or unregister it first"
}

// removeSpan releases h's memory.
func (s *Scheduler) removeSpan(h *Handle) {
	if h.span.h == nil {
		return
	}
	r := &registry
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].lo >= h.span.lo })
	if i < len(r.spans) && r.spans[i].h == h {
		r.spans = append(r.spans[:i], r.spans[i+1:]...)
	}
	h.span = span{}
}

// releaseSpans releases every range registered with s (at Close: the
// memory may then be registered with another scheduler).
func (s *Scheduler) releaseSpans() {
	r := &registry
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, sp := range r.spans {
		if sp.h.s != s {
			r.spans[n] = sp
			n++
		}
	}
	clear(r.spans[n:])
	r.spans = r.spans[:n]
}
