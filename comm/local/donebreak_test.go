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
	large := make([]float64, 1024) // 8 KiB: by reference, completed only by its receiver
	posts := []struct {
		name string
		post func(c comm.Comm) (comm.Request, error)
	}{
		{"Irecv", func(c comm.Comm) (comm.Request, error) { return comm.Irecv(c, make([]float64, 1), 2, 0) }},
		{"IsendLarge", func(c comm.Comm) (comm.Request, error) { return comm.Isend(c, large, 2, 0) }},
	}
	waits := doneWaits()
	for _, p := range posts {
		for _, w := range waits {
			for _, dup := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/dup=%v", p.name, w.name, dup), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
					defer cancel()
					posted := make(chan struct{})
					checked := make(chan struct{}) // rank 0 has its answer: rank 2 may return
					boom := errors.New("rank 1 gives up")
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
							<-posted
							return boom
						case 2:
							// Alive while rank 0 waits (a rank that
							// returns ends the requests with it itself),
							// sending and receiving nothing.
							select {
							case <-checked:
							case <-ctx.Done():
							}
							return nil
						}
						r, err := p.post(c)
						if err != nil {
							return err
						}
						close(posted)
						defer close(checked)
						// ctx, the test's deadline, not rctx, which the
						// break cancels.
						err = w.wait(ctx, r)
						if !errors.Is(err, comm.ErrBroken) || !strings.Contains(err.Error(), "rank 1 failed") {
							return fmt.Errorf("after the break: %v, want comm.ErrBroken naming rank 1", err)
						}
						return fmt.Errorf("rank 0 saw it: %w", err)
					})
					errs := rankErrors(t, err)
					require.ErrorIs(t, errs[1], boom)
					require.ErrorIs(t, errs[0], comm.ErrBroken)
					assert.Contains(t, errs[0].Error(), "rank 0 saw it", "rank 0: %v", errs[0])
				})
			}
		}
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
