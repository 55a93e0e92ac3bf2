package comm

import (
	"fmt"
	"math/bits"
	"unsafe"
)

// Datatype names the element type of a raw buffer.
type Datatype uint8

// The datatypes. int and uint travel as Int64 and Uint64 (pz supports 64-bit
// platforms only); uintptr as Uint64.
const (
	Invalid Datatype = iota
	Int8
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float32
	Float64
	Complex64
	Complex128
	numDatatypes
)

var datatypeNames = [...]string{"invalid", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "complex64", "complex128"}

var datatypeSizes = [...]int{0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 8, 16}

// String returns the Go name of the element type.
func (d Datatype) String() string {
	if d < numDatatypes {
		return datatypeNames[d]
	}
	return fmt.Sprintf("Datatype(%d)", uint8(d))
}

// Size is the size of one element in bytes (0 for Invalid).
func (d Datatype) Size() int {
	if d < numDatatypes {
		return datatypeSizes[d]
	}
	return 0
}

// Valid reports whether d is one of the datatypes above other than Invalid.
func (d Datatype) Valid() bool { return d > Invalid && d < numDatatypes }

// IsInteger reports whether d is a signed or unsigned integer type.
func (d Datatype) IsInteger() bool { return d >= Int8 && d <= Uint64 }

// IsComplex reports whether d is complex64 or complex128.
func (d Datatype) IsComplex() bool { return d == Complex64 || d == Complex128 }

// Number is the set of Go element types that collectives move as raw memory.
type Number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// Buf is a raw view of a slice of elements of one Datatype. Bytes aliases the
// caller's memory; len(Bytes) is a multiple of Type.Size().
type Buf struct {
	Bytes []byte
	Type  Datatype
}

// Len returns the number of elements in b.
func (b Buf) Len() int {
	if s := b.Type.Size(); s > 0 {
		// Every size is a power of two: a shift, not a 64-bit division
		// (~10 ns on the small collectives' path).
		return len(b.Bytes) >> bits.TrailingZeros(uint(s))
	}
	return 0
}

// Op is a predefined element-wise reduction.
type Op uint8

// The predefined reductions. Min and Max are not defined on complex types;
// LAnd, LOr, LXor, BAnd, BOr and BXor only on integer types. A logical op
// treats a non-zero element as true and yields 1 or 0 where elements are
// combined; with a single contribution (one rank, rank 0 of a Scan) the
// elements come back unchanged, as in MPI (normalize them with x != 0).
const (
	NoOp Op = iota
	Sum
	Prod
	Min
	Max
	LAnd
	LOr
	BAnd
	BOr
	BXor
	LXor
	numOps
)

var opNames = [...]string{"none", "sum", "prod", "min", "max", "land", "lor", "band", "bor", "bxor", "lxor"}

// String returns the op's lower-case name.
func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	if o == User {
		return "user"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Valid reports whether o is a predefined op other than NoOp.
func (o Op) Valid() bool { return o > NoOp && o < numOps }

// Supports reports whether o is defined on elements of type d.
func (o Op) Supports(d Datatype) bool {
	if !o.Valid() || !d.Valid() {
		return false
	}
	switch o {
	case Sum, Prod:
		return true
	case Min, Max:
		return !d.IsComplex()
	default:
		return d.IsInteger()
	}
}

// AsBytes returns the memory of s as bytes without copying. The result
// aliases s.
func AsBytes[T Number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}
