package commtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pzgo/pz/comm"
)

// standardCases check the point-to-point and request semantics of the
// MPI standard (MPI-4.0, chapter 3: non-overtaking, wildcards, probes,
// zero-length messages, truncation; the request sets of 3.7.5 with
// inactive and completed requests and empty sets) and Split's colours
// and keys (chapter 7), as the MPICH and Open MPI test suites check
// them.
func standardCases() []Case {
	return []Case{
		{"P2P/NonOvertaking", nonOvertakingCase},
		{"P2P/PostedOrder", postedOrderCase},
		{"P2P/ProbeOrder", probeOrderCase},
		{"P2P/ZeroLength", zeroLengthCase},
		{"P2P/SelfSend", selfSendCase},
		{"P2P/SendrecvReplace", sendrecvReplaceCase},
		{"RequestSets/Empty", emptySetsCase},
		{"RequestSets/Completed", completedSetsCase},
		{"RequestSets/Errors", setErrorsCase},
		{"RequestSets/Context", setContextCase},
		{"Split/Colors", splitColorsCase},
		{"Misuse/SplitColor", misuseSplitColorCase},
	}
}

// orderSizes are the lengths (float64s) of a sequence of messages on one
// source and tag: empty, small (buffered by every backend) and past 4 KiB
// (comm/local hands those over by reference, MPI libraries past their
// eager limit by rendezvous), mixed, so that a backend that sends the
// protocols along different paths could let one overtake another.
var orderSizes = []int{0, 1, 20000, 0, 3, 20000, 1, 600, 0, 20000, 2}

// orderMsg is message i of a sequence: element j is i*100000+j, so that
// both the message and its length are checked.
func orderMsg(i int) []float64 {
	out := make([]float64, orderSizes[i])
	for j := range out {
		out[j] = float64(i*100000 + j)
	}
	return out
}

// checkOrderMsg checks that got (with its Status) is message i of the
// sequence from src with tag.
func checkOrderMsg(what string, i int, got []float64, st comm.Status, src, tag int) error {
	if st.Source != src || st.Tag != tag || st.Count != orderSizes[i] {
		return fmt.Errorf("%s: message %d: status %+v, want source %d tag %d count %d (a message overtook another)", what, i, st, src, tag, orderSizes[i])
	}
	return sameSlice(fmt.Sprintf("%s: message %d", what, i), got[:st.Count], orderMsg(i))
}

// nonOvertakingCase: messages from one sender on one tag are received in
// the order they were sent (MPI-4.0 3.5, "Order"), whatever their sizes,
// whether the receives name the source and tag or use the wildcards, and
// whether the sender used Isend or a blocking Send. Rank 0 sends, the
// last rank receives (at one rank, the rank itself).
func nonOvertakingCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	src, dst := 0, n-1
	const tag = 11
	var sends []comm.Request
	if me == src {
		for i := range orderSizes {
			r, err := comm.Isend(c, orderMsg(i), dst, tag)
			if err != nil {
				return fmt.Errorf("Isend %d: %w", i, err)
			}
			sends = append(sends, r)
		}
	}
	if me == dst {
		buf := make([]float64, 20000)
		for i := range orderSizes {
			source, t := src, tag
			switch i % 3 {
			case 1:
				source = comm.AnySource
			case 2:
				source, t = comm.AnySource, comm.AnyTag
			}
			st, err := comm.Recv(ctx, c, buf, source, t)
			if err != nil {
				return fmt.Errorf("Recv %d (source %d, tag %d): %w", i, source, t, err)
			}
			if err := checkOrderMsg("Isend then Recv", i, buf, st, src, tag); err != nil {
				return err
			}
		}
	}
	if _, err := comm.WaitAll(ctx, sends); err != nil {
		return fmt.Errorf("the Isends: %w", err)
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	// Blocking sends into receives posted before them (a Send past 4
	// KiB, or any Send to the rank itself under MPICH, waits for its
	// receive).
	if me == dst {
		bufs := make([][]float64, len(orderSizes))
		reqs := make([]comm.Request, len(orderSizes))
		for i := range orderSizes {
			bufs[i] = make([]float64, 20000)
			r, err := comm.Irecv(c, bufs[i], src, tag+1)
			if err != nil {
				return fmt.Errorf("Irecv %d: %w", i, err)
			}
			reqs[i] = r
		}
		if me == src {
			for i := range orderSizes {
				if err := comm.Send(ctx, c, orderMsg(i), dst, tag+1); err != nil {
					return fmt.Errorf("Send %d: %w", i, err)
				}
			}
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		// Waited for last to first: each request still gets its own
		// message, in posting order.
		for i := len(reqs) - 1; i >= 0; i-- {
			st, err := reqs[i].Wait(ctx)
			if err != nil {
				return fmt.Errorf("Irecv %d: %w", i, err)
			}
			if err := checkOrderMsg("Send into posted Irecvs", i, bufs[i], st, src, tag+1); err != nil {
				return err
			}
		}
		return c.Barrier(ctx)
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if me == src {
		for i := range orderSizes {
			if err := comm.Send(ctx, c, orderMsg(i), dst, tag+1); err != nil {
				return fmt.Errorf("Send %d: %w", i, err)
			}
		}
	}
	return c.Barrier(ctx)
}

// postedOrderCase: receives posted in succession that could both match a
// message take messages in the order they were posted (MPI-4.0 3.5: the
// second receive cannot take a message the first, still pending, matches),
// whatever mixture of wildcards and named sources and tags they use.
func postedOrderCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	src, dst := n-1, 0
	const tag = 31
	type posted struct {
		source, tag int
	}
	// Every receive matches every message: the messages go to them in
	// posting order.
	pattern := []posted{{comm.AnySource, comm.AnyTag}, {src, tag}, {comm.AnySource, tag}, {src, comm.AnyTag}, {src, tag}, {comm.AnySource, comm.AnyTag}}
	var reqs []comm.Request
	var bufs [][]float64
	if me == dst {
		for i, p := range pattern {
			buf := make([]float64, 20000)
			r, err := comm.Irecv(c, buf, p.source, p.tag)
			if err != nil {
				return fmt.Errorf("Irecv %d: %w", i, err)
			}
			reqs, bufs = append(reqs, r), append(bufs, buf)
		}
	}
	if err := c.Barrier(ctx); err != nil { // every receive is posted
		return err
	}
	var sends []comm.Request
	if me == src {
		for i := range pattern {
			r, err := comm.Isend(c, orderMsg(i), dst, tag)
			if err != nil {
				return fmt.Errorf("Isend %d: %w", i, err)
			}
			sends = append(sends, r)
		}
	}
	if me == dst {
		// Collected with WaitAny: completion order is free, matching
		// order is not.
		for range pattern {
			cp, err := comm.WaitAny(ctx, reqs)
			if err != nil {
				return fmt.Errorf("WaitAny: %w", err)
			}
			if cp.Err != nil {
				return fmt.Errorf("Irecv %d: %w", cp.Index, cp.Err)
			}
			if err := checkOrderMsg("posted receives", cp.Index, bufs[cp.Index], cp.Status, src, tag); err != nil {
				return err
			}
		}
	}
	if _, err := comm.WaitAll(ctx, sends); err != nil {
		return fmt.Errorf("the Isends: %w", err)
	}
	return c.Barrier(ctx)
}

// probeOrderCase: Probe and Iprobe see the first message of a (source,
// tag) in send order, and the receive after a probe takes the message the
// probe saw (MPI-4.0 3.8.1); a probe for a later tag skips earlier
// messages of other tags without disturbing them.
func probeOrderCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	src, dst := 0, n-1
	type msg struct{ tag, count int }
	seq := []msg{{21, 2}, {22, 0}, {21, 5}, {23, 3000}, {21, 0}}
	var sends []comm.Request
	if me == src {
		for i, m := range seq {
			out := make([]int32, m.count)
			for j := range out {
				out[j] = int32(i*1000 + j)
			}
			r, err := comm.Isend(c, out, dst, m.tag)
			if err != nil {
				return fmt.Errorf("Isend %d: %w", i, err)
			}
			sends = append(sends, r)
		}
	}
	if me == dst {
		want := func(i int) comm.Status { return comm.Status{Source: src, Tag: seq[i].tag, Count: seq[i].count} }
		// A probe for tag 23 sees message 3 past the earlier ones, which
		// stay where they are.
		st, err := c.Probe(ctx, comm.Int32, src, 23)
		if err != nil || st != want(3) {
			return fmt.Errorf("Probe(tag 23): %+v, %v; want %+v", st, err, want(3))
		}
		// Messages 0 to 2 come before message 3, so a wildcard probe
		// sees them in that order; message 3 is then taken by its tag
		// (a named receive), after it message 4.
		for _, i := range []int{0, 1, 2, 3, 4} {
			var st comm.Status
			var err error
			if i == 3 {
				st, err = c.Probe(ctx, comm.Int32, src, 23)
			} else {
				st, err = c.Probe(ctx, comm.Int32, comm.AnySource, comm.AnyTag)
			}
			if err != nil || st != want(i) {
				return fmt.Errorf("Probe before message %d: %+v, %v; want %+v (a message overtook another)", i, st, err, want(i))
			}
			ok, ist, err := c.Iprobe(comm.Int32, src, st.Tag)
			if err != nil || !ok || ist != st {
				return fmt.Errorf("Iprobe after Probe %d: %v, %+v, %v; want %+v", i, ok, ist, err, st)
			}
			// The receive takes the message the probe saw, into a
			// buffer one longer, whose last element stays.
			got := make([]int32, st.Count+1)
			got[st.Count] = -7
			rst, err := comm.Recv(ctx, c, got, st.Source, st.Tag)
			if err != nil || rst != st {
				return fmt.Errorf("Recv after Probe %d: %+v, %v; want %+v", i, rst, err, st)
			}
			for j := range st.Count {
				if got[j] != int32(i*1000+j) {
					return fmt.Errorf("Recv after Probe %d: element %d is %d, want %d", i, j, got[j], i*1000+j)
				}
			}
			if got[st.Count] != -7 {
				return fmt.Errorf("Recv after Probe %d wrote past the message", i)
			}
		}
		if ok, st, err := c.Iprobe(comm.Int32, comm.AnySource, comm.AnyTag); ok || err != nil {
			return fmt.Errorf("Iprobe after every message was received: %v, %+v, %v", ok, st, err)
		}
	}
	if _, err := comm.WaitAll(ctx, sends); err != nil {
		return fmt.Errorf("the Isends: %w", err)
	}
	return c.Barrier(ctx)
}

// zeroLengthCase: a message of no elements is a message (MPI-4.0 3.2.2: a
// count of zero is valid): it matches one receive, carries its source and
// tag, counts 0 in the Status and in probes, writes nothing into a larger
// buffer, and fits a buffer of no elements (also a nil slice); one element
// into a buffer of none is truncated.
func zeroLengthCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	const tag = 70
	var sends []comm.Request
	for i, buf := range [][]int64{nil, {}, nil, nil, nil, {9}} {
		r, err := comm.Isend(c, buf, next, tag+i)
		if err != nil {
			return fmt.Errorf("Isend %d of %d elements: %w", i, len(buf), err)
		}
		sends = append(sends, r)
	}
	want := func(i int) comm.Status { return comm.Status{Source: prev, Tag: tag + i, Count: 0} }
	var errs []error
	// 0: into nil, with the wildcards.
	if st, err := comm.Recv(ctx, c, []int64(nil), comm.AnySource, comm.AnyTag); err != nil || st != want(0) {
		errs = append(errs, fmt.Errorf("Recv of nothing into nil (AnySource, AnyTag): %+v, %v; want %+v", st, err, want(0)))
	}
	// 1: into a larger buffer, which keeps its contents.
	big := []int64{-1, -1}
	r, err := comm.Irecv(c, big, prev, tag+1)
	if err != nil {
		return fmt.Errorf("Irecv: %w", err)
	}
	if st, err := r.Wait(ctx); err != nil || st != want(1) || big[0] != -1 || big[1] != -1 {
		errs = append(errs, fmt.Errorf("Irecv of nothing into 2 elements: %+v, %v, buffer %v; want %+v and the buffer unchanged", st, err, big, want(1)))
	}
	// 2: found by Probe and Iprobe with count 0, then RecvNew: an empty
	// slice, not nil.
	if st, err := c.Probe(ctx, comm.Int64, prev, tag+2); err != nil || st != want(2) {
		errs = append(errs, fmt.Errorf("Probe of nothing: %+v, %v; want %+v", st, err, want(2)))
	}
	if ok, st, err := c.Iprobe(comm.Int64, comm.AnySource, tag+2); err != nil || !ok || st != want(2) {
		errs = append(errs, fmt.Errorf("Iprobe of nothing: %v, %+v, %v; want %+v", ok, st, err, want(2)))
	}
	if got, st, err := comm.RecvNew[int64](ctx, c, prev, tag+2); err != nil || got == nil || len(got) != 0 || st != want(2) {
		errs = append(errs, fmt.Errorf("RecvNew of nothing: %v, %+v, %v; want an empty slice and %+v", got, st, err, want(2)))
	}
	// 3: a matched probe, received with into(0).
	m, err := c.Mprobe(ctx, comm.Int64, prev, tag+3)
	if err != nil || m == nil {
		return errors.Join(append(errs, fmt.Errorf("Mprobe of nothing: %v, %v", m, err))...)
	}
	asked := -1
	if st, err := m.Recv(func(k int) ([]byte, error) { asked = k; return nil, nil }); err != nil || st != want(3) || asked != 0 {
		errs = append(errs, fmt.Errorf("Message.Recv of nothing: %+v, %v, into(%d); want %+v and into(0)", st, err, asked, want(3)))
	}
	// 4: through the Into of Comm.Recv.
	asked = -1
	if st, err := c.Recv(ctx, comm.Int64, prev, tag+4, func(k int) ([]byte, error) { asked = k; return []byte{}, nil }); err != nil || st != want(4) || asked != 0 {
		errs = append(errs, fmt.Errorf("Comm.Recv of nothing: %+v, %v, into(%d); want %+v and into(0)", st, err, asked, want(4)))
	}
	// 5: one element into none.
	r, err = comm.Irecv(c, []int64{}, prev, tag+5)
	if err != nil {
		return fmt.Errorf("Irecv: %w", err)
	}
	if _, err := r.Wait(ctx); !errors.Is(err, comm.ErrTruncated) {
		errs = append(errs, fmt.Errorf("Irecv of 1 element into none: %v; want comm.ErrTruncated", err))
	}
	// A zero-length exchange in one call.
	if st, err := comm.Sendrecv(ctx, c, []int64{}, next, tag+6, []int64{}, prev, tag+6); err != nil || st != want(6) {
		errs = append(errs, fmt.Errorf("Sendrecv of nothing: %+v, %v; want %+v", st, err, want(6)))
	}
	if _, err := comm.WaitAll(ctx, sends); err != nil {
		errs = append(errs, fmt.Errorf("the Isends: %w", err))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return c.Barrier(ctx)
}

// selfSendCase: a rank is a peer like any other (MPI-4.0 3.5: a process
// may send to itself): its own messages are received with its rank or
// AnySource, probed, ordered, and exchanged with Sendrecv, without
// deadlock where the receive is posted first - at every size, on every
// backend (MPICH buffers no send to the rank itself).
func selfSendCase(ctx context.Context, c comm.Comm) error {
	me := c.Rank()
	const tag = 90
	for _, count := range []int{0, 1, 1000, 1 << 17} {
		out := make([]float64, count)
		for i := range out {
			out[i] = float64(me*1000000 + i)
		}
		in := make([]float64, count)
		// The receive first, then a blocking Send, then the Wait.
		r, err := comm.Irecv(c, in, comm.AnySource, tag)
		if err != nil {
			return fmt.Errorf("Irecv of %d from self: %w", count, err)
		}
		if err := comm.Send(ctx, c, out, me, tag); err != nil {
			return fmt.Errorf("Send of %d to self: %w", count, err)
		}
		st, err := r.Wait(ctx)
		if err != nil || st != (comm.Status{Source: me, Tag: tag, Count: count}) {
			return fmt.Errorf("Irecv of %d from self: %+v, %v", count, st, err)
		}
		if err := sameSlice(fmt.Sprintf("Send of %d to self", count), in, out); err != nil {
			return err
		}
		// Isend, Probe, Recv, Wait.
		s, err := comm.Isend(c, out, me, tag+1)
		if err != nil {
			return fmt.Errorf("Isend of %d to self: %w", count, err)
		}
		pst, err := c.Probe(ctx, comm.Float64, me, comm.AnyTag)
		if err != nil || pst != (comm.Status{Source: me, Tag: tag + 1, Count: count}) {
			return fmt.Errorf("Probe of %d from self: %+v, %v", count, pst, err)
		}
		clear(in)
		if st, err := comm.Recv(ctx, c, in, me, tag+1); err != nil || st != pst {
			return fmt.Errorf("Recv of %d from self: %+v, %v; want %+v", count, st, err, pst)
		}
		if err := sameSlice(fmt.Sprintf("Isend of %d to self", count), in, out); err != nil {
			return err
		}
		if _, err := s.Wait(ctx); err != nil {
			return fmt.Errorf("Isend of %d to self: %w", count, err)
		}
		// Sendrecv with itself as both peers.
		clear(in)
		if st, err := comm.Sendrecv(ctx, c, out, me, tag+2, in, me, tag+2); err != nil || st.Source != me || st.Count != count {
			return fmt.Errorf("Sendrecv of %d with self: %+v, %v", count, st, err)
		}
		if err := sameSlice(fmt.Sprintf("Sendrecv of %d with self", count), in, out); err != nil {
			return err
		}
		// Ssend to itself with the receive posted.
		r, err = comm.Irecv(c, in, me, tag+3)
		if err != nil {
			return err
		}
		if err := comm.Ssend(ctx, c, out, me, tag+3); err != nil {
			return fmt.Errorf("Ssend of %d to self with the receive posted: %w", count, err)
		}
		if _, err := r.Wait(ctx); err != nil {
			return fmt.Errorf("Irecv of an Ssend of %d from self: %w", count, err)
		}
	}
	return c.Barrier(ctx)
}

// sendrecvReplaceCase: SendrecvReplace sends the buffer and receives into
// the same buffer (MPI_Sendrecv_replace): what it sends is what the buffer
// held before the call, a shorter message leaves the rest of the buffer
// as it was, and a longer one is truncated; Sendrecv with one buffer for
// both is refused (MPI-4.0 3.10: the buffers of MPI_Sendrecv are
// disjoint) with an *ArgError of Sendrecv, sending nothing.
func sendrecvReplaceCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	const tag = 95
	for _, count := range []int{1, 3000} {
		buf := make([]int32, count)
		for i := range buf {
			buf[i] = int32(me*10000 + i)
		}
		st, err := comm.SendrecvReplace(ctx, c, buf, next, tag, prev, tag)
		if err != nil || st != (comm.Status{Source: prev, Tag: tag, Count: count}) {
			return fmt.Errorf("SendrecvReplace of %d: %+v, %v", count, st, err)
		}
		for i, v := range buf {
			if v != int32(prev*10000+i) {
				return fmt.Errorf("SendrecvReplace of %d: element %d is %d, want %d", count, i, v, prev*10000+i)
			}
		}
	}
	// Each rank sends 2 elements and receives into 4: the other 2 stay.
	sreq, err := comm.Isend(c, []int32{int32(me), int32(me)}, next, tag+1)
	if err != nil {
		return err
	}
	buf := []int32{-1, -1, -1, -1}
	st, err := comm.SendrecvReplace(ctx, c, buf, comm.ProcNull, tag, prev, tag+1)
	if err != nil || st.Count != 2 || !slices.Equal(buf, []int32{int32(prev), int32(prev), -1, -1}) {
		return fmt.Errorf("SendrecvReplace of a shorter message: %+v, %v, buffer %v", st, err, buf)
	}
	if _, err := sreq.Wait(ctx); err != nil {
		return err
	}
	// One buffer for both halves of a Sendrecv.
	one := []int32{1, 2, 3}
	_, err = comm.Sendrecv(ctx, c, one, next, tag+2, one, prev, tag+2)
	var ae *comm.ArgError
	if !errors.As(err, &ae) || ae.Op != "Sendrecv" || ae.Rank != me {
		return fmt.Errorf("Sendrecv with one buffer for both: %v; want a *comm.ArgError of Sendrecv on rank %d", err, me)
	}
	_, err = comm.Sendrecv(ctx, c, one[:2], next, tag+2, one[1:], prev, tag+2)
	if !errors.As(err, &ae) || ae.Op != "Sendrecv" {
		return fmt.Errorf("Sendrecv with overlapping buffers: %v; want a *comm.ArgError of Sendrecv", err)
	}
	// Nothing was sent: a probe after everyone refused finds nothing.
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if ok, st, err := c.Iprobe(comm.Int32, comm.AnySource, tag+2); ok || err != nil {
		return fmt.Errorf("a refused Sendrecv sent a message: %v, %+v, %v", ok, st, err)
	}
	return c.Barrier(ctx)
}

// emptySetsCase: sets without an active request (nil, empty, all
// entries nil) complete at once in every set function (MPI-4.0 3.7.5:
// Waitall and Testall succeed, Waitany and Testany give MPI_UNDEFINED
// with the flag set, Waitsome and Testsome give no index), also with a
// context that has ended.
func emptySetsCase(ctx context.Context, c comm.Comm) error {
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, set := range []struct {
		what string
		reqs func() []comm.Request
	}{
		{"nil", func() []comm.Request { return nil }},
		{"empty", func() []comm.Request { return []comm.Request{} }},
		{"all nil", func() []comm.Request { return make([]comm.Request, 3) }},
	} {
		// A set with no active request completes at once (MPI-4.0
		// 3.7.5), whatever the context: with a canceled one too.
		for _, cx := range []struct {
			what string
			ctx  context.Context
		}{{"live", ctx}, {"canceled", done}} {
			what := fmt.Sprintf("%s set, %s context", set.what, cx.what)
			reqs := set.reqs()
			sts, err := comm.WaitAll(cx.ctx, reqs)
			if err != nil || len(sts) != len(reqs) || slices.ContainsFunc(sts, func(s comm.Status) bool { return s != comm.Status{} }) {
				return fmt.Errorf("WaitAll of a %s: %v, %v; want %d empty statuses, no error", what, sts, err, len(reqs))
			}
			if err := comm.WaitAllInto(cx.ctx, set.reqs(), nil); err != nil {
				return fmt.Errorf("WaitAllInto of a %s: %v", what, err)
			}
			if cp, err := comm.WaitAny(cx.ctx, set.reqs()); err != nil || cp.Index != -1 {
				return fmt.Errorf("WaitAny of a %s: %+v, %v; want Index -1, no error", what, cp, err)
			}
			if cps, err := comm.WaitSome(cx.ctx, set.reqs()); err != nil || len(cps) != 0 {
				return fmt.Errorf("WaitSome of a %s: %v, %v; want nothing, no error", what, cps, err)
			}
		}
		reqs := set.reqs()
		if ok, sts, err := comm.TestAll(reqs); !ok || err != nil || len(sts) != len(reqs) {
			return fmt.Errorf("TestAll of a %s set: %v, %v, %v; want true, %d statuses", set.what, ok, sts, err, len(reqs))
		}
		if cp, ok := comm.TestAny(set.reqs()); !ok || cp.Index != -1 {
			return fmt.Errorf("TestAny of a %s set: %+v, %v; want Index -1, ok", set.what, cp, ok)
		}
		if cps := comm.TestSome(set.reqs()); len(cps) != 0 {
			return fmt.Errorf("TestSome of a %s set: %v; want nothing", set.what, cps)
		}
	}
	return nil
}

// completedSet returns a set of requests that have all completed: a nil
// (inactive) entry, requests of ProcNull, an Isend to the rank itself
// whose message was received, that Isend's message received by an Irecv,
// and (last) an Irecv of that rank's message on tag that completed with
// ErrTruncated. want are their statuses (by index) and trunc the index of
// the truncated one.
func completedSet(ctx context.Context, c comm.Comm, tag int) (reqs []comm.Request, want []comm.Status, trunc int, err error) {
	me := c.Rank()
	null := comm.NullStatus()
	pn1, _ := comm.Isend(c, []int32{1}, comm.ProcNull, tag)
	pn2, _ := comm.Irecv(c, make([]int32, 1), comm.ProcNull, tag)
	in := make([]int32, 2)
	r, err := comm.Irecv(c, in, me, tag)
	if err != nil {
		return nil, nil, 0, err
	}
	s, err := comm.Isend(c, []int32{5, 6}, me, tag)
	if err != nil {
		return nil, nil, 0, err
	}
	t, err := comm.Irecv(c, make([]int32, 1), me, tag+1)
	if err != nil {
		return nil, nil, 0, err
	}
	s2, err := comm.Isend(c, []int32{7, 8, 9}, me, tag+1)
	if err != nil {
		return nil, nil, 0, err
	}
	// Each has completed once its own Wait says so.
	for _, q := range []comm.Request{r, s, t, s2} {
		if _, err := q.Wait(ctx); err != nil && !errors.Is(err, comm.ErrTruncated) {
			return nil, nil, 0, err
		}
	}
	mine := comm.Status{Source: me, Tag: tag, Count: 2}
	reqs = []comm.Request{nil, pn1, s, nil, r, pn2, s2, t}
	want = []comm.Status{{}, null, mine, {}, mine, null, {Source: me, Tag: tag + 1, Count: 3}, {}}
	return reqs, want, 7, nil
}

// completedSetsCase: requests that completed before the set function was
// called (already waited for, or of ProcNull) are reported by every set
// function exactly once, with their status and their error, also with a
// context that has ended (a complete request reports its result whatever
// ctx, as Wait does); nil entries are skipped.
func completedSetsCase(ctx context.Context, c comm.Comm) error {
	done, cancel := context.WithCancel(ctx)
	cancel()
	checkStatus := func(what string, i int, st comm.Status, want []comm.Status, trunc int) error {
		if i == trunc {
			return nil // a truncated receive's Count may be 0 where the library does not say
		}
		if st != want[i] {
			return fmt.Errorf("%s: request %d: status %+v, want %+v", what, i, st, want[i])
		}
		return nil
	}
	for ci, cx := range []struct {
		what string
		ctx  context.Context
	}{{"live", ctx}, {"canceled", done}} {
		tag := 100 + 10*ci
		// WaitAll and TestAll: every request, statuses by index, the
		// truncated one's error naming its index.
		for _, fn := range []string{"WaitAll", "TestAll"} {
			reqs, want, trunc, err := completedSet(ctx, c, tag)
			if err != nil {
				return err
			}
			var sts []comm.Status
			if fn == "WaitAll" {
				sts, err = comm.WaitAll(cx.ctx, reqs)
			} else {
				var ok bool
				ok, sts, err = comm.TestAll(reqs)
				if !ok {
					return fmt.Errorf("TestAll of completed requests: not done")
				}
			}
			what := fmt.Sprintf("%s of completed requests (%s context)", fn, cx.what)
			if !errors.Is(err, comm.ErrTruncated) || !strings.Contains(err.Error(), fmt.Sprintf("request %d", trunc)) || errors.Is(err, context.Canceled) {
				return fmt.Errorf("%s: %v; want only request %d's ErrTruncated, naming its index", what, err, trunc)
			}
			for i := range reqs {
				if reqs[i] != nil {
					return fmt.Errorf("%s: request %d left in the set", what, i)
				}
				if err := checkStatus(what, i, sts[i], want, trunc); err != nil {
					return err
				}
			}
		}
		// WaitAny, TestAny, WaitSome, TestSome: each request once, then
		// Index -1 or nothing.
		for _, fn := range []string{"WaitAny", "TestAny", "WaitSome", "TestSome"} {
			reqs, want, trunc, err := completedSet(ctx, c, tag)
			if err != nil {
				return err
			}
			what := fmt.Sprintf("%s of completed requests (%s context)", fn, cx.what)
			var got []comm.Completion
			for range len(reqs) + 1 {
				var cps []comm.Completion
				switch fn {
				case "WaitAny":
					cp, err := comm.WaitAny(cx.ctx, reqs)
					if err != nil {
						return fmt.Errorf("%s: %w", what, err)
					}
					if cp.Index >= 0 {
						cps = append(cps, cp)
					}
				case "TestAny":
					cp, ok := comm.TestAny(reqs)
					if !ok {
						return fmt.Errorf("%s: not ok with every request complete", what)
					}
					if cp.Index >= 0 {
						cps = append(cps, cp)
					}
				case "WaitSome":
					cps, err = comm.WaitSome(cx.ctx, reqs)
					if err != nil {
						return fmt.Errorf("%s: %w", what, err)
					}
				default:
					cps = comm.TestSome(reqs)
				}
				got = append(got, cps...)
			}
			var idx []int
			for _, cp := range got {
				idx = append(idx, cp.Index)
				if err := checkStatus(what, cp.Index, cp.Status, want, trunc); err != nil {
					return err
				}
				if (cp.Index == trunc) != errors.Is(cp.Err, comm.ErrTruncated) || (cp.Index != trunc && cp.Err != nil) {
					return fmt.Errorf("%s: request %d: error %v", what, cp.Index, cp.Err)
				}
			}
			slices.Sort(idx)
			if !slices.Equal(idx, []int{1, 2, 4, 5, 6, 7}) {
				return fmt.Errorf("%s: reported requests %v, want each of 1, 2, 4, 5, 6, 7 once", what, idx)
			}
		}
	}
	return c.Barrier(ctx)
}

// setErrorsCase: the error of one request of a set reaches the caller
// with the request's index, and the other requests complete normally:
// WaitAll and TestAll report it (errors.Is finds ErrTruncated, the text
// names the index) with every other status right; WaitAny, WaitSome and
// TestSome give it in that request's Completion. Rank 0 sends, the last
// rank receives.
func setErrorsCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	src, dst := 0, n-1
	const tag = 120
	sizes := []int{3, 2000, 5, 4} // message lengths
	bufs := []int{3, 2000, 2, 4}  // request 2 is too short
	for round, fn := range []string{"WaitAll", "TestAll", "WaitAny", "WaitSome", "TestSome"} {
		var sends, recvs []comm.Request
		var in [][]int64
		if me == dst {
			for i := range sizes {
				b := make([]int64, bufs[i])
				r, err := comm.Irecv(c, b, src, tag+round)
				if err != nil {
					return err
				}
				recvs, in = append(recvs, r), append(in, b)
			}
		}
		if me == src {
			for i, k := range sizes {
				out := make([]int64, k)
				for j := range out {
					out[j] = int64(i*10000 + j)
				}
				r, err := comm.Isend(c, out, dst, tag+round)
				if err != nil {
					return err
				}
				sends = append(sends, r)
			}
		}
		if me == dst {
			what := fmt.Sprintf("%s with a truncated request 2", fn)
			got := map[int]comm.Completion{}
			switch fn {
			case "WaitAll", "TestAll":
				var sts []comm.Status
				var err error
				if fn == "WaitAll" {
					sts, err = comm.WaitAll(ctx, recvs)
				} else {
					ok := false
					for !ok && ctx.Err() == nil {
						ok, sts, err = comm.TestAll(recvs)
						if !ok {
							if !slices.ContainsFunc(recvs, func(r comm.Request) bool { return r != nil }) {
								return fmt.Errorf("%s: not done, with the set emptied", what)
							}
							runtime.Gosched()
						}
					}
				}
				if !errors.Is(err, comm.ErrTruncated) || !strings.Contains(err.Error(), "request 2") {
					return fmt.Errorf("%s: %v; want comm.ErrTruncated naming request 2", what, err)
				}
				for _, i := range []int{0, 1, 3} {
					if strings.Contains(err.Error(), fmt.Sprintf("request %d", i)) {
						return fmt.Errorf("%s: %v names request %d, which succeeded", what, err, i)
					}
					got[i] = comm.Completion{Index: i, Status: sts[i]}
				}
				got[2] = comm.Completion{Index: 2, Status: sts[2], Err: err}
			default:
				for slices.ContainsFunc(recvs, func(r comm.Request) bool { return r != nil }) {
					var cps []comm.Completion
					var err error
					switch fn {
					case "WaitAny":
						var cp comm.Completion
						cp, err = comm.WaitAny(ctx, recvs)
						cps = []comm.Completion{cp}
					case "WaitSome":
						cps, err = comm.WaitSome(ctx, recvs)
					default:
						cps = comm.TestSome(recvs)
						runtime.Gosched()
						err = ctx.Err()
					}
					if err != nil {
						return fmt.Errorf("%s: %w", what, err)
					}
					for _, cp := range cps {
						if _, twice := got[cp.Index]; twice || cp.Index < 0 || cp.Index >= len(sizes) {
							return fmt.Errorf("%s: request %d reported twice or out of range", what, cp.Index)
						}
						got[cp.Index] = cp
					}
				}
			}
			for i := range sizes {
				cp, ok := got[i]
				if !ok {
					return fmt.Errorf("%s: request %d never reported", what, i)
				}
				if recvs[i] != nil {
					return fmt.Errorf("%s: request %d left in the set", what, i)
				}
				if i == 2 {
					if !errors.Is(cp.Err, comm.ErrTruncated) {
						return fmt.Errorf("%s: request 2: %v, want comm.ErrTruncated", what, cp.Err)
					}
					if cp.Status.Source != src || cp.Status.Tag != tag+round {
						return fmt.Errorf("%s: request 2: status %+v does not name the message", what, cp.Status)
					}
					continue
				}
				if cp.Err != nil || cp.Status != (comm.Status{Source: src, Tag: tag + round, Count: sizes[i]}) {
					return fmt.Errorf("%s: request %d: %+v", what, i, cp)
				}
				if in[i][sizes[i]-1] != int64(i*10000+sizes[i]-1) {
					return fmt.Errorf("%s: request %d: wrong data", what, i)
				}
			}
		}
		if _, err := comm.WaitAll(ctx, sends); err != nil {
			return fmt.Errorf("the Isends: %w", err)
		}
	}
	return c.Barrier(ctx)
}

// setContextCase: a set function waiting for a request that no message
// will complete returns when its context ends, with an error wrapping
// the context's, and leaves the pending request in the set; the requests
// completed before it are reported, their errors included, and not lost;
// the pending request can then be canceled and waited for.
func setContextCase(ctx context.Context, c comm.Comm) error {
	me := c.Rank()
	const tag, never = 130, 131 // nothing is ever sent on never
	done, cancel := context.WithCancel(ctx)
	cancel()
	newPending := func() (comm.Request, error) {
		return comm.Irecv(c, make([]int32, 1), me, never)
	}
	cancelIt := func(r comm.Request) error {
		cr, err := canceler(r)
		if err != nil {
			return err
		}
		if err := cr.Cancel(); err != nil {
			return err
		}
		if _, err := r.Wait(ctx); !errors.Is(err, comm.ErrCanceled) {
			return fmt.Errorf("Wait of a canceled Irecv: %v, want comm.ErrCanceled", err)
		}
		return nil
	}
	// A completed request with an error (truncated) before a pending
	// one, then a completed one after it.
	mk := func() ([]comm.Request, error) {
		t, err := comm.Irecv(c, make([]int32, 1), me, tag)
		if err != nil {
			return nil, err
		}
		s, err := comm.Isend(c, []int32{1, 2}, me, tag)
		if err != nil {
			return nil, err
		}
		if _, err := t.Wait(ctx); !errors.Is(err, comm.ErrTruncated) {
			return nil, fmt.Errorf("Irecv of 2 into 1: %v, want comm.ErrTruncated", err)
		}
		if _, err := s.Wait(ctx); err != nil {
			return nil, err
		}
		p, err := newPending()
		if err != nil {
			return nil, err
		}
		return []comm.Request{t, p, s}, nil
	}
	reqs, err := mk()
	if err != nil {
		return err
	}
	_, err = comm.WaitAll(done, reqs)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "request 1") {
		return fmt.Errorf("WaitAll with a canceled context over a pending request 1: %v; want context.Canceled naming request 1", err)
	}
	if !errors.Is(err, comm.ErrTruncated) || !strings.Contains(err.Error(), "request 0") {
		return fmt.Errorf("WaitAll with a canceled context: %v; want also request 0's comm.ErrTruncated, which it took out of the set", err)
	}
	if reqs[0] != nil || reqs[1] == nil {
		return fmt.Errorf("WaitAll with a canceled context: set %v; want request 0 collected and request 1 left", reqs)
	}
	// A deadline that passes while waiting: the same.
	short, scancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = comm.WaitAll(short, reqs)
	scancel()
	if !errors.Is(err, context.DeadlineExceeded) || reqs[1] == nil {
		return fmt.Errorf("WaitAll past a deadline: %v, set %v; want context.DeadlineExceeded and request 1 left", err, reqs)
	}
	// The completed request 2 is still reported by the next call.
	if cp, err := comm.WaitAny(done, reqs); err != nil || cp.Index != 2 || cp.Err != nil {
		return fmt.Errorf("WaitAny with a canceled context and request 2 complete: %+v, %v; want request 2", cp, err)
	}
	// Only the pending one is left: each function reports the context
	// (or, not blocking, nothing) and leaves it.
	short, scancel = context.WithTimeout(ctx, 20*time.Millisecond)
	defer scancel()
	for _, w := range []struct {
		what string
		run  func() error
	}{
		{"WaitAny", func() error { cp, err := comm.WaitAny(done, reqs); return errIf(cp.Index != -1, err) }},
		{"WaitAny past a deadline", func() error { _, err := comm.WaitAny(short, reqs); return err }},
		{"WaitSome", func() error { cps, err := comm.WaitSome(done, reqs); return errIf(len(cps) != 0, err) }},
		{"WaitAll", func() error { _, err := comm.WaitAll(done, reqs); return err }},
	} {
		err := w.run()
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s over a pending request: %v; want the context's error", w.what, err)
		}
		if reqs[1] == nil {
			return fmt.Errorf("%s over a pending request took it out of the set", w.what)
		}
	}
	if ok, sts, err := comm.TestAll(reqs); ok || sts != nil || err != nil || reqs[1] == nil {
		return fmt.Errorf("TestAll over a pending request: %v, %v, %v", ok, sts, err)
	}
	if cp, ok := comm.TestAny(reqs); ok || cp.Index != -1 || reqs[1] == nil {
		return fmt.Errorf("TestAny over a pending request: %+v, %v; want Index -1, not ok", cp, ok)
	}
	if cps := comm.TestSome(reqs); len(cps) != 0 || reqs[1] == nil {
		return fmt.Errorf("TestSome over a pending request: %v", cps)
	}
	if err := cancelIt(reqs[1]); err != nil {
		return err
	}
	// Canceled, it is complete: the set reports it once, with
	// ErrCanceled.
	if cp, err := comm.WaitAny(done, reqs); err != nil || cp.Index != 1 || !errors.Is(cp.Err, comm.ErrCanceled) {
		return fmt.Errorf("WaitAny over a canceled request: %+v, %v; want request 1 with comm.ErrCanceled", cp, err)
	}
	if cp, err := comm.WaitAny(done, reqs); err != nil || cp.Index != -1 {
		return fmt.Errorf("WaitAny over a drained set: %+v, %v", cp, err)
	}
	return c.Barrier(ctx)
}

// errIf returns err, or an error if bad.
func errIf(bad bool, err error) error {
	if bad {
		return fmt.Errorf("reported a completion (%v)", err)
	}
	return err
}

// splitColorsCase: Split with every rank its own colour, with colours
// that are large and far apart, with keys that tie (old rank order
// decides) and keys that reverse it, with every rank Undefined; the new
// communicators carry point-to-point messages with their own ranks in
// Status.Source.
func splitColorsCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	// Every rank alone.
	solo, err := c.Split(ctx, me, 0)
	if err != nil || solo == nil || solo.Size() != 1 || solo.Rank() != 0 {
		return fmt.Errorf("Split with a colour per rank: %v, %v", solo, err)
	}
	if got, err := comm.AllReduce(ctx, solo, []int64{int64(me)}, comm.Sum); err != nil || got[0] != int64(me) {
		return fmt.Errorf("AllReduce on a communicator of one: %v, %v", got, err)
	}
	if err := solo.Free(); err != nil {
		return err
	}
	// Every rank Undefined: no communicator anywhere, no error.
	none, err := c.Split(ctx, comm.Undefined, me)
	if err != nil || none != nil {
		return fmt.Errorf("Split with every rank Undefined: %v, %v; want nil, nil", none, err)
	}
	// Colours 1<<30 and 7 by rank mod 2, keys tying in pairs: 2 - r/2,
	// so that old rank order breaks the ties.
	color := 7
	if me%2 == 1 {
		color = 1 << 30
	}
	key := 2 - me/2
	sub, err := c.Split(ctx, color, key)
	if err != nil || sub == nil {
		return fmt.Errorf("Split with colour %d: %v, %v", color, sub, err)
	}
	defer sub.Free()
	var members []int
	for r := range n {
		if r%2 == me%2 {
			members = append(members, r)
		}
	}
	slices.SortStableFunc(members, func(a, b int) int { return (2 - a/2) - (2 - b/2) })
	want := slices.Index(members, me)
	if sub.Size() != len(members) || sub.Rank() != want {
		return fmt.Errorf("Split with colour %d key %d: rank %d of %d, want %d of %d (members by key then old rank: %v)", color, key, sub.Rank(), sub.Size(), want, len(members), members)
	}
	// Point to point on the new communicator speaks its ranks.
	sn, sme := sub.Size(), sub.Rank()
	next, prev := (sme+1)%sn, (sme+sn-1)%sn
	s, err := comm.Isend(sub, []int64{int64(me)}, next, 5)
	if err != nil {
		return err
	}
	got := make([]int64, 1)
	st, err := comm.Recv(ctx, sub, got, comm.AnySource, comm.AnyTag)
	if err != nil || st != (comm.Status{Source: prev, Tag: 5, Count: 1}) || got[0] != int64(members[prev]) {
		return fmt.Errorf("Recv on the split communicator: %+v, %v, %v; want source %d (old rank %d)", st, err, got, prev, members[prev])
	}
	if _, err := s.Wait(ctx); err != nil {
		return err
	}
	return c.Barrier(ctx)
}

// misuseSplitColorCase: a negative colour other than Undefined (MPI-4.0
// 7.4.2: colour is non-negative or MPI_UNDEFINED) on one rank is an
// *ArgError naming that rank on every rank, and no communicator; so is
// a colour or key past MPI's C int, on every backend.
func misuseSplitColorCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	// A negative colour other than Undefined, on the last rank.
	bad := 0
	if me == n-1 {
		bad = -3
	}
	d, err := c.Split(ctx, bad, 0)
	var ae *comm.ArgError
	if !errors.As(err, &ae) || ae.Rank != n-1 || d != nil {
		return fmt.Errorf("Split with colour -3 on rank %d: %v, %v; want a *comm.ArgError naming rank %d on every rank", n-1, d, err, n-1)
	}
	if strconv.IntSize == 64 {
		// A colour or key past MPI's C int is refused on every
		// backend (comm/local took them), not only where MPI is.
		past := math.MaxInt32
		past++
		for _, arg := range []struct {
			what       string
			color, key int
		}{{"color", past, 0}, {"key", 0, past}, {"key", 0, -past - 1}} {
			color, key := 0, 0
			if me == n-1 {
				color, key = arg.color, arg.key
			}
			d, err := c.Split(ctx, color, key)
			if !errors.As(err, &ae) || ae.Rank != n-1 || d != nil || !strings.Contains(ae.Detail, arg.what) {
				return fmt.Errorf("Split with colour %d key %d on rank %d: %v, %v; want a *comm.ArgError about the %s naming rank %d on every rank", arg.color, arg.key, n-1, d, err, arg.what, n-1)
			}
		}
	}
	return c.Barrier(ctx)
}
