//go:build mpi

package mpi

/*
#include "pz_mpi.h"
*/
import "C"

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/pzgo/pz/comm"
)

// Dup duplicates the communicator (MPI_Comm_dup). Like Split, it runs the
// agreement step (with the check on) or a barrier honouring ctx, and then
// a vote, first; a rank whose ctx ends there breaks c on every rank, the
// others' Dup failing with ErrAbandoned.
func (c *Comm) Dup(ctx context.Context) (comm.Comm, error) {
	if err := c.usable("Dup"); err != nil {
		return nil, err
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.syncBefore(ctx, callDup, "MPI_Comm_dup", nil); err != nil {
		return nil, err
	}
	var nc C.MPI_Comm
	c.st.lock()
	rc := C.pz_comm_dup(c.c, &nc)
	c.st.unlock()
	if rc != 0 {
		return nil, fmt.Errorf("mpi: Dup: %w", c.st.error("MPI_Comm_dup", rc))
	}
	d, err := newComm(c.st, nc, false, c.check)
	if err == nil {
		d.block = c.block
		err = d.withEngine()
	}
	if err != nil {
		return nil, fmt.Errorf("mpi: Dup: %w", err)
	}
	return d, nil
}

// engine returns the engine of c's non-blocking collectives, making it on
// the first call. It runs them as blocking collectives on c's private
// duplicate, made with c (withEngine), so that starting the first one
// needs no communication: MPI's blocking functions (the duplicate's form
// is blocking whatever c's, see withEngine), with context.Background.
func (c *Comm) engine(call string) (*comm.NBC, error) {
	if err := c.usable(call); err != nil {
		return nil, err
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if c.freed.Load() {
		return nil, fmt.Errorf("mpi: %s: %w", call, comm.ErrFreed)
	}
	if c.nbcComm == nil {
		return nil, fmt.Errorf("mpi: %s: %w: the communicator of non-blocking collectives has none of its own", call, comm.ErrInvalidArg)
	}
	if c.nbc == nil {
		dup := c.nbcComm
		c.nbc = comm.NewNBCBlocking(func(context.Context) (comm.Comm, error) { return dup, nil })
		c.st.addEngine(c.nbc)
	}
	return c.nbc, nil
}

// withEngine gives a new communicator its private duplicate for
// non-blocking collectives (MPI_Comm_dup, collective: every member calls
// it right after the communicator is made). The duplicate has none.
//
// The duplicate's collectives take the blocking form (but at
// MPI_THREAD_SERIALIZED, where every collective is polled), whatever c's
// (WithBlocking): only the engine makes collectives on it, every rank's
// with context.Background (comm.NewNBCBlocking), so every rank takes the
// same form, and the blocking functions keep Open MPI's non-blocking
// progress engine (libnbc) out of the engine's goroutine, as
// NewNBCBlocking promises, at half the latency of the non-blocking form
// waited for.
func (c *Comm) withEngine() error {
	var nc C.MPI_Comm
	c.st.lock()
	rc := C.pz_comm_dup(c.c, &nc)
	c.st.unlock()
	if rc != 0 {
		return c.st.error("MPI_Comm_dup", rc)
	}
	d, err := newComm(c.st, nc, false, c.check)
	if err != nil {
		return err
	}
	d.block = !c.st.serialize
	c.nbcComm = d
	return nil
}

// Ibarrier starts a barrier; see comm.Comm.
func (c *Comm) Ibarrier() (comm.Request, error) {
	n, err := c.engine("Ibarrier")
	if err != nil {
		return nil, err
	}
	return c.pending("Ibarrier")(n.Ibarrier(c.rank))
}

// Ibcast starts a Bcast; see comm.Comm.
func (c *Comm) Ibcast(buf comm.Buf, root int) (comm.Request, error) {
	n, err := c.engine("Ibcast")
	if err != nil {
		return nil, err
	}
	return c.pending("Ibcast")(n.Ibcast(c.rank, buf, root))
}

// Ireduce starts a Reduce; see comm.Comm.
func (c *Comm) Ireduce(send, recv comm.Buf, op comm.Op, root int) (comm.Request, error) {
	n, err := c.engine("Ireduce")
	if err != nil {
		return nil, err
	}
	return c.pending("Ireduce")(n.Ireduce(c.rank, send, recv, op, root))
}

// Iallreduce starts an AllReduce; see comm.Comm.
func (c *Comm) Iallreduce(send, recv comm.Buf, op comm.Op) (comm.Request, error) {
	n, err := c.engine("Iallreduce")
	if err != nil {
		return nil, err
	}
	return c.pending("Iallreduce")(n.Iallreduce(c.rank, send, recv, op))
}

// Igather starts a Gather; see comm.Comm.
func (c *Comm) Igather(send comm.Buf, root int, alloc comm.Alloc, counts []int) (comm.Request, error) {
	n, err := c.engine("Igather")
	if err != nil {
		return nil, err
	}
	return c.pending("Igather")(n.Igather(c.rank, send, root, alloc, counts))
}

// Iallgather starts an AllGather; see comm.Comm.
func (c *Comm) Iallgather(send comm.Buf, alloc comm.Alloc, counts []int) (comm.Request, error) {
	n, err := c.engine("Iallgather")
	if err != nil {
		return nil, err
	}
	return c.pending("Iallgather")(n.Iallgather(c.rank, send, alloc, counts))
}

// Iscatter starts a Scatter; see comm.Comm.
func (c *Comm) Iscatter(send comm.Buf, counts []int, root int, alloc comm.Alloc) (comm.Request, error) {
	n, err := c.engine("Iscatter")
	if err != nil {
		return nil, err
	}
	return c.pending("Iscatter")(n.Iscatter(c.rank, send, counts, root, alloc))
}

// Ialltoall starts an Alltoall; see comm.Comm.
func (c *Comm) Ialltoall(send comm.Buf, sendCounts []int, alloc comm.Alloc, recvCounts []int) (comm.Request, error) {
	n, err := c.engine("Ialltoall")
	if err != nil {
		return nil, err
	}
	return c.pending("Ialltoall")(n.Ialltoall(c.rank, send, sendCounts, alloc, recvCounts))
}

// pending returns the function that gives the caller the request of
// non-blocking collective call, which c's engine started (r, err): r
// wrapped in an nbcRequest, which also ends when c breaks.
func (c *Comm) pending(call string) func(r comm.Request, err error) (comm.Request, error) {
	return func(r comm.Request, err error) (comm.Request, error) {
		if err != nil {
			return nil, err
		}
		q := &nbcRequest{r: r, c: c, call: call}
		done := r.(comm.Notifier).Done()
		c.nbcMu.Lock()
		q.prev, c.nbcLast = c.nbcLast, done
		c.nbcMu.Unlock()
		return q, nil
	}
}

// nbcRequest is the request of a non-blocking collective: the engine's
// (comm.NBC), which completes when the collective does on c's duplicate,
// or earlier, with c's error (comm.ErrBroken), when c breaks on this rank
// first (a blocking collective on c abandoned: its ctx ended). The
// engine runs a collective in MPI's blocking function, which nothing
// but the other ranks ends, so it still runs every collective this rank
// started, in order, each holding its buffers until the other ranks take
// part in it (if ever; a Finalize before reports it, ErrUnfinalized).
// Before, Wait with context.Background, a select on Done and
// comm.WaitAny waited for ever for ranks that would not start it.
type nbcRequest struct {
	r    comm.Request // the engine's; a comm.Notifier
	c    *Comm
	call string
	prev <-chan struct{} // the Done of the one started before it on c; nil for the first

	once sync.Once
	done chan struct{} // made by Done's first call
}

// ended reports whether the engine's request has completed.
func (q *nbcRequest) ended() bool {
	select {
	case <-q.r.(comm.Notifier).Done():
		return true
	default:
		return false
	}
}

// next reports whether every collective started on c before q has
// completed (the engine runs them in order).
func (q *nbcRequest) next() bool {
	if q.prev == nil {
		return true
	}
	select {
	case <-q.prev:
		return true
	default:
		return false
	}
}

// brokenErr is the error of a request that c's break ended.
func (q *nbcRequest) brokenErr() error {
	return fmt.Errorf("mpi: %s on rank %d: %w (the communicator broke while it was pending; MPI cannot cancel a collective: it stays with MPI, its buffers too, until the other ranks take part in it)", q.call, q.c.rank, *q.c.broken.Load())
}

// Wait implements comm.Request: it returns when the collective
// completes, c breaks or ctx ends. With a ctx that cannot end, on an
// unbroken c, when every collective started before it has completed,
// it leaves the wait to the engine's request, which runs the collective
// on the caller's goroutine if the engine has not started it (half a
// microsecond less than waiting for the engine's goroutine): that wait,
// inside MPI or for the engine's goroutine inside MPI, ends when the
// collective does, as a blocking collective's, whatever breaks c
// meanwhile.
func (q *nbcRequest) Wait(ctx context.Context) (comm.Status, error) {
	if q.ended() {
		return q.r.Wait(ctx)
	}
	if ctx.Done() == nil && q.c.broken.Load() == nil && q.next() {
		return q.r.Wait(ctx)
	}
	select {
	case <-q.r.(comm.Notifier).Done():
		return q.r.Wait(ctx)
	case <-q.c.brk:
		if q.ended() { // both: the collective's own result
			return q.r.Wait(ctx)
		}
		return comm.Status{}, q.brokenErr()
	case <-ctx.Done():
		return q.r.Wait(ctx) // ctx's error, or the result that came with it
	}
}

// Test implements comm.Request.
func (q *nbcRequest) Test() (bool, comm.Status, error) {
	if q.ended() {
		return q.r.Test()
	}
	select {
	case <-q.c.brk:
		return true, comm.Status{}, q.brokenErr()
	default:
		return false, comm.Status{}, nil
	}
}

// Done implements comm.Notifier: closed when the collective completes or
// c breaks. The first call starts a goroutine that waits for either.
func (q *nbcRequest) Done() <-chan struct{} {
	q.once.Do(func() {
		q.done = make(chan struct{})
		go func() {
			select {
			case <-q.r.(comm.Notifier).Done():
			case <-q.c.brk:
			}
			close(q.done)
		}()
	})
	return q.done
}

// addEngine remembers e for Finalize, first forgetting the engines of
// freed communicators that have nothing left running: a program that
// makes and frees communicators in a loop keeps only those alive.
func (s *state) addEngine(e *comm.NBC) {
	s.nbcMu.Lock()
	defer s.nbcMu.Unlock()
	s.nbcs = slices.DeleteFunc(s.nbcs, (*comm.NBC).Finished)
	s.nbcs = append(s.nbcs, e)
}
