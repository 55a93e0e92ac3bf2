package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
)

// ProcNull is the null peer (MPI_PROC_NULL) of the typed point-to-point
// helpers (Send, Recv, RecvNew, Isend, Irecv, Sendrecv, SendrecvReplace): sending to
// it does nothing, receiving from it completes at once with no data; the
// requests of both (Isend, Irecv, SendInit, RecvInit) complete at once
// with the Status {Source: ProcNull, Tag: AnyTag, Count: 0}, which no
// real message has. A halo exchange at a domain's edge then needs no
// special case. Every Comm's probes take it as a source too (MPI's
// rule): Iprobe reports a message at once, Probe returns at once, both
// with that Status, and Improbe and Mprobe return NullMessage.
const ProcNull = -2

// nullStatus is the Status of a receive from ProcNull.
var nullStatus = Status{Source: ProcNull, Tag: AnyTag}

// NullStatus returns the Status of an operation on ProcNull: {Source:
// ProcNull, Tag: AnyTag, Count: 0}.
func NullStatus() Status { return nullStatus }

// NullMessage returns the Message that a matched probe of ProcNull
// returns (MPI_MESSAGE_NO_PROC): its Status is NullStatus, and its Recv
// completes at once with that Status without calling into.
func NullMessage() Message { return nullMessage{} }

type nullMessage struct{}

func (nullMessage) Status() Status                 { return nullStatus }
func (nullMessage) Recv(into Into) (Status, error) { return nullStatus, nil }

// doneRequest is a Request that completed at once.
type doneRequest struct{ st Status }

func (r doneRequest) Wait(context.Context) (Status, error) { return r.st, nil }
func (r doneRequest) Test() (bool, Status, error)          { return true, r.st, nil }

// Cancel implements Canceler: the request has completed, so it does
// nothing.
func (r doneRequest) Cancel() error { return nil }

var _ Canceler = doneRequest{}

// Sendrecv sends send to dest with sendTag and receives a message from
// source with recvTag into recv, at once (MPI_Sendrecv): the usual halo
// exchange, which cannot deadlock as a Send then a Recv on every rank can.
// Either peer may be ProcNull. send and recv must not share memory (an
// ArgError); SendrecvReplace exchanges one buffer.
func Sendrecv[T Number](ctx context.Context, c Comm, send []T, dest, sendTag int, recv []T, source, recvTag int) (Status, error) {
	sb, rb := BufOf(send), BufOf(recv)
	if Overlaps(sb.Bytes, rb.Bytes) {
		return Status{}, &ArgError{Op: "Sendrecv", Rank: c.Rank(), Detail: "send and receive buffers overlap (SendrecvReplace exchanges one buffer)"}
	}
	if sc, ok := c.(SendrecvComm); ok && dest != ProcNull && source != ProcNull {
		return sc.SendrecvBuf(ctx, sb, dest, sendTag, rb, source, recvTag)
	}
	return sendrecvSplit(ctx, c, "Sendrecv", send, dest, sendTag, recv, source, recvTag)
}

// sendrecvSplit is Sendrecv (or SendrecvReplace, as call says: its
// errors name call) as an Isend, a Recv and a Wait, with the arguments
// checked first so that an invalid one is call's, not the Isend's or
// Recv's.
func sendrecvSplit[T Number](ctx context.Context, c Comm, call string, send []T, dest, sendTag int, recv []T, source, recvTag int) (Status, error) {
	if err := checkSendrecv(c, call, BufOf(send), dest, sendTag, BufOf(recv), source, recvTag); err != nil {
		return Status{}, err
	}
	req, err := Isend(c, send, dest, sendTag)
	if err != nil {
		return Status{}, fmt.Errorf("comm: %s: %w", call, err)
	}
	st, rerr := Recv(ctx, c, recv, source, recvTag)
	if _, werr := req.Wait(ctx); werr != nil && rerr == nil {
		rerr = werr
	}
	if rerr != nil {
		return st, fmt.Errorf("comm: %s: %w", call, rerr)
	}
	return st, nil
}

// checkSendrecv validates the arguments of call (Sendrecv,
// SendrecvReplace) as the backends' own SendrecvBuf does: the buffers,
// the tags (AnyTag for the receive) and the peers other than ProcNull
// (AnySource for the receive).
func checkSendrecv(c Comm, call string, send Buf, dest, sendTag int, recv Buf, source, recvTag int) error {
	me, n := c.Rank(), c.Size()
	errs := []error{CheckBuf(call, me, send), CheckTag(call, me, sendTag, false),
		CheckBuf(call, me, recv), CheckTag(call, me, recvTag, true)}
	if dest != ProcNull {
		errs = append(errs, CheckPeer(call, me, dest, n, false))
	}
	if source != ProcNull {
		errs = append(errs, CheckPeer(call, me, source, n, true))
	}
	return FirstErr(errs...)
}

// SendrecvComm is implemented by backends with a native combined send
// and receive (comm/mpi: one MPI_Sendrecv), which Sendrecv uses when
// neither peer is ProcNull. recv takes a message of at most recv.Len()
// elements of recv.Type; a longer one is consumed and an error wrapping
// ErrTruncated returned, as Recv does. send and recv must not overlap.
type SendrecvComm interface {
	SendrecvBuf(ctx context.Context, send Buf, dest, sendTag int, recv Buf, source, recvTag int) (Status, error)
}

// SendrecvReplaceComm is implemented by backends with a native
// exchange of one buffer (MPI_Sendrecv_replace; comm/local and comm/mpi
// send a copy of buf through their SendrecvBuf), which SendrecvReplace
// uses when neither peer is ProcNull: its errors name SendrecvReplace.
// buf takes a message of at most buf.Len() elements of buf.Type, as
// SendrecvBuf's recv does.
type SendrecvReplaceComm interface {
	SendrecvReplaceBuf(ctx context.Context, buf Buf, dest, sendTag, source, recvTag int) (Status, error)
}

// SendrecvReplace sends buf to dest and receives a message from source
// into buf (MPI_Sendrecv_replace); the message received may be at most
// len(buf) long. Either peer may be ProcNull. Its errors name
// SendrecvReplace.
func SendrecvReplace[T Number](ctx context.Context, c Comm, buf []T, dest, sendTag, source, recvTag int) (Status, error) {
	if rc, ok := c.(SendrecvReplaceComm); ok && dest != ProcNull && source != ProcNull {
		return rc.SendrecvReplaceBuf(ctx, BufOf(buf), dest, sendTag, source, recvTag)
	}
	out := append([]T(nil), buf...)
	return sendrecvSplit(ctx, c, "SendrecvReplace", out, dest, sendTag, buf, source, recvTag)
}

// Scan returns the inclusive prefix reduction (MPI_Scan): on rank r, op
// applied element-wise to the send slices of ranks 0..r, in rank order.
// Every rank passes the same length. Both of pz's backends compute it
// natively (ScanComm), folding from the left in rank order; on another
// Comm it gathers every rank's contribution on every rank (one AllGather)
// and folds locally, with the same bits, at a cost that grows with
// ranks x length.
func Scan[T Number](ctx context.Context, c Comm, send []T, op Op) ([]T, error) {
	return scan(ctx, c, "Scan", send, op, true)
}

// Exscan returns the exclusive prefix reduction (MPI_Exscan): on rank r > 0,
// op over the send slices of ranks 0..r-1; nil on rank 0 (MPI leaves it
// undefined).
func Exscan[T Number](ctx context.Context, c Comm, send []T, op Op) ([]T, error) {
	return scan(ctx, c, "Exscan", send, op, false)
}

// ScanComm is implemented by backends with a native prefix reduction
// (comm/local, comm/mpi), which Scan and Exscan use: recv receives the
// inclusive (or, with exclusive, exclusive) prefix of send, folded from
// the left in rank order ((s0 op s1) op s2 ...), the bits the fallback
// gives. On rank 0 an exclusive scan leaves recv untouched. send and recv
// may be the same buffer. A backend that cannot do op on send's type
// natively returns an error wrapping ErrUnsupported before any
// communication, on every rank alike, and the fallback runs.
type ScanComm interface {
	ScanBuf(ctx context.Context, send, recv Buf, op Op, exclusive bool) error
}

func scan[T Number](ctx context.Context, c Comm, call string, send []T, op Op, inclusive bool) ([]T, error) {
	dt := DatatypeOf[T]()
	if sc, ok := c.(ScanComm); ok {
		out := make([]T, len(send))
		err := sc.ScanBuf(ctx, BufOf(send), BufOf(out), op, !inclusive)
		switch {
		case errors.Is(err, errors.ErrUnsupported): // the fallback below
		case err != nil:
			return nil, err
		case !inclusive && c.Rank() == 0:
			return nil, nil // MPI leaves it undefined; rank 0 took part
		default:
			return out, nil
		}
	}
	if !op.Supports(dt) {
		// Every rank checks the same op and type: all fail alike.
		return nil, &ArgError{Op: call, Rank: c.Rank(), Detail: fmt.Sprintf("reduction %v is not defined on %v", op, dt)}
	}
	parts, err := AllGather(ctx, c, send)
	if err != nil {
		return nil, fmt.Errorf("comm: %s: %w", call, err)
	}
	for r, p := range parts {
		if len(p) != len(send) {
			return nil, &MismatchError{Op: call, Detail: fmt.Sprintf("count: rank %d has %d, rank %d has %d", c.Rank(), len(send), r, len(p))}
		}
	}
	last := c.Rank()
	if !inclusive {
		last--
	}
	if last < 0 {
		return nil, nil
	}
	out := append([]T(nil), parts[0]...)
	for r := 1; r <= last; r++ {
		if err := ReduceInto(op, dt, AsBytes(out), AsBytes(parts[r])); err != nil {
			return nil, fmt.Errorf("comm: %s: %w", call, err)
		}
	}
	return out, nil
}

// ReduceScatterBlock reduces send element-wise across ranks with op and
// gives rank r block r of the result (MPI_Reduce_scatter_block): send has
// Size blocks of equal length on every rank.
func ReduceScatterBlock[T Number](ctx context.Context, c Comm, send []T, op Op) ([]T, error) {
	n := c.Size()
	if rc, ok := c.(ReduceScatterComm); ok {
		out := make([]T, len(send)/n)
		err := rc.ReduceScatterBlockBuf(ctx, BufOf(send), BufOf(out), op)
		if !errors.Is(err, errors.ErrUnsupported) {
			if err != nil {
				return nil, err
			}
			return out, nil
		}
	}
	counts := make([]int, n)
	for r := range counts {
		counts[r] = len(send) / n
	}
	if len(send)%n != 0 {
		counts = nil // reported after the reduction, on every rank
	}
	return reduceScatter(ctx, c, "ReduceScatterBlock", send, counts, op)
}

// ReduceScatterComm is implemented by backends with a native
// reduce-scatter of equal blocks (comm/mpi: MPI_Reduce_scatter_block),
// which ReduceScatterBlock uses: send holds Size blocks of recv's length,
// and rank r receives block r of the element-wise reduction. A backend
// that cannot do the call natively returns an error wrapping
// ErrUnsupported before any communication, and the fallback (an
// AllReduce, then this rank's block) runs.
type ReduceScatterComm interface {
	ReduceScatterBlockBuf(ctx context.Context, send, recv Buf, op Op) error
}

// ReduceScatter reduces send element-wise across ranks with op and gives
// rank r the counts[r] elements after those of ranks 0..r-1
// (MPI_Reduce_scatter). Every rank passes the same counts, which sum to
// len(send); counts that differ across ranks (even with the same sum,
// where the blocks would overlap) are a *MismatchError on every rank
// naming two ranks' counts. That check is a small AllReduce of the
// counts' hash beside the reduction.
func ReduceScatter[T Number](ctx context.Context, c Comm, send []T, counts []int, op Op) ([]T, error) {
	return reduceScatter(ctx, c, "ReduceScatter", send, counts, op)
}

// agreeCounts checks that every rank passed the same counts: each rank
// contributes a hash h of its counts as (h, -h) to a Max AllReduce,
// equal everywhere only if every hash is; on a difference, every rank
// (they all see it) gathers the counts to name the first that differ.
func agreeCounts(ctx context.Context, c Comm, call string, counts []int) error {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(counts)))
	for _, k := range counts {
		b = binary.LittleEndian.AppendUint64(b, uint64(k))
	}
	h := fnv.New64a() // the same on every rank and process
	h.Write(b)
	x := int64(h.Sum64() >> 1) // -x never overflows
	got := make([]int64, 2)
	if err := AllReduceTo(ctx, c, got, []int64{x, -x}, Max); err != nil {
		return fmt.Errorf("comm: %s: comparing the ranks' counts: %w", call, err)
	}
	if got[0] == -got[1] {
		return nil
	}
	all, err := AllGatherValues(ctx, c, counts)
	if err != nil {
		return fmt.Errorf("comm: %s: the ranks' counts differ; gathering them: %w", call, err)
	}
	for r := range all {
		if !slices.Equal(all[r], all[0]) {
			return &MismatchError{Op: call, Detail: fmt.Sprintf("counts: rank 0 passed %v, rank %d passed %v", all[0], r, all[r])}
		}
	}
	return &MismatchError{Op: call, Detail: "counts: the ranks' hashes differ"}
}

// asCall returns err, the error of a collective that call is built on,
// as call's own when it is an *ArgError or a *MismatchError: the user
// called call, and both backends (one native, one built on AllReduce)
// then report the same Op.
func asCall(call string, err error) error {
	if e := valueErr(call, err); e != err {
		return e
	}
	return fmt.Errorf("comm: %s: %w", call, err)
}

func reduceScatter[T Number](ctx context.Context, c Comm, call string, send []T, counts []int, op Op) ([]T, error) {
	all := make([]T, len(send))
	if err := AllReduceTo(ctx, c, all, send, op); err != nil {
		return nil, asCall(call, err)
	}
	if call == "ReduceScatter" {
		// ReduceScatterBlock's counts derive from len(send), which
		// the reduction compared.
		if err := agreeCounts(ctx, c, call, counts); err != nil {
			return nil, err
		}
	}
	if call == "ReduceScatterBlock" && counts == nil {
		return nil, &ArgError{Op: call, Rank: c.Rank(), Detail: fmt.Sprintf("%d elements do not split into %d equal blocks", len(send), c.Size())}
	}
	if len(counts) != c.Size() {
		return nil, &ArgError{Op: call, Rank: c.Rank(), Detail: fmt.Sprintf("%d counts for %d ranks (pass one count per rank; ReduceScatterBlock splits send evenly)", len(counts), c.Size())}
	}
	off, total := 0, 0
	for r, k := range counts {
		if k < 0 {
			return nil, &ArgError{Op: call, Rank: c.Rank(), Detail: fmt.Sprintf("count %d of rank %d is negative", k, r)}
		}
		if r < c.Rank() {
			off += k
		}
		total += k
	}
	if total != len(send) {
		return nil, &ArgError{Op: call, Rank: c.Rank(), Detail: fmt.Sprintf("counts sum to %d, send has %d elements", total, len(send))}
	}
	// Never nil, also for no elements, as the native ReduceScatterBlock's.
	out := make([]T, counts[c.Rank()])
	copy(out, all[off:])
	return out, nil
}
