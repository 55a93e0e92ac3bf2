package hypervisor_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler/hypervisor"
)

// pingPong moves worker 1 to the registered context it is not in, at
// every decision.
type pingPong struct{}

func (pingPong) Name() string { return "ping_pong" }

func (pingPong) Resize(v *hypervisor.View) []hypervisor.Move {
	for i, c := range v.Contexts {
		if slices.Contains(c.Workers, 1) {
			return []hypervisor.Move{{Worker: 1, To: 1 - i}}
		}
	}
	return nil
}

// A hypervisor that moves workers for hours keeps the latest 4,096 moves
// and counts them all: before, Resizes kept every move (about 90 bytes
// each) for the hypervisor's life.
func TestResizesLogBounded(t *testing.T) {
	const moves = 5000 // more than the 4,096 kept
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0, 1}, []int{2})
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pingPong{}), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	for i := range moves {
		require.Len(t, hv.ResizeNow(), 1, "decision %d moves worker 1", i)
	}
	rs := hv.Resizes()
	require.Equal(t, 4096, len(rs), "the latest 4,096 moves")
	require.Equal(t, moves, hv.ResizeCount(), "every move counted")
	// The last move took worker 1 to b (moves is even: a->b first).
	last := rs[len(rs)-1]
	require.Equal(t, "b->a", last.From+"->"+last.To)
	for i := 1; i < len(rs); i++ {
		require.LessOrEqual(t, rs[i-1].At, rs[i].At, "in the order made")
		require.NotEqual(t, rs[i-1].To, rs[i].To, "each move reverses the one before")
	}
}
