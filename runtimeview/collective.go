package runtimeview

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/comm"
)

// The all-to-all collectives of a RuntimeView. Every rank calls them in the
// same order; an argument that differs across ranks (length, type, op)
// makes every rank return an error (see comm.Comm). For collectives rooted
// at one rank, see package resourceset with rt.ResourceSet(root).

// AllGather collects every rank's mine (lengths may differ) on every rank:
// one part per rank, in rank order, as views into one allocation. Numeric
// data travels as raw memory, without encoding.
func AllGather[T comm.Number](ctx context.Context, rt *RuntimeView, mine []T) ([][]T, error) {
	parts, err := comm.AllGather(ctx, rt.c, mine)
	if err != nil {
		return nil, rt.callError("AllGather", err)
	}
	return parts, nil
}

// AllReduce combines every rank's mine element-wise with op and returns the
// result, a new slice, on every rank. Every rank passes the same length.
// Floating-point sums are identical on every rank; their rounding depends
// on the backend's summation order.
func AllReduce[T comm.Number](ctx context.Context, rt *RuntimeView, mine []T, op comm.Op) ([]T, error) {
	out, err := comm.AllReduce(ctx, rt.c, mine, op)
	if err != nil {
		return nil, rt.callError("AllReduce", err)
	}
	return out, nil
}

// AllReduceTo is AllReduce writing into dst (len(dst) == len(mine); dst may
// be mine itself). It allocates nothing.
func AllReduceTo[T comm.Number](ctx context.Context, rt *RuntimeView, dst, mine []T, op comm.Op) error {
	if err := comm.AllReduceTo(ctx, rt.c, dst, mine, op); err != nil {
		return rt.callError("AllReduce", err)
	}
	return nil
}

// AllGatherValues collects every rank's v, of any encodable type
// (structs, strings, maps), on every rank, in rank order. Values go
// through comm's codec, which carries a struct's exported fields only:
// unexported ones arrive as their zero value (this rank's own entry
// included, as every entry is decoded).
func AllGatherValues[T any](ctx context.Context, rt *RuntimeView, v T) ([]T, error) {
	vals, err := comm.AllGatherValues(ctx, rt.c, v)
	if err != nil {
		return nil, rt.callError("AllGatherValues", err)
	}
	return vals, nil
}

// AllReduceValue combines every rank's v with f and returns the result on
// every rank. f is applied in rank order, f(f(v0, v1), v2)..., on every
// rank, so it need not be commutative and a deterministic f gives the same
// result everywhere. f must not be nil: a nil f is an error wrapping
// comm.ErrInvalidArg on the ranks that passed it, while the others, which
// passed one, get the result. A value that does not decode as the
// receiving rank's T is an error on that rank (every rank must pass the
// same T).
func AllReduceValue[T any](ctx context.Context, rt *RuntimeView, v T, f func(a, b T) T) (T, error) {
	out, err := comm.AllReduceValue(ctx, rt.c, v, f)
	if err != nil {
		return out, rt.callError("AllReduceValue", err)
	}
	return out, nil
}

// callError names call in err. When the communicator was freed by this
// view's Close (or the end of the function Run or RunLocal ran), it also
// says so and what to do: a bare "comm: communicator freed" left the user
// to guess which communicator and why.
func (rt *RuntimeView) callError(call string, err error) error {
	if errors.Is(err, comm.ErrFreed) && rt.stack.Closed() {
		return fmt.Errorf("runtimeview: %s on rank %d: the RuntimeView was closed (by rt.Close, or when the function Run or RunLocal runs returned): call collectives before Close: %w", call, rt.Rank(), err)
	}
	return fmt.Errorf("runtimeview: %s: %w", call, err)
}
