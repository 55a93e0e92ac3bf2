package commtest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/pzgo/pz/comm"
)

// asyncCases are the cases of Dup, probes, non-blocking collectives and
// request sets.
func asyncCases() []Case {
	return []Case{
		{"Dup", dupCase},
		{"P2P/Probe", probeCase},
		{"P2P/MatchedProbe", matchedProbeCase},
		{"P2P/ProbeProcNull", probeProcNullCase},
		{"Nonblocking/Collectives", nbcCase},
		{"Nonblocking/Interleaved", nbcInterleavedCase},
		{"Nonblocking/Mismatch", nbcMismatchCase},
		{"Nonblocking/WaitOrders", nbcWaitOrdersCase},
		{"RequestSets", requestSetsCase},
		{"P2P/SendStatus", sendStatusCase},
	}
}

// dupCase checks that a duplicate has the same ranks and that its messages
// and collectives never match the parent's.
func dupCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	d, err := c.Dup(ctx)
	if err != nil {
		return fmt.Errorf("Dup: %w", err)
	}
	if d.Rank() != me || d.Size() != n {
		return fmt.Errorf("Dup: rank %d of %d, want %d of %d", d.Rank(), d.Size(), me, n)
	}
	next, prev := (me+1)%n, (me+n-1)%n
	// The same source and tag on both: each receive must get its own
	// communicator's message, although the parent's was sent first. The
	// sends are non-blocking: MPI need not buffer a send (MPICH does not
	// buffer one to itself), so a ring of blocking sends may wait for ever.
	sendParent, err := comm.Isend(c, []int64{int64(100 + me)}, next, 3)
	if err != nil {
		return fmt.Errorf("Isend on the parent: %w", err)
	}
	sendDup, err := comm.Isend(d, []int64{int64(200 + me)}, next, 3)
	if err != nil {
		return fmt.Errorf("Isend on the duplicate: %w", err)
	}
	defer func() { _ = waitAll(ctx, sendParent, sendDup) }()
	got := make([]int64, 1)
	if _, err := comm.Recv(ctx, d, got, prev, 3); err != nil {
		return fmt.Errorf("Recv on the duplicate: %w", err)
	}
	if got[0] != int64(200+prev) {
		return fmt.Errorf("Recv on the duplicate got %d, want %d (the parent's message?)", got[0], 200+prev)
	}
	if _, err := comm.Recv(ctx, c, got, prev, 3); err != nil {
		return fmt.Errorf("Recv on the parent: %w", err)
	}
	if got[0] != int64(100+prev) {
		return fmt.Errorf("Recv on the parent got %d, want %d", got[0], 100+prev)
	}
	if err := waitAll(ctx, sendParent, sendDup); err != nil {
		return fmt.Errorf("the sends: %w", err)
	}
	sum, err := comm.AllReduce(ctx, d, []int64{int64(me)}, comm.Sum)
	if err != nil {
		return fmt.Errorf("AllReduce on the duplicate: %w", err)
	}
	if want := int64(n * (n - 1) / 2); sum[0] != want {
		return fmt.Errorf("AllReduce on the duplicate: %d, want %d", sum[0], want)
	}
	if err := d.Free(); err != nil {
		return fmt.Errorf("Free of the duplicate: %w", err)
	}
	return c.Barrier(ctx)
}

// probeCase sends every rank a message whose length says who sent it and
// finds it with Probe and Iprobe before receiving it.
func probeCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	if ok, st, err := c.Iprobe(comm.Int32, comm.AnySource, 77); err != nil || ok {
		return fmt.Errorf("Iprobe with nothing sent: %v, %+v, %v", ok, st, err)
	}
	if err := c.Barrier(ctx); err != nil { // nobody sends before every rank probed nothing
		return err
	}
	for round := range 2 { // a small message whose length names its sender, and a large one
		tag := 40 + round
		count, sendCount := prev+1, me+1
		if round == 1 {
			count, sendCount = 3000, 3000
		}
		want := make([]int32, count)
		for i := range want {
			want[i] = int32(prev*1000 + i)
		}
		out := make([]int32, sendCount)
		for i := range out {
			out[i] = int32(me*1000 + i)
		}
		sreq, err := comm.Isend(c, out, next, tag)
		if err != nil {
			return fmt.Errorf("Isend: %w", err)
		}
		st, err := c.Probe(ctx, comm.Int32, comm.AnySource, comm.AnyTag)
		if err != nil {
			return fmt.Errorf("Probe: %w", err)
		}
		if st.Source != prev || st.Tag != tag || st.Count != count {
			return fmt.Errorf("Probe: status %+v, want source %d tag %d count %d", st, prev, tag, count)
		}
		// The message stays until received: Iprobe sees it too.
		ok, st2, err := c.Iprobe(comm.Int32, prev, tag)
		if err != nil || !ok || st2 != st {
			return fmt.Errorf("Iprobe after Probe: %v, %+v, %v; want %+v", ok, st2, err, st)
		}
		got := make([]int32, st.Count)
		if _, err := comm.Recv(ctx, c, got, st.Source, st.Tag); err != nil {
			return fmt.Errorf("Recv after Probe: %w", err)
		}
		if err := sameSlice("Recv after Probe", got, want); err != nil {
			return err
		}
		if _, err := sreq.Wait(ctx); err != nil {
			return fmt.Errorf("Isend: %w", err)
		}
	}
	return c.Barrier(ctx)
}

// probeProcNullCase probes the null peer, as a halo exchange of unknown
// lengths does at a domain's edge: Iprobe reports a message at once,
// Probe returns at once, both with the null Status, and the matched
// probes return a message whose Recv completes at once without asking
// for a buffer (MPI_MESSAGE_NO_PROC); it ignores real messages, and a
// bad datatype or tag is refused as for any source.
func probeProcNullCase(ctx context.Context, c comm.Comm) error {
	null := comm.Status{Source: comm.ProcNull, Tag: comm.AnyTag}
	if got := comm.NullStatus(); got != null {
		return fmt.Errorf("NullStatus: %+v, want %+v", got, null)
	}
	// A real message waiting from this rank itself is not what a probe
	// of ProcNull reports.
	me := c.Rank()
	sreq, err := comm.Isend(c, []int32{1, 2, 3}, me, 61)
	if err != nil {
		return fmt.Errorf("Isend to self: %w", err)
	}
	if got, st, err := comm.RecvNew[int32](ctx, c, comm.ProcNull, 61); got == nil || len(got) != 0 || st != null || err != nil {
		return fmt.Errorf("RecvNew(ProcNull): %v, %+v, %v; want an empty slice, %+v, nil (as Recv)", got, st, err, null)
	}
	if ok, st, err := c.Iprobe(comm.Int32, comm.ProcNull, comm.AnyTag); !ok || st != null || err != nil {
		return fmt.Errorf("Iprobe(ProcNull): %v, %+v, %v; want true, %+v, nil", ok, st, err, null)
	}
	if st, err := c.Probe(ctx, comm.Int32, comm.ProcNull, 61); st != null || err != nil {
		return fmt.Errorf("Probe(ProcNull): %+v, %v; want %+v, nil", st, err, null)
	}
	for _, probe := range []struct {
		name string
		f    func() (comm.Message, error)
	}{
		{"Improbe", func() (comm.Message, error) { return c.Improbe(comm.Int32, comm.ProcNull, comm.AnyTag) }},
		{"Mprobe", func() (comm.Message, error) { return c.Mprobe(ctx, comm.Int32, comm.ProcNull, 61) }},
	} {
		m, err := probe.f()
		if err != nil || m == nil {
			return fmt.Errorf("%s(ProcNull): %v, %v; want a message", probe.name, m, err)
		}
		if st := m.Status(); st != null {
			return fmt.Errorf("%s(ProcNull): status %+v, want %+v", probe.name, st, null)
		}
		st, err := m.Recv(func(n int) ([]byte, error) {
			return nil, fmt.Errorf("into(%d) called", n)
		})
		if st != null || err != nil {
			return fmt.Errorf("%s(ProcNull): Recv: %+v, %v; want %+v, nil without a buffer", probe.name, st, err, null)
		}
	}
	// The real message is still there, for the receive it was meant for.
	got := make([]int32, 3)
	if st, err := comm.Recv(ctx, c, got, me, 61); err != nil || st.Count != 3 || got[2] != 3 {
		return fmt.Errorf("Recv from self after the null probes: %+v, %v, %v", st, err, got)
	}
	if _, err := sreq.Wait(ctx); err != nil {
		return fmt.Errorf("Isend to self: %w", err)
	}
	if _, _, err := c.Iprobe(comm.Datatype(99), comm.ProcNull, 0); !errors.Is(err, comm.ErrInvalidArg) {
		return fmt.Errorf("Iprobe(ProcNull) of an invalid datatype: %v, want ErrInvalidArg", err)
	}
	if _, err := c.Probe(ctx, comm.Int32, comm.ProcNull, -7); !errors.Is(err, comm.ErrInvalidArg) {
		return fmt.Errorf("Probe(ProcNull) with tag -7: %v, want ErrInvalidArg", err)
	}
	return c.Barrier(ctx)
}

// matchedProbeCase takes messages out of matching with Mprobe and Improbe,
// receives each exactly once, and refuses a second receive.
func matchedProbeCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	for round, count := range []int{5, 3000} {
		tag := 50 + round
		out := make([]float64, count)
		for i := range out {
			out[i] = float64(me) + float64(i)/4
		}
		sreq, err := comm.Isend(c, out, next, tag)
		if err != nil {
			return fmt.Errorf("Isend: %w", err)
		}
		var m comm.Message
		if round == 0 {
			m, err = c.Mprobe(ctx, comm.Float64, comm.AnySource, tag)
		} else {
			for m == nil && err == nil && ctx.Err() == nil {
				m, err = c.Improbe(comm.Float64, prev, comm.AnyTag)
			}
		}
		if err != nil || m == nil {
			return fmt.Errorf("matched probe: %v, %v (ctx %v)", m, err, ctx.Err())
		}
		if st := m.Status(); st.Source != prev || st.Tag != tag || st.Count != count {
			return fmt.Errorf("matched probe: status %+v, want source %d tag %d count %d", st, prev, tag, count)
		}
		// The message left matching: a probe no longer sees it.
		if ok, st, err := c.Iprobe(comm.Float64, prev, tag); ok || err != nil {
			return fmt.Errorf("Iprobe after a matched probe: %v, %+v, %v; want nothing", ok, st, err)
		}
		got := make([]float64, count)
		st, err := m.Recv(func(k int) ([]byte, error) { return comm.BufOf(got[:k]).Bytes, nil })
		if err != nil {
			return fmt.Errorf("Message.Recv: %w", err)
		}
		if st.Count != count {
			return fmt.Errorf("Message.Recv: count %d, want %d", st.Count, count)
		}
		for i, v := range got {
			if want := float64(prev) + float64(i)/4; v != want {
				return fmt.Errorf("Message.Recv: element %d is %v, want %v", i, v, want)
			}
		}
		if _, err := m.Recv(func(k int) ([]byte, error) { return comm.BufOf(got[:k]).Bytes, nil }); !errors.Is(err, comm.ErrInvalidArg) {
			return fmt.Errorf("second Message.Recv: %v, want ErrInvalidArg", err)
		}
		if _, err := sreq.Wait(ctx); err != nil {
			return fmt.Errorf("Isend: %w", err)
		}
	}
	return c.Barrier(ctx)
}

// nbcCase starts every non-blocking collective before waiting for any, with
// a blocking collective in between, and checks every result.
func nbcCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	var reqs []comm.Request
	// start(what)(c.Ix(...)) keeps the request of a call just started.
	start := func(what string) func(comm.Request, error) error {
		return func(r comm.Request, err error) error {
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			reqs = append(reqs, r)
			return nil
		}
	}
	const count = 1500 // above comm/local's eager limit
	sum := make([]float64, count)
	mine := make([]float64, count)
	for i := range mine {
		mine[i] = float64(me + i)
	}
	if err := start("Ibarrier")(c.Ibarrier()); err != nil {
		return err
	}
	if err := start("Iallreduce")(c.Iallreduce(comm.BufOf(mine), comm.BufOf(sum), comm.Sum)); err != nil {
		return err
	}
	bc := make([]int64, 10)
	if me == n-1 {
		for i := range bc {
			bc[i] = int64(7 * i)
		}
	}
	if err := start("Ibcast")(c.Ibcast(comm.BufOf(bc), n-1)); err != nil {
		return err
	}
	var red []int64
	if me == 0 {
		red = make([]int64, 2)
	}
	if err := start("Ireduce")(c.Ireduce(comm.BufOf([]int64{int64(me), 1}), comm.BufOf(red), comm.Max, 0)); err != nil {
		return err
	}
	// A rank contributes me+1 elements to the gathers.
	contrib := make([]int32, me+1)
	for i := range contrib {
		contrib[i] = int32(me*10 + i)
	}
	var gathered, allGathered []byte
	gcounts, acounts := make([]int, n), make([]int, n)
	if err := start("Igather")(c.Igather(comm.BufOf(contrib), 0, func(k int) []byte {
		gathered = make([]byte, 4*k)
		return gathered
	}, gcounts)); err != nil {
		return err
	}
	if err := start("Iallgather")(c.Iallgather(comm.BufOf(contrib), func(k int) []byte {
		allGathered = make([]byte, 4*k)
		return allGathered
	}, acounts)); err != nil {
		return err
	}
	// Scatter from rank 0: rank i gets i+2 elements.
	var scat []int32
	scounts := make([]int, n)
	for i := range n {
		scounts[i] = i + 2
		for j := range i + 2 {
			scat = append(scat, int32(100*i+j))
		}
	}
	var part []byte
	if err := start("Iscatter")(c.Iscatter(comm.BufOf(scat), scounts, 0, func(k int) []byte {
		part = make([]byte, 4*k)
		return part
	})); err != nil {
		return err
	}
	// Alltoall: rank me sends j+1 elements to rank j.
	var a2a []int32
	a2aCounts := make([]int, n)
	for j := range n {
		a2aCounts[j] = j + 1
		for k := range j + 1 {
			a2a = append(a2a, int32(me*100+j*10+k))
		}
	}
	var a2aOut []byte
	a2aRecv := make([]int, n)
	if err := start("Ialltoall")(c.Ialltoall(comm.BufOf(a2a), a2aCounts, func(k int) []byte {
		a2aOut = make([]byte, 4*k)
		return a2aOut
	}, a2aRecv)); err != nil {
		return err
	}
	// A blocking collective while they are in flight.
	if got, err := comm.AllReduce(ctx, c, []int64{1}, comm.Sum); err != nil || got[0] != int64(n) {
		return fmt.Errorf("blocking AllReduce among non-blocking ones: %v, %v", got, err)
	}
	if _, err := comm.WaitAll(ctx, reqs); err != nil {
		return err
	}
	for i, v := range sum {
		if want := float64(n*(n-1)/2 + n*i); v != want {
			return fmt.Errorf("Iallreduce: element %d is %v, want %v", i, v, want)
		}
	}
	for i, v := range bc {
		if v != int64(7*i) {
			return fmt.Errorf("Ibcast: element %d is %d, want %d", i, v, 7*i)
		}
	}
	if me == 0 && (red[0] != int64(n-1) || red[1] != 1) {
		return fmt.Errorf("Ireduce: %v, want [%d 1]", red, n-1)
	}
	var wantG []int32
	wantCounts := make([]int, n)
	for r := range n {
		wantCounts[r] = r + 1
		for i := range r + 1 {
			wantG = append(wantG, int32(r*10+i))
		}
	}
	if me == 0 {
		if err := sameSlice("Igather", asInt32(gathered), wantG); err != nil {
			return err
		}
		if err := sameSlice("Igather counts", gcounts, wantCounts); err != nil {
			return err
		}
	}
	if err := sameSlice("Iallgather", asInt32(allGathered), wantG); err != nil {
		return err
	}
	if err := sameSlice("Iallgather counts", acounts, wantCounts); err != nil {
		return err
	}
	wantPart := make([]int32, me+2)
	for j := range wantPart {
		wantPart[j] = int32(100*me + j)
	}
	if err := sameSlice("Iscatter", asInt32(part), wantPart); err != nil {
		return err
	}
	var wantA2A []int32
	wantRecv := make([]int, n)
	for r := range n {
		wantRecv[r] = me + 1
		for k := range me + 1 {
			wantA2A = append(wantA2A, int32(r*100+me*10+k))
		}
	}
	if err := sameSlice("Ialltoall", asInt32(a2aOut), wantA2A); err != nil {
		return err
	}
	return sameSlice("Ialltoall counts", a2aRecv, wantRecv)
}

// nbcInterleavedCase starts non-blocking collectives and blocking ones in an
// order that differs across ranks: they never match each other, so it must
// work, with every rank waiting in a different place.
func nbcInterleavedCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	out := make([]int64, 1)
	var req comm.Request
	var err error
	if me%2 == 0 {
		if req, err = c.Iallreduce(comm.BufOf([]int64{int64(me)}), comm.BufOf(out), comm.Sum); err != nil {
			return fmt.Errorf("Iallreduce: %w", err)
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
	} else {
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		if req, err = c.Iallreduce(comm.BufOf([]int64{int64(me)}), comm.BufOf(out), comm.Sum); err != nil {
			return fmt.Errorf("Iallreduce: %w", err)
		}
	}
	if _, err := req.Wait(ctx); err != nil {
		return fmt.Errorf("Iallreduce: %w", err)
	}
	if want := int64(n * (n - 1) / 2); out[0] != want {
		return fmt.Errorf("Iallreduce: %d, want %d", out[0], want)
	}
	return nil
}

// nbcMismatchCase gives the last rank a different count: every rank's
// request fails with the mismatch, and the next non-blocking collective
// still works.
func nbcMismatchCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	if n == 1 {
		return nil
	}
	count := 4
	if me == n-1 {
		count = 5
	}
	in, out := make([]float64, count), make([]float64, count)
	req, err := c.Iallreduce(comm.BufOf(in), comm.BufOf(out), comm.Sum)
	if err != nil {
		return fmt.Errorf("Iallreduce: %w", err)
	}
	if _, err := req.Wait(ctx); !errors.Is(err, comm.ErrMismatch) {
		return fmt.Errorf("Iallreduce with counts that differ: %v, want ErrMismatch", err)
	}
	req, err = c.Ibarrier()
	if err != nil {
		return fmt.Errorf("Ibarrier after a mismatch: %w", err)
	}
	if _, err := req.Wait(ctx); err != nil {
		return fmt.Errorf("Ibarrier after a mismatch: %w", err)
	}
	return nil
}

// requestSetsCase receives one message from every rank and drains the
// requests with WaitAny, then with WaitSome and TestSome, checking that each
// completes exactly once with the right status.
func requestSetsCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	for round := range 2 {
		tag := 60 + round
		bufs := make([][]int64, n)
		recvs := make([]comm.Request, n)
		for j := range n {
			bufs[j] = make([]int64, 600) // above comm/local's eager limit
			r, err := comm.Irecv(c, bufs[j], j, tag)
			if err != nil {
				return fmt.Errorf("Irecv: %w", err)
			}
			recvs[j] = r
		}
		// A nil entry is inactive.
		recvs = append(recvs, nil)
		sends := make([]comm.Request, n)
		// Send in reverse rank order, so that completions come out of order.
		for j := n - 1; j >= 0; j-- {
			out := make([]int64, 600)
			for i := range out {
				out[i] = int64(me*1000 + i)
			}
			r, err := comm.Isend(c, out, j, tag)
			if err != nil {
				return fmt.Errorf("Isend: %w", err)
			}
			sends[j] = r
		}
		seen := make([]bool, n)
		check := func(cp comm.Completion) error {
			if cp.Err != nil {
				return fmt.Errorf("request %d: %w", cp.Index, cp.Err)
			}
			if cp.Index < 0 || cp.Index >= n || seen[cp.Index] {
				return fmt.Errorf("completion of request %d: out of range or reported twice", cp.Index)
			}
			seen[cp.Index] = true
			if cp.Status.Source != cp.Index || cp.Status.Tag != tag || cp.Status.Count != 600 {
				return fmt.Errorf("request %d: status %+v", cp.Index, cp.Status)
			}
			if bufs[cp.Index][599] != int64(cp.Index*1000+599) {
				return fmt.Errorf("request %d: wrong data %d", cp.Index, bufs[cp.Index][599])
			}
			return nil
		}
		if round == 0 {
			for {
				cp, err := comm.WaitAny(ctx, recvs)
				if err != nil {
					return fmt.Errorf("WaitAny: %w", err)
				}
				if cp.Index < 0 {
					break
				}
				if err := check(cp); err != nil {
					return fmt.Errorf("WaitAny: %w", err)
				}
			}
		} else {
			for slices.ContainsFunc(recvs, func(r comm.Request) bool { return r != nil }) {
				cps, err := comm.WaitSome(ctx, recvs)
				if err != nil {
					return fmt.Errorf("WaitSome: %w", err)
				}
				if len(cps) == 0 {
					return fmt.Errorf("WaitSome returned nothing with requests active")
				}
				cps = append(cps, comm.TestSome(recvs)...)
				for _, cp := range cps {
					if err := check(cp); err != nil {
						return fmt.Errorf("WaitSome: %w", err)
					}
				}
			}
		}
		if i := slices.Index(seen, false); i >= 0 {
			return fmt.Errorf("request %d never completed", i)
		}
		if _, err := comm.WaitAll(ctx, sends); err != nil {
			return fmt.Errorf("WaitAll of the sends: %w", err)
		}
		if slices.ContainsFunc(sends, func(r comm.Request) bool { return r != nil }) {
			return fmt.Errorf("WaitAll left requests in the set")
		}
		// A drained set has no active request: TestAny says so at once
		// (Index -1, ok), as MPI_Testany's MPI_UNDEFINED and WaitAny do,
		// so that a polling loop ends.
		if cp, ok := comm.TestAny(sends); !ok || cp.Index != -1 {
			return fmt.Errorf("TestAny on a drained set: %+v, ok %v; want Index -1, ok true", cp, ok)
		}
	}
	return c.Barrier(ctx)
}

func asInt32(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	copy(comm.BufOf(out).Bytes, b)
	return out
}

// nbcWaitOrdersCase starts batches of Iallreduce (each sum told apart by
// its round) and an Ibarrier, and waits for them with a context that
// cannot be canceled - where a Wait may run the next operation itself -
// in start order, in reverse order, and with more started between the
// waits; every result must be right and every Wait must return.
func nbcWaitOrdersCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	bg := context.WithoutCancel(ctx)
	const batch = 6
	type started struct {
		req  comm.Request
		out  []int64
		want int64
	}
	var pending []started
	startOne := func(round int) error {
		out := make([]int64, 1)
		r, err := c.Iallreduce(comm.BufOf([]int64{int64(me + 100*round)}), comm.BufOf(out), comm.Sum)
		if err != nil {
			return fmt.Errorf("Iallreduce %d: %w", round, err)
		}
		pending = append(pending, started{r, out, int64(n*(n-1)/2 + 100*round*n)})
		return nil
	}
	check := func(order string, s started) error {
		if _, err := s.req.Wait(bg); err != nil {
			return fmt.Errorf("%s: Wait: %w", order, err)
		}
		if s.out[0] != s.want {
			return fmt.Errorf("%s: sum %d, want %d", order, s.out[0], s.want)
		}
		return nil
	}
	for _, order := range []string{"start order", "reverse order", "interleaved"} {
		pending = pending[:0]
		for round := range batch {
			if err := startOne(round); err != nil {
				return err
			}
		}
		b, err := c.Ibarrier()
		if err != nil {
			return fmt.Errorf("Ibarrier: %w", err)
		}
		switch order {
		case "start order":
			for _, s := range pending {
				if err := check(order, s); err != nil {
					return err
				}
			}
		case "reverse order":
			for i := len(pending) - 1; i >= 0; i-- {
				if err := check(order, pending[i]); err != nil {
					return err
				}
			}
		default:
			for i := 0; i < len(pending); i++ {
				if err := check(order, pending[i]); err != nil {
					return err
				}
				if len(pending) < 2*batch {
					if err := startOne(len(pending)); err != nil {
						return err
					}
				}
			}
		}
		if _, err := b.Wait(bg); err != nil {
			return fmt.Errorf("%s: Ibarrier: %w", order, err)
		}
	}
	return c.Barrier(ctx)
}

// sendStatusCase: the Status of a completed send (an Isend's, a
// persistent send's round) describes the message as a receive's does:
// Source is the sender, this rank; Tag the message's tag; Count the
// elements sent - small (eager) and large, from Wait and from Test, on
// every backend; one to ProcNull has the null Status, as a receive from
// it.
func sendStatusCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	for i, count := range []int{3, 3000} {
		tag := 40 + 2*i
		want := comm.Status{Source: me, Tag: tag, Count: count}
		r, err := comm.Isend(c, make([]float64, count), right, tag)
		if err != nil {
			return err
		}
		p, err := comm.SendInit(c, make([]float64, count), right, tag+1)
		if err != nil {
			return err
		}
		defer p.Free()
		if err := p.Start(); err != nil {
			return err
		}
		for _, t := range []int{tag, tag + 1} {
			if _, err := comm.Recv(ctx, c, make([]float64, count), left, t); err != nil {
				return fmt.Errorf("Recv of %d float64 tag %d: %w", count, t, err)
			}
		}
		st, err := r.Wait(ctx)
		if err != nil || st != want {
			return fmt.Errorf("Isend of %d float64: Wait: status %+v, %v; want %+v", count, st, err, want)
		}
		if done, st, err := r.Test(); !done || err != nil || st != want {
			return fmt.Errorf("Isend of %d float64: Test after Wait: %v, status %+v, %v; want %+v", count, done, st, err, want)
		}
		want.Tag = tag + 1
		var done bool
		for !done {
			if done, st, err = p.Test(); err != nil {
				break
			}
			runtime.Gosched()
		}
		if err != nil || st != want {
			return fmt.Errorf("SendInit of %d float64: Test: status %+v, %v; want %+v", count, st, err, want)
		}
		if st, err := p.Wait(ctx); err != nil || st != want {
			return fmt.Errorf("SendInit of %d float64: Wait after Test: status %+v, %v; want %+v", count, st, err, want)
		}
	}
	// A send to ProcNull completes at once with the null Status, as a
	// receive from it does: no Source of a real rank.
	null := comm.Status{Source: comm.ProcNull, Tag: comm.AnyTag}
	r, err := comm.Isend(c, []float64{1}, comm.ProcNull, 5)
	if err != nil {
		return err
	}
	if st, err := r.Wait(ctx); err != nil || st != null {
		return fmt.Errorf("Isend to ProcNull: status %+v, %v; want %+v", st, err, null)
	}
	p, err := comm.SendInit(c, []float64{1}, comm.ProcNull, 5)
	if err != nil {
		return err
	}
	defer p.Free()
	if err := p.Start(); err != nil {
		return err
	}
	if st, err := p.Wait(ctx); err != nil || st != null {
		return fmt.Errorf("SendInit to ProcNull: status %+v, %v; want %+v", st, err, null)
	}
	return nil
}
