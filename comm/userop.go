package comm

import (
	"context"
	"unsafe"
)

// User reductions: an operation the caller defines on typed buffers
// (MPI_Op_create), combined where the data is, as the predefined ops are:
// along MPI's reduction tree under MPI, by every in-process rank folding a
// share of the buffer on comm/local. Nothing is gathered to one rank first
// (ReduceValue, on encoded values of any type, does that).

// User is the Op of a user reduction in a Fingerprint: ranks that disagree
// on whether they reduce with a predefined op or their own get a
// MismatchError. It is not a valid op for Reduce and AllReduce.
const User Op = 0xff

// A UserFunc is a user reduction on raw buffers, as backends take it;
// UserOp builds one from a typed function.
type UserFunc struct {
	// Name names the op in errors and traces.
	Name string
	// Fn combines in into inout element-wise, inout[i] = in[i] ⊕ inout[i],
	// where in holds the contribution of lower ranks. Both hold whole
	// elements of the buffer's datatype and have the same length; a
	// backend may call Fn on any sub-range of the elements, any number of
	// times, from any goroutine, and never concurrently on overlapping
	// memory. ⊕ must be associative. A panic in Fn is a panic of the rank
	// whose call ran it; on comm/local the other ranks of a collective
	// whose combining it stopped (one above 4 KiB, which the ranks share)
	// return an error wrapping ErrBroken naming that rank and the op.
	Fn func(in, inout []byte)
	// Commute says that ⊕ is also commutative, which lets a backend combine
	// in any order. Otherwise the result is v0 ⊕ v1 ⊕ ... ⊕ v(n-1) in rank
	// order.
	Commute bool
}

// UserOp makes a UserFunc from a typed combine function with the same
// contract: combine(in, inout) sets inout[i] = in[i] ⊕ inout[i].
func UserOp[T Number](name string, combine func(in, inout []T), commute bool) *UserFunc {
	size := int(unsafe.Sizeof(*new(T)))
	view := func(b []byte) []T { return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/size) }
	return &UserFunc{Name: name, Commute: commute, Fn: func(in, inout []byte) { combine(view(in), view(inout)) }}
}

// CheckUser validates a user reduction's arguments as Reduce's checks do a
// predefined op's: a non-nil op with a function, a valid buffer.
func CheckUser(call string, rank int, send Buf, op *UserFunc) error {
	if op == nil || op.Fn == nil {
		return &ArgError{Op: call, Rank: rank, Detail: "nil user op (make one with comm.UserOp)"}
	}
	return CheckBuf(call, rank, send)
}

// ReduceUser combines every rank's send with op into a new slice on root
// (nil elsewhere). Every rank passes the same length and an op that
// computes the same thing.
func ReduceUser[T Number](ctx context.Context, c Comm, send []T, op *UserFunc, root int) ([]T, error) {
	var recv []T
	if c.Rank() == root {
		recv = make([]T, len(send))
	}
	if err := c.ReduceUser(ctx, BufOf(send), BufOf(recv), op, root); err != nil {
		return nil, err
	}
	return recv, nil
}

// AllReduceUser is ReduceUser with the result on every rank.
func AllReduceUser[T Number](ctx context.Context, c Comm, send []T, op *UserFunc) ([]T, error) {
	recv := make([]T, len(send))
	if err := c.AllReduceUser(ctx, BufOf(send), BufOf(recv), op); err != nil {
		return nil, err
	}
	return recv, nil
}
