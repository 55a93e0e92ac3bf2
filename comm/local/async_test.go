package local_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// A non-blocking collective that the other ranks never start: Wait with a
// deadline returns it, Free ends the engine's goroutine, and the request
// then completes with an error instead of staying pending for ever.
func TestFreeEndsUnmatchedNonblockingCollective(t *testing.T) {
	before := runtime.NumGoroutine()
	comms, err := local.New(2)
	require.NoError(t, err)
	req, err := comms[0].Ibarrier()
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = req.Wait(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	done, _, _ := req.Test()
	require.False(t, done, "an Ibarrier that rank 1 never started completed")

	require.NoError(t, comms[0].Free())
	wctx, wcancel := context.WithTimeout(context.Background(), testTimeout)
	defer wcancel()
	_, err = req.Wait(wctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "Ibarrier on rank 0")

	_, err = comms[0].Iallreduce(comm.BufOf([]int64{1}), comm.BufOf(make([]int64, 1)), comm.Sum)
	require.ErrorIs(t, err, comm.ErrFreed)
	require.NoError(t, comms[1].Free())
	waitGoroutines(t, before)
}

// The engine's goroutine exists only while a collective is pending.
func TestNonblockingEngineExitsWhenIdle(t *testing.T) {
	before := runtime.NumGoroutine()
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		for i := range 20 {
			out := make([]int64, 1)
			req, err := c.Iallreduce(comm.BufOf([]int64{int64(i)}), comm.BufOf(out), comm.Sum)
			if err != nil {
				return err
			}
			if _, err := req.Wait(ctx); err != nil {
				return err
			}
			if out[0] != int64(3*i) {
				return errors.New("wrong sum")
			}
		}
		return nil
	})
	require.NoError(t, err)
	waitGoroutines(t, before)
}

// A rank that fails breaks the others' pending non-blocking collectives.
func TestFailedRankBreaksNonblockingCollective(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	boom := errors.New("boom")
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 2 {
			return boom
		}
		req, err := c.Ibarrier()
		if err != nil {
			return err
		}
		_, err = req.Wait(context.Background()) // no deadline: the broken world must end it
		return err
	})
	errs := rankErrors(t, err)
	require.ErrorIs(t, errs[2], boom)
	for r := range 2 {
		require.ErrorIs(t, errs[r], comm.ErrBroken, "rank %d", r)
		assert.Contains(t, errs[r].Error(), "rank 2 failed")
	}
}

// Probing with another datatype than the sender's is a mismatch; a matched
// probe that finds one consumes the message, releasing its sender.
func TestProbeDatatypeMismatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 0 {
			// 8 KiB: handed over by reference, so Send waits for the receiver.
			return comm.Send(ctx, c, make([]int32, 2048), 1, 5)
		}
		if _, err := c.Probe(ctx, comm.Float64, 0, 5); !errors.Is(err, comm.ErrMismatch) {
			return errors.New("Probe with the wrong datatype: no mismatch: " + errString(err))
		}
		if _, err := c.Mprobe(ctx, comm.Float64, 0, 5); !errors.Is(err, comm.ErrMismatch) {
			return errors.New("Mprobe with the wrong datatype: no mismatch: " + errString(err))
		}
		if ok, _, err := c.Iprobe(comm.Int32, 0, 5); ok || err != nil {
			return errors.New("the mismatched message is still there after Mprobe")
		}
		return nil
	})
	require.NoError(t, err)
}

// A blocked Probe returns when its context ends, and leaves nothing behind:
// a later message is received normally.
func TestProbeCanceled(t *testing.T) {
	comms, err := local.New(2)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	probed := make(chan error, 1)
	go func() {
		_, err := comms[1].Probe(ctx, comm.Int64, comm.AnySource, comm.AnyTag)
		probed <- err
	}()
	cancel()
	require.ErrorIs(t, <-probed, context.Canceled)

	bg, bgCancel := context.WithTimeout(context.Background(), testTimeout)
	defer bgCancel()
	require.NoError(t, comm.Send(bg, comms[0], []int64{42}, 1, 1))
	st, err := comms[1].Probe(bg, comm.Int64, comm.AnySource, comm.AnyTag)
	require.NoError(t, err)
	assert.Equal(t, comm.Status{Source: 0, Tag: 1, Count: 1}, st)
}

// WaitAll returns at its deadline and leaves the pending requests in the
// set; WaitAny with no active request returns -1 at once.
func TestRequestSetDeadline(t *testing.T) {
	comms, err := local.New(2)
	require.NoError(t, err)
	a, b := make([]int64, 1), make([]int64, 1)
	ra, err := comm.Irecv(comms[1], a, 0, 1)
	require.NoError(t, err)
	rb, err := comm.Irecv(comms[1], b, 0, 2)
	require.NoError(t, err)
	bg, bgCancel := context.WithTimeout(context.Background(), testTimeout)
	defer bgCancel()
	require.NoError(t, comm.Send(bg, comms[0], []int64{7}, 1, 1))

	reqs := []comm.Request{ra, rb}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = comm.WaitAll(ctx, reqs)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, reqs[0], "the completed request stays in the set")
	assert.NotNil(t, reqs[1], "the pending request left the set")

	_, err = comm.WaitAny(ctx, reqs)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, comm.Send(bg, comms[0], []int64{8}, 1, 2))
	cp, err := comm.WaitAny(bg, reqs)
	require.NoError(t, err)
	assert.Equal(t, 1, cp.Index)
	assert.Equal(t, []int64{7}, a)
	assert.Equal(t, []int64{8}, b)
	cp, err = comm.WaitAny(bg, reqs)
	require.NoError(t, err)
	assert.Equal(t, -1, cp.Index)
	cps, err := comm.WaitSome(bg, reqs)
	require.NoError(t, err)
	assert.Empty(t, cps)
}

// waitGoroutines waits until no more goroutines run than before; exiting
// goroutines take a moment to be counted out.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines: %d before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// A counts slice of Iallgather that is not one element per rank, longer
// or shorter, is an *ArgError of that rank's Request naming the rank; the
// collective completes all the same, and the other ranks get their result.
func TestNonblockingCountsSliceLength(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, n := range []int{2, 5} {
		err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
			counts := make([]int, 3)
			if c.Rank() == 1 {
				counts = make([]int, n)
			}
			var out []byte
			r, err := c.Iallgather(comm.BufOf([]int32{int32(c.Rank())}), func(k int) []byte { out = make([]byte, 4*k); return out }, counts)
			if err != nil {
				return err
			}
			_, err = r.Wait(ctx)
			if c.Rank() != 1 {
				if err != nil {
					return err
				}
				if len(out) != 12 || counts[2] != 1 {
					return errors.New("the other ranks' result is wrong")
				}
				return nil
			}
			var ae *comm.ArgError
			if !errors.As(err, &ae) || ae.Rank != 1 || ae.Op != "Iallgather" {
				return errors.New("want an *ArgError of Iallgather on rank 1, got " + errString(err))
			}
			return nil
		})
		require.NoError(t, err, "a counts slice of %d elements", n)
	}
}
