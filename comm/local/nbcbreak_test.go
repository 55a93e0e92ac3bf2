package local_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// nbcPosts starts each non-blocking collective of comm.Comm on 3 ranks,
// rank 0 as the root where there is one.
func nbcPosts() []struct {
	name string
	post func(c comm.Comm) (comm.Request, error)
} {
	alloc := func(n int) []byte { return make([]byte, n) }
	one := func() comm.Buf { return comm.BufOf([]float64{1}) }
	return []struct {
		name string
		post func(c comm.Comm) (comm.Request, error)
	}{
		{"Ibarrier", func(c comm.Comm) (comm.Request, error) { return c.Ibarrier() }},
		{"Ibcast", func(c comm.Comm) (comm.Request, error) { return c.Ibcast(one(), 0) }},
		{"Ireduce", func(c comm.Comm) (comm.Request, error) {
			return c.Ireduce(one(), comm.BufOf(make([]float64, 1)), comm.Sum, 0)
		}},
		{"Iallreduce", func(c comm.Comm) (comm.Request, error) {
			return c.Iallreduce(one(), comm.BufOf(make([]float64, 1)), comm.Sum)
		}},
		{"Igather", func(c comm.Comm) (comm.Request, error) { return c.Igather(one(), 0, alloc, nil) }},
		{"Iallgather", func(c comm.Comm) (comm.Request, error) { return c.Iallgather(one(), alloc, nil) }},
		{"Iscatter", func(c comm.Comm) (comm.Request, error) {
			return c.Iscatter(comm.BufOf([]float64{1, 2, 3}), []int{1, 1, 1}, 0, alloc)
		}},
		{"Ialltoall", func(c comm.Comm) (comm.Request, error) {
			return c.Ialltoall(comm.BufOf([]float64{1, 2, 3}), []int{1, 1, 1}, alloc, nil)
		}},
	}
}

// TestNBCDoneAfterBreak: rank 0 waits on a non-blocking collective that
// rank 2 (alive) never starts, on the world or on a duplicate of it,
// while rank 1 breaks it, by failing (the world breaks) or by abandoning
// a blocking collective on the same communicator (that communicator
// breaks, the world does not). Every way of waiting (a select on Done,
// Wait, Test, WaitAny, WaitSome, WaitAll, TestAll) ends before the
// test's deadline with an error wrapping comm.ErrBroken that names rank
// 1. The collectives run on a private duplicate of the communicator (see
// comm.NBC), which a break of the communicator alone used to leave
// whole: the request stayed pending until the deadline.
func TestNBCDoneAfterBreak(t *testing.T) {
	waits := doneWaits()
	waits = append(waits,
		struct {
			name string
			wait func(ctx context.Context, r comm.Request) error
		}{"Wait", func(ctx context.Context, r comm.Request) error {
			_, err := r.Wait(ctx)
			if ctx.Err() != nil {
				return fmt.Errorf("Wait: still waiting when the test's deadline passed: %w", err)
			}
			return err
		}},
		struct {
			name string
			wait func(ctx context.Context, r comm.Request) error
		}{"WaitBackground", func(ctx context.Context, r comm.Request) error {
			// A context that cannot end: the break alone ends the wait
			// (the test's deadline ends only the test's own select).
			ended := make(chan error, 1)
			go func() {
				_, err := r.Wait(context.Background())
				ended <- err
			}()
			select {
			case err := <-ended:
				return err
			case <-ctx.Done():
				return fmt.Errorf("Wait(context.Background()): still waiting when the test's deadline passed")
			}
		}},
	)
	for _, how := range []string{"fails", "abandons"} {
		for _, p := range nbcPosts() {
			for _, w := range waits {
				for _, dup := range []bool{false, true} {
					if how == "abandons" && !dup {
						// Abandoning a collective on the world breaks
						// the world's group just as well; the duplicate
						// keeps the world usable for the rest.
						continue
					}
					t.Run(fmt.Sprintf("rank1%s/%s/%s/dup=%v", how, p.name, w.name, dup), func(t *testing.T) {
						testBreakWhileWaiting(t, how, p.post, w.wait, dup)
					})
				}
			}
		}
	}
}

// testBreakWhileWaiting runs 3 ranks, on the world or on a duplicate of
// it (dup): rank 0 posts a request (post) that only rank 2 could
// complete and waits for it (wait, given the test's deadline), rank 2
// stays alive doing nothing until rank 0 has its answer, and rank 1,
// once the request is posted, breaks the communicator: it fails (how ==
// "fails") or abandons a blocking Barrier on it ("abandons"). The wait
// must end with an error wrapping comm.ErrBroken that names rank 1.
func testBreakWhileWaiting(t *testing.T, how string, post func(comm.Comm) (comm.Request, error), wait func(context.Context, comm.Request) error, dup bool) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	posted := make(chan struct{})
	checked := make(chan struct{}) // rank 0 has its answer: ranks 1 and 2 may return
	boom := errors.New("rank 1 gives up")
	want := "rank 1 failed"
	if how == "abandons" {
		want = "rank 1 abandoned Barrier"
	}
	err := local.Run(ctx, 3, func(rctx context.Context, c comm.Comm) error {
		if dup {
			d, err := c.Dup(rctx)
			if err != nil {
				return err
			}
			c = d
		}
		switch c.Rank() {
		case 1:
			select {
			case <-posted:
			case <-ctx.Done():
				return ctx.Err()
			}
			if how == "fails" {
				return boom
			}
			// A blocking collective given up at once breaks c.
			gone, stop := context.WithCancel(ctx)
			stop()
			if err := c.Barrier(gone); err == nil {
				return errors.New("Barrier with a canceled context succeeded")
			}
			fallthrough
		case 2:
			// Alive while rank 0 waits (a rank that returns ends the
			// collective with it itself), starting nothing.
			select {
			case <-checked:
			case <-ctx.Done():
			}
			return nil
		}
		r, err := post(c)
		if err != nil {
			return err
		}
		close(posted)
		defer close(checked)
		// ctx, the test's deadline, not rctx, which the break cancels.
		err = wait(ctx, r)
		if !errors.Is(err, comm.ErrBroken) || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("after the break: %v, want comm.ErrBroken naming %q", err, want)
		}
		return fmt.Errorf("rank 0 saw it: %w", err)
	})
	errs := rankErrors(t, err)
	require.ErrorIs(t, errs[0], comm.ErrBroken)
	assert.Contains(t, errs[0].Error(), "rank 0 saw it", "rank 0: %v", errs[0])
	if how == "fails" {
		require.ErrorIs(t, errs[1], boom)
	} else {
		assert.NotContains(t, errs, 1, "rank 1 returned nil")
	}
}
