package resourceset

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
)

// The rooted collectives below are called by every rank of the root's
// communicator with the same root, in the same order as other collectives
// on it. Those that produce a result only at the root (Gather, Reduce,
// GatherValues, ReduceValue) return ok == true there and, on every other
// rank, a nil or zero result with ok == false and a nil error: the empty
// result is documented, never a panic. Errors (mismatched arguments across
// ranks, a canceled ctx, ...) come from comm and are wrapped with the name
// of the call and the root's rank; they are returned on every rank.

// Gather collects every rank's mine (lengths may differ) at the root, one
// part per rank in rank order (views into one allocation). Numeric data
// travels as raw memory.
func Gather[T comm.Number](ctx context.Context, root Root, mine []T) (parts [][]T, ok bool, err error) {
	parts, err = comm.Gather(ctx, root.Comm(), mine, root.Rank())
	return rooted(root, "Gather", parts, err)
}

// Reduce combines every rank's mine element-wise with op at the root; every
// rank passes the same length.
func Reduce[T comm.Number](ctx context.Context, root Root, mine []T, op comm.Op) (result []T, ok bool, err error) {
	result, err = comm.Reduce(ctx, root.Comm(), mine, op, root.Rank())
	return rooted(root, "Reduce", result, err)
}

// Bcast copies the root's buf into buf on every other rank, in place:
// every rank passes a buffer of the same length. Use BcastValue when only
// the root knows the length.
func Bcast[T comm.Number](ctx context.Context, root Root, buf []T) error {
	if err := comm.Bcast(ctx, root.Comm(), buf, root.Rank()); err != nil {
		return wrap(root, "Bcast", err)
	}
	return nil
}

// BcastValue sends the root's v to every rank and returns it there; the
// value passed on other ranks is ignored. Numeric slices and scalars
// travel as raw memory, other values through comm's codec.
func BcastValue[T any](ctx context.Context, root Root, v T) (T, error) {
	out, err := comm.BcastValue(ctx, root.Comm(), v, root.Rank())
	if err != nil {
		return out, wrap(root, "BcastValue", err)
	}
	return out, nil
}

// Scatter sends parts[i] from the root to rank i and returns this rank's
// part. parts has one entry per rank on the root and is ignored elsewhere.
func Scatter[T comm.Number](ctx context.Context, root Root, parts [][]T) ([]T, error) {
	mine, err := comm.Scatter(ctx, root.Comm(), parts, root.Rank())
	if err != nil {
		return nil, wrap(root, "Scatter", err)
	}
	return mine, nil
}

// GatherValues collects every rank's v at the root, in rank order, through
// comm's codec (any encodable value: structs, strings, maps).
func GatherValues[T any](ctx context.Context, root Root, v T) (vals []T, ok bool, err error) {
	vals, err = comm.GatherValues(ctx, root.Comm(), v, root.Rank())
	return rooted(root, "GatherValues", vals, err)
}

// ReduceValue combines every rank's v with f at the root, in rank order:
// f(f(v0, v1), v2)..., so f need not be commutative. f must not be nil.
func ReduceValue[T any](ctx context.Context, root Root, v T, f func(a, b T) T) (result T, ok bool, err error) {
	result, err = comm.ReduceValue(ctx, root.Comm(), v, f, root.Rank())
	return rooted(root, "ReduceValue", result, err)
}

// ScatterValues sends vals[i] from the root to rank i and returns this
// rank's value. vals has one entry per rank on the root and is ignored
// elsewhere.
func ScatterValues[T any](ctx context.Context, root Root, vals []T) (T, error) {
	v, err := comm.ScatterValues(ctx, root.Comm(), vals, root.Rank())
	if err != nil {
		return v, wrap(root, "ScatterValues", err)
	}
	return v, nil
}

// rooted turns a comm result into (result, ok, err) for a call whose
// result exists only at the root.
func rooted[R any](root Root, call string, r R, err error) (R, bool, error) {
	var zero R
	if err != nil {
		return zero, false, wrap(root, call, err)
	}
	if root.Comm().Rank() != root.Rank() {
		return zero, false, nil
	}
	return r, true, nil
}

func wrap(root Root, call string, err error) error {
	return fmt.Errorf("resourceset: %s rooted at rank %d: %w", call, root.Rank(), err)
}
