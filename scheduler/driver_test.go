package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pzgo/pz/scheduler"
)

// TestDriverRunOnce: an application loop drives a worker with RunOnce
// beside a worker the scheduler runs; every task runs, some on each.
func TestDriverRunOnce(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1),
		scheduler.WithPolicy("eager"), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	d, err := s.Driver(1)
	require.NoError(t, err)
	assert.Equal(t, 1, d.Worker())
	assert.False(t, d.RunOnce(), "no cycle before Init")
	require.NoError(t, d.Init())
	var on [2]atomic.Int64
	release := make(chan struct{})
	work := &scheduler.Codelet{Name: "work", CPU: func(c *scheduler.Call) error {
		if c.Worker == 0 {
			<-release // keep the launched worker busy: the driven one must take the rest
		}
		on[c.Worker].Add(1)
		return nil
	}}
	const n = 50
	for range n {
		require.NoError(t, s.Submit(ctx, work))
	}
	for on[1].Load() < n-1 {
		d.RunOnce()
		if ctx.Err() != nil {
			t.Fatal("the driven worker did not run its tasks")
		}
	}
	close(release)
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, int64(n), on[0].Load()+on[1].Load())
	assert.GreaterOrEqual(t, on[1].Load(), int64(n-1))
	require.NoError(t, s.Close())
	assert.False(t, d.RunOnce(), "no cycle after Close")
	require.NoError(t, d.Deinit())
	require.ErrorIs(t, d.Deinit(), scheduler.ErrDriver)
}

// TestDriverRunCanceled: Run returns ctx's error when ctx ends first,
// and the scheduler still closes.
func TestDriverRunCanceled(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	d, err := s.Driver(1)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, s.Close())
}

// TestDriverBadUse feeds every misuse of drivers.
func TestDriverBadUse(t *testing.T) {
	ctx := testCtx(t)
	_, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(3))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	_, err = scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(-1))
	require.ErrorIs(t, err, scheduler.ErrBadOption)

	s := newSched(t, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1))
	_, err = s.Driver(0)
	require.ErrorIs(t, err, scheduler.ErrDriver, "a worker the scheduler runs")
	assert.Contains(t, err.Error(), "WithDrivenWorkers")
	_, err = s.Driver(2)
	require.ErrorIs(t, err, scheduler.ErrBadWorker)
	d, err := s.Driver(1)
	require.NoError(t, err)
	_, err = s.Driver(1)
	require.ErrorIs(t, err, scheduler.ErrDriver, "taken twice")
	require.ErrorIs(t, d.Deinit(), scheduler.ErrDriver, "Deinit before Init")
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	require.ErrorIs(t, d.Submit(ctx, noop), scheduler.ErrDriver, "Submit before Init")
	require.ErrorIs(t, d.SubmitTask(ctx, scheduler.NewTask(noop)), scheduler.ErrDriver, "SubmitTask before Init")
	require.ErrorIs(t, d.WaitAll(ctx), scheduler.ErrDriver, "WaitAll before Init")
	require.NoError(t, d.Init())
	require.ErrorIs(t, d.Init(), scheduler.ErrDriver, "Init twice")
	require.ErrorIs(t, d.Run(ctx), scheduler.ErrDriver, "Run after Init")
	require.NoError(t, d.Deinit())
	require.ErrorIs(t, d.Submit(ctx, noop), scheduler.ErrDriver, "Submit after Deinit")
	require.ErrorIs(t, d.WaitAll(ctx), scheduler.ErrDriver, "WaitAll after Deinit")
}

// drivenSched returns a scheduler of the given number of workers whose
// last one is left to the application, and that worker's Driver,
// initialized.
func drivenSched(t *testing.T, workers int, opts ...scheduler.Option) (*scheduler.Scheduler, *scheduler.Driver) {
	t.Helper()
	s := newSched(t, append([]scheduler.Option{scheduler.WithWorkers(workers), scheduler.WithDrivenWorkers(1)}, opts...)...)
	d, err := s.Driver(workers - 1)
	require.NoError(t, err)
	require.NoError(t, d.Init())
	return s, d
}

// holdWorker submits a task (with args) that blocks until release is
// called, and returns once a worker runs it.
func holdWorker(ctx context.Context, t *testing.T, s *scheduler.Scheduler, args ...scheduler.Arg) (release func()) {
	t.Helper()
	started, done := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Submit(ctx, &scheduler.Codelet{Name: "hold", CPU: func(*scheduler.Call) error {
		close(started)
		<-done
		return nil
	}}, args...))
	<-started
	return func() { close(done) }
}

// TestDriverSubmitRunsAtOnce: past the submit limit, Driver.Submit runs
// a ready task on the driven worker before it returns; with the limit
// off it only queues. The launched worker is held by a gate meanwhile,
// so nothing else could have run the tasks.
func TestDriverSubmitRunsAtOnce(t *testing.T) {
	for _, limit := range []int{1, 0} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			ctx := testCtx(t)
			s, d := drivenSched(t, 2, scheduler.WithPolicy("lws"))
			d.SetSubmitLimit(limit)
			release := holdWorker(ctx, t, s) // worker 0: the driven one is not driven yet
			var onDriver, onLaunched atomic.Int64
			work := &scheduler.Codelet{Name: "work", CPU: func(c *scheduler.Call) error {
				if c.Worker == 1 {
					onDriver.Add(1)
				} else {
					onLaunched.Add(1)
				}
				return nil
			}}
			const n = 20
			for i := range n {
				before := onDriver.Load()
				require.NoError(t, d.Submit(ctx, work))
				if limit > 0 && i > 0 {
					// In flight: the gate and the first task at least.
					assert.Greater(t, onDriver.Load(), before, "task %d did not run at once", i)
				}
			}
			if limit == 0 {
				assert.Zero(t, onDriver.Load(), "a task ran during Submit with the limit off")
			}
			release()
			// Scheduler.WaitAll, not the driver's: the completions of the
			// tasks run during Submit are published, and the launched
			// worker steals what was queued on the driven one.
			require.NoError(t, s.WaitAll(ctx))
			assert.Equal(t, int64(n), onDriver.Load()+onLaunched.Load())
			require.NoError(t, d.Deinit())
			require.ErrorIs(t, d.Submit(ctx, work), scheduler.ErrDriver, "Submit after Deinit")
		})
	}
}

// TestDriverSubmitQueuesPrioritized: a task with a priority is queued
// even past the limit, so that the policy orders it; what Submit runs
// then is the policy's next task for the worker.
func TestDriverSubmitQueuesPrioritized(t *testing.T) {
	ctx := testCtx(t)
	_, d := drivenSched(t, 1, scheduler.WithPolicy("prio"))
	d.SetSubmitLimit(1)
	var order []string
	rec := &scheduler.Codelet{Name: "rec", CPU: func(c *scheduler.Call) error {
		order = append(order, c.Arg.(string))
		return nil
	}}
	require.NoError(t, d.Submit(ctx, rec, scheduler.WithArg("A"), scheduler.WithPriority(5)))
	require.NoError(t, d.Submit(ctx, rec, scheduler.WithArg("B"), scheduler.WithPriority(5)))
	assert.Empty(t, order, "at most the limit in flight: queued")
	// Past the limit: C is queued behind A and B, and Submit runs the
	// policy's next task, A.
	require.NoError(t, d.Submit(ctx, rec, scheduler.WithArg("C"), scheduler.WithPriority(1)))
	assert.Equal(t, []string{"A"}, order)
	require.NoError(t, d.WaitAll(ctx))
	assert.Equal(t, []string{"A", "B", "C"}, order)
	require.NoError(t, d.Deinit())
}

// TestDriverWaitAllRuns: with the driven worker the only one, the
// tasks queued on it run inside Driver.WaitAll (a chain through one
// handle: none is ready at submission), which returns their errors.
func TestDriverWaitAllRuns(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 1)
	count := []int64{0}
	h, err := s.RegisterVector(count)
	require.NoError(t, err)
	incr := &scheduler.Codelet{Name: "incr", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[int64](c, 0)[0]++
		return nil
	}}
	boom := errors.New("boom")
	fail := &scheduler.Codelet{Name: "fail", CPU: func(*scheduler.Call) error { return boom }}
	const n = 100
	for range n {
		require.NoError(t, d.Submit(ctx, incr, scheduler.RW(h)))
	}
	require.NoError(t, d.Submit(ctx, fail))
	err = d.WaitAll(ctx)
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "fail")
	assert.Equal(t, int64(n), count[0])
	assert.Equal(t, int64(n+1), s.Stats()[0].Tasks)
	require.NoError(t, d.WaitAll(ctx), "the failure is reported once")
	require.NoError(t, d.Deinit())
}

// TestDriverWaitAllCanceled: Driver.WaitAll returns ctx's error when
// ctx ends before the tasks complete.
func TestDriverWaitAllCanceled(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 2)
	release := holdWorker(ctx, t, s)
	wctx, cancel := context.WithCancel(ctx)
	cancel()
	err := d.WaitAll(wctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "(up to 1 task pending)")
	release()
	require.NoError(t, d.WaitAll(ctx))
	require.NoError(t, d.Deinit())
}

// TestDriverSubmitSynchronous: a synchronous task submitted through the
// driver of the only worker is queued for that worker; Submit runs it
// while it waits (Scheduler.Submit from this goroutine would wait
// forever), and returns its error.
func TestDriverSubmitSynchronous(t *testing.T) {
	ctx := testCtx(t)
	_, d := drivenSched(t, 1)
	ran := 0
	cl := &scheduler.Codelet{Name: "once", CPU: func(c *scheduler.Call) error {
		ran++
		if c.Arg != nil {
			return c.Arg.(error)
		}
		return nil
	}}
	require.NoError(t, d.Submit(ctx, cl, scheduler.Synchronous()))
	assert.Equal(t, 1, ran, "returned before the task ran")
	boom := errors.New("boom")
	err := d.Submit(ctx, cl, scheduler.Synchronous(), scheduler.WithArg(boom))
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 2, ran)

	require.ErrorIs(t, d.WaitAll(ctx), boom, "WaitAll reports the failure too")
	require.NoError(t, d.Deinit())
}

// TestDriverSubmitSynchronousCanceled: the wait for a synchronous task
// ends with ctx when the task cannot run (it waits for one the launched
// worker is stuck in), and the task still runs once that one ends.
func TestDriverSubmitSynchronousCanceled(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 2)
	x := 0
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	release := holdWorker(ctx, t, s, scheduler.W(h))
	var ran atomic.Bool
	after := &scheduler.Codelet{Name: "after", CPU: func(*scheduler.Call) error { ran.Store(true); return nil }}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = d.Submit(wctx, after, scheduler.RW(h), scheduler.Synchronous())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, scheduler.ErrTaskPending, "submitted, not refused")
	assert.Contains(t, err.Error(), `"after"`)
	assert.False(t, ran.Load())
	release()
	require.NoError(t, d.WaitAll(ctx))
	assert.True(t, ran.Load(), "submitted, so it runs")
	require.NoError(t, d.Deinit())
}

// TestDriverSubmitCall: what a task run at submission sees and leaves
// is what a queued one would: its argument, no buffers (even after a
// task with data ran on the same worker), its error or panic reported
// by WaitAll, and its count in Stats.
func TestDriverSubmitCall(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 1)
	d.SetSubmitLimit(1)
	x := []float64{0}
	h, err := s.RegisterVector(x)
	require.NoError(t, err)
	write := &scheduler.Codelet{Name: "write", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0] = 1
		return nil
	}}
	require.NoError(t, d.Submit(ctx, write, scheduler.W(h)))
	require.NoError(t, d.WaitAll(ctx)) // runs it on the driven worker
	var seen []string
	look := &scheduler.Codelet{Name: "look", CPU: func(c *scheduler.Call) error {
		seen = append(seen, fmt.Sprintf("%v/%d/%s", c.Arg, c.Len(), c.Task.Name()))
		switch c.Arg {
		case "fail":
			return errors.New("failed on purpose")
		case "panic":
			panic("panicked on purpose")
		}
		return nil
	}}
	for _, a := range []string{"a", "b", "fail", "c", "panic", "d"} {
		require.NoError(t, d.Submit(ctx, look, scheduler.WithArg(a)))
	}
	// The first two are queued (at most the limit in flight), the others
	// run at once.
	assert.Equal(t, []string{"fail/0/look", "c/0/look", "panic/0/look", "d/0/look"}, seen)
	err = d.WaitAll(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "failed on purpose")
	assert.Contains(t, err.Error(), "panicked on purpose")
	var te *scheduler.TaskError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "look", te.Codelet)
	assert.Equal(t, []string{"fail/0/look", "c/0/look", "panic/0/look", "d/0/look", "a/0/look", "b/0/look"}, seen)
	assert.Equal(t, int64(7), s.Stats()[0].Tasks)
	require.NoError(t, d.Deinit())
}

// TestDriverSubmitFromTask: a task that the driven worker runs may call
// the driver's Submit from its code; the new task is queued, not run
// inside it, and the running task's call is left intact. WaitAll (which
// would wait for the calling task) and RunOnce refuse there.
func TestDriverSubmitFromTask(t *testing.T) {
	ctx := testCtx(t)
	_, d := drivenSched(t, 1)
	d.SetSubmitLimit(1)
	var order []string
	inner := &scheduler.Codelet{Name: "inner", CPU: func(c *scheduler.Call) error {
		order = append(order, c.Arg.(string))
		return nil
	}}
	outer := &scheduler.Codelet{Name: "outer", CPU: func(c *scheduler.Call) error {
		arg := c.Arg.(string)
		if err := d.Submit(ctx, inner, scheduler.WithArg(arg+".child")); err != nil {
			return err
		}
		if c.Arg != arg || c.Task == nil || c.Task.Name() != "outer" {
			return fmt.Errorf("the call changed under the task: arg %v, task %v", c.Arg, c.Task)
		}
		if err := d.WaitAll(ctx); !errors.Is(err, scheduler.ErrDriver) {
			return fmt.Errorf("WaitAll from a task's code: %v, want ErrDriver", err)
		}
		if d.RunOnce() {
			return errors.New("RunOnce ran a task inside a task")
		}
		order = append(order, arg)
		return nil
	}}
	for _, a := range []string{"A", "B", "C"} {
		require.NoError(t, d.Submit(ctx, outer, scheduler.WithArg(a)))
	}
	require.NoError(t, d.WaitAll(ctx))
	assert.ElementsMatch(t, []string{"A", "B", "C", "A.child", "B.child", "C.child"}, order)
	assert.Less(t, slices.Index(order, "B"), slices.Index(order, "B.child"), "the child ran inside its parent: %v", order)
	require.NoError(t, d.Deinit())
}

// TestDriverRunOnceRunsOneTask: RunOnce runs one task, not the chain of
// dependents it releases (they are queued for the next calls), and its
// share of one team task, not a task after it: a frame loop spends at
// most one task's time in it.
func TestDriverRunOnceRunsOneTask(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 1) // the driven worker alone: nothing else runs tasks
	var x int
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	var ran atomic.Int64
	step := &scheduler.Codelet{Name: "step", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
	const n = 10
	for range n {
		require.NoError(t, s.Submit(ctx, step, scheduler.RW(h))) // a chain
	}
	for i := 1; i <= n; i++ {
		require.True(t, d.RunOnce(), "call %d", i)
		require.Equal(t, int64(i), ran.Load(), "call %d ran one task", i)
	}
	assert.False(t, d.RunOnce(), "nothing left")

	// A team of one: the worker's share, then nothing more in that call.
	team := &scheduler.Codelet{Name: "team", Parallel: scheduler.SPMD, CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
	tt := scheduler.NewTask(team, scheduler.WithTeam(1))
	require.NoError(t, s.SubmitTask(ctx, tt))
	require.NoError(t, s.Submit(ctx, step))
	require.True(t, d.RunOnce())
	require.Equal(t, int64(n+1), ran.Load())
	require.True(t, d.RunOnce())
	require.Equal(t, int64(n+2), ran.Load())
	require.NoError(t, s.WaitAll(ctx))
	require.NoError(t, d.Deinit())
}

// TestDriverRunOnceTeamShare: a RunOnce that joins a team runs its share
// and returns, without taking another task.
func TestDriverRunOnceTeamShare(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 2, scheduler.WithPolicy("eager"))
	release := holdWorker(ctx, t, s) // worker 0 busy: the driven worker pops the team
	m := &eventMonitor{popName: "team", popped: make(chan int, 1)}
	s.SetMonitor(m, time.Hour)
	var shares, others atomic.Int64
	team := &scheduler.Codelet{Name: "team", Parallel: scheduler.SPMD, CPU: func(*scheduler.Call) error { shares.Add(1); return nil }}
	other := &scheduler.Codelet{Name: "other", CPU: func(c *scheduler.Call) error {
		if c.Worker == d.Worker() {
			others.Add(1)
		}
		return nil
	}}
	require.NoError(t, s.Submit(ctx, team, scheduler.WithTeam(2)))
	require.NoError(t, s.Submit(ctx, other))
	done := make(chan bool)
	go func() { done <- d.RunOnce() }() // pops the team task, waits for worker 0
	require.Equal(t, d.Worker(), <-m.popped)
	release()
	require.True(t, <-done)
	assert.Zero(t, others.Load(), "RunOnce ran the team's share only")
	require.NoError(t, d.WaitAll(ctx))
	assert.Equal(t, int64(2), shares.Load(), "both members ran their share")
	s.SetMonitor(nil, 0)
	require.NoError(t, d.Deinit())
}

// TestDriverSubmitFromAnotherGoroutine: Submit from a goroutine other
// than the driving one is accepted when the driving goroutine does not
// use the Driver meanwhile (a Driver is used by one goroutine at a
// time); the tasks it runs at once then run on that goroutine.
func TestDriverSubmitFromAnotherGoroutine(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 2)
	d.SetSubmitLimit(1)
	release := holdWorker(ctx, t, s) // in flight: past the limit
	var onDriver atomic.Int64
	var seen atomic.Pointer[scheduler.Context]
	work := &scheduler.Codelet{Name: "work", CPU: func(c *scheduler.Call) error {
		if c.Worker == d.Worker() {
			onDriver.Add(1)
		}
		seen.Store(c.Task.Context)
		return nil
	}}
	require.NoError(t, d.Submit(ctx, work)) // queued: 2 tasks in flight
	errc := make(chan error)
	go func() { errc <- d.Submit(ctx, work) }()
	require.NoError(t, <-errc)
	assert.Equal(t, int64(1), onDriver.Load(), "past the limit: run at once, on the submitting goroutine")
	assert.Same(t, s.Global(), seen.Load(), "a task run as a plain call sees its context too")
	release()
	require.NoError(t, d.WaitAll(ctx))
	require.NoError(t, d.Deinit())
	go func() { errc <- d.Submit(ctx, work) }()
	require.ErrorIs(t, <-errc, scheduler.ErrDriver, "outside Init..Deinit")
}

// A second Run (or Init after Deinit) is refused with an error that says
// the driver already ran, not that Init was called twice.
func TestDriverRunTwice(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	d, err := s.Driver(1)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, d.Run(runCtx), context.Canceled)
	err = d.Run(ctx)
	require.ErrorIs(t, err, scheduler.ErrDriver)
	assert.ErrorContains(t, err, "after its Deinit")
	assert.NotContains(t, err.Error(), "twice")
	require.NoError(t, s.Close())
}

// A WaitAll that times out while a driven worker has no driver says so:
// its tasks wait for a goroutine that drives it (it said only "1 task
// pending"). Once the driver is taken, the hint goes.
func TestDriverNotDrivenExplained(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithDrivenWorkers(1), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, clEmpty))
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = s.WaitAll(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, scheduler.ErrDriver)
	assert.Contains(t, err.Error(), "worker 0 is left to the program (WithDrivenWorkers) and nothing drives it")
	d, err := s.Driver(0)
	require.NoError(t, err)
	go func() { _ = d.Run(ctx) }()
	require.NoError(t, s.WaitAll(ctx))
	require.NoError(t, s.Close())
}

// TestDMDASkipsAwayDrivenWorkers: dmda places a calibrated task on the
// worker where it would finish first, and a driven worker whose program
// is away from its Driver runs nothing: dmda gives it no task while
// another worker can run it, so Scheduler.WaitAll (which runs nothing on
// driven workers) completes without the driver. Before, dmda counted
// the away worker as free and queued tasks for it: WaitAll waited for
// a program that never came.
func TestDMDASkipsAwayDrivenWorkers(t *testing.T) {
	dir := t.TempDir()
	cl := modelCodelet("away")
	require.NoError(t, calibrate(t, dir, cl))
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1), scheduler.WithPolicy("dmda"),
		scheduler.WithPerfModelDir(dir), scheduler.WithStats(true), scheduler.WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	defer s.Close()
	_, ok := s.ModelEstimate(cl, scheduler.CPUWorker)
	require.True(t, ok, "calibrated")
	for range 100 {
		require.NoError(t, s.Submit(ctx, cl))
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, s.WaitAll(wctx))
	st := s.Stats()
	assert.Equal(t, int64(100), st[0].Tasks)
	assert.Zero(t, st[1].Tasks, "the driven worker nothing drives")
}

// A driver that ends normally (Deinit) is no news: the scheduler logs its
// worker's departure at Debug, not Info, so a correct program's log does
// not read as if something went wrong.
func TestDriverDeinitLogsAtDebug(t *testing.T) {
	ctx := testCtx(t)
	core, logs := observer.New(zapcore.DebugLevel)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1),
		scheduler.WithPerfModelDir(""), scheduler.WithLogger(zap.New(core)))
	require.NoError(t, err)
	d, err := s.Driver(1)
	require.NoError(t, err)
	require.NoError(t, d.Init())
	require.NoError(t, d.Submit(ctx, &scheduler.Codelet{Name: "one", CPU: func(*scheduler.Call) error { return nil }}))
	require.NoError(t, d.WaitAll(ctx))
	require.NoError(t, d.Deinit())
	require.NoError(t, s.Close())
	left := logs.FilterMessageSnippet("driven worker left the scheduler").All()
	require.Len(t, left, 1, "the departure is logged once")
	assert.Equal(t, zapcore.DebugLevel, left[0].Level)
	assert.Zero(t, logs.FilterLevelExact(zapcore.InfoLevel).Len()+logs.FilterLevelExact(zapcore.WarnLevel).Len(), "%v", logs.All())
}
