package cuda

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNoCurrentContextOnOtherThreads shows why Context exists: a primary
// context retained and made current on the Context's thread is not
// current on any other thread, so a driver call made there fails with
// CUDA_ERROR_INVALID_CONTEXT, while the same call through the Context
// works.
func TestNoCurrentContextOnOtherThreads(t *testing.T) {
	d, err := Open()
	if errors.Is(err, ErrNoDriver) {
		t.Skipf("no CUDA driver on this machine, GPU test skipped: %v", err)
	}
	require.NoError(t, err)
	if n, _ := d.DeviceCount(); n == 0 {
		t.Skip("CUDA driver present but no device visible, GPU test skipped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer c.Close()

	res := make(chan Result, 1)
	go func() {
		// A fresh thread that never made a context current. It is not
		// unlocked, so Go discards the thread afterwards.
		runtime.LockOSThread()
		var p DevicePtr
		r := d.api.memAlloc(&p, 1024)
		if r == Success {
			_ = d.api.memFree(p)
		}
		res <- r
	}()
	select {
	case r := <-res:
		require.Equal(t, ErrInvalidContext, r, "got %s", r.Name())
	case <-ctx.Done():
		t.Fatal("timed out")
	}

	p, err := c.Alloc(ctx, 1024)
	require.NoError(t, err)
	require.NoError(t, c.Free(ctx, p))
}
