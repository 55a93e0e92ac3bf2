package accel_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
)

// keeper is a holder that keeps allocations it gives back when asked.
type keeper struct {
	name  string
	dev   *accel.Sim
	kept  []accel.Mem
	asked []bool // the wait argument of each Reclaim
}

func (k *keeper) Reclaim(need int64, wait bool) (int64, string) {
	k.asked = append(k.asked, wait)
	var freed int64
	for len(k.kept) > 0 && freed < need {
		m := k.kept[len(k.kept)-1]
		k.kept = k.kept[:len(k.kept)-1]
		freed += int64(m.Bytes())
		k.dev.Free(m)
	}
	held := 0
	for _, m := range k.kept {
		held += m.Bytes()
	}
	return freed, fmt.Sprintf("%s keeps %d bytes", k.name, held)
}

// TestSimReclaim: an allocation that does not fit asks the device's
// holders for what they keep, waiting for them; a holder's own
// allocation asks the others only, without waiting; a withdrawn holder
// is not asked; and an allocation that still fails names what the
// holders keep.
func TestSimReclaim(t *testing.T) {
	d, err := accel.NewSim(0, accel.SimConfig{Memory: 1000, Bandwidth: -1})
	require.NoError(t, err)
	defer d.Close()
	a := &keeper{name: "a", dev: d}
	b := &keeper{name: "b", dev: d}
	ownA, dropA := d.Hold(a)
	_, dropB := d.Hold(b)
	defer dropB()
	for range 4 {
		m, err := ownA(100)
		require.NoError(t, err)
		a.kept = append(a.kept, m)
	}
	for range 4 {
		m, err := d.Alloc(100)
		require.NoError(t, err)
		b.kept = append(b.kept, m)
	}
	require.Empty(t, a.asked, "nothing asked while there is room")

	// Another user runs short: the holders give back, a waits.
	m, err := d.Alloc(300)
	require.NoError(t, err)
	require.Equal(t, []bool{true}, a.asked)
	require.Len(t, a.kept, 3, "a gave back what was missing, 100 bytes")
	require.Empty(t, b.asked, "b was not needed")

	// a's own allocation asks b, without waiting, never a.
	_, err = ownA(400)
	require.NoError(t, err)
	require.Equal(t, []bool{true}, a.asked)
	require.Equal(t, []bool{false}, b.asked)

	// What cannot be given back is named.
	_, err = d.Alloc(600)
	require.ErrorIs(t, err, accel.ErrOutOfMemory)
	assert.Contains(t, err.Error(), "a keeps 0 bytes")
	assert.Contains(t, err.Error(), "b keeps 0 bytes")

	// A withdrawn holder is not asked.
	dropA()
	n := len(a.asked)
	_, err = d.Alloc(600)
	require.ErrorIs(t, err, accel.ErrOutOfMemory)
	require.Len(t, a.asked, n)
	_ = m
}
