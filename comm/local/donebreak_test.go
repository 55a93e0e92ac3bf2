package local_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pzgo/pz/comm"
)

// TestDoneAfterBreak: a non-blocking request that only a live rank could
// complete (an Irecv from rank 2, a large Isend to rank 2, on the world
// and on a duplicate of it) while rank 1 fails and breaks the world: its
// Done channel (comm.Notifier) closes, and Wait and Test then give the
// break (comm.ErrBroken naming rank 1), and so do the request-set
// functions, which wait on Done. Done used to stay open until the
// request completed, which only rank 2 could do: a select on it, WaitAny
// and WaitSome waited until their context ended, and TestAll reported
// false for ever.
func TestDoneAfterBreak(t *testing.T) {
	for _, p := range p2pPosts() {
		for _, w := range doneWaits() {
			for _, dup := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/dup=%v", p.name, w.name, dup), func(t *testing.T) {
					testBreakWhileWaiting(t, "fails", p.post, w.wait, dup)
				})
			}
		}
	}
}

// p2pPosts post a point-to-point request on 3 ranks that only rank 2
// could complete: an Irecv from rank 2 and a large Isend to rank 2.
func p2pPosts() []struct {
	name string
	post func(c comm.Comm) (comm.Request, error)
} {
	large := make([]float64, 1024) // 8 KiB: by reference, completed only by its receiver
	return []struct {
		name string
		post func(c comm.Comm) (comm.Request, error)
	}{
		{"Irecv", func(c comm.Comm) (comm.Request, error) { return comm.Irecv(c, make([]float64, 1), 2, 0) }},
		{"IsendLarge", func(c comm.Comm) (comm.Request, error) { return comm.Isend(c, large, 2, 0) }},
	}
}

// doneWaits are the ways of waiting for a request that a break ends:
// each returns the request's error once it ended, or an error saying the
// test's deadline (ctx) passed first.
func doneWaits() []struct {
	name string
	wait func(ctx context.Context, r comm.Request) error
} {
	return []struct {
		name string
		wait func(ctx context.Context, r comm.Request) error
	}{
		{"selectDone", func(ctx context.Context, r comm.Request) error {
			n, ok := r.(comm.Notifier)
			if !ok {
				return fmt.Errorf("%T is no comm.Notifier", r)
			}
			select {
			case <-n.Done():
			case <-ctx.Done():
				return fmt.Errorf("Done still open when the test's deadline passed")
			}
			done, _, err := r.Test()
			if !done {
				return fmt.Errorf("Test after Done closed: not done")
			}
			_, werr := r.Wait(ctx)
			if werr == nil || werr.Error() != err.Error() {
				return fmt.Errorf("Test's error %v, Wait's %v: want the same", err, werr)
			}
			return err
		}},
		{"WaitAny", func(ctx context.Context, r comm.Request) error {
			c, err := comm.WaitAny(ctx, []comm.Request{nil, r})
			if err != nil {
				return fmt.Errorf("WaitAny: %w", err)
			}
			if c.Index != 1 {
				return fmt.Errorf("WaitAny: index %d, want 1", c.Index)
			}
			return c.Err
		}},
		{"WaitSome", func(ctx context.Context, r comm.Request) error {
			cs, err := comm.WaitSome(ctx, []comm.Request{r})
			if err != nil {
				return fmt.Errorf("WaitSome: %w", err)
			}
			if len(cs) != 1 || cs[0].Index != 0 {
				return fmt.Errorf("WaitSome: %+v, want request 0", cs)
			}
			return cs[0].Err
		}},
		{"WaitAll", func(ctx context.Context, r comm.Request) error {
			_, err := comm.WaitAll(ctx, []comm.Request{r})
			if ctx.Err() != nil {
				return fmt.Errorf("WaitAll: still waiting when the test's deadline passed: %w", err)
			}
			return err
		}},
		{"TestAll", func(ctx context.Context, r comm.Request) error {
			for {
				done, _, err := comm.TestAll([]comm.Request{r})
				if done {
					return err
				}
				// TestAll looks at Done: wait for it rather than spin.
				select {
				case <-r.(comm.Notifier).Done():
				case <-ctx.Done():
					return fmt.Errorf("TestAll: not done when the test's deadline passed")
				}
			}
		}},
	}
}
