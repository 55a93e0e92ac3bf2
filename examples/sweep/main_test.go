package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pzgo/pz/examples/internal/clitest"
	"github.com/pzgo/pz/runtimeview"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// small is a sweep that takes a few hundred milliseconds under -race,
// over a range with chaotic and stable points, and a pattern of three.
func small() config {
	return config{rows: 24, cols: 20, amin: 2.5, amax: 4, bmin: 2.5, bmax: 4, pattern: "AAB", warmup: 50, iters: 400}
}

// TestRanks runs the sweep in master/worker mode on 1 to 4 in-process
// ranks and checks on the master every exponent and the summary against
// the sequential sweep, bit for bit, that every rank's count of the
// tasks it ran agrees with the master's statistics and adds up to the
// rows and the summary, that the worker ranks ran some of them, and
// the lines rank 0 prints.
//
// The master's row tasks wait until a worker rank has started one
// (holdMaster): the 25 tasks take a few milliseconds, and on a loaded
// machine the master's core ran all of them before any worker rank's
// slot was scheduled ("the worker ranks ran no task: [25 0]", 4 runs of
// 30 under two busy loops). Held, the master's core waits in its first
// row until a worker rank starts another: that the worker ranks take
// tasks at all is what is checked, not how fast.
func TestRanks(t *testing.T) {
	c := small()
	want := sequential(c)
	if want.sum.chaotic == 0 || want.sum.chaotic == c.rows*c.cols {
		t.Fatalf("the sweep has %d chaotic points of %d: the test wants both kinds", want.sum.chaotic, c.rows*c.cols)
	}
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			var got result
			others := make([]result, n)
			held := c
			if n > 1 {
				held.beforeRow = holdMaster(t)
			}
			err := runtimeview.RunLocal(t.Context(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				r, err := sweep(ctx, rt, held, io.Discard)
				others[rt.Rank()] = r
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			got = others[0]
			if i := firstDiff(got.lam, want.lam); i >= 0 {
				t.Fatalf("exponent (%d, %d) is %v, want %v", i/c.cols, i%c.cols, got.lam[i], want.lam[i])
			}
			if got.sum != want.sum {
				t.Errorf("summary %+v, want %+v", got.sum, want.sum)
			}
			if fmt.Sprint(got.perRank) != fmt.Sprint(got.byStats) {
				t.Errorf("the ranks counted %v tasks, the master's statistics %v", got.perRank, got.byStats)
			}
			total, workers := int64(0), int64(0)
			for r, k := range got.perRank {
				total += k
				if r > 0 {
					workers += k
				}
				if fmt.Sprint(others[r].perRank) != fmt.Sprint(got.perRank) {
					t.Errorf("rank %d gathered the counts %v, rank 0 %v", r, others[r].perRank, got.perRank)
				}
			}
			if total != int64(c.rows+1) {
				t.Errorf("%d tasks ran (%v), want %d rows and the summary", total, got.perRank, c.rows+1)
			}
			if n > 1 && workers == 0 {
				t.Errorf("the worker ranks ran no task: %v", got.perRank)
			}
			if n > 1 && got.workers < n {
				t.Errorf("the master has %d workers on %d ranks, want one at least per rank", got.workers, n)
			}

			var out strings.Builder
			err = runtimeview.RunLocal(t.Context(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				return run(ctx, rt, c, &out, io.Discard)
			})
			if err != nil {
				t.Fatal(err)
			}
			lines := regexp.MustCompile(fmt.Sprintf(`^sweep: Lyapunov exponents of the logistic map, rates "AAB", a in \[2\.5, 4\] x b in \[2\.5, 4\] \(24 x 20 points, 400 iterations each\) on %s \(local backend, master rank 0\): matches the sequential run
sweep: chaotic \(exponent > 0\) at %d of 480 points \([0-9.]+%%\); mean exponent %.6g; most stable %.6g at a=[0-9.]+, b=[0-9.]+; most chaotic %.6g at a=[0-9.]+, b=[0-9.]+
sweep: tasks run per rank \[[0-9 ]+\] \(24 rows and the summary, \d+ workers in all\)
$`, regexp.QuoteMeta(ranks(n)), want.sum.chaotic, want.sum.mean, want.sum.minL, want.sum.maxL))
			if !lines.MatchString(out.String()) {
				t.Errorf("printed %q, want lines matching %s", out.String(), lines)
			}
		})
	}
}

// holdMaster returns a config.beforeRow that holds the master's (rank
// 0's) row tasks until a worker rank has started one, or for a minute at
// most: then the worker ranks took none, which TestRanks reports.
func holdMaster(t *testing.T) func(rank int) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	started := make(chan struct{})
	var once sync.Once
	return func(rank int) {
		if rank != 0 {
			once.Do(func() { close(started) })
			return
		}
		select {
		case <-started:
		case <-ctx.Done():
		}
	}
}

// TestSequentialIsTheMap: the sequential sweep is the logistic map's
// Lyapunov exponent: at a = b = 4 the map is fully chaotic with
// exponent log 2, and at a = b = 3.2 it has a stable 2-cycle.
func TestSequentialIsTheMap(t *testing.T) {
	c := config{rows: 1, cols: 1, amin: 4, amax: 4, bmin: 4, bmax: 4, pattern: "AB", warmup: 100, iters: 20000}
	if l := sequential(c).lam[0]; l < 0.68 || l > 0.705 {
		t.Errorf("exponent at r=4 is %v, want about log 2 = 0.693", l)
	}
	c.amin, c.amax, c.bmin, c.bmax = 3.2, 3.2, 3.2, 3.2
	if l := sequential(c).lam[0]; l >= 0 {
		t.Errorf("exponent at r=3.2 (a stable 2-cycle) is %v, want it negative", l)
	}
}

// TestBadConfig: a grid, pattern or rate the sweep cannot use is an
// error on every rank, naming the flag, before RunMaster.
func TestBadConfig(t *testing.T) {
	for _, mod := range []func(*config){
		func(c *config) { c.rows = 0 },
		func(c *config) { c.iters = 0 },
		func(c *config) { c.pattern = "ABC" },
		func(c *config) { c.pattern = "" },
		func(c *config) { c.amax = 4.5 },
		func(c *config) { c.bmin, c.bmax = 3, 2.8 },
	} {
		c := small()
		mod(&c)
		err := runtimeview.RunLocal(t.Context(), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			return run(ctx, rt, c, io.Discard, io.Discard)
		})
		if err == nil || !strings.Contains(err.Error(), "sweep: -") {
			t.Errorf("%+v: got %v, want an error naming the flag", c, err)
		}
	}
}

// TestArgs: arguments left after the flags are a usage error.
func TestArgs(t *testing.T) {
	clitest.Args(t, []clitest.Case{
		{Args: []string{"extra"}, Want: "sweep: arguments not understood: extra (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{Args: []string{"-nosuchflag"}, Want: "flag provided but not defined: -nosuchflag"},
	}...)
}
