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
// could see. It holds ranges only, sorted and disjoint, under a mutex.
var registry memRegistry

type memRegistry struct {
	mu     sync.Mutex
	spans  []span // sorted by lo, disjoint
	nextID int    // the last scheduler number given
}

// A span is a registered memory range.
type span struct {
	lo, hi uintptr
	h      *Handle
}

// newSchedulerID numbers schedulers for messages ("scheduler 2").
func (r *memRegistry) newSchedulerID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	return r.nextID
}

// addSpan registers the memory of v (a slice or a pointer) for h, or
// returns ErrOverlap naming both registrations.
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
	r := &registry
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].lo >= sp.lo })
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(r.spans) || r.spans[j].lo >= sp.hi || sp.lo >= r.spans[j].hi {
			continue
		}
		o := r.spans[j].h
		if o.s == s {
			return fmt.Errorf("%w: %v overlaps %v, registered with the same scheduler (%d); unregister it first, or Partition it and use its tiles", ErrOverlap, h, o, s.id)
		}
		return fmt.Errorf("%w: %v for scheduler %d overlaps %v registered with scheduler %d of this process (in-process ranks share memory: give each rank its own data, or unregister it there first)", ErrOverlap, h, s.id, o, o.s.id)
	}
	r.spans = append(r.spans, span{})
	copy(r.spans[i+1:], r.spans[i:])
	r.spans[i] = sp
	h.span = sp
	return nil
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
