package cuda_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// hostFuncResult waits for a host function's result.
func hostFuncResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(fakeTimeout):
		t.Fatal("the host function did not run")
		return nil
	}
}

// TestLaunchHostFunc queues a Go function between copies on a stream of
// the stand-in driver, which calls it from the stream's thread (a
// pthread Go did not create) after a delay before each operation. The
// function must see the result of the copy queued before it; the copy
// queued after it must wait for it, which the function proves by
// writing, after the test has held it for a while, the bytes that copy
// moves. Run it with CGO_ENABLED=0 too: the callback then goes through
// purego's fakecgo.
func TestLaunchHostFunc(t *testing.T) {
	fakecuda.SetDelay(t, 500*time.Microsecond)
	ctx, cs := fakeContexts(t, 1, 1<<20)
	c := cs[0]
	s := fakeStream(t, ctx, c)
	const n = 4096
	host, err := c.AllocHost(ctx, 2*n) // pinned: the copies are queued
	require.NoError(t, err)
	defer func() { require.NoError(t, c.FreeHost(ctx, host)) }()
	out, next := host[:n], host[n:]
	p, err := c.Alloc(ctx, n)
	require.NoError(t, err)

	require.NoError(t, c.Memset8Async(ctx, p, 7, n, s))
	require.NoError(t, c.CopyDtoHAsync(ctx, out, p, s))
	release := make(chan struct{})
	unhold := sync.OnceFunc(func() { close(release) })
	defer unhold() // a failed test must not leave the stream held
	done, err := c.LaunchHostFunc(ctx, func() error {
		if !bytes.Equal(out, bytes.Repeat([]byte{7}, n)) {
			return fmt.Errorf("ran before the copy queued ahead of it: %v", out[:8])
		}
		select {
		case <-release:
		case <-time.After(fakeTimeout):
			return errors.New("never released")
		}
		copy(next, bytes.Repeat([]byte{9}, n))
		return nil
	}, s)
	require.NoError(t, err)
	require.NoError(t, c.CopyHtoDAsync(ctx, p, next, s))
	after, err := c.NewEvent(ctx, false)
	require.NoError(t, err)
	require.NoError(t, after.Record(ctx, s))

	// While the function is held, the work after it waits: the event
	// recorded after the copy does not complete. (A deadline, not a
	// sleep: if the stream did not wait, the copy would run, and the
	// event complete, within two operation delays, 1 ms.)
	held, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	require.ErrorIs(t, after.Synchronize(held), context.DeadlineExceeded)
	cancel()
	unhold()
	require.NoError(t, hostFuncResult(t, done))
	require.NoError(t, after.Synchronize(ctx))
	require.NoError(t, after.Destroy(ctx))
	got := make([]byte, n)
	require.NoError(t, c.CopyDtoH(ctx, got, p))
	require.Equal(t, bytes.Repeat([]byte{9}, n), got, "the copy after the function moved what it wrote")

	t.Run("default stream", func(t *testing.T) {
		ran := false
		done, err := c.LaunchHostFunc(ctx, func() error { ran = true; return nil }, nil)
		require.NoError(t, err)
		require.NoError(t, hostFuncResult(t, done))
		require.True(t, ran)
	})
	t.Run("error and panic", func(t *testing.T) {
		bad := errors.New("bad")
		done, err := c.LaunchHostFunc(ctx, func() error { return bad }, s)
		require.NoError(t, err)
		require.ErrorIs(t, hostFuncResult(t, done), bad)
		done, err = c.LaunchHostFunc(ctx, func() error { panic("host function panic") }, s)
		require.NoError(t, err)
		err = hostFuncResult(t, done)
		require.ErrorContains(t, err, "host function panic")
		require.ErrorContains(t, err, "hostfunc_test.go", "with the stack")
		// The stream goes on.
		done, err = c.LaunchHostFunc(ctx, func() error { return nil }, s)
		require.NoError(t, err)
		require.NoError(t, hostFuncResult(t, done))
		require.NoError(t, s.Synchronize(ctx))
	})
	t.Run("many", func(t *testing.T) {
		// Each function sees the ones queued before it done: they run in
		// stream order, all through the package's one callback.
		const k = 50
		var seen []int
		dones := make([]<-chan error, k)
		for i := range dones {
			dones[i], err = c.LaunchHostFunc(ctx, func() error {
				if len(seen) != i {
					return fmt.Errorf("function %d ran after %d others", i, len(seen))
				}
				seen = append(seen, i)
				return nil
			}, s)
			require.NoError(t, err)
		}
		for i, done := range dones {
			require.NoError(t, hostFuncResult(t, done), "function %d", i)
		}
		require.Len(t, seen, k)
	})
	_, err = c.LaunchHostFunc(ctx, nil, s)
	require.ErrorIs(t, err, cuda.ErrBadArgument)
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	_, err = c.LaunchHostFunc(cancelled, func() error { return nil }, s)
	require.ErrorIs(t, err, context.Canceled)
}
