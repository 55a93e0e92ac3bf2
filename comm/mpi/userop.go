//go:build mpi

package mpi

/*
#include "pz_mpi.h"
int pz_user_acquire(void);
void pz_user_release(void);
int pz_user_type(MPI_Datatype t, uintptr_t call, MPI_Datatype *out);
MPI_Op pz_user_op(int commute);
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime/cgo"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// User reductions under MPI: one MPI_Op per commutativity, made once
// (pz_user_acquire), whose C function finds the Go function of the call in an
// attribute of the call's datatype, a duplicate of the element type made
// for the call. MPI then combines along its own reduction tree, calling
// the function on pieces of the buffers, as it does for its own ops.

// userCall is what one user reduction's datatype carries.
type userCall struct {
	fn    func(in, inout []byte)
	size  int // element size
	panic any // the first panic of fn (never nil once set), re-raised once MPI returns
}

// ReduceUser implements comm.Comm with MPI_Reduce and a user op. If the
// op panics on a rank, that rank panics with its value once the ranks
// have agreed on it (one more 8-byte MPI_Allreduce per call), and every
// other rank returns an error wrapping ErrUserOpPanicked and a
// *comm.RankError naming the rank: MPI finished the reduction without the
// op's work there, so no rank's result is valid.
func (c *Comm) ReduceUser(ctx context.Context, send, recv comm.Buf, op *comm.UserFunc, root int) error {
	return c.reduceUser(ctx, callReduce, send, recv, op, root)
}

// AllReduceUser implements comm.Comm with MPI_Allreduce and a user op; a
// panic in the op is handled as ReduceUser says.
func (c *Comm) AllReduceUser(ctx context.Context, send, recv comm.Buf, op *comm.UserFunc) error {
	return c.reduceUser(ctx, callAllReduce, send, recv, op, noRoot)
}

func (c *Comm) reduceUser(ctx context.Context, k call, send, recv comm.Buf, op *comm.UserFunc, root int) error {
	name := k.String() + "User"
	if err := c.usable(name); err != nil {
		return err
	}
	all := k == callAllReduce
	lerr := comm.CheckUser(name, c.rank, send, op)
	if lerr == nil && !all {
		lerr = c.checkRoot(k, root)
	}
	var inplace C.int
	if lerr == nil {
		inplace, lerr = c.checkReduce(k, send, recv, comm.User, all || c.rank == root)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.pre(ctx, desc{k, send.Type, comm.User, int64(send.Len()), int64(root)}, lerr); err != nil {
		return c.callErr(name, err)
	}
	if lerr != nil {
		return lerr // check off: refuse before MPI sees a nil function
	}
	if err := c.runUserAgreed(ctx, k, send, recv, op, root, inplace, true); err != nil {
		return c.callErr(name, err)
	}
	return nil
}

// runUser runs an MPI_Reduce (or MPI_Allreduce, k) with one of pz's own
// ops in Go (goMinMax), once the arguments are checked and agreed; c.coll
// is held.
func (c *Comm) runUser(ctx context.Context, k call, send, recv comm.Buf, op *comm.UserFunc, root int, inplace C.int) error {
	return c.runUserAgreed(ctx, k, send, recv, op, root, inplace, false)
}

// runUserAgreed runs an MPI_Reduce (or MPI_Allreduce, k) with op, once
// the arguments are checked and agreed; c.coll is held. With agree (a
// caller's op, which may panic) the ranks then agree on whether op
// panicked anywhere (userPanicRank): MPI finishes the reduction on every
// rank whatever op does, skipping it where it panicked, so without the
// agreement the other ranks would return a wrong result as a success.
// The rank whose op panicked panics with its value after the agreement,
// as the op's own panic; every other rank returns an error naming it.
func (c *Comm) runUserAgreed(ctx context.Context, k call, send, recv comm.Buf, op *comm.UserFunc, root int, inplace C.int, agree bool) error {
	all := k == callAllReduce
	if err := c.st.userAcquire(); err != nil {
		return err // named by the caller (callErr)
	}
	u := &userCall{fn: op.Fn, size: send.Type.Size()}
	h := cgo.NewHandle(u)
	defer h.Delete()
	var dt C.MPI_Datatype
	c.st.lock()
	rc := C.pz_user_type(c.h.types[send.Type], C.uintptr_t(h), &dt)
	c.st.unlock()
	if rc != 0 {
		return c.st.error("MPI_Type_dup", rc)
	}
	defer c.free(mpiType{t: dt, made: true})
	commute := C.int(0)
	if op.Commute {
		commute = 1
	}
	mop := C.pz_user_op(commute)
	err := pieces(send.Len(), send.Type.Size(), func(off int, n C.int) error {
		sp, rp := ptr(send.Bytes[off:]), unsafe.Pointer(nil)
		if all || c.rank == root {
			rp = ptr(recv.Bytes[off:])
		}
		size := int(n) * send.Type.Size()
		if all {
			return c.doSized(ctx, "MPI_Allreduce", true, size,
				func() C.int { return C.pz_allreduce(sp, rp, n, dt, mop, c.c, inplace) },
				func(r *C.MPI_Request) C.int { return C.pz_iallreduce(sp, rp, n, dt, mop, c.c, inplace, r) }, sp, rp)
		}
		return c.doSized(ctx, "MPI_Reduce", true, size,
			func() C.int { return C.pz_reduce(sp, rp, n, dt, mop, C.int(root), c.c, inplace) },
			func(r *C.MPI_Request) C.int { return C.pz_ireduce(sp, rp, n, dt, mop, C.int(root), c.c, inplace, r) }, sp, rp)
	})
	// One rank calls no op; a broken communicator means ctx ended the
	// reduction, and the others learn that from their own deadline.
	if agree && c.size > 1 && c.broken.Load() == nil {
		r, aerr := c.userPanicRank(ctx, u.panic != nil)
		switch {
		case u.panic != nil:
		case aerr != nil:
			err = errors.Join(err, fmt.Errorf("learning whether the user op %q panicked on another rank: %w", op.Name, aerr))
		case r >= 0:
			err = error(&comm.RankError{Rank: r, Err: fmt.Errorf(
				"the user op %q panicked there, so the result is void on every rank (rank %d's output has the panic): %w", op.Name, r, ErrUserOpPanicked)})
		}
	}
	if u.panic != nil {
		panic(u.panic)
	}
	return err
}

// userPanicRank agrees on the lowest rank whose user op panicked (-1 for
// none) with one MPI_Allreduce (MPI_MIN) of 8 bytes; c.coll is held.
func (c *Comm) userPanicRank(ctx context.Context, panicked bool) (int, error) {
	in, out := &c.i64[0], &c.i64[1] // c's scratch, guarded by c.coll
	*in = int64(c.size)
	if panicked {
		*in = int64(c.rank)
	}
	sp, rp := unsafe.Pointer(in), unsafe.Pointer(out)
	dt, mop := c.h.i64, c.h.ops[comm.Min]
	if err := c.do(ctx, "MPI_Allreduce", true,
		func() C.int { return C.pz_allreduce(sp, rp, 1, dt, mop, c.c, 0) },
		func(r *C.MPI_Request) C.int { return C.pz_iallreduce(sp, rp, 1, dt, mop, c.c, 0, r) }, sp, rp); err != nil {
		return -1, err
	}
	if *out >= int64(c.size) {
		return -1, nil
	}
	return int(*out), nil
}

// goMinMax returns the Go form of a predefined Min or Max on an unsigned
// type that the MPI library orders wrongly (state.minmaxGo), or nil.
func (c *Comm) goMinMax(op comm.Op, t comm.Datatype) *comm.UserFunc {
	if (op != comm.Min && op != comm.Max) || !t.Valid() || !c.st.minmaxGo[t] {
		return nil
	}
	switch t {
	case comm.Uint8:
		return minMax[uint8](op)
	case comm.Uint16:
		return minMax[uint16](op)
	case comm.Uint32:
		return minMax[uint32](op)
	case comm.Uint64:
		return minMax[uint64](op)
	}
	return nil
}

func minMax[T uint8 | uint16 | uint32 | uint64](op comm.Op) *comm.UserFunc {
	if op == comm.Min {
		return comm.UserOp("min", func(in, inout []T) {
			for i, a := range in {
				inout[i] = min(a, inout[i])
			}
		}, true)
	}
	return comm.UserOp("max", func(in, inout []T) {
		for i, a := range in {
			inout[i] = max(a, inout[i])
		}
	}, true)
}

// userAcquire makes sure that s holds a reference to the key and the ops
// of user reductions (userop.c), taking it on s's first user reduction;
// an adopted World's Finalize releases it (releaseUser).
func (s *state) userAcquire() error {
	if s.userHeld.Load() {
		return nil
	}
	// s's lock, then userMu, as releaseUser's caller takes them.
	s.lock()
	defer s.unlock()
	s.userMu.Lock()
	defer s.userMu.Unlock()
	if s.userHeld.Load() {
		return nil
	}
	if rc := C.pz_user_acquire(); rc != 0 {
		return s.errorLocked("MPI_Op_create", rc)
	}
	s.userHeld.Store(true)
	return nil
}

// releaseUser drops s's reference to the key and the ops of user
// reductions, if it took one; the last reference frees them. The caller
// holds s's lock.
func (s *state) releaseUser() {
	s.userMu.Lock()
	defer s.userMu.Unlock()
	if s.userHeld.Swap(false) {
		C.pz_user_release()
	}
}
