package cuda_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// fakeDriver opens a fresh instance of the stand-in driver
// (internal/fakecuda) with one GPU of memory bytes.
func fakeDriver(t *testing.T, memory int64) *cuda.Driver {
	d, _ := fakecuda.Open(t, 1, memory)
	return d
}

// TestAccel moves a tile of a wider host matrix to the GPU and back
// through the copy engines, copies within the GPU, and fills the GPU.
func TestAccel(t *testing.T) {
	d := fakeDriver(t, 1<<20)
	a, err := d.NewAccel(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, "cuda0", a.Name())
	require.EqualValues(t, 1<<20, a.Capacity())
	require.NotEmpty(t, a.Key())

	wait := func(issue func(accel.Done)) error { return accel.Wait(issue) }
	// A 3x4 tile of bytes at (1,2) of a 5x8 matrix.
	const rows, width, pitch = 3, 4, 8
	host := make([]byte, 5*pitch)
	for i := range host {
		host[i] = byte(i)
	}
	tile := host[1*pitch+2:]
	m, err := a.Alloc(rows * width)
	require.NoError(t, err)
	require.NotZero(t, m.(*cuda.Buffer).Ptr())
	require.NoError(t, wait(func(done accel.Done) { a.CopyIn(m, 0, tile, rows, width, pitch, done) }))
	m2, err := a.Alloc(rows * width)
	require.NoError(t, err)
	require.NoError(t, wait(func(done accel.Done) { a.CopyWithin(m2, 0, m, 0, rows*width, done) }))
	dense := make([]byte, rows*width)
	require.NoError(t, wait(func(done accel.Done) { a.CopyOut(dense, 1, rows*width, rows*width, m2, 0, done) }))
	require.Equal(t, []byte{10, 11, 12, 13, 18, 19, 20, 21, 26, 27, 28, 29}, dense)
	// Back into the rows of another matrix: the gaps stay as they were.
	back := make([]byte, 3*pitch)
	for i := range back {
		back[i] = 0xff
	}
	require.NoError(t, wait(func(done accel.Done) { a.CopyOut(back, rows, width, pitch, m, 0, done) }))
	for r := range rows {
		for c := range pitch {
			want := byte(0xff)
			if c < width {
				want = byte((1+r)*pitch + 2 + c)
			}
			require.Equal(t, want, back[r*pitch+c], "row %d byte %d", r, c)
		}
	}
	in, out, within := a.Copies()
	require.Equal(t, [3]int64{1, 2, 1}, [3]int64{in, out, within})

	// Bad ranges are reported through done, not by a panic.
	err = wait(func(done accel.Done) { a.CopyIn(m, 8, tile, rows, width, pitch, done) })
	require.ErrorIs(t, err, cuda.ErrBadArgument)

	// Full: the error is accel's, so the scheduler evicts and retries.
	_, err = a.Alloc(2 << 20)
	require.ErrorIs(t, err, accel.ErrOutOfMemory)
	require.ErrorIs(t, err, cuda.ErrOutOfMemory)

	a.Free(m)
	a.Free(m2)
	empty, err := a.Alloc(0)
	require.NoError(t, err)
	a.Free(empty)
	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
	err = wait(func(done accel.Done) { a.CopyIn(m, 0, tile, 1, 1, 1, done) })
	require.ErrorIs(t, err, accel.ErrClosed)
}

// TestAccelCopiesOverlap checks that the two engines are independent: a
// copy out completes while the copy-in engine is held inside a done
// callback (which runs on the engine's goroutine).
func TestAccelCopiesOverlap(t *testing.T) {
	d := fakeDriver(t, 64<<20)
	a, err := d.NewAccel(context.Background(), 0)
	require.NoError(t, err)
	defer a.Close()
	m, err := a.Alloc(1 << 20)
	require.NoError(t, err)
	release := make(chan struct{})
	defer close(release) // before Close, which waits for the held copy
	a.CopyIn(m, 0, make([]byte, 1<<20), 1, 1<<20, 1<<20, func(time.Time, error) { <-release })
	a.CopyIn(m, 0, make([]byte, 8), 1, 8, 8, func(time.Time, error) {}) // queued behind the held one
	outDone := make(chan error, 1)
	a.CopyOut(make([]byte, 8), 1, 8, 8, m, 0, func(_ time.Time, err error) { outDone <- err })
	select {
	case err := <-outDone:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the copy out waited for the copy-in engine")
	}
}

// TestAccelPinnedCopies: copies from and to memory the Accel pinned run
// asynchronously, completed by events; each copy's done comes only once
// its data have landed (the stand-in delays every operation of a
// stream, so a done called when the copy was merely queued would find
// the old bytes).
func TestAccelPinnedCopies(t *testing.T) {
	fakecuda.SetDelay(t, 2*time.Millisecond)
	d := fakeDriver(t, 1<<20)
	a, err := d.NewAccel(context.Background(), 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Close()) }()

	const chunks, size = 8, 4096
	src := make([]byte, chunks*size)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	unpinSrc, err := a.Pin(src)
	require.NoError(t, err)
	_, err = a.Pin(src[size:])
	require.ErrorIs(t, err, cuda.ErrHostMemoryAlreadyRegistered, "pinned twice")
	_, err = a.Pin(nil)
	require.ErrorIs(t, err, cuda.ErrBadArgument)

	m, err := a.Alloc(chunks * size)
	require.NoError(t, err)
	// All chunks queued at once, each done on its own.
	errs := make(chan error, chunks)
	for c := range chunks {
		a.CopyIn(m, c*size, src[c*size:], 1, size, size, func(_ time.Time, err error) { errs <- err })
	}
	for range chunks {
		require.NoError(t, <-errs)
	}
	dst := make([]byte, chunks*size)
	unpinDst, err := a.Pin(dst)
	require.NoError(t, err)
	require.NoError(t, accel.Wait(func(done accel.Done) {
		a.CopyOut(dst, 1, chunks*size, chunks*size, m, 0, func(start time.Time, err error) {
			if err == nil && !bytes.Equal(src, dst) {
				err = errors.New("done before the data landed")
			}
			done(start, err)
		})
	}))
	require.EqualValues(t, chunks+1, a.PinnedCopies())

	// Pageable memory: the same result, waited for at once.
	plain := make([]byte, chunks*size)
	require.NoError(t, accel.Wait(func(done accel.Done) { a.CopyOut(plain, 1, chunks*size, chunks*size, m, 0, done) }))
	require.Equal(t, src, plain)
	require.EqualValues(t, chunks+1, a.PinnedCopies(), "pageable copies are not counted")

	require.NoError(t, unpinSrc())
	require.NoError(t, unpinSrc(), "unpin twice is one unpin")
	require.NoError(t, unpinDst())
	// Unpinned again: the next copies are pageable.
	require.NoError(t, accel.Wait(func(done accel.Done) { a.CopyIn(m, 0, src, 1, size, size, done) }))
	require.EqualValues(t, chunks+1, a.PinnedCopies())
	a.Free(m)
}

// TestAccelCloseUnpins: Close undoes the pins still in place, after the
// copies; an unpin after Close does nothing.
func TestAccelCloseUnpins(t *testing.T) {
	ctx := context.Background()
	d := fakeDriver(t, 1<<20)
	a, err := d.NewAccel(ctx, 0)
	require.NoError(t, err)
	b := make([]byte, 1<<16)
	unpin, err := a.Pin(b)
	require.NoError(t, err)
	m, err := a.Alloc(len(b))
	require.NoError(t, err)
	done := make(chan error, 1)
	a.CopyIn(m, 0, b, 1, len(b), len(b), func(_ time.Time, err error) { done <- err })
	require.NoError(t, a.Close())
	require.NoError(t, <-done, "the copy ended before Close returned")
	require.NoError(t, unpin())
	_, err = a.Pin(b)
	require.ErrorIs(t, err, accel.ErrClosed)

	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	require.NoError(t, c.HostRegister(ctx, b), "Close left b registered")
	require.NoError(t, c.HostUnregister(ctx, b))
}

// TestAccelStaging: staging buffers are page-locked, reused once given
// back, and freed at Close.
func TestAccelStaging(t *testing.T) {
	ctx := context.Background()
	d := fakeDriver(t, 1<<20)
	a, err := d.NewAccel(ctx, 0)
	require.NoError(t, err)
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()

	b, release, err := a.Staging(1000)
	require.NoError(t, err)
	require.Len(t, b, 1000)
	pinned, err := c.IsPinned(ctx, b)
	require.NoError(t, err)
	require.True(t, pinned)
	b2, release2, err := a.Staging(1000)
	require.NoError(t, err)
	require.NotSame(t, &b[0], &b2[0], "a buffer lent is not lent twice")
	release()
	release() // once
	b3, release3, err := a.Staging(500)
	require.NoError(t, err)
	require.Same(t, &b[0], &b3[0], "the buffer given back is reused")
	require.Len(t, b3, 500)
	release3()
	release2()
	_, _, err = a.Staging(0)
	require.ErrorIs(t, err, cuda.ErrBadArgument)

	require.NoError(t, a.Close())
	for _, x := range [][]byte{b, b2} {
		pinned, err := c.IsPinned(ctx, x[:1])
		require.NoError(t, err)
		require.False(t, pinned, "Close freed the spare buffers")
	}
	_, _, err = a.Staging(8)
	require.ErrorIs(t, err, accel.ErrClosed)
}
