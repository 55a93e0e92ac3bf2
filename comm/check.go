package comm

import (
	"fmt"
	"math"
	"strings"
	"unsafe"
)

// Call names a collective operation in a Fingerprint.
type Call uint8

// The collectives a Fingerprint can describe.
const (
	CallNone Call = iota
	CallBarrier
	CallBcast
	CallReduce
	CallAllReduce
	CallGather
	CallAllGather
	CallScatter
	CallAlltoall
	CallSplit
	CallDup
	CallFree
	CallScan
	CallExscan
	CallReduceScatterBlock
	CallAllReduceLoc
	CallSplitShared
	numCalls
)

var callNames = [...]string{"none", "Barrier", "Bcast", "Reduce", "AllReduce", "Gather", "AllGather", "Scatter", "Alltoall", "Split", "Dup", "Free",
	"Scan", "Exscan", "ReduceScatterBlock", "AllReduceLoc", "SplitShared"}

// String returns the method name of the call, e.g. "AllReduce".
func (c Call) String() string {
	if c < numCalls {
		return callNames[c]
	}
	return fmt.Sprintf("Call(%d)", uint8(c))
}

// A Fingerprint summarizes the arguments of one collective call on one
// rank: what every rank must agree on. Backends compare the fingerprints of
// all ranks before moving data (comm/local reads them from shared memory;
// an MPI backend can exchange Pack's two words) and turn a disagreement into
// a *MismatchError with CheckFingerprints. Comparing two fingerprints costs a
// few nanoseconds.
type Fingerprint struct {
	Call  Call
	Type  Datatype // Invalid when the call moves no data
	Op    Op       // NoOp when the call has no reduction
	Root  int32    // -1 when the call has no root
	Count int64    // element count; -1 when counts may differ across ranks
}

// Pack encodes f in two words, for backends that exchange fingerprints as
// integers. UnpackFingerprint inverts it.
func (f Fingerprint) Pack() [2]uint64 {
	w0 := uint64(f.Call) | uint64(f.Type)<<8 | uint64(f.Op)<<16 | uint64(uint32(f.Root))<<32
	return [2]uint64{w0, uint64(f.Count)}
}

// UnpackFingerprint decodes the words made by Fingerprint.Pack.
func UnpackFingerprint(w [2]uint64) Fingerprint {
	return Fingerprint{
		Call:  Call(w[0]),
		Type:  Datatype(w[0] >> 8),
		Op:    Op(w[0] >> 16),
		Root:  int32(uint32(w[0] >> 32)),
		Count: int64(w[1]),
	}
}

// CheckFingerprints returns nil if all ranks' fingerprints (indexed by
// rank) are equal, and otherwise a *MismatchError naming the first field
// that differs, in the order call, root, datatype, op, count, with the value
// of every rank that disagrees with rank 0. The result depends only on fps,
// so every rank that calls it on the same fingerprints returns the same
// error.
func CheckFingerprints(fps []Fingerprint) error {
	if len(fps) == 0 {
		return nil
	}
	f0 := fps[0]
	same := true
	for _, f := range fps[1:] {
		if f != f0 {
			same = false
			break
		}
	}
	if same {
		return nil
	}
	fields := []struct {
		name string
		get  func(Fingerprint) string
	}{
		{"call", func(f Fingerprint) string { return f.Call.String() }},
		{"root", func(f Fingerprint) string { return fmt.Sprint(f.Root) }},
		{"datatype", func(f Fingerprint) string { return f.Type.String() }},
		{"op", func(f Fingerprint) string { return f.Op.String() }},
		{"count", func(f Fingerprint) string { return fmt.Sprint(f.Count) }},
	}
	for _, fld := range fields {
		want := fld.get(f0)
		var b strings.Builder
		for r, f := range fps {
			if got := fld.get(f); got != want {
				if b.Len() == 0 {
					fmt.Fprintf(&b, "%s: rank 0 has %s", fld.name, want)
				}
				fmt.Fprintf(&b, ", rank %d has %s", r, got)
			}
		}
		if b.Len() > 0 {
			return &MismatchError{Op: f0.Call.String(), Detail: b.String()}
		}
	}
	return nil // unreachable: fingerprints differ in some field
}

// The Check functions validate one rank's arguments and return nil or an
// *ArgError for that rank. Backends fold the result into the collective's
// agreement step so that every rank reports it (see Comm).

// CheckRoot reports a root outside [0, size).
func CheckRoot(call string, rank, root, size int) error {
	if root < 0 || root >= size {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("root %d is outside [0, %d)", root, size)}
	}
	return nil
}

// CheckBuf reports a buffer with an invalid datatype or a byte length that
// is not a whole number of elements.
func CheckBuf(call string, rank int, b Buf) error {
	if !b.Type.Valid() {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("invalid datatype %v (build the Buf with comm.BufOf)", b.Type)}
	}
	if len(b.Bytes)&(b.Type.Size()-1) != 0 { // sizes are powers of two
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("buffer of %d bytes is not a whole number of %v elements", len(b.Bytes), b.Type)}
	}
	return nil
}

// CheckAlloc reports a nil Alloc passed to a collective that returns its
// result through one (Gather on root, AllGather, Scatter, Alltoall, and
// their non-blocking forms). Backends fold it into the agreement step, so
// that every rank reports it before any rank calls alloc.
func CheckAlloc(call string, rank int, alloc Alloc) error {
	if alloc == nil {
		return &ArgError{Op: call, Rank: rank, Detail: "alloc is nil (pass a func that returns the buffer for the result's count elements)"}
	}
	return nil
}

// CheckOp reports an op that is not defined on datatype dt (Min on
// complex64, BXor on float64, ...).
func CheckOp(call string, rank int, op Op, dt Datatype) error {
	if !op.Supports(dt) {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("reduction %v is not defined on %v", op, dt)}
	}
	return nil
}

// CheckRecv reports a receive buffer whose datatype or element count
// differs from the send buffer's (Reduce on root, AllReduce).
func CheckRecv(call string, rank int, send, recv Buf) error {
	if recv.Type != send.Type {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("receive buffer holds %v, send buffer %v", recv.Type, send.Type)}
	}
	if len(recv.Bytes) != len(send.Bytes) {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("receive buffer holds %d elements, send buffer %d", recv.Len(), send.Len())}
	}
	return nil
}

// CheckAlias reports send and receive buffers of a reduction that share
// memory without being the same buffer. The same buffer (same start, same
// length) is the in-place form, like MPI_IN_PLACE: the result replaces the
// input. Every backend refuses a partial overlap with this error.
func CheckAlias(call string, rank int, send, recv Buf) error {
	if Overlaps(send.Bytes, recv.Bytes) && !InPlace(send, recv) {
		return &ArgError{Op: call, Rank: rank, Detail: "send and receive buffers overlap without being the same buffer (pass the same slice as both for the in-place form)"}
	}
	return nil
}

// CheckBlocks reports a receive buffer of an all-gather of equal blocks
// (AllGatherBlockComm) that is not size blocks of send's type and length,
// or that overlaps send other than as this rank's block, and whether send
// is that block (the in-place form, like MPI_IN_PLACE). Both backends
// check with it.
func CheckBlocks(call string, rank, size int, send, recv Buf) (inplace bool, err error) {
	block := len(send.Bytes)
	if recv.Type != send.Type || len(recv.Bytes) != size*block {
		return false, &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("recv holds %d %v, want %d %v (%d ranks x %d)",
			recv.Len(), recv.Type, size*send.Len(), send.Type, size, send.Len())}
	}
	inplace = block > 0 && unsafe.SliceData(send.Bytes) == &recv.Bytes[rank*block]
	if !inplace && Overlaps(send.Bytes, recv.Bytes) {
		return false, &ArgError{Op: call, Rank: rank, Detail: "send and recv overlap (send may only be this rank's block of recv)"}
	}
	return inplace, nil
}

// Overlaps reports whether a and b share memory (backends use it to
// detect aliased buffers).
func Overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// InPlace reports whether send and recv are the same non-empty buffer:
// the in-place form of a reduction.
func InPlace(send, recv Buf) bool {
	return len(send.Bytes) > 0 && len(send.Bytes) == len(recv.Bytes) &&
		unsafe.SliceData(send.Bytes) == unsafe.SliceData(recv.Bytes)
}

// CheckCounts reports a per-rank counts slice that does not have size
// entries, has a negative entry, or does not sum to total.
func CheckCounts(call string, rank int, counts []int, size, total int) error {
	if len(counts) != size {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("%d counts (parts) for %d ranks; want one per rank", len(counts), size)}
	}
	sum := 0
	for i, c := range counts {
		if c < 0 {
			return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("negative count %d for rank %d", c, i)}
		}
		sum += c
	}
	if sum != total {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("counts sum to %d, buffer holds %d elements", sum, total)}
	}
	return nil
}

// CheckPeer reports a point-to-point peer outside [0, size); AnySource is
// accepted when wildcard is true (receives). AnySource where it is not
// accepted and ProcNull (which the typed helpers handle before a backend
// sees it) are named as such.
func CheckPeer(call string, rank, peer, size int, wildcard bool) error {
	if wildcard && peer == AnySource {
		return nil
	}
	if peer < 0 || peer >= size {
		var detail string
		switch peer {
		case AnySource:
			detail = fmt.Sprintf("peer rank %d is comm.AnySource, which only receives and probes take: name a rank in [0, %d)", peer, size)
		case ProcNull:
			detail = fmt.Sprintf("peer rank %d is comm.ProcNull, which comm.Send, Ssend, Recv, Isend, Irecv, Sendrecv, SendrecvReplace, SendInit, RecvInit and the probes take, not this call: name a rank in [0, %d)", peer, size)
		default:
			detail = fmt.Sprintf("peer rank %d is outside [0, %d)", peer, size)
		}
		return &ArgError{Op: call, Rank: rank, Detail: detail}
	}
	return nil
}

// MaxTag is the largest tag any backend takes: MPI's tags are C ints.
// comm/local takes every tag up to it; an MPI library may take fewer (its
// MPI_TAG_UB, mpi.Comm.TagUB: 2^31-1 under Open MPI, 2^28-1 under MPICH
// 4), so a program meant for every MPI keeps its tags below 2^28.
const MaxTag = math.MaxInt32

// CheckTag reports a negative tag or one above MaxTag; AnyTag is accepted
// when wildcard is true (receives).
func CheckTag(call string, rank, tag int, wildcard bool) error {
	if wildcard && tag == AnyTag {
		return nil
	}
	if tag < 0 {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("tag %d is negative", tag)}
	}
	if tag > MaxTag {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("tag %d exceeds %d (comm.MaxTag), the largest an MPI tag can be", tag, MaxTag)}
	}
	return nil
}

// CheckColor reports a Split color that is negative and not Undefined.
func CheckColor(call string, rank, color int) error {
	if color < 0 && color != Undefined {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("color %d is negative (use comm.Undefined to join no communicator)", color)}
	}
	return nil
}

// CheckSplit reports a Split colour that CheckColor refuses, or a
// colour or key outside MPI's C int: every backend refuses them alike,
// so that a program that splits in process splits under MPI too.
func CheckSplit(call string, rank, color, key int) error {
	if err := CheckColor(call, rank, color); err != nil {
		return err
	}
	if color > math.MaxInt32 {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("color %d exceeds %d, the largest an MPI color can be", color, math.MaxInt32)}
	}
	if key < math.MinInt32 || key > math.MaxInt32 {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf("key %d is outside [%d, %d], MPI's int range", key, math.MinInt32, math.MaxInt32)}
	}
	return nil
}

// FirstErr returns the first non-nil error, for chaining Check calls.
func FirstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
