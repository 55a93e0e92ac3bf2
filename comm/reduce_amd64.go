//go:build amd64 && !purego

package comm

import "golang.org/x/sys/cpu"

// AVX2 kernels (reduce_amd64.s). Each computes dst = a OP b over n bytes,
// n a positive multiple of 128.
func vaddpd(dst, a, b *byte, n int)
func vmulpd(dst, a, b *byte, n int)
func vaddps(dst, a, b *byte, n int)
func vmulps(dst, a, b *byte, n int)
func vpaddq(dst, a, b *byte, n int)
func vpaddd(dst, a, b *byte, n int)
func vpaddw(dst, a, b *byte, n int)
func vpaddb(dst, a, b *byte, n int)
func vpmulld(dst, a, b *byte, n int)
func vpmullw(dst, a, b *byte, n int)
func vpand(dst, a, b *byte, n int)
func vpor(dst, a, b *byte, n int)
func vpxor(dst, a, b *byte, n int)
func vpminsb(dst, a, b *byte, n int)
func vpminsw(dst, a, b *byte, n int)
func vpminsd(dst, a, b *byte, n int)
func vpminub(dst, a, b *byte, n int)
func vpminuw(dst, a, b *byte, n int)
func vpminud(dst, a, b *byte, n int)
func vpmaxsb(dst, a, b *byte, n int)
func vpmaxsw(dst, a, b *byte, n int)
func vpmaxsd(dst, a, b *byte, n int)
func vpmaxub(dst, a, b *byte, n int)
func vpmaxuw(dst, a, b *byte, n int)
func vpmaxud(dst, a, b *byte, n int)
func vmaxpd(dst, a, b *byte, n int)
func vminpd(dst, a, b *byte, n int)
func vmaxps(dst, a, b *byte, n int)
func vminps(dst, a, b *byte, n int)

// hasAVX2 is fixed at start-up from the CPU's feature flags.
var hasAVX2 = cpu.X86.HasAVX2

// vectorKernel returns the AVX2 kernel for op on dt, or nil. Complex Sum
// is element-wise float addition; float Min and Max follow Go's min and
// max (see FMINMAX in reduce_amd64.s); 64-bit integer Min, Max and Prod
// have no AVX2 instruction and stay in Go.
func vectorKernel(op Op, dt Datatype) func(dst, a, b *byte, n int) {
	switch op {
	case Sum:
		switch dt {
		case Float64, Complex128:
			return vaddpd
		case Float32, Complex64:
			return vaddps
		case Int64, Uint64:
			return vpaddq
		case Int32, Uint32:
			return vpaddd
		case Int16, Uint16:
			return vpaddw
		case Int8, Uint8:
			return vpaddb
		}
	case Prod:
		switch dt {
		case Float64:
			return vmulpd
		case Float32:
			return vmulps
		case Int32, Uint32:
			return vpmulld
		case Int16, Uint16:
			return vpmullw
		}
	case BAnd:
		return vpand
	case BOr:
		return vpor
	case BXor:
		return vpxor
	case Min:
		switch dt {
		case Float64:
			return vminpd
		case Float32:
			return vminps
		case Int8:
			return vpminsb
		case Int16:
			return vpminsw
		case Int32:
			return vpminsd
		case Uint8:
			return vpminub
		case Uint16:
			return vpminuw
		case Uint32:
			return vpminud
		}
	case Max:
		switch dt {
		case Float64:
			return vmaxpd
		case Float32:
			return vmaxps
		case Int8:
			return vpmaxsb
		case Int16:
			return vpmaxsw
		case Int32:
			return vpmaxsd
		case Uint8:
			return vpmaxub
		case Uint16:
			return vpmaxuw
		case Uint32:
			return vpmaxud
		}
	}
	return nil
}

// reduceVector reduces the longest prefix of whole 128-byte blocks with an
// AVX2 kernel and returns its length in bytes (0 if none applies).
// Arguments are validated by the caller.
func reduceVector(op Op, dt Datatype, dst, a, b []byte) int {
	n := len(dst) &^ 127
	if !hasAVX2 || n == 0 {
		return 0
	}
	k := vectorKernel(op, dt)
	if k == nil {
		return 0
	}
	k(&dst[0], &a[0], &b[0], n)
	return n
}
