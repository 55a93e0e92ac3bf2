package comm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"unsafe"
)

// pz supports 64-bit platforms only: int and uint travel as Int64 and
// Uint64. This line fails to compile where int is not 8 bytes.
var _ [unsafe.Sizeof(int(0)) - 8]struct{}

// DatatypeOf returns the Datatype of elements of type T, including named
// types whose underlying type is numeric (type Celsius float64 is Float64).
// int and uint map to Int64 and Uint64, uintptr to Uint64.
func DatatypeOf[T Number]() Datatype {
	var z T
	// Fast path for the predeclared types; named types fall through to
	// reflection, which costs a few nanoseconds more.
	switch any(z).(type) {
	case float64:
		return Float64
	case float32:
		return Float32
	case int:
		return Int64
	case int64:
		return Int64
	case int32:
		return Int32
	case uint8:
		return Uint8
	case complex128:
		return Complex128
	}
	return kindDatatype(reflect.TypeFor[T]().Kind())
}

// kindDatatype maps a reflect.Kind to its Datatype, or Invalid.
func kindDatatype(k reflect.Kind) Datatype {
	switch k {
	case reflect.Int8:
		return Int8
	case reflect.Int16:
		return Int16
	case reflect.Int32:
		return Int32
	case reflect.Int64, reflect.Int:
		return Int64
	case reflect.Uint8:
		return Uint8
	case reflect.Uint16:
		return Uint16
	case reflect.Uint32:
		return Uint32
	case reflect.Uint64, reflect.Uint, reflect.Uintptr:
		return Uint64
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	case reflect.Complex64:
		return Complex64
	case reflect.Complex128:
		return Complex128
	}
	return Invalid
}

// BufOf returns a raw view of s (no copy). Its Bytes alias s; an empty s
// gives nil Bytes with the Type still set.
func BufOf[T Number](s []T) Buf {
	return Buf{Bytes: AsBytes(s), Type: DatatypeOf[T]()}
}

// BufOfSlice is BufOf for a slice held in an interface: a raw view of v
// if it is a slice of a Number type (named element types included), and
// false otherwise.
func BufOfSlice(v any) (Buf, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return Buf{}, false
	}
	dt := kindDatatype(rv.Type().Elem().Kind())
	if !dt.Valid() {
		return Buf{}, false
	}
	b := Buf{Type: dt}
	if rv.Len() > 0 {
		b.Bytes = unsafe.Slice((*byte)(rv.UnsafePointer()), rv.Len()*dt.Size())
	}
	return b, true
}

// datatypeTypes are the element types MakeSlice makes, by Datatype.
var datatypeTypes = [...]reflect.Type{nil,
	reflect.TypeFor[int8](), reflect.TypeFor[int16](), reflect.TypeFor[int32](), reflect.TypeFor[int64](),
	reflect.TypeFor[uint8](), reflect.TypeFor[uint16](), reflect.TypeFor[uint32](), reflect.TypeFor[uint64](),
	reflect.TypeFor[float32](), reflect.TypeFor[float64](), reflect.TypeFor[complex64](), reflect.TypeFor[complex128]()}

// MakeSlice returns a new slice of n elements of dt's Go type ([]float64
// for Float64, []int64 for Int64, ...) and its raw view; nil and a zero
// Buf for an invalid dt.
func MakeSlice(dt Datatype, n int) (any, Buf) {
	if !dt.Valid() {
		return nil, Buf{}
	}
	s := reflect.MakeSlice(reflect.SliceOf(datatypeTypes[dt]), n, n).Interface()
	b, _ := BufOfSlice(s)
	return s, b
}

// sliceOf reinterprets b as a []T of len(b)/sizeof(T) elements without
// copying. b must come from a []T (or be suitably aligned).
func sliceOf[T Number](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// views splits all into consecutive parts of counts[i] elements. Each part
// has its capacity clipped so that appending to one never overwrites the
// next.
func views[T any](all []T, counts []int) [][]T {
	out := make([][]T, len(counts))
	off := 0
	for i, c := range counts {
		out[i] = all[off : off+c : off+c]
		off += c
	}
	return out
}

// concat returns parts laid out consecutively and the length of each part.
// When the parts already lie back to back in one array, sliced from it
// with their capacity reaching to its end (flat[a:b]), it returns that
// memory without copying. The views AllGather returns have clipped
// capacities and are copied: proving that two clipped slices share one
// allocation would take unsafe arithmetic that -race's checkptr rejects.
func concat[T any](parts [][]T) ([]T, []int) {
	counts := make([]int, len(parts))
	total := 0
	for i, p := range parts {
		counts[i] = len(p)
		total += len(p)
	}
	if total == 0 {
		return nil, counts
	}
	// Find the first non-empty part and check that the others follow it
	// directly in memory.
	var base []T
	for _, p := range parts {
		if len(p) > 0 {
			base = p
			break
		}
	}
	if cap(base) >= total {
		whole := base[:total]
		off, ok := 0, true
		for _, p := range parts {
			if len(p) > 0 && unsafe.SliceData(p) != &whole[off] {
				ok = false
				break
			}
			off += len(p)
		}
		if ok {
			return whole, counts
		}
	}
	out := make([]T, 0, total)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, counts
}

// AllReduce combines send element-wise with op across all ranks and returns
// the result, a new slice of len(send), on every rank. Every rank passes
// the same length. Floating-point results are identical on every rank but
// depend on the backend's summation order (comm/local folds in rank order).
func AllReduce[T Number](ctx context.Context, c Comm, send []T, op Op) ([]T, error) {
	recv := make([]T, len(send))
	if err := c.AllReduce(ctx, BufOf(send), BufOf(recv), op); err != nil {
		return nil, err
	}
	return recv, nil
}

// AllReduceTo is AllReduce writing the result into dst, which must have
// len(send) elements. dst may be send itself (in place). It allocates
// nothing.
func AllReduceTo[T Number](ctx context.Context, c Comm, dst, send []T, op Op) error {
	return c.AllReduce(ctx, BufOf(send), BufOf(dst), op)
}

// Reduce combines send element-wise with op across all ranks and returns
// the result (a new slice) on root; other ranks get nil.
func Reduce[T Number](ctx context.Context, c Comm, send []T, op Op, root int) ([]T, error) {
	var recv []T
	rb := Buf{Type: DatatypeOf[T]()}
	if c.Rank() == root {
		recv = make([]T, len(send))
		rb = BufOf(recv)
	}
	if err := c.Reduce(ctx, BufOf(send), rb, op, root); err != nil {
		return nil, err
	}
	return recv, nil
}

// AllGather collects every rank's send (lengths may differ) on every rank.
// The result has one part per rank, in rank order; the parts are views into
// one allocation.
func AllGather[T Number](ctx context.Context, c Comm, send []T) ([][]T, error) {
	var all []T
	counts, err := c.AllGather(ctx, BufOf(send), func(n int) []byte {
		all = make([]T, n)
		return AsBytes(all)
	})
	if err != nil {
		return nil, err
	}
	return views(all, counts), nil
}

// AllGatherBlockComm is implemented by backends with a native all-gather
// of equal blocks (comm/mpi: MPI_Allgather, with no exchange of counts),
// which AllGatherTo uses: recv holds Size blocks of send's length, and
// rank r's send lands in block r. send may be this rank's own block of
// recv (in place). A backend that cannot do the call natively returns an
// error wrapping errors.ErrUnsupported before any communication, and
// AllGatherTo's fallback (AllGather) runs.
type AllGatherBlockComm interface {
	AllGatherBlockBuf(ctx context.Context, send, recv Buf) error
}

// AllGatherTo collects every rank's send, all of one length, into dst on
// every rank: rank r's elements at dst[r*len(send):(r+1)*len(send)]. dst
// has Size()*len(send) elements, and send may be this rank's block of dst
// (in place). It is MPI_Allgather, cheaper than AllGather where a backend
// has it natively: the lengths are known, so no counts are exchanged.
// Ranks that pass different lengths get a *MismatchError (with the
// backend's agreement check on, for comm/mpi).
func AllGatherTo[T Number](ctx context.Context, c Comm, dst, send []T) error {
	if bc, ok := c.(AllGatherBlockComm); ok {
		err := bc.AllGatherBlockBuf(ctx, BufOf(send), BufOf(dst))
		if !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	return allGatherTo(ctx, c, dst, send)
}

// allGatherTo is AllGatherTo through AllGather: the counts tell every
// rank the same thing, so a length that differs is an error everywhere.
func allGatherTo[T Number](ctx context.Context, c Comm, dst, send []T) error {
	const call = "AllGather"
	n := len(send)
	wantDst := c.Size() * n
	var tmp []T
	counts, err := c.AllGather(ctx, BufOf(send), func(total int) []byte {
		if total == len(dst) && total == wantDst && !Overlaps(AsBytes(dst), AsBytes(send)) {
			return AsBytes(dst)
		}
		tmp = make([]T, total) // reported below, once every rank has its counts
		return AsBytes(tmp)
	})
	if err != nil {
		return err
	}
	for r, k := range counts {
		if k != counts[0] {
			return &MismatchError{Op: call, Detail: fmt.Sprintf("AllGatherTo's block length: rank 0 has %d, rank %d has %d", counts[0], r, k)}
		}
	}
	if len(dst) != wantDst {
		return &ArgError{Op: call, Rank: c.Rank(), Detail: fmt.Sprintf("dst holds %d elements, want %d (%d ranks x %d)", len(dst), wantDst, c.Size(), n)}
	}
	if tmp != nil {
		copy(dst, tmp) // send was a block of dst
	}
	return nil
}

// Gather collects every rank's send (lengths may differ) on root, one part
// per rank in rank order, as views into one allocation. Other ranks get nil.
func Gather[T Number](ctx context.Context, c Comm, send []T, root int) ([][]T, error) {
	var all []T
	counts, err := c.Gather(ctx, BufOf(send), root, func(n int) []byte {
		all = make([]T, n)
		return AsBytes(all)
	})
	if err != nil || counts == nil {
		return nil, err
	}
	return views(all, counts), nil
}

// Scatter sends parts[i] from root to rank i and returns this rank's part
// (a new slice). parts is ignored on non-roots; on root it has one entry
// per rank. Parts sliced back to back from one array (flat[a:b], keeping
// the capacity) are sent without an intermediate copy.
func Scatter[T Number](ctx context.Context, c Comm, parts [][]T, root int) ([]T, error) {
	send := Buf{Type: DatatypeOf[T]()}
	var counts []int
	if c.Rank() == root {
		var flat []T
		flat, counts = concat(parts)
		send = BufOf(flat)
	}
	var mine []T
	err := c.Scatter(ctx, send, counts, root, func(n int) []byte {
		mine = make([]T, n)
		return AsBytes(mine)
	})
	if err != nil {
		return nil, err
	}
	return mine, nil
}

// Alltoall sends parts[i] to rank i (len(parts) == Size) and returns the
// parts received from every rank, in rank order, as views into one
// allocation. Lengths may differ.
func Alltoall[T Number](ctx context.Context, c Comm, parts [][]T) ([][]T, error) {
	flat, counts := concat(parts)
	var all []T
	recvCounts, err := c.Alltoall(ctx, BufOf(flat), counts, func(n int) []byte {
		all = make([]T, n)
		return AsBytes(all)
	})
	if err != nil {
		return nil, err
	}
	return views(all, recvCounts), nil
}

// Bcast copies root's buf into buf on every other rank, in place. Every
// rank passes the same length; use BcastValue when only root knows it.
func Bcast[T Number](ctx context.Context, c Comm, buf []T, root int) error {
	return c.Bcast(ctx, BufOf(buf), root)
}

// Send sends buf to rank dest with tag (>= 0). It returns when buf may be
// reused.
func Send[T Number](ctx context.Context, c Comm, buf []T, dest, tag int) error {
	if dest == ProcNull {
		return nil
	}
	return c.Send(ctx, BufOf(buf), dest, tag)
}

// Ssend is the synchronous send (MPI_Ssend): it returns once a receive on
// dest has taken the message, whatever its size, so that the sender knows
// the receiver got there. If ctx ends first, the error wraps ctx's; the
// message is withdrawn where the backend can (comm/local), and where it
// cannot (MPI) the error says so: the message stays posted and a later
// receive on dest may still take it. The communicator stays usable.
func Ssend[T Number](ctx context.Context, c Comm, buf []T, dest, tag int) error {
	if dest == ProcNull {
		return nil
	}
	s, ok := c.(interface {
		Ssend(ctx context.Context, buf Buf, dest, tag int) error
	})
	if !ok {
		return fmt.Errorf("%w: Ssend: %T has no synchronous send", ErrInvalidArg, c)
	}
	return s.Ssend(ctx, BufOf(buf), dest, tag)
}

// Recv receives one message from source (or AnySource) with tag (or
// AnyTag) into buf and returns its Status; buf[:st.Count] holds it. A
// message longer than buf is discarded and an error wrapping ErrTruncated
// returned.
func Recv[T Number](ctx context.Context, c Comm, buf []T, source, tag int) (Status, error) {
	if source == ProcNull {
		return nullStatus, nil
	}
	if rc, ok := c.(RecvBufComm); ok {
		return rc.RecvBuf(ctx, BufOf(buf), source, tag)
	}
	b := AsBytes(buf)
	dt := DatatypeOf[T]()
	return c.Recv(ctx, dt, source, tag, func(n int) ([]byte, error) {
		if n > len(buf) {
			return nil, fmt.Errorf("%w: message of %d elements, buffer holds %d", ErrTruncated, n, len(buf))
		}
		return b[:n*dt.Size()], nil
	})
}

// RecvBufComm is implemented by backends that receive into a buffer known
// in advance faster than through an Into (comm/mpi: one MPI_Recv instead
// of a matched probe and a receive), which Recv uses. A message longer
// than buf is consumed and an error wrapping ErrTruncated returned.
type RecvBufComm interface {
	RecvBuf(ctx context.Context, buf Buf, source, tag int) (Status, error)
}

// RecvNew receives one message from source (or AnySource) with tag (or
// AnyTag) into a new slice of exactly the message's length.
func RecvNew[T Number](ctx context.Context, c Comm, source, tag int) ([]T, Status, error) {
	if source == ProcNull {
		return []T{}, nullStatus, nil // as Recv: no data, at once
	}
	var out []T
	st, err := c.Recv(ctx, DatatypeOf[T](), source, tag, func(n int) ([]byte, error) {
		out = make([]T, n)
		return AsBytes(out), nil
	})
	if err != nil {
		return nil, st, err
	}
	return out, st, nil
}

// Isend starts sending buf to dest with tag and returns at once. buf must
// not be modified until the Request completes.
func Isend[T Number](c Comm, buf []T, dest, tag int) (Request, error) {
	if dest == ProcNull {
		return doneRequest{nullStatus}, nil
	}
	return c.Isend(BufOf(buf), dest, tag)
}

// Irecv starts receiving a message from source (or AnySource) with tag (or
// AnyTag) into buf and returns at once. buf must not be touched until the
// Request completes; a message longer than buf completes it with an error
// wrapping ErrTruncated. The Status gives the received length.
func Irecv[T Number](c Comm, buf []T, source, tag int) (Request, error) {
	if source == ProcNull {
		return doneRequest{nullStatus}, nil
	}
	return c.Irecv(BufOf(buf), source, tag)
}
