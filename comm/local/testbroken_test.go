package local_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/pzgo/pz/comm"
)

// TestTestAfterBreak: a non-blocking request that only a live rank could
// complete (an Irecv from rank 2, a large Isend to rank 2, on the world
// and on a duplicate of it) while rank 1 fails and breaks the world:
// Test reports it done with the error Wait gives, wrapping comm.ErrBroken
// and naming rank 1, so that a loop polling Test ends. Test used to
// report false for as long as it was called, while Wait returned the
// break.
func TestTestAfterBreak(t *testing.T) {
	for _, p := range p2pPosts() {
		for _, dup := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dup=%v", p.name, dup), func(t *testing.T) {
				testBreakWhileWaiting(t, "fails", p.post, pollTest, dup)
			})
		}
	}
}

// pollTest polls r's Test as a caller that does not block would, until
// it reports done; the test's deadline (ctx) ends a Test that never
// does. Once done, Wait must give the same cause as Test, wrapping
// comm.ErrBroken; pollTest returns Test's error.
func pollTest(ctx context.Context, r comm.Request) error {
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
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("Test after the break: still not done when the test's deadline passed")
		}
		runtime.Gosched()
	}
}
