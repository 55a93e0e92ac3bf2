package comm

import (
	"context"
	"fmt"
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
// smallest Index wins, as in MPI. Every rank passes the same length.
func AllReduceMinLoc[T Real](ctx context.Context, c Comm, send []Loc[T]) ([]Loc[T], error) {
	return allReduceLoc(ctx, c, "AllReduceMinLoc", send, func(a, b T) bool { return a < b })
}

// AllReduceMaxLoc is AllReduceMinLoc with the largest Value.
func AllReduceMaxLoc[T Real](ctx context.Context, c Comm, send []Loc[T]) ([]Loc[T], error) {
	return allReduceLoc(ctx, c, "AllReduceMaxLoc", send, func(a, b T) bool { return a > b })
}

// allReduceLoc gathers every rank's pairs (values and indices as two raw
// slices) and folds them in rank order, so that every rank and backend
// computes the same result.
func allReduceLoc[T Real](ctx context.Context, c Comm, call string, send []Loc[T], better func(a, b T) bool) ([]Loc[T], error) {
	vals := make([]T, len(send))
	idx := make([]int64, len(send))
	for i, l := range send {
		vals[i], idx[i] = l.Value, int64(l.Index)
	}
	allVals, err := AllGather(ctx, c, vals)
	if err != nil {
		return nil, fmt.Errorf("comm: %s: %w", call, err)
	}
	allIdx, err := AllGather(ctx, c, idx)
	if err != nil {
		return nil, fmt.Errorf("comm: %s: %w", call, err)
	}
	for r := range allVals {
		if len(allVals[r]) != len(send) {
			return nil, &MismatchError{Op: call, Detail: fmt.Sprintf("count: rank %d has %d, rank %d has %d", c.Rank(), len(send), r, len(allVals[r]))}
		}
	}
	out := append([]Loc[T](nil), send...)
	for i := range out {
		out[i] = Loc[T]{allVals[0][i], int(allIdx[0][i])}
		for r := 1; r < len(allVals); r++ {
			v, k := allVals[r][i], int(allIdx[r][i])
			if better(v, out[i].Value) || (v == out[i].Value && k < out[i].Index) {
				out[i] = Loc[T]{v, k}
			}
		}
	}
	return out, nil
}
