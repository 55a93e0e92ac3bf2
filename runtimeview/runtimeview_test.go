package runtimeview_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/callbacks"
	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/internal/lockedbuf"
	"github.com/pzgo/pz/logger"
	"github.com/pzgo/pz/runtimeview"
)

// testCtx returns a context that ends the test instead of hanging it.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// machine is discovered once per test binary (without GPUs, so the tests
// do not depend on a CUDA driver) and shared by the tests.
var machine = sync.OnceValues(func() (*hardware.Machine, error) {
	return hardware.Discover(context.Background(), hardware.WithoutGPUs())
})

func withMachine(t *testing.T) runtimeview.Option {
	t.Helper()
	m, err := machine()
	require.NoError(t, err)
	return runtimeview.WithMachine(m)
}

// quietLogs keeps the tests' output clean whatever PZ_LOG* say.
var quietLogs = runtimeview.WithLogOptions(logger.WithEnv(nil), logger.WithOff())

// checkNoLeak fails if goroutines started during the test outlive it.
func checkNoLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

func TestRunLocalEveryAPI(t *testing.T) {
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			checkNoLeak(t)
			var mu sync.Mutex
			var afters []func()
			err := runtimeview.RunLocal(testCtx(t), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				assert.Equal(t, n, rt.Size())
				assert.Equal(t, runtimeview.Local, rt.Backend())
				assert.Nil(t, rt.MPIWorld())
				after := checkView(t, ctx, rt)
				mu.Lock()
				afters = append(afters, after)
				mu.Unlock()
				return nil
			}, withMachine(t), quietLogs)
			require.NoError(t, err)
			require.Len(t, afters, n)
			for _, f := range afters {
				f() // RunLocal closed every rank's view
			}
		})
	}
}

func TestBarrierOrders(t *testing.T) {
	const n = 4
	var arrived atomic.Int32
	err := runtimeview.RunLocal(testCtx(t), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		for round := int32(1); round <= 20; round++ {
			arrived.Add(1)
			if err := rt.Barrier(ctx); err != nil {
				return err
			}
			if got := arrived.Load(); got < round*n {
				return fmt.Errorf("round %d: left the barrier after %d arrivals", round, got)
			}
			// A second barrier keeps the fast ranks from starting the next
			// round while a slow one is still checking.
			if err := rt.Barrier(ctx); err != nil {
				return err
			}
		}
		return nil
	}, withMachine(t), quietLogs)
	require.NoError(t, err)
}

func TestLoggerRootOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []logger.Option
		ranked []int // ranks whose rt.Logger() line appears
	}{
		{"default", nil, []int{0}},
		{"all", []logger.Option{logger.WithAllRanks()}, []int{0, 1, 2, 3}},
		{"env list", []logger.Option{logger.WithEnv(func(k string) (string, bool) {
			if k == logger.EnvRanks {
				return "1,3", true
			}
			return "", false
		})}, []int{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := &lockedbuf.Buffer{}
			opts := append([]logger.Option{logger.WithEnv(nil), logger.WithWriter(buf), logger.WithFormat(logger.JSON)}, tc.opts...)
			const n = 4
			err := runtimeview.RunLocal(testCtx(t), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				rt.Logger().Info("ranked")
				rt.MyResourceSet().Logger().Info("local")
				rt.ResourceSet((rt.Rank() + 1) % n).Logger().Info("about next")
				return nil
			}, withMachine(t), runtimeview.WithLogOptions(opts...))
			require.NoError(t, err)

			got := map[string][]int{}
			for line := range strings.Lines(buf.String()) {
				var v struct {
					Msg  string `json:"msg"`
					Rank int    `json:"rank"`
					RS   *int   `json:"resource_set"`
				}
				require.NoError(t, json.Unmarshal([]byte(line), &v), line)
				got[v.Msg] = append(got[v.Msg], v.Rank)
				if v.Msg == "about next" {
					require.NotNil(t, v.RS, line)
					assert.Equal(t, (v.Rank+1)%n, *v.RS, line)
				}
			}
			for _, k := range []string{"ranked", "local", "about next"} {
				slices.Sort(got[k])
			}
			assert.Equal(t, tc.ranked, got["ranked"])
			assert.Equal(t, []int{0, 1, 2, 3}, got["local"])
			assert.Equal(t, []int{0, 1, 2, 3}, got["about next"])
		})
	}
}

func TestRunLocalErrors(t *testing.T) {
	t.Run("a rank fails", func(t *testing.T) {
		checkNoLeak(t)
		errBoom := errors.New("boom")
		var closed atomic.Int32
		err := runtimeview.RunLocal(testCtx(t), 3, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			require.NoError(t, rt.StackCallback(func() error { closed.Add(1); return nil }))
			if rt.Rank() == 2 {
				return errBoom
			}
			return rt.Barrier(ctx) // never completes: rank 2 left
		}, withMachine(t), quietLogs)
		require.ErrorIs(t, err, errBoom)
		assert.Equal(t, []int{2}, failedRanks(err, errBoom))
		assert.Equal(t, int32(3), closed.Load(), "every rank's stack ran")
	})
	t.Run("a rank panics", func(t *testing.T) {
		checkNoLeak(t)
		var closed atomic.Int32
		err := runtimeview.RunLocal(testCtx(t), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			require.NoError(t, rt.StackCallback(func() error { closed.Add(1); return nil }))
			if rt.Rank() == 1 {
				panic("rank 1 gives up")
			}
			return rt.Barrier(ctx)
		}, withMachine(t), quietLogs)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "rank 1 gives up")
		assert.Equal(t, int32(2), closed.Load(), "the panicking rank's stack ran too")
	})
	t.Run("a callback calls Close", func(t *testing.T) {
		checkNoLeak(t)
		var below atomic.Int32
		err := runtimeview.RunLocal(testCtx(t), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			if err := rt.StackCallback(func() error { below.Add(1); return nil }); err != nil {
				return err
			}
			return rt.StackCallback(rt.Close) // would wait for itself
		}, withMachine(t), quietLogs)
		require.ErrorIs(t, err, callbacks.ErrCloseInCallback)
		assert.Equal(t, int32(2), below.Load(), "the callbacks below it ran, on every rank")
	})
	t.Run("a callback fails", func(t *testing.T) {
		errCB := errors.New("flush failed")
		err := runtimeview.RunLocal(testCtx(t), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			if rt.Rank() == 1 {
				return rt.StackCallback(func() error { return errCB })
			}
			return nil
		}, withMachine(t), quietLogs)
		require.ErrorIs(t, err, errCB)
		assert.Equal(t, []int{1}, failedRanks(err, errCB))
	})
	t.Run("more ranks than memory allows", func(t *testing.T) {
		// 100,000 ranks were killed by the kernel's OOM killer, silently
		// (their tables of resource sets needed ~300 GiB then); 10^8 ranks
		// need 1.5 TiB.
		m, err := machine()
		require.NoError(t, err)
		small := *m
		small.Memory.AvailableBytes = 1 << 30
		var ran atomic.Int32
		fn := func(context.Context, *runtimeview.RuntimeView) error { ran.Add(1); return nil }
		err = runtimeview.RunLocal(testCtx(t), 100_000_000, fn, runtimeview.WithMachine(&small), quietLogs)
		require.ErrorIs(t, err, runtimeview.ErrLaunch)
		assert.Contains(t, err.Error(), "100000000 in-process ranks need about 1525.9 GiB")
		assert.Contains(t, err.Error(), "more than the 1.0 GiB available")
		assert.Zero(t, ran.Load(), "no rank started")
		// What fits still runs: 4 ranks need well under a MiB of it.
		small.Memory.AvailableBytes = 1 << 20
		require.NoError(t, runtimeview.RunLocal(testCtx(t), 4, fn, runtimeview.WithMachine(&small), quietLogs))
		assert.Equal(t, int32(4), ran.Load())
	})
	t.Run("bad options", func(t *testing.T) {
		comms, err := local.New(1)
		require.NoError(t, err)
		err = runtimeview.RunLocal(testCtx(t), 1, func(context.Context, *runtimeview.RuntimeView) error { return nil }, runtimeview.WithComm(comms[0]))
		assert.ErrorIs(t, err, runtimeview.ErrOption)
		assert.ErrorIs(t, runtimeview.RunLocal(testCtx(t), 1, nil), runtimeview.ErrOption)
		err = runtimeview.RunLocal(testCtx(t), 0, func(context.Context, *runtimeview.RuntimeView) error { return nil }, withMachine(t))
		assert.Error(t, err)
		err = runtimeview.RunLocal(testCtx(t), 1, func(context.Context, *runtimeview.RuntimeView) error { return nil },
			withMachine(t), runtimeview.WithLogOptions(logger.WithEnv(nil), logger.WithRoot(5)))
		assert.ErrorIs(t, err, logger.ErrConfig)
	})
}

// failedRanks returns the ranks of the *comm.RankErrors in err that wrap
// target.
func failedRanks(err, target error) []int {
	var out []int
	var walk func(error)
	walk = func(e error) {
		if re, ok := e.(*comm.RankError); ok && errors.Is(re, target) {
			out = append(out, re.Rank)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if x := u.Unwrap(); x != nil {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

func TestCloseIsIdempotentAndOrdered(t *testing.T) {
	err := runtimeview.RunLocal(testCtx(t), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		var order []int
		var panicked atomic.Int32
		for i := range 4 {
			require.NoError(t, rt.StackCallback(func() error {
				order = append(order, i)
				if i == 2 {
					panicked.Add(1)
					panic("callback 2 panics")
				}
				return nil
			}))
		}
		err := rt.Close()
		var pe *comm.PanicError
		require.ErrorAs(t, err, &pe)
		assert.Contains(t, err.Error(), "callbacks: callback 2: panic: callback 2 panics", "numbered in the user's push order, not after pz's own")
		assert.Equal(t, []int{3, 2, 1, 0}, order, "LIFO; the panic does not stop the rest")
		assert.Equal(t, err, rt.Close(), "idempotent")
		assert.Equal(t, int32(1), panicked.Load())
		assert.ErrorIs(t, rt.StackCallback(func() error { return nil }), callbacks.ErrClosed)
		return nil
	}, withMachine(t), quietLogs)
	// RunLocal's own Close returns the same panic error for each rank.
	// A callback's panic is a *comm.PanicError, with its stack, as a
	// rank's is.
	var pe *comm.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "callback 2 panics", pe.Value)
	assert.Contains(t, string(pe.Stack), "runtimeview_test.go")
	assert.NotEmpty(t, pe.Callers)
}

// TestCollectiveAfterClose: Close frees an in-process rank's communicator
// as it finalizes MPI: a collective after it fails with comm.ErrFreed on
// every rank (it succeeded on comm/local, and failed under MPI). The
// error says that the view was closed and what to do, as resourceset's
// rooted collectives do: it said only "local: AllReduce on rank 0: comm:
// communicator freed" (helper-130's trial).
func TestCollectiveAfterClose(t *testing.T) {
	err := runtimeview.RunLocal(testCtx(t), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		require.NoError(t, rt.Close())
		_, e1 := runtimeview.AllReduce(ctx, rt, []int{1}, comm.Sum)
		_, e2 := runtimeview.AllGather(ctx, rt, []int{1})
		e3 := runtimeview.AllReduceTo(ctx, rt, []int{1}, []int{1}, comm.Sum)
		_, e4 := runtimeview.AllGatherValues(ctx, rt, "x")
		_, e5 := runtimeview.AllReduceValue(ctx, rt, 1, func(a, b int) int { return a + b })
		e6 := rt.Barrier(ctx)
		_, e7 := rt.Scheduler(ctx)
		for i, err := range []error{e1, e2, e3, e4, e5, e6, e7} {
			assert.ErrorIs(t, err, comm.ErrFreed, "call %d after Close", i+1)
			assert.ErrorContains(t, err, fmt.Sprintf("on rank %d: the RuntimeView was closed", rt.Rank()), "call %d", i+1)
			assert.ErrorContains(t, err, "call collectives before Close", "call %d", i+1)
		}
		return nil
	}, withMachine(t), quietLogs)
	require.NoError(t, err)
}

// TestAllReduceValueNilFOnOneRank pins AllReduceValue's doc: a nil f is
// an error on the rank that passed it only; the others get the result,
// and the next collective works. (The doc said only "f must not be nil";
// helper-130's trial saw ranks 1 and 2 return 6 and no error.)
func TestAllReduceValueNilFOnOneRank(t *testing.T) {
	const n = 3
	got := make([]int, n)
	errs := make([]error, n)
	err := runtimeview.RunLocal(testCtx(t), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		f := func(a, b int) int { return a + b }
		if rt.Rank() == 0 {
			f = nil
		}
		got[rt.Rank()], errs[rt.Rank()] = runtimeview.AllReduceValue(ctx, rt, rt.Rank()+1, f)
		_, err := runtimeview.AllReduce(ctx, rt, []int{1}, comm.Sum)
		return err
	}, withMachine(t), quietLogs)
	require.NoError(t, err, "the next collective")
	require.ErrorIs(t, errs[0], comm.ErrInvalidArg)
	assert.Contains(t, errs[0].Error(), "the reduction function is nil")
	for r := 1; r < n; r++ {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, 6, got[r], "rank %d", r)
	}
}

func TestNewProcessWorld(t *testing.T) {
	if mpi.Available() {
		t.Skip("built with -tags mpi: New opens the MPI world, which can be initialized once per process; see mpi_test.go")
	}
	checkNoLeak(t)
	ctx := testCtx(t)
	rt, err := runtimeview.New(ctx, withMachine(t), quietLogs, runtimeview.WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	assert.Equal(t, runtimeview.Local, rt.Backend())
	after := checkView(t, ctx, rt)
	require.NoError(t, rt.Close())
	require.NoError(t, rt.Close())
	after()
}

func TestNewRefusesMultiRankLaunchWithoutMPI(t *testing.T) {
	if mpi.Available() {
		t.Skip("built with -tags mpi")
	}
	env := map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
	_, err := runtimeview.New(testCtx(t), withMachine(t), quietLogs, runtimeview.WithGetenv(func(k string) string { return env[k] }))
	require.ErrorIs(t, err, launch.ErrNotBuiltWithMPI)
	assert.Contains(t, err.Error(), "-tags mpi")
}

func TestWithCommAdoptsSubCommunicator(t *testing.T) {
	checkNoLeak(t)
	m, err := machine()
	require.NoError(t, err)
	err = local.Run(testCtx(t), 4, func(ctx context.Context, world comm.Comm) error {
		sub, err := world.Split(ctx, world.Rank()%2, world.Rank())
		if err != nil {
			return err
		}
		rt, err := runtimeview.New(ctx, runtimeview.WithComm(sub), runtimeview.WithMachine(m), quietLogs)
		if err != nil {
			return err
		}
		assert.Equal(t, runtimeview.Adopted, rt.Backend())
		assert.Equal(t, 2, rt.Size())
		assert.Equal(t, world.Rank()/2, rt.Rank())
		after := checkView(t, ctx, rt)
		// The sum of world ranks in my half: evens 0+2, odds 1+3.
		s, err := runtimeview.AllReduce(ctx, rt, []int{world.Rank()}, comm.Sum)
		if err != nil {
			return err
		}
		assert.Equal(t, []int{2 + 2*(world.Rank()%2)}, s)
		if err := rt.Close(); err != nil {
			return err
		}
		after()
		// Close does not free an adopted communicator.
		if err := sub.Barrier(ctx); err != nil {
			return fmt.Errorf("sub-communicator after Close: %w", err)
		}
		return sub.Free()
	})
	require.NoError(t, err)
}
