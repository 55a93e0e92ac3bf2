package local_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// TestSharedDataPhase checks the collectives whose data phase the ranks
// share in chunks, with lengths that give several chunks per rank, one
// rank contributing everything, and eager and direct contributions mixed
// in one call, against values computed from rank and index.
func TestSharedDataPhase(t *testing.T) {
	// Element counts of float64: eager (<= 4 KiB), one chunk, several
	// chunks with a remainder, and enough that 5 ranks split unevenly.
	sizes := []int{0, 3, 512, 600, 4096, 4097, 20000, 70001}
	val := func(r, i, step int) float64 { return float64((r+1)*(i%17) + step) }
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			err := local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
				rng := rand.New(rand.NewPCG(uint64(n), 7)) // same sequence on every rank
				me := c.Rank()
				for step := range 40 {
					root := rng.IntN(n)
					// Per-rank lengths: random per rank, or all on one rank.
					lens := make([]int, n)
					for r := range lens {
						lens[r] = sizes[rng.IntN(len(sizes))]
					}
					if step%5 == 0 {
						clear(lens)
						lens[root] = 70001
					}
					mine := make([]float64, lens[me])
					for i := range mine {
						mine[i] = val(me, i, step)
					}
					check := func(what string, parts [][]float64) error {
						if len(parts) != n {
							return fmt.Errorf("step %d %s: %d parts", step, what, len(parts))
						}
						for r, p := range parts {
							if len(p) != lens[r] {
								return fmt.Errorf("step %d %s: part %d has %d elements, want %d", step, what, r, len(p), lens[r])
							}
							for i, g := range p {
								if g != val(r, i, step) {
									return fmt.Errorf("step %d %s: part %d element %d is %v", step, what, r, i, g)
								}
							}
						}
						return nil
					}
					parts, err := comm.AllGather(ctx, c, mine)
					if err != nil {
						return err
					}
					if err := check("AllGather", parts); err != nil {
						return err
					}
					parts, err = comm.Gather(ctx, c, mine, root)
					if err != nil {
						return err
					}
					if me == root {
						if err := check("Gather", parts); err != nil {
							return err
						}
					} else if parts != nil {
						return fmt.Errorf("step %d Gather: non-root got %d parts", step, len(parts))
					}
					// Same length on every rank for Bcast and the reductions.
					count := lens[root]
					b := make([]float64, count)
					if me == root {
						copy(b, mine)
					}
					if err := comm.Bcast(ctx, c, b, root); err != nil {
						return err
					}
					for i, g := range b {
						if g != val(root, i, step) {
							return fmt.Errorf("step %d Bcast of %d from %d: element %d is %v", step, count, root, i, g)
						}
					}
					send := make([]float64, count)
					for i := range send {
						send[i] = val(me, i, step)
					}
					sum, err := comm.AllReduce(ctx, c, send, comm.Sum)
					if err != nil {
						return err
					}
					for i, g := range sum {
						if want := float64(n*(n+1)/2*(i%17) + n*step); g != want {
							return fmt.Errorf("step %d AllReduce of %d: element %d is %v, want %v", step, count, i, g, want)
						}
					}
					mx, err := comm.Reduce(ctx, c, send, comm.Max, root)
					if err != nil {
						return err
					}
					for i, g := range mx {
						if g != val(n-1, i, step) {
							return fmt.Errorf("step %d Reduce of %d: element %d is %v", step, count, i, g)
						}
					}
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// A rank whose Alloc returns too little memory in a large AllGather gets
// ErrInvalidArg; the others still get the full result.
func TestAllGatherShortAlloc(t *testing.T) {
	const n, count = 3, 10000 // above the eager limit
	comms, err := local.New(n)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	outs := make([][]int32, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			send := make([]int32, count)
			for i := range send {
				send[i] = int32(r*count + i)
			}
			_, errs[r] = comm.Comm.AllGather(comms[r], ctx, comm.BufOf(send), func(total int) []byte {
				if r == 1 {
					return make([]byte, 4*total-4)
				}
				outs[r] = make([]int32, total)
				return comm.AsBytes(outs[r])
			})
		})
	}
	wg.Wait()
	require.ErrorIs(t, errs[1], comm.ErrInvalidArg)
	for _, r := range []int{0, 2} {
		require.NoError(t, errs[r], "rank %d", r)
		require.Len(t, outs[r], n*count)
		for i, v := range outs[r] {
			if v != int32(i) {
				t.Fatalf("rank %d: element %d is %d", r, i, v)
			}
		}
	}
	// The communicator stays usable.
	for r := range n {
		wg.Go(func() { _, errs[r] = comm.AllReduce(ctx, comms[r], []int32{1}, comm.Sum) })
	}
	wg.Wait()
	for r := range n {
		assert.NoError(t, errs[r], "rank %d", r)
	}
}

// Root's Alloc panicking in a large Gather (before the commit, while the
// others wait for it) breaks the communicator: the others return an error
// instead of waiting forever, and the panic reaches root's caller.
func TestGatherAllocPanics(t *testing.T) {
	const n, count = 3, 10000
	comms, err := local.New(n)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	errs := make([]error, n)
	var recovered any
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			if r == 0 {
				defer func() { recovered = recover() }()
			}
			_, errs[r] = comms[r].Gather(ctx, comm.BufOf(make([]float64, count)), 0, func(int) []byte {
				panic("alloc failed")
			})
		})
	}
	wg.Wait()
	assert.Equal(t, "alloc failed", recovered)
	for _, r := range []int{1, 2} {
		require.ErrorIs(t, errs[r], comm.ErrBroken, "rank %d", r)
		assert.Contains(t, errs[r].Error(), "rank 0: Alloc of Gather did not return", "rank %d", r)
	}
	assert.NoError(t, ctx.Err(), "the others waited for the deadline")
}
