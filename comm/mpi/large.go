//go:build mpi

package mpi

/*
#include "pz_mpi.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// Counts past MPI's int. MPI-3 counts and displacements are C ints; pz
// buffers may hold more (comm/local takes them, and a program must run
// the same on both backends). Such a buffer travels as one element of a
// derived datatype (pz_type_at: blocks of 2^30 elements and a remainder);
// reductions, which MPI defines on predefined types only, run in pieces
// of 2^30 elements; Gather, AllGather, Scatter and Alltoall whose counts or
// displacements do not fit take MPI_Alltoallw with one derived type per
// peer. Buffers within the limits take the usual calls, unchanged.

// maxCount is the largest count or displacement an MPI-3 call takes.
const maxCount = math.MaxInt32

// reduceBlock is how many elements one piece of a large reduction holds.
const reduceBlock = 1 << 30

// mpiType is a datatype made for one call (pz_type_at), or a predefined one.
type mpiType struct {
	t    C.MPI_Datatype
	made bool
}

// typeAt returns a datatype for n elements of t starting off bytes into a
// buffer. Free it once the call has started.
func (c *Comm) typeAt(call string, off, n int, t C.MPI_Datatype) (mpiType, error) {
	var out C.MPI_Datatype
	c.st.lock()
	rc := C.pz_type_at(C.MPI_Aint(off), C.MPI_Count(n), t, &out)
	c.st.unlock()
	if rc != 0 {
		return mpiType{}, fmt.Errorf("mpi: %s: a datatype for %d elements: %w", call, n, c.st.error("MPI_Type_create_struct", rc))
	}
	return mpiType{t: out, made: true}, nil
}

// free releases a datatype typeAt made.
func (c *Comm) free(t mpiType) {
	if !t.made {
		return
	}
	c.st.lock()
	C.pz_type_free(&t.t)
	c.st.unlock()
}

// tailType returns a datatype, used with MPI_BOTTOM and a count of 1, for
// n bytes at b followed by stageBytes at tail (C memory): a receive with
// room past its buffer (wideRecv). b is pinned Go memory or C memory.
// Free it once the call has started.
func (c *Comm) tailType(call string, b unsafe.Pointer, n int, tail unsafe.Pointer) (mpiType, error) {
	var out C.MPI_Datatype
	c.st.lock()
	rc := C.pz_type_tail(C.uintptr_t(uintptr(b)), C.MPI_Count(n), C.uintptr_t(uintptr(tail)), stageBytes, &out)
	c.st.unlock()
	if rc != 0 {
		return mpiType{}, fmt.Errorf("mpi: %s: %w", call, c.st.error("MPI_Type_create_struct", rc))
	}
	return mpiType{t: out, made: true}, nil
}

// span describes n elements of t to MPI: (n, t) within MPI's counts, else
// one element of a derived datatype (release with c.free after the call
// has started).
func (c *Comm) span(call string, n int, t C.MPI_Datatype) (C.int, mpiType, error) {
	if n <= maxCount {
		return C.int(n), mpiType{t: t}, nil
	}
	dt, err := c.typeAt(call, 0, n, t)
	return 1, dt, err
}

// offsets returns the element offset of each part laid out back to back.
func offsets(counts []int) []int {
	off, total := make([]int, len(counts)), 0
	for i, n := range counts {
		off[i] = total
		total += n
	}
	return off
}

// alltoallw runs the large-count form of a gather, scatter or all-to-all:
// this rank sends scnt[i] elements of t at element offset soff[i] of send
// to rank i and receives rcnt[i] elements from rank i at roff[i] of recv,
// each part one element of its own derived datatype (MPI_Alltoallw).
// Every rank of the collective must take this path.
func (c *Comm) alltoallw(ctx context.Context, call string, t comm.Datatype, send []byte, scnt, soff []int, recv []byte, rcnt, roff []int) error {
	n, dt, size := c.size, c.h.types[t], t.Size()
	sc, sd, rc, rd := make([]C.int, n), make([]C.int, n), make([]C.int, n), make([]C.int, n)
	st, rt := make([]C.MPI_Datatype, n), make([]C.MPI_Datatype, n)
	var made []mpiType
	defer func() {
		for _, m := range made {
			c.free(m)
		}
	}()
	part := func(count, off int, cnt *C.int, typ *C.MPI_Datatype) error {
		*typ = c.h.byte
		if count == 0 {
			return nil
		}
		m, err := c.typeAt(call, off*size, count, dt)
		if err != nil {
			return err
		}
		made = append(made, m)
		*cnt, *typ = 1, m.t
		return nil
	}
	for i := range n {
		if err := part(scnt[i], soff[i], &sc[i], &st[i]); err != nil {
			return err
		}
		if err := part(rcnt[i], roff[i], &rc[i], &rt[i]); err != nil {
			return err
		}
	}
	sp, rp := ptr(send), ptr(recv)
	scp, sdp, rcp, rdp := cints(sc), cints(sd), cints(rc), cints(rd)
	stp, rtp := unsafe.SliceData(st), unsafe.SliceData(rt)
	return c.doSized(ctx, "MPI_Alltoallw", true, len(send)+len(recv),
		func() C.int { return C.pz_alltoallw(sp, scp, sdp, stp, rp, rcp, rdp, rtp, c.c) },
		func(r *C.MPI_Request) C.int {
			return C.pz_ialltoallw(sp, scp, sdp, stp, rp, rcp, rdp, rtp, c.c, r)
		},
		sp, rp, unsafe.Pointer(scp), unsafe.Pointer(sdp), unsafe.Pointer(rcp), unsafe.Pointer(rdp),
		unsafe.Pointer(stp), unsafe.Pointer(rtp))
}

// pieces runs a reduction of n elements of size bytes in pieces MPI's
// predefined ops accept, calling one with each piece's byte offset and
// length in elements (once, with 0, for an empty buffer).
func pieces(n, size int, one func(off int, count C.int) error) error {
	if n == 0 {
		return one(0, 0)
	}
	for at := 0; at < n; at += reduceBlock {
		if err := one(at*size, C.int(min(reduceBlock, n-at))); err != nil {
			return err
		}
	}
	return nil
}
