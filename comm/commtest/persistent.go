package commtest

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/comm"
)

// persistentCases are the cases of persistent requests (SendInit,
// RecvInit, Start, StartAll).
func persistentCases() []Case {
	return []Case{
		{"P2P/Persistent", persistentCase},
		{"P2P/PersistentAnySource", persistentAnySourceCase},
		{"Misuse/Persistent", misusePersistentCase},
	}
}

// persistentCase is a halo exchange on a line of ranks set up once and
// run for many rounds, below and above comm/local's eager limit: each
// round's send buffer holds new values, which the neighbours must see in
// that round; the ends talk to ProcNull. Odd rounds wait through WaitAny
// (the Persistent as a Notifier), even ones through WaitAll.
func persistentCase(ctx context.Context, c comm.Comm) error {
	me := c.Rank()
	left, right := lineNeighbours(c)
	for _, count := range []int{3, 1000} {
		toL, toR := make([]float64, count), make([]float64, count)
		fromL, fromR := make([]float64, count), make([]float64, count)
		ps := make([]comm.Persistent, 4)
		var err error
		if ps[0], err = comm.RecvInit(c, fromL, left, 1); err != nil {
			return fmt.Errorf("RecvInit from %d: %w", left, err)
		}
		if ps[1], err = comm.RecvInit(c, fromR, right, 2); err != nil {
			return fmt.Errorf("RecvInit from %d: %w", right, err)
		}
		if ps[2], err = comm.SendInit(c, toR, right, 1); err != nil {
			return fmt.Errorf("SendInit to %d: %w", right, err)
		}
		if ps[3], err = comm.SendInit(c, toL, left, 2); err != nil {
			return fmt.Errorf("SendInit to %d: %w", left, err)
		}
		// Before the first Start a Persistent is inactive: complete.
		if st, err := ps[0].Wait(ctx); err != nil || st != (comm.Status{}) {
			return fmt.Errorf("Wait before Start: %+v, %v", st, err)
		}
		val := func(r, round, i int) float64 { return float64(r*1_000_000 + round*1000 + i) }
		for round := range 40 {
			for i := range count {
				toL[i], toR[i] = val(me, round, i), -val(me, round, i)
			}
			if err := comm.StartAll(ps...); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
			reqs := []comm.Request{ps[0], ps[1], ps[2], ps[3]}
			sts := make([]comm.Status, 4)
			if round%2 == 0 {
				if sts, err = comm.WaitAll(ctx, reqs); err != nil {
					return fmt.Errorf("round %d: WaitAll: %w", round, err)
				}
			} else {
				for range 4 {
					d, err := comm.WaitAny(ctx, reqs)
					if err == nil {
						err = d.Err
					}
					if err != nil || d.Index < 0 {
						return fmt.Errorf("round %d: WaitAny: %+v, %v", round, d, err)
					}
					sts[d.Index] = d.Status
				}
			}
			for k, from := range []int{left, right} {
				st, got := sts[k], [][]float64{fromL, fromR}[k]
				if from == comm.ProcNull {
					if st.Source != comm.ProcNull || st.Count != 0 {
						return fmt.Errorf("round %d: receive from ProcNull: %+v", round, st)
					}
					continue
				}
				want := val(from, round, count-1)
				if k == 0 {
					want = -want // left's toR
				}
				if st.Source != from || st.Count != count || got[count-1] != want {
					return fmt.Errorf("round %d, %d elements: from rank %d: status %+v, last %v, want %v", round, count, from, st, got[count-1], want)
				}
			}
			// Completed: Wait again reports the round at once.
			if st, err := ps[0].Wait(ctx); err != nil || st != sts[0] {
				return fmt.Errorf("round %d: Wait after completion: %+v, %v; want %+v", round, st, err, sts[0])
			}
		}
		for i, p := range ps {
			if err := p.Free(); err != nil {
				return fmt.Errorf("Free %d: %w", i, err)
			}
		}
	}
	return c.Barrier(ctx)
}

// persistentAnySourceCase: rank 0 receives one message from every other
// rank per round through one persistent receive from AnySource.
func persistentAnySourceCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	buf := make([]int64, 2)
	if me != 0 {
		p, err := comm.SendInit(c, buf, 0, 9)
		if err != nil {
			return err
		}
		for round := range 10 {
			buf[0], buf[1] = int64(me), int64(round)
			if err := p.Start(); err != nil {
				return err
			}
			if _, err := p.Wait(ctx); err != nil {
				return err
			}
		}
		if err := p.Free(); err != nil {
			return err
		}
		return c.Barrier(ctx)
	}
	p, err := comm.RecvInit(c, buf, comm.AnySource, comm.AnyTag)
	if err != nil {
		return err
	}
	seen := make([]int, n) // messages per sender
	for range 10 * (n - 1) {
		if err := p.Start(); err != nil {
			return err
		}
		st, err := p.Wait(ctx)
		if err != nil {
			return err
		}
		if st.Source < 1 || st.Source >= n || st.Tag != 9 || buf[0] != int64(st.Source) || buf[1] != int64(seen[st.Source]) {
			return fmt.Errorf("AnySource round: status %+v, message %v, want round %d of rank %d", st, buf, seen[max(st.Source, 0)], st.Source)
		}
		seen[st.Source]++
	}
	if err := p.Free(); err != nil {
		return err
	}
	return c.Barrier(ctx)
}

// misusePersistentCase: bad peers and tags are refused at Init; Start
// while a round is active and Free of an active request wrap ErrActive;
// Start and Free after Free fail; a message longer than the buffer ends
// its round with ErrTruncated.
func misusePersistentCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	buf := make([]int32, 4)
	for what, init := range map[string]func() (comm.Persistent, error){
		"SendInit to rank size": func() (comm.Persistent, error) { return comm.SendInit(c, buf, n, 0) },
		"SendInit to AnySource": func() (comm.Persistent, error) { return comm.SendInit(c, buf, comm.AnySource, 0) },
		"SendInit with tag -5":  func() (comm.Persistent, error) { return comm.SendInit(c, buf, 0, -5) },
		"SendInit with AnyTag":  func() (comm.Persistent, error) { return comm.SendInit(c, buf, 0, comm.AnyTag) },
		"RecvInit from rank -7": func() (comm.Persistent, error) { return comm.RecvInit(c, buf, -7, 0) },
		"RecvInit with tag -9":  func() (comm.Persistent, error) { return comm.RecvInit(c, buf, 0, -9) },
	} {
		p, err := init()
		var ae *comm.ArgError
		if err == nil || !errors.Is(err, comm.ErrInvalidArg) || !errors.As(err, &ae) {
			if p != nil {
				_ = p.Free()
			}
			return fmt.Errorf("%s: %v, want a *comm.ArgError", what, err)
		}
	}
	// A receive from this rank itself, so that one rank can hold it active.
	r, err := comm.RecvInit(c, buf, me, 3)
	if err != nil {
		return err
	}
	if err := r.Start(); err != nil {
		return err
	}
	if err := r.Start(); !errors.Is(err, comm.ErrActive) {
		return fmt.Errorf("Start of an active request: %v, want ErrActive", err)
	}
	if err := r.Free(); !errors.Is(err, comm.ErrActive) {
		return fmt.Errorf("Free of an active request: %v, want ErrActive", err)
	}
	if done, _, err := r.Test(); done || err != nil {
		return fmt.Errorf("Test with no message sent: done %v, %v", done, err)
	}
	s, err := comm.SendInit(c, []int32{7, 8}, me, 3)
	if err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return err
	}
	st, err := r.Wait(ctx)
	if err != nil || st.Count != 2 || buf[0] != 7 || buf[1] != 8 {
		return fmt.Errorf("round with a 2-element message: %+v, %v, buffer %v", st, err, buf)
	}
	if _, err := s.Wait(ctx); err != nil {
		return err
	}
	// Eight elements into four: the round ends truncated. (The message is
	// sent first: Open MPI does not report the truncation of a message
	// from a process to itself into a receive posted before it.)
	long, err := comm.Isend(c, make([]int32, 8), me, 3)
	if err != nil {
		return fmt.Errorf("Isend to self: %w", err)
	}
	if err := r.Start(); err != nil {
		return fmt.Errorf("Start after a completed round: %w", err)
	}
	// The round completes (with an error) but nothing has collected its
	// result: it stays active, so that neither the next round nor Free
	// drops the error unseen.
	select {
	case <-r.Done():
	case <-ctx.Done():
		return fmt.Errorf("round with a longer message never completed: %w", ctx.Err())
	}
	if err := r.Start(); !errors.Is(err, comm.ErrActive) {
		return fmt.Errorf("Start after a round completed unreported: %v, want ErrActive", err)
	}
	if err := r.Free(); !errors.Is(err, comm.ErrActive) {
		return fmt.Errorf("Free after a round completed unreported: %v, want ErrActive", err)
	}
	if _, err := r.Wait(ctx); !errors.Is(err, comm.ErrTruncated) {
		return fmt.Errorf("round with a longer message: %v, want ErrTruncated", err)
	}
	if _, err := long.Wait(ctx); err != nil {
		return fmt.Errorf("Isend to self: %w", err)
	}
	for _, p := range []comm.Persistent{r, s} {
		if err := p.Free(); err != nil {
			return fmt.Errorf("Free: %w", err)
		}
		if err := p.Free(); !errors.Is(err, comm.ErrInvalidArg) {
			return fmt.Errorf("second Free: %v, want ErrInvalidArg", err)
		}
		if err := p.Start(); !errors.Is(err, comm.ErrInvalidArg) {
			return fmt.Errorf("Start after Free: %v, want ErrInvalidArg", err)
		}
	}
	return c.Barrier(ctx)
}
