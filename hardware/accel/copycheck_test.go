package accel_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
)

// TestSimRefusesBadCopies: a copy whose range does not fit its buffers,
// or whose allocation is nil, ends with ErrBadCopy and copies nothing,
// instead of a panic on the copy engine's goroutine.
func TestSimRefusesBadCopies(t *testing.T) {
	d, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 10})
	require.NoError(t, err)
	defer d.Close()
	m, err := d.Alloc(64)
	require.NoError(t, err)
	host := make([]byte, 64)
	for _, tc := range []struct {
		name                    string
		off, rows, width, pitch int
		hostLen                 int
	}{
		{"past the allocation", 32, 1, 40, 40, 64},
		{"negative offset", -8, 1, 8, 8, 64},
		{"host too short", 0, 4, 16, 20, 64},
		{"pitch narrower than a row", 0, 2, 16, 8, 64},
	} {
		err := accel.Wait(func(done accel.Done) { d.CopyIn(m, tc.off, host[:tc.hostLen], tc.rows, tc.width, tc.pitch, done) })
		require.ErrorIs(t, err, accel.ErrBadCopy, "in: %s", tc.name)
		err = accel.Wait(func(done accel.Done) { d.CopyOut(host[:tc.hostLen], tc.rows, tc.width, tc.pitch, m, tc.off, done) })
		require.ErrorIs(t, err, accel.ErrBadCopy, "out: %s", tc.name)
	}
	require.ErrorIs(t, accel.Wait(func(done accel.Done) { d.CopyIn(nil, 0, host, 1, 8, 8, done) }), accel.ErrBadCopy, "nil allocation")
	m2, err := d.Alloc(16)
	require.NoError(t, err)
	require.ErrorIs(t, accel.Wait(func(done accel.Done) { d.CopyWithin(m2, 0, m, 60, 8, done) }), accel.ErrBadCopy, "within, past the source")
	require.NoError(t, accel.Wait(func(done accel.Done) { d.CopyWithin(m2, 8, m, 56, 8, done) }))
	require.NoError(t, accel.Wait(func(done accel.Done) { d.CopyIn(m, 0, host, 4, 16, 16, done) }), "the whole allocation")
}
