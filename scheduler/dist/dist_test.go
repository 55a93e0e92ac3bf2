package dist_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
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

const testTimeout = 60 * time.Second

// runRanks runs fn on n in-process ranks, each with a distributed scheduler
// over a 2-worker local one.
func runRanks(t *testing.T, n int, fn func(ctx context.Context, d *dist.Scheduler) error) error {
	t.Helper()
	return runRanksWith(t, n, []scheduler.Option{scheduler.WithWorkers(2)}, fn)
}

// runRanksWith is runRanks with the local schedulers' options.
func runRanksWith(t *testing.T, n int, opts []scheduler.Option, fn func(ctx context.Context, d *dist.Scheduler) error) error {
	t.Helper()
	return runRanksEach(t, n, func(int) []scheduler.Option { return opts }, fn)
}

// runRanksEach is runRanks with each rank's local scheduler options.
func runRanksEach(t *testing.T, n int, opts func(rank int) []scheduler.Option, fn func(ctx context.Context, d *dist.Scheduler) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, opts(c.Rank())...)
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		defer d.Close()
		return fn(ctx, d)
	})
}

// onePerRank registers, on every rank of d, one n-vector of T owned by
// each rank, in rank order.
func onePerRank[T comm.Number](d *dist.Scheduler, n int) ([]*dist.Handle, error) {
	hs := make([]*dist.Handle, d.Size())
	for r := range hs {
		var data []T
		if r == d.Rank() {
			data = make([]T, n)
		}
		var err error
		if hs[r], err = dist.Register(d, r, data, n, 1); err != nil {
			return nil, err
		}
	}
	return hs, nil
}

// op is one task of a random graph: target = target*mul + sum(reads) + add
// element-wise (mul 0: a pure write).
type op struct {
	target int
	mode   scheduler.Mode
	reads  []int
	add    int64
	onRank int // -1: owner computes
}

const vecLen = 700 // 5.6 KiB: above comm/local's eager limit

func randomGraph(seed uint64, nh, ntasks, ranks int) (owners []int, ops []op) {
	rng := rand.New(rand.NewPCG(seed, 7))
	owners = make([]int, nh)
	for i := range owners {
		owners[i] = rng.IntN(ranks)
	}
	for range ntasks {
		o := op{target: rng.IntN(nh), add: int64(rng.IntN(100)), onRank: -1}
		switch rng.IntN(4) {
		case 0:
			o.mode = scheduler.ModeW
		case 1:
			o.mode = scheduler.ModeRedux
		default:
			o.mode = scheduler.ModeRW
		}
		for range rng.IntN(3) {
			if r := rng.IntN(nh); r != o.target && !slices.Contains(o.reads, r) {
				o.reads = append(o.reads, r)
			}
		}
		if rng.IntN(5) == 0 || o.mode == scheduler.ModeRedux && rng.IntN(2) == 0 {
			o.onRank = rng.IntN(ranks)
		}
		ops = append(ops, o)
	}
	return owners, ops
}

func initial(h, i int) int64 { return int64(h*1000 + i) }

func (o op) apply(target []int64, reads [][]int64) {
	for i := range target {
		v := o.add
		if o.mode == scheduler.ModeRW {
			v += target[i] * 3
		}
		for _, r := range reads {
			v += r[i]
		}
		if o.mode == scheduler.ModeRedux {
			v += target[i] // a sum: the order of contributions does not matter
		}
		target[i] = v
	}
}

// zero and add are the reduction of the random graphs' Redux accesses.
var (
	zero = &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[int64](c, 0))
		return nil
	}}
	add = &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		dst, src := scheduler.VectorOf[int64](c, 0), scheduler.VectorOf[int64](c, 1)
		for i := range dst {
			dst[i] += src[i]
		}
		return nil
	}}
)

func sequential(nh int, ops []op) [][]int64 {
	data := make([][]int64, nh)
	for h := range data {
		data[h] = make([]int64, vecLen)
		for i := range data[h] {
			data[h][i] = initial(h, i)
		}
	}
	for _, o := range ops {
		var reads [][]int64
		for _, r := range o.reads {
			reads = append(reads, data[r])
		}
		o.apply(data[o.target], reads)
	}
	return data
}

var apply = &scheduler.Codelet{Name: "apply", CPU: func(c *scheduler.Call) error {
	o := c.Arg.(op)
	var reads [][]int64
	for i := 1; i < c.Len(); i++ {
		reads = append(reads, scheduler.VectorOf[int64](c, i))
	}
	o.apply(scheduler.VectorOf[int64](c, 0), reads)
	return nil
}}

// Random graphs over 1-4 ranks give, on every owner, exactly what the same
// submission order computes sequentially.
func TestRandomGraphsMatchSequential(t *testing.T) {
	for ranks := 1; ranks <= 4; ranks++ {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("ranks=%d/seed=%d", ranks, seed), func(t *testing.T) {
				require.NoError(t, runRanks(t, ranks, func(ctx context.Context, d *dist.Scheduler) error {
					return checkRandomGraph(ctx, d, seed)
				}))
			})
		}
	}
}

// TestRandomGraphsOnDevices runs the random graphs with a simulated
// device on every rank, too small for the rank's data, and half of the
// tasks that may run there forced onto it: what a rank sends must be the
// device's newest version, what it receives must reach the device.
func TestRandomGraphsOnDevices(t *testing.T) {
	opts := []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""),
		scheduler.WithSimDevices(scheduler.SimDevice{Memory: 4 * vecLen * 8, Bandwidth: -1})}
	for ranks := 2; ranks <= 3; ranks++ {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("ranks=%d/seed=%d", ranks, seed), func(t *testing.T) {
				require.NoError(t, runRanksWith(t, ranks, opts, func(ctx context.Context, d *dist.Scheduler) error {
					s := d.Local()
					c, err := s.NewContext("device", scheduler.ContextWorkers(len(s.Workers())-1))
					if err != nil {
						return err
					}
					if err := checkRandomGraphIn(ctx, d, seed, c); err != nil {
						return err
					}
					for _, st := range s.Stats() {
						if st.Kind == scheduler.SimWorker && st.Tasks == 0 {
							return fmt.Errorf("rank %d: the device ran no task", d.Rank())
						}
					}
					return nil
				}))
			})
		}
	}
}

// checkRandomGraph runs a seeded random graph on d and checks every handle
// d's rank owns against the sequential result.
func checkRandomGraph(ctx context.Context, d *dist.Scheduler, seed uint64) error {
	return checkRandomGraphIn(ctx, d, seed, nil)
}

// checkRandomGraphIn is checkRandomGraph sending every other task that a
// device may run (not Redux) to the local scheduling context dev, when
// not nil.
func checkRandomGraphIn(ctx context.Context, d *dist.Scheduler, seed uint64, dev *scheduler.Context) error {
	return checkRandomGraphEnd(ctx, d, seed, dev, d.WaitAll)
}

// checkRandomGraphEnd is checkRandomGraphIn ending the graph with end
// (d.WaitAll, or a Close) before it compares the owners' data.
func checkRandomGraphEnd(ctx context.Context, d *dist.Scheduler, seed uint64, dev *scheduler.Context, end func(context.Context) error) error {
	const nh, ntasks = 12, 150
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
	n := 0
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
		if n++; dev != nil && o.mode != scheduler.ModeRedux && n%2 == 0 {
			args = append(args, dist.With(scheduler.InContext(dev)))
		}
		if err := d.Submit(ctx, apply, args...); err != nil {
			return err
		}
	}
	if err := end(ctx); err != nil {
		return err
	}
	for h := range nh {
		if owners[h] != d.Rank() {
			continue
		}
		got := hs[h].Data().([]int64)
		if !slices.Equal(got, want[h]) {
			i := 0
			for got[i] == want[h][i] {
				i++
			}
			return fmt.Errorf("handle %d on its owner %d: element %d is %d, want %d", h, d.Rank(), i, got[i], want[h][i])
		}
	}
	return nil
}

// The bytes sent are what owner-computes needs: a chain of tasks that
// reads a handle of rank 0 on rank 1 moves it once per version.
func TestTransfersOncePerVersion(t *testing.T) {
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		var a, b []int64
		if d.Rank() == 0 {
			a = make([]int64, 100)
		} else {
			b = make([]int64, 100)
		}
		ha, err := dist.Register(d, 0, a, 100, 1)
		if err != nil {
			return err
		}
		hb, err := dist.Register(d, 1, b, 100, 1)
		if err != nil {
			return err
		}
		inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
			v := scheduler.VectorOf[int64](c, 0)
			for i := range v {
				v[i]++
			}
			for j := 1; j < c.Len(); j++ {
				for i, x := range scheduler.VectorOf[int64](c, j) {
					v[i] += x
				}
			}
			return nil
		}}
		// Three reads of a's first version on rank 1: one message.
		for range 3 {
			if err := d.Submit(ctx, inc, dist.RW(hb), dist.R(ha)); err != nil {
				return err
			}
		}
		// A new version of a, read twice more on rank 1: one more.
		if err := d.Submit(ctx, inc, dist.RW(ha)); err != nil {
			return err
		}
		for range 2 {
			if err := d.Submit(ctx, inc, dist.RW(hb), dist.R(ha)); err != nil {
				return err
			}
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		st := d.Stats()
		want := dist.Stats{MessagesReceived: 2, BytesReceived: 2 * 800}
		if d.Rank() == 0 {
			want = dist.Stats{MessagesSent: 2, BytesSent: 2 * 800}
		}
		if st != want {
			return fmt.Errorf("rank %d sent %+v, want %+v", d.Rank(), st, want)
		}
		if d.Rank() == 1 && b[0] != 3*(1+0)+2*(1+1) {
			return fmt.Errorf("b[0] = %d, want %d", b[0], 3+4)
		}
		return nil
	})
	require.NoError(t, err)
}

// A task that fails on one rank: every rank's WaitAll returns an error
// naming that rank, although the others wait for data it would have sent.
func TestFailedTaskNamesRankEverywhere(t *testing.T) {
	boom := errors.New("not positive definite")
	// The task fails once every rank has submitted its graph, so that
	// each learns of the failure in WaitAll (a rank still submitting
	// when it comes would be told by Submit).
	var submitted sync.WaitGroup
	submitted.Add(3)
	fail := &scheduler.Codelet{Name: "potrf", CPU: func(c *scheduler.Call) error {
		submitted.Wait()
		return boom
	}}
	use := &scheduler.Codelet{Name: "use", CPU: func(c *scheduler.Call) error { return nil }}
	errs := make([]error, 3)
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		done := sync.OnceFunc(submitted.Done)
		defer done() // a rank that fails to submit must not hold the task back
		hs, err := onePerRank[float64](d, 10)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, fail, dist.RW(hs[1])); err != nil {
			return err
		}
		// Ranks 0 and 2 need rank 1's result.
		for _, r := range []int{0, 2} {
			if err := d.Submit(ctx, use, dist.RW(hs[r]), dist.R(hs[1])); err != nil {
				return err
			}
		}
		done()
		errs[d.Rank()] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		require.ErrorIs(t, e, dist.ErrRankFailed, "rank %d", r)
		assert.Contains(t, e.Error(), "rank 1:", "rank %d", r)
		assert.Contains(t, e.Error(), "not positive definite", "rank %d", r)
	}
}

// A task fails while the ranks are still submitting: the failing rank
// stops submitting at once, the others later, when they hear of it. The
// ranks' graph comparisons then see different windows, and every rank's
// error names the failure (ErrRankFailed, rank 1, the task's error), not
// a difference of graphs the failure caused.
func TestFailureWhileSubmitting(t *testing.T) {
	boom := errors.New("not positive definite")
	// Ranks 0 and 2 submit 100 tasks, past the first comparison window,
	// before the task on rank 1 may fail; rank 1 submits nothing after it
	// until it has failed.
	var ahead sync.WaitGroup
	ahead.Add(2)
	failed := make(chan struct{})
	fail := &scheduler.Codelet{Name: "potrf", CPU: func(c *scheduler.Call) error {
		ahead.Wait()
		return boom
	}}
	noop := &scheduler.Codelet{Name: "noop", CPU: func(c *scheduler.Call) error { return nil }}
	const n = 2000
	submitErrs, waitErrs := make([]error, 3), make([]error, 3)
	submitted := make([]int, 3)
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[float64](d, 4)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, fail, dist.RW(hs[1]),
			dist.With(scheduler.WithCallback(func(*scheduler.Task) { close(failed) }))); err != nil {
			return err
		}
		release := func() {}
		if d.Rank() != 1 {
			release = sync.OnceFunc(ahead.Done)
			defer release()
		} else {
			<-failed
		}
		for i := range n {
			if i == 100 {
				release()
			}
			if submitErrs[d.Rank()] = d.Submit(ctx, noop, dist.RW(hs[i%3])); submitErrs[d.Rank()] != nil {
				break
			}
			submitted[d.Rank()]++
		}
		waitErrs[d.Rank()] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	t.Logf("tasks submitted after the failing one: %v", submitted)
	require.Less(t, submitted[1], 64, "rank 1 stopped within its first window")
	require.GreaterOrEqual(t, submitted[0], 100)
	require.Error(t, submitErrs[1], "rank 1's Submit reports its failure")
	require.ErrorIs(t, submitErrs[1], dist.ErrRankFailed, "rank 1's Submit")
	for r, e := range waitErrs {
		require.Error(t, e, "rank %d", r)
		require.ErrorIs(t, e, dist.ErrRankFailed, "rank %d", r)
		assert.NotErrorIs(t, e, dist.ErrGraphMismatch, "rank %d: the failure explains the difference", r)
		assert.Contains(t, e.Error(), "rank 1: ", "rank %d", r)
		assert.Contains(t, e.Error(), "not positive definite", "rank %d", r)
		assert.NotContains(t, e.Error(), "rank 1: rank 1:", "rank %d", r)
	}
}

// TestInterruptedSubmission: the ranks' contexts end while they submit
// (a signal, say), each at a different point of the graph: no rank
// reports a difference of the graphs (the rank that stopped first is
// named, or the communicator it broke by leaving), and Close adds
// nothing (the broken communicator is that failure's consequence).
func TestInterruptedSubmission(t *testing.T) {
	noop := &scheduler.Codelet{Name: "noop", CPU: func(c *scheduler.Call) error { return nil }}
	submitErrs, closeErrs := make([]error, 3), make([]error, 3)
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[float64](d, 4)
		if err != nil {
			return err // a rank that stopped first can leave while the others register
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for i := range 2000 {
			if i == 5+70*d.Rank() {
				cancel()
			}
			if submitErrs[d.Rank()] = d.Submit(ctx, noop, dist.RW(hs[i%3])); submitErrs[d.Rank()] != nil {
				break
			}
		}
		closeErrs[d.Rank()] = d.Close()
		return submitErrs[d.Rank()]
	})
	require.Error(t, err)
	require.ErrorIs(t, err, context.Canceled, "the first failure is an interruption")
	for r, e := range submitErrs {
		// nil where a rank that stopped first left before this one's
		// dist.New.
		assert.NotErrorIs(t, e, dist.ErrGraphMismatch, "rank %d: %v", r, e)
	}
	for r, e := range closeErrs {
		assert.NoError(t, e, "rank %d's Close", r)
	}
}

// Bad input gets errors naming the thing.
func TestBadInput(t *testing.T) {
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		if _, err := dist.Register[float64](d, 5, nil, 2, 2); !errors.Is(err, dist.ErrBadRank) {
			return fmt.Errorf("owner 5 of 2: %v", err)
		}
		if _, err := dist.RegisterTiles[float64](d, 2, 2, 4, 4, dist.BlockCyclic2D(2, 2), nil); !errors.Is(err, dist.ErrDistribution) || !contains(err, "2 x 2 process grid for 2 ranks") {
			return fmt.Errorf("a 2x2 grid on 2 ranks: %v", err)
		}
		h, err := dist.Register(d, 0, make([]float64, 4), 2, 2)
		if err != nil {
			return err
		}
		noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
		for _, r := range []int{7, -1} {
			if err := d.Submit(ctx, noop, dist.RW(h), dist.OnRank(r)); !errors.Is(err, dist.ErrBadRank) || !contains(err, fmt.Sprintf("OnRank(%d)", r)) {
				return fmt.Errorf("OnRank(%d): %v", r, err)
			}
		}
		for name, dd := range map[string]dist.Distribution{"nil": nil, "Func(nil)": dist.Func(nil)} {
			if _, err := dist.RegisterTiles[float64](d, 2, 2, 4, 4, dd, nil); !errors.Is(err, dist.ErrDistribution) {
				return fmt.Errorf("RegisterTiles with a %s distribution: %v", name, err)
			}
		}
		if _, err := dist.RegisterTiles[float64](d, 0, 2, 4, 4, dist.Cyclic1D(2, 2), nil); !errors.Is(err, comm.ErrInvalidArg) || !contains(err, "0 x 2 grid") {
			return fmt.Errorf("a 0 x 2 grid: %v", err)
		}
		// A 3 x 3 grid of 4 x 4 tiles is a 12 x 12 matrix, of float64.
		tiles, err := dist.RegisterTiles[float64](d, 3, 3, 4, 4, dist.Cyclic1D(3, 2), nil)
		if err != nil {
			return err
		}
		a := make([]float64, 16*16)
		for _, tc := range []struct {
			rows, cols int
			a          []float64
			want       string
		}{
			{10, 12, a, "tile (2, 0), handle \"(2,0)\" (#7, owner 0), is 4 x 4, not 2 x 4"},
			{16, 12, a, "3 rows of tiles at most 4 rows high cover 9 to 12 rows, not the 16 of the 16 x 12 matrix"},
			{12, 13, a, "3 columns of tiles (the widest row of the grid) at most 4 columns wide cover 9 to 12 columns, not the 13 of the 12 x 13 matrix"},
			{12, 12, a[:12*12-1], "143 elements on root 1"},
		} {
			// In one order on every rank (not a map's, drawn per rank):
			// the calls are compared across ranks as submissions.
			for _, mv := range []struct {
				name string
				move func(context.Context, *dist.Scheduler, int, []float64, int, int, [][]*dist.Handle) error
			}{{"ScatterMatrix", dist.ScatterMatrix[float64]}, {"GatherMatrix", dist.GatherMatrix[float64]}} {
				name, move := mv.name, mv.move
				in := tc.a
				if d.Rank() != 1 {
					in = nil // only root's matters
				}
				if err := move(ctx, d, 1, in, tc.rows, tc.cols, tiles); !errors.Is(err, comm.ErrInvalidArg) || !contains(err, tc.want) {
					return fmt.Errorf("%s of %d x %d: %v, want %q", name, tc.rows, tc.cols, err, tc.want)
				}
			}
		}
		if err := dist.GatherMatrix(ctx, d, 0, make([]int32, 12*12), 12, 12, tiles); !errors.Is(err, comm.ErrInvalidArg) || !contains(err, "holds float64, the matrix int32") {
			return fmt.Errorf("GatherMatrix of float64 tiles into int32: %v", err)
		}
		// Nothing was submitted: the scheduler goes on.
		if err := dist.ScatterMatrix(ctx, d, 1, a[:12*12], 12, 12, tiles); err != nil {
			return err
		}
		return d.WaitAll(ctx)
	})
	require.NoError(t, err)
}

// Close with tasks submitted since the last WaitAll waits for them as
// WaitAll would, on every rank: nothing submitted is lost.
func TestClosePendingWork(t *testing.T) {
	for n := 1; n <= 3; n++ {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			err := runRanks(t, n, func(ctx context.Context, d *dist.Scheduler) error {
				return checkRandomGraphEnd(ctx, d, 7, nil, func(context.Context) error { return d.Close() })
			})
			require.NoError(t, err)
		})
	}
}

// One rank leaving WaitAll early (its context ends while a task of its
// runs) ends the graph on every rank: the others' WaitAll return
// ErrRankFailed naming it instead of waiting for it, Submit fails
// afterwards on every rank, the leaving one included, and Close, after
// the failure WaitAll reported, reports nothing again.
func TestOneRankLeavesWaitAll(t *testing.T) {
	const n = 3
	release, started := make(chan struct{}), make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error {
		close(started)
		<-release
		return nil
	}}
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	waitErrs, submitErrs, closeErrs := make([]error, n), make([]error, n), make([]error, n)
	var submitted sync.WaitGroup // every rank has submitted the graph
	submitted.Add(n)
	err := runRanksWith(t, n, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		// The last rank's task blocks; the others then read its result.
		if err := d.Submit(ctx, block, dist.RW(hs[n-1])); err != nil {
			return err
		}
		for r := range n - 1 {
			if err := d.Submit(ctx, noop, dist.RW(hs[r]), dist.R(hs[n-1])); err != nil {
				return err
			}
		}
		submitted.Done()
		wctx := ctx
		if d.Rank() == n-1 {
			// It leaves once the others are done submitting (else their
			// Submit reports it instead of their WaitAll).
			var cancel context.CancelFunc
			wctx, cancel = context.WithCancel(ctx)
			<-started
			submitted.Wait()
			cancel()
		}
		waitErrs[d.Rank()] = d.WaitAll(wctx)
		if d.Rank() == n-1 {
			close(release)
		}
		submitErrs[d.Rank()] = d.Submit(ctx, noop, dist.RW(hs[d.Rank()]))
		closeErrs[d.Rank()] = d.Close()
		return d.Local().Close() // it reports nothing again
	})
	require.NoError(t, err)
	require.ErrorIs(t, waitErrs[n-1], context.Canceled)
	for r := range n {
		if r < n-1 {
			require.ErrorIs(t, waitErrs[r], dist.ErrRankFailed, "rank %d", r)
			assert.Contains(t, waitErrs[r].Error(), fmt.Sprintf("rank %d left WaitAll", n-1), "rank %d", r)
		}
		assert.Error(t, submitErrs[r], "rank %d: Submit after the graph ended", r)
		assert.NoError(t, closeErrs[r], "rank %d: Close", r)
	}
}

// Register with data of the wrong length fails on the owner, the only rank
// that sees the data, and the graph fails on every rank naming that
// registration, instead of the handles' numbers parting silently.
func TestRegisterBadLengthOnOwner(t *testing.T) {
	errs := make([]error, 2)
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		var data []float64
		if d.Rank() == 0 {
			data = make([]float64, 3)
		}
		_, err := dist.Register(d, 0, data, 2, 2, scheduler.Named("v"))
		if d.Rank() == 0 {
			if !errors.Is(err, comm.ErrInvalidArg) || !contains(err, `Register of handle #0 "v": 3 elements for a 2 x 2 handle`) {
				return fmt.Errorf("owner's Register: %v", err)
			}
		} else if err != nil {
			return fmt.Errorf("rank 1's Register: %v", err)
		}
		errs[d.Rank()] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		require.ErrorIs(t, e, dist.ErrRankFailed, "rank %d", r)
		assert.Contains(t, e.Error(), `rank 0: Register of handle #0 "v"`, "rank %d", r)
	}
}

// A handle registered with another shape or element type on one rank
// parts the graphs: every rank's WaitAll names the first task that uses
// it, with each rank's shape - also when the shapes hold as many elements
// (a 2 x 3 handle read as 3 x 2 would otherwise run silently on bytes
// laid out for the other shape).
func TestGraphMismatchShape(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rows, cols   int // rank 1's registration; rank 0 (the owner) registers 2 x 3 float64
		float32      bool
		want0, want1 string
	}{
		{name: "transposed", rows: 3, cols: 2, want0: "2 x 3 float64", want1: "3 x 2 float64"},
		{name: "fewer elements", rows: 2, cols: 1, want0: "2 x 3 float64", want1: "2 x 1 float64"},
		{name: "element type", rows: 2, cols: 3, float32: true, want0: "2 x 3 float64", want1: "2 x 3 float32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
			errs := make([]error, 2)
			err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
				var h *dist.Handle
				var err error
				switch {
				case d.Rank() == 0:
					h, err = dist.Register(d, 0, make([]float64, 6), 2, 3, scheduler.Named("x"))
				case tc.float32:
					h, err = dist.Register[float32](d, 0, nil, tc.rows, tc.cols, scheduler.Named("x"))
				default:
					h, err = dist.Register[float64](d, 0, nil, tc.rows, tc.cols, scheduler.Named("x"))
				}
				if err != nil {
					return err
				}
				if err := d.Submit(ctx, noop, dist.R(h), dist.OnRank(1)); err != nil {
					errs[d.Rank()] = err
					return nil
				}
				errs[d.Rank()] = d.WaitAll(ctx)
				return nil
			})
			require.NoError(t, err)
			for r, e := range errs {
				require.ErrorIs(t, e, dist.ErrGraphMismatch, "rank %d", r)
				assert.Contains(t, e.Error(), tc.want0, "rank %d", r)
				assert.Contains(t, e.Error(), tc.want1, "rank %d", r)
			}
		})
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// Ranks that submit different graphs are told so, on every rank, within two
// windows of submissions, naming the first submission that differs; nobody
// hangs waiting for data the other graph never produces.
func TestGraphMismatch(t *testing.T) {
	other := &scheduler.Codelet{Name: "other", CPU: func(*scheduler.Call) error { return nil }}
	for _, tc := range []struct {
		name string
		at   int // the first differing submission
		diff func(d *dist.Scheduler, i int, hs []*dist.Handle) (cl *scheduler.Codelet, args []dist.Arg, stop bool)
		want string
	}{
		{"codelet", 10, func(d *dist.Scheduler, i int, hs []*dist.Handle) (*scheduler.Codelet, []dist.Arg, bool) {
			return other, []dist.Arg{dist.RW(hs[i%4]), dist.R(hs[(i+1)%4])}, false
		}, `codelet "other"`},
		{"mode", 70, func(d *dist.Scheduler, i int, hs []*dist.Handle) (*scheduler.Codelet, []dist.Arg, bool) {
			return nil, []dist.Arg{dist.RW(hs[i%4]), dist.RW(hs[(i+1)%4])}, false
		}, `R(#3 "v3" owner 0, 700 x 1 int64); rank 1 made submission #70: codelet "apply" RW(#2 "v2" owner 2, 700 x 1 int64) RW(#3 "v3" owner 0, 700 x 1 int64)`},
		{"shorter", 90, func(d *dist.Scheduler, i int, hs []*dist.Handle) (*scheduler.Codelet, []dist.Arg, bool) {
			return nil, nil, true
		}, "rank 1 is in WaitAll after 90 submissions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := make([]error, 3)
			err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
				hs := make([]*dist.Handle, 4)
				for h := range hs {
					var data []int64
					if h%3 == d.Rank() {
						data = make([]int64, vecLen)
					}
					var err error
					if hs[h], err = dist.Register(d, h%3, data, vecLen, 1, scheduler.Named(fmt.Sprintf("v%d", h))); err != nil {
						return err
					}
				}
				for i := range 100 {
					cl, args := apply, []dist.Arg{dist.RW(hs[i%4]), dist.R(hs[(i+1)%4])}
					if d.Rank() == 1 && i >= tc.at {
						c, a, stop := tc.diff(d, i, hs)
						if stop {
							break
						}
						if c != nil {
							cl = c
						}
						args = a
					}
					args = append(args, dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1})))
					if err := d.Submit(ctx, cl, args...); err != nil {
						errs[d.Rank()] = err
						return nil
					}
				}
				errs[d.Rank()] = d.WaitAll(ctx)
				return nil
			})
			require.NoError(t, err)
			for r, e := range errs {
				require.ErrorIs(t, e, dist.ErrGraphMismatch, "rank %d", r)
				assert.Contains(t, e.Error(), fmt.Sprintf("submission #%d", tc.at), "rank %d", r)
				assert.Contains(t, e.Error(), tc.want, "rank %d", r)
			}
		})
	}
}

// A distribution that differs between ranks (rank 1 swaps the owners of
// two tiles) is a difference of the graphs, caught within two windows on
// every rank and naming the handle and both owners, not a stall until
// PZ_DIST_TIMEOUT.
func TestGraphMismatchDistribution(t *testing.T) {
	const nt, b = 3, 2
	errs := make([]error, 3)
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		// Far below PZ_DIST_TIMEOUT: a stall fails the test.
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		me := d.Rank()
		tiles, err := dist.RegisterTiles[int64](d, nt, nt, b, b, dist.Func(func(i, j int) int {
			if me == 1 && i == 0 && j <= 1 {
				return (1 - j) % 3 // (0,0) and (0,1) swapped
			}
			return (i + j) % 3
		}), nil)
		if err != nil {
			return err
		}
		for i := range nt {
			for j := range nt {
				args := []dist.Arg{dist.RW(tiles[i][j]), dist.R(tiles[i][(j+1)%nt])}
				args = append(args, dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1})))
				if err := d.Submit(ctx, apply, args...); err != nil {
					errs[me] = err
					return nil
				}
			}
		}
		errs[me] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		require.ErrorIs(t, e, dist.ErrGraphMismatch, "rank %d", r)
		assert.Contains(t, e.Error(), "RW(#0 \"(0,0)\" owner 0,", "rank %d", r)
		assert.Contains(t, e.Error(), "RW(#0 \"(0,0)\" owner 1,", "rank %d", r)
	}
}

// Canceling the context on every rank returns from WaitAll at once, even
// while a rank waits for data a running task has not produced; Close then
// returns (nil, or the other rank's departure where this rank heard it
// before its WaitAll began) and no goroutine is left.
func TestCancelWaitAll(t *testing.T) {
	before := runtime.NumGoroutine()
	release := make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error { <-release; return nil }}
	use := &scheduler.Codelet{Name: "use", CPU: func(*scheduler.Call) error { return nil }}
	started := make(chan struct{})
	var once sync.Once
	var submitted sync.WaitGroup // both ranks have submitted: neither Submit can see the other leave
	submitted.Add(2)
	errs := make([]error, 2)
	err := local.Run(context.Background(), 2, func(_ context.Context, c comm.Comm) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		d, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		hs := make([]*dist.Handle, 2)
		for r := range 2 {
			var data []int64
			if r == c.Rank() {
				data = make([]int64, 10)
			}
			if hs[r], err = dist.Register(d, r, data, 10, 1); err != nil {
				return err
			}
		}
		marker := dist.With(scheduler.WithCallback(func(*scheduler.Task) {}))
		blockStart := &scheduler.Codelet{Name: "block", CPU: func(call *scheduler.Call) error {
			once.Do(func() { close(started) })
			return block.CPU(call)
		}}
		if err := d.Submit(ctx, blockStart, dist.RW(hs[0]), marker); err != nil {
			return err
		}
		if err := d.Submit(ctx, use, dist.RW(hs[1]), dist.R(hs[0])); err != nil {
			return err
		}
		submitted.Done()
		submitted.Wait()
		<-started // rank 0's task runs; rank 1 waits for its result
		cancel()
		errs[c.Rank()] = d.WaitAll(ctx)
		if c.Rank() == 0 {
			close(release)
		}
		if err := d.Close(); err != nil {
			// The other rank's departure, heard before this rank's
			// WaitAll began, is a failure that this WaitAll's own
			// context error does not carry: Close reports it (the
			// failure told only by an error that carries it).
			if !errors.Is(err, dist.ErrRankFailed) || !strings.Contains(err.Error(), fmt.Sprintf("rank %d left WaitAll", 1-c.Rank())) {
				return fmt.Errorf("%w (WaitAll: %v)", err, errs[c.Rank()])
			}
		}
		// Close drained what the cancellation ended: the errors were
		// WaitAll's, and the local scheduler does not report them again.
		if err := ls.Close(); err != nil {
			return err
		}
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		require.ErrorIs(t, e, context.Canceled, "rank %d", r)
	}
	deadline := time.Now().Add(testTimeout)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines: %d before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// A rank that fails outright (its function returns an error) while others
// wait for its data: every other rank's error names it, wherever they were.
func TestRankFailsOutright(t *testing.T) {
	boom := errors.New("rank gave up")
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[int64](d, 10)
		if err != nil {
			return err
		}
		if d.Rank() == 2 {
			return boom // before submitting what the others need
		}
		arg := dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1}))
		for r := range 3 {
			if err := d.Submit(ctx, apply, dist.RW(hs[r]), arg); err != nil {
				return err
			}
		}
		if err := d.Submit(ctx, apply, dist.RW(hs[0]), dist.R(hs[2]), arg); err != nil {
			return err
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		return errors.New("WaitAll succeeded without rank 2")
	})
	var joined interface{ Unwrap() []error }
	require.ErrorAs(t, err, &joined)
	seen := map[int]bool{}
	for _, e := range joined.Unwrap() {
		var re *comm.RankError
		require.ErrorAs(t, e, &re)
		seen[re.Rank] = true
		if re.Rank == 2 {
			require.ErrorIs(t, re.Err, boom)
			continue
		}
		assert.Contains(t, re.Err.Error(), "rank 2 failed: rank gave up", "rank %d", re.Rank)
	}
	assert.Len(t, seen, 3, "every rank failed")
}

// A rank that waits for data that does not come explains itself: the stall
// report names the transfer, and WaitAll ended by its context returns it.
func TestStallExplained(t *testing.T) {
	release := make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error { <-release; return nil }}
	var report string
	var waitErr error
	err := local.Run(context.Background(), 2, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		// Rank 1's WaitAll ends when the stall is reported, canceled
		// with a cause of the program's: explained, as a deadline is (a
		// plain cancel or an interrupt is not).
		wctx, cancelCause := context.WithCancelCause(ctx)
		cancel := func() { cancelCause(errors.New("the stall was reported")) }
		defer cancel()
		var opts []dist.Option
		if c.Rank() == 1 {
			opts = append(opts, dist.WithStallReport(20*time.Millisecond, func(s string) {
				if report == "" {
					report = s
				}
				cancel()
			}))
		}
		d, err := dist.New(ctx, c, ls, opts...)
		if err != nil {
			return err
		}
		defer d.Close()
		hs := make([]*dist.Handle, 2)
		for r := range 2 {
			var data []int64
			if r == c.Rank() {
				data = make([]int64, 10)
			}
			if hs[r], err = dist.Register(d, r, data, 10, 1); err != nil {
				return err
			}
		}
		if err := d.Submit(ctx, block, dist.RW(hs[0])); err != nil {
			return err
		}
		if err := d.Submit(ctx, apply, dist.RW(hs[1]), dist.R(hs[0]), dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1}))); err != nil {
			return err
		}
		if c.Rank() == 1 {
			waitErr = d.WaitAll(wctx)
			close(release)
			return nil
		}
		return d.WaitAll(ctx)
	})
	// Rank 0 is told that rank 1 left instead of waiting for it.
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rank 0: dist: WaitAll on rank 0:")
	assert.Contains(t, err.Error(), "rank 1 left WaitAll")
	assert.Contains(t, report, "nothing completed for")
	assert.Contains(t, report, "waits for rank 0 to send handle #0 (owner 0)")
	require.ErrorIs(t, waitErr, context.Canceled)
	assert.Contains(t, waitErr.Error(), "waits for rank 0 to send handle #0 (owner 0)")
}

// A trace of ranks whose local schedulers record no tasks is refused on
// every rank, naming them, and nothing is written.
func TestMergedTraceNeedsStats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.json")
	errs := make([]error, 3)
	onlyRank1 := func(r int) []scheduler.Option {
		return []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithStats(r == 1)}
	}
	err := runRanksEach(t, 3, onlyRank1, func(ctx context.Context, d *dist.Scheduler) error {
		if err := checkRandomGraph(ctx, d, 3); err != nil {
			return err
		}
		errs[d.Rank()] = d.WriteTraceFiles(ctx, path, 1)
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		require.ErrorIs(t, e, comm.ErrInvalidArg, "rank %d", r)
		assert.Contains(t, e.Error(), "ranks 0, 2 record no tasks", "rank %d", r)
	}
	assert.NoFileExists(t, path)
}

// A trace file ending in .svg, which the merged Gantt chart beside it
// would overwrite, is refused on every rank, and nothing is written.
func TestMergedTraceNotSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.svg")
	errs := make([]error, 2)
	err := runRanksWith(t, 2, []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithStats(true)}, func(ctx context.Context, d *dist.Scheduler) error {
		errs[d.Rank()] = d.WriteTraceFiles(ctx, path, 0)
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		require.ErrorIs(t, e, comm.ErrInvalidArg, "rank %d", r)
		assert.Contains(t, e.Error(), "trace.svg", "rank %d", r)
	}
	assert.NoFileExists(t, path)
}

// The merged trace has a process per rank, a thread per worker and one for
// transfers, and a flow arrow per transfer; the Gantt chart stacks ranks.
func TestMergedTrace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.json")
	var sent int64
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithStats(true))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		defer d.Close()
		if err := checkRandomGraph(ctx, d, 11); err != nil {
			return err
		}
		n, err := comm.AllReduce(ctx, c, []int64{d.Stats().MessagesSent}, comm.Sum)
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			sent = n[0]
		}
		return d.WriteTraceFiles(ctx, path, 1)
	})
	require.NoError(t, err)
	require.Positive(t, sent)
	procs, tasks, starts, finishes := map[string]bool{}, 0, 0, 0
	for _, e := range readTrace(t, path) {
		switch {
		case e.Name == "process_name":
			procs[fmt.Sprint(e.Args["name"])] = true
		case e.Ph == "X" && e.Name == "apply":
			tasks++
		case e.Ph == "s" && e.Name == "transfer":
			starts++
		case e.Ph == "f" && e.Name == "transfer":
			finishes++
		}
	}
	assert.Equal(t, map[string]bool{"rank 0": true, "rank 1": true, "rank 2": true}, procs)
	assert.Equal(t, 150, tasks, "every task of the graph, once, on the rank that ran it")
	assert.EqualValues(t, sent, starts, "one arrow per message")
	assert.Equal(t, starts, finishes)
	svg, err := os.ReadFile(filepath.Join(dir, "trace.svg"))
	require.NoError(t, err)
	for _, want := range []string{">rank 2 receives<", ">rank 2 sends<"} {
		assert.True(t, strings.Contains(string(svg), want), "the chart lacks the row %q", want)
	}
	assert.True(t, strings.Contains(string(svg), " tasks on 3 workers, "), "the transfers' rows are not workers")
}

// traceEvent is an event of a Chrome trace file, as the tests read it.
type traceEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args"`
}

// readTrace reads the events of the Chrome trace file at path.
func readTrace(t *testing.T, path string) []traceEvent {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var tr struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(raw, &tr))
	return tr.TraceEvents
}

// With devices, the merged trace holds each rank's copies between its
// memory nodes on tracks of their own (as one rank's trace does), and
// names a device's worker with its device, as the tracks name it.
func TestMergedTraceCopies(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.json")
	opts := []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""), scheduler.WithStats(true),
		scheduler.WithSimDevices(scheduler.SimDevice{Memory: 4 * vecLen * 8, Bandwidth: -1})}
	require.NoError(t, runRanksWith(t, 2, opts, func(ctx context.Context, d *dist.Scheduler) error {
		s := d.Local()
		c, err := s.NewContext("device", scheduler.ContextWorkers(len(s.Workers())-1))
		if err != nil {
			return err
		}
		if err := checkRandomGraphIn(ctx, d, 5, c); err != nil {
			return err
		}
		if len(s.TracedCopies()) == 0 {
			return fmt.Errorf("rank %d: no copy recorded", d.Rank())
		}
		return d.WriteTraceFiles(ctx, path, 0)
	}))
	threads, copies := map[string]bool{}, map[int]int{}
	for _, e := range readTrace(t, path) {
		switch {
		case e.Name == "thread_name":
			threads[fmt.Sprintf("%d %v", e.Pid, e.Args["name"])] = true
		case e.Ph == "X" && (e.Name == "copy in" || e.Name == "copy out" || e.Name == "prefetch"):
			copies[e.Pid]++
		}
	}
	for r := range 2 {
		assert.Positive(t, copies[r], "rank %d's copies", r)
		assert.True(t, threads[fmt.Sprintf("%d ram→sim0", r)], "rank %d's link track: %v", r, threads)
		assert.True(t, threads[fmt.Sprintf("%d sim0 (worker 1)", r)], "rank %d's device worker: %v", r, threads)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "trace.svg"))
	require.NoError(t, err)
	for _, want := range []string{">rank 1 ram→sim0<", ">rank 1 sim0 (worker 1)<", " tasks on 4 workers, "} {
		assert.True(t, strings.Contains(string(svg), want), "the chart lacks %q (2 ranks of a CPU and a device worker; tracks are not workers)", want)
	}
}

// A matrix scattered from one rank reaches each tile's owner, a task on
// the owners changes it, and gathering it on another rank gives the result.
func TestScatterGatherMatrix(t *testing.T) {
	const n, b = 12, 4
	err := runRanks(t, 4, func(ctx context.Context, d *dist.Scheduler) error {
		tiles, err := dist.RegisterTiles[float64](d, n/b, n/b, b, b, dist.BlockCyclic2D(2, 2), nil)
		if err != nil {
			return err
		}
		var a []float64
		if d.Rank() == 3 {
			a = make([]float64, n*n)
			for i := range a {
				a[i] = float64(i)
			}
		}
		if err := dist.ScatterMatrix(ctx, d, 3, a, n, n, tiles); err != nil {
			return err
		}
		// The owners hold their tiles now: check one, then double every tile.
		if h := tiles[1][2]; h.Owner() == d.Rank() {
			if got := h.Data().([]float64)[0]; got != float64(1*b*n+2*b) {
				return fmt.Errorf("tile (1,2) on its owner starts with %v, want %v", got, 1*b*n+2*b)
			}
		}
		double := &scheduler.Codelet{Name: "double", CPU: func(c *scheduler.Call) error {
			for i, v := range scheduler.VectorOf[float64](c, 0) {
				scheduler.VectorOf[float64](c, 0)[i] = 2 * v
			}
			return nil
		}}
		for _, row := range tiles {
			for _, h := range row {
				if err := d.Submit(ctx, double, dist.RW(h)); err != nil {
					return err
				}
			}
		}
		var out []float64
		if d.Rank() == 1 {
			out = make([]float64, n*n)
		}
		if err := dist.GatherMatrix(ctx, d, 1, out, n, n, tiles); err != nil {
			return err
		}
		if d.Rank() == 1 {
			for i, v := range out {
				if v != float64(2*i) {
					return fmt.Errorf("gathered element %d is %v, want %v", i, v, 2*i)
				}
			}
		}
		if err := d.Gather(ctx, 9, nil, nil); !errors.Is(err, dist.ErrBadRank) {
			return fmt.Errorf("Gather on root 9 of 4: %v", err)
		}
		return nil
	})
	require.NoError(t, err)
}

// With a stall timeout, a rank waiting for data that does not come gives up
// on its own, saying what it waited for; the other rank learns it left.
func TestStallTimeout(t *testing.T) {
	release := make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error { <-release; return nil }}
	errs := make([]error, 2)
	err := local.Run(context.Background(), 2, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		var opts []dist.Option
		if c.Rank() == 1 {
			opts = append(opts, dist.WithStallTimeout(30*time.Millisecond))
		}
		d, err := dist.New(ctx, c, ls, opts...)
		if err != nil {
			return err
		}
		defer d.Close()
		hs := make([]*dist.Handle, 2)
		for r := range 2 {
			var data []int64
			if r == c.Rank() {
				data = make([]int64, 10)
			}
			if hs[r], err = dist.Register(d, r, data, 10, 1); err != nil {
				return err
			}
		}
		if err := d.Submit(ctx, block, dist.RW(hs[0])); err != nil {
			return err
		}
		if err := d.Submit(ctx, apply, dist.RW(hs[1]), dist.R(hs[0]), dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1}))); err != nil {
			return err
		}
		errs[c.Rank()] = d.WaitAll(ctx)
		if c.Rank() == 1 {
			close(release)
		}
		return nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, errs[1], dist.ErrStalled)
	assert.Contains(t, errs[1].Error(), "waits for rank 0 to send handle #0 (owner 0)")
	// The stall is the error, not a cancellation: the program canceled
	// nothing (the watchdog ends the wait with ErrStalled as its cause).
	assert.NotErrorIs(t, errs[1], context.Canceled)
	assert.NotErrorIs(t, errs[1], context.DeadlineExceeded)
	assert.NotContains(t, errs[1].Error(), "context canceled")
	assert.Contains(t, errs[1].Error(), "dist: WaitAll on rank 1: dist: no progress: nothing completed on rank 1 for")
	require.ErrorIs(t, errs[0], dist.ErrRankFailed)
	assert.Contains(t, errs[0].Error(), "rank 1 left WaitAll")
}

// A rank that is only slow (its program has not come to WaitAll) is the
// one the others' stall timeout names: they ask the ranks how far they
// got before giving up on the graph comparison, rather than explaining
// their own transfers.
func TestStallNamesSlowRank(t *testing.T) {
	const n = 3
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	release := make(chan struct{}) // closed once ranks 0 and 1 returned from WaitAll
	returned := make(chan struct{}, n)
	errs := make([]error, n)
	err := local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		// Short, so that the test is quick: the stall timeout is what is
		// under test.
		d, err := dist.New(ctx, c, ls, dist.WithStallTimeout(300*time.Millisecond))
		if err != nil {
			return err
		}
		defer d.Close()
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, apply, dist.RW(hs[c.Rank()]), dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1}))); err != nil {
			return err
		}
		if c.Rank() == n-1 {
			// Slow: it comes to WaitAll only once the others gave up.
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		errs[c.Rank()] = d.WaitAll(ctx)
		if c.Rank() < n-1 {
			returned <- struct{}{}
			if c.Rank() == 0 {
				for range n - 1 {
					select {
					case <-returned:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				close(release)
			}
		}
		return nil
	})
	require.NoError(t, err)
	for r := range n - 1 {
		t.Logf("rank %d: %v", r, errs[r])
		// Its own stall, or the other waiting rank's, heard first (that
		// rank left WaitAll on its stall): either way the stall names
		// rank 2.
		if !errors.Is(errs[r], dist.ErrStalled) {
			require.ErrorIs(t, errs[r], dist.ErrRankFailed, "rank %d", r)
			assert.Contains(t, errs[r].Error(), fmt.Sprintf("rank %d left WaitAll", 1-r), "rank %d", r)
		}
		msg := errs[r].Error()
		// A stall, not the program's cancellation or deadline.
		assert.NotErrorIs(t, errs[r], context.Canceled, "rank %d", r)
		assert.NotErrorIs(t, errs[r], context.DeadlineExceeded, "rank %d", r)
		assert.NotContains(t, msg, "context canceled", "rank %d", r)
		assert.NotContains(t, msg, "deadline exceeded", "rank %d", r)
		assert.Contains(t, msg, "rank 2 has not reached this comparison", "rank %d", r)
		assert.Contains(t, msg, "at submission 1", "rank %d", r)
		assert.NotContains(t, msg, "rank 1 has not reached", "rank %d", r)
		assert.NotContains(t, msg, "no transfer in flight", "rank %d", r)
	}
	require.ErrorIs(t, errs[n-1], dist.ErrRankFailed)
}

// Grid picks the most square P x Q with P <= Q; the distributions place
// tiles as documented and refuse grids that do not fit.
func TestDistributions(t *testing.T) {
	for n, want := range map[int][2]int{1: {1, 1}, 2: {1, 2}, 3: {1, 3}, 4: {2, 2}, 6: {2, 3}, 12: {3, 4}, 7: {1, 7}} {
		p, q := dist.Grid(n)
		assert.Equal(t, want, [2]int{p, q}, "Grid(%d)", n)
	}
	bc := dist.BlockCyclic2D(2, 3)
	assert.Equal(t, 0, bc.Owner(0, 0))
	assert.Equal(t, 2, bc.Owner(0, 5))
	assert.Equal(t, 3, bc.Owner(1, 0))
	assert.Equal(t, 5, bc.Owner(3, 2))
	require.NoError(t, bc.Check(6))
	err := bc.Check(4)
	require.ErrorIs(t, err, dist.ErrDistribution)
	assert.Contains(t, err.Error(), "P*Q must equal the rank count (dist.Grid(n) gives the most square P x Q for n ranks)")
	assert.NotContains(t, err.Error(), "pzrun", "a library error speaks of the Go API")
	c1 := dist.Cyclic1D(4, 3)
	assert.Equal(t, 2, c1.Owner(1, 1)) // (1*4+1) mod 3
	require.ErrorIs(t, c1.Check(2), dist.ErrDistribution)
	f := dist.Func(func(i, j int) int { return (i + j) % 2 })
	assert.Equal(t, 1, f.Owner(2, 3))
	require.NoError(t, f.Check(2))
}

// Abandon tells the other ranks at once that this rank gives up the
// graph, and why: their WaitAll return ErrRankFailed naming it and the
// cause (also comm.ErrBroken), not a difference of the ranks' graphs,
// while the rank that gave up is still alive (its departure does not
// break the communicator); its Close then does not wait for the graph.
func TestAbandonTellsTheOthers(t *testing.T) {
	const n = 3
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	errs := make([]error, n)
	var closeErr error
	done := make(chan struct{})
	var waiting sync.WaitGroup
	waiting.Add(n - 1)
	err := runRanks(t, n, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		err = d.Submit(ctx, noop, dist.RW(hs[n-1]))
		if d.Rank() == n-1 {
			d.Abandon(errors.New("input file missing"))
			closeErr = d.Close()
			waiting.Wait()
			close(done)
			return err
		}
		// The first call to fail: Submit, once the rank heard, or WaitAll.
		if err == nil {
			err = d.Submit(ctx, noop, dist.R(hs[n-1]), dist.RW(hs[d.Rank()]))
		}
		if err == nil {
			err = d.WaitAll(ctx)
		}
		errs[d.Rank()] = err
		waiting.Done()
		<-done
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, closeErr, "Close after Abandon")
	for r := range n - 1 {
		require.ErrorIs(t, errs[r], dist.ErrRankFailed, "rank %d", r)
		require.ErrorIs(t, errs[r], comm.ErrBroken, "rank %d", r)
		require.NotErrorIs(t, errs[r], dist.ErrGraphMismatch, "rank %d", r)
		require.ErrorContains(t, errs[r], "rank 2 gave up the graph: input file missing", "rank %d", r)
	}
}

// TestBrokenCommIsRankFailed: a rank that returns without a word (no
// Abandon: local.Run alone) breaks the communicator, and the others meet
// comm.ErrBroken in their transfers and comparisons before any message of
// the failure's: their errors are ErrRankFailed too, as when they hear
// the failure, so that errors.Is(err, dist.ErrRankFailed) does not depend
// on which comes first.
func TestBrokenCommIsRankFailed(t *testing.T) {
	stop := errors.New("rank 1 stops")
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		x, y := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		for i := range x {
			x[i] += y[i]
		}
		return nil
	}}
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[float64](d, 4)
		if err != nil {
			return err
		}
		if d.Rank() == 1 {
			return stop
		}
		err = d.Submit(ctx, add, dist.RW(hs[0]), dist.R(hs[1]))
		if err == nil {
			err = d.WaitAll(ctx)
		}
		assert.ErrorIs(t, err, comm.ErrBroken)
		assert.ErrorIs(t, err, dist.ErrRankFailed)
		return nil
	})
	require.ErrorIs(t, err, stop)
}

// A rank with no transfer in flight whose task runs on and on says which
// task, when its scheduler's watchdog records what its workers run; the
// report says how to get that when it does not.
func TestStallNamesTheRunningTask(t *testing.T) {
	for _, watch := range []bool{true, false} {
		release := make(chan struct{})
		block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error { <-release; return nil }}
		var report string
		err := local.Run(context.Background(), 1, func(ctx context.Context, c comm.Comm) error {
			wd := scheduler.WithWatchdog(0, nil) // off, whatever PZ_WATCHDOG says
			if watch {
				wd = scheduler.WithWatchdog(time.Hour, func(scheduler.Stall) {}) // records, never reports here
			}
			ls, err := scheduler.New(ctx, scheduler.WithWorkers(1), wd)
			if err != nil {
				return err
			}
			defer ls.Close()
			d, err := dist.New(ctx, c, ls, dist.WithStallReport(20*time.Millisecond, func(s string) {
				// On a loaded machine a report can come before the worker
				// has taken the task; they repeat every 20 ms.
				if report == "" && (!watch || strings.Contains(s, "it runs")) {
					report = s
					close(release)
				}
			}))
			if err != nil {
				return err
			}
			defer d.Close()
			h, err := dist.Register(d, 0, make([]int64, 4), 4, 1)
			if err != nil {
				return err
			}
			if err := d.Submit(ctx, block, dist.RW(h)); err != nil {
				return err
			}
			return d.WaitAll(ctx)
		})
		require.NoError(t, err)
		assert.Contains(t, report, "nothing completed for")
		if watch {
			assert.Contains(t, report, `rank 0 has no transfer in flight; it runs worker 0 (cpu) "block" for `)
		} else {
			assert.Contains(t, report, "rank 0 has no transfer in flight (its own tasks are running or waiting for each other; PZ_WATCHDOG=30s names the running ones)")
		}
	}
}

// A team task (scheduler.WithTeam) is drawn on every member's worker in
// the merged trace and chart, as the local scheduler's own trace draws
// it, not on its first member only, which would show the others idle.
func TestMergedTraceTeamTask(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.json")
	team := &scheduler.Codelet{Name: "team", Parallel: scheduler.SPMD, CPU: func(c *scheduler.Call) error { return nil }}
	opts := []scheduler.Option{scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""), scheduler.WithStats(true)}
	require.NoError(t, runRanksWith(t, 2, opts, func(ctx context.Context, d *dist.Scheduler) error {
		var mine []float64
		if d.Rank() == 1 {
			mine = make([]float64, 4)
		}
		h, err := dist.Register(d, 1, mine, 2, 2)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, team, dist.RW(h), dist.With(scheduler.WithTeam(2))); err != nil {
			return err
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		return d.WriteTraceFiles(ctx, path, 0)
	}))
	workers := map[int]bool{}
	for _, e := range readTrace(t, path) {
		if e.Ph == "X" && e.Name == "team" {
			assert.Equal(t, 1, e.Pid, "the task ran on rank 1")
			workers[e.Tid] = true
		}
	}
	assert.Equal(t, map[int]bool{0: true, 1: true}, workers, "a slice on each member's thread")
	svg, err := os.ReadFile(filepath.Join(dir, "trace.svg"))
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(svg), "team: 1 run (2 workers)"), "the legend counts the team task once, with its team")
}

// A distribution that does not fit one rank says "1 rank", not "1
// ranks".
func TestDistributionCheckSingular(t *testing.T) {
	assert.EqualError(t, dist.BlockCyclic2D(2, 1).Check(1),
		"dist: distribution does not fit the ranks: a 2 x 1 process grid for 1 rank: P*Q must equal the rank count (dist.Grid(n) gives the most square P x Q for n ranks)")
}
