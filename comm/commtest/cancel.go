package commtest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pzgo/pz/comm"
)

// cancelCases are the cases of request cancellation (comm.Canceler).
func cancelCases() []Case {
	return []Case{
		{"Cancel/Unmatched", cancelUnmatchedCase},
		{"Cancel/Matched", cancelMatchedCase},
		{"Cancel/WhileWaiting", cancelWhileWaitingCase},
		{"Cancel/Persistent", cancelPersistentCase},
		{"Cancel/ContextCause", cancelContextCauseCase},
		{"Cancel/SendDoneContext", sendDoneContextCase},
		{"Cancel/ErrorNames", cancelErrorNamesCase},
		{"Cancel/CompletedBeforeDoneContext", completedBeforeDoneContextCase},
		{"Cancel/Collectives", cancelCollectivesCase},
	}
}

// completedBeforeDoneContextCase: what has already arrived is delivered
// whatever the context (Request.Wait's doc): Wait with an ended context
// on a receive that has completed reports its status and leaves the data
// in its buffer, and Recv with an ended context of a message that is
// already there (Probe said so) receives it; only what is still pending
// gets the context's error.
func completedBeforeDoneContextCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	const tag = 38
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, count := range cancelCounts {
		what := fmt.Sprintf("%d float64", count)
		got := make([]float64, count)
		r, err := comm.Irecv(c, got, prev, tag)
		if err != nil {
			return fmt.Errorf("%s: Irecv: %w", what, err)
		}
		msg := make([]float64, count)
		msg[0], msg[count-1] = float64(me), 2
		if err := comm.Send(ctx, c, msg, next, tag); err != nil {
			return fmt.Errorf("%s: Send: %w", what, err)
		}
		nt, ok := r.(comm.Notifier)
		if !ok {
			return fmt.Errorf("%s: the request of Irecv (%T) does not announce its completion (comm.Notifier)", what, r)
		}
		select {
		case <-nt.Done():
		case <-ctx.Done():
			return fmt.Errorf("%s: the receive never completed: %w", what, ctx.Err())
		}
		st, err := r.Wait(done)
		if err != nil {
			return fmt.Errorf("%s: Wait with an ended context of a completed receive: %v; want its status", what, err)
		}
		if st.Source != prev || st.Tag != tag || st.Count != count || got[0] != float64(prev) || got[count-1] != 2 {
			return fmt.Errorf("%s: Wait with an ended context: status %+v, data %v ... %v; want source %d, tag %d, %d elements, %v ... 2", what, st, got[0], got[count-1], prev, tag, count, prev)
		}

		// A message already there, received with an ended context (the
		// send is non-blocking: every rank sends before it receives, and
		// a large message waits for its receiver).
		sr, err := comm.Isend(c, msg, next, tag+1)
		if err != nil {
			return fmt.Errorf("%s: Isend: %w", what, err)
		}
		if _, err := c.Probe(ctx, comm.Float64, prev, tag+1); err != nil {
			return fmt.Errorf("%s: Probe: %w", what, err)
		}
		clear(got)
		st, err = comm.Recv(done, c, got, prev, tag+1)
		if err != nil {
			return fmt.Errorf("%s: Recv with an ended context of a message already there: %v; want the message", what, err)
		}
		if st.Count != count || got[0] != float64(prev) || got[count-1] != 2 {
			return fmt.Errorf("%s: Recv with an ended context: status %+v, data %v ... %v; want %d elements, %v ... 2", what, st, got[0], got[count-1], count, prev)
		}
		if _, err := sr.Wait(ctx); err != nil {
			return fmt.Errorf("%s: the Isend: %w", what, err)
		}
		// Nothing pending is delivered: a receive that has no message
		// gets the context's error.
		if _, err := comm.Recv(done, c, got, prev, tag+2); !errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: Recv with an ended context and no message: %v; want context.Canceled", what, err)
		}
	}
	return c.Barrier(ctx)
}

// cancelContextCauseCase waits for an unmatched receive with a context
// the program canceled with a cause (context.WithCancelCause): Wait
// returns an error that errors.Is finds both as context.Canceled and as
// the cause, on every backend; the receive stays posted, and the
// message sent afterwards completes it.
func cancelContextCauseCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	const tag = 35
	got := make([]float64, 3)
	r, err := comm.Irecv(c, got, prev, tag)
	if err != nil {
		return fmt.Errorf("Irecv: %w", err)
	}
	stop := errors.New("user pressed stop")
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(stop)
	if _, err := r.Wait(cctx); !errors.Is(err, context.Canceled) || !errors.Is(err, stop) {
		return fmt.Errorf("Wait with a context canceled with a cause: %v; want an error wrapping context.Canceled and the cause", err)
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if err := comm.Send(ctx, c, []float64{1, 2, float64(me)}, next, tag); err != nil {
		return fmt.Errorf("Send: %w", err)
	}
	if _, err := r.Wait(ctx); err != nil {
		return fmt.Errorf("Wait after the send: %w", err)
	}
	return sameSlice("the receive completed after the canceled Wait", got, []float64{1, 2, float64(prev)})
}

// sendDoneContextCase sends (Send, Ssend; small and large) with a
// context that has ended before the call: every backend returns an error
// wrapping the context's (and its cause) and sends nothing, so that the
// message sent next on the same tag, with a live context, is the first the
// receiver gets. (comm/local sent a small Send whatever its context, where
// comm/mpi refused it.)
func sendDoneContextCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	const tag = 36
	stop := errors.New("user pressed stop")
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(stop)
	for _, count := range cancelCounts {
		for _, call := range []struct {
			name string
			send func(ctx context.Context, buf []float64) error
		}{
			{"Send", func(ctx context.Context, buf []float64) error { return comm.Send(ctx, c, buf, next, tag) }},
			{"Ssend", func(ctx context.Context, buf []float64) error { return comm.Ssend(ctx, c, buf, next, tag) }},
		} {
			what := fmt.Sprintf("%s of %d float64 with a done context", call.name, count)
			stale := make([]float64, count)
			for i := range stale {
				stale[i] = -1
			}
			if err := call.send(cctx, stale); !errors.Is(err, context.Canceled) || !errors.Is(err, stop) {
				return fmt.Errorf("%s: %v; want an error wrapping context.Canceled and the cause", what, err)
			}
			got := make([]float64, count)
			r, err := comm.Irecv(c, got, prev, tag)
			if err != nil {
				return fmt.Errorf("%s: Irecv: %w", what, err)
			}
			fresh := make([]float64, count)
			fresh[0], fresh[count-1] = float64(me), 1
			if err := comm.Send(ctx, c, fresh, next, tag); err != nil {
				return fmt.Errorf("%s: Send after it: %w", what, err)
			}
			if _, err := r.Wait(ctx); err != nil {
				return fmt.Errorf("%s: the receive after it: %w", what, err)
			}
			if got[0] != float64(prev) || got[count-1] != 1 {
				return fmt.Errorf("%s: received %v ... %v first, want the message sent after it (%v ... 1): the send was delivered", what, got[0], got[count-1], prev)
			}
		}
	}
	return nil
}

// cancelErrorNamesCase checks that the errors of requests that end
// without a message name the call that made the request, the rank, the
// peer and the tag alike on every backend: a pending Irecv waited for
// with a done context, a canceled Irecv and a canceled persistent receive
// (RecvInit), the persistent receive pending when its communicator is
// freed, a Send whose context had ended, and calls on a freed
// communicator.
func cancelErrorNamesCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	const tag = 37
	from := fmt.Sprintf(" on rank %d from rank %d tag %d: ", me, prev, tag)
	named := func(what string, err error, want string) error {
		if err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("%s: %v; want an error that says %q", what, err, want)
		}
		return nil
	}
	dctx, cancel := context.WithCancel(ctx)
	cancel()
	r, err := comm.Irecv(c, make([]float64, 1), prev, tag)
	if err != nil {
		return err
	}
	_, err = r.Wait(dctx)
	if err := named("Wait with a done context of an Irecv", err, "Irecv"+from); err != nil {
		return err
	}
	if err := r.(comm.Canceler).Cancel(); err != nil {
		return err
	}
	_, err = r.Wait(ctx)
	if err := named("a canceled Irecv", err, "Irecv"+from); err != nil {
		return err
	}
	p, err := comm.RecvInit(c, make([]float64, 1), prev, tag)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	if err := p.Cancel(); err != nil {
		return err
	}
	_, err = p.Wait(ctx)
	if err := named("a canceled persistent receive", err, "RecvInit"+from); err != nil {
		return err
	}
	if err := p.Free(); err != nil {
		return err
	}
	err = comm.Send(dctx, c, []float64{1}, next, tag)
	if err := named("a Send with a done context", err, fmt.Sprintf("Send on rank %d to rank %d tag %d: ", me, next, tag)); err != nil {
		return err
	}
	d, err := c.Dup(ctx)
	if err != nil {
		return err
	}
	p, err = comm.RecvInit(d, make([]float64, 1), prev, tag)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	if err := d.Free(); err != nil {
		return err
	}
	_, err = p.Wait(ctx)
	if err := named("a persistent receive pending at Free", err, "RecvInit"+from); err != nil {
		return err
	}
	// Calls on the freed communicator name the call and the rank.
	if err := named("Start on a freed communicator", p.Start(), fmt.Sprintf("Start on rank %d: ", me)); err != nil {
		return err
	}
	_, err = comm.Isend(d, []float64{1}, next, tag)
	if err := named("Isend on a freed communicator", err, fmt.Sprintf("Isend on rank %d: ", me)); err != nil {
		return err
	}
	_, err = d.Ibarrier()
	if err := named("Ibarrier on a freed communicator", err, fmt.Sprintf("Ibarrier on rank %d: ", me)); err != nil {
		return err
	}
	if err := p.Free(); err != nil {
		return err
	}
	// No rank returns while another's receive from it is pending (on
	// comm/local that would fail the receive first, naming the rank).
	return c.Barrier(ctx)
}

// cancelCollectivesCase: a collective called on every rank with a
// context that has already ended returns an error wrapping
// context.Canceled that names the call the program made and the rank
// ("AllReduce on rank 1: "), as the other errors of both backends do, on
// one rank as on several and with the agreement step on or off (the
// caller's setting; a duplicate keeps it). The collective is abandoned,
// which breaks its communicator, so each call gets a duplicate of its
// own.
func cancelCollectivesCase(ctx context.Context, c comm.Comm) error {
	me, root := c.Rank(), c.Size()-1
	done, cancel := context.WithCancel(ctx)
	cancel()
	alloc := func(n int) []byte { return make([]byte, 8*n) }
	one := func() comm.Buf { return comm.BufOf([]float64{float64(me)}) }
	calls := []struct {
		name string
		run  func(ctx context.Context, d comm.Comm) error
	}{
		{"AllReduce", func(ctx context.Context, d comm.Comm) error {
			return d.AllReduce(ctx, one(), one(), comm.Sum)
		}},
		{"Barrier", func(ctx context.Context, d comm.Comm) error { return d.Barrier(ctx) }},
		{"Bcast", func(ctx context.Context, d comm.Comm) error { return d.Bcast(ctx, one(), root) }},
		{"Reduce", func(ctx context.Context, d comm.Comm) error {
			return d.Reduce(ctx, one(), one(), comm.Sum, root)
		}},
		{"AllGather", func(ctx context.Context, d comm.Comm) error {
			_, err := d.AllGather(ctx, one(), alloc)
			return err
		}},
		{"Gather", func(ctx context.Context, d comm.Comm) error {
			_, err := d.Gather(ctx, one(), root, alloc)
			return err
		}},
		{"Scatter", func(ctx context.Context, d comm.Comm) error {
			counts := make([]int, c.Size())
			for i := range counts {
				counts[i] = 1
			}
			send := comm.BufOf(make([]float64, c.Size()))
			return d.Scatter(ctx, send, counts, root, alloc)
		}},
		{"Alltoall", func(ctx context.Context, d comm.Comm) error {
			counts := make([]int, c.Size())
			for i := range counts {
				counts[i] = 1
			}
			_, err := d.Alltoall(ctx, comm.BufOf(make([]float64, c.Size())), counts, alloc)
			return err
		}},
	}
	want := func(call string) string { return fmt.Sprintf("%s on rank %d: ", call, me) }
	for _, k := range calls {
		d, err := c.Dup(ctx)
		if err != nil {
			return fmt.Errorf("%s: Dup: %w", k.name, err)
		}
		err = k.run(done, d)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), want(k.name)) {
			return fmt.Errorf("%s with a canceled context: %v; want an error wrapping context.Canceled that says %q", k.name, err, want(k.name))
		}
		if err := d.Free(); err != nil {
			return fmt.Errorf("%s: Free of the duplicate it broke: %w", k.name, err)
		}
	}
	return nil
}

// cancelCounts are the message lengths (float64s) of the cancel cases:
// below and above comm/local's eager limit (and MPI's).
var cancelCounts = []int{3, 20000}

// canceler returns r's Cancel, or an error if r has none.
func canceler(r comm.Request) (comm.Canceler, error) {
	c, ok := r.(comm.Canceler)
	if !ok {
		return nil, fmt.Errorf("%T is no comm.Canceler", r)
	}
	return c, nil
}

// canceled checks that r (waited for after its Cancel) reports a
// cancellation: an error wrapping comm.ErrCanceled and an empty Status,
// from Wait and from Test, and that buf still holds fill everywhere.
func canceled(ctx context.Context, what string, r comm.Request, buf []float64, fill float64) error {
	st, err := r.Wait(ctx)
	if !errors.Is(err, comm.ErrCanceled) || st != (comm.Status{}) {
		return fmt.Errorf("%s: Wait after Cancel: %+v, %v; want an empty Status and comm.ErrCanceled", what, st, err)
	}
	if done, st, err := r.Test(); !done || !errors.Is(err, comm.ErrCanceled) || st != (comm.Status{}) {
		return fmt.Errorf("%s: Test after Cancel: %v, %+v, %v; want done, comm.ErrCanceled", what, done, st, err)
	}
	for i, v := range buf {
		if v != fill {
			return fmt.Errorf("%s: the canceled receive wrote element %d: %v, want %v untouched", what, i, v, fill)
		}
	}
	return nil
}

// cancelUnmatchedCase cancels receives no message matches (from the
// previous rank of a ring, and from any source with any tag): each
// reports its cancellation, a second Cancel does nothing, and the
// message sent afterwards with that tag goes to a new receive, not to
// the canceled one. A send cannot be canceled.
func cancelUnmatchedCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	const tag, fill = 31, -1.0
	for _, count := range cancelCounts {
		old, anyBuf := make([]float64, count), make([]float64, count)
		for i := range old {
			old[i], anyBuf[i] = fill, fill
		}
		// Nothing with this tag is sent before the barrier below.
		r, err := comm.Irecv(c, old, prev, tag)
		if err != nil {
			return fmt.Errorf("Irecv: %w", err)
		}
		anyReq, err := comm.Irecv(c, anyBuf, comm.AnySource, comm.AnyTag)
		if err != nil {
			return fmt.Errorf("Irecv from any source: %w", err)
		}
		for _, q := range []comm.Request{r, anyReq} {
			cr, err := canceler(q)
			if err != nil {
				return err
			}
			if err := cr.Cancel(); err != nil {
				return fmt.Errorf("Cancel of an unmatched Irecv of %d: %w", count, err)
			}
			if err := cr.Cancel(); err != nil {
				return fmt.Errorf("second Cancel of an unmatched Irecv of %d: %w", count, err)
			}
		}
		if err := canceled(ctx, fmt.Sprintf("Irecv of %d from rank %d", count, prev), r, old, fill); err != nil {
			return err
		}
		if err := canceled(ctx, fmt.Sprintf("Irecv of %d from any source", count), anyReq, anyBuf, fill); err != nil {
			return err
		}
		// Cancel after the cancellation completed does nothing.
		if err := r.(comm.Canceler).Cancel(); err != nil {
			return fmt.Errorf("Cancel after Wait: %w", err)
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		send := ids(floatSpec[float64]("float64"), me*100, count)
		sr, err := comm.Isend(c, send, next, tag)
		if err != nil {
			return fmt.Errorf("Isend: %w", err)
		}
		if cs, ok := sr.(comm.Canceler); ok {
			if err := cs.Cancel(); !errors.Is(err, comm.ErrInvalidArg) {
				return fmt.Errorf("Cancel of an Isend: %v, want an error wrapping comm.ErrInvalidArg", err)
			}
		}
		got := make([]float64, count)
		st, err := comm.Recv(ctx, c, got, prev, tag)
		if err != nil {
			return fmt.Errorf("Recv after the cancel: %w", err)
		}
		if st.Source != prev || st.Tag != tag || st.Count != count {
			return fmt.Errorf("Recv after the cancel: status %+v", st)
		}
		if err := sameSlice(fmt.Sprintf("Recv of %d after the cancel", count), got, ids(floatSpec[float64]("float64"), prev*100, count)); err != nil {
			return err
		}
		if _, err := sr.Wait(ctx); err != nil {
			return fmt.Errorf("Isend after its Cancel was refused: %w", err)
		}
		for i := range old {
			if old[i] != fill || anyBuf[i] != fill {
				return fmt.Errorf("a canceled Irecv of %d received the later message (element %d: %v, %v)", count, i, old[i], anyBuf[i])
			}
		}
	}
	return c.Barrier(ctx)
}

// cancelMatchedCase cancels receives that have matched their message
// (its synchronous send has returned on every rank): the cancellation
// fails, and the request reports the message, whole, without error.
// Cancel after Wait does nothing, and Wait reports the same again.
func cancelMatchedCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	const tag = 32
	s := floatSpec[float64]("float64")
	for _, count := range cancelCounts {
		got := make([]float64, count)
		r, err := comm.Irecv(c, got, prev, tag)
		if err != nil {
			return fmt.Errorf("Irecv: %w", err)
		}
		// Every receive is posted before any send, and every send has
		// been matched before any Cancel.
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		if err := comm.Ssend(ctx, c, ids(s, me*100, count), next, tag); err != nil {
			return fmt.Errorf("Ssend: %w", err)
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		cr, err := canceler(r)
		if err != nil {
			return err
		}
		if err := cr.Cancel(); err != nil {
			return fmt.Errorf("Cancel of a matched Irecv of %d: %w", count, err)
		}
		st, err := r.Wait(ctx)
		if err != nil {
			return fmt.Errorf("Irecv of %d canceled after its match: %w; want the message", count, err)
		}
		if st.Source != prev || st.Tag != tag || st.Count != count {
			return fmt.Errorf("Irecv of %d canceled after its match: status %+v", count, st)
		}
		if err := sameSlice(fmt.Sprintf("Irecv of %d canceled after its match", count), got, ids(s, prev*100, count)); err != nil {
			return err
		}
		if err := cr.Cancel(); err != nil {
			return fmt.Errorf("Cancel after Wait: %w", err)
		}
		if again, err := r.Wait(ctx); err != nil || again != st {
			return fmt.Errorf("Wait after Cancel after Wait: %+v, %v; want %+v", again, err, st)
		}
	}
	return c.Barrier(ctx)
}

// cancelWhileWaitingCase cancels a receive that another goroutine waits
// for with a context that cannot end (under MPI, blocked in MPI_Wait):
// that Wait returns the cancellation.
func cancelWhileWaitingCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	prev := (me + n - 1) % n
	const tag, fill = 33, -1.0
	buf := []float64{fill, fill, fill}
	r, err := comm.Irecv(c, buf, prev, tag)
	if err != nil {
		return fmt.Errorf("Irecv: %w", err)
	}
	type result struct {
		st  comm.Status
		err error
	}
	res := make(chan result, 1)
	go func() {
		st, err := r.Wait(context.Background())
		res <- result{st, err}
	}()
	cr, err := canceler(r)
	if err != nil {
		return err
	}
	if err := cr.Cancel(); err != nil {
		return fmt.Errorf("Cancel: %w", err)
	}
	select {
	case got := <-res:
		if !errors.Is(got.err, comm.ErrCanceled) || got.st != (comm.Status{}) {
			return fmt.Errorf("Wait on another goroutine: %+v, %v; want comm.ErrCanceled", got.st, got.err)
		}
	case <-ctx.Done():
		return fmt.Errorf("Wait on another goroutine did not return after Cancel: %w", ctx.Err())
	}
	if err := canceled(ctx, "Irecv waited for on another goroutine", r, buf, fill); err != nil {
		return err
	}
	return c.Barrier(ctx)
}

// cancelPersistentCase cancels a round of a persistent receive: the
// round reports its cancellation, the Persistent is inactive and starts
// again, and its next round receives the message sent afterwards.
func cancelPersistentCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	const tag, fill = 34, -1.0
	s := floatSpec[float64]("float64")
	for _, count := range cancelCounts {
		buf := make([]float64, count)
		for i := range buf {
			buf[i] = fill
		}
		p, err := comm.RecvInit(c, buf, prev, tag)
		if err != nil {
			return fmt.Errorf("RecvInit: %w", err)
		}
		if err := p.Cancel(); err != nil {
			return fmt.Errorf("Cancel before the first Start: %w", err)
		}
		if err := p.Start(); err != nil {
			return fmt.Errorf("Start: %w", err)
		}
		if err := p.Cancel(); err != nil {
			return fmt.Errorf("Cancel of a round of %d: %w", count, err)
		}
		if err := canceled(ctx, fmt.Sprintf("persistent receive of %d", count), p, buf, fill); err != nil {
			return err
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		if err := p.Start(); err != nil {
			return fmt.Errorf("Start after a canceled round: %w", err)
		}
		sr, err := comm.Isend(c, ids(s, me*100, count), next, tag)
		if err != nil {
			return fmt.Errorf("Isend: %w", err)
		}
		st, err := p.Wait(ctx)
		if err != nil || st.Source != prev || st.Count != count {
			return fmt.Errorf("round after a canceled one: %+v, %v", st, err)
		}
		if err := sameSlice(fmt.Sprintf("round of %d after a canceled one", count), buf, ids(s, prev*100, count)); err != nil {
			return err
		}
		if err := p.Cancel(); err != nil {
			return fmt.Errorf("Cancel of a completed round: %w", err)
		}
		if _, err := sr.Wait(ctx); err != nil {
			return fmt.Errorf("Isend: %w", err)
		}
		if err := p.Free(); err != nil {
			return fmt.Errorf("Free: %w", err)
		}
	}
	return c.Barrier(ctx)
}
