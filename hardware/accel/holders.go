package accel

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// A Holder is a user of a device's memory that keeps allocations it
// could give back when another user runs short: a scheduler keeps freed
// allocations for reuse, copies of data that host memory also holds,
// and modified data it can write back to host memory first.
type Holder interface {
	// Reclaim frees, with the device's Free, up to about need bytes of
	// what the holder keeps but does not need, and reports how many
	// bytes it freed and, for an out-of-memory error, what it still
	// holds on the device and what would free that ("" for nothing).
	// With wait true the one asking holds none of the holder's locks
	// (Alloc's caller), and Reclaim may block: take the holder's locks,
	// and wait for copies that save data before their memory is freed
	// (a scheduler writes modified data back to host memory). With wait
	// false it must not block: the one asking is another holder
	// allocating, which may hold locks of its own; it gives back only
	// what it can at once, without copying (and may report nothing).
	Reclaim(need int64, wait bool) (freed int64, holds string)
}

// A Reclaimer is a device whose allocations, when they do not fit, first
// ask the holders of its memory (Hold) to give back what they keep but
// do not need. accel.Sim and cuda.Accel are Reclaimers.
type Reclaimer interface {
	// Hold registers h. From then on Alloc, when n bytes do not fit,
	// asks the registered holders to Reclaim, waiting for each (which
	// may write data back to host memory first), retries
	// after each that freed some, and names what they still hold in its
	// error. Hold returns the allocation function for h's own
	// allocations, which asks every other holder without waiting and
	// never h itself (h makes room itself, and may hold the locks its
	// Reclaim takes), and the function that withdraws h.
	Hold(h Holder) (alloc func(n int) (Mem, error), drop func())
}

// Holders is the registry of a Reclaimer device's holders, for the
// device to keep. The zero value is ready; it is safe for concurrent
// use, and never holds its lock while it calls a holder.
type Holders struct {
	// Short, when set, tells how many bytes of an allocation of n do
	// not fit now: the holders are asked for that much, else for n.
	Short func(n int) int64

	mu   sync.Mutex
	list []*heldBy
}

type heldBy struct{ h Holder }

// reclaimPasses bounds the rounds of asking the holders in one
// allocation: what one frees another user may take before the retry.
const reclaimPasses = 3

// Hold registers h for a device whose allocation without asking anyone
// is alloc; see Reclaimer.Hold.
func (hs *Holders) Hold(h Holder, alloc func(n int) (Mem, error)) (own func(n int) (Mem, error), drop func()) {
	e := &heldBy{h: h}
	hs.mu.Lock()
	hs.list = append(hs.list, e)
	hs.mu.Unlock()
	own = func(n int) (Mem, error) { return hs.allocBy(n, alloc, e) }
	drop = func() {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		for i, x := range hs.list {
			if x == e {
				hs.list = append(hs.list[:i], hs.list[i+1:]...)
				return
			}
		}
	}
	return own, drop
}

// Alloc runs alloc(n), the device's allocation without asking anyone,
// and while it fails with ErrOutOfMemory asks every holder, waiting for
// each, to reclaim what is missing (Short) or n bytes, retrying alloc
// after each that freed some.
// A failure's error adds what the holders still hold.
func (hs *Holders) Alloc(n int, alloc func(n int) (Mem, error)) (Mem, error) {
	return hs.allocBy(n, alloc, nil)
}

// allocBy is Alloc for holder by (nil: for no holder), which is not
// asked, and the others without waiting.
func (hs *Holders) allocBy(n int, alloc func(n int) (Mem, error), by *heldBy) (Mem, error) {
	m, err := alloc(n)
	if err == nil || !errors.Is(err, ErrOutOfMemory) {
		return m, err
	}
	hs.mu.Lock()
	list := append([]*heldBy(nil), hs.list...)
	hs.mu.Unlock()
	var holds []string
	for range reclaimPasses {
		freedAny := false
		holds = holds[:0]
		for _, e := range list {
			if e == by {
				continue
			}
			need := int64(n)
			if hs.Short != nil {
				need = max(hs.Short(n), 1)
			}
			freed, what := e.h.Reclaim(need, by == nil)
			if what != "" {
				holds = append(holds, what)
			}
			if freed <= 0 {
				continue
			}
			freedAny = true
			if m, err = alloc(n); err == nil || !errors.Is(err, ErrOutOfMemory) {
				return m, err
			}
		}
		if !freedAny {
			break
		}
	}
	if len(holds) > 0 {
		err = fmt.Errorf("%w; %s", err, strings.Join(holds, "; "))
	}
	return nil, err
}
