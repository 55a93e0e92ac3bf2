package scheduler_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// recorder is a codelet that appends its task's Arg to a log.
type recorder struct {
	mu  sync.Mutex
	log []int
	cl  *scheduler.Codelet
}

func newRecorder() *recorder {
	r := &recorder{}
	r.cl = &scheduler.Codelet{Name: "record", CPU: func(c *scheduler.Call) error {
		r.mu.Lock()
		r.log = append(r.log, c.Arg.(int))
		r.mu.Unlock()
		return nil
	}}
	return r
}

func (r *recorder) ran() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.log...)
}

// TestBatchHoldsUntilFlush: with one worker and a FIFO policy, tasks
// queued before a probe task would run before it; held by a batch, they
// have not run when the probe has, and run in submission order after
// Flush.
func TestBatchHoldsUntilFlush(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithPolicy("eager"))
	rec := newRecorder()
	b := s.NewBatch()
	for i := range 5 {
		require.NoError(t, b.Submit(ctx, rec.cl, scheduler.WithArg(i)))
	}
	require.Equal(t, 5, b.Len())
	probe := scheduler.NewTask(rec.cl, scheduler.WithArg(-1))
	require.NoError(t, s.SubmitTask(ctx, probe))
	require.NoError(t, probe.Wait(ctx))
	assert.Equal(t, []int{-1}, rec.ran(), "held tasks ran before Flush")
	b.Flush()
	assert.Equal(t, 0, b.Len())
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, []int{-1, 0, 1, 2, 3, 4}, rec.ran())
}

// TestBatchOrdersLikeSubmit runs a seeded random program of reads and
// updates of three handles, each step submitted either through a batch
// (flushed at random points) or directly, and compares the handles with
// the same program run sequentially: a batch's tasks are ordered with
// every other submission as the calls are.
func TestBatchOrdersLikeSubmit(t *testing.T) {
	ctx := testCtx(t)
	for _, pol := range []string{"lws", "eager", "dmda"} {
		t.Run(pol, func(t *testing.T) {
			s := newSched(t, scheduler.WithWorkers(2), scheduler.WithPolicy(pol))
			rng := rand.New(rand.NewPCG(7, 11))
			want := [3]float64{1, 2, 3}
			var data [3][]float64
			var hs [3]*scheduler.Handle
			for k := range hs {
				data[k] = []float64{want[k]}
				var err error
				hs[k], err = s.RegisterVector(data[k])
				require.NoError(t, err)
			}
			// update: dst = dst*3 + src + c, mod a prime to stay exact.
			update := &scheduler.Codelet{Name: "update", CPU: func(c *scheduler.Call) error {
				dst, src := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
				dst[0] = float64(int64(dst[0]*3+src[0]+float64(c.Arg.(int))) % 1000003)
				return nil
			}}
			b := s.NewBatch()
			for i := range 400 {
				d, src := rng.IntN(3), rng.IntN(3)
				if d == src {
					src = (src + 1) % 3
				}
				want[d] = float64(int64(want[d]*3+want[src]+float64(i)) % 1000003)
				args := []scheduler.Arg{scheduler.RW(hs[d]), scheduler.R(hs[src]), scheduler.WithArg(i)}
				if rng.IntN(3) == 0 {
					require.NoError(t, s.Submit(ctx, update, args...))
				} else {
					require.NoError(t, b.Submit(ctx, update, args...))
				}
				if rng.IntN(40) == 0 {
					b.Flush()
				}
			}
			b.Flush()
			require.NoError(t, s.WaitAll(ctx))
			for k := range hs {
				assert.Equal(t, want[k], data[k][0], "handle %d", k)
			}
		})
	}
}

// TestBatchFlushedByWaits: WaitAll (the scheduler's, a context's, a
// Driver's), a held task's Wait and Close each
// start the tasks a batch holds instead of waiting for a Flush that
// never comes.
func TestBatchFlushedByWaits(t *testing.T) {
	ctx := testCtx(t)
	t.Run("WaitAll", func(t *testing.T) {
		s := newSched(t)
		rec := newRecorder()
		b := s.NewBatch()
		require.NoError(t, b.Submit(ctx, rec.cl, scheduler.WithArg(1)))
		require.NoError(t, s.WaitAll(ctx))
		assert.Equal(t, []int{1}, rec.ran())
		assert.Equal(t, 0, b.Len())
	})
	t.Run("TaskWait", func(t *testing.T) {
		s := newSched(t)
		rec := newRecorder()
		b := s.NewBatch()
		require.NoError(t, b.Submit(ctx, rec.cl, scheduler.WithArg(1)))
		task := scheduler.NewTask(rec.cl, scheduler.WithArg(2))
		require.NoError(t, b.SubmitTask(ctx, task))
		require.NoError(t, task.Wait(ctx))
		assert.Contains(t, rec.ran(), 2)
		assert.Equal(t, 0, b.Len())
		require.NoError(t, s.WaitAll(ctx))
		assert.ElementsMatch(t, []int{1, 2}, rec.ran())
	})
	t.Run("ContextWaitAll", func(t *testing.T) {
		s := newSched(t, scheduler.WithWorkers(2))
		c, err := s.NewContext("c", scheduler.ContextWorkers(1))
		require.NoError(t, err)
		rec := newRecorder()
		b := s.NewBatch()
		for i := range 3 {
			require.NoError(t, b.Submit(scheduler.Within(ctx, c), rec.cl, scheduler.WithArg(i)))
		}
		require.NoError(t, c.WaitAll(ctx))
		assert.ElementsMatch(t, []int{0, 1, 2}, rec.ran())
	})
	t.Run("DriverWaitAll", func(t *testing.T) {
		// The only worker is driven: the tasks run in its WaitAll, once flushed.
		s := newSched(t, scheduler.WithWorkers(1), scheduler.WithDrivenWorkers(1))
		d, err := s.Driver(0)
		require.NoError(t, err)
		require.NoError(t, d.Init())
		defer d.Deinit()
		rec := newRecorder()
		b := s.NewBatch()
		for i := range 3 {
			require.NoError(t, b.Submit(ctx, rec.cl, scheduler.WithArg(i)))
		}
		require.NoError(t, d.WaitAll(ctx))
		assert.Equal(t, []int{0, 1, 2}, rec.ran())
	})
	t.Run("Close", func(t *testing.T) {
		s, err := scheduler.New(ctx, scheduler.WithPerfModelDir(t.TempDir()))
		require.NoError(t, err)
		rec := newRecorder()
		b := s.NewBatch()
		for i := range 3 {
			require.NoError(t, b.Submit(ctx, rec.cl, scheduler.WithArg(i)))
		}
		require.NoError(t, s.Close())
		assert.ElementsMatch(t, []int{0, 1, 2}, rec.ran())
		assert.ErrorIs(t, b.Submit(ctx, rec.cl, scheduler.WithArg(3)), scheduler.ErrClosed)
	})
}

// TestBatchBadInput: a synchronous task, a nil handle and a canceled
// context are refused with their errors, nothing is held for them, and
// the tasks held before still run.
func TestBatchBadInput(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t)
	rec := newRecorder()
	b := s.NewBatch()
	require.NoError(t, b.Submit(ctx, rec.cl, scheduler.WithArg(1)))
	assert.ErrorIs(t, b.Submit(ctx, rec.cl, scheduler.WithArg(2), scheduler.Synchronous()), scheduler.ErrBadOption)
	assert.ErrorIs(t, b.Submit(ctx, rec.cl, scheduler.WithArg(3), scheduler.RW(nil)), scheduler.ErrBadData)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, b.Submit(canceled, rec.cl, scheduler.WithArg(4)), context.Canceled)
	assert.Equal(t, 1, b.Len())
	b.Flush()
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, []int{1}, rec.ran())
}

// TestBatchConcurrent submits through one batch from several goroutines
// while others flush it and wait on its tasks (run with -race): every
// task runs once.
func TestBatchConcurrent(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t)
	rec := newRecorder()
	b := s.NewBatch()
	var wg sync.WaitGroup
	const per = 200
	for g := range 3 {
		wg.Go(func() {
			for i := range per {
				task := scheduler.NewTask(rec.cl, scheduler.WithArg(g*per+i))
				if err := b.SubmitTask(ctx, task); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 49 {
					if err := task.Wait(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			b.Flush()
		}
	})
	wg.Wait()
	require.NoError(t, s.WaitAll(ctx))
	got := rec.ran()
	assert.Len(t, got, 3*per)
	seen := make(map[int]bool)
	for _, v := range got {
		assert.False(t, seen[v], "task %d ran twice", v)
		seen[v] = true
	}
}

// A task that waits, through its data, for a task a batch holds must not
// wait forever: Task.Wait, a Synchronous Submit and Unregister flush the
// batches, as WaitAll does.
func TestBatchWaitFlushesPredecessors(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	add1 := &scheduler.Codelet{Name: "add1", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*int](c, 0)++
		return nil
	}}
	var x int
	h, err := s.RegisterValue(&x, scheduler.Named("x"))
	require.NoError(t, err)

	b := s.NewBatch()
	require.NoError(t, b.Submit(ctx, add1, scheduler.RW(h)))
	tk := scheduler.NewTask(add1, scheduler.RW(h))
	require.NoError(t, s.SubmitTask(ctx, tk))
	require.NoError(t, tk.Wait(ctx), "Wait for a task after a held one")
	assert.Equal(t, 2, x)

	require.NoError(t, b.Submit(ctx, add1, scheduler.RW(h)))
	require.NoError(t, s.Submit(ctx, add1, scheduler.RW(h), scheduler.Synchronous()), "Synchronous Submit after a held task")
	assert.Equal(t, 4, x)

	require.NoError(t, b.Submit(ctx, add1, scheduler.RW(h)))
	require.NoError(t, s.Submit(ctx, add1, scheduler.RW(h)))
	_, err = h.Unregister(ctx)
	require.NoError(t, err, "Unregister after a held task")
	assert.Equal(t, 6, x)
	assert.Zero(t, b.Len())
}

// TestBatchWaitFlushesTagged: a task that waits through a tag (AfterTags)
// for a task a Batch holds, and WaitTag of that tag, flush the batches
// instead of waiting for a Flush that nobody calls.
func TestBatchWaitFlushesTagged(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var ran atomic.Int64
	cl := &scheduler.Codelet{Name: "step", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}

	b := s.NewBatch()
	require.NoError(t, b.SubmitTask(ctx, scheduler.NewTask(cl, scheduler.WithTag(1))))
	after := scheduler.NewTask(cl, scheduler.AfterTags(1))
	require.NoError(t, s.SubmitTask(ctx, after))
	// And a task after that one, through its data-free After.
	next := scheduler.NewTask(cl, scheduler.After(after))
	require.NoError(t, s.SubmitTask(ctx, next))
	require.NoError(t, next.Wait(ctx), "Wait for a task after one that waits for a held tag")
	require.NoError(t, after.Err())

	require.NoError(t, b.SubmitTask(ctx, scheduler.NewTask(cl, scheduler.WithTag(2))))
	require.NoError(t, s.WaitTag(ctx, 2), "WaitTag of a held task's tag")
	assert.Equal(t, int64(4), ran.Load())
	assert.Zero(t, b.Len())
}
