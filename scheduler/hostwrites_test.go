package scheduler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestHostWrites: Data on a handle changes HostWrites of the handle, of
// the wholes it is a tile of and of its tiles, and not of a sibling tile
// (scheduler/dist's master/worker cache drops exactly those copies).
func TestHostWrites(t *testing.T) {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1))
	require.NoError(t, err)
	defer s.Close()
	whole, err := s.RegisterMatrix(make([]float64, 16), 4, 4)
	require.NoError(t, err)
	tiles, err := whole.Partition(scheduler.Blocks(2, 2))
	require.NoError(t, err)
	a, b := tiles[0][0], tiles[0][1]
	snap := func() [3]uint64 { return [3]uint64{whole.HostWrites(), a.HostWrites(), b.HostWrites()} }

	before := snap()
	_ = a.Data()
	after := snap()
	require.NotEqual(t, before[0], after[0], "a tile's write changes the whole")
	require.NotEqual(t, before[1], after[1], "the tile itself")
	require.Equal(t, before[2], after[2], "not a sibling tile")

	require.NoError(t, whole.Unpartition())
	before = snap()
	_ = whole.Data()
	after = snap()
	for i, name := range []string{"whole", "tile a", "tile b"} {
		require.NotEqual(t, before[i], after[i], "the whole's write changes %s", name)
	}
}
