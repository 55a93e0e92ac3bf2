package commtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pzgo/pz/comm"
)

// concurrentCollectivesCase: the Comm contract lets several goroutines of
// a rank call its methods at once. Each collective method then runs whole,
// one after another: two goroutines per rank each call AllReduce many
// times; every sum is right and nothing races. Which goroutine's call
// pairs with which across ranks is not fixed, so both make the same call
// (different calls would be a mismatch: the order of collectives must be
// the same on every rank). Point-to-point calls run alongside.
func concurrentCollectivesCase(ctx context.Context, c comm.Comm) error {
	const rounds = 50
	n := c.Size()
	me := c.Rank()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for g := range 2 {
		wg.Go(func() {
			for i := range rounds {
				sum, err := comm.AllReduce(ctx, c, []int64{1}, comm.Sum)
				if err != nil {
					errs[g] = fmt.Errorf("goroutine %d, round %d: %w", g, i, err)
					return
				}
				if sum[0] != int64(n) {
					errs[g] = fmt.Errorf("goroutine %d, round %d: sum of ones is %d, want %d", g, i, sum[0], n)
					return
				}
			}
		})
	}
	// A ring of messages on a third goroutine, meanwhile.
	wg.Go(func() {
		next, prev := (me+1)%n, (me+n-1)%n
		for i := range rounds {
			req, err := comm.Irecv(c, make([]int32, 1), prev, 900)
			if err != nil {
				errs[2] = err
				return
			}
			if err := comm.Send(ctx, c, []int32{int32(i)}, next, 900); err != nil {
				errs[2] = err
				return
			}
			if _, err := req.Wait(ctx); err != nil {
				errs[2] = err
				return
			}
		}
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// splitSharedCase: SplitShared gives the ranks on this node (all of them:
// the suite runs on one machine), ordered by key; the result works.
func splitSharedCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	// Reverse the order with the key.
	s, err := comm.SplitShared(ctx, c, n-me)
	if err != nil {
		return err
	}
	defer s.Free()
	if s.Size() != n {
		return fmt.Errorf("SplitShared: %d ranks on this node, want %d", s.Size(), n)
	}
	if want := n - 1 - me; s.Rank() != want {
		return fmt.Errorf("SplitShared: rank %d, want %d (ordered by key)", s.Rank(), want)
	}
	got, err := comm.AllReduce(ctx, s, []int64{int64(me)}, comm.Sum)
	if err != nil {
		return err
	}
	if got[0] != int64(n*(n-1)/2) {
		return fmt.Errorf("AllReduce on the shared communicator: %d", got[0])
	}
	return nil
}

// compareCase: Compare tells a communicator from its duplicate, a
// reordered split and a smaller one, as MPI_Comm_compare does.
func compareCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	dup, err := c.Split(ctx, 0, me)
	if err != nil {
		return err
	}
	defer dup.Free()
	rev, err := c.Split(ctx, 0, n-me)
	if err != nil {
		return err
	}
	defer rev.Free()
	half, err := c.Split(ctx, me%2, me)
	if err != nil {
		return err
	}
	defer half.Free()
	want := []struct {
		name string
		b    comm.Comm
		rel  comm.Relation
	}{
		{"itself", c, comm.Ident},
		{"a duplicate", dup, comm.Congruent},
		{"a reordered split", rev, comm.Similar},
		{"a split in two", half, comm.Unequal},
	}
	for _, w := range want {
		rel := w.rel
		if n == 1 && rel == comm.Similar {
			rel = comm.Congruent // one rank cannot be reordered
		}
		if n == 1 && w.name == "a split in two" {
			rel = comm.Congruent
		}
		got, err := comm.Compare(c, w.b)
		if err != nil {
			return fmt.Errorf("Compare with %s: %w", w.name, err)
		}
		if got != rel {
			return fmt.Errorf("Compare with %s: %v, want %v", w.name, got, rel)
		}
	}
	// A freed communicator, on either side, is an error wrapping
	// ErrFreed on both backends (comm/local compared it as if alive and
	// MPI returned a bare MPI_ERR_COMM; a user's trial found it).
	freed, err := c.Dup(ctx)
	if err != nil {
		return err
	}
	if err := freed.Free(); err != nil {
		return err
	}
	for _, p := range [][2]comm.Comm{{c, freed}, {freed, c}} {
		if rel, err := comm.Compare(p[0], p[1]); !errors.Is(err, comm.ErrFreed) {
			return fmt.Errorf("Compare with a freed communicator: %v, %v; want an error wrapping ErrFreed", rel, err)
		}
	}
	return nil
}

// ssendCase: Ssend delivers small and large messages around a ring, and
// to ProcNull it does nothing.
func ssendCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	for _, size := range []int{1, 100_000} {
		out := make([]int32, size)
		for i := range out {
			out[i] = int32(me*1000 + i%1000)
		}
		in := make([]int32, size)
		req, err := comm.Irecv(c, in, prev, 77)
		if err != nil {
			return err
		}
		if err := comm.Ssend(ctx, c, out, next, 77); err != nil {
			return fmt.Errorf("Ssend of %d: %w", size, err)
		}
		if _, err := req.Wait(ctx); err != nil {
			return err
		}
		for i, v := range in {
			if want := int32(prev*1000 + i%1000); v != want {
				return fmt.Errorf("Ssend of %d: element %d is %d, want %d", size, i, v, want)
			}
		}
	}
	return comm.Ssend(ctx, c, []int32{1}, comm.ProcNull, 77)
}

// selfSendWaitCase sends to the rank itself before receiving, a send that
// waits for its receive on every backend (an Ssend of any size; a Send of
// 1 MiB, past comm/local's 4 KiB and Open MPI's eager limit; MPICH
// buffers no send to self at all), with a short deadline: the error wraps
// context.DeadlineExceeded and says what to do instead (post the receive
// first, or Sendrecv), as docs/backends.md, "Sends that wait for their
// receive", does. A receive then takes the message where the backend
// left it posted (MPI cannot withdraw a send) or is canceled where it was
// withdrawn (comm/local).
func selfSendWaitCase(ctx context.Context, c comm.Comm) error {
	me := c.Rank()
	const tag = 43
	for _, cs := range []struct {
		call string
		n    int
		send func(ctx context.Context, buf []byte) error
	}{
		{"Ssend", 1, func(ctx context.Context, buf []byte) error { return comm.Ssend(ctx, c, buf, me, tag) }},
		{"Send", 1 << 20, func(ctx context.Context, buf []byte) error { return comm.Send(ctx, c, buf, me, tag) }},
	} {
		// The deadline is the event this case waits for: no receive
		// is posted, so the send cannot finish before it.
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := cs.send(short, make([]byte, cs.n))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s of %d bytes to the rank itself with no receive posted: %v; want an error wrapping context.DeadlineExceeded", cs.call, cs.n, err)
		}
		for _, want := range []string{fmt.Sprintf("%s on rank %d to rank %d tag %d", cs.call, me, me, tag), "post the receive first", "Sendrecv"} {
			if !strings.Contains(err.Error(), want) {
				return fmt.Errorf("%s of %d bytes to the rank itself: %q does not say %q", cs.call, cs.n, err, want)
			}
		}
		got := make([]byte, cs.n)
		r, err := comm.Irecv(c, got, me, tag)
		if err != nil {
			return fmt.Errorf("%s: Irecv of what may remain: %w", cs.call, err)
		}
		cr, err := canceler(r)
		if err != nil {
			return err
		}
		if err := cr.Cancel(); err != nil {
			return fmt.Errorf("%s: Cancel of the Irecv: %w", cs.call, err)
		}
		if _, err := r.Wait(ctx); err != nil && !errors.Is(err, comm.ErrCanceled) {
			return fmt.Errorf("%s: the Irecv of what may remain: %w", cs.call, err)
		}
	}
	return c.Barrier(ctx)
}
