package accel_test

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
)

func TestSimCopies(t *testing.T) {
	d, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 10, Bandwidth: -1})
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, "sim0", d.Name())
	m, err := d.Alloc(12)
	require.NoError(t, err)
	// A 3x4-byte tile of a host matrix 6 bytes wide.
	host := []byte("abcdefghijklmnopqr")
	require.NoError(t, accel.Wait(func(done accel.Done) { d.CopyIn(m, 0, host, 3, 4, 6, done) }))
	require.Equal(t, "abcdghijmnop", string(d.Host(m)))
	m2, err := d.Alloc(12)
	require.NoError(t, err)
	require.NoError(t, accel.Wait(func(done accel.Done) { d.CopyWithin(m2, 0, m, 0, 12, done) }))
	out := make([]byte, 12)
	require.NoError(t, accel.Wait(func(done accel.Done) { d.CopyOut(out, 2, 6, 6, m2, 0, done) }))
	require.Equal(t, "abcdghijmnop", string(out))

	_, err = d.Alloc(1 << 10)
	require.ErrorIs(t, err, accel.ErrOutOfMemory)
	require.Equal(t, int64(24), d.InUse())
	d.Free(m)
	d.Free(m2)
	require.Zero(t, d.InUse())
}

func TestSimLinkTime(t *testing.T) {
	d, err := accel.NewSim(1, accel.SimConfig{Bandwidth: 1e9, Latency: 300 * time.Microsecond})
	require.NoError(t, err)
	m, err := d.Alloc(1 << 20)
	require.NoError(t, err)
	var started time.Time
	t0 := time.Now()
	host := make([]byte, 1<<20)
	require.NoError(t, accel.Wait(func(done accel.Done) {
		d.CopyIn(m, 0, host, 1, 1<<20, 1<<20, func(s time.Time, err error) { started = s; done(s, err) })
	}))
	took := time.Since(t0)
	require.False(t, started.Before(t0))
	// A simulated copy is never faster than its link (latency + 1 MiB at 1 GB/s).
	require.GreaterOrEqual(t, took, 300*time.Microsecond+1048576*time.Nanosecond)
	require.NoError(t, d.Close())
	err = accel.Wait(func(done accel.Done) { d.CopyIn(m, 0, host, 1, 8, 8, done) })
	require.True(t, errors.Is(err, accel.ErrClosed))
}

// TestSimAddressable: an Addressable device's allocations are host
// memory outside Go's heap whose addresses it gives (space "host"); any
// other device has no space, and a bad offset is an error.
func TestSimAddressable(t *testing.T) {
	plain, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 16})
	require.NoError(t, err)
	defer plain.Close()
	require.Empty(t, plain.Space())

	d, err := accel.NewSim(1, accel.SimConfig{Memory: 1 << 16, Addressable: true})
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, "host", d.Space())
	m, err := d.Alloc(4096)
	require.NoError(t, err)
	host := d.Host(m)
	require.Len(t, host, 4096)
	a, err := d.Address(m, 8)
	require.NoError(t, err)
	require.Equal(t, uintptr(unsafe.Pointer(&host[8])), a)
	end, err := d.Address(m, 4096)
	require.NoError(t, err)
	require.Equal(t, a+4088, end)
	_, err = d.Address(m, 4097)
	require.Error(t, err)
	_, err = d.Address(m, -1)
	require.Error(t, err)

	// Copies reach the mapping.
	src := make([]byte, 4096)
	for i := range src {
		src[i] = byte(i)
	}
	done := make(chan error, 1)
	d.CopyIn(m, 0, src, 1, 4096, 4096, func(_ time.Time, err error) { done <- err })
	require.NoError(t, <-done)
	require.Equal(t, src, host)
	require.EqualValues(t, 4096, d.InUse())
	d.Free(m)
	require.Zero(t, d.InUse())

	_, err = d.Alloc(1 << 17)
	require.ErrorIs(t, err, accel.ErrOutOfMemory)
}
