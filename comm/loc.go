package comm

import (
	"context"
	"errors"
	"fmt"
	"unsafe"
)

// Real is the set of element types with an order: Number without the
// complex types.
type Real interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr |
		~float32 | ~float64
}

// A Loc is a value and where it was found (an index: a rank, a position):
// the element of the MinLoc and MaxLoc reductions (MPI_MINLOC, MPI_MAXLOC).
type Loc[T Real] struct {
	Value T
	Index int
}

// AllReduceMinLoc returns, on every rank, for each position the smallest
// Value over the ranks' send and its Index; among equal values the
// smallest Index wins, as in MPI. Every rank passes the same length and
// T, and calls AllReduceMinLoc too: ranks that differ get a
// *MismatchError (of AllReduceLoc) on every rank (under MPI, unless its
// agreement step is off: PZ_COMM_CHECK=0).
func AllReduceMinLoc[T Real](ctx context.Context, c Comm, send []Loc[T]) ([]Loc[T], error) {
	return allReduceLoc(ctx, c, "AllReduceMinLoc", send, false)
}

// AllReduceMaxLoc is AllReduceMinLoc with the largest Value.
func AllReduceMaxLoc[T Real](ctx context.Context, c Comm, send []Loc[T]) ([]Loc[T], error) {
	return allReduceLoc(ctx, c, "AllReduceMaxLoc", send, true)
}

// allReduceLoc reduces the ranks' pairs in one reduction: each pair
// travels as two int64 words, the value's bits in the first and the index
// in the second, and the op keeps, position by position, the better value
// or, among equal ones, the smaller index. A LocComm does it natively,
// agreeing on the value type, MinLoc or MaxLoc and the length; on another
// Comm the ranks first agree on those (one small AllGather: a
// disagreement is the *MismatchError a LocComm returns, on every rank),
// and then reduce with AllReduceUser. The op is not declared commutative,
// so every backend folds in rank order and computes the same result
// (which matters only for values that do not compare, NaNs).
func allReduceLoc[T Real](ctx context.Context, c Comm, call string, send []Loc[T], largest bool) ([]Loc[T], error) {
	rec := make([]int64, 2*len(send))
	for i, l := range send {
		*(*T)(unsafe.Pointer(&rec[2*i])) = l.Value
		rec[2*i+1] = int64(l.Index)
	}
	dt := DatatypeOf[T]()
	err := errors.ErrUnsupported // reduced in place
	if lc, ok := c.(LocComm); ok {
		err = lc.AllReduceLocBuf(ctx, BufOf(rec), BufOf(rec), dt, largest)
	}
	if errors.Is(err, errors.ErrUnsupported) {
		err = agreeLoc(ctx, c, dt, largest, len(send))
		if err == nil {
			op := &UserFunc{Name: call, Fn: func(in, inout []byte) { FoldLoc[T](words(in), words(inout), largest) }}
			err = c.AllReduceUser(ctx, BufOf(rec), BufOf(rec), op)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("comm: %s: %w", call, err)
	}
	out := make([]Loc[T], len(send))
	for i := range out {
		out[i] = Loc[T]{Value: *(*T)(unsafe.Pointer(&rec[2*i])), Index: int(rec[2*i+1])}
	}
	return out, nil
}

// agreeLoc is the agreement step of allReduceLoc's fallback: every rank
// learns every rank's fingerprint of the call (AllReduceLoc, the value
// type, min or max, the number of pairs), and all return the same
// *MismatchError if they differ.
func agreeLoc(ctx context.Context, c Comm, dt Datatype, largest bool, pairs int) error {
	op := Min
	if largest {
		op = Max
	}
	w := Fingerprint{Call: CallAllReduceLoc, Type: dt, Op: op, Root: -1, Count: int64(pairs)}.Pack()
	all, err := AllGather(ctx, c, w[:])
	if err != nil {
		return err
	}
	fps := make([]Fingerprint, len(all))
	for r, a := range all {
		if len(a) != len(w) {
			return &MismatchError{Op: CallAllReduceLoc.String(), Detail: fmt.Sprintf("rank %d sent %d agreement words, not %d (it called another collective?)", r, len(a), len(w))}
		}
		fps[r] = UnpackFingerprint([2]uint64(a))
	}
	return CheckFingerprints(fps)
}

// LocComm is implemented by backends with a native MinLoc and MaxLoc
// (comm/mpi: MPI ops in C on a pair datatype; comm/local: FoldLoc folded
// like a user op), which agree on dt, largest and the number of pairs as
// on a collective's arguments: ranks that differ get a *MismatchError of
// AllReduceLoc on every rank. send and recv hold pairs
// of two Int64 words each, the value's bits of type dt in the first word
// and the index in the second; largest selects MaxLoc; recv may be send
// (in place). The result is FoldLoc's, in rank order. A backend that
// cannot returns an error wrapping errors.ErrUnsupported before any
// communication, and AllReduceMinLoc and AllReduceMaxLoc fall back to
// the same agreement (one small AllGather) and AllReduceUser with FoldLoc.
type LocComm interface {
	AllReduceLocBuf(ctx context.Context, send, recv Buf, dt Datatype, largest bool) error
}

// FoldLoc is the MinLoc (MaxLoc if largest) combine of LocComm's pairs:
// each pair of hi (the higher ranks') becomes lo's (the lower ranks')
// unless hi's value is better (larger if largest, else smaller), or equal
// with a smaller index.
func FoldLoc[T Real](lo, hi []int64, largest bool) {
	lo = lo[:len(hi)]
	for i := 0; i+1 < len(hi); i += 2 {
		acc, v := *(*T)(unsafe.Pointer(&lo[i])), *(*T)(unsafe.Pointer(&hi[i]))
		better := v < acc
		if largest {
			better = v > acc
		}
		if !better && (v != acc || hi[i+1] >= lo[i+1]) {
			hi[i], hi[i+1] = lo[i], lo[i+1]
		}
	}
}

// words views b, whole int64s, as []int64.
func words(b []byte) []int64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}
