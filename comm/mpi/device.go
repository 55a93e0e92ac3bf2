//go:build mpi

package mpi

/*
#include "pz_mpi.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// Collectives on memory given by address (comm.DeviceComm): memory outside
// Go's heap that the MPI library reads and writes itself, a CUDA GPU's
// where the library is CUDA-aware, or host memory (mmap, C). Go never
// reads or writes it: the addresses cross into C as integers and become
// pointers there (pz_bcast_at, ...), and the agreement step carries no
// payload of them (the v-variants' payload is a hash of their counts, Go
// memory). A user op, which would run in Go, is refused, and so are the
// unsigned Min and Max that pz combines in Go on libraries that get them
// wrong (state.minmaxGo). Bcast and the reductions take counts past
// 2^31-1 in pieces of 2^30 elements, as the Buf forms do; the v-variants
// whose counts or displacements pass MPI's ints return an error wrapping
// errors.ErrUnsupported on every rank (the Buf forms' MPI_Alltoallw with
// derived types is not taken on device memory).

var _ comm.DeviceComm = (*Comm)(nil)

// Reaches implements comm.DeviceComm: "host" (memory outside Go's heap) is
// always reached; "cuda" (a CUDA GPU's memory) where the MPI library says
// at run time that it is CUDA-aware: Open MPI's MPIX_Query_cuda_support
// (built with its CUDA extension), MPICH 4's MPIX_GPU_query_support. A
// library built without CUDA (Debian's Open MPI and MPICH) answers false,
// whatever the machine. The library is asked once, at Init. Any other
// space is not reached.
func (c *Comm) Reaches(space string) bool {
	switch space {
	case "host":
		return true
	case "cuda":
		return c.st.cudaAware
	}
	return false
}

// BcastAt implements comm.DeviceComm with MPI_Bcast: count elements of dt
// at addr on root go to addr on every rank. Go never touches the memory;
// "cuda" memory needs a CUDA-aware library (Reaches). Arguments are checked
// as for Bcast (with the check on, an invalid or differing argument on any
// rank is an error on every rank); counts past 2^31-1 go in pieces.
func (c *Comm) BcastAt(ctx context.Context, addr uintptr, count int, dt comm.Datatype, root int) error {
	return c.callErr("BcastAt", c.bcastAt(ctx, addr, count, dt, root))
}

// bcastAt is BcastAt; its errors are named by the caller.
func (c *Comm) bcastAt(ctx context.Context, addr uintptr, count int, dt comm.Datatype, root int) error {
	const k = callBcast
	if err := c.usable("BcastAt"); err != nil {
		return err
	}
	lerr := c.checkAt(k, "buf", addr, count, dt)
	if lerr == nil {
		lerr = c.checkRoot(k, root)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{k, dt, comm.NoOp, int64(count), int64(root)}, lerr); err != nil {
		return err
	}
	if c.size == 1 {
		return nil
	}
	t, size := c.h.types[dt], dt.Size()
	return pieces(count, size, func(off int, n C.int) error {
		b := C.uintptr_t(addr + uintptr(off))
		return c.doSized(ctx, "MPI_Bcast", true, int(n)*size,
			func() C.int { return C.pz_bcast_at(b, n, t, C.int(root), c.c) },
			func(r *C.MPI_Request) C.int { return C.pz_ibcast_at(b, n, t, C.int(root), c.c, r) })
	})
}

// ReduceAt implements comm.DeviceComm with MPI_Reduce: count elements of
// dt at send on every rank combine with op into recv on root (recv is
// ignored elsewhere); send == recv on root reduces in place (MPI_IN_PLACE).
// Go never touches the memory, so op must be a predefined reduction
// (comm.User is refused). Counts past 2^31-1 go in pieces.
func (c *Comm) ReduceAt(ctx context.Context, send, recv uintptr, count int, dt comm.Datatype, op comm.Op, root int) error {
	return c.callErr("ReduceAt", c.reduceAt(ctx, send, recv, count, dt, op, root))
}

// reduceAt is ReduceAt; its errors are named by the caller.
func (c *Comm) reduceAt(ctx context.Context, send, recv uintptr, count int, dt comm.Datatype, op comm.Op, root int) error {
	const k = callReduce
	if err := c.usable("ReduceAt"); err != nil {
		return err
	}
	isRoot := c.rank == root
	lerr := c.checkRoot(k, root)
	if lerr == nil {
		lerr = c.checkAt(k, "send", send, count, dt)
	}
	if lerr == nil {
		lerr = c.checkOpAt(k, op, dt)
	}
	var inplace C.int
	if lerr == nil && isRoot {
		inplace, lerr = c.checkRecvAt(k, send, recv, count, dt)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{k, dt, op, int64(count), int64(root)}, lerr); err != nil {
		return err
	}
	t, mop, size := c.h.types[dt], c.h.ops[op], dt.Size()
	return pieces(count, size, func(off int, n C.int) error {
		s, d := C.uintptr_t(send+uintptr(off)), C.uintptr_t(0)
		if isRoot {
			d = C.uintptr_t(recv + uintptr(off))
		}
		return c.doSized(ctx, "MPI_Reduce", true, int(n)*size,
			func() C.int { return C.pz_reduce_at(s, d, n, t, mop, C.int(root), c.c, inplace) },
			func(r *C.MPI_Request) C.int {
				return C.pz_ireduce_at(s, d, n, t, mop, C.int(root), c.c, inplace, r)
			})
	})
}

// AllReduceAt implements comm.DeviceComm with MPI_Allreduce: count
// elements of dt at send on every rank combine with op into recv on every
// rank; send == recv reduces in place (MPI_IN_PLACE). Go never touches the
// memory, so op must be a predefined reduction (comm.User is refused).
// Counts past 2^31-1 go in pieces.
func (c *Comm) AllReduceAt(ctx context.Context, send, recv uintptr, count int, dt comm.Datatype, op comm.Op) error {
	return c.callErr("AllReduceAt", c.allReduceAt(ctx, send, recv, count, dt, op))
}

// allReduceAt is AllReduceAt; its errors are named by the caller.
func (c *Comm) allReduceAt(ctx context.Context, send, recv uintptr, count int, dt comm.Datatype, op comm.Op) error {
	const k = callAllReduce
	if err := c.usable("AllReduceAt"); err != nil {
		return err
	}
	lerr := c.checkAt(k, "send", send, count, dt)
	if lerr == nil {
		lerr = c.checkOpAt(k, op, dt)
	}
	var inplace C.int
	if lerr == nil {
		inplace, lerr = c.checkRecvAt(k, send, recv, count, dt)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{k, dt, op, int64(count), noRoot}, lerr); err != nil {
		return err
	}
	t, mop, size := c.h.types[dt], c.h.ops[op], dt.Size()
	return pieces(count, size, func(off int, n C.int) error {
		s, d := C.uintptr_t(send+uintptr(off)), C.uintptr_t(recv+uintptr(off))
		return c.doSized(ctx, "MPI_Allreduce", true, int(n)*size,
			func() C.int { return C.pz_allreduce_at(s, d, n, t, mop, c.c, inplace) },
			func(r *C.MPI_Request) C.int { return C.pz_iallreduce_at_in(s, d, n, t, mop, c.c, inplace, r) })
	})
}

// GatherAt implements comm.DeviceComm with MPI_Gatherv: counts[r]
// elements of dt at send on rank r go to recv on root, in rank order
// (recv is ignored elsewhere). Every rank passes the same counts; with the
// check on, counts that differ across ranks are a *comm.MismatchError on
// every rank. Go never touches the memory. Counts or displacements past
// MPI's ints are an error wrapping errors.ErrUnsupported on every rank.
func (c *Comm) GatherAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype, root int) error {
	return c.callErr("GatherAt", c.gatherAt(ctx, send, counts, recv, dt, root))
}

// gatherAt is GatherAt; its errors are named by the caller.
func (c *Comm) gatherAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype, root int) error {
	const k = callGather
	if err := c.usable("GatherAt"); err != nil {
		return err
	}
	isRoot := c.rank == root
	c.coll.Lock()
	defer c.coll.Unlock()
	total, err := c.rootedAt(ctx, k, "GatherAt", counts, send, "send", recv, "recv", dt, root)
	if err != nil {
		return err
	}
	s, d, n, t := C.uintptr_t(send), C.uintptr_t(0), C.int(counts[c.rank]), c.h.types[dt]
	nbytes := counts[c.rank] * dt.Size()
	if isRoot {
		d = C.uintptr_t(recv)
		nbytes += total * dt.Size()
	}
	cp, dp := cints(c.cnts), cints(c.displs)
	return c.doSized(ctx, "MPI_Gatherv", true, nbytes,
		func() C.int { return C.pz_gatherv_at(s, n, d, cp, dp, t, C.int(root), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_igatherv_at(s, n, d, cp, dp, t, C.int(root), c.c, r) },
		unsafe.Pointer(cp), unsafe.Pointer(dp))
}

// rootedAt checks the arguments of GatherAt or ScatterAt (own: this
// rank's part, counts[rank] elements; all: the root's whole buffer, the
// total, apart from own), runs the agreement step with the counts, and
// fills c.cnts and c.displs; it returns the total. c.coll is held.
func (c *Comm) rootedAt(ctx context.Context, k call, name string, counts []int, own uintptr, ownName string, all uintptr, allName string, dt comm.Datatype, root int) (int, error) {
	lerr := c.checkRoot(k, root)
	total := 0
	if lerr == nil {
		total, lerr = c.checkCountsAt(k, counts, dt)
	}
	if lerr == nil {
		lerr = c.checkAt(k, ownName, own, counts[c.rank], dt)
	}
	if lerr == nil && c.rank == root {
		lerr = c.checkApartAt(k, allName, all, total, own, counts[c.rank], dt)
	}
	if err := c.preCounts(ctx, desc{k, dt, comm.NoOp, int64(total), int64(root)}, lerr, counts); err != nil {
		return 0, err
	}
	return total, c.layoutAt(name, counts, total)
}

// ScatterAt implements comm.DeviceComm with MPI_Scatterv: consecutive
// parts of counts[r] elements of dt at send on root go to recv on rank r
// (send is ignored elsewhere). Every rank passes the same counts; with the
// check on, counts that differ across ranks are a *comm.MismatchError on
// every rank. Go never touches the memory. Counts or displacements past
// MPI's ints are an error wrapping errors.ErrUnsupported on every rank.
func (c *Comm) ScatterAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype, root int) error {
	return c.callErr("ScatterAt", c.scatterAt(ctx, send, counts, recv, dt, root))
}

// scatterAt is ScatterAt; its errors are named by the caller.
func (c *Comm) scatterAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype, root int) error {
	const k = callScatter
	if err := c.usable("ScatterAt"); err != nil {
		return err
	}
	isRoot := c.rank == root
	c.coll.Lock()
	defer c.coll.Unlock()
	total, err := c.rootedAt(ctx, k, "ScatterAt", counts, recv, "recv", send, "send", dt, root)
	if err != nil {
		return err
	}
	s, d, n, t := C.uintptr_t(0), C.uintptr_t(recv), C.int(counts[c.rank]), c.h.types[dt]
	nbytes := counts[c.rank] * dt.Size()
	if isRoot {
		s = C.uintptr_t(send)
		nbytes += total * dt.Size()
	}
	cp, dp := cints(c.cnts), cints(c.displs)
	return c.doSized(ctx, "MPI_Scatterv", true, nbytes,
		func() C.int { return C.pz_scatterv_at(s, cp, dp, d, n, t, C.int(root), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_iscatterv_at(s, cp, dp, d, n, t, C.int(root), c.c, r) },
		unsafe.Pointer(cp), unsafe.Pointer(dp))
}

// AllGatherAt implements comm.DeviceComm with MPI_Allgatherv: counts[r]
// elements of dt at send on rank r go to recv on every rank, in rank
// order. Every rank passes the same counts; with the check on, counts that
// differ across ranks are a *comm.MismatchError on every rank. Go never
// touches the memory. Counts or displacements past MPI's ints are an error
// wrapping errors.ErrUnsupported on every rank.
func (c *Comm) AllGatherAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype) error {
	return c.callErr("AllGatherAt", c.allGatherAt(ctx, send, counts, recv, dt))
}

// allGatherAt is AllGatherAt; its errors are named by the caller.
func (c *Comm) allGatherAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype) error {
	const k = callAllGather
	if err := c.usable("AllGatherAt"); err != nil {
		return err
	}
	total, lerr := c.checkCountsAt(k, counts, dt)
	if lerr == nil {
		lerr = c.checkAt(k, "send", send, counts[c.rank], dt)
	}
	if lerr == nil {
		lerr = c.checkApartAt(k, "recv", recv, total, send, counts[c.rank], dt)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.preCounts(ctx, desc{k, dt, comm.NoOp, int64(total), noRoot}, lerr, counts); err != nil {
		return err
	}
	if err := c.layoutAt("AllGatherAt", counts, total); err != nil {
		return err
	}
	s, d, n, t := C.uintptr_t(send), C.uintptr_t(recv), C.int(counts[c.rank]), c.h.types[dt]
	cp, dp := cints(c.cnts), cints(c.displs)
	return c.doSized(ctx, "MPI_Allgatherv", true, total*dt.Size(),
		func() C.int { return C.pz_allgatherv_at(s, n, d, cp, dp, t, c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_iallgatherv_at(s, n, d, cp, dp, t, c.c, r) },
		unsafe.Pointer(cp), unsafe.Pointer(dp))
}

// checkAt validates count elements of dt at addr (what names it): a valid
// datatype, a count that is not negative and whose bytes stay within the
// address space, and an address that is not 0 where there are bytes.
func (c *Comm) checkAt(k call, what string, addr uintptr, count int, dt comm.Datatype) error {
	if !dt.Valid() {
		return c.argErr(k, "invalid datatype %v", dt)
	}
	if count < 0 {
		return c.argErr(k, "%s: negative count %d", what, count)
	}
	if count > math.MaxInt/dt.Size() || addr+uintptr(count*dt.Size()) < addr {
		return c.argErr(k, "%s: %d %v elements at %#x pass the end of the address space", what, count, dt, addr)
	}
	if addr == 0 && count > 0 {
		return c.argErr(k, "%s: address 0 for %d %v elements", what, count, dt)
	}
	return nil
}

// checkOpAt validates the op of a reduction on memory Go never reads: a
// predefined op that MPI combines itself, defined on dt.
func (c *Comm) checkOpAt(k call, op comm.Op, dt comm.Datatype) error {
	switch {
	case op == comm.User:
		return c.argErr(k, "a user op runs in Go, which never reads memory given by address; use %vUser on Go buffers", k)
	case !op.Valid():
		return c.argErr(k, "invalid op %v", op)
	case !op.Supports(dt):
		return c.argErr(k, "reduction %v is not defined on %v", op, dt)
	case c.goMinMax(op, dt) != nil:
		return c.argErr(k, "this MPI library (%s) gets %v on %v wrong, which pz corrects in Go on Go buffers only", Library(), op, dt)
	}
	return nil
}

// checkRecvAt validates the recv of a reduction of count elements of dt
// from send: the same address is the in-place form (MPI_IN_PLACE, whose
// flag it returns); otherwise the two must not overlap.
func (c *Comm) checkRecvAt(k call, send, recv uintptr, count int, dt comm.Datatype) (inplace C.int, err error) {
	if err := c.checkAt(k, "recv", recv, count, dt); err != nil {
		return 0, err
	}
	if send == recv {
		return 1, nil
	}
	if n := count * dt.Size(); overlapAt(send, n, recv, n) {
		return 0, c.argErr(k, "send %#x and recv %#x overlap without being the same address (pass the same address as both for the in-place form)", send, recv)
	}
	return 0, nil
}

// checkApartAt validates what, total elements of dt at all (every rank's
// parts), and that it does not overlap this rank's part of mine elements
// at part: MPI takes no aliased buffers there.
func (c *Comm) checkApartAt(k call, what string, all uintptr, total int, part uintptr, mine int, dt comm.Datatype) error {
	if err := c.checkAt(k, what, all, total, dt); err != nil {
		return err
	}
	if overlapAt(part, mine*dt.Size(), all, total*dt.Size()) {
		return c.argErr(k, "send and recv overlap (%#x for %d and %#x for %d %v elements)", part, mine, all, total, dt)
	}
	return nil
}

// checkCountsAt validates the per-rank counts of a v-variant and returns
// their total: one per rank, none negative, all of them within the
// address space.
func (c *Comm) checkCountsAt(k call, counts []int, dt comm.Datatype) (int, error) {
	if !dt.Valid() {
		return 0, c.argErr(k, "invalid datatype %v", dt)
	}
	if len(counts) != c.size {
		return 0, c.argErr(k, "%d counts for %d ranks", len(counts), c.size)
	}
	total, most := 0, math.MaxInt/dt.Size()
	for r, n := range counts {
		if n < 0 {
			return 0, c.argErr(k, "negative count %d for rank %d", n, r)
		}
		if n > most-total {
			return 0, c.argErr(k, "counts sum past %d %v elements", most, dt)
		}
		total += n
	}
	return total, nil
}

// overlapAt reports whether an bytes at a and bn bytes at b share memory.
func overlapAt(a uintptr, an int, b uintptr, bn int) bool {
	return an > 0 && bn > 0 && a < b+uintptr(bn) && b < a+uintptr(an)
}

// layoutAt fills c.cnts and c.displs from counts (c.coll held), or returns
// the error of counts past MPI's ints: every rank passes the same counts,
// so every rank returns it.
func (c *Comm) layoutAt(name string, counts []int, total int) error {
	if _, _, fit := layout(counts, c.cnts, c.displs); !fit {
		return fmt.Errorf("mpi: %s: %d elements in all: counts or displacements past MPI's int (%d): %w", name, total, maxCount, errors.ErrUnsupported)
	}
	return nil
}

// preCounts is the agreement step of a v-variant on memory given by
// address: d (whose count is the total) as pre checks it, and the counts
// themselves, every rank's hash h riding in the payload as {h, -h} under
// Max (Go memory; the buffers' memory is never read), so that counts that
// differ but add up to the same total are caught too. Then every rank
// returns the same *comm.MismatchError, listing the differing counts.
func (c *Comm) preCounts(ctx context.Context, d desc, lerr error, counts []int) error {
	if !c.check || c.size == 1 {
		return lerr
	}
	h := countsHash(counts)
	var mine, got [16]byte
	binary.LittleEndian.PutUint64(mine[0:], uint64(h))
	binary.LittleEndian.PutUint64(mine[8:], uint64(-h))
	done, err := c.fused(ctx, d, lerr, payCode(comm.Int64, comm.Max, len(mine)), mine[:], got[:])
	if err != nil || !done {
		// Not done: the payloads were not combined, on every rank alike
		// (the ranks passed different codes); the header agreed.
		return err
	}
	if hi, lo := int64(binary.LittleEndian.Uint64(got[0:])), int64(binary.LittleEndian.Uint64(got[8:])); hi == -lo {
		return nil
	}
	return c.countsMismatch(ctx, d, counts)
}

// countsHash hashes counts into a non-negative int63 (SplitMix64's
// finalizer, as desc.hash).
func countsHash(counts []int) int64 {
	h := uint64(len(counts))
	for _, n := range counts {
		h ^= uint64(n)
		h += 0x9e3779b97f4a7c15
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
		h = (h ^ (h >> 27)) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return int64(h >> 1)
}

// countsMismatch runs on every rank once the agreement step found that
// the ranks' counts differ (each rank's has c.size entries then): it
// gathers them all and names the ranks whose counts differ from rank 0's.
func (c *Comm) countsMismatch(ctx context.Context, d desc, counts []int) error {
	n := c.size
	mine, all := make([]int64, n), make([]int64, n*n)
	for i, v := range counts {
		mine[i] = int64(v)
	}
	sp, rp := unsafe.Pointer(&mine[0]), unsafe.Pointer(&all[0])
	err := c.do(ctx, "MPI_Allgather", true,
		func() C.int { return C.pz_allgather(sp, C.int(n), rp, C.int(n), c.h.i64, c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_iallgather(sp, C.int(n), rp, C.int(n), c.h.i64, c.c, r) }, sp, rp)
	if err != nil {
		return fmt.Errorf("%w: mpi: %sAt: the ranks' counts differ; collecting them failed: %w", comm.ErrMismatch, d.call, err)
	}
	detail := fmt.Sprintf("counts: rank 0 has %v", all[:n])
	for r := 1; r < n; r++ {
		if theirs := all[r*n : (r+1)*n]; !slices.Equal(theirs, all[:n]) {
			detail += fmt.Sprintf(", rank %d has %v", r, theirs)
		}
	}
	return &comm.MismatchError{Op: d.call.String(), Detail: detail}
}
