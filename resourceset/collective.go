package resourceset

import (
	"context"
	"errors"
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
// of the call and the root's rank, with a nil or zero result (never this
// rank's own input); a mismatch is returned on every rank, a value that
// does not decode only where it is decoded (see the package doc).

// Gather collects every rank's mine (lengths may differ) at the root, one
// part per rank in rank order (views into one allocation). Numeric data
// travels as raw memory.
func Gather[T comm.Number](ctx context.Context, root Root, mine []T) (parts [][]T, ok bool, err error) {
	c, rank, err := rootOf(root, "Gather")
	if err != nil {
		return parts, false, err
	}
	parts, err = comm.Gather(ctx, c, mine, rank)
	return rooted(root, "Gather", parts, err)
}

// Reduce combines every rank's mine element-wise with op at the root; every
// rank passes the same length.
func Reduce[T comm.Number](ctx context.Context, root Root, mine []T, op comm.Op) (result []T, ok bool, err error) {
	c, rank, err := rootOf(root, "Reduce")
	if err != nil {
		return result, false, err
	}
	result, err = comm.Reduce(ctx, c, mine, op, rank)
	return rooted(root, "Reduce", result, err)
}

// Bcast copies the root's buf into buf on every other rank, in place:
// every rank passes a buffer of the same length. Use BcastValue when only
// the root knows the length.
func Bcast[T comm.Number](ctx context.Context, root Root, buf []T) error {
	c, rank, err := rootOf(root, "Bcast")
	if err != nil {
		return err
	}
	if err := comm.Bcast(ctx, c, buf, rank); err != nil {
		return wrap(root, "Bcast", err)
	}
	return nil
}

// BcastValue sends the root's v to every rank and returns it there; the
// value passed on other ranks is ignored. Numeric slices and scalars
// travel as raw memory, other values through comm's codec.
func BcastValue[T any](ctx context.Context, root Root, v T) (T, error) {
	c, rank, err := rootOf(root, "BcastValue")
	if err != nil {
		var zero T
		return zero, err
	}
	out, err := comm.BcastValue(ctx, c, v, rank)
	if err != nil {
		var zero T // not this rank's own v, which is not the root's
		return zero, wrap(root, "BcastValue", err)
	}
	return out, nil
}

// Scatter sends parts[i] from the root to rank i and returns this rank's
// part. parts has one entry per rank on the root and is ignored elsewhere.
func Scatter[T comm.Number](ctx context.Context, root Root, parts [][]T) ([]T, error) {
	c, rank, err := rootOf(root, "Scatter")
	if err != nil {
		return nil, err
	}
	mine, err := comm.Scatter(ctx, c, parts, rank)
	if err != nil {
		return nil, wrap(root, "Scatter", err)
	}
	return mine, nil
}

// GatherValues collects every rank's v at the root, in rank order, through
// comm's codec (any encodable value: structs, strings, maps; a struct's
// unexported fields arrive as their zero value, see the package doc).
func GatherValues[T any](ctx context.Context, root Root, v T) (vals []T, ok bool, err error) {
	c, rank, err := rootOf(root, "GatherValues")
	if err != nil {
		return vals, false, err
	}
	vals, err = comm.GatherValues(ctx, c, v, rank)
	return rooted(root, "GatherValues", vals, err)
}

// ReduceValue combines every rank's v with f at the root, in rank order:
// f(f(v0, v1), v2)..., so f need not be commutative. f must not be nil: a
// nil f is an error wrapping comm.ErrInvalidArg on the ranks that passed
// it; where every rank did, on every rank.
func ReduceValue[T any](ctx context.Context, root Root, v T, f func(a, b T) T) (result T, ok bool, err error) {
	c, rank, err := rootOf(root, "ReduceValue")
	if err != nil {
		return result, false, err
	}
	result, err = comm.ReduceValue(ctx, c, v, f, rank)
	return rooted(root, "ReduceValue", result, err)
}

// ScatterValues sends vals[i] from the root to rank i and returns this
// rank's value. vals has one entry per rank on the root and is ignored
// elsewhere.
func ScatterValues[T any](ctx context.Context, root Root, vals []T) (T, error) {
	c, rank, err := rootOf(root, "ScatterValues")
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := comm.ScatterValues(ctx, c, vals, rank)
	if err != nil {
		var zero T
		return zero, wrap(root, "ScatterValues", err)
	}
	return v, nil
}

// rootOf returns root's communicator and rank, or, for a nil root (or a
// root without a communicator), an error wrapping comm.ErrInvalidArg
// instead of a nil dereference.
func rootOf(root Root, call string) (comm.Comm, int, error) {
	var c comm.Comm
	if root != nil {
		c = root.Comm()
	}
	if c == nil {
		return nil, 0, fmt.Errorf("resourceset: %s: %w: the root is nil or has no communicator (pass a resource set of the runtime view, e.g. rt.ResourceSet(r), or its RAM)", call, comm.ErrInvalidArg)
	}
	return c, root.Rank(), nil
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

// wrap names the call and its root in err; for a freed communicator it
// also says the likely cause and the fix.
func wrap(root Root, call string, err error) error {
	if errors.Is(err, comm.ErrFreed) {
		return fmt.Errorf("resourceset: %s rooted at rank %d: the resource set's communicator was freed (the RuntimeView it came from was closed?): call collectives before Close, in the function Run or RunLocal runs: %w", call, root.Rank(), err)
	}
	return fmt.Errorf("resourceset: %s rooted at rank %d: %w", call, root.Rank(), err)
}
