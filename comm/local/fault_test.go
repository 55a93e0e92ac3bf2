package local_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// testTimeout bounds every test that could hang if the backend were wrong.
const testTimeout = 30 * time.Second

func rankErrors(t *testing.T, err error) map[int]error {
	t.Helper()
	out := map[int]error{}
	var joined interface{ Unwrap() []error }
	require.ErrorAs(t, err, &joined)
	for _, e := range joined.Unwrap() {
		var re *comm.RankError
		require.ErrorAs(t, e, &re)
		out[re.Rank] = re.Err
	}
	return out
}

// A rank that never arrives: the others' deadline passes and the error
// names it.
func TestDeadlineNamesMissingRanks(t *testing.T) {
	inModes(t, func(t *testing.T, _ bool) {
		comms, err := local.New(4)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for r := range 3 { // rank 3 never calls AllReduce
			wg.Go(func() {
				_, errs[r] = comm.AllReduce(ctx, comms[r], []float64{1}, comm.Sum)
			})
		}
		wg.Wait()
		for r := range 3 {
			require.Error(t, errs[r], "rank %d", r)
		}
		// The first rank whose deadline fired names rank 3 and wraps the
		// deadline; the others either do the same or report the broken
		// communicator, which names the rank that gave up and rank 3, the
		// one that never came.
		named := 0
		for r := range 3 {
			msg := errs[r].Error()
			// Rank 3 among those that had not arrived (on a loaded
			// machine another rank may not have reached AllReduce
			// within the deadline either: "ranks 1, 3 had not arrived").
			assert.Regexp(t, `\branks? ([\d, -]*[ ,-])?3( \(\d ranks\))? had not arrived`, msg, "rank %d", r)
			if errors.Is(errs[r], context.DeadlineExceeded) {
				named++
			} else {
				assert.ErrorIs(t, errs[r], comm.ErrBroken, "rank %d", r)
			}
		}
		assert.GreaterOrEqual(t, named, 1)
		// The group is broken for the late rank too.
		_, err = comm.AllReduce(context.Background(), comms[3], []float64{1}, comm.Sum)
		assert.ErrorIs(t, err, comm.ErrBroken)
	})
}

// A rank that panics: every rank returns, and the panic is reported with
// its stack for that rank.
func TestPanicBreaksWorld(t *testing.T) {
	inModes(t, func(t *testing.T, _ bool) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
			if c.Rank() == 1 {
				panic("boom on rank 1")
			}
			// The others block in a collective rank 1 never joins.
			_, err := comm.AllReduce(ctx, c, []int32{1}, comm.Sum)
			return err
		})
		require.Error(t, err)
		errs := rankErrors(t, err)
		var pe *comm.PanicError
		require.ErrorAs(t, errs[1], &pe)
		assert.Equal(t, "boom on rank 1", pe.Value)
		assert.Contains(t, string(pe.Stack), "TestPanicBreaksWorld")
		for _, r := range []int{0, 2} {
			require.Error(t, errs[r])
			assert.Contains(t, errs[r].Error(), "rank 1 failed: panic: boom on rank 1", "rank %d", r)
			assert.NotContains(t, errs[r].Error(), "TestPanicBreaksWorld", "rank %d: the stack is rank 1's, once", r)
		}
		// The rank that failed leads the joined error.
		var re *comm.RankError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 1, re.Rank)
		assert.True(t, strings.HasPrefix(err.Error(), "rank 1: "), err.Error())
	})
}

// A rank returning an error cancels the others' context and unblocks a
// receive that would otherwise wait forever.
func TestErrorCancelsOthers(t *testing.T) {
	inModes(t, func(t *testing.T, _ bool) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		boom := errors.New("boom")
		err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
			switch c.Rank() {
			case 0:
				return boom
			case 1:
				_, _, err := comm.RecvNew[int8](ctx, c, 2, 0) // never sent
				return err
			default:
				<-ctx.Done()
				return context.Cause(ctx)
			}
		})
		errs := rankErrors(t, err)
		assert.ErrorIs(t, errs[0], boom)
		require.Error(t, errs[1])
		assert.Contains(t, errs[1].Error(), "rank 0 failed")
		require.Error(t, errs[2])
		assert.Contains(t, errs[2].Error(), "rank 0 failed")
	})
}

// A context canceled while a rank waits in a collective: that rank gets
// the context's error, the others ErrBroken, nobody hangs.
func TestCancelMidCollective(t *testing.T) {
	inModes(t, func(t *testing.T, _ bool) {
		for _, size := range []int{8, 1 << 20} { // eager and in-place paths
			comms, err := local.New(3)
			require.NoError(t, err)
			ctx0, cancel0 := context.WithCancel(context.Background())
			errs := make([]error, 3)
			var wg sync.WaitGroup
			wg.Go(func() { _, errs[0] = comm.AllReduce(ctx0, comms[0], make([]float64, size/8), comm.Sum) })
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				_, errs[1] = comm.AllReduce(ctx, comms[1], make([]float64, size/8), comm.Sum)
			})
			// Rank 2 is late; rank 0 gives up first, once 0 and 1 wait in the
			// collective.
			waitUntil(t, "ranks 0 and 1 in AllReduce", func() bool {
				return local.ArrivedAt(comms[0], 0, 1) && local.ArrivedAt(comms[1], 1, 1)
			})
			cancel0()
			wg.Wait()
			assert.ErrorIs(t, errs[0], context.Canceled, "size %d", size)
			// Rank 2 is named (never rank 0 itself, even when its
			// goroutine starts only after cancel0 on a loaded machine).
			assert.Contains(t, errs[0].Error(), "rank 2 had not arrived")
			assert.ErrorIs(t, errs[1], comm.ErrBroken, "size %d", size)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			_, errs[2] = comm.AllReduce(ctx, comms[2], make([]float64, size/8), comm.Sum)
			cancel()
			assert.ErrorIs(t, errs[2], comm.ErrBroken, "size %d", size)
			// Point-to-point on the broken communicator fails too.
			assert.ErrorIs(t, comm.Send(context.Background(), comms[1], []int8{1}, 2, 0), comm.ErrBroken)
		}
	})
}

// A context that is already done when the collective starts breaks the
// communicator too: the others could never complete it.
func TestCanceledBeforeCollective(t *testing.T) {
	comms, err := local.New(2)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = comms[0].Barrier(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	ctx2, cancel2 := context.WithTimeout(context.Background(), testTimeout)
	defer cancel2()
	assert.ErrorIs(t, comms[1].Barrier(ctx2), comm.ErrBroken)
}

// Abort breaks every communicator of the world, including blocked
// receives and sub-communicators.
func TestAbort(t *testing.T) {
	inModes(t, func(t *testing.T, _ bool) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		comms, err := local.New(3)
		require.NoError(t, err)
		subs := make([]comm.Comm, 3)
		var wg sync.WaitGroup
		for r := range 3 {
			wg.Go(func() { subs[r], _ = comms[r].Split(ctx, 0, r) })
		}
		wg.Wait()
		errs := make([]error, 3)
		wg.Go(func() { _, _, errs[0] = comm.RecvNew[float32](ctx, comms[0], 1, 0) })
		wg.Go(func() { errs[1] = subs[1].Barrier(ctx) })
		waitUntil(t, "rank 0 in Recv and rank 1 in Barrier", func() bool {
			return local.Posted(comms[0]) == 1 && local.ArrivedAt(subs[1], 1, 1)
		})
		require.NoError(t, comms[2].Abort(3))
		wg.Wait()
		for r := range 2 {
			assert.ErrorIs(t, errs[r], comm.ErrAborted, "rank %d", r)
			assert.ErrorIs(t, errs[r], comm.ErrBroken, "rank %d", r)
			assert.Contains(t, errs[r].Error(), "rank 2 called Abort(3)")
		}
		assert.ErrorIs(t, comms[2].Barrier(ctx), comm.ErrAborted)
	})
}

// A Send larger than the eager limit withdraws its message when the
// context ends before anyone receives it; the receiver then sees the next
// message.
func TestSendWithdrawnOnCancel(t *testing.T) {
	comms, err := local.New(2)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	big := make([]byte, 1<<20)
	err = comm.Send(ctx, comms[0], big, 1, 0)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	ctx2, cancel2 := context.WithTimeout(context.Background(), testTimeout)
	defer cancel2()
	require.NoError(t, comm.Send(ctx2, comms[0], []byte{42}, 1, 0))
	got, st, err := comm.RecvNew[byte](ctx2, comms[1], 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []byte{42}, got)
	assert.Equal(t, 1, st.Count)
}

// Wait on a request honours its context and can be called again.
func TestWaitContext(t *testing.T) {
	comms, err := local.New(2)
	require.NoError(t, err)
	buf := make([]int64, 2)
	req, err := comm.Irecv(comms[1], buf, 0, 4)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = req.Wait(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	done, _, _ := req.Test()
	assert.False(t, done)
	ctx2, cancel2 := context.WithTimeout(context.Background(), testTimeout)
	defer cancel2()
	require.NoError(t, comm.Send(ctx2, comms[0], []int64{7, 8}, 1, 4))
	st, err := req.Wait(ctx2)
	require.NoError(t, err)
	assert.Equal(t, comm.Status{Source: 0, Tag: 4, Count: 2}, st)
	assert.Equal(t, []int64{7, 8}, buf)
}

func TestFreeAndArgs(t *testing.T) {
	_, err := local.New(0)
	assert.ErrorIs(t, err, comm.ErrInvalidArg)
	c := oneRank(t)
	ctx := context.Background()
	assert.ErrorIs(t, comm.Send(ctx, c, []int8{1}, 1, 0), comm.ErrInvalidArg, "dest out of range")
	assert.ErrorIs(t, comm.Send(ctx, c, []int8{1}, 0, -3), comm.ErrInvalidArg, "negative tag")
	_, err = comm.Recv(ctx, c, []int8{1}, 5, 0)
	assert.ErrorIs(t, err, comm.ErrInvalidArg, "source out of range")
	_, err = c.Split(ctx, -5, 0)
	assert.ErrorIs(t, err, comm.ErrInvalidArg, "negative color")
	require.NoError(t, c.Free())
	assert.ErrorIs(t, c.Free(), comm.ErrFreed)
	assert.ErrorIs(t, c.Barrier(ctx), comm.ErrFreed)
	assert.ErrorIs(t, comm.Send(ctx, c, []int8{1}, 0, 0), comm.ErrFreed)
}

// A datatype mismatch between sender and receiver is reported to the
// receiver; the message is consumed.
func TestRecvDatatypeMismatch(t *testing.T) {
	comms, err := local.New(2)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	require.NoError(t, comm.Send(ctx, comms[0], []int32{1, 2}, 1, 0))
	require.NoError(t, comm.Send(ctx, comms[0], []int32{1, 2}, 1, 3))
	// A point-to-point mismatch is about one message, not a collective's
	// arguments: the error names the message and both datatypes.
	_, err = comms[1].Probe(ctx, comm.Float32, 0, 3)
	assert.ErrorIs(t, err, comm.ErrMismatch)
	assert.Equal(t, "local: Probe on rank 1 from rank 0 tag 3: comm: arguments do not match: datatype of the message from rank 0 (tag 3, 2 elements): rank 0 sent int32, rank 1 probes for float32", err.Error())
	_, err = comm.Recv(ctx, comms[1], make([]float32, 2), 0, 0)
	assert.ErrorIs(t, err, comm.ErrMismatch)
	assert.Equal(t, "local: Recv on rank 1 from rank 0 tag 0: comm: arguments do not match: datatype of the message from rank 0 (tag 0, 2 elements): rank 0 sent int32, rank 1 receives float32", err.Error())
	q, err := comm.Irecv(comms[1], make([]float32, 2), 0, 3)
	require.NoError(t, err)
	_, err = q.Wait(ctx)
	assert.ErrorIs(t, err, comm.ErrMismatch)
	assert.Contains(t, err.Error(), "local: Irecv on rank 1 from rank 0 tag 3: comm: arguments do not match: datatype of the message from rank 0 (tag 3, 2 elements)")
}

// A rank that leaves through runtime.Goexit (t.FailNow in a rank) counts as
// failed instead of leaving the others waiting.
func TestGoexit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 0 {
			runtime.Goexit()
		}
		return c.Barrier(ctx)
	})
	errs := rankErrors(t, err)
	assert.Contains(t, errs[0].Error(), "Goexit")
	assert.ErrorIs(t, errs[1], comm.ErrBroken)
}

// A rank that returns while the others wait for it in a collective: they
// fail at once, without a deadline, naming it; ranks that do not need it
// (a communicator without it, point to point among themselves) go on.
func TestRankReturnsWhileOthersWait(t *testing.T) {
	inModes(t, func(t *testing.T, _ bool) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		err := local.Run(ctx, 4, func(_ context.Context, c comm.Comm) error {
			bg := context.Background() // no deadline: only the departure can end the wait
			color := 0
			if c.Rank() == 3 {
				color = comm.Undefined
			}
			sub, err := c.Split(bg, color, c.Rank())
			if err != nil {
				return err
			}
			if c.Rank() == 3 {
				return nil // leaves at once
			}
			// Ranks 0-2 go on among themselves.
			got, err := comm.AllReduce(bg, sub, []int64{1}, comm.Sum)
			if err != nil || got[0] != 3 {
				return fmt.Errorf("AllReduce without rank 3: %v, %v", got, err)
			}
			switch c.Rank() {
			case 2:
				// Waits in a world collective that rank 3 (and soon rank 1,
				// which returns below) will never reach.
				err := c.Barrier(bg)
				if !errors.Is(err, comm.ErrBroken) || !strings.Contains(err.Error(), "returned from its function; it will never reach this Barrier") {
					return fmt.Errorf("Barrier with rank 3 gone: %v", err)
				}
				// Point to point with a rank still here works.
				return comm.Send(bg, c, []int64{7}, 0, 1)
			default:
				if c.Rank() == 0 {
					buf := make([]int64, 1)
					if _, err := comm.Recv(bg, c, buf, 2, 1); err != nil || buf[0] != 7 {
						return fmt.Errorf("Recv from rank 2: %v, %v", buf, err)
					}
				}
				return nil
			}
		})
		require.NoError(t, err)
	})
}

// waitUntil polls cond until it holds, failing the test after testTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// A small Send returns at once (the message is copied); a small Ssend
// waits for a receive, and is withdrawn when its context ends first.
func TestSsendWaitsForTheReceiver(t *testing.T) {
	comms, err := local.New(2)
	require.NoError(t, err)
	// The eager Send gets the test's whole time (a short deadline that a
	// loaded machine let pass before the call would fail it); only the
	// Ssend, which must not complete, gets a short one.
	ctx2, cancel2 := context.WithTimeout(context.Background(), testTimeout)
	defer cancel2()
	require.NoError(t, comm.Send(ctx2, comms[0], []int8{1}, 1, 0), "a small Send is eager")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = comm.Ssend(ctx, comms[0], []int8{2}, 1, 0)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no receive was posted")
	// The first message arrives; the withdrawn one does not.
	got, _, err := comm.RecvNew[int8](ctx2, comms[1], 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []int8{1}, got)
	flag, _, err := comms[1].Iprobe(comm.Int8, 0, 0)
	require.NoError(t, err)
	assert.False(t, flag, "the withdrawn Ssend's message is gone")
	// With the receive posted, Ssend completes.
	done := make(chan []int8, 1)
	go func() {
		v, _, _ := comm.RecvNew[int8](ctx2, comms[1], 0, 0)
		done <- v
	}()
	require.NoError(t, comm.Ssend(ctx2, comms[0], []int8{3}, 1, 0))
	assert.Equal(t, []int8{3}, <-done)
}

// One rank of 512 failing while the others wait in a collective: Run's
// error reads as two lines (the cause, then the ranks it broke, named
// once), so log.Fatal(err) does not print a line per rank; each rank's
// error stays reachable.
func TestRunErrorNamesAlikeRanksOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const n = 512
	boom := errors.New("boom")
	err := local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 5 {
			return boom
		}
		return c.Barrier(ctx)
	})
	require.ErrorIs(t, err, boom)
	var res comm.RankErrors
	require.ErrorAs(t, err, &res)
	require.Len(t, res, n)
	assert.Equal(t, 5, res[0].Rank, "the cause leads")
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 2, "%s", err)
	assert.Equal(t, "rank 5: boom", lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "ranks R = 0-4, 6-511 (511 ranks): "), lines[1])
	assert.Contains(t, lines[1], "rank 5 failed: boom")
	assert.Less(t, len(err.Error()), 300)
}

// TestRunBreakKeepsCancellation: when a rank of Run fails because the
// job was canceled (its error wraps context.Canceled, as a signal's
// does through runtimeview), the ranks that only see the broken world
// report an error that still wraps context.Canceled (a program treats
// that as a clean shutdown on every rank); a rank that failed for
// another reason does not lend its error's chain to the others. The
// others wait with a context that cannot end: the failure ends their
// wait all the same (they waited for ever).
func TestRunBreakKeepsCancellation(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name     string
		fail     error
		canceled bool
	}{
		{"canceled", fmt.Errorf("stopping: %w", context.Canceled), true},
		{"other", fmt.Errorf("stopping: %w", errBoom), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			errs := make([]error, 3)
			err := local.Run(ctx, 3, func(_ context.Context, c comm.Comm) error {
				if c.Rank() == 0 {
					// The others wait in the Barrier first, with a
					// context that cannot end (they waited for ever).
					waitUntil(t, "ranks 1 and 2 in Barrier", func() bool {
						return local.ArrivedAt(c, 1, 1) && local.ArrivedAt(c, 2, 1)
					})
					return tc.fail
				}
				// Not the rank's ctx: only the broken world ends it.
				errs[c.Rank()] = c.Barrier(context.Background())
				return nil
			})
			require.Error(t, err)
			for r := 1; r < 3; r++ {
				require.ErrorIs(t, errs[r], comm.ErrBroken, "rank %d", r)
				assert.Equal(t, tc.canceled, errors.Is(errs[r], context.Canceled), "rank %d: %v", r, errs[r])
				assert.NotErrorIs(t, errs[r], errBoom, "rank %d", r)
				assert.Contains(t, errs[r].Error(), "rank 0 failed: stopping: ", "rank %d", r)
			}
		})
	}
}

// An Irecv posted from a rank that then fails (returns an error, or
// panics) completes with ErrBroken naming it, as when that rank returns
// nil: Test reports it done and its Done channel closes. Before, only
// Wait saw the break, and a loop polling Test (or a select on Done)
// waited for ever.
func TestIrecvFromFailedRankCompletes(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			posted := make(chan struct{})
			err := local.Run(ctx, 2, func(rctx context.Context, c comm.Comm) error {
				if c.Rank() == 1 {
					<-posted // rank 0's receive from this rank is posted
					if how == "panic" {
						panic("rank 1 gives up")
					}
					return errors.New("rank 1 gives up")
				}
				r, err := comm.Irecv(c, make([]int32, 1), 1, 9)
				if err != nil {
					return err
				}
				close(posted)
				select {
				case <-r.(comm.Notifier).Done():
				case <-ctx.Done(): // the test's own deadline, not the rank's context
					return fmt.Errorf("Irecv from a failed rank: Done not closed: %w", ctx.Err())
				}
				done, _, err := r.Test()
				if !done || !errors.Is(err, comm.ErrBroken) || !strings.Contains(err.Error(), "rank 1 failed") {
					return fmt.Errorf("Test of an Irecv from a failed rank: done %v, err %v", done, err)
				}
				_, err = r.Wait(context.Background())
				return fmt.Errorf("rank 0 saw it: %w", err)
			})
			errs := rankErrors(t, err)
			require.Len(t, errs, 2)
			assert.Contains(t, errs[1].Error(), "rank 1 gives up")
			assert.ErrorIs(t, errs[0], comm.ErrBroken)
			assert.Contains(t, errs[0].Error(), "rank 0 saw it")
		})
	}
}
