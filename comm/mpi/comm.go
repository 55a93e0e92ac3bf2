//go:build mpi

package mpi

/*
#include "pz_mpi.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// Comm is an MPI communicator. It implements comm.Comm.
//
// Thread safety: MPI runs at MPI_THREAD_MULTIPLE, so point-to-point calls
// from several goroutines go to MPI directly and concurrently. Collectives
// on one Comm are ordered by a mutex held by the calling goroutine for the
// call (agreement step and operation): two goroutines calling collectives
// at once are serialized instead of interleaving inside MPI, although the
// order in which they run must still match across ranks. No goroutine is
// started and no OS thread is locked: MPI_THREAD_MULTIPLE lets any thread
// call MPI, and a hand-off to a dedicated goroutine would add two goroutine
// switches (about 0.3 us) to every call.
//
// Context: with a ctx whose Done channel is nil (context.Background) a call
// uses the blocking MPI function. Otherwise it starts the non-blocking form
// and tests it until it completes or ctx is done. MPI cannot cancel a
// started collective: on cancellation the call returns an error wrapping
// ctx.Err() and comm.ErrBroken, the operation stays with MPI (its buffers
// pinned until MPI completes it, which may never happen) and every later
// call on this Comm returns ErrBroken. In particular a rank that never
// arrives makes the others wait until their deadline; MPI gives no way to
// learn which ranks are missing, so the error cannot name them. Abort is the
// way out of a broken job.
type Comm struct {
	st         *state
	h          *C.pz_handles
	c          C.MPI_Comm
	rank, size int
	world      bool

	coll  sync.Mutex // held for the duration of a collective
	check bool       // run the agreement step; guarded by coll
	// Scratch for the agreement step and count exchanges, guarded by coll.
	agree   []int64 // 2*agreeWords: in, out
	i64     []int64
	cnts    []C.int
	displs  []C.int
	cnts2   []C.int
	displs2 []C.int

	broken atomic.Pointer[error]
	freed  atomic.Bool

	nbc     *comm.NBC // runs the non-blocking collectives; made by the first one, guarded by coll
	nbcComm *Comm     // their communicator: a duplicate made with this one (nil for that duplicate itself)
}

var _ comm.Comm = (*Comm)(nil)

func newComm(st *state, c C.MPI_Comm, world, check bool) (*Comm, error) {
	var rank, size C.int
	if rc := C.pz_comm_setup(c, st.h.errors_return, &rank, &size); rc != 0 {
		return nil, st.error("MPI_Comm_set_errhandler", rc)
	}
	n := int(size)
	return &Comm{st: st, h: &st.h, c: c, rank: int(rank), size: n, world: world, check: check,
		agree: make([]int64, 2*agreeWords), i64: make([]int64, 3*n), cnts: make([]C.int, n), displs: make([]C.int, n),
		cnts2: make([]C.int, n), displs2: make([]C.int, n)}, nil
}

// Rank is this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int { return c.size }

func (c *Comm) usable(call string) error {
	if c.st.finalized.Load() {
		return fmt.Errorf("mpi: %s: %w", call, ErrFinalized)
	}
	if c.freed.Load() {
		return fmt.Errorf("mpi: %s: %w", call, comm.ErrFreed)
	}
	if e := c.broken.Load(); e != nil {
		return fmt.Errorf("mpi: %s: %w", call, *e)
	}
	return nil
}

func (c *Comm) breakWith(cause error) error {
	e := fmt.Errorf("%w: %w", comm.ErrBroken, cause)
	c.broken.CompareAndSwap(nil, &e)
	return e
}

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func cints(s []C.int) *C.int { return unsafe.SliceData(s) }

// do runs one MPI operation: block with a ctx that cannot be canceled,
// otherwise start and poll. pins are the memory MPI uses until completion.
// A collective abandoned on ctx breaks the communicator.
func (c *Comm) do(ctx context.Context, call string, coll bool, block func() C.int, start func(*C.MPI_Request) C.int, pins ...unsafe.Pointer) error {
	if ctx.Done() == nil && !c.st.serialize {
		if rc := block(); rc != 0 {
			return fmt.Errorf("mpi: %w", c.st.error(call, rc))
		}
		return nil
	}
	if err := ctx.Err(); err != nil {
		if coll {
			err = c.breakWith(err)
		}
		return fmt.Errorf("mpi: %s: %w", call, err)
	}
	r := newRequest(c, call, pins...)
	c.st.lock()
	rc := start(r.req)
	c.st.unlock()
	if rc != 0 {
		r.release()
		return fmt.Errorf("mpi: %w", c.st.error(call, rc))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := poll(ctx, r.test); err != nil {
		if coll {
			err = c.breakWith(err)
		}
		return fmt.Errorf("mpi: %s: %w", call, err)
	}
	return r.err
}

// argErr is a local validation failure.
func (c *Comm) argErr(call call, format string, args ...any) error {
	return &comm.ArgError{Op: call.String(), Rank: c.rank, Detail: fmt.Sprintf(format, args...)}
}

// pre runs before a collective whose arguments need no count exchange: with
// the check on it is the agreement step; with it off, or on one rank, a
// local validation failure is returned as is.
func (c *Comm) pre(ctx context.Context, d desc, lerr error) error {
	if !c.check || c.size == 1 {
		return lerr
	}
	v := agreeVector(d, c.rank, c.size, lerr)
	in, out := c.agree[:agreeWords], c.agree[agreeWords:]
	copy(in, v[:])
	if err := c.allreduceMaxI64(ctx, in, out); err != nil {
		return err
	}
	failRank, same := agreed([agreeWords]int64(out), c.size)
	if failRank < 0 && same {
		return nil
	}
	return c.explain(ctx, d, failRank, lerr)
}

// explain runs on every rank once the agreement step found a failure or a
// mismatch, and turns it into the same error everywhere: the failing rank's
// ArgError (its detail is broadcast), or a MismatchError built from every
// rank's descriptor.
func (c *Comm) explain(ctx context.Context, d desc, failRank int, lerr error) error {
	if failRank >= 0 {
		const maxDetail = 512 // bytes of the failing rank's message sent to all
		buf := make([]byte, maxDetail)
		if c.rank == failRank && lerr != nil {
			msg := lerr.Error()
			if ae := (*comm.ArgError)(nil); errors.As(lerr, &ae) {
				msg = ae.Detail
			}
			copy(buf, msg)
		}
		bp := ptr(buf)
		err := c.do(ctx, "MPI_Bcast", true,
			func() C.int { return C.pz_bcast(bp, maxDetail, c.h.byte, C.int(failRank), c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_ibcast(bp, maxDetail, c.h.byte, C.int(failRank), c.c, r) }, bp)
		if err != nil {
			return fmt.Errorf("%w: mpi: %s: rank %d passed an invalid argument; sending its message failed: %w", comm.ErrInvalidArg, d.call, failRank, err)
		}
		n := 0
		for n < len(buf) && buf[n] != 0 {
			n++
		}
		return &comm.ArgError{Op: d.call.String(), Rank: failRank, Detail: string(buf[:n])}
	}
	w := d.words()
	all := make([][descWords]uint64, c.size)
	sp, rp := unsafe.Pointer(&w[0]), unsafe.Pointer(&all[0][0])
	err := c.do(ctx, "MPI_Allgather", true,
		func() C.int { return C.pz_allgather(sp, descWords, rp, descWords, c.h.i64, c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_iallgather(sp, descWords, rp, descWords, c.h.i64, c.c, r) }, sp, rp)
	if err != nil {
		return fmt.Errorf("%w: mpi: %s: collecting the differing arguments failed: %w", comm.ErrMismatch, d.call, err)
	}
	return mismatch(d, all)
}

func (c *Comm) allreduceMaxI64(ctx context.Context, in, out []int64) error {
	sp, rp := unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0])
	n := C.int(len(in))
	return c.do(ctx, "MPI_Allreduce", true,
		func() C.int { return C.pz_allreduce(sp, rp, n, c.h.i64, c.h.max, c.c, 0) },
		func(r *C.MPI_Request) C.int { return C.pz_iallreduce(sp, rp, n, c.h.i64, c.h.max, c.c, 0, r) }, sp, rp)
}

// checkBuf validates a buffer (comm.CheckBuf, as on comm/local) and MPI's
// count limit; what names the buffer in the latter's message.
func (c *Comm) checkBuf(k call, what string, b comm.Buf) error {
	if err := comm.CheckBuf(k.String(), c.rank, b); err != nil {
		return err
	}
	if b.Len() > math.MaxInt32 {
		return c.argErr(k, "%s has %d elements; MPI counts are limited to %d", what, b.Len(), math.MaxInt32)
	}
	return nil
}

func (c *Comm) checkRoot(k call, root int) error {
	return comm.CheckRoot(k.String(), c.rank, root, c.size)
}

// overlap reports whether a and b share memory, and whether they start at
// the same address (MPI's in-place case).
func overlap(a, b []byte) (any, same bool) {
	if len(a) == 0 || len(b) == 0 {
		return false, len(a) == 0 && len(b) == 0
	}
	pa, pb := uintptr(ptr(a)), uintptr(ptr(b))
	if pa == pb {
		return true, true
	}
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a)), false
}

func (c *Comm) checkReduce(k call, send, recv comm.Buf, op comm.Op, wantRecv bool) (lerr error, inplace C.int) {
	if err := c.checkBuf(k, "send", send); err != nil {
		return err, 0
	}
	if !op.Supports(send.Type) {
		return c.argErr(k, "op %v is not defined on %s", op, send.Type), 0
	}
	if !wantRecv {
		return nil, 0
	}
	if recv.Type != send.Type {
		return c.argErr(k, "recv datatype %v differs from send datatype %v", recv.Type, send.Type), 0
	}
	if len(recv.Bytes) != len(send.Bytes) {
		return c.argErr(k, "recv has %d elements, send %d; they must be equal", recv.Len(), send.Len()), 0
	}
	switch any, same := overlap(send.Bytes, recv.Bytes); {
	case same:
		return nil, 1
	case any:
		return c.argErr(k, "send and recv overlap without being the same buffer"), 0
	}
	return nil, 0
}

// Barrier returns once every rank has entered it. With the check on, the
// agreement step is itself the barrier (no rank leaves an MPI_Allreduce
// before all have entered).
func (c *Comm) Barrier(ctx context.Context) error {
	if err := c.usable("Barrier"); err != nil {
		return err
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if c.check && c.size > 1 {
		return c.pre(ctx, desc{call: callBarrier, count: noCount, root: noRoot}, nil)
	}
	return c.do(ctx, "MPI_Barrier", true,
		func() C.int { return C.pz_barrier(c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_ibarrier(c.c, r) })
}

// Bcast copies root's buf into every rank's buf (MPI_Bcast).
func (c *Comm) Bcast(ctx context.Context, buf comm.Buf, root int) error {
	if err := c.usable("Bcast"); err != nil {
		return err
	}
	lerr := c.checkBuf(callBcast, "buf", buf)
	if lerr == nil {
		lerr = c.checkRoot(callBcast, root)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{callBcast, buf.Type, comm.NoOp, int64(buf.Len()), int64(root)}, lerr); err != nil {
		return err
	}
	if c.size == 1 {
		return nil
	}
	bp, n, dt := ptr(buf.Bytes), C.int(buf.Len()), c.h.types[buf.Type]
	return c.do(ctx, "MPI_Bcast", true,
		func() C.int { return C.pz_bcast(bp, n, dt, C.int(root), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_ibcast(bp, n, dt, C.int(root), c.c, r) }, bp)
}

// Reduce combines send across ranks with op into recv on root (MPI_Reduce).
// send and recv may be the same buffer on root.
func (c *Comm) Reduce(ctx context.Context, send, recv comm.Buf, op comm.Op, root int) error {
	if err := c.usable("Reduce"); err != nil {
		return err
	}
	lerr := c.checkRoot(callReduce, root)
	var inplace C.int
	if lerr == nil {
		lerr, inplace = c.checkReduce(callReduce, send, recv, op, c.rank == root)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{callReduce, send.Type, op, int64(send.Len()), int64(root)}, lerr); err != nil {
		return err
	}
	sp, rp, n := ptr(send.Bytes), ptr(recv.Bytes), C.int(send.Len())
	if c.rank != root {
		rp = nil
	}
	dt, mop := c.h.types[send.Type], c.h.ops[op]
	return c.do(ctx, "MPI_Reduce", true,
		func() C.int { return C.pz_reduce(sp, rp, n, dt, mop, C.int(root), c.c, inplace) },
		func(r *C.MPI_Request) C.int { return C.pz_ireduce(sp, rp, n, dt, mop, C.int(root), c.c, inplace, r) }, sp, rp)
}

// AllReduce combines send across ranks with op into every rank's recv
// (MPI_Allreduce). send and recv may be the same buffer (MPI_IN_PLACE).
func (c *Comm) AllReduce(ctx context.Context, send, recv comm.Buf, op comm.Op) error {
	if err := c.usable("AllReduce"); err != nil {
		return err
	}
	lerr, inplace := c.checkReduce(callAllReduce, send, recv, op, true)
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{callAllReduce, send.Type, op, int64(send.Len()), noRoot}, lerr); err != nil {
		return err
	}
	sp, rp, n := ptr(send.Bytes), ptr(recv.Bytes), C.int(send.Len())
	dt, mop := c.h.types[send.Type], c.h.ops[op]
	return c.do(ctx, "MPI_Allreduce", true,
		func() C.int { return C.pz_allreduce(sp, rp, n, dt, mop, c.c, inplace) },
		func(r *C.MPI_Request) C.int { return C.pz_iallreduce(sp, rp, n, dt, mop, c.c, inplace, r) }, sp, rp)
}

// layout fills c.cnts/c.displs from per-rank counts and returns the total
// and whether all counts are equal. It fails (identically on every rank)
// when the total exceeds MPI's int range.
func (c *Comm) layout(k call, counts []int, cnts, displs []C.int) (total int, equal bool, err error) {
	equal = true
	for i, n := range counts {
		if total+n > math.MaxInt32 {
			return 0, false, &comm.ArgError{Op: k.String(), Rank: i, Detail: fmt.Sprintf("the ranks' elements add up to more than MPI's limit of %d", math.MaxInt32)}
		}
		cnts[i], displs[i] = C.int(n), C.int(total)
		total += n
		equal = equal && n == counts[0]
	}
	return total, equal, nil
}

// recvBuf calls alloc and checks the result; a short buffer is replaced by
// scratch memory so that the collective still completes on every rank, and
// reported as an error on this rank.
func recvBuf(k call, alloc comm.Alloc, count int, dt comm.Datatype) ([]byte, error) {
	want := count * dt.Size()
	b := alloc(count)
	if len(b) < want {
		return make([]byte, want), fmt.Errorf("mpi: %s: alloc(%d) returned %d bytes, want %d: %w", k, count, len(b), want, comm.ErrInvalidArg)
	}
	return b[:want], nil
}

// gatherCounts is the count exchange of Gather and AllGather, after the
// agreement step. Every agreement step is the same MPI_Allreduce of three
// words, so that ranks that reached different calls (a bug in the program)
// still meet in matching MPI collectives and learn of it.
func (c *Comm) gatherCounts(ctx context.Context, d desc, lerr error, n int, all bool, root int) ([]int, error) {
	counts := make([]int, c.size)
	if err := c.pre(ctx, d, lerr); err != nil {
		return nil, err
	}
	if c.size == 1 {
		counts[0] = n
		return counts, nil
	}
	in := int64(n)
	sp, rp := unsafe.Pointer(&in), unsafe.Pointer(&c.i64[0])
	var err error
	if all {
		err = c.do(ctx, "MPI_Allgather", true,
			func() C.int { return C.pz_allgather(sp, 1, rp, 1, c.h.i64, c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_iallgather(sp, 1, rp, 1, c.h.i64, c.c, r) }, sp, rp)
	} else {
		err = c.do(ctx, "MPI_Gather", true,
			func() C.int { return C.pz_gather(sp, 1, rp, 1, c.h.i64, C.int(root), c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_igather(sp, 1, rp, 1, c.h.i64, C.int(root), c.c, r) }, sp, rp)
	}
	if err != nil {
		return nil, err
	}
	for i := range counts {
		counts[i] = int(c.i64[i])
	}
	return counts, nil
}

// AllGather collects every rank's send (lengths may differ) on every rank:
// the agreement step, a count exchange (MPI_Allgather), then MPI_Allgather
// when all counts are equal or MPI_Allgatherv.
func (c *Comm) AllGather(ctx context.Context, send comm.Buf, alloc comm.Alloc) ([]int, error) {
	if err := c.usable("AllGather"); err != nil {
		return nil, err
	}
	lerr := c.checkBuf(callAllGather, "send", send)
	c.coll.Lock()
	defer c.coll.Unlock()
	d := desc{callAllGather, send.Type, comm.NoOp, noCount, noRoot}
	counts, err := c.gatherCounts(ctx, d, lerr, send.Len(), true, 0)
	if err != nil {
		return nil, err
	}
	total, equal, err := c.layout(callAllGather, counts, c.cnts, c.displs)
	if err != nil {
		return nil, err
	}
	recv, aerr := recvBuf(callAllGather, alloc, total, send.Type)
	sp, rp, n, dt := ptr(send.Bytes), ptr(recv), C.int(send.Len()), c.h.types[send.Type]
	if c.size == 1 {
		copy(recv, send.Bytes)
		return counts, aerr
	}
	cp, dp := cints(c.cnts), cints(c.displs)
	if equal {
		err = c.do(ctx, "MPI_Allgather", true,
			func() C.int { return C.pz_allgather(sp, n, rp, n, dt, c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_iallgather(sp, n, rp, n, dt, c.c, r) }, sp, rp)
	} else {
		err = c.do(ctx, "MPI_Allgatherv", true,
			func() C.int { return C.pz_allgatherv(sp, n, rp, cp, dp, dt, c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_iallgatherv(sp, n, rp, cp, dp, dt, c.c, r) },
			sp, rp, unsafe.Pointer(cp), unsafe.Pointer(dp))
	}
	if err != nil {
		return nil, err
	}
	return counts, aerr
}

// Gather collects every rank's send on root (count exchange, then
// MPI_Gatherv). Non-roots get nil counts.
func (c *Comm) Gather(ctx context.Context, send comm.Buf, root int, alloc comm.Alloc) ([]int, error) {
	if err := c.usable("Gather"); err != nil {
		return nil, err
	}
	lerr := c.checkBuf(callGather, "send", send)
	if lerr == nil {
		lerr = c.checkRoot(callGather, root)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	d := desc{callGather, send.Type, comm.NoOp, noCount, int64(root)}
	counts, err := c.gatherCounts(ctx, d, lerr, send.Len(), false, root)
	if err != nil {
		return nil, err
	}
	isRoot := c.rank == root
	var recv []byte
	var aerr error
	if isRoot {
		total, _, err := c.layout(callGather, counts, c.cnts, c.displs)
		if err != nil {
			// Only root knows the total without the check; the others
			// would block in MPI_Gatherv, so send nothing through MPI
			// and let MPI report the count mismatch to them.
			return nil, err
		}
		recv, aerr = recvBuf(callGather, alloc, total, send.Type)
	}
	if c.size == 1 {
		copy(recv, send.Bytes)
		return counts, aerr
	}
	sp, rp, n, dt := ptr(send.Bytes), ptr(recv), C.int(send.Len()), c.h.types[send.Type]
	cp, dp := cints(c.cnts), cints(c.displs)
	err = c.do(ctx, "MPI_Gatherv", true,
		func() C.int { return C.pz_gatherv(sp, n, rp, cp, dp, dt, C.int(root), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_igatherv(sp, n, rp, cp, dp, dt, C.int(root), c.c, r) },
		sp, rp, unsafe.Pointer(cp), unsafe.Pointer(dp))
	if err != nil {
		return nil, err
	}
	if !isRoot {
		return nil, nil
	}
	return counts, aerr
}

// Scatter sends counts[i] consecutive elements of root's send to rank i
// (the counts are scattered first, then MPI_Scatterv).
func (c *Comm) Scatter(ctx context.Context, send comm.Buf, counts []int, root int, alloc comm.Alloc) error {
	if err := c.usable("Scatter"); err != nil {
		return err
	}
	lerr := c.checkRoot(callScatter, root)
	if lerr == nil && !send.Type.Valid() {
		lerr = c.argErr(callScatter, "invalid datatype %v", send.Type)
	}
	if lerr == nil && c.rank == root {
		lerr = c.checkBuf(callScatter, "send", send)
		if lerr == nil {
			lerr = c.checkCounts(callScatter, counts, send.Len())
		}
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{callScatter, send.Type, comm.NoOp, noCount, int64(root)}, lerr); err != nil {
		return err
	}
	isRoot := c.rank == root
	if isRoot {
		for i, n := range counts {
			c.i64[i] = int64(n)
			c.cnts[i] = C.int(n)
		}
		off := 0
		for i, n := range counts {
			c.displs[i] = C.int(off)
			off += n
		}
	}
	var mine int64
	if c.size == 1 {
		mine = c.i64[0]
	} else {
		sp, rp := unsafe.Pointer(&c.i64[0]), unsafe.Pointer(&mine)
		if err := c.do(ctx, "MPI_Scatter", true,
			func() C.int { return C.pz_scatter(sp, 1, rp, 1, c.h.i64, C.int(root), c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_iscatter(sp, 1, rp, 1, c.h.i64, C.int(root), c.c, r) }, sp, rp); err != nil {
			return err
		}
	}
	recv, aerr := recvBuf(callScatter, alloc, int(mine), send.Type)
	if c.size == 1 {
		copy(recv, send.Bytes)
		return aerr
	}
	var sp unsafe.Pointer
	if isRoot {
		sp = ptr(send.Bytes)
	}
	rp, n, dt := ptr(recv), C.int(mine), c.h.types[send.Type]
	cp, dp := cints(c.cnts), cints(c.displs)
	if err := c.do(ctx, "MPI_Scatterv", true,
		func() C.int { return C.pz_scatterv(sp, cp, dp, rp, n, dt, C.int(root), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_iscatterv(sp, cp, dp, rp, n, dt, C.int(root), c.c, r) },
		sp, rp, unsafe.Pointer(cp), unsafe.Pointer(dp)); err != nil {
		return err
	}
	return aerr
}

// checkCounts validates a counts slice of length Size adding up to total.
func (c *Comm) checkCounts(k call, counts []int, total int) error {
	return comm.CheckCounts(k.String(), c.rank, counts, c.size, total)
}

// Alltoall sends sendCounts[i] elements of send to rank i and receives every
// rank's part for this rank (count exchange with MPI_Alltoall, which with
// the agreement step, then MPI_Alltoallv).
func (c *Comm) Alltoall(ctx context.Context, send comm.Buf, sendCounts []int, alloc comm.Alloc) ([]int, error) {
	if err := c.usable("Alltoall"); err != nil {
		return nil, err
	}
	lerr := c.checkBuf(callAlltoall, "send", send)
	if lerr == nil {
		lerr = c.checkCounts(callAlltoall, sendCounts, send.Len())
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	d := desc{callAlltoall, send.Type, comm.NoOp, noCount, noRoot}
	if err := c.pre(ctx, d, lerr); err != nil {
		return nil, err
	}
	out := make([]int64, c.size)
	for i, n := range sendCounts {
		out[i] = int64(n)
	}
	recvWords := c.i64[:c.size]
	if c.size == 1 {
		copy(recvWords, out)
	} else {
		sp, rp := unsafe.Pointer(&out[0]), unsafe.Pointer(&recvWords[0])
		if err := c.do(ctx, "MPI_Alltoall", true,
			func() C.int { return C.pz_alltoall(sp, 1, rp, 1, c.h.i64, c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_ialltoall(sp, 1, rp, 1, c.h.i64, c.c, r) }, sp, rp); err != nil {
			return nil, err
		}
	}
	recvCounts := make([]int, c.size)
	for i := range recvCounts {
		recvCounts[i] = int(recvWords[i])
	}
	total, _, err := c.layout(callAlltoall, recvCounts, c.cnts2, c.displs2)
	if err != nil {
		return nil, err
	}
	_, _, _ = c.layout(callAlltoall, sendCounts, c.cnts, c.displs) // checked above: fits
	recv, aerr := recvBuf(callAlltoall, alloc, total, send.Type)
	if c.size == 1 {
		copy(recv, send.Bytes)
		return recvCounts, aerr
	}
	sp, rp, dt := ptr(send.Bytes), ptr(recv), c.h.types[send.Type]
	sc, sd, rc, rd := cints(c.cnts), cints(c.displs), cints(c.cnts2), cints(c.displs2)
	if err := c.do(ctx, "MPI_Alltoallv", true,
		func() C.int { return C.pz_alltoallv(sp, sc, sd, rp, rc, rd, dt, c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_ialltoallv(sp, sc, sd, rp, rc, rd, dt, c.c, r) },
		sp, rp, unsafe.Pointer(sc), unsafe.Pointer(sd), unsafe.Pointer(rc), unsafe.Pointer(rd)); err != nil {
		return nil, err
	}
	return recvCounts, aerr
}

// checkP2P validates a peer rank and a tag (comm.CheckPeer, comm.CheckTag,
// as on comm/local) and MPI's tag limit. any allows the wildcards.
func (c *Comm) checkP2P(what string, peer, tag int, any bool) error {
	if err := comm.FirstErr(comm.CheckPeer(what, c.rank, peer, c.size, any), comm.CheckTag(what, c.rank, tag, any)); err != nil {
		return err
	}
	if tag > math.MaxInt32 {
		return &comm.ArgError{Op: what, Rank: c.rank, Detail: fmt.Sprintf("tag %d exceeds MPI's limit %d", tag, math.MaxInt32)}
	}
	return nil
}

// checkP2PBuf validates a message buffer (comm.CheckBuf) and MPI's size
// limit on a message, in bytes.
func (c *Comm) checkP2PBuf(what string, b comm.Buf) error {
	if err := comm.CheckBuf(what, c.rank, b); err != nil {
		return err
	}
	if len(b.Bytes) > math.MaxInt32 {
		return &comm.ArgError{Op: what, Rank: c.rank, Detail: fmt.Sprintf("a message of %d bytes exceeds MPI's limit of %d", len(b.Bytes), math.MaxInt32)}
	}
	return nil
}

// Send sends buf to dest (MPI_Send, or MPI_Isend tested until done when ctx
// can be canceled; a canceled Send may still be delivered later).
// Point-to-point messages travel as bytes: the receiver checks the size
// against its element type.
func (c *Comm) Send(ctx context.Context, buf comm.Buf, dest, tag int) error {
	if err := c.usable("Send"); err != nil {
		return err
	}
	if err := c.checkP2PBuf("Send", buf); err != nil {
		return err
	}
	if err := c.checkP2P("Send", dest, tag, false); err != nil {
		return err
	}
	bp, n := ptr(buf.Bytes), C.int(len(buf.Bytes))
	return c.do(ctx, "MPI_Send", false,
		func() C.int { return C.pz_send(bp, n, C.int(dest), C.int(tag), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_isend(bp, n, C.int(dest), C.int(tag), c.c, r) }, bp)
}

// Recv receives one message (MPI_Mprobe, or MPI_Improbe polled when ctx can
// be canceled, then MPI_Mrecv, so that another thread cannot steal the
// matched message). A message that does not fit the buffer into returns is
// consumed and ErrTruncated returned.
func (c *Comm) Recv(ctx context.Context, dt comm.Datatype, source, tag int, into comm.Into) (comm.Status, error) {
	if err := c.usable("Recv"); err != nil {
		return comm.Status{}, err
	}
	if !dt.Valid() {
		return comm.Status{}, fmt.Errorf("mpi: Recv: invalid datatype %v: %w", dt, comm.ErrInvalidArg)
	}
	if err := c.checkP2P("Recv", source, tag, true); err != nil {
		return comm.Status{}, err
	}
	msg, st, err := c.mprobe(ctx, "Recv", source, tag, true)
	if err != nil {
		return comm.Status{}, err
	}
	return c.mrecv("Recv", &msg, st, dt, into)
}

// mprobe matches a message (MPI_Mprobe, or MPI_Improbe polled when ctx can
// be canceled). Without wait it tests once and returns a null message if
// none is there.
func (c *Comm) mprobe(ctx context.Context, call string, source, tag int, wait bool) (C.MPI_Message, C.pz_status, error) {
	msg := c.h.message_null
	var st C.pz_status
	if wait && ctx.Done() == nil && !c.st.serialize {
		if rc := C.pz_mprobe(C.int(source), C.int(tag), c.c, &msg, &st); rc != 0 {
			return msg, st, fmt.Errorf("mpi: %s: %w", call, c.st.error("MPI_Mprobe", rc))
		}
		return msg, st, nil
	}
	test := func() (bool, error) {
		var flag C.int
		c.st.lock()
		rc := C.pz_improbe(C.int(source), C.int(tag), c.c, &flag, &msg, &st)
		c.st.unlock()
		if rc != 0 {
			return false, c.st.error("MPI_Improbe", rc)
		}
		return flag != 0, nil
	}
	var err error
	if wait {
		err = poll(ctx, test)
	} else {
		_, err = test()
	}
	if err != nil {
		return msg, st, fmt.Errorf("mpi: %s: %w", call, err)
	}
	return msg, st, nil
}

// probeStatus turns a probed message's status into a comm.Status counting
// elements of dt.
func probeStatus(call string, st C.pz_status, dt comm.Datatype) (comm.Status, error) {
	status := comm.Status{Source: int(st.source), Tag: int(st.tag)}
	nbytes := int(st.bytes)
	if nbytes%dt.Size() != 0 {
		return status, fmt.Errorf("%w: mpi: %s: message of %d bytes from rank %d is not a whole number of %s (the sender used another datatype)", comm.ErrMismatch, call, nbytes, status.Source, dt)
	}
	status.Count = nbytes / dt.Size()
	return status, nil
}

// mrecv receives a matched message into the buffer into returns. A message
// that does not fit, or has the wrong size for dt, is consumed and the
// error returned.
func (c *Comm) mrecv(call string, msg *C.MPI_Message, st C.pz_status, dt comm.Datatype, into comm.Into) (comm.Status, error) {
	nbytes := int(st.bytes)
	status, err := probeStatus(call, st, dt)
	var buf []byte
	if err == nil {
		buf, err = into(status.Count)
		if err == nil && len(buf) < nbytes {
			err = fmt.Errorf("mpi: %s: message of %d elements from rank %d, buffer holds %d: %w", call, status.Count, status.Source, len(buf)/dt.Size(), comm.ErrTruncated)
		}
	}
	if err != nil {
		// Consume the message: receiving it into no memory truncates it.
		c.st.lock()
		C.pz_mrecv(nil, 0, msg, &st)
		c.st.unlock()
		return status, err
	}
	c.st.lock()
	rc := C.pz_mrecv(ptr(buf), C.int(nbytes), msg, &st)
	c.st.unlock()
	if rc != 0 {
		return status, fmt.Errorf("mpi: %s: %w", call, c.st.error("MPI_Mrecv", rc))
	}
	return status, nil
}

// Isend starts a send (MPI_Isend). buf is pinned until the request
// completes.
func (c *Comm) Isend(buf comm.Buf, dest, tag int) (comm.Request, error) {
	if err := c.usable("Isend"); err != nil {
		return nil, err
	}
	if err := c.checkP2PBuf("Isend", buf); err != nil {
		return nil, err
	}
	if err := c.checkP2P("Isend", dest, tag, false); err != nil {
		return nil, err
	}
	bp := ptr(buf.Bytes)
	r := newRequest(c, "MPI_Isend", bp)
	c.st.lock()
	rc := C.pz_isend(bp, C.int(len(buf.Bytes)), C.int(dest), C.int(tag), c.c, r.req)
	c.st.unlock()
	if rc != 0 {
		r.release()
		return nil, fmt.Errorf("mpi: Isend: %w", c.st.error("MPI_Isend", rc))
	}
	return r, nil
}

// Irecv starts a receive into buf (MPI_Irecv). A larger message completes
// with an error wrapping comm.ErrTruncated.
func (c *Comm) Irecv(buf comm.Buf, source, tag int) (comm.Request, error) {
	if err := c.usable("Irecv"); err != nil {
		return nil, err
	}
	if err := c.checkP2PBuf("Irecv", buf); err != nil {
		return nil, err
	}
	if err := c.checkP2P("Irecv", source, tag, true); err != nil {
		return nil, err
	}
	bp := ptr(buf.Bytes)
	r := newRequest(c, "MPI_Irecv", bp)
	r.recv, r.dt = true, buf.Type
	c.st.lock()
	rc := C.pz_irecv(bp, C.int(len(buf.Bytes)), C.int(source), C.int(tag), c.c, r.req)
	c.st.unlock()
	if rc != 0 {
		r.release()
		return nil, fmt.Errorf("mpi: Irecv: %w", c.st.error("MPI_Irecv", rc))
	}
	return r, nil
}

// Split partitions the ranks by color (MPI_Comm_split). MPI_Comm_split has
// no non-blocking form: when ctx can be canceled (or the check is on) an
// agreement step or barrier honouring ctx runs first, so that every rank has
// arrived before the blocking call.
func (c *Comm) Split(ctx context.Context, color, key int) (comm.Comm, error) {
	if err := c.usable("Split"); err != nil {
		return nil, err
	}
	var lerr error
	if color < 0 && color != comm.Undefined {
		lerr = c.argErr(callSplit, "color %d must be >= 0 or comm.Undefined", color)
	} else if color > math.MaxInt32 || key < math.MinInt32 || key > math.MaxInt32 {
		lerr = c.argErr(callSplit, "color %d or key %d outside MPI's int range", color, key)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.syncBefore(ctx, callSplit, lerr); err != nil {
		return nil, err
	}
	mcolor := C.int(color)
	if color == comm.Undefined {
		mcolor = c.h.undefined
	}
	var nc C.MPI_Comm
	c.st.lock()
	rc := C.pz_comm_split(c.c, mcolor, C.int(key), &nc)
	c.st.unlock()
	if rc != 0 {
		return nil, fmt.Errorf("mpi: Split: %w", c.st.error("MPI_Comm_split", rc))
	}
	if nc == c.h.null {
		return nil, nil
	}
	sub, err := newComm(c.st, nc, false, c.check)
	if err == nil {
		err = sub.withEngine()
	}
	if err != nil {
		return nil, fmt.Errorf("mpi: Split: %w", err)
	}
	return sub, nil
}

// syncBefore makes every rank arrive before a blocking-only MPI call.
func (c *Comm) syncBefore(ctx context.Context, k call, lerr error) error {
	if c.check {
		return c.pre(ctx, desc{call: k, count: noCount, root: noRoot}, lerr)
	}
	if lerr != nil {
		return lerr
	}
	if ctx.Done() == nil || c.size == 1 {
		return nil
	}
	return c.do(ctx, "MPI_Ibarrier", true, nil,
		func(r *C.MPI_Request) C.int { return C.pz_ibarrier(c.c, r) })
}

// SetCheck turns the cross-rank agreement step of this communicator's
// collectives on or off (see WithCheck); communicators split from it
// inherit the setting. Every rank must call it at the same point of its
// sequence of collectives, or the ranks' next collectives will not match.
func (c *Comm) SetCheck(on bool) {
	c.coll.Lock()
	c.check = on
	c.coll.Unlock()
}

// Check reports whether collectives on c run the agreement step.
func (c *Comm) Check() bool {
	c.coll.Lock()
	defer c.coll.Unlock()
	return c.check
}

// Abort aborts every process of the job (MPI_Abort on this communicator;
// Open MPI ends the whole job). It returns only if MPI_Abort fails.
func (c *Comm) Abort(code int) error {
	if c.st.finalized.Load() {
		return fmt.Errorf("mpi: Abort: %w", ErrFinalized)
	}
	rc := C.pz_abort(c.c, C.int(code))
	return fmt.Errorf("mpi: Abort: %w", c.st.error("MPI_Abort", rc))
}

// Free releases the communicator (MPI_Comm_free, collective). The world
// communicator is only marked freed; a broken one is marked freed without
// calling MPI, whose pending operations on it may never complete. Freeing
// twice returns ErrFreed.
func (c *Comm) Free() error {
	if c.st.finalized.Load() {
		return fmt.Errorf("mpi: Free: %w", ErrFinalized)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if c.freed.Swap(true) {
		return fmt.Errorf("mpi: Free: %w", comm.ErrFreed)
	}
	var nerr error
	if c.nbc != nil {
		nerr = c.nbc.Close() // frees nbcComm unless a collective holds it
	} else if c.nbcComm != nil {
		nerr = c.nbcComm.Free()
	}
	if c.world || c.broken.Load() != nil {
		return nerr
	}
	c.st.lock()
	rc := C.pz_comm_free(&c.c)
	c.st.unlock()
	if rc != 0 {
		return fmt.Errorf("mpi: Free: %w", c.st.error("MPI_Comm_free", rc))
	}
	return nil
}
