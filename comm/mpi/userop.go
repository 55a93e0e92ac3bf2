//go:build mpi

package mpi

/*
#include "pz_mpi.h"
int pz_user_init(void);
int pz_user_type(MPI_Datatype t, uintptr_t call, MPI_Datatype *out);
MPI_Op pz_user_op(int commute);
*/
import "C"

import (
	"context"
	"fmt"
	"runtime/cgo"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// User reductions under MPI: one MPI_Op per commutativity, made once
// (pz_user_init), whose C function finds the Go function of the call in an
// attribute of the call's datatype, a duplicate of the element type made
// for the call. MPI then combines along its own reduction tree, calling
// the function on pieces of the buffers, as it does for its own ops.

// userCall is what one user reduction's datatype carries.
type userCall struct {
	fn    func(in, inout []byte)
	size  int // element size
	panic any // the first panic of fn (never nil once set), re-raised once MPI returns
}

// ReduceUser implements comm.Comm with MPI_Reduce and a user op.
func (c *Comm) ReduceUser(ctx context.Context, send, recv comm.Buf, op *comm.UserFunc, root int) error {
	return c.reduceUser(ctx, callReduce, send, recv, op, root)
}

// AllReduceUser implements comm.Comm with MPI_Allreduce and a user op.
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
		return err
	}
	if lerr != nil {
		return lerr // check off: refuse before MPI sees a nil function
	}
	return c.runUser(ctx, k, send, recv, op, root, inplace)
}

// runUser runs an MPI_Reduce (or MPI_Allreduce, k) with the user op, once
// the arguments are checked and agreed; c.coll is held.
func (c *Comm) runUser(ctx context.Context, k call, send, recv comm.Buf, op *comm.UserFunc, root int, inplace C.int) error {
	name := k.String() + "User"
	all := k == callAllReduce
	c.st.lock()
	rc := C.pz_user_init()
	c.st.unlock()
	if rc != 0 {
		return fmt.Errorf("mpi: %s: %w", name, c.st.error("MPI_Op_create", rc))
	}
	u := &userCall{fn: op.Fn, size: send.Type.Size()}
	h := cgo.NewHandle(u)
	defer h.Delete()
	var dt C.MPI_Datatype
	c.st.lock()
	rc = C.pz_user_type(c.h.types[send.Type], C.uintptr_t(h), &dt)
	c.st.unlock()
	if rc != 0 {
		return fmt.Errorf("mpi: %s: %w", name, c.st.error("MPI_Type_dup", rc))
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
	if u.panic != nil {
		panic(u.panic)
	}
	return err
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
