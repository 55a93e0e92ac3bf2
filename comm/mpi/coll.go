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
	"runtime"
	"slices"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// Collectives.

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
		return c.collErr(callBarrier, c.pre(ctx, desc{call: callBarrier, count: noCount, root: noRoot}, nil))
	}
	if c.collBlocks(ctx) {
		slot := c.collSlotU("MPI_Barrier")
		rc := C.pz_barrier_step(c.cu, slot, C.uint64_t(c.seq))
		return c.collErr(callBarrier, c.stepDone("MPI_Barrier", rc))
	}
	return c.collErr(callBarrier, c.do(ctx, "MPI_Barrier", true,
		func() C.int { return C.pz_barrier(c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_ibarrier(c.c, r) }))
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
	d := desc{callBcast, buf.Type, comm.NoOp, int64(buf.Len()), int64(root)}
	var send []byte
	if c.rank == root {
		send = buf.Bytes
	}
	if done, err := c.fused(ctx, d, lerr, bcastCode(len(buf.Bytes)), send, buf.Bytes); done {
		return c.collErr(callBcast, err)
	}
	if c.size == 1 {
		return nil
	}
	if n := buf.Len(); n <= maxCount && c.collBlocks(ctx) {
		// One call with integer arguments, as in allReduceMPI.
		slot := c.collSlotU("MPI_Bcast")
		rc := C.pz_bcast_step(C.uintptr_t(uintptr(ptr(buf.Bytes))), C.int(n), c.st.typesU[buf.Type], C.int(root), c.cu, slot, C.uint64_t(c.seq))
		runtime.KeepAlive(buf.Bytes) // C had its address
		return c.collErr(callBcast, c.stepDone("MPI_Bcast", rc))
	}
	// Past MPI's counts, in pieces of 2^30 elements: each piece a
	// contiguous predefined type, which MPI pipelines (one derived type
	// for the whole buffer was slower: `mpirun -n 2 mpi.test -test.run
	// TestLargeCounts/Bcast3GiB` took 13.2 s that way, 10.3 s in pieces).
	dt := c.h.types[buf.Type]
	return c.collErr(callBcast, pieces(buf.Len(), buf.Type.Size(), func(off int, n C.int) error {
		bp := ptr(buf.Bytes[off:])
		return c.doSized(ctx, "MPI_Bcast", true, int(n)*buf.Type.Size(),
			func() C.int { return C.pz_bcast(bp, n, dt, C.int(root), c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_ibcast(bp, n, dt, C.int(root), c.c, r) }, bp)
	}))
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
		inplace, lerr = c.checkReduce(callReduce, send, recv, op, c.rank == root)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	d := desc{callReduce, send.Type, op, int64(send.Len()), int64(root)}
	var into []byte // the result is root's alone
	if c.rank == root {
		into = recv.Bytes
	}
	if done, err := c.fused(ctx, d, lerr, payCode(send.Type, op, len(send.Bytes)), send.Bytes, into); done {
		return c.collErr(callReduce, err)
	}
	if f := c.goMinMax(op, send.Type); f != nil {
		return c.collErr(callReduce, c.runUser(ctx, callReduce, send, recv, f, root, inplace))
	}
	if n := send.Len(); n <= maxCount && c.collBlocks(ctx) {
		// One call with integer arguments, as in allReduceMPI.
		var rp C.uintptr_t
		if c.rank == root {
			rp = C.uintptr_t(uintptr(ptr(recv.Bytes)))
		}
		slot := c.collSlotU("MPI_Reduce")
		rc := C.pz_reduce_step(C.uintptr_t(uintptr(ptr(send.Bytes))), rp, C.int(n), c.st.typesU[send.Type], c.st.opsU[op],
			C.int(root), c.cu, inplace, slot, C.uint64_t(c.seq))
		runtime.KeepAlive(send.Bytes) // C had their addresses
		runtime.KeepAlive(recv.Bytes)
		return c.collErr(callReduce, c.stepDone("MPI_Reduce", rc))
	}
	dt, mop := c.h.types[send.Type], c.h.ops[op]
	return c.collErr(callReduce, pieces(send.Len(), send.Type.Size(), func(off int, n C.int) error {
		sp, rp := ptr(send.Bytes[off:]), unsafe.Pointer(nil)
		if c.rank == root {
			rp = ptr(recv.Bytes[off:])
		}
		return c.doSized(ctx, "MPI_Reduce", true, int(n)*send.Type.Size(),
			func() C.int { return C.pz_reduce(sp, rp, n, dt, mop, C.int(root), c.c, inplace) },
			func(r *C.MPI_Request) C.int { return C.pz_ireduce(sp, rp, n, dt, mop, C.int(root), c.c, inplace, r) }, sp, rp)
	}))
}

// AllReduce combines send across ranks with op into every rank's recv
// (MPI_Allreduce). send and recv may be the same buffer (MPI_IN_PLACE).
func (c *Comm) AllReduce(ctx context.Context, send, recv comm.Buf, op comm.Op) error {
	if err := c.usable("AllReduce"); err != nil {
		return err
	}
	// A small AllReduce with valid arguments (smallReduce) skips the
	// general checks' calls: about a third of pz's own time in an 8-byte
	// AllReduce (docs/performance.md). No defer until one is needed.
	var (
		inplace C.int
		lerr    error
	)
	pay := smallReduce(send, recv, op)
	if pay != 0 {
		inplace = C.int(b2i(comm.InPlace(send, recv)))
	} else {
		inplace, lerr = c.checkReduce(callAllReduce, send, recv, op, true)
		pay = payCode(send.Type, op, len(send.Bytes))
	}
	c.coll.Lock()
	d := desc{callAllReduce, send.Type, op, int64(send.Len()), noRoot}
	if done, err := c.fused(ctx, d, lerr, pay, send.Bytes, recv.Bytes); done {
		c.coll.Unlock()
		return c.collErr(callAllReduce, err)
	}
	defer c.coll.Unlock()
	return c.collErr(callAllReduce, c.allReduceMPI(ctx, send, recv, op, inplace))
}

// smallReduce returns the payload code (payCode) of an AllReduce whose
// arguments are valid (checkReduce would pass them) and that rides in the
// agreement step, or 0: the test of AllReduce's short path, which skips
// the general checks' calls.
func smallReduce(send, recv comm.Buf, op comm.Op) int64 {
	n := len(send.Bytes)
	if n == 0 || n > agreePayload || recv.Type != send.Type || len(recv.Bytes) != n ||
		n&(send.Type.Size()-1) != 0 || (comm.Overlaps(send.Bytes, recv.Bytes) && !comm.InPlace(send, recv)) {
		return 0
	}
	return payCode(send.Type, op, n)
}

// allReduceMPI is AllReduce's own MPI call (or Go's min and max where
// goMinMax says), after the agreement step. c.coll is held.
func (c *Comm) allReduceMPI(ctx context.Context, send, recv comm.Buf, op comm.Op, inplace C.int) error {
	if f := c.goMinMax(op, send.Type); f != nil {
		return c.runUser(ctx, callAllReduce, send, recv, f, noRoot, inplace)
	}
	if n := send.Len(); n <= maxCount && c.collBlocks(ctx) {
		// The common blocking case in one call with integer arguments,
		// without doSized's closures and cgo's checks of the handles
		// (about a quarter of pz's own time in an 8-byte AllReduce).
		slot := c.collSlotU("MPI_Allreduce")
		rc := C.pz_allreduce_step(C.uintptr_t(uintptr(ptr(send.Bytes))), C.uintptr_t(uintptr(ptr(recv.Bytes))), C.int(n),
			c.st.typesU[send.Type], c.st.opsU[op], c.cu, inplace, slot, C.uint64_t(c.seq))
		runtime.KeepAlive(send.Bytes) // C had their addresses
		runtime.KeepAlive(recv.Bytes)
		return c.stepDone("MPI_Allreduce", rc)
	}
	dt, mop := c.h.types[send.Type], c.h.ops[op]
	err := pieces(send.Len(), send.Type.Size(), func(off int, n C.int) error {
		sp, rp := ptr(send.Bytes[off:]), ptr(recv.Bytes[off:])
		sa, ra := C.uintptr_t(uintptr(sp)), C.uintptr_t(uintptr(rp))
		return c.doSized(ctx, "MPI_Allreduce", true, int(n)*send.Type.Size(),
			func() C.int { return C.pz_allreduce_at(sa, ra, n, dt, mop, c.c, inplace) },
			func(r *C.MPI_Request) C.int { return C.pz_iallreduce(sp, rp, n, dt, mop, c.c, inplace, r) }, sp, rp)
	})
	runtime.KeepAlive(send.Bytes) // MPI had only their addresses
	runtime.KeepAlive(recv.Bytes)
	return err
}

// layout returns the total of per-rank counts, whether they are all equal
// and whether they fit MPI's int counts and displacements; when they fit it
// fills cnts and displs (else the collective takes c.alltoallw).
func layout(counts []int, cnts, displs []C.int) (total int, equal, fit bool) {
	equal, fit = true, true
	for i, n := range counts {
		fit = fit && n <= maxCount && total <= maxCount-n
		cnts[i], displs[i] = C.int(n), C.int(total) // unused when !fit
		total += n
		equal = equal && n == counts[0]
	}
	return total, equal, fit
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
func (c *Comm) gatherCounts(ctx context.Context, n int, all bool, root int) ([]int, error) {
	counts := make([]int, c.size)
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
// the agreement step, a count exchange (MPI_Allgather; on up to 8 ranks
// with the check on, the counts ride in the agreement step), then
// MPI_Allgather when all counts are equal or MPI_Allgatherv.
func (c *Comm) AllGather(ctx context.Context, send comm.Buf, alloc comm.Alloc) ([]int, error) {
	if err := c.usable("AllGather"); err != nil {
		return nil, err
	}
	lerr := comm.FirstErr(c.checkBuf(callAllGather, "send", send), comm.CheckAlloc(callAllGather.String(), c.rank, alloc))
	c.coll.Lock()
	defer c.coll.Unlock()
	d := desc{callAllGather, send.Type, comm.NoOp, noCount, noRoot}
	counts, inline, tried, err := c.agreeGather(ctx, d, lerr, send)
	if !tried {
		if err = c.pre(ctx, d, lerr); err == nil {
			counts, err = c.gatherCounts(ctx, send.Len(), true, 0)
		}
	}
	if err != nil {
		return nil, c.collErr(callAllGather, err)
	}
	if inline { // the data rode in the agreement step too
		recv, aerr := recvBuf(callAllGather, alloc, sum(counts), send.Type)
		c.gathered(recv, counts, send.Type)
		return counts, aerr
	}
	total, equal, fit := layout(counts, c.cnts, c.displs)
	recv, aerr := recvBuf(callAllGather, alloc, total, send.Type)
	if c.size == 1 {
		copy(recv, send.Bytes)
		return counts, aerr
	}
	if !fit {
		mine := make([]int, c.size)
		for i := range mine {
			mine[i] = send.Len()
		}
		if err := c.alltoallw(ctx, "AllGather", send.Type, send.Bytes, mine, make([]int, c.size), recv, counts, offsets(counts)); err != nil {
			return nil, c.collErr(callAllGather, err)
		}
		return counts, aerr
	}
	sp, rp, n, dt := ptr(send.Bytes), ptr(recv), C.int(send.Len()), c.h.types[send.Type]
	cp, dp := cints(c.cnts), cints(c.displs)
	if equal {
		err = c.doSized(ctx, "MPI_Allgather", true, len(recv),
			func() C.int { return C.pz_allgather(sp, n, rp, n, dt, c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_iallgather(sp, n, rp, n, dt, c.c, r) }, sp, rp)
	} else {
		err = c.doSized(ctx, "MPI_Allgatherv", true, len(recv),
			func() C.int { return C.pz_allgatherv(sp, n, rp, cp, dp, dt, c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_iallgatherv(sp, n, rp, cp, dp, dt, c.c, r) },
			sp, rp, unsafe.Pointer(cp), unsafe.Pointer(dp))
	}
	if err != nil {
		return nil, c.collErr(callAllGather, err)
	}
	return counts, aerr
}

// Gather collects every rank's send on root (count exchange, then
// MPI_Gatherv). Non-roots get nil counts. Every rank must know whether
// the counts fit MPI's ints, to take the same path: the agreement step
// tells them when they surely do (size times the largest count fits), and
// the count exchange is MPI_Gather then; otherwise (or with the check off)
// it is an MPI_Allgather and every rank sees every count. On up to 8 ranks
// with the check on, the counts ride in the agreement step instead
// (agreeGather), and every rank has them all.
func (c *Comm) Gather(ctx context.Context, send comm.Buf, root int, alloc comm.Alloc) ([]int, error) {
	if err := c.usable("Gather"); err != nil {
		return nil, err
	}
	lerr := c.checkBuf(callGather, "send", send)
	if lerr == nil {
		lerr = c.checkRoot(callGather, root)
	}
	if lerr == nil && c.rank == root {
		lerr = comm.CheckAlloc(callGather.String(), c.rank, alloc)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	d := desc{callGather, send.Type, comm.NoOp, noCount, int64(root)}
	counts, inline, tried, err := c.agreeGather(ctx, d, lerr, send)
	// surely: the counts surely fit MPI's ints, and only root needs
	// them; never when the counts rode along (every rank has them all).
	surely := false
	if !tried {
		var most int64
		if most, err = c.preVolume(ctx, d, lerr, int64(send.Len())); err == nil {
			surely = most >= 0 && most <= maxCount/int64(c.size)
			counts, err = c.gatherCounts(ctx, send.Len(), !surely, root)
		}
	}
	if err != nil {
		return nil, c.collErr(callGather, err)
	}
	isRoot := c.rank == root
	if inline { // the data rode in the agreement step too
		if !isRoot {
			return nil, nil
		}
		recv, aerr := recvBuf(callGather, alloc, sum(counts), send.Type)
		c.gathered(recv, counts, send.Type)
		return counts, aerr
	}
	total, _, fit := 0, true, true
	if isRoot || !surely {
		total, _, fit = layout(counts, c.cnts, c.displs)
	}
	var recv []byte
	var aerr error
	if isRoot {
		recv, aerr = recvBuf(callGather, alloc, total, send.Type)
	}
	if c.size == 1 {
		copy(recv, send.Bytes)
		return counts, aerr
	}
	if !fit {
		scnt, rcnt := make([]int, c.size), make([]int, c.size)
		scnt[root] = send.Len()
		if isRoot {
			rcnt = counts
		}
		if err := c.alltoallw(ctx, "Gather", send.Type, send.Bytes, scnt, make([]int, c.size), recv, rcnt, offsets(rcnt)); err != nil {
			return nil, c.collErr(callGather, err)
		}
		if !isRoot {
			return nil, nil
		}
		return counts, aerr
	}
	sp, rp, n, dt := ptr(send.Bytes), ptr(recv), C.int(send.Len()), c.h.types[send.Type]
	cp, dp := cints(c.cnts), cints(c.displs)
	err = c.doSized(ctx, "MPI_Gatherv", true, len(send.Bytes)+len(recv),
		func() C.int { return C.pz_gatherv(sp, n, rp, cp, dp, dt, C.int(root), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_igatherv(sp, n, rp, cp, dp, dt, C.int(root), c.c, r) },
		sp, rp, unsafe.Pointer(cp), unsafe.Pointer(dp))
	if err != nil {
		return nil, c.collErr(callGather, err)
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
	if lerr == nil {
		lerr = comm.CheckAlloc(callScatter.String(), c.rank, alloc)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{callScatter, send.Type, comm.NoOp, noCount, int64(root)}, lerr); err != nil {
		return c.collErr(callScatter, err)
	}
	// Root sends each rank its count and whether the counts fit MPI's
	// ints (two words each), so that every rank takes the same path.
	isRoot := c.rank == root
	if isRoot {
		_, _, fit := layout(counts, c.cnts, c.displs)
		for i, n := range counts {
			c.i64[2*i], c.i64[2*i+1] = int64(n), 0
			if !fit {
				c.i64[2*i+1] = 1
			}
		}
	}
	var mine [2]int64
	if c.size == 1 {
		mine = [2]int64{c.i64[0], c.i64[1]}
	} else {
		sp, rp := unsafe.Pointer(&c.i64[0]), unsafe.Pointer(&mine[0])
		if err := c.do(ctx, "MPI_Scatter", true,
			func() C.int { return C.pz_scatter(sp, 2, rp, 2, c.h.i64, C.int(root), c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_iscatter(sp, 2, rp, 2, c.h.i64, C.int(root), c.c, r) }, sp, rp); err != nil {
			return c.collErr(callScatter, err)
		}
	}
	recv, aerr := recvBuf(callScatter, alloc, int(mine[0]), send.Type)
	if c.size == 1 {
		copy(recv, send.Bytes)
		return aerr
	}
	if mine[1] != 0 {
		scnt, rcnt := make([]int, c.size), make([]int, c.size)
		if isRoot {
			scnt = counts
		}
		rcnt[root] = int(mine[0])
		if err := c.alltoallw(ctx, "Scatter", send.Type, send.Bytes, scnt, offsets(scnt), recv, rcnt, make([]int, c.size)); err != nil {
			return c.collErr(callScatter, err)
		}
		return aerr
	}
	var sp unsafe.Pointer
	if isRoot {
		sp = ptr(send.Bytes)
	}
	rp, n, dt := ptr(recv), C.int(mine[0]), c.h.types[send.Type]
	cp, dp := cints(c.cnts), cints(c.displs)
	if err := c.doSized(ctx, "MPI_Scatterv", true, len(send.Bytes)+len(recv),
		func() C.int { return C.pz_scatterv(sp, cp, dp, rp, n, dt, C.int(root), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_iscatterv(sp, cp, dp, rp, n, dt, C.int(root), c.c, r) },
		sp, rp, unsafe.Pointer(cp), unsafe.Pointer(dp)); err != nil {
		return c.collErr(callScatter, err)
	}
	return aerr
}

// checkCounts validates a counts slice of length Size adding up to total.
func (c *Comm) checkCounts(k call, counts []int, total int) error {
	return comm.CheckCounts(k.String(), c.rank, counts, c.size, total)
}

// Alltoall sends sendCounts[i] elements of send to rank i and receives every
// rank's part for this rank (count exchange with MPI_Alltoall, then
// MPI_Alltoallv). The count exchange carries each sender's total too:
// every rank then knows the sum of all totals, and when it fits MPI's
// ints every count and displacement does; otherwise every rank takes
// MPI_Alltoallw (large.go).
func (c *Comm) Alltoall(ctx context.Context, send comm.Buf, sendCounts []int, alloc comm.Alloc) ([]int, error) {
	if err := c.usable("Alltoall"); err != nil {
		return nil, err
	}
	lerr := c.checkBuf(callAlltoall, "send", send)
	if lerr == nil {
		lerr = c.checkCounts(callAlltoall, sendCounts, send.Len())
	}
	if lerr == nil {
		lerr = comm.CheckAlloc(callAlltoall.String(), c.rank, alloc)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	d := desc{callAlltoall, send.Type, comm.NoOp, noCount, noRoot}
	if err := c.pre(ctx, d, lerr); err != nil {
		return nil, c.collErr(callAlltoall, err)
	}
	out := make([]int64, 2*c.size)
	for i, n := range sendCounts {
		out[2*i], out[2*i+1] = int64(n), int64(send.Len())
	}
	recvWords := c.i64[:2*c.size]
	if c.size == 1 {
		copy(recvWords, out)
	} else {
		sp, rp := unsafe.Pointer(&out[0]), unsafe.Pointer(&recvWords[0])
		if err := c.do(ctx, "MPI_Alltoall", true,
			func() C.int { return C.pz_alltoall(sp, 2, rp, 2, c.h.i64, c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_ialltoall(sp, 2, rp, 2, c.h.i64, c.c, r) }, sp, rp); err != nil {
			return nil, c.collErr(callAlltoall, err)
		}
	}
	recvCounts := make([]int, c.size)
	all := 0 // every rank's send total, summed: the same on every rank
	for i := range recvCounts {
		recvCounts[i] = int(recvWords[2*i])
		all += int(recvWords[2*i+1])
	}
	total, _, _ := layout(recvCounts, c.cnts2, c.displs2)
	layout(sendCounts, c.cnts, c.displs)
	recv, aerr := recvBuf(callAlltoall, alloc, total, send.Type)
	if c.size == 1 {
		copy(recv, send.Bytes)
		return recvCounts, aerr
	}
	if all > maxCount {
		if err := c.alltoallw(ctx, "Alltoall", send.Type, send.Bytes, sendCounts, offsets(sendCounts), recv, recvCounts, offsets(recvCounts)); err != nil {
			return nil, c.collErr(callAlltoall, err)
		}
		return recvCounts, aerr
	}
	sp, rp, dt := ptr(send.Bytes), ptr(recv), c.h.types[send.Type]
	sc, sd, rc, rd := cints(c.cnts), cints(c.displs), cints(c.cnts2), cints(c.displs2)
	if err := c.doSized(ctx, "MPI_Alltoallv", true, len(send.Bytes)+len(recv),
		func() C.int { return C.pz_alltoallv(sp, sc, sd, rp, rc, rd, dt, c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_ialltoallv(sp, sc, sd, rp, rc, rd, dt, c.c, r) },
		sp, rp, unsafe.Pointer(sc), unsafe.Pointer(sd), unsafe.Pointer(rc), unsafe.Pointer(rd)); err != nil {
		return nil, c.collErr(callAlltoall, err)
	}
	return recvCounts, aerr
}

func sum(counts []int) int {
	t := 0
	for _, n := range counts {
		t += n
	}
	return t
}

// ScanBuf implements comm.ScanComm after the agreement step. Integer
// types take MPI_Scan or MPI_Exscan (MPI_Iscan, MPI_Iexscan when polling):
// every association gives the same integers. Floats take a chain of
// messages on c's private duplicate, rank r receiving the prefix of ranks
// 0..r-1 from r-1, folding its own in with comm.ReduceTo and sending the
// result on, so that the bits are comm.Scan's left fold whatever the
// library (MPICH's MPI_Scan associates otherwise); its latency grows with
// the rank count, as Open MPI's own linear scan's does. Unsigned Min and
// Max where the library orders them as signed (goMinMax) and a
// communicator without a duplicate return ErrUnsupported before any
// communication, and comm.Scan falls back.
func (c *Comm) ScanBuf(ctx context.Context, send, recv comm.Buf, op comm.Op, exclusive bool) error {
	k := comm.CallScan
	if exclusive {
		k = comm.CallExscan
	}
	if err := c.usable(k.String()); err != nil {
		return err
	}
	integer := send.Type >= comm.Int8 && send.Type <= comm.Uint64
	if (integer && c.goMinMax(op, send.Type) != nil) || (!integer && c.nbcComm == nil) {
		return fmt.Errorf("mpi: %v of %v with %v: %w", k, send.Type, op, errors.ErrUnsupported)
	}
	inplace, lerr := c.checkReduce(k, send, recv, op, true)
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{k, send.Type, op, int64(send.Len()), noRoot}, lerr); err != nil {
		return c.collErr(k, err)
	}
	if c.size == 1 {
		if !exclusive { // rank 0's exclusive prefix: recv untouched
			copy(recv.Bytes, send.Bytes)
		}
		return nil
	}
	if !integer {
		return c.collErr(k, c.chainScan(ctx, k, send, recv.Bytes[:len(send.Bytes)], op))
	}
	dt, mop := c.h.types[send.Type], c.h.ops[op]
	ex := C.int(b2i(exclusive))
	return c.collErr(k, pieces(send.Len(), send.Type.Size(), func(off int, n C.int) error {
		sp, rp := ptr(send.Bytes[off:]), ptr(recv.Bytes[off:])
		return c.doSized(ctx, "MPI_"+k.String(), true, int(n)*send.Type.Size(),
			func() C.int { return C.pz_scan(sp, rp, n, dt, mop, c.c, inplace, ex) },
			func(r *C.MPI_Request) C.int { return C.pz_iscan(sp, rp, n, dt, mop, c.c, inplace, ex, r) }, sp, rp)
	}))
}

// ReduceScatterBlockBuf implements comm.ReduceScatterComm with
// MPI_Reduce_scatter_block after the agreement step: send holds Size
// blocks of recv's length, and MPI reduces each block onto its rank, so
// no rank receives the whole reduction.
func (c *Comm) ReduceScatterBlockBuf(ctx context.Context, send, recv comm.Buf, op comm.Op) error {
	const k = comm.CallReduceScatterBlock
	if err := c.usable(k.String()); err != nil {
		return err
	}
	if c.goMinMax(op, send.Type) != nil || send.Len() > maxCount {
		return fmt.Errorf("mpi: %v of %v with %v: %w", k, send.Type, op, errors.ErrUnsupported)
	}
	_, lerr := c.checkReduce(k, send, comm.Buf{}, op, false)
	// A length that does not split into Size blocks is reported after the
	// agreement step, as comm/local's ReduceScatterBlock does: lengths
	// that differ across ranks (6, 7, 8 on 3 ranks) are a
	// *comm.MismatchError on every rank first.
	split := send.Len()%c.size == 0
	if lerr == nil && split && (recv.Type != send.Type || recv.Len() != send.Len()/c.size) {
		lerr = c.argErr(k, "recv holds %d %v, want %d %v", recv.Len(), recv.Type, send.Len()/c.size, send.Type)
	}
	if lerr == nil && comm.Overlaps(send.Bytes, recv.Bytes) {
		lerr = c.argErr(k, "send and recv overlap")
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{k, send.Type, op, int64(send.Len()), noRoot}, lerr); err != nil {
		return c.collErr(k, err)
	}
	if !split { // every rank has this length (or the check is off)
		return c.argErr(k, "%d elements do not split into %d equal blocks", send.Len(), c.size)
	}
	if c.size == 1 {
		copy(recv.Bytes, send.Bytes)
		return nil
	}
	sp, rp, n := ptr(send.Bytes), ptr(recv.Bytes), C.int(recv.Len())
	dt, mop := c.h.types[send.Type], c.h.ops[op]
	return c.collErr(k, c.doSized(ctx, "MPI_Reduce_scatter_block", true, len(send.Bytes),
		func() C.int { return C.pz_reduce_scatter_block(sp, rp, n, dt, mop, c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_ireduce_scatter_block(sp, rp, n, dt, mop, c.c, r) }, sp, rp))
}

// AllGatherBlockBuf implements comm.AllGatherBlockComm with
// MPI_Allgather: every rank passes the same count, which the agreement
// step checks with the rest, so no counts are exchanged; with the check on
// and every block small enough (agreeBlocks), the data ride in the step
// itself. send may be this rank's block of recv (MPI_IN_PLACE).
func (c *Comm) AllGatherBlockBuf(ctx context.Context, send, recv comm.Buf) error {
	const k = comm.CallAllGather
	if err := c.usable(k.String()); err != nil {
		return err
	}
	n := send.Len()
	if int64(n)*int64(c.size) > maxCount {
		return fmt.Errorf("mpi: AllGatherBlockBuf of %d elements on %d ranks: %w", n, c.size, errors.ErrUnsupported)
	}
	inplace, lerr := comm.CheckBlocks(k.String(), c.rank, c.size, send, recv)
	lerr = comm.FirstErr(c.checkBuf(k, "send", send), lerr)
	c.coll.Lock()
	defer c.coll.Unlock()
	d := desc{k, send.Type, comm.NoOp, int64(n), noRoot}
	inline, tried, err := c.agreeBlocks(ctx, d, lerr, send.Bytes, recv.Bytes)
	if !tried {
		err = c.pre(ctx, d, lerr)
	}
	switch {
	case err != nil:
		return c.collErr(k, err)
	case inline: // the data rode in the agreement step
		return nil
	case c.size == 1:
		copy(recv.Bytes, send.Bytes)
		return nil
	case c.collBlocks(ctx):
		slot := c.collSlotU("MPI_Allgather")
		rc := C.pz_allgather_step(C.uintptr_t(uintptr(ptr(send.Bytes))), C.uintptr_t(uintptr(ptr(recv.Bytes))), C.int(n),
			c.st.typesU[send.Type], c.cu, C.int(b2i(inplace)), slot, C.uint64_t(c.seq))
		runtime.KeepAlive(send.Bytes) // C had their addresses
		runtime.KeepAlive(recv.Bytes)
		return c.collErr(k, c.stepDone("MPI_Allgather", rc))
	}
	sb := send.Bytes
	if inplace { // the non-blocking call here takes no MPI_IN_PLACE
		sb = slices.Clone(sb)
	}
	sp, rp, dt := ptr(sb), ptr(recv.Bytes), c.h.types[send.Type]
	err = c.doSized(ctx, "MPI_Allgather", true, len(recv.Bytes),
		func() C.int { return C.pz_allgather(sp, C.int(n), rp, C.int(n), dt, c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_iallgather(sp, C.int(n), rp, C.int(n), dt, c.c, r) }, sp, rp)
	runtime.KeepAlive(sb)
	return c.collErr(k, err)
}

var _ comm.AllGatherBlockComm = (*Comm)(nil)

// chainScan is ScanBuf's left fold for floats: the prefix travels from
// rank to rank on c's private duplicate, where no user message can match
// it. Called with c.coll held, after the agreement step.
func (c *Comm) chainScan(ctx context.Context, k comm.Call, send comm.Buf, dst []byte, op comm.Op) error {
	d, me := c.nbcComm, c.rank
	exclusive := k == comm.CallExscan
	const tag = 0
	// next is what goes on to rank me+1: the prefix of ranks 0..me.
	inPlace := comm.Overlaps(dst, send.Bytes)
	next := dst
	if exclusive || inPlace {
		next = make([]byte, len(send.Bytes)) // dst receives the other prefix, or is send itself
	}
	if me == 0 {
		copy(next, send.Bytes)
	} else {
		prev := dst // the prefix of ranks 0..me-1: what an exclusive scan returns
		if !exclusive || inPlace {
			prev = make([]byte, len(send.Bytes))
		}
		if _, err := d.RecvBuf(ctx, comm.Buf{Bytes: prev, Type: send.Type}, me-1, tag); err != nil {
			return fmt.Errorf("mpi: %v: %w", k, err)
		}
		if err := comm.ReduceTo(op, send.Type, next, prev, send.Bytes); err != nil {
			return fmt.Errorf("mpi: %v: %w", k, err)
		}
		if exclusive && inPlace {
			defer copy(dst, prev) // after next, which needed send, went on
		}
	}
	if me+1 < c.size {
		if err := d.Send(ctx, comm.Buf{Bytes: next, Type: send.Type}, me+1, tag); err != nil {
			return fmt.Errorf("mpi: %v: %w", k, err)
		}
	}
	if !exclusive && len(next) > 0 && &next[0] != &dst[0] {
		copy(dst, next)
	}
	return nil
}
