//go:build mpi

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// TestSmallCollectivesAllocateNothing: an 8-byte AllReduce and Bcast in
// the collectives' default, non-blocking form (MPI_Iallreduce and
// MPI_Wait with context.Background, MPI_Test polled with a ctx that can
// end; polled either way at MPI_THREAD_SERIALIZED) allocate nothing, with
// the agreement step and without: the collective's request is the
// communicator's own, reused once MPI completed it. Each call made a
// request of its own (320 bytes) where the blocking form allocates
// nothing.
func TestSmallCollectivesAllocateNothing(t *testing.T) {
	c := splitAll(t)
	mpi.SetBlocking(c, false)
	bg := context.Background()
	cctx, cancel := context.WithCancel(bg)
	defer cancel()
	me, n := c.Rank(), c.Size()
	rv := []float64{0}
	send, recv := comm.BufOf([]float64{float64(me + 1)}), comm.BufOf(rv)
	bc := []float64{0}
	bbuf := comm.BufOf(bc)
	want := float64(n * (n + 1) / 2)
	for _, check := range []bool{true, false} {
		for _, x := range []struct {
			name string
			ctx  context.Context
		}{{"Background", bg}, {"cancelable", cctx}} {
			t.Run(fmt.Sprintf("check=%v/%s", check, x.name), func(t *testing.T) {
				c.SetCheck(check)
				defer c.SetCheck(true)
				var errs []error
				bad, round := 0, 0
				call := func() {
					round++
					rv[0] = -1
					errs = append(errs, c.AllReduce(x.ctx, send, recv, comm.Sum))
					if rv[0] != want {
						bad++
					}
					if me == 0 {
						bc[0] = float64(round)
					}
					errs = append(errs, c.Bcast(x.ctx, bbuf, 0))
					if bc[0] != float64(round) {
						bad++
					}
				}
				call() // the communicator's request and the watch's slot are made by the first
				errs = make([]error, 0, 2*(1+200)+2)
				// Every rank runs the same number of rounds: AllocsPerRun
				// makes one warm-up call and then 200.
				allocs := testing.AllocsPerRun(200, call)
				require.NoError(t, errors.Join(errs...))
				assert.Zero(t, bad, "rounds with a wrong sum or broadcast value")
				assert.Zero(t, allocs, "allocations per 8-byte AllReduce and Bcast")
			})
		}
	}
}
