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

// A user op that panics is a panic of the rank that ran it (recovered by
// Run as a *comm.PanicError); the other ranks are not left waiting.
func TestUserOpPanics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	boom := comm.UserOp("boom", func(in, inout []int32) { panic("boom") }, true)
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		_, err := comm.AllReduceUser(ctx, c, []int32{1, 2, 3}, boom)
		return err
	})
	var pe *comm.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Run returned %v, want a *comm.PanicError", err)
	}
}

// bigUserCount is the length of the user reductions below: 800 KB of
// float64, many chunks of the shared data phase per rank.
const bigUserCount = 100_000

// failingOp returns rank r's op for the tests below: on rank 0 it fails
// (how) on its first call; on the others it adds, once rank 0 has
// called its own, so that rank 0 surely runs a chunk (the others cannot
// take all of rank 0's queue while they wait in their first chunk).
func failingOp(t *testing.T, r int, called chan struct{}, how func()) *comm.UserFunc {
	return comm.UserOp("boom", func(in, inout []float64) {
		if r == 0 {
			close(called)
			how()
		}
		select {
		case <-called:
		case <-time.After(testTimeout):
			t.Errorf("rank %d: rank 0 never ran its op", r)
		}
		for i := range inout {
			inout[i] += in[i]
		}
	}, true)
}

// A user op that panics on one rank in the shared data phase of a large
// AllReduceUser or ReduceUser (each rank folds chunks of every buffer):
// the rank panics on, with its value, and every other rank returns
// ErrBroken naming it and the op, instead of waiting for the chunks the
// panicking rank will never finish; the communicator is broken after.
func TestUserOpPanicInSharedPhase(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		for _, call := range []string{"AllReduceUser", "ReduceUser"} {
			t.Run(fmt.Sprintf("%s/ranks=%d", call, n), func(t *testing.T) {
				called := make(chan struct{})
				comms, errs, panics := onRanks(t, n, func(ctx context.Context, c comm.Comm) (err error) {
					op := failingOp(t, c.Rank(), called, func() { panic("boom on rank 0") })
					send := make([]float64, bigUserCount)
					if call == "AllReduceUser" {
						_, err = comm.AllReduceUser(ctx, c, send, op)
					} else {
						_, err = comm.ReduceUser(ctx, c, send, op, n-1)
					}
					return err
				})
				assert.Equal(t, "boom on rank 0", panics[0], "rank 0 panics on with its value")
				for r := 1; r < n; r++ {
					assert.Nil(t, panics[r], "rank %d", r)
					require.ErrorIs(t, errs[r], comm.ErrBroken, "rank %d", r)
					assert.Contains(t, errs[r].Error(), fmt.Sprintf(`%s on rank %d: comm: communicator broken: rank 0 panicked in user op "boom" of %s: boom on rank 0`, call, r, call), "rank %d", r)
				}
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				assert.ErrorIs(t, comms[n-1].Barrier(ctx), comm.ErrBroken, "the communicator is broken")
			})
		}
	}
}

// The same under Run, with runtime.Goexit (t.FailNow in an op) as well as
// a panic: no rank hangs, the failing rank's error leads Run's even when
// another rank's ErrBroken reaches Run first, and the others name it.
func TestUserOpFailsUnderRun(t *testing.T) {
	for _, tc := range []struct {
		name, rank0, others string
		how                 func()
	}{
		{"panic", "rank 0: panic: boom on rank 0", `rank 0 panicked in user op "boom" of AllReduceUser: boom on rank 0`, func() { panic("boom on rank 0") }},
		{"Goexit", "rank 0: local: rank goroutine exited via runtime.Goexit", `rank 0 exited its goroutine (runtime.Goexit) in user op "boom" of AllReduceUser`, runtime.Goexit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inModes(t, func(t *testing.T, _ bool) {
				called := make(chan struct{})
				var err error
				done := make(chan struct{})
				go func() {
					defer close(done)
					err = local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
						d, err := c.Dup(ctx)
						if err != nil {
							return err
						}
						if c.Rank() == 0 {
							// Let another rank fail first, as it may: the
							// failed rank must lead all the same. Only Run
							// breaks the world (the op breaks c's group),
							// and d sees it.
							defer pollUntil(func() bool {
								_, _, err := d.Iprobe(comm.Int8, 0, 0)
								return errors.Is(err, comm.ErrBroken)
							})
						}
						_, err = comm.AllReduceUser(ctx, c, make([]float64, bigUserCount), failingOp(t, c.Rank(), called, tc.how))
						return err
					})
				}()
				select {
				case <-done:
				case <-time.After(testTimeout):
					t.Fatal("Run did not return: ranks wait for the failed rank's chunks")
				}
				require.Error(t, err)
				assert.True(t, strings.HasPrefix(err.Error(), tc.rank0), "the failed rank leads: %v", err)
				errs := rankErrors(t, err)
				for _, r := range []int{1, 2} {
					assert.ErrorIs(t, errs[r], comm.ErrBroken, "rank %d", r)
					assert.Contains(t, errs[r].Error(), tc.others, "rank %d", r)
				}
			})
		})
	}
}

// An op that panics on every rank: whichever ranks run a chunk panic, the
// others return ErrBroken; nobody hangs.
func TestUserOpPanicsEverywhere(t *testing.T) {
	const n = 4
	boom := comm.UserOp("boom", func(in, inout []float64) { panic("boom") }, true)
	_, errs, panics := onRanks(t, n, func(ctx context.Context, c comm.Comm) error {
		_, err := comm.AllReduceUser(ctx, c, make([]float64, bigUserCount), boom)
		return err
	})
	panicked := 0
	for r := range n {
		if panics[r] != nil {
			panicked++
			assert.Equal(t, "boom", panics[r], "rank %d", r)
			continue
		}
		require.ErrorIs(t, errs[r], comm.ErrBroken, "rank %d", r)
		assert.Contains(t, errs[r].Error(), `panicked in user op "boom" of AllReduceUser`, "rank %d", r)
	}
	assert.Positive(t, panicked)
}

// onRanks runs fn on every rank of a new n-rank group, each on a
// goroutine of its own with a testTimeout context (not under Run: a
// panic stays the rank's), and returns the communicators, each rank's
// error and what each panicked with.
func onRanks(t *testing.T, n int, fn func(ctx context.Context, c comm.Comm) error) ([]comm.Comm, []error, []any) {
	t.Helper()
	comms, err := local.New(n)
	require.NoError(t, err)
	errs := make([]error, n)
	panics := make([]any, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			defer func() { panics[r] = recover() }()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			errs[r] = fn(ctx, comms[r])
		})
	}
	waitGroup(t, &wg)
	return comms, errs, panics
}

// waitGroup waits for wg, failing the test after testTimeout.
func waitGroup(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("timed out: some rank hangs")
	}
}
