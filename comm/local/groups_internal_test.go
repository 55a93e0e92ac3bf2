package local

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
)

// listedGroups counts the groups the world's ranks list (worldRank.in):
// the communicators the world keeps reachable.
func listedGroups(w *world) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[*group]bool{}
	for _, r := range w.ranks {
		for _, m := range r.in {
			seen[m.g] = true
		}
	}
	return len(seen)
}

// TestFreeForgetsGroups: rounds of Dup, Split, a Split that leaves a
// rank out, and a Dup that runs a non-blocking collective (which makes
// the group of its non-blocking collectives), each freed by every rank,
// on 4 ranks. The world's lists stay bounded through the rounds (they
// used to grow by 5 groups a round, kept until Run returned), hold the
// world alone once every rank freed everything, and nothing once every
// rank left Run.
func TestFreeForgetsGroups(t *testing.T) {
	const rounds = 300
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var w *world
	err := Run(ctx, 4, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 0 {
			w = c.(*rankComm).g.w
		}
		free := func(what string, d comm.Comm) error {
			if err := d.Free(); err != nil {
				return fmt.Errorf("Free of the %s: %w", what, err)
			}
			return nil
		}
		for i := range rounds {
			d, err := c.Dup(ctx)
			if err != nil {
				return err
			}
			if err := free("Dup", d); err != nil {
				return err
			}
			s, err := c.Split(ctx, c.Rank()%2, 0)
			if err != nil {
				return err
			}
			if err := free("Split", s); err != nil {
				return err
			}
			color := 0
			if c.Rank() == 3 {
				color = comm.Undefined
			}
			if s, err = c.Split(ctx, color, 0); err != nil {
				return err
			}
			if s != nil {
				if err := free("Split of 3", s); err != nil {
					return err
				}
			}
			if d, err = c.Dup(ctx); err != nil {
				return err
			}
			out := make([]float64, 1)
			r, err := d.Iallreduce(comm.BufOf([]float64{1}), comm.BufOf(out), comm.Sum)
			if err != nil {
				return err
			}
			if _, err := r.Wait(ctx); err != nil {
				return err
			}
			if out[0] != 4 {
				return fmt.Errorf("round %d: Iallreduce gave %v, want 4", i, out[0])
			}
			if err := free("Dup with an Iallreduce", d); err != nil {
				return err
			}
			// Rank 0 may be a round ahead of the slowest rank (the
			// next Dup waits for every rank), whose groups of the
			// round before (at most 5, with the non-blocking
			// collectives' group) are then still listed.
			if c.Rank() == 0 {
				if n := listedGroups(w); n > 12 {
					return fmt.Errorf("round %d: the world lists %d groups; want at most 12", i, n)
				}
			}
		}
		if err := c.Barrier(ctx); err != nil { // every rank freed all of its own
			return err
		}
		if c.Rank() == 0 {
			if n := listedGroups(w); n != 1 {
				return fmt.Errorf("after %d rounds, all freed: the world lists %d groups; want 1, the world's", rounds, n)
			}
		}
		return c.Barrier(ctx) // no rank leaves before rank 0 counted
	})
	require.NoError(t, err)
	assert.Zero(t, listedGroups(w), "groups listed once every rank left Run")
}

// TestFreedRankStillLeaves: a rank that freed its handle of a
// communicator the others still use, and then returns from Run's
// function, still fails the others' calls that wait for it there, a
// collective and a non-blocking one (whose group is made after the
// rank freed its handle), with comm.ErrBroken naming it, as a rank that
// had not freed it does. The others' Free then releases the
// communicator.
func TestFreedRankStillLeaves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeoutInternal)
	defer cancel()
	freed := make(chan struct{})
	made := make(chan struct{})
	var w *world
	err := Run(ctx, 3, func(rctx context.Context, c comm.Comm) error {
		if c.Rank() == 0 {
			w = c.(*rankComm).g.w
		}
		d, err := c.Dup(rctx)
		if err != nil {
			return err
		}
		switch c.Rank() {
		case 1:
			if err := d.Free(); err != nil {
				return err
			}
			close(freed)
			select {
			case <-made:
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		case 0:
			select {
			case <-freed:
			case <-ctx.Done():
				return ctx.Err()
			}
			// The group of d's non-blocking collectives, made now that
			// rank 1 no longer holds d.
			d.(*rankComm).g.nbcGroup()
			close(made)
		}
		check := func(what string, err error) error {
			if !errors.Is(err, comm.ErrBroken) || !strings.Contains(err.Error(), "rank 1 returned") {
				return fmt.Errorf("%s on d after rank 1 freed it and returned: %v; want comm.ErrBroken naming rank 1", what, err)
			}
			return nil
		}
		r, err := d.Ibarrier()
		if err != nil {
			return err
		}
		_, err = r.Wait(ctx) // the test's deadline: rctx ends with any failure
		if err := check("Ibarrier", err); err != nil {
			return err
		}
		if err := check("Barrier", d.Barrier(ctx)); err != nil {
			return err
		}
		return d.Free()
	})
	require.NoError(t, err)
	assert.Zero(t, listedGroups(w), "groups listed once every rank left Run")
}

// testTimeoutInternal bounds the internal tests that could hang if the
// backend were wrong.
const testTimeoutInternal = 30 * time.Second

// TestDupFreeHeapBounded: 10,000 rounds of Dup and Free on 4 ranks hold
// no more live heap objects than 1,000 do (each round used to keep about
// 15 objects, 6.5 KB, until Run returned: 150,000 objects more).
func TestDupFreeHeapBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 collectives")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var at1k, at10k runtime.MemStats
	err := Run(ctx, 4, func(ctx context.Context, c comm.Comm) error {
		for i := 1; i <= 10000; i++ {
			d, err := c.Dup(ctx)
			if err != nil {
				return err
			}
			if err := d.Free(); err != nil {
				return err
			}
			if i != 1000 && i != 10000 {
				continue
			}
			// Every rank freed its round i: rank 0 measures while the
			// others wait in the second Barrier.
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			if c.Rank() == 0 {
				m := &at1k
				if i == 10000 {
					m = &at10k
				}
				runtime.GC()
				runtime.ReadMemStats(m)
			}
			if err := c.Barrier(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	t.Logf("live heap after 1,000 rounds: %d objects, %d B; after 10,000: %d objects, %d B",
		at1k.HeapObjects, at1k.HeapAlloc, at10k.HeapObjects, at10k.HeapAlloc)
	// Generous: the leak was 135,000 objects over the 9,000 rounds.
	assert.Less(t, int64(at10k.HeapObjects)-int64(at1k.HeapObjects), int64(10000),
		"live heap objects grew from %d to %d over 9,000 rounds of Dup+Free", at1k.HeapObjects, at10k.HeapObjects)
}
