package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"unsafe"

	"github.com/fxamacker/cbor/v2"
)

// Encode encodes v with pz's codec for arbitrary values, CBOR (RFC 8949)
// through github.com/fxamacker/cbor/v2. Exported struct fields, strings,
// numbers (complex ones too, as tagged pairs), maps, slices and pointers
// round-trip, nested in each other and in interfaces; channels and funcs
// do not.
//
// CBOR was chosen over encoding/gob because a collective ships one value per
// message: gob resends the type description with every new Encoder, which
// dominates small messages. BenchmarkCodec in this package measures both.
func Encode(v any) ([]byte, error) {
	b, err := marshal(v)
	if err != nil {
		return nil, fmt.Errorf("comm: encode %T: %w", v, err)
	}
	return b, nil
}

// decMode decodes values without the codec's default limits on
// collection sizes (131,072 elements) and nesting (32 levels), which are
// meant for untrusted input: ranks of one job trust each other, and a
// value is bounded by memory and the nesting limit of CBOR's decoder
// (65,535 levels). It is immutable once made.
var decMode = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		MaxNestedLevels:  65535,
		MaxArrayElements: math.MaxInt32,
		MaxMapPairs:      math.MaxInt32,
	}.DecMode()
	if err != nil {
		panic(err) // the options are constants within the library's bounds
	}
	return m
}()

// Decode decodes data produced by Encode into the value v points to.
func Decode(data []byte, v any) error {
	if err := unmarshal(data, v); err != nil {
		return fmt.Errorf("comm: decode into %T: %w", v, err)
	}
	return nil
}

// Encoded payloads start with one status byte so that a rank whose value
// cannot be encoded still takes part in the collective and the others learn
// why: payloadOK is followed by the CBOR value, payloadFailed by the error
// text.
const (
	payloadOK     byte = 0
	payloadFailed byte = 1
)

// encodePayload encodes v behind a status byte. It never fails: an
// encoding error becomes a payloadFailed message.
func encodePayload(v any) []byte {
	b, err := marshal(v)
	if err != nil {
		msg := fmt.Sprintf("cannot encode %T: %v", v, err)
		return append([]byte{payloadFailed}, msg...)
	}
	out := make([]byte, 1+len(b))
	out[0] = payloadOK
	copy(out[1:], b)
	return out
}

// decodePayload decodes a payload made by encodePayload on rank from.
func decodePayload[T any](call string, from int, p []byte) (T, error) {
	var v T
	if len(p) == 0 {
		return v, &ArgError{Op: call, Rank: from, Detail: "empty payload (a numeric call paired with a value call?)"}
	}
	if p[0] == payloadFailed {
		return v, &ArgError{Op: call, Rank: from, Detail: string(p[1:])}
	}
	if p[0] != payloadOK {
		return v, &ArgError{Op: call, Rank: from, Detail: fmt.Sprintf("bad payload status byte %d", p[0])}
	}
	if err := unmarshal(p[1:], &v); err != nil {
		return v, fmt.Errorf("comm: %s: decode value from rank %d into %T: %w", call, from, v, err)
	}
	return v, nil
}

// BcastValue sends root's v to every rank and returns it (root gets v back).
// Numeric slices ([]float64, []int32, named element types...) and numeric
// scalars travel as raw memory, a slice's length first; any other value is
// encoded with the codec (see Encode). The value of v on non-roots is
// ignored, but not its type: a rank whose T travels otherwise than root's
// (a string on root, an int here; []float64 against []int32) gets an
// *ArgError saying what root broadcasts, and stays in step with the
// others for the next call; root gets its value. int and int64 travel
// alike, as do uint and uint64.
func BcastValue[T any](ctx context.Context, c Comm, v T, root int) (T, error) {
	v, err := bcastValue(ctx, c, v, root)
	return v, valueErr("BcastValue", err)
}

// valueErr is the error of a value helper (call) that the collective
// under it returned: an *ArgError or a *MismatchError becomes call's, so
// that it names the call the program made (ScatterValues, not Scatter),
// with the same rank and detail. Any other error is returned as it is
// (asCall wraps it too).
func valueErr(call string, err error) error {
	var ae *ArgError
	var me *MismatchError
	switch {
	case errors.As(err, &ae):
		return &ArgError{Op: call, Rank: ae.Rank, Detail: ae.Detail}
	case errors.As(err, &me):
		return &MismatchError{Op: call, Detail: me.Detail}
	}
	return err
}

func bcastValue[T any](ctx context.Context, c Comm, v T, root int) (T, error) {
	var zero T
	rt := reflect.TypeFor[T]()
	path, dt := bcastPath(rt)
	rv := reflect.ValueOf(&v).Elem()
	// The header: root's path, its datatype and a scalar's bytes or the
	// length of what follows.
	var h [bcastHeader]byte
	var payload []byte
	me := c.Rank()
	if me == root {
		h[0], h[1] = path, byte(dt)
		switch path {
		case bcastScalar:
			copy(h[8:], unsafe.Slice((*byte)(unsafe.Pointer(&v)), dt.Size()))
		case bcastSlice:
			binary.NativeEndian.PutUint64(h[8:], uint64(rv.Len()))
		default:
			payload = encodePayload(v)
			binary.NativeEndian.PutUint64(h[8:], uint64(len(payload)))
		}
	}
	if err := c.Bcast(ctx, Buf{Bytes: h[:], Type: Uint8}, root); err != nil {
		return zero, err
	}
	rpath, rdt := h[0], Datatype(h[1])
	n := int(binary.NativeEndian.Uint64(h[8:]))
	same := rpath == path && (path == bcastEncoded || rdt == dt)
	switch rpath {
	case bcastScalar:
		if !same {
			break
		}
		if me != root {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), dt.Size()), h[8:])
		}
		return v, nil
	case bcastSlice:
		var b []byte
		switch {
		case !same:
			b = make([]byte, n*rdt.Size()) // root's data, to stay in step
		case me != root:
			rv = reflect.MakeSlice(rt, n, n)
			v = rv.Interface().(T)
			fallthrough
		case n > 0:
			b = unsafe.Slice((*byte)(rv.UnsafePointer()), n*dt.Size())
		}
		if n > 0 {
			if err := c.Bcast(ctx, Buf{Bytes: b, Type: rdt}, root); err != nil {
				return zero, err
			}
		}
		if same {
			return v, nil
		}
	case bcastEncoded:
		if me != root {
			payload = make([]byte, n)
		}
		if err := c.Bcast(ctx, Buf{Bytes: payload, Type: Uint8}, root); err != nil {
			return zero, err
		}
		if !same {
			break
		}
		if me == root && len(payload) > 0 && payload[0] == payloadOK {
			return v, nil // root keeps its own value; no need to decode it
		}
		return decodePayload[T]("BcastValue", root, payload)
	default:
		return zero, &ArgError{Op: "BcastValue", Rank: root, Detail: fmt.Sprintf("bad header (path %d): a BcastValue paired with another call?", rpath)}
	}
	return zero, &ArgError{Op: "BcastValue", Rank: me, Detail: fmt.Sprintf("root %d broadcasts %s and this rank's value is a %v: pass values of the same type on every rank", root, bcastWhat(rpath, rdt), rt)}
}

// BcastValue's paths: a numeric scalar travels in the header, a numeric
// slice as raw memory after it, anything else encoded after it.
const (
	bcastScalar  byte = 1
	bcastSlice   byte = 2
	bcastEncoded byte = 3
	// bcastHeader is the header's size: one broadcast of the same shape
	// whatever T is, so that a rank whose T differs from root's stays in
	// step with the others and learns it, instead of taking root's
	// length for its value (a string on root, an int elsewhere, gave 7).
	bcastHeader = 24
)

// bcastPath is how BcastValue moves a T.
func bcastPath(rt reflect.Type) (byte, Datatype) {
	if rt.Kind() == reflect.Slice {
		if dt := kindDatatype(rt.Elem().Kind()); dt.Valid() {
			return bcastSlice, dt
		}
	}
	if dt := kindDatatype(rt.Kind()); dt.Valid() {
		return bcastScalar, dt
	}
	return bcastEncoded, Invalid
}

// bcastWhat describes what root broadcasts, for an error.
func bcastWhat(path byte, dt Datatype) string {
	switch path {
	case bcastScalar:
		return "a " + dt.String()
	case bcastSlice:
		return "a slice of " + dt.String()
	}
	return "an encoded value (neither a number nor a slice of numbers)"
}

// SendValue encodes v and sends it to dest with tag. Pair it with
// RecvValue. A value that cannot be encoded is an *ArgError for the sender,
// and the receiver is told too (its RecvValue returns the same error), so
// that it does not wait for a message that will not come.
func SendValue[T any](ctx context.Context, c Comm, v T, dest, tag int) error {
	p := encodePayload(v)
	if err := c.Send(ctx, Buf{Bytes: p, Type: Uint8}, dest, tag); err != nil {
		return err
	}
	if p[0] == payloadFailed {
		return &ArgError{Op: "SendValue", Rank: c.Rank(), Detail: string(p[1:])}
	}
	return nil
}

// RecvValue receives a value sent with SendValue from source (or
// AnySource) with tag (or AnyTag) and decodes it.
func RecvValue[T any](ctx context.Context, c Comm, source, tag int) (T, Status, error) {
	var zero T
	var p []byte
	st, err := c.Recv(ctx, Uint8, source, tag, func(n int) ([]byte, error) {
		p = make([]byte, n)
		return p, nil
	})
	if err != nil {
		return zero, st, err
	}
	v, err := decodePayload[T]("RecvValue", st.Source, p)
	return v, st, err
}

// GatherValues collects every rank's v on root, in rank order. Other ranks
// get nil. A rank whose value cannot be encoded makes root (and itself)
// return an *ArgError naming it.
func GatherValues[T any](ctx context.Context, c Comm, v T, root int) ([]T, error) {
	return gatherValues(ctx, "GatherValues", c, v, root)
}

// gatherValues is GatherValues for call (GatherValues, ReduceValue),
// which its errors name.
func gatherValues[T any](ctx context.Context, call string, c Comm, v T, root int) ([]T, error) {
	mine := encodePayload(v)
	var all []byte
	counts, err := c.Gather(ctx, Buf{Bytes: mine, Type: Uint8}, root, func(n int) []byte {
		all = make([]byte, n)
		return all
	})
	if err != nil {
		return nil, valueErr(call, err)
	}
	if mine[0] != payloadOK {
		_, err := decodePayload[T](call, c.Rank(), mine)
		return nil, err
	}
	if counts == nil {
		return nil, nil
	}
	return decodeAll[T](call, all, counts)
}

// AllGatherValues collects every rank's v on every rank, in rank order.
func AllGatherValues[T any](ctx context.Context, c Comm, v T) ([]T, error) {
	return allGatherValues(ctx, "AllGatherValues", c, v)
}

// allGatherValues is AllGatherValues for call (AllGatherValues,
// AllReduceValue), which its errors name.
func allGatherValues[T any](ctx context.Context, call string, c Comm, v T) ([]T, error) {
	var all []byte
	counts, err := c.AllGather(ctx, Buf{Bytes: encodePayload(v), Type: Uint8}, func(n int) []byte {
		all = make([]byte, n)
		return all
	})
	if err != nil {
		return nil, valueErr(call, err)
	}
	return decodeAll[T](call, all, counts)
}

// decodeAll decodes consecutive payloads of counts[i] bytes.
func decodeAll[T any](call string, all []byte, counts []int) ([]T, error) {
	out := make([]T, len(counts))
	off := 0
	for i, n := range counts {
		v, err := decodePayload[T](call, i, all[off:off+n])
		if err != nil {
			return nil, err
		}
		out[i] = v
		off += n
	}
	return out, nil
}

// ScatterValues sends vals[i] from root to rank i and returns this rank's
// value. vals is ignored on non-roots; on root it has one entry per rank:
// with another number, every rank returns an *ArgError naming root
// (root's tells every rank so, as for a value that cannot be encoded).
func ScatterValues[T any](ctx context.Context, c Comm, vals []T, root int) (T, error) {
	var zero T
	send := Buf{Type: Uint8}
	var counts []int
	if c.Rank() == root {
		parts := make([][]byte, len(vals))
		for i, v := range vals {
			parts[i] = encodePayload(v)
		}
		if len(vals) != c.Size() {
			// Every rank waits for its part: send each the error.
			bad := append([]byte{payloadFailed}, fmt.Sprintf("%d values for %d ranks (root passes one per rank)", len(vals), c.Size())...)
			parts = make([][]byte, c.Size())
			for i := range parts {
				parts[i] = bad
			}
		}
		var flat []byte
		flat, counts = concat(parts)
		send.Bytes = flat
	}
	var mine []byte
	err := c.Scatter(ctx, send, counts, root, func(n int) []byte {
		mine = make([]byte, n)
		return mine
	})
	if err != nil {
		return zero, valueErr("ScatterValues", err)
	}
	return decodePayload[T]("ScatterValues", root, mine)
}

// AlltoallValues sends vals[i] to rank i and returns what every rank sent
// to this one, in rank order: the personalized all-to-all of any encodable
// values (mpi4py's alltoall). vals has one entry per rank.
func AlltoallValues[T any](ctx context.Context, c Comm, vals []T) ([]T, error) {
	if len(vals) != c.Size() {
		// Every rank must take part in the exchange, or the others wait:
		// send nothing, then report.
		counts := make([]int, c.Size())
		if _, err := c.Alltoall(ctx, Buf{Type: Uint8}, counts, func(int) []byte { return nil }); err != nil {
			return nil, err
		}
		return nil, &ArgError{Op: "AlltoallValues", Rank: c.Rank(), Detail: fmt.Sprintf("%d values for %d ranks", len(vals), c.Size())}
	}
	parts := make([][]byte, len(vals))
	for i, v := range vals {
		parts[i] = encodePayload(v)
	}
	flat, counts := concat(parts)
	var all []byte
	recvCounts, err := c.Alltoall(ctx, Buf{Bytes: flat, Type: Uint8}, counts, func(n int) []byte {
		all = make([]byte, n)
		return all
	})
	if err != nil {
		return nil, err
	}
	return decodeAll[T]("AlltoallValues", all, recvCounts)
}

// ReduceValue combines every rank's v with f on root and returns the
// result there; other ranks get the zero T. f is applied in rank order:
// f(f(f(v0, v1), v2), v3) with vi the value of rank i, so it need not be
// commutative. The values are gathered to root, so the cost grows with the
// number of ranks. A nil f is an *ArgError on the rank that passed it,
// which still takes part in the gather so that the others do not wait
// for it.
func ReduceValue[T any](ctx context.Context, c Comm, v T, f func(a, b T) T, root int) (T, error) {
	var zero T
	vals, err := gatherValues(ctx, "ReduceValue", c, v, root)
	if err == nil && f == nil {
		err = nilReduction("ReduceValue", c)
	}
	if err != nil || vals == nil {
		return zero, err
	}
	return foldValues(vals, f), nil
}

// nilReduction is the error of a value reduction given no function.
func nilReduction(call string, c Comm) error {
	return &ArgError{Op: call, Rank: c.Rank(), Detail: "the reduction function is nil"}
}

// AllReduceValue combines every rank's v with f and returns the result on
// every rank. As for ReduceValue, f is applied in rank order; every rank
// folds the same values in the same order, so a deterministic f gives the
// same result everywhere. A nil f is an *ArgError on the rank that passed
// it, which still takes part so that the others do not wait for it.
func AllReduceValue[T any](ctx context.Context, c Comm, v T, f func(a, b T) T) (T, error) {
	var zero T
	vals, err := allGatherValues(ctx, "AllReduceValue", c, v)
	if err == nil && f == nil {
		err = nilReduction("AllReduceValue", c)
	}
	if err != nil {
		return zero, err
	}
	return foldValues(vals, f), nil
}

func foldValues[T any](vals []T, f func(a, b T) T) T {
	acc := vals[0]
	for _, v := range vals[1:] {
		acc = f(acc, v)
	}
	return acc
}
