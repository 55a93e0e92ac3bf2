//go:build mpi

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// TestNBCAfterBreak: rank 0 starts a non-blocking collective on a Dup
// that the other ranks have not started, then abandons a blocking
// collective on the Dup (its ctx ended before the call, or, in the
// non-blocking form, during it): the Dup is broken on rank 0. Rank 0's
// request ran on the Dup's private duplicate, which the break did not
// reach: Wait with context.Background, a select on Done and comm.WaitAny
// waited for ever (Wait with a ctx that can end, until it did). The
// request now ends with rank 0's break (comm.ErrBroken); the collective
// the engine started stays inside MPI until the other ranks start theirs,
// which they do afterwards so that nothing is left in MPI. The other
// ranks learn nothing of rank 0's break (MPI cannot tell them): that is
// documented, not tested. Under a watchdog that ends the job on a hang.
func TestNBCAfterBreak(t *testing.T) {
	if world.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	posts := []struct {
		name string
		post func(c comm.Comm) (comm.Request, error)
	}{
		{"Ibarrier", func(c comm.Comm) (comm.Request, error) { return c.Ibarrier() }},
		{"Iallreduce", func(c comm.Comm) (comm.Request, error) {
			return c.Iallreduce(comm.BufOf([]int64{1}), comm.BufOf(make([]int64, 1)), comm.Sum)
		}},
	}
	waits := []struct {
		name string
		wait func(ctx context.Context, r comm.Request) error
	}{
		{"Wait(Background)", func(_ context.Context, r comm.Request) error {
			_, err := r.Wait(context.Background())
			return err
		}},
		{"Wait(ctx)", func(ctx context.Context, r comm.Request) error {
			_, err := r.Wait(ctx)
			if ctx.Err() != nil {
				return fmt.Errorf("the test's deadline passed first: %w", err)
			}
			return err
		}},
		{"Done", func(ctx context.Context, r comm.Request) error {
			select {
			case <-r.(comm.Notifier).Done():
			case <-ctx.Done():
				return errors.New("the test's deadline passed first")
			}
			done, _, err := r.Test()
			if !done {
				return errors.New("Done closed, Test says not done")
			}
			return err
		}},
		{"WaitAny", func(ctx context.Context, r comm.Request) error {
			got, err := comm.WaitAny(ctx, []comm.Request{r})
			if err != nil {
				return fmt.Errorf("WaitAny: %w", err)
			}
			return got.Err
		}},
	}
	for _, during := range []bool{false, true} {
		for _, p := range posts {
			for _, w := range waits {
				t.Run(fmt.Sprintf("%s/%s/ended-during=%v", p.name, w.name, during), func(t *testing.T) {
					nbcAfterBreak(t, p.post, w.wait, during)
				})
			}
		}
	}
}

// nbcAfterBreak is one case of TestNBCAfterBreak.
func nbcAfterBreak(t *testing.T, post func(comm.Comm) (comm.Request, error), wait func(context.Context, comm.Request) error, during bool) {
	watchdog(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := splitAll(t)
	if during && c.Blocking() {
		t.Skip(skipBlockingCtx)
	}
	sig := splitAll(t) // rank 0 tells the others it has its answer
	dc, err := c.Dup(ctx)
	require.NoError(t, err)
	d := dc.(*mpi.Comm)
	t.Cleanup(func() { _ = d.Free() })
	if d.Rank() == 0 {
		r, err := post(d)
		require.NoError(t, err)
		actx, stop := context.WithTimeout(ctx, 50*time.Millisecond)
		if !during {
			stop()
		}
		_, err = comm.AllReduce(actx, d, []int64{1}, comm.Sum) // no other rank calls it
		stop()
		require.ErrorIs(t, err, comm.ErrBroken)
		err = wait(ctx, r)
		require.ErrorIs(t, err, comm.ErrBroken, "the pending request after its communicator broke")
		require.ErrorContains(t, err, "broke while it was pending")
		// A collective started now fails at once.
		_, err = post(d)
		require.ErrorIs(t, err, comm.ErrBroken)
		for r := 1; r < sig.Size(); r++ {
			require.NoError(t, comm.Send(ctx, sig, []int64{1}, r, 9))
		}
	} else {
		_, err := comm.Recv(ctx, sig, []int64{0}, 0, 9)
		require.NoError(t, err)
		// The collective rank 0's engine started completes with
		// these ranks' (rank 0's request reported the break already).
		r, err := post(d)
		require.NoError(t, err)
		_, err = r.Wait(ctx)
		require.NoError(t, err, "rank %d", d.Rank())
	}
	// Every engine is out of MPI once every rank is here.
	_, err = comm.AllReduce(ctx, sig, []int64{1}, comm.Sum)
	require.NoError(t, err)
}
