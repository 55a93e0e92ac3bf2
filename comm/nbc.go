package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pzgo/pz/internal/ctxerr"
)

// NBC runs one rank's non-blocking collectives for a backend. Each is the
// blocking collective of the same name run on a private duplicate of the
// communicator, in the order the rank started them, by a goroutine that
// exists while any is pending (or by a Wait that cannot be canceled, on
// the operation that is next, when none is running). Since every rank
// starts the same non-blocking collectives in the same order (Comm's
// contract), the duplicates' collectives match across ranks; since the
// duplicate is private, they never match the application's blocking
// collectives, and the work overlaps whatever the caller does meanwhile:
// no call into the library is needed for them to progress.
//
// The zero NBC is not usable; backends make one with NewNBC and call Close
// when their communicator is freed.
type NBC struct {
	open     func(ctx context.Context) (Comm, error)
	blocking bool // run with a context that cannot be canceled (see NewNBCBlocking)

	mu      sync.Mutex
	dup     Comm // opened by the first operation
	openErr error
	queue   []*nbcOp
	started int    // operations started so far: the sequence number of the last
	running bool   // a loop goroutine exists
	cur     *nbcOp // the operation running (on the loop, or inline in a Wait); nil when none
	closed  bool
	idle    *sync.Cond // signaled when running turns false or cur nil

	ctx    context.Context // canceled by Close
	cancel context.CancelCauseFunc
}

// NewNBC returns an engine whose private communicator open makes. open runs
// on the engine's goroutine, before its first operation; it must not
// communicate on the parent communicator (the parent's collectives run
// concurrently): a backend that needs a collective to duplicate starts it
// when the first operation is started (MPI_Comm_idup) and has open wait
// for it.
func NewNBC(open func(ctx context.Context) (Comm, error)) *NBC {
	ctx, cancel := context.WithCancelCause(context.Background())
	n := &NBC{open: open, ctx: ctx, cancel: cancel}
	n.idle = sync.NewCond(&n.mu)
	return n
}

// NewNBCBlocking is NewNBC for backends whose collectives should block
// rather than poll: each runs with a context that cannot be canceled (an MPI
// backend then calls the blocking MPI function, not its non-blocking form,
// whose progress engine is not safe to drive from several threads in some
// MPI libraries). Close does not wait for a collective in progress, which
// MPI cannot cancel: its goroutine ends when the collective does, if ever,
// and the private communicator is then left to it.
func NewNBCBlocking(open func(ctx context.Context) (Comm, error)) *NBC {
	n := NewNBC(open)
	n.blocking = true
	return n
}

// nbcOp is one non-blocking collective; it implements Request.
type nbcOp struct {
	n    *NBC
	call string
	seq  int // its place among n's operations, from 1
	rank int
	run  func(ctx context.Context, c Comm) error
	done chan struct{}
	err  error
}

// Start queues collective call, which run performs on the private
// communicator, and returns its Request. rank names this rank in errors.
func (n *NBC) Start(call string, rank int, run func(ctx context.Context, c Comm) error) (Request, error) {
	op := &nbcOp{n: n, call: call, rank: rank, run: run, done: make(chan struct{})}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("comm: %s on rank %d: %w", call, rank, ErrFreed)
	}
	n.started++
	op.seq = n.started
	n.queue = append(n.queue, op)
	if !n.running {
		n.running = true
		go n.loop()
	}
	return op, nil
}

// loop runs the queued operations in order and exits when none is left,
// or when a Wait is running one inline (which starts a loop again after
// it, if more are queued).
func (n *NBC) loop() {
	for {
		n.mu.Lock()
		if len(n.queue) == 0 || n.cur != nil {
			n.running = false
			n.idle.Broadcast()
			n.mu.Unlock()
			return
		}
		op := n.popLocked()
		n.mu.Unlock()
		n.runOp(op)
	}
}

// popLocked takes the first queued operation and makes it n's current
// one; n.mu is held.
func (n *NBC) popLocked() *nbcOp {
	op := n.queue[0]
	n.queue[0] = nil
	n.queue = n.queue[1:]
	n.cur = op
	return op
}

// runOp runs op on the private communicator (opening it first, once) and
// completes it, then clears n's current operation and, when op ran inline (no loop is
// left) and more are queued, starts the loop again.
func (n *NBC) runOp(op *nbcOp) {
	n.mu.Lock()
	c, err := n.dup, n.openErr
	n.mu.Unlock()
	if c == nil && err == nil {
		c, err = n.open(n.ctx)
		if err != nil {
			err = fmt.Errorf("opening the communicator of non-blocking collectives: %w", err)
		}
		n.mu.Lock()
		n.dup, n.openErr = c, err
		n.mu.Unlock()
	}
	if err == nil {
		ctx := n.ctx
		if n.blocking {
			ctx = context.Background()
		}
		err = op.run(ctx, c)
	}
	if err != nil {
		op.err = fmt.Errorf("comm: %s on rank %d: %w", op.call, op.rank, err)
	}
	close(op.done)
	n.mu.Lock()
	n.cur = nil
	if len(n.queue) > 0 && !n.running && !n.closed {
		n.running = true
		go n.loop()
	}
	n.idle.Broadcast()
	n.mu.Unlock()
}

// runInline runs o on the caller's goroutine if it is next and nothing is
// running: a Wait right after the Start then costs no hand-off to the
// loop goroutine and back. The loop, finding an operation running, exits; runOp starts
// it again if more operations are queued. It reports whether it ran o.
func (n *NBC) runInline(o *nbcOp) bool {
	n.mu.Lock()
	if n.cur != nil || len(n.queue) == 0 || n.queue[0] != o {
		n.mu.Unlock()
		return false
	}
	n.popLocked()
	n.mu.Unlock()
	n.runOp(o)
	return true
}

// WaitIdle returns once no operation runs on n, or, when ctx ends first,
// an error that names the operation still running (its call and its
// place among n's operations, as Running says) and wraps ctx's cause. A
// backend calls it before shutting down (MPI_Finalize) so that no
// goroutine of n is still inside a collective that Close could not
// cancel; that collective ends when the other ranks take part in it.
func (n *NBC) WaitIdle(ctx context.Context) error {
	for pause := 50 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		running := n.Running()
		if running == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			// ctx is the caller's bound (Finalize's), whose cause says
			// it all.
			return fmt.Errorf("comm: %s is still running: %w", running, context.Cause(ctx))
		case <-time.After(pause):
		}
	}
}

// Running describes the operation running on n, on its loop goroutine or
// inline in a Wait: "Ibarrier #3 on rank 0", the call, its place among the
// operations started on n (from 1) and the rank. It returns "" when none
// runs.
func (n *NBC) Running() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cur == nil {
		return ""
	}
	return fmt.Sprintf("%s #%d on rank %d", n.cur.call, n.cur.seq, n.cur.rank)
}

// Finished reports whether n is closed and none of its collectives is
// still running: nothing of it remains for a Finalize to wait for
// (WaitIdle), so a backend may forget it.
func (n *NBC) Finished() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed && !n.running && n.cur == nil
}

// Close fails the pending operations (those already running end with an
// error once their collective gives up), waits for the engine's goroutine
// to exit and frees the private communicator. Later Starts fail with
// ErrFreed.
func (n *NBC) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.cancel(ErrFreed)
	for _, op := range n.queue { // not started: they fail now
		op.err = fmt.Errorf("comm: %s on rank %d: %w", op.call, op.rank, ErrFreed)
		close(op.done)
	}
	n.queue = nil
	if n.blocking && (n.running || n.cur != nil) {
		n.mu.Unlock()
		return nil // the collective in progress keeps the communicator
	}
	for n.running || n.cur != nil {
		n.idle.Wait()
	}
	c := n.dup
	n.mu.Unlock()
	if c != nil {
		if err := c.Free(); err != nil && !errors.Is(err, ErrFreed) {
			return fmt.Errorf("comm: freeing the communicator of non-blocking collectives: %w", err)
		}
	}
	return nil
}

// Done returns a channel closed when the operation has completed.
func (o *nbcOp) Done() <-chan struct{} { return o.done }

// Wait implements Request. With a ctx that cannot be canceled, an
// operation that has not started yet and is next runs on the caller's
// goroutine (it could not be abandoned anyway).
func (o *nbcOp) Wait(ctx context.Context) (Status, error) {
	select {
	case <-o.done:
		return Status{}, o.err
	default:
	}
	if ctx.Done() == nil && o.n.runInline(o) {
		return Status{}, o.err
	}
	select {
	case <-o.done:
		return Status{}, o.err
	case <-ctx.Done():
		return Status{}, fmt.Errorf("comm: %s on rank %d: Wait: %w", o.call, o.rank, ctxerr.Of(ctx, ErrBroken))
	}
}

// Test implements Request.
func (o *nbcOp) Test() (bool, Status, error) {
	select {
	case <-o.done:
		return true, Status{}, o.err
	default:
		return false, Status{}, nil
	}
}

// The collectives of Comm in their non-blocking form, for backends: each
// starts the blocking call on n's communicator.

// Ibarrier starts a Barrier.
func (n *NBC) Ibarrier(rank int) (Request, error) {
	return n.Start("Ibarrier", rank, func(ctx context.Context, c Comm) error { return c.Barrier(ctx) })
}

// Ibcast starts a Bcast.
func (n *NBC) Ibcast(rank int, buf Buf, root int) (Request, error) {
	return n.Start("Ibcast", rank, func(ctx context.Context, c Comm) error { return c.Bcast(ctx, buf, root) })
}

// Ireduce starts a Reduce.
func (n *NBC) Ireduce(rank int, send, recv Buf, op Op, root int) (Request, error) {
	return n.Start("Ireduce", rank, func(ctx context.Context, c Comm) error { return c.Reduce(ctx, send, recv, op, root) })
}

// Iallreduce starts an AllReduce.
func (n *NBC) Iallreduce(rank int, send, recv Buf, op Op) (Request, error) {
	return n.Start("Iallreduce", rank, func(ctx context.Context, c Comm) error { return c.AllReduce(ctx, send, recv, op) })
}

// Igather starts a Gather; counts, if not nil, receives the per-rank counts.
func (n *NBC) Igather(rank int, send Buf, root int, alloc Alloc, counts []int) (Request, error) {
	return n.Start("Igather", rank, func(ctx context.Context, c Comm) error {
		got, err := c.Gather(ctx, send, root, alloc)
		return fillCounts("Igather", rank, counts, got, err)
	})
}

// Iallgather starts an AllGather; counts, if not nil, receives the per-rank
// counts.
func (n *NBC) Iallgather(rank int, send Buf, alloc Alloc, counts []int) (Request, error) {
	return n.Start("Iallgather", rank, func(ctx context.Context, c Comm) error {
		got, err := c.AllGather(ctx, send, alloc)
		return fillCounts("Iallgather", rank, counts, got, err)
	})
}

// Iscatter starts a Scatter.
func (n *NBC) Iscatter(rank int, send Buf, counts []int, root int, alloc Alloc) (Request, error) {
	return n.Start("Iscatter", rank, func(ctx context.Context, c Comm) error { return c.Scatter(ctx, send, counts, root, alloc) })
}

// Ialltoall starts an Alltoall; recvCounts, if not nil, receives the
// per-rank counts.
func (n *NBC) Ialltoall(rank int, send Buf, sendCounts []int, alloc Alloc, recvCounts []int) (Request, error) {
	return n.Start("Ialltoall", rank, func(ctx context.Context, c Comm) error {
		got, err := c.Alltoall(ctx, send, sendCounts, alloc)
		return fillCounts("Ialltoall", rank, recvCounts, got, err)
	})
}

// fillCounts copies a collective's result counts into the caller's
// slice, which must have one element per rank (Comm's doc): another
// length is an *ArgError of rank's Request, the collective done all the
// same (the other ranks' results are not held up by this rank's slice).
func fillCounts(call string, rank int, dst, got []int, err error) error {
	if err != nil || dst == nil || got == nil {
		return err
	}
	if len(dst) != len(got) {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("the counts slice has %d elements, the communicator %d ranks (pass one of Size elements, or nil)", len(dst), len(got))}
	}
	copy(dst, got)
	return nil
}
