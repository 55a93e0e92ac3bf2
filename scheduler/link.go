package scheduler

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
)

// A WorkerLink is the link over which a worker that stands for a
// processing unit elsewhere - a core of another process or machine, as
// scheduler/dist's master/worker mode makes - sends each task's data
// and receives what the task wrote back, as it runs the task: nothing
// stays there between tasks, unless the link is a HoldingLink. The scheduler asks it what moving a task's
// data costs (StarPU's bus model, for a memory node reached through a
// network), and the dmda policy adds that cost to the task's predicted
// finish on the worker and to the worker's load (the worker is busy
// while it moves the data).
//
// The implementation of such a worker's tasks reports the time the task
// computed there (Call.SetModelTime), without the transfers, so that the
// codelet's performance model holds compute times only, for local and
// remote workers alike.
type WorkerLink interface {
	// Cost predicts the nanoseconds one task takes to send in bytes
	// to the worker and receive out bytes back. It is called from
	// Push, concurrently, and must be cheap and safe for that.
	Cost(in, out int64) float64
}

// A HoldingLink is a WorkerLink whose far side keeps copies of data
// between tasks (scheduler/dist's master/worker mode keeps the data a
// worker rank received for reading, as StarPU-MPI's cache does): a task
// that only reads a handle whose current version the far side holds
// sends none of its bytes, and the dmda policy prices it so, preferring
// the worker that holds it.
type HoldingLink interface {
	WorkerLink
	// Holds reports whether the far side holds the current version of
	// h's data. It is called from Push, concurrently, and must be cheap
	// and safe for that.
	Holds(h *Handle) bool
}

// WithWorkerLinks declares that CPU workers reach the data of their
// tasks through links (see WorkerLink): links[w] is worker w's, for w a
// CPU worker (0 <= w < the count of WithWorkers). Their WorkerInfo has
// Linked set. New copies the map. New fails with ErrBadOption, naming
// the worker, for another w or a nil link: nil itself, or a typed nil
// (a nil pointer, func, map... held as a WorkerLink), whose Cost the
// dmda policy would otherwise call, and likely panic in, for every task
// it prices.
func WithWorkerLinks(links map[int]WorkerLink) Option {
	return func(c *config) { c.links = links }
}

// checkLinks validates WithWorkerLinks' map against the CPU workers, in
// the order of the workers, so that the error names the first bad one.
func (c *config) checkLinks() error {
	for _, w := range slices.Sorted(maps.Keys(c.links)) {
		l := c.links[w]
		if w < 0 || w >= c.workers {
			return fmt.Errorf("%w: WithWorkerLinks: worker %d is not a CPU worker (there are %d, 0 to %d)", ErrBadOption, w, c.workers, c.workers-1)
		}
		if l == nil {
			return fmt.Errorf("%w: WithWorkerLinks: worker %d has a nil link; leave out a worker without one", ErrBadOption, w)
		}
		if nilValue(l) {
			return fmt.Errorf("%w: WithWorkerLinks: worker %d has a nil %T as its link; give it a link that is set, or leave the worker out", ErrBadOption, w, l)
		}
	}
	return nil
}

// nilValue reports whether l, a non-nil interface, holds a nil pointer,
// map, slice, func, channel or interface (a typed nil).
func nilValue(l WorkerLink) bool {
	switch v := reflect.ValueOf(l); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

// linkBytes returns the bytes a linked worker sends for t (in: every
// handle t accesses, once however often it is named, but for Scratch
// buffers, which are private, and for the handles t only reads that l
// holds, a HoldingLink) and receives back (out: the handles t writes).
func linkBytes(t *Task, l WorkerLink) (in, out int64) {
	hl, _ := l.(HoldingLink)
	for i := range t.Access {
		a := &t.Access[i]
		if a.Mode == ModeScratch {
			continue
		}
		if t.dupAccess && namedBefore(t.Access[:i], a.Handle) {
			continue
		}
		mode := a.Mode
		if t.dupAccess {
			for j := i + 1; j < len(t.Access); j++ {
				if t.Access[j].Handle == a.Handle && t.Access[j].Mode != ModeScratch {
					mode |= t.Access[j].Mode
				}
			}
		}
		b := &a.Handle.ram
		n := int64(b.rows) * int64(b.cols) * int64(b.elemSize)
		if mode&(ModeW|ModeRedux) != 0 {
			out += n
		} else if mode == ModeR && hl != nil && hl.Holds(a.Handle) {
			continue
		}
		in += n
	}
	return in, out
}

// namedBefore reports whether one of acc, other than a Scratch access,
// names h.
func namedBefore(acc []Access, h *Handle) bool {
	for j := range acc {
		if acc[j].Handle == h && acc[j].Mode != ModeScratch {
			return true
		}
	}
	return false
}

// SetModelTime sets the time that the task's run records in its
// codelet's performance model, instead of the time the CPU
// implementation took: an implementation that runs the task elsewhere
// (a worker with a WorkerLink) reports the time the task computed
// there, without moving its data, which the worker's link accounts for.
// A d <= 0 records the implementation's own time, as without a call.
func (c *Call) SetModelTime(d time.Duration) { c.modelTime = d }
