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
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// The agreement step and argument checks of the collectives.

// argErr is a local validation failure.
func (c *Comm) argErr(call call, format string, args ...any) error {
	return &comm.ArgError{Op: call.String(), Rank: c.rank, Detail: fmt.Sprintf(format, args...)}
}

// pre runs before a collective whose arguments need no count exchange: with
// the check on it is the agreement step; with it off, or on one rank, a
// local validation failure is returned as is.
func (c *Comm) pre(ctx context.Context, d desc, lerr error) error {
	_, err := c.preVolume(ctx, d, lerr, 0)
	return err
}

// preVolume is pre for a collective whose ranks send different amounts:
// with the agreement step it also returns the largest volume any rank
// passed (-1 when there was no agreement step).
func (c *Comm) preVolume(ctx context.Context, d desc, lerr error, volume int64) (int64, error) {
	if !c.check || c.size == 1 {
		return -1, lerr
	}
	v := agreeVector(d, c.rank, c.size, lerr, volume)
	in, out := c.agree[:agreeWords], c.agree[agreeWords:]
	copy(in, v[:])
	if err := c.allreduceMaxI64(ctx, in, out); err != nil {
		return -1, err
	}
	failRank, same := agreed([agreeWords]int64(out), c.size)
	if failRank < 0 && same {
		return out[3], nil
	}
	return -1, c.explain(ctx, d, failRank, lerr)
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

// checkBuf validates a buffer (comm.CheckBuf, as on comm/local); what
// names it. Counts past MPI's int go too (large.go).
func (c *Comm) checkBuf(k call, what string, b comm.Buf) error {
	return comm.CheckBuf(k.String(), c.rank, b)
}

func (c *Comm) checkRoot(k call, root int) error {
	return comm.CheckRoot(k.String(), c.rank, root, c.size)
}

func (c *Comm) checkReduce(k call, send, recv comm.Buf, op comm.Op, wantRecv bool) (lerr error, inplace C.int) {
	if err := c.checkBuf(k, "send", send); err != nil {
		return err, 0
	}
	if op != comm.User && !op.Supports(send.Type) { // a user op: comm.CheckUser
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
	if err := comm.CheckAlias(k.String(), c.rank, send, recv); err != nil {
		return err, 0
	}
	if comm.InPlace(send, recv) {
		return nil, 1 // MPI_IN_PLACE
	}
	return nil, 0
}
