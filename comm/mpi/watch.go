//go:build mpi

package mpi

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// A watch makes no hang silent. MPI calls block until every rank they
// involve takes part; a rank that returned early, failed, or entered
// another collective leaves the others waiting forever. The watch knows
// which MPI operations this process waits in and since when; every
// report interval (PZ_COMM_REPORT, default 1m) it says on stderr which
// ones are stuck - the call, the communicator's size, the collective's
// sequence number on it - and after the timeout (PZ_COMM_TIMEOUT, off by
// default) it says so and ends the process, which mpirun turns into the
// end of the job.
type watch struct {
	report, timeout time.Duration
	rank, size      int
	out             io.Writer
	exit            func(code int)

	mu    sync.Mutex
	ops   []watched // slots; call == "" is free
	free  []int
	colls []*collSlot // one per communicator that ran a collective

	stop chan struct{}
	done chan struct{}
}

type watched struct {
	call     string
	seq      uint64 // the collective's number on its communicator; 0 for others
	commSize int
	since    time.Time
	told     time.Duration // how long it had waited at the last report
}

// A collSlot is one communicator's collective in progress. Collectives
// on a communicator run one at a time (Comm.coll), so each communicator
// has one slot, which its collectives set with atomic stores and no lock
// (an MPI_Allreduce of 8 bytes takes ~0.25 µs; the general begin and
// end, with their mutex, cost more). The watch's loop times every
// operation from the first check that sees it in progress, so a report
// or the timeout comes up to one check interval (a quarter of the
// shorter of the two) later than the wait began.
type collSlot struct {
	seq  atomic.Uint64        // the collective in progress, 0 when none
	name atomic.Pointer[byte] // its call's name (unsafe.StringData), valid while seq is
	nlen atomic.Int64
	size int

	// The loop's own, under watch.mu.
	seen   uint64    // the collective it last saw in progress
	seenAt time.Time // when it first saw it
	told   time.Duration
}

// collSlot returns a new slot for a communicator of size ranks, or nil
// when the watch is off.
func (w *watch) collSlot(size int) *collSlot {
	if w == nil || (w.report <= 0 && w.timeout <= 0) {
		return nil
	}
	s := &collSlot{size: size}
	w.mu.Lock()
	w.colls = append(w.colls, s)
	w.mu.Unlock()
	return s
}

// dropSlot forgets a freed communicator's slot.
func (w *watch) dropSlot(s *collSlot) {
	if s == nil {
		return
	}
	w.mu.Lock()
	w.colls = slices.DeleteFunc(w.colls, func(x *collSlot) bool { return x == s })
	w.mu.Unlock()
}

func (s *collSlot) begin(call string, seq uint64) {
	// A communicator runs the same few calls over and over: the name is
	// stored (two locked instructions) only when it changes. Only this
	// communicator's collectives store it, so the loads see its value.
	if p, n := unsafe.StringData(call), int64(len(call)); s.name.Load() != p || s.nlen.Load() != n {
		s.name.Store(p)
		s.nlen.Store(n)
	}
	s.seq.Store(seq)
}

func (s *collSlot) end() { s.seq.Store(0) }

func newWatch(report, timeout time.Duration, rank, size int) *watch {
	w := &watch{report: report, timeout: timeout, rank: rank, size: size, out: os.Stderr, exit: os.Exit,
		stop: make(chan struct{}), done: make(chan struct{})}
	if report <= 0 && timeout <= 0 {
		close(w.done)
		return w
	}
	go w.loop()
	return w
}

// begin records an operation that may block; end removes it. Like a
// collective's slot, it reads no clock: the loop times the operation from
// the first check that sees it (a point-to-point call of 8 bytes takes
// ~0.3 µs under MPI, and time.Now was a tenth of pz's part of it).
func (w *watch) begin(call string, commSize int) int {
	if w == nil || (w.report <= 0 && w.timeout <= 0) {
		return -1
	}
	w.mu.Lock()
	var i int
	if n := len(w.free); n > 0 {
		i = w.free[n-1]
		w.free = w.free[:n-1]
	} else {
		i = len(w.ops)
		w.ops = append(w.ops, watched{})
	}
	w.ops[i] = watched{call: call, commSize: commSize}
	w.mu.Unlock()
	return i
}

func (w *watch) end(i int) {
	if i < 0 {
		return
	}
	w.mu.Lock()
	w.ops[i] = watched{}
	w.free = append(w.free, i)
	w.mu.Unlock()
}

func (w *watch) tick() time.Duration {
	t := time.Second
	for _, d := range []time.Duration{w.report, w.timeout} {
		if d > 0 && d/4 < t {
			t = max(d/4, time.Millisecond)
		}
	}
	return t
}

func (w *watch) loop() {
	defer close(w.done)
	tk := time.NewTicker(w.tick())
	defer tk.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tk.C:
		}
		w.check(time.Now())
	}
}

// check reports the operations stuck at now, and ends the process past
// the timeout.
func (w *watch) check(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.colls {
		seq := s.seq.Load()
		if seq == 0 {
			s.seen = 0
			continue
		}
		if seq != s.seen {
			s.seen, s.seenAt, s.told = seq, now, 0
		}
		name := unsafe.String(s.name.Load(), int(s.nlen.Load()))
		if s.seq.Load() != seq {
			continue // it ended meanwhile: the name may be the next one's
		}
		op := watched{call: name, seq: seq, commSize: s.size, since: s.seenAt, told: s.told}
		if !w.checkOne(&op, now) {
			return
		}
		s.told = op.told
	}
	for i := range w.ops {
		op := &w.ops[i]
		if op.call == "" {
			continue
		}
		if op.since.IsZero() {
			op.since = now
		}
		if !w.checkOne(op, now) {
			return
		}
	}
}

// checkOne reports op if it has waited a report interval more since the
// last report, and ends the process past the timeout (reporting false).
func (w *watch) checkOne(op *watched, now time.Time) bool {
	waited := now.Sub(op.since)
	if w.timeout > 0 && waited >= w.timeout {
		fmt.Fprintf(w.out, "pz mpi: rank %d of %d: %s; ending the job (PZ_COMM_TIMEOUT=%v)\n", w.rank, w.size, op.describe(waited), w.timeout)
		w.exit(TimeoutExit)
		return false
	}
	if w.report > 0 && waited-op.told >= w.report {
		op.told = waited
		hint := "set PZ_COMM_TIMEOUT (or pzrun -comm-timeout) to end the job after a bound"
		if w.timeout > 0 {
			hint = fmt.Sprintf("the job ends after %v (PZ_COMM_TIMEOUT)", w.timeout)
		}
		fmt.Fprintf(w.out, "pz mpi: rank %d of %d: %s; a rank that returned early, failed or called another collective leaves the others waiting: see the other ranks' output; %s\n",
			w.rank, w.size, op.describe(waited), hint)
	}
	return true
}

func (op *watched) describe(waited time.Duration) string {
	what := op.call
	if op.seq > 0 {
		what = fmt.Sprintf("%s (collective #%d on a communicator of %d ranks)", op.call, op.seq, op.commSize)
	}
	return fmt.Sprintf("waiting %v in %s", waited.Round(time.Millisecond), what)
}

// close stops the watch.
func (w *watch) close() {
	if w == nil {
		return
	}
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}
