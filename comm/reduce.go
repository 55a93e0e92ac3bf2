package comm

import "fmt"

// The constraint classes of the reduction kernels: every op is defined on
// integers, Sum/Prod/Min/Max on floats, Sum/Prod on complex numbers.
type (
	integer interface {
		~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
	}
	float interface{ ~float32 | ~float64 }
	cplx  interface{ ~complex64 | ~complex128 }
)

// ReduceInto combines src into dst element by element: dst[i] = dst[i] op
// src[i], for elements of type dt. It is the reference reduction that
// backends use on the shared-memory path. dst and src have the same length,
// a multiple of dt.Size(); an unsupported op/datatype pair or a length
// mismatch returns an error wrapping ErrInvalidArg.
//
// Integer arithmetic wraps as Go's does. Logical ops (LAnd, LOr, LXor)
// treat a non-zero element as true and yield 1 or 0 wherever two elements
// are combined; a reduction over one contribution (one rank, or rank 0
// of a Scan) combines nothing and returns that rank's elements as they
// are, as MPI does. Min and Max on floats follow
// Go's min and max builtins: if either element is a NaN the result is NaN,
// and min(-0, +0) is -0. (MPI leaves NaN handling to the implementation;
// OpenMPI's result depends on argument order.)
func ReduceInto(op Op, dt Datatype, dst, src []byte) error {
	return ReduceTo(op, dt, dst, dst, src)
}

// ReduceTo computes dst[i] = a[i] op b[i] for elements of type dt. dst may
// be a or b (the same memory, not a shifted overlap). It is ReduceInto
// without the separate copy when the result goes to a third buffer. The
// order of operands matters for floating-point rounding only.
func ReduceTo(op Op, dt Datatype, dst, a, b []byte) error {
	if !op.Supports(dt) {
		return fmt.Errorf("%w: reduction %v is not defined on %v", ErrInvalidArg, op, dt)
	}
	if len(a) != len(dst) || len(b) != len(dst) {
		return fmt.Errorf("%w: reduction %v on %v: lengths %d, %d and %d bytes differ", ErrInvalidArg, op, dt, len(dst), len(a), len(b))
	}
	if len(dst)%dt.Size() != 0 {
		return fmt.Errorf("%w: reduction %v on %v: %d bytes is not a whole number of elements", ErrInvalidArg, op, dt, len(dst))
	}
	if done := reduceVector(op, dt, dst, a, b); done > 0 {
		dst, a, b = dst[done:], a[done:], b[done:]
	}
	switch dt {
	case Int8:
		intKernel(op, sliceOf[int8](dst), sliceOf[int8](a), sliceOf[int8](b))
	case Int16:
		intKernel(op, sliceOf[int16](dst), sliceOf[int16](a), sliceOf[int16](b))
	case Int32:
		intKernel(op, sliceOf[int32](dst), sliceOf[int32](a), sliceOf[int32](b))
	case Int64:
		intKernel(op, sliceOf[int64](dst), sliceOf[int64](a), sliceOf[int64](b))
	case Uint8:
		intKernel(op, sliceOf[uint8](dst), sliceOf[uint8](a), sliceOf[uint8](b))
	case Uint16:
		intKernel(op, sliceOf[uint16](dst), sliceOf[uint16](a), sliceOf[uint16](b))
	case Uint32:
		intKernel(op, sliceOf[uint32](dst), sliceOf[uint32](a), sliceOf[uint32](b))
	case Uint64:
		intKernel(op, sliceOf[uint64](dst), sliceOf[uint64](a), sliceOf[uint64](b))
	case Float32:
		floatKernel(op, sliceOf[float32](dst), sliceOf[float32](a), sliceOf[float32](b))
	case Float64:
		floatKernel(op, sliceOf[float64](dst), sliceOf[float64](a), sliceOf[float64](b))
	case Complex64:
		complexKernel(op, sliceOf[complex64](dst), sliceOf[complex64](a), sliceOf[complex64](b))
	case Complex128:
		complexKernel(op, sliceOf[complex128](dst), sliceOf[complex128](a), sliceOf[complex128](b))
	}
	return nil
}

// The portable kernels below handle what the vector kernels (AVX2 on
// amd64, see reduce_amd64.s) do not: other platforms, float Min/Max,
// logical ops, 64-bit integer Min/Max/Prod, and the tail of every buffer.
// Sum and Prod are unrolled four ways, which lets the CPU overlap the
// independent lanes.

// intKernel is orderedKernel plus the logical and bitwise ops, which are
// defined on integers only.
func intKernel[T integer](op Op, d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case LAnd:
		for i := range d {
			var r T
			if a[i] != 0 && b[i] != 0 {
				r = 1
			}
			d[i] = r
		}
	case LOr:
		for i := range d {
			var r T
			if a[i] != 0 || b[i] != 0 {
				r = 1
			}
			d[i] = r
		}
	case LXor:
		for i := range d {
			var r T
			if (a[i] != 0) != (b[i] != 0) {
				r = 1
			}
			d[i] = r
		}
	case BAnd:
		for i := range d {
			d[i] = a[i] & b[i]
		}
	case BOr:
		for i := range d {
			d[i] = a[i] | b[i]
		}
	case BXor:
		for i := range d {
			d[i] = a[i] ^ b[i]
		}
	default:
		orderedKernel(op, d, a, b)
	}
}

// floatKernel is orderedKernel: floats have no other op.
func floatKernel[T float](op Op, d, a, b []T) { orderedKernel(op, d, a, b) }

// orderedKernel computes the ops defined on every ordered type: Sum,
// Prod, Min and Max.
func orderedKernel[T integer | float](op Op, d, a, b []T) {
	switch op {
	case Sum:
		sumKernel(d, a, b)
	case Prod:
		prodKernel(d, a, b)
	case Min:
		a, b = a[:len(d)], b[:len(d)]
		for i := range d {
			d[i] = min(a[i], b[i])
		}
	case Max:
		a, b = a[:len(d)], b[:len(d)]
		for i := range d {
			d[i] = max(a[i], b[i])
		}
	}
}

func complexKernel[T cplx](op Op, d, a, b []T) {
	switch op {
	case Sum:
		sumKernel(d, a, b)
	case Prod:
		prodKernel(d, a, b)
	}
}

func sumKernel[T Number](d, a, b []T) {
	n := len(d)
	a, b = a[:n], b[:n]
	i := 0
	for ; i+4 <= n; i += 4 {
		dd, aa, bb := d[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4]
		dd[0] = aa[0] + bb[0]
		dd[1] = aa[1] + bb[1]
		dd[2] = aa[2] + bb[2]
		dd[3] = aa[3] + bb[3]
	}
	for ; i < n; i++ {
		d[i] = a[i] + b[i]
	}
}

func prodKernel[T Number](d, a, b []T) {
	n := len(d)
	a, b = a[:n], b[:n]
	i := 0
	for ; i+4 <= n; i += 4 {
		dd, aa, bb := d[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4]
		dd[0] = aa[0] * bb[0]
		dd[1] = aa[1] * bb[1]
		dd[2] = aa[2] * bb[2]
		dd[3] = aa[3] * bb[3]
	}
	for ; i < n; i++ {
		d[i] = a[i] * b[i]
	}
}
