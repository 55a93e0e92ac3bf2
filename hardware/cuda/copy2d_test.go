package cuda_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// TestAsyncCalls runs the 2-D copies, the asynchronous copy within the
// device and memset, host registration and a wait between streams on
// the stand-in driver, whose streams run late: each result is read only
// after the wait that orders it.
func TestAsyncCalls(t *testing.T) {
	ctx := context.Background()
	d, _ := fakecuda.Open(t, 1, 16<<20)
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer c.Close()
	s1, err := c.NewStream(ctx)
	require.NoError(t, err)
	s2, err := c.NewStream(ctx)
	require.NoError(t, err)
	done, err := c.NewEvent(ctx, false)
	require.NoError(t, err)

	// A 2x3 tile at (1,1) of a 3x5 host matrix of bytes, in and out.
	host := make([]byte, 15)
	for i := range host {
		host[i] = byte(i)
	}
	p, err := c.Alloc(ctx, 6)
	require.NoError(t, err)
	require.NoError(t, c.CopyHtoD2D(ctx, cuda.Copy2D{Host: host[6:], Pitch: 5, Device: p, Rows: 2, Width: 3}))
	dense := make([]byte, 6)
	require.NoError(t, c.CopyDtoH2D(ctx, cuda.Copy2D{Host: dense, Pitch: 3, Device: p, Rows: 2, Width: 3}))
	require.Equal(t, []byte{6, 7, 8, 11, 12, 13}, dense)

	// Pinned (registered) host memory makes the async forms queue: s1
	// sets q to 9s and copies p into q's second half; s2 waits for s1's
	// event, then copies q out.
	q, err := c.Alloc(ctx, 12)
	require.NoError(t, err)
	out := make([]byte, 4096) // a page, registered
	var pin runtime.Pinner
	pin.Pin(&out[0])
	defer pin.Unpin()
	require.NoError(t, c.HostRegister(ctx, out))
	require.NoError(t, c.Memset8Async(ctx, q, 9, 12, s1))
	require.NoError(t, c.CopyDtoDAsync(ctx, q+6, p, 6, s1))
	require.NoError(t, done.Record(ctx, s1))
	require.NoError(t, s2.WaitEvent(ctx, done))
	require.NoError(t, c.CopyDtoH2DAsync(ctx, cuda.Copy2D{Host: out, Pitch: 12, Device: q, Rows: 1, Width: 12}, s2))
	require.NoError(t, s2.Synchronize(ctx))
	require.Equal(t, []byte{9, 9, 9, 9, 9, 9, 6, 7, 8, 11, 12, 13}, out[:12])
	require.NoError(t, c.CopyHtoD2DAsync(ctx, cuda.Copy2D{Host: out, Pitch: 12, Device: q, Rows: 1, Width: 12}, s2))
	require.NoError(t, s2.Synchronize(ctx))
	require.NoError(t, c.HostUnregister(ctx, out))
	require.NotZero(t, s1.Handle())
	require.NotZero(t, c.Handle())

	// Bad shapes never reach the driver.
	require.ErrorIs(t, c.CopyDtoDAsync(ctx, q, p, -1, s1), cuda.ErrBadArgument)
	require.ErrorIs(t, c.Memset8Async(ctx, q, 0, -1, s1), cuda.ErrBadArgument)
	require.ErrorIs(t, s1.WaitEvent(ctx, nil), cuda.ErrBadArgument)
	require.ErrorIs(t, c.HostRegister(ctx, nil), cuda.ErrBadArgument)
}
