package commtest

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
)

// Named numeric types: the helpers must treat them like their underlying
// types.
type (
	// Celsius is a named float64.
	Celsius float64
	// Count is a named int.
	Count int
	// Flags is a named uint16.
	Flags uint16
)

type (
	integer interface {
		~int8 | ~int16 | ~int32 | ~int64 | ~int | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr
	}
	float interface{ ~float32 | ~float64 }
	cplx  interface{ ~complex64 | ~complex128 }
)

// spec describes one element type for the typed cases. Its reference
// reduction is written here, independently of comm.ReduceInto.
type spec[T comm.Number] struct {
	name string
	ops  []comm.Op
	// val is the reduction input of rank r at index i: small values (in
	// [-2, 2] for signed types) so that floating-point sums and products
	// are exact whatever the order, and some zeros for the logical ops.
	val func(r, i int) T
	// id maps x to a value that differs for nearby x, to catch data moved
	// to the wrong place.
	id  func(x int) T
	ref func(op comm.Op, a, b T) T
}

var (
	intOps   = []comm.Op{comm.Sum, comm.Prod, comm.Min, comm.Max, comm.LAnd, comm.LOr, comm.LXor, comm.BAnd, comm.BOr, comm.BXor}
	floatOps = []comm.Op{comm.Sum, comm.Prod, comm.Min, comm.Max}
	cplxOps  = []comm.Op{comm.Sum, comm.Prod}
)

func small(r, i int) int64 { return int64((r*7+i*3)%5 - 2) }

func intSpec[T integer](name string) spec[T] {
	return spec[T]{
		name: name, ops: intOps,
		val: func(r, i int) T { return T(small(r, i)) },
		id:  func(x int) T { return T(x % 100) },
		ref: refInt[T],
	}
}

func floatSpec[T float](name string) spec[T] {
	return spec[T]{
		name: name, ops: floatOps,
		val: func(r, i int) T { return T(small(r, i)) },
		id:  func(x int) T { return T(x%100000) + 0.5 },
		ref: refFloat[T],
	}
}

func cplxSpec[T cplx](name string) spec[T] {
	return spec[T]{
		name: name, ops: cplxOps,
		val: func(r, i int) T { return T(complex(float64(small(r, i)), float64(small(r+1, i+2)))) },
		id:  func(x int) T { return T(complex(float64(x%100000), -float64(x%977))) },
		ref: refCplx[T],
	}
}

// refInt is refOrdered plus the logical and bitwise ops, which are
// defined on integers only.
func refInt[T integer](op comm.Op, a, b T) T {
	switch op {
	case comm.LAnd:
		if a != 0 && b != 0 {
			return 1
		}
		return 0
	case comm.LOr:
		if a != 0 || b != 0 {
			return 1
		}
		return 0
	case comm.BAnd:
		return a & b
	case comm.BOr:
		return a | b
	case comm.BXor:
		return a ^ b
	case comm.LXor:
		if (a != 0) != (b != 0) {
			return 1
		}
		return 0
	}
	return refOrdered(op, a, b)
}

// refFloat is refOrdered: floats have no other op.
func refFloat[T float](op comm.Op, a, b T) T { return refOrdered(op, a, b) }

// refOrdered is the reference of the ops defined on every ordered type:
// Sum, Prod, Min and Max.
func refOrdered[T integer | float](op comm.Op, a, b T) T {
	switch op {
	case comm.Sum:
		return a + b
	case comm.Prod:
		return a * b
	case comm.Min:
		if b < a {
			return b
		}
		return a
	case comm.Max:
		if b > a {
			return b
		}
		return a
	}
	panic(fmt.Sprintf("commtest: no reference for %v", op))
}

func refCplx[T cplx](op comm.Op, a, b T) T {
	switch op {
	case comm.Sum:
		return a + b
	case comm.Prod:
		return a * b
	}
	panic(fmt.Sprintf("commtest: no reference for %v", op))
}

// typedCases returns the per-type cases for every numeric type.
func typedCases() []Case {
	var out []Case
	out = append(out, typed(intSpec[int8]("int8"))...)
	out = append(out, typed(intSpec[int16]("int16"))...)
	out = append(out, typed(intSpec[int32]("int32"))...)
	out = append(out, typed(intSpec[int64]("int64"))...)
	out = append(out, typed(intSpec[int]("int"))...)
	out = append(out, typed(intSpec[uint8]("uint8"))...)
	out = append(out, typed(intSpec[uint16]("uint16"))...)
	out = append(out, typed(intSpec[uint32]("uint32"))...)
	out = append(out, typed(intSpec[uint64]("uint64"))...)
	out = append(out, typed(intSpec[uint]("uint"))...)
	out = append(out, typed(intSpec[uintptr]("uintptr"))...)
	out = append(out, typed(floatSpec[float32]("float32"))...)
	out = append(out, typed(floatSpec[float64]("float64"))...)
	out = append(out, typed(cplxSpec[complex64]("complex64"))...)
	out = append(out, typed(cplxSpec[complex128]("complex128"))...)
	out = append(out, typed(floatSpec[Celsius]("Celsius"))...)
	out = append(out, typed(intSpec[Count]("Count"))...)
	out = append(out, typed(intSpec[Flags]("Flags"))...)
	return out
}

func typed[T comm.Number](s spec[T]) []Case {
	return []Case{
		{Name: "AllReduce/" + s.name, Run: func(ctx context.Context, c comm.Comm) error { return allReduceCase(ctx, c, s) }},
		{Name: "Reduce/" + s.name, Run: func(ctx context.Context, c comm.Comm) error { return reduceCase(ctx, c, s) }},
		{Name: "Move/" + s.name, Run: func(ctx context.Context, c comm.Comm) error { return moveCase(ctx, c, s) }},
	}
}
