//go:build mpi

package mpi

/*
#include "pz_mpi.h"
#include "pz_loc.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/comm"
)

var _ comm.LocComm = (*Comm)(nil)

// AllReduceLocBuf implements comm.LocComm: after the agreement step, one
// MPI_Allreduce of the pairs (a contiguous type of two int64 words) with
// pz's MinLoc or MaxLoc op for the value type, written in C (loc.c) and
// made once at Init, so that no Go function is called back and no
// datatype is made per call, as a user op's are.
func (c *Comm) AllReduceLocBuf(ctx context.Context, send, recv comm.Buf, dt comm.Datatype, largest bool) error {
	const k = comm.CallAllReduceLoc
	if err := c.usable(k.String()); err != nil {
		return err
	}
	if dt < comm.Int8 || dt > comm.Float64 {
		return fmt.Errorf("mpi: %v of %v: %w", k, dt, errors.ErrUnsupported)
	}
	op := comm.Min
	if largest {
		op = comm.Max
	}
	// The checks of any reduction (recv like send, in place or apart),
	// then the pairs'.
	inplace, lerr := c.checkReduce(k, send, recv, op, true)
	if lerr == nil && (send.Type != comm.Int64 || send.Len()%2 != 0) {
		lerr = c.argErr(k, "send holds %d %v, want pairs of int64 words", send.Len(), send.Type)
	}
	pairs := send.Len() / 2
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{k, dt, op, int64(pairs), noRoot}, lerr); err != nil {
		return c.collErr(k, err)
	}
	if lerr != nil {
		return lerr // check off: nothing reaches MPI
	}
	if c.size == 1 {
		copy(recv.Bytes, send.Bytes) // a no-op in place
		return nil
	}
	mop := c.st.locOps[dt-1][b2i(largest)]
	pt := c.st.locPair
	return c.collErr(k, pieces(pairs, 16, func(off int, n C.int) error {
		sp, rp := ptr(send.Bytes[off:]), ptr(recv.Bytes[off:])
		return c.doSized(ctx, "MPI_Allreduce", true, int(n)*16,
			func() C.int { return C.pz_allreduce(sp, rp, n, pt, mop, c.c, inplace) },
			func(r *C.MPI_Request) C.int { return C.pz_iallreduce(sp, rp, n, pt, mop, c.c, inplace, r) }, sp, rp)
	}))
}

// locCombine runs the C op of dt (MaxLoc if largest) on pairs, for the
// test that holds it to comm.FoldLoc.
func locCombine(dt comm.Datatype, largest bool, in, inout []int64) {
	if len(inout) == 0 {
		return
	}
	C.pz_loc_combine(C.int(dt-1), C.int(b2i(largest)), (*C.int64_t)(&in[0]), (*C.int64_t)(&inout[0]), C.int(len(inout)/2))
}
