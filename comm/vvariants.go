package comm

import (
	"context"
	"fmt"
	"slices"
	"sort"
)

// The v-variants (MPI_Gatherv, MPI_Allgatherv, MPI_Scatterv, MPI_Alltoallv):
// parts of given counts placed at given displacements of a buffer the
// caller owns, in any order and with gaps, instead of back to back in a
// buffer the call allocates. They run on the collectives every backend has
// (Gather, AllGather, Scatter, Alltoall); when the displacements lay the
// parts back to back from 0 the caller's buffer is used directly, otherwise
// the parts go through a scratch buffer unless they lie in rank order
// (gaps allowed), which the call receives in the caller's buffer and moves
// out in place.
//
// Counts must agree: what a rank sends to another is what the other
// expects (counts[i] on the receiving side). A part of another size is
// reported, as a *MismatchError naming the sender, on the rank that
// expected it. A layout that is invalid (wrong length, a negative count or
// displacement, a part outside the buffer, receive parts that overlap) is
// an *ArgError on the rank that passed it; that rank still takes part in
// the collective, sending nothing, so no rank waits for ever and the ranks
// that expected its data get the MismatchError.

// checkLayout validates the counts and displacements of a v-variant over a
// buffer of n elements; recv also refuses overlapping non-empty parts (a
// send layout may overlap, as in MPI).
func checkLayout(call string, rank, size int, counts, displs []int, n int, recv bool) error {
	bad := func(format string, args ...any) error {
		return &ArgError{Op: call, Rank: rank, Detail: fmt.Sprintf(format, args...)}
	}
	if len(counts) != size || len(displs) != size {
		return bad("%d counts and %d displacements for %d ranks", len(counts), len(displs), size)
	}
	for i := range size {
		switch {
		case counts[i] < 0:
			return bad("negative count %d for rank %d", counts[i], i)
		case displs[i] < 0:
			return bad("negative displacement %d for rank %d", displs[i], i)
		case displs[i] > n || counts[i] > n-displs[i]:
			return bad("rank %d's part [%d, %d) is outside the buffer of %d elements", i, displs[i], displs[i]+counts[i], n)
		}
	}
	if !recv {
		return nil
	}
	order := make([]int, 0, size)
	for i := range size {
		if counts[i] > 0 {
			order = append(order, i)
		}
	}
	sort.Slice(order, func(a, b int) bool { return displs[order[a]] < displs[order[b]] })
	for k := 1; k < len(order); k++ {
		p, q := order[k-1], order[k]
		if displs[p]+counts[p] > displs[q] {
			return bad("the parts of ranks %d [%d, %d) and %d [%d, %d) overlap", p, displs[p], displs[p]+counts[p], q, displs[q], displs[q]+counts[q])
		}
	}
	return nil
}

// isPart reports whether s is exactly part i of buf under a valid layout:
// the same memory as buf[displs[i]:displs[i]+counts[i]], not empty.
func isPart[T Number](s, buf []T, counts, displs []int, i int) bool {
	return len(s) > 0 && len(s) == counts[i] && &s[0] == &buf[displs[i]]
}

// aliasErr is the *ArgError of a v-variant whose buffers share memory
// other than in the in-place form the call allows.
func aliasErr(call string, rank int, what, fix string) error {
	return &ArgError{Op: call, Rank: rank, Detail: what + " (" + fix + ")"}
}

// sendAlias checks the send buffer of Gatherv's root or of Allgatherv
// against recv (a valid layout): send may be this rank's own part of recv,
// the in-place form (like MPI_IN_PLACE), which is then copied so that
// the collective reads it whole whatever it writes into recv; any other
// sharing of memory is an *ArgError, as the peers' parts would overwrite
// send while it is read (on comm/local by the other ranks, which read it
// in place). It returns the send buffer to use.
func sendAlias[T Number](call string, me int, send, recv []T, counts, displs []int) ([]T, error) {
	if !Overlaps(AsBytes(send), AsBytes(recv)) {
		return send, nil
	}
	if isPart(send, recv, counts, displs, me) {
		return slices.Clone(send), nil
	}
	return send, aliasErr(call, me, fmt.Sprintf("send overlaps recv other than as this rank's own part recv[%d:%d]", displs[me], displs[me]+counts[me]),
		"pass exactly that part as send for the in-place form, or use separate buffers")
}

// packed reports whether displs lay the parts back to back from 0.
func packed(counts, displs []int) bool {
	at := 0
	for i, n := range counts {
		if displs[i] != at {
			return false
		}
		at += n
	}
	return true
}

func sum(counts []int) int {
	s := 0
	for _, n := range counts {
		s += n
	}
	return s
}

// sameCounts reports the first part whose size differs from the expected.
func sameCounts(call string, got, want []int, from string) error {
	for i := range want {
		if got[i] != want[i] {
			return &MismatchError{Op: call, Detail: fmt.Sprintf("rank %d sent %d elements %s, %d were expected", i, got[i], from, want[i])}
		}
	}
	return nil
}

// inOrder reports whether the parts lie in rank order (each at or after
// the end of the one before): then the collective can receive them back to
// back at the start of the caller's buffer and spread moves them out to
// their displacements in place, with no scratch buffer.
func inOrder(counts, displs []int) bool {
	end := 0
	for i, n := range counts {
		if n == 0 {
			continue
		}
		if displs[i] < end {
			return false
		}
		end = displs[i] + n
	}
	return true
}

// gaps returns the elements of buf below the total of counts that no part
// covers (parts in rank order): receiving back to back overwrites them,
// and restore puts them back after spread. It returns ok false when they
// are more than an eighth of the total, where scratch costs less.
func gaps[T Number](buf []T, counts, displs []int) (saved []T, ok bool) {
	total, end := sum(counts), 0
	for i, n := range counts {
		if n == 0 {
			continue
		}
		if lo, hi := end, min(displs[i], total); lo < hi {
			saved = append(saved, buf[lo:hi]...)
		}
		end = displs[i] + n
	}
	return saved, len(saved) <= total/8
}

// restore writes saved (from gaps) back into the gaps below the total.
func restore[T Number](buf, saved []T, counts, displs []int) {
	total, end := sum(counts), 0
	for i, n := range counts {
		if n == 0 {
			continue
		}
		if lo, hi := end, min(displs[i], total); lo < hi {
			saved = saved[copy(buf[lo:hi], saved):]
		}
		end = displs[i] + n
	}
}

// spread moves parts received back to back at the start of buf out to
// their displacements, last part first (each moves right, never over a
// part still to move).
func spread[T Number](buf []T, counts, displs []int) {
	off := sum(counts)
	for i := len(counts) - 1; i >= 0; i-- {
		off -= counts[i]
		if counts[i] > 0 && displs[i] != off {
			copy(buf[displs[i]:displs[i]+counts[i]], buf[off:off+counts[i]])
		}
	}
}

// inPlace reports whether a receive layout can take the in-place path,
// and the gap elements it must restore.
func inPlace[T Number](buf []T, counts, displs []int) (saved []T, ok bool) {
	if !inOrder(counts, displs) {
		return nil, false
	}
	return gaps(buf, counts, displs)
}

// place copies the parts of flat (back to back, sizes counts) to displs
// of dst.
func place[T Number](dst, flat []T, counts, displs []int) {
	at := 0
	for i, n := range counts {
		copy(dst[displs[i]:displs[i]+n], flat[at:at+n])
		at += n
	}
}

// pack copies the parts of src at displs (sizes counts) back to back.
func pack[T Number](src []T, counts, displs []int) []T {
	out := make([]T, 0, sum(counts))
	for i, n := range counts {
		out = append(out, src[displs[i]:displs[i]+n]...)
	}
	return out
}

// receiver is the receive side of a v-variant on one rank: the caller's
// buffer and layout, and how the parts reach it: received back to back in
// the buffer and spread in place when they lie in rank order (the gaps
// they cover saved and restored), through scratch otherwise.
type receiver[T Number] struct {
	recv           []T
	counts, displs []int
	saved          []T
	direct         bool
	want           int // elements expected in all
	flat           []T // where the collective put them
}

// newReceiver prepares the receive into recv; use is false when this rank
// receives nothing or its layout is invalid (then scratch takes whatever
// arrives).
func newReceiver[T Number](recv []T, counts, displs []int, use bool) *receiver[T] {
	r := &receiver[T]{recv: recv, counts: counts, displs: displs}
	if use {
		r.saved, r.direct = inPlace(recv, counts, displs)
		r.want = sum(counts)
	}
	return r
}

// alloc is the collective's Alloc: the caller's buffer when the parts go
// there directly and the total is as expected, else scratch.
func (r *receiver[T]) alloc(n int) []byte {
	if r.direct && n == r.want {
		r.flat = r.recv[:n]
	} else {
		r.flat = make([]T, n)
	}
	return AsBytes(r.flat)
}

// finish checks the part sizes that arrived (got) against the layout and
// puts the parts at their displacements.
func (r *receiver[T]) finish(call string, got []int, from string) error {
	if err := sameCounts(call, got, r.counts, from); err != nil {
		return err
	}
	if r.direct {
		spread(r.recv, r.counts, r.displs)
		restore(r.recv, r.saved, r.counts, r.displs)
	} else {
		place(r.recv, r.flat, r.counts, r.displs)
	}
	return nil
}

// Gatherv gathers every rank's send on root: rank i's part lands at
// recv[displs[i]:displs[i]+counts[i]] (MPI_Gatherv). recv, counts and
// displs are used on root only (pass nil elsewhere); elements of recv
// outside the parts are left as they were. On root, send may be root's own
// part of recv (the in-place form, like MPI_IN_PLACE); other overlap of
// send and recv is an *ArgError on root (which still sends its part).
//
// Errors are root's alone (the layout is root's): a bad layout is an
// *ArgError, a rank whose len(send) is not its count a *MismatchError
// naming it; the other ranks return nil, having sent their part. Datatype
// and root must still agree on every rank (a *MismatchError on all).
func Gatherv[T Number](ctx context.Context, c Comm, send, recv []T, counts, displs []int, root int) error {
	me := c.Rank()
	var lerr error
	if me == root {
		lerr = checkLayout("Gatherv", me, c.Size(), counts, displs, len(recv), true)
		if lerr == nil {
			send, lerr = sendAlias("Gatherv", me, send, recv, counts, displs)
		}
	}
	r := newReceiver(recv, counts, displs, lerr == nil && me == root)
	got, err := c.Gather(ctx, BufOf(send), root, r.alloc)
	if err != nil || me != root {
		return err
	}
	if lerr != nil {
		return lerr
	}
	return r.finish("Gatherv", got, "to root")
}

// Allgatherv gathers every rank's send on every rank: rank i's part lands
// at recv[displs[i]:displs[i]+counts[i]] (MPI_Allgatherv). Every rank
// passes the layout of its own recv. send may be this rank's own part of
// recv (the in-place form, like MPI_IN_PLACE); other overlap of send and
// recv is an *ArgError on that rank (which still sends its part).
//
// A bad layout is an *ArgError on the rank that passed it only. A rank
// that receives a part of another size than its counts say gets a
// *MismatchError naming the sender (when ranks disagree on one rank's
// count, every rank whose counts differ from that rank's len(send)).
func Allgatherv[T Number](ctx context.Context, c Comm, send, recv []T, counts, displs []int) error {
	lerr := checkLayout("Allgatherv", c.Rank(), c.Size(), counts, displs, len(recv), true)
	if lerr == nil {
		send, lerr = sendAlias("Allgatherv", c.Rank(), send, recv, counts, displs)
	}
	r := newReceiver(recv, counts, displs, lerr == nil)
	got, err := c.AllGather(ctx, BufOf(send), r.alloc)
	if err != nil {
		return err
	}
	if lerr != nil {
		return lerr
	}
	return r.finish("Allgatherv", got, "to all")
}

// Scatterv sends send[displs[i]:displs[i]+counts[i]] from root to rank i,
// which receives it into recv: len(recv) is the count it expects
// (MPI_Scatterv's recvcount). send, counts and displs are used on root
// only; the parts may overlap. On root, recv may be root's own part of
// send (the in-place form, like MPI_IN_PLACE: it is left as it is);
// other overlap of recv and send is an *ArgError on root, which still
// sends the others their parts.
//
// A bad layout is an *ArgError on root only, which then sends nothing; a
// rank whose part has another length than len(recv) (so also every rank
// expecting data from a root whose layout was bad) gets a *MismatchError
// naming root. The other ranks return nil.
func Scatterv[T Number](ctx context.Context, c Comm, send []T, counts, displs []int, recv []T, root int) error {
	me, size := c.Rank(), c.Size()
	var lerr error
	var flat []T
	var sc []int
	scratch := false // root receives its own part into scratch, not recv
	if me == root {
		sc = counts
		if lerr = checkLayout("Scatterv", me, size, counts, displs, len(send), false); lerr != nil {
			sc = make([]int, size) // send nothing: the receivers see the mismatch
		} else {
			if packed(counts, displs) {
				flat = send[:sum(counts)]
			} else {
				flat = pack(send, counts, displs)
			}
			// recv may be root's own part of send, the in-place form:
			// the part is there already. Other sharing of memory is
			// root's error; the others still get their parts.
			if Overlaps(AsBytes(send), AsBytes(recv)) {
				scratch = true
				if !isPart(recv, send, counts, displs, me) {
					lerr = aliasErr("Scatterv", me, fmt.Sprintf("recv overlaps send other than as root's own part send[%d:%d]", displs[me], displs[me]+counts[me]),
						"pass exactly that part as recv for the in-place form, or use separate buffers")
				}
			}
		}
	}
	var got []T
	err := c.Scatter(ctx, BufOf(flat), sc, root, func(n int) []byte {
		if n == len(recv) && !scratch {
			got = recv
		} else {
			got = make([]T, n)
		}
		return AsBytes(got)
	})
	if err != nil {
		return err
	}
	if lerr != nil {
		return lerr
	}
	if len(got) != len(recv) {
		return &MismatchError{Op: "Scatterv", Detail: fmt.Sprintf("root %d sent %d elements to rank %d, which expected %d (len(recv))", root, len(got), me, len(recv))}
	}
	return nil
}

// Alltoallv sends send[sdispls[i]:sdispls[i]+scounts[i]] to rank i and
// receives rank i's part into recv[rdispls[i]:rdispls[i]+rcounts[i]]
// (MPI_Alltoallv). Send parts may overlap; receive parts may not. send
// and recv may be the same slice with the same counts and displacements
// (the in-place form, like MPI_IN_PLACE); other overlap of send and recv
// is an *ArgError on that rank, which still sends its parts.
//
// A bad layout (send or receive) is an *ArgError on the rank that passed
// it only; with a bad send layout that rank sends nothing. A rank that
// receives a part of another size than its rcounts say (so also from a
// rank whose send layout was bad) gets a *MismatchError naming the
// sender. The other ranks return nil.
func Alltoallv[T Number](ctx context.Context, c Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) error {
	me, size := c.Rank(), c.Size()
	serr := checkLayout("Alltoallv", me, size, scounts, sdispls, len(send), false)
	rerr := checkLayout("Alltoallv", me, size, rcounts, rdispls, len(recv), true)
	if serr == nil && rerr == nil && Overlaps(AsBytes(send), AsBytes(recv)) {
		// The in-place form (like MPI_IN_PLACE): one buffer and one
		// layout for both, read whole before any part arrives. Other
		// sharing of memory is this rank's error: it still sends, and
		// receives into scratch, so the others get their parts.
		if InPlace(BufOf(send), BufOf(recv)) && slices.Equal(scounts, rcounts) && slices.Equal(sdispls, rdispls) {
			send = slices.Clone(send)
		} else {
			rerr = aliasErr("Alltoallv", me, "send and recv overlap",
				"for the in-place form pass the same slice as both with the same counts and displacements; otherwise use separate buffers")
		}
	}
	var flat []T
	sc := scounts
	switch {
	case serr != nil:
		sc = make([]int, size) // send nothing: the receivers see the mismatch
	case packed(scounts, sdispls):
		flat = send[:sum(scounts)]
	default:
		flat = pack(send, scounts, sdispls)
	}
	r := newReceiver(recv, rcounts, rdispls, rerr == nil)
	recvCounts, err := c.Alltoall(ctx, BufOf(flat), sc, r.alloc)
	if err != nil {
		return err
	}
	if err := FirstErr(serr, rerr); err != nil {
		return err
	}
	return r.finish("Alltoallv", recvCounts, "to this rank")
}
