package local_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// TestTestAfterBreak: a non-blocking request that only a live rank could
// complete (an Irecv from rank 2, a large Isend to rank 2, on the world
// and on a duplicate of it) while rank 1 fails and breaks the world:
// Test reports it done with the error Wait gives, wrapping comm.ErrBroken
// and naming rank 1, so that a loop polling Test ends. Test used to
// report false for as long as it was called, while Wait returned the
// break.
func TestTestAfterBreak(t *testing.T) {
	large := make([]float64, 1024) // 8 KiB: by reference, completed only by its receiver
	cases := []struct {
		name string
		post func(c comm.Comm) (comm.Request, error)
	}{
		{"Irecv", func(c comm.Comm) (comm.Request, error) { return comm.Irecv(c, make([]float64, 1), 2, 0) }},
		{"IsendLarge", func(c comm.Comm) (comm.Request, error) { return comm.Isend(c, large, 2, 0) }},
	}
	for _, tc := range cases {
		for _, dup := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dup=%v", tc.name, dup), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				posted := make(chan struct{})
				checked := make(chan struct{}) // rank 0 saw Test's answer: rank 2 may return
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
						// Alive while rank 0 polls (a rank that returns
						// ends the requests with it itself), sending and
						// receiving nothing.
						select {
						case <-checked:
						case <-ctx.Done():
						}
						return nil
					}
					r, err := tc.post(c)
					if err != nil {
						return err
					}
					close(posted)
					defer close(checked)
					// Poll as a caller that does not block would; the
					// test's deadline ends a Test that never reports done.
					for {
						done, _, err := r.Test()
						if done {
							if !errors.Is(err, comm.ErrBroken) || !strings.Contains(err.Error(), "rank 1 failed") {
								return fmt.Errorf("Test after the break: done with %v, want comm.ErrBroken naming rank 1", err)
							}
							_, werr := r.Wait(context.Background())
							if !errors.Is(werr, comm.ErrBroken) || strings.Replace(werr.Error(), ": Wait: ", ": Test: ", 1) != err.Error() {
								return fmt.Errorf("Test's error %q, Wait's %v: want the same cause", err, werr)
							}
							return fmt.Errorf("rank 0 saw it: %w", err)
						}
						if ctx.Err() != nil {
							return fmt.Errorf("Test after the break: still not done when the test's deadline passed")
						}
						runtime.Gosched()
					}
				})
				errs := rankErrors(t, err)
				require.ErrorIs(t, errs[1], boom)
				require.ErrorIs(t, errs[0], comm.ErrBroken)
				assert.Contains(t, errs[0].Error(), "rank 0 saw it", "rank 0: %v", errs[0])
			})
		}
	}
}
