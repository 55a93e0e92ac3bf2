package gemm

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/scheduler"
)

// A product whose context ends (pzrun's SIGINT or SIGTERM) stops: the
// tile tasks not yet started do not run, so that Multiply returns, and
// the scheduler closes, once the tasks running then are done, not after
// every tile of C.
func TestMultiplyStopsWhenContextEnds(t *testing.T) {
	const n, b = 512, 32 // 256 tile tasks
	s, err := scheduler.New(testCtx(t), scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	ctx, cancel := context.WithCancelCause(testCtx(t))
	stop := errors.New("stopped by the test")
	var ran atomic.Int64
	cl := NewCodelet[float64]()
	kernel := cl.CPU
	cl.CPU = func(c *scheduler.Call) error {
		if ran.Add(1) == 1 {
			cancel(stop)
		}
		return kernel(c)
	}
	a, bm, c := tiled.Random[float64](n, n, 1), tiled.Random[float64](n, n, 2), tiled.Random[float64](n, n, 3)
	_, err = Multiply(ctx, s, cl, a, bm, c, n, b, nil)
	require.ErrorIs(t, err, stop)
	// Close reports the canceled tasks WaitAll had not.
	if err := s.Close(); err != nil {
		require.ErrorIs(t, err, scheduler.ErrCanceled)
	}
	// The first task, and at most one more the other worker started
	// before it canceled.
	assert.LessOrEqual(t, ran.Load(), int64(2), "tasks run of %d after the context ended in the first", (n/b)*(n/b))
}
