package local

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

var _ comm.LocComm = (*rankComm)(nil)

// AllReduceLocBuf implements comm.LocComm: AllReduce's algorithm with
// comm.FoldLoc of dt as the op, folded in rank order like a user op that
// does not commute. The ranks agree on what MPI's agreement covers: the
// value type dt, MinLoc or MaxLoc and the number of pairs, so that ranks
// that disagree on any of them all get the same *comm.MismatchError (the
// op is min or max in it, the count counts pairs), as under comm/mpi.
func (c *rankComm) AllReduceLocBuf(ctx context.Context, send, recv comm.Buf, dt comm.Datatype, largest bool) error {
	const call = "AllReduceLoc"
	if dt < comm.Int8 || dt > comm.Float64 {
		return fmt.Errorf("local: %s of %v on rank %d: %w", call, dt, c.rank, errors.ErrUnsupported)
	}
	op := comm.Min
	if largest {
		op = comm.Max
	}
	loc := locCall{fp: comm.Fingerprint{Call: comm.CallAllReduceLoc, Type: dt, Op: op, Root: -1, Count: int64(send.Len() / 2)}}
	if send.Type != comm.Int64 || send.Len()%2 != 0 {
		loc.argErr = &comm.ArgError{Op: call, Rank: c.rank, Detail: fmt.Sprintf("send holds %d %v, want pairs of int64 words", send.Len(), send.Type)}
	}
	return c.allReduce(ctx, call, send, recv, reduction{op: comm.User, user: locOps[b2i(largest)][dt]}, &loc)
}

// locCall is what an AllReduceLoc changes in allReduce: the fingerprint
// the ranks agree on, and an invalid argument of its own, checked before
// the reduction's.
type locCall struct {
	fp     comm.Fingerprint
	argErr error
}

// locOps are the MinLoc ([0]) and MaxLoc ([1]) combines of LocComm's
// pairs, by value type.
var locOps = [2][comm.Float64 + 1]*comm.UserFunc{
	locOpsOf(false),
	locOpsOf(true),
}

func locOpsOf(largest bool) [comm.Float64 + 1]*comm.UserFunc {
	name := "MinLoc"
	if largest {
		name = "MaxLoc"
	}
	return [...]*comm.UserFunc{
		comm.Int8:    locOp[int8](name, largest),
		comm.Int16:   locOp[int16](name, largest),
		comm.Int32:   locOp[int32](name, largest),
		comm.Int64:   locOp[int64](name, largest),
		comm.Uint8:   locOp[uint8](name, largest),
		comm.Uint16:  locOp[uint16](name, largest),
		comm.Uint32:  locOp[uint32](name, largest),
		comm.Uint64:  locOp[uint64](name, largest),
		comm.Float32: locOp[float32](name, largest),
		comm.Float64: locOp[float64](name, largest),
	}
}

// locOp is comm.FoldLoc of T as a user op on raw pairs.
func locOp[T comm.Real](name string, largest bool) *comm.UserFunc {
	return &comm.UserFunc{Name: name, Fn: func(in, inout []byte) {
		comm.FoldLoc[T](words(in), words(inout), largest)
	}}
}

// words views b, whole int64s, as []int64.
func words(b []byte) []int64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
