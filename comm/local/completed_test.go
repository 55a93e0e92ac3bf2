package local_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// TestCompletedBarrierOutlivesLaterFailure: a rank that completes a
// Barrier and then fails both wakes the parked ranks and breaks the world;
// a parked rank must see the Barrier complete, as its peers did, not the
// break (pzrun -n 3 stm run printed rank 2's "Barrier: communicator
// broken" beside ranks 0-1's usage error when it lost this race). Rank 2
// arrives first; just before it parks, ranks 0 and 1 arrive, return from
// the Barrier, and rank 0 aborts, so that rank 2's select finds its wake
// and the break both ready and picks either: 20 rounds all but always
// see the break once without the fix. Both kinds of group: watched (each
// rank reads every slot) and counted (more ranks than GOMAXPROCS).
func TestCompletedBarrierOutlivesLaterFailure(t *testing.T) {
	for _, counted := range []bool{false, true} {
		procs := 3
		if counted {
			procs = 1
		}
		prev := runtime.GOMAXPROCS(procs)
		for round := range 20 {
			comms, err := local.New(3)
			require.NoError(t, err)
			require.Equal(t, counted, local.Counted(comms[0]))
			ctx := context.Background()
			var peers [2]error
			local.BeforePark(comms[0], func() {
				var wg sync.WaitGroup
				for r := range 2 {
					wg.Go(func() { peers[r] = comms[r].Barrier(ctx) })
				}
				wg.Wait()
				require.NoError(t, comms[0].Abort(2))
			})
			assert.NoError(t, comms[2].Barrier(ctx), "counted %v, round %d: rank 2", counted, round)
			assert.NoError(t, peers[0], "rank 0")
			assert.NoError(t, peers[1], "rank 1")
			assert.ErrorIs(t, comms[2].Barrier(ctx), comm.ErrBroken, "the next Barrier sees the break")
			if t.Failed() {
				break
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}

// TestCompletedWaitOutlivesLaterFailure: a request that completes as the
// world breaks (its sender sent, then aborted) reports its message, not
// the break, whichever ready case Wait's select picks.
func TestCompletedWaitOutlivesLaterFailure(t *testing.T) {
	for round := range 20 {
		comms, err := local.New(2)
		require.NoError(t, err)
		ctx := context.Background()
		got := make([]float64, 1)
		req, err := comm.Irecv(comms[0], got, 1, 7)
		require.NoError(t, err)
		local.BeforePark(comms[0], func() {
			require.NoError(t, comm.Send(ctx, comms[1], []float64{42}, 0, 7))
			require.NoError(t, comms[1].Abort(2))
		})
		st, err := req.Wait(ctx)
		require.NoError(t, err, "round %d", round)
		assert.Equal(t, 1, st.Source)
		assert.Equal(t, 42.0, got[0])
		if t.Failed() {
			break
		}
	}
}
