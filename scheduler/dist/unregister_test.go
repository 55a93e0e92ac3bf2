package dist_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// Codelets of the Unregister and Flush tests, on float64 vectors.
var (
	// double: x *= 2.
	double = &scheduler.Codelet{Name: "double", CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			x[i] *= 2
		}
		return nil
	}}
	// addInto: y += x (RW y, R x).
	addInto = &scheduler.Codelet{Name: "addInto", CPU: func(c *scheduler.Call) error {
		y, x := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		for i := range y {
			y[i] += x[i]
		}
		return nil
	}}
	// fillWith: x = the task's argument (W x).
	fillWith = &scheduler.Codelet{Name: "fillWith", CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			x[i] = c.Arg.(float64)
		}
		return nil
	}}
	// plusOne: x += 1 (Redux x).
	plusOne = &scheduler.Codelet{Name: "plusOne", CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			x[i]++
		}
		return nil
	}}
	zeroF = &scheduler.Codelet{Name: "zeroF", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[float64](c, 0))
		return nil
	}}
	addF = &scheduler.Codelet{Name: "addF", CPU: func(c *scheduler.Call) error {
		y, x := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		for i := range y {
			y[i] += x[i]
		}
		return nil
	}}
)

// Unregister brings the latest version, written on rank 1, back to the
// owner (rank 0), returns the owner's registered slice there and nil
// elsewhere, and the cached copies of ranks 1 and 2 are gone; the other
// handles' results are right.
func TestUnregisterReturnsOwnersDataAndDropsCopies(t *testing.T) {
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		ys, err := onePerRank[float64](d, 4)
		if err != nil {
			return err
		}
		var mine []float64
		if d.Rank() == 0 {
			mine = []float64{1, 2, 3, 4}
		}
		x, err := dist.Register(d, 0, mine, 4, 1, scheduler.Named("x"))
		if err != nil {
			return err
		}
		kept, _ := dist.Kept(d)
		for r := range d.Size() {
			if err := d.Submit(ctx, addInto, dist.RW(ys[r]), dist.R(x)); err != nil {
				return err
			}
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		if want := min(d.Rank(), 1); dist.CachedCopies(d) != want {
			return fmt.Errorf("rank %d caches %d copies after reading x, want %d", d.Rank(), dist.CachedCopies(d), want)
		}
		// A new version on rank 1, read on rank 2, not yet back on rank 0.
		if err := d.Submit(ctx, double, dist.RW(x), dist.OnRank(1)); err != nil {
			return err
		}
		if err := d.Submit(ctx, addInto, dist.RW(ys[2]), dist.R(x)); err != nil {
			return err
		}
		data, err := d.Unregister(ctx, x)
		if err != nil {
			return err
		}
		switch {
		case d.Rank() == 0 && !slices.Equal(data.([]float64), []float64{2, 4, 6, 8}):
			return fmt.Errorf("Unregister returned %v on the owner, want [2 4 6 8]", data)
		case d.Rank() == 0 && &data.([]float64)[0] != &mine[0]:
			return fmt.Errorf("Unregister returned another slice than the owner registered")
		case d.Rank() != 0 && data != nil:
			return fmt.Errorf("Unregister returned %v on rank %d, want nil", data, d.Rank())
		case dist.CachedCopies(d) != 0:
			return fmt.Errorf("rank %d still caches %d copies after Unregister", d.Rank(), dist.CachedCopies(d))
		case x.Data() != nil:
			return fmt.Errorf("x.Data() = %v on rank %d after Unregister, want nil", x.Data(), d.Rank())
		}
		if n, _ := dist.Kept(d); n != kept-1 {
			return fmt.Errorf("rank %d keeps %d handles after Unregister, want %d", d.Rank(), n, kept-1)
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		want := [][]float64{{1, 2, 3, 4}, {1, 2, 3, 4}, {3, 6, 9, 12}}[d.Rank()]
		if got := ys[d.Rank()].Data().([]float64); !slices.Equal(got, want) {
			return fmt.Errorf("rank %d's vector is %v, want %v", d.Rank(), got, want)
		}
		return nil
	})
	require.NoError(t, err)
}

// After Unregister, every use of the handle fails on every rank, naming
// it and the submission that unregistered it, and the graph goes on.
func TestUnregisteredHandleIsRefused(t *testing.T) {
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		var mine []float64
		if d.Rank() == 1 {
			mine = make([]float64, 4)
		}
		x, err := dist.Register(d, 1, mine, 4, 1, scheduler.Named("tmp"))
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, double, dist.RW(x)); err != nil { // submission #0
			return err
		}
		if _, err := d.Unregister(ctx, x); err != nil { // #1
			return err
		}
		nop := func(int, any) error { return nil }
		uses := map[string]error{
			"Submit":       d.Submit(ctx, double, dist.R(x)),
			"Update":       dist.Update(ctx, d, x, func([]float64) error { return nil }),
			"Scatter":      d.Scatter(ctx, 0, []*dist.Handle{x}, nop),
			"Gather":       d.Gather(ctx, 0, []*dist.Handle{x}, nop),
			"Flush":        d.Flush(ctx, x),
			"Unregister":   func() error { _, err := d.Unregister(ctx, x); return err }(),
			"SetReduction": x.SetReduction(zeroF, addF),
			"Fetch":        func() error { _, err := x.Fetch(ctx); return err }(),
		}
		for use, err := range uses {
			if !errors.Is(err, comm.ErrInvalidArg) || !contains(err, `handle "tmp" (#0, owner 1) was unregistered at submission #1`) {
				return fmt.Errorf("%s of an unregistered handle on rank %d: %v", use, d.Rank(), err)
			}
		}
		if x.Data() != nil {
			return fmt.Errorf("Data of an unregistered handle on rank %d: %v", d.Rank(), x.Data())
		}
		// Nothing was submitted: the ranks' graphs still agree, and go on.
		y, err := onePerRank[float64](d, 4)
		if err != nil {
			return err
		}
		if y[0].ID() != 1 {
			return fmt.Errorf("the next handle has number %d, want 1 (numbers are never reused)", y[0].ID())
		}
		if err := d.Submit(ctx, addInto, dist.RW(y[0]), dist.R(y[2])); err != nil {
			return err
		}
		return d.WaitAll(ctx)
	})
	require.NoError(t, err)
}

// Bad input to Unregister and Flush - a nil handle, a handle of another
// scheduler, a closed scheduler - is refused on the calling rank, naming
// the handle, and submits nothing: the graph goes on.
func TestUnregisterBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		defer d.Close()
		other, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		var mine []float64
		if c.Rank() == 0 {
			mine = make([]float64, 2)
		}
		foreign, err := dist.Register(other, 0, mine, 2, 1, scheduler.Named("elsewhere"))
		if err != nil {
			return err
		}
		check := func(what string, err error, want ...error) error {
			for _, w := range want {
				if !errors.Is(err, w) {
					return fmt.Errorf("%s on rank %d: %v, want %v", what, c.Rank(), err, w)
				}
			}
			return nil
		}
		_, uerr := d.Unregister(ctx, nil)
		errs := []error{
			check("Unregister(nil)", uerr, comm.ErrInvalidArg),
			check("Flush(nil)", d.Flush(ctx, nil), comm.ErrInvalidArg),
		}
		if !contains(uerr, "nil handle") {
			errs = append(errs, fmt.Errorf("Unregister(nil): %v does not say nil handle", uerr))
		}
		_, uerr = d.Unregister(ctx, foreign)
		ferr := d.Flush(ctx, foreign)
		errs = append(errs,
			check("Unregister of a foreign handle", uerr, comm.ErrInvalidArg, dist.ErrForeignHandle),
			check("Flush of a foreign handle", ferr, comm.ErrInvalidArg, dist.ErrForeignHandle))
		for _, err := range []error{uerr, ferr} {
			if !contains(err, `handle "elsewhere"`) {
				errs = append(errs, fmt.Errorf("%v does not name the handle", err))
			}
		}
		if err := other.Close(); err != nil {
			return err
		}
		_, uerr = other.Unregister(ctx, foreign)
		errs = append(errs,
			check("Unregister after Close", uerr, dist.ErrClosed),
			check("Flush after Close", other.Flush(ctx, foreign), dist.ErrClosed))
		// None of it was a submission: the ranks' graphs agree.
		y, err := onePerRank[float64](d, 2)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, addInto, dist.RW(y[1]), dist.R(y[0])); err != nil {
			return err
		}
		errs = append(errs, d.WaitAll(ctx))
		return errors.Join(errs...)
	})
	require.NoError(t, err)
}

// A rank that does not unregister where the others do - it skips it, or
// unregisters later - is a graph mismatch on every rank, naming the
// Unregister and the handle.
func TestUnregisterMismatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		later bool // rank 1 unregisters after the next submission, instead of not at all
		flush bool // Flush instead of Unregister
	}{{"skipped", false, false}, {"later", true, false}, {"flush skipped", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			errs := make([]error, 3)
			err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
				var mine []float64
				if d.Rank() == 0 {
					mine = make([]float64, 4)
				}
				x, err := dist.Register(d, 0, mine, 4, 1, scheduler.Named("tmp"))
				if err != nil {
					return err
				}
				ys, err := onePerRank[float64](d, 4)
				if err != nil {
					return err
				}
				if err := d.Submit(ctx, double, dist.RW(x)); err != nil {
					return err
				}
				if d.Rank() != 1 {
					if tc.flush {
						if err := d.Flush(ctx, x); err != nil {
							return err
						}
					} else if _, err := d.Unregister(ctx, x); err != nil {
						return err
					}
				}
				if err := d.Submit(ctx, double, dist.RW(ys[2])); err != nil {
					return err
				}
				if d.Rank() == 1 && tc.later {
					if _, err := d.Unregister(ctx, x); err != nil {
						return err
					}
				}
				errs[d.Rank()] = d.WaitAll(ctx)
				return nil
			})
			require.NoError(t, err)
			for r, e := range errs {
				require.ErrorIs(t, e, dist.ErrGraphMismatch, "rank %d", r)
				want := `codelet "dist.unregister" RW(#0 "tmp" owner 0, 4 x 1 float64)`
				if tc.flush {
					want = `codelet "dist.cache-flush" R(#0 "tmp" owner 0, 4 x 1 float64)`
				}
				assert.Contains(t, e.Error(), want, "rank %d", r)
			}
		})
	}
}

// A task on the handle fails on rank 1 while rank 0, its owner, waits in
// Unregister for the version rank 1 was to write: rank 0's Unregister
// returns the failure, naming rank 1, and every rank's WaitAll does.
func TestUnregisterReturnsFailure(t *testing.T) {
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("boom in the task") }}
	uerrs, werrs := make([]error, 3), make([]error, 3)
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		var mine []float64
		if d.Rank() == 0 {
			mine = make([]float64, 4)
		}
		x, err := dist.Register(d, 0, mine, 4, 1, scheduler.Named("tmp"))
		if err != nil {
			return err
		}
		// A rank may hear of the failure already here.
		if err := d.Submit(ctx, boom, dist.RW(x), dist.OnRank(1)); err != nil && !errors.Is(err, dist.ErrRankFailed) {
			return err
		}
		_, uerrs[d.Rank()] = d.Unregister(ctx, x)
		werrs[d.Rank()] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	for r := range 2 { // rank 2 has nothing to wait for: it may return before it hears
		require.ErrorIs(t, uerrs[r], dist.ErrRankFailed, "rank %d's Unregister", r)
		assert.Contains(t, uerrs[r].Error(), "boom in the task", "rank %d's Unregister", r)
	}
	assert.Contains(t, uerrs[0].Error(), "rank 1", "rank 0's Unregister names the rank that failed")
	if uerrs[2] != nil {
		require.ErrorIs(t, uerrs[2], dist.ErrRankFailed)
	}
	for r, e := range werrs {
		require.ErrorIs(t, e, dist.ErrRankFailed, "rank %d's WaitAll", r)
		assert.Contains(t, e.Error(), "rank 1: ", "rank %d's WaitAll", r)
		assert.Contains(t, e.Error(), "boom in the task", "rank %d's WaitAll", r)
	}
}

// Unregister's wait for the handle's transfers is bounded: rank 0 waits
// for a version rank 1 does not produce, and gives up at its stall
// timeout with ErrStalled naming what it waits for, or when its context
// is canceled (by its stall report: an event, not a sleep); the graph
// then fails on every rank, naming rank 0.
func TestUnregisterWaitIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		want error
	}{{"stall timeout", dist.ErrStalled}, {"context canceled", context.Canceled}} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var once sync.Once
			defer once.Do(func() { close(release) })
			block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error {
				select {
				case <-release:
				case <-time.After(testTimeout): // only if the test failed
				}
				return nil
			}}
			uerrs, werrs := make([]error, 3), make([]error, 3)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
				ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
				if err != nil {
					return err
				}
				defer ls.Close()
				uctx, ucancel := context.WithCancel(ctx)
				defer ucancel()
				// Rank 0 gives up first: the others wait longer.
				opts := []dist.Option{dist.WithStallTimeout(testTimeout), dist.WithStallReport(0, nil)}
				if c.Rank() == 0 && tc.want == dist.ErrStalled {
					opts = []dist.Option{dist.WithStallTimeout(300 * time.Millisecond), dist.WithStallReport(0, nil)}
				} else if c.Rank() == 0 {
					opts = []dist.Option{dist.WithStallReport(100*time.Millisecond, func(string) { ucancel() })}
				}
				d, err := dist.New(ctx, c, ls, opts...)
				if err != nil {
					return err
				}
				defer d.Close()
				var mine []float64
				if d.Rank() == 0 {
					mine = make([]float64, 4)
				}
				x, err := dist.Register(d, 0, mine, 4, 1, scheduler.Named("tmp"))
				if err != nil {
					return err
				}
				if err := d.Submit(ctx, block, dist.RW(x), dist.OnRank(1)); err != nil {
					return err
				}
				_, uerrs[d.Rank()] = d.Unregister(uctx, x)
				if d.Rank() == 0 {
					once.Do(func() { close(release) })
				}
				werrs[d.Rank()] = d.WaitAll(ctx)
				return nil
			})
			require.NoError(t, err)
			require.ErrorIs(t, uerrs[0], tc.want)
			assert.Contains(t, uerrs[0].Error(), `Unregister of handle "tmp" (#0, owner 0)`)
			if tc.want == dist.ErrStalled {
				assert.Contains(t, uerrs[0].Error(), `waits for rank 1 to send handle "tmp"`)
			}
			for r, e := range werrs {
				require.ErrorIs(t, e, dist.ErrRankFailed, "rank %d's WaitAll", r)
				assert.Contains(t, e.Error(), "rank 0: ", "rank %d's WaitAll", r)
			}
		})
	}
}

// A loop that registers a temporary, reduces into it from every rank,
// reads it on every rank and unregisters it, 1000 times, keeps no more
// on any rank at the end than after the first pass, and computes right.
func TestUnregisterLoopDoesNotGrow(t *testing.T) {
	const iters, n = 1000, 3
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		accs, err := onePerRank[float64](d, n)
		if err != nil {
			return err
		}
		var kept, capacity int
		for it := range iters {
			owner := it % d.Size()
			var mine []float64
			if owner == d.Rank() {
				mine = make([]float64, n)
			}
			tmp, err := dist.Register(d, owner, mine, n, 1)
			if err != nil {
				return err
			}
			if err := tmp.SetReduction(zeroF, addF); err != nil {
				return err
			}
			if err := d.Submit(ctx, fillWith, dist.W(tmp), dist.With(scheduler.WithArg(float64(it)))); err != nil {
				return err
			}
			for r := range d.Size() {
				if err := d.Submit(ctx, plusOne, dist.Redux(tmp), dist.OnRank(r)); err != nil {
					return err
				}
			}
			for r := range d.Size() {
				if err := d.Submit(ctx, addInto, dist.RW(accs[r]), dist.R(tmp)); err != nil {
					return err
				}
			}
			data, err := d.Unregister(ctx, tmp)
			if err != nil {
				return err
			}
			if want := float64(it + d.Size()); owner == d.Rank() && data.([]float64)[0] != want {
				return fmt.Errorf("pass %d: the temporary's owner got %v, want %v", it, data, want)
			}
			if it == 0 {
				kept, capacity = dist.Kept(d)
			}
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		live, c := dist.Kept(d)
		if live != kept || c > capacity {
			return fmt.Errorf("rank %d keeps %d handles in a slice of %d after %d passes, %d in %d after the first", d.Rank(), live, c, iters, kept, capacity)
		}
		if live != d.Size() || dist.CachedCopies(d) != 0 {
			return fmt.Errorf("rank %d keeps %d handles and %d cached copies, want %d and 0", d.Rank(), live, dist.CachedCopies(d), d.Size())
		}
		want := float64(iters*(iters-1)/2 + iters*d.Size())
		if got := accs[d.Rank()].Data().([]float64); got[0] != want || got[n-1] != want {
			return fmt.Errorf("rank %d's sum is %v, want %v", d.Rank(), got, want)
		}
		return nil
	})
	require.NoError(t, err)
}

// Flush drops the cached copies, so that the next reads transfer the
// data again; a rank that wrote the latest version keeps it while the
// owner does not hold it, and the owner serves the next reads once it
// does.
func TestFlushTransfersAgain(t *testing.T) {
	var mu sync.Mutex
	seen := map[int][]float64{} // what each rank's reads saw, in order
	read := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error {
		mu.Lock()
		defer mu.Unlock()
		r := c.Arg.(int)
		seen[r] = append(seen[r], scheduler.VectorOf[float64](c, 0)[0])
		return nil
	}}
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		var mine []float64
		if d.Rank() == 0 {
			mine = []float64{1, 1}
		}
		x, err := dist.Register(d, 0, mine, 2, 1, scheduler.Named("x"))
		if err != nil {
			return err
		}
		readOn := func(ranks ...int) error {
			for _, r := range ranks {
				if err := d.Submit(ctx, read, dist.R(x), dist.OnRank(r), dist.With(scheduler.WithArg(r))); err != nil {
					return err
				}
			}
			return d.WaitAll(ctx)
		}
		// sent checks each rank's messages so far, and its cached copies.
		// (msgs nil: not checked, sends may be starting.)
		sent := func(step string, msgs, cached []int) error {
			if got := d.Stats().MessagesSent; msgs != nil && got != int64(msgs[d.Rank()]) {
				return fmt.Errorf("%s: rank %d sent %d messages, want %d", step, d.Rank(), got, msgs[d.Rank()])
			}
			if got := dist.CachedCopies(d); got != cached[d.Rank()] {
				return fmt.Errorf("%s: rank %d caches %d copies, want %d", step, d.Rank(), got, cached[d.Rank()])
			}
			return nil
		}
		steps := []func() error{
			func() error { return readOn(1, 2) },
			func() error { return sent("read once", []int{2, 0, 0}, []int{0, 1, 1}) },
			func() error { return readOn(1, 2) },
			func() error { return sent("read from the cache", []int{2, 0, 0}, []int{0, 1, 1}) },
			func() error { return d.Flush(ctx, x) },
			func() error { return sent("flushed", []int{2, 0, 0}, []int{0, 0, 0}) },
			func() error { return readOn(1, 2) },
			func() error { return sent("read after Flush", []int{4, 0, 0}, []int{0, 1, 1}) },
			// Rank 1 writes a version, rank 2 reads it: rank 1 sends.
			func() error { return d.Submit(ctx, double, dist.RW(x), dist.OnRank(1)) },
			func() error { return d.Submit(ctx, read, dist.R(x), dist.OnRank(2), dist.With(scheduler.WithArg(2))) },
			// Before WaitAll brings it to the owner, Flush keeps the writer's.
			func() error { return d.Flush(ctx, x) },
			func() error { return sent("flushed, owner stale", nil, []int{0, 1, 0}) },
			func() error { return readOn(2) }, // from rank 1 again; WaitAll sends it to rank 0
			func() error { return sent("read from the writer", []int{4, 3, 0}, []int{0, 1, 1}) },
			// The owner holds it now: its copy is the one kept.
			func() error { return d.Flush(ctx, x) },
			func() error { return sent("flushed, owner current", []int{4, 3, 0}, []int{0, 0, 0}) },
			func() error { return readOn(1, 2) },
			func() error { return sent("read from the owner", []int{6, 3, 0}, []int{0, 1, 1}) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 1, 1, 2}, seen[1])
	assert.Equal(t, []float64{1, 1, 1, 2, 2, 2}, seen[2])
}

// Random graphs (writes away from the owner, reductions, placements)
// ended by unregistering every handle instead of WaitAll: each owner gets
// the sequential run's result back from Unregister, and nothing is kept.
func TestUnregisterRandomGraphs(t *testing.T) {
	for _, ranks := range []int{1, 3} {
		err := runRanks(t, ranks, func(ctx context.Context, d *dist.Scheduler) error {
			for seed := range uint64(4) {
				const nh, ntasks = 8, 120
				owners, ops := randomGraph(seed, nh, ntasks, d.Size())
				want := sequential(nh, ops)
				hs := make([]*dist.Handle, nh)
				for h := range nh {
					var data []int64
					if owners[h] == d.Rank() {
						data = make([]int64, vecLen)
						for i := range data {
							data[i] = initial(h, i)
						}
					}
					var err error
					if hs[h], err = dist.Register(d, owners[h], data, vecLen, 1); err != nil {
						return err
					}
					if err := hs[h].SetReduction(zero, add); err != nil {
						return err
					}
				}
				for _, o := range ops {
					args := []dist.Arg{dist.RW(hs[o.target])}
					switch o.mode {
					case scheduler.ModeW:
						args[0] = dist.W(hs[o.target])
					case scheduler.ModeRedux:
						args[0] = dist.Redux(hs[o.target])
					}
					for _, r := range o.reads {
						args = append(args, dist.R(hs[r]))
					}
					if o.onRank >= 0 {
						args = append(args, dist.OnRank(o.onRank))
					}
					args = append(args, dist.With(scheduler.WithArg(o)))
					if err := d.Submit(ctx, apply, args...); err != nil {
						return err
					}
				}
				for h := range nh {
					data, err := d.Unregister(ctx, hs[h])
					if err != nil {
						return err
					}
					if owners[h] == d.Rank() && !slices.Equal(data.([]int64), want[h]) {
						return fmt.Errorf("seed %d: handle %d on its owner %d differs from the sequential run", seed, h, d.Rank())
					}
				}
				if err := d.WaitAll(ctx); err != nil {
					return err
				}
				if live, _ := dist.Kept(d); live != 0 {
					return fmt.Errorf("seed %d: rank %d keeps %d handles after unregistering every one", seed, d.Rank(), live)
				}
			}
			return nil
		})
		require.NoError(t, err, "%d ranks", ranks)
	}
}
