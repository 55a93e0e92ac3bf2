package scheduler_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

func TestFailuresCancelDependents(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var x, y, z uint64
	hx, _ := s.RegisterValue(&x)
	hy, _ := s.RegisterValue(&y)
	hz, _ := s.RegisterValue(&z)
	var ran atomic.Int64
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("bad tile") }}
	crash := &scheduler.Codelet{Name: "crash", CPU: func(*scheduler.Call) error { panic("index out of range") }}
	count := &scheduler.Codelet{Name: "count", CPU: func(c *scheduler.Call) error {
		ran.Add(1)
		*scheduler.ValueOf[*uint64](c, 0)++
		return nil
	}}
	failed := scheduler.NewTask(boom, scheduler.RW(hx))
	require.NoError(t, s.SubmitTask(ctx, failed))
	// Three dependents of x: canceled, transitively.
	for i := 0; i < 3; i++ {
		require.NoError(t, s.Submit(ctx, count, scheduler.RW(hx)))
	}
	panicked := scheduler.NewTask(crash, scheduler.R(hy))
	require.NoError(t, s.SubmitTask(ctx, panicked))
	// Independent work continues, and so does the RW of y after the
	// failed reader: a reader changes nothing the next writer needs
	// (TestFailedReaderDoesNotCancelWriter).
	for i := 0; i < 5; i++ {
		require.NoError(t, s.Submit(ctx, count, scheduler.RW(hz)))
	}
	require.NoError(t, s.Submit(ctx, count, scheduler.RW(hy)))
	after := scheduler.NewTask(count, scheduler.RW(hz), scheduler.After(failed))
	require.NoError(t, s.SubmitTask(ctx, after))

	err := s.WaitAll(ctx)
	require.Error(t, err)
	var te *scheduler.TaskError
	require.ErrorAs(t, err, &te)
	assert.Contains(t, err.Error(), `"boom"`)
	assert.Contains(t, err.Error(), "bad tile")
	assert.Contains(t, err.Error(), `"crash"`)
	assert.Contains(t, err.Error(), "index out of range")
	assert.NotContains(t, err.Error(), "goroutine") // the panic's stack stays in TaskError.Stack
	assert.ErrorIs(t, err, scheduler.ErrCanceled)
	assert.Contains(t, err.Error(), "4 tasks not run")

	require.ErrorAs(t, panicked.Err(), &te)
	assert.True(t, te.Panicked)
	assert.Equal(t, "crash", te.Codelet)
	assert.NotEmpty(t, te.Stack)
	assert.ErrorIs(t, after.Wait(ctx), scheduler.ErrCanceled)
	var root *scheduler.TaskError
	require.ErrorAs(t, after.Err(), &root)
	assert.Equal(t, "boom", root.Codelet)

	assert.Equal(t, int64(6), ran.Load())
	assert.Equal(t, uint64(0), x)
	assert.Equal(t, uint64(1), y)
	assert.Equal(t, uint64(5), z)
	// Errors are reported once.
	require.NoError(t, s.WaitAll(ctx))
}

func TestCallbackAndSync(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var v uint64
	h, _ := s.RegisterValue(&v)
	var seen atomic.Uint64
	cl := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) = c.Arg.(uint64)
		return nil
	}}
	require.NoError(t, s.Submit(ctx, cl, scheduler.W(h), scheduler.WithArg(uint64(42)),
		scheduler.WithCallback(func(t *scheduler.Task) { seen.Store(42) }), scheduler.Synchronous()))
	// Synchronous: done, callback run, value written.
	assert.Equal(t, uint64(42), seen.Load())
	assert.Equal(t, uint64(42), v)
	bad := &scheduler.Codelet{Name: "cbpanic", CPU: func(*scheduler.Call) error { return nil }}
	err := s.Submit(ctx, bad, scheduler.WithCallback(func(*scheduler.Task) { panic("in callback") }), scheduler.Synchronous())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "callback")
	require.Error(t, s.WaitAll(ctx))
}

// Several WithCallback run in the order given, each once, on the task's
// completion; a nil one is ignored.
func TestCallbacksChain(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var order []string
	cb := func(name string) scheduler.Arg {
		return scheduler.WithCallback(func(*scheduler.Task) { order = append(order, name) })
	}
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, noop, cb("first"), scheduler.WithCallback(nil), cb("second"), cb("third"), scheduler.Synchronous()))
	assert.Equal(t, []string{"first", "second", "third"}, order)
}

func TestBadInput(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var ran atomic.Int64
	slow := &scheduler.Codelet{Name: "count", CPU: func(c *scheduler.Call) error {
		ran.Add(1)
		return nil
	}}
	data := make([]float64, 16)
	m, err := s.RegisterMatrix(data, 4, 4)
	require.NoError(t, err)
	// Work submitted before the bad submissions must not be lost.
	for i := 0; i < 10; i++ {
		require.NoError(t, s.Submit(ctx, slow, scheduler.RW(m)))
	}

	t.Run("no implementation", func(t *testing.T) {
		none := &scheduler.Codelet{Name: "nothing"}
		err := s.Submit(ctx, none, scheduler.R(m))
		require.ErrorIs(t, err, scheduler.ErrNoImplementation)
		assert.Contains(t, err.Error(), "nothing")
		require.ErrorIs(t, s.Submit(ctx, nil), scheduler.ErrNoImplementation)
	})
	t.Run("invalid mode", func(t *testing.T) {
		err := s.Submit(ctx, slow, scheduler.Data(m, scheduler.ModeR|scheduler.ModeRedux))
		require.ErrorIs(t, err, scheduler.ErrInvalidMode)
		require.ErrorIs(t, s.Submit(ctx, slow, scheduler.Data(m, 0)), scheduler.ErrInvalidMode)
		require.ErrorIs(t, s.Submit(ctx, slow, scheduler.Redux(m)), scheduler.ErrInvalidMode) // no SetReduction
		require.ErrorIs(t, s.Submit(ctx, slow, scheduler.R(m), scheduler.Scratch(m)), scheduler.ErrInvalidMode)
	})
	t.Run("partitioned parent", func(t *testing.T) {
		tiles, err := m.Partition(scheduler.Blocks(2, 2))
		require.NoError(t, err)
		require.Len(t, tiles, 2)
		// Writing the whole while its tiles are in use is refused.
		err = s.Submit(ctx, slow, scheduler.W(m))
		require.ErrorIs(t, err, scheduler.ErrPartitioned)
		assert.Contains(t, err.Error(), "Unpartition")
		_, err = m.Unregister(ctx)
		require.ErrorIs(t, err, scheduler.ErrPartitioned)
		require.NoError(t, s.Submit(ctx, slow, scheduler.RW(tiles[1][1])))
		require.NoError(t, m.Unpartition())
		err = s.Submit(ctx, slow, scheduler.R(tiles[0][0]))
		require.ErrorIs(t, err, scheduler.ErrUnregistered)
	})
	t.Run("overlap", func(t *testing.T) {
		_, err := s.RegisterVector(data[3:5])
		require.ErrorIs(t, err, scheduler.ErrOverlap)
		_, err = s.RegisterMatrix(data, 5, 4)
		require.ErrorIs(t, err, scheduler.ErrBadData)
		_, err = s.RegisterVector(42)
		require.ErrorIs(t, err, scheduler.ErrBadData)
	})
	t.Run("team too large", func(t *testing.T) {
		require.ErrorIs(t, s.Submit(ctx, slow, scheduler.WithTeam(3)), scheduler.ErrBadTeam)
	})
	t.Run("negative team", func(t *testing.T) {
		err := s.Submit(ctx, slow, scheduler.WithTeam(-1))
		require.ErrorIs(t, err, scheduler.ErrBadTeam)
		assert.Contains(t, err.Error(), "asks for a team of -1 workers; WithTeam(n) takes n >= 0 (0 and 1 run the task on one worker)")
	})
	t.Run("foreign handle", func(t *testing.T) {
		other := newSched(t, scheduler.WithWorkers(1))
		var x int
		h, err := other.RegisterValue(&x)
		require.NoError(t, err)
		require.ErrorIs(t, s.Submit(ctx, slow, scheduler.R(h)), scheduler.ErrForeignHandle)
	})
	t.Run("resubmit", func(t *testing.T) {
		tk := scheduler.NewTask(clEmpty)
		require.NoError(t, s.SubmitTask(ctx, tk))
		require.ErrorIs(t, s.SubmitTask(ctx, tk), scheduler.ErrAlreadySubmitted)
	})
	t.Run("after unregister", func(t *testing.T) {
		got, err := m.Unregister(ctx)
		require.NoError(t, err)
		require.Equal(t, data, got)
		// Unregister waited for every task on m.
		assert.Equal(t, int64(11), ran.Load())
		err = s.Submit(ctx, slow, scheduler.R(m))
		require.ErrorIs(t, err, scheduler.ErrUnregistered)
		// The memory may be registered again.
		_, err = s.RegisterVector(data)
		require.NoError(t, err)
	})
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, int64(11), ran.Load())

	t.Run("after close", func(t *testing.T) {
		require.NoError(t, s.Close())
		require.NoError(t, s.Close()) // idempotent
		require.ErrorIs(t, s.Submit(ctx, slow), scheduler.ErrClosed)
		_, err := s.RegisterVector(make([]int, 3))
		require.ErrorIs(t, err, scheduler.ErrClosed)
	})
}

func TestBadOptions(t *testing.T) {
	env := func(k, v string) scheduler.Option {
		return scheduler.WithGetenv(func(key string) string {
			if key == k {
				return v
			}
			return ""
		})
	}
	_, err := scheduler.New(testCtx(t), env("PZ_NCPU", "zero"))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	// PZ_NCPU=100000 kept New from returning (idle workers look at one
	// another's queues): refused, as a count of devices past its bound.
	for _, v := range []string{"100000", "99999999"} {
		_, err = scheduler.New(testCtx(t), env("PZ_NCPU", v))
		require.ErrorIs(t, err, scheduler.ErrBadOption, v)
		assert.Contains(t, err.Error(), "PZ_NCPU="+v+": at most 1024 CPU workers")
	}
	for _, bad := range []struct {
		opt  scheduler.Option
		want string
	}{
		{scheduler.WithWorkers(0), "WithWorkers(0)"},
		// -1 was the default's sentinel: taken as "one per core".
		{scheduler.WithWorkers(-1), "WithWorkers(-1)"},
		{scheduler.WithWorkers(1025), "WithWorkers(1025): at most 1024 CPU workers"},
		{scheduler.WithSpin(-1), "WithSpin(-1)"},
		{scheduler.WithDrivenWorkers(-1), "cannot be negative"},
		{scheduler.WithDrivenWorkers(9), "the scheduler has 2 workers"},
		// A policy constructor returning nil made New panic.
		{scheduler.WithPolicyFunc(func(scheduler.PolicyConfig) scheduler.Policy { return nil }), "nil Policy"},
	} {
		_, err = scheduler.New(testCtx(t), scheduler.WithWorkers(2), bad.opt, scheduler.WithPerfModelDir(""))
		require.ErrorIs(t, err, scheduler.ErrBadOption, bad.want)
		assert.Contains(t, err.Error(), bad.want)
	}
	s, err := scheduler.New(testCtx(t), env("PZ_NCPU", "3"), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	assert.Len(t, s.Workers(), 3)
	assert.Equal(t, "lws", s.Policy())
	require.NoError(t, s.Close())
}

// TestTaskErrorOneLine: WaitAll's error is one line per failed task
// (task, codelet, worker, cause); a panic's stack stays in the
// TaskError and in the trace.
// A panic inside the Go runtime (a nil map's write) is placed at the
// codelet's line that caused it, not in the runtime.
func TestTaskErrorPanicSite(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	var m map[int]int
	line := 0
	nilMap := &scheduler.Codelet{Name: "nilmap", CPU: func(*scheduler.Call) error {
		_, _, line, _ = runtime.Caller(0)
		m[1] = 2 // the line after Caller's
		return nil
	}}
	task := scheduler.NewTask(nilMap)
	require.NoError(t, s.SubmitTask(ctx, task))
	var te *scheduler.TaskError
	require.ErrorAs(t, task.Wait(ctx), &te)
	require.True(t, te.Panicked)
	assert.Equal(t, fmt.Sprintf("failure_test.go:%d", line+1), te.Site)
	assert.Contains(t, te.Error(), fmt.Sprintf(" at failure_test.go:%d: assignment to entry in nil map", line+1))
	// A returned error has no site.
	fail := scheduler.NewTask(&scheduler.Codelet{Name: "fail", CPU: func(*scheduler.Call) error { return errors.New("no") }})
	require.NoError(t, s.SubmitTask(ctx, fail))
	require.ErrorAs(t, fail.Wait(ctx), &te)
	assert.Empty(t, te.Site)
	assert.NotContains(t, te.Error(), " at ")
	_ = s.WaitAll(ctx)
}

func TestTaskErrorOneLine(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2), scheduler.WithStats(true))
	crash := &scheduler.Codelet{Name: "crash", CPU: func(*scheduler.Call) error { panic("index out of range") }}
	task := scheduler.NewTask(crash, scheduler.WithTag(7))
	require.NoError(t, s.SubmitTask(ctx, task))
	err := s.WaitAll(ctx)
	require.Error(t, err)
	msg := err.Error()
	assert.NotContains(t, msg, "\n")
	var te *scheduler.TaskError
	require.ErrorAs(t, err, &te)
	assert.Contains(t, msg, `codelet "crash" panicked on worker `)
	// The panic's site, the codelet's own line, read from the stack.
	assert.Regexp(t, `^failure_test\.go:\d+$`, te.Site)
	assert.Contains(t, msg, " at "+te.Site+": ")
	assert.Contains(t, msg, "(tag 7)")
	assert.Contains(t, msg, "index out of range")
	assert.Contains(t, msg, fmt.Sprintf("task #%d", te.Task))
	assert.GreaterOrEqual(t, te.Worker, 0)
	assert.Less(t, te.Worker, 2)
	assert.Contains(t, te.Stack, "goroutine")

	var trace bytes.Buffer
	require.NoError(t, s.WriteTrace(&trace))
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(trace.Bytes(), &doc))
	found := false
	for _, e := range doc.TraceEvents {
		if e.Name == "crash" {
			found = true
			assert.Contains(t, e.Args["error"], "goroutine")
		}
	}
	assert.True(t, found, "the failed task is in the trace")
}

// TestFailedHandleRecovers: a failed task's error is reported once; an R
// or RW task after it is canceled with an error naming it; a task that
// only writes the handle runs and makes it usable again.
func TestFailedHandleRecovers(t *testing.T) {
	for _, waitFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("waitFirst=%v", waitFirst), func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, scheduler.WithWorkers(2))
			var x uint64
			h, err := s.RegisterValue(&x)
			require.NoError(t, err)
			boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("bad tile") }}
			set := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error {
				*scheduler.ValueOf[*uint64](c, 0) = 40
				return nil
			}}
			inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
				*scheduler.ValueOf[*uint64](c, 0)++
				return nil
			}}
			var got uint64
			read := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error {
				got = *scheduler.ValueOf[*uint64](c, 0)
				return nil
			}}
			require.NoError(t, s.Submit(ctx, boom, scheduler.RW(h)))
			if waitFirst {
				err := s.WaitAll(ctx)
				require.Error(t, err)
				assert.Contains(t, err.Error(), "bad tile")
			}
			stale := scheduler.NewTask(inc, scheduler.RW(h))
			require.NoError(t, s.SubmitTask(ctx, stale))
			staleRead := scheduler.NewTask(read, scheduler.R(h))
			require.NoError(t, s.SubmitTask(ctx, staleRead))
			fresh := scheduler.NewTask(set, scheduler.W(h))
			require.NoError(t, s.SubmitTask(ctx, fresh))
			require.NoError(t, s.Submit(ctx, inc, scheduler.RW(h)))
			require.NoError(t, s.Submit(ctx, inc, scheduler.RW(h)))
			require.NoError(t, s.Submit(ctx, read, scheduler.R(h)))

			err = s.WaitAll(ctx)
			if waitFirst {
				// The failure was reported by the first WaitAll; only
				// the cancellations of the stale tasks remain.
				assert.NotContains(t, err.Error(), "bad tile\n")
				var te *scheduler.TaskError
				assert.False(t, errors.As(err, &te) && te.Codelet == "boom" && !errors.Is(err, scheduler.ErrCanceled))
			}
			require.ErrorIs(t, err, scheduler.ErrCanceled)
			assert.Contains(t, err.Error(), "2 tasks not run")
			for _, st := range []*scheduler.Task{stale, staleRead} {
				require.ErrorIs(t, st.Err(), scheduler.ErrCanceled)
				assert.Contains(t, st.Err().Error(), `codelet "boom"`, "names the failed task")
			}
			require.NoError(t, fresh.Err())
			assert.Equal(t, uint64(42), x)
			assert.Equal(t, uint64(42), got)
			require.NoError(t, s.WaitAll(ctx), "every error is reported once")

			// The handle keeps working.
			require.NoError(t, s.Submit(ctx, inc, scheduler.RW(h)))
			require.NoError(t, s.WaitAll(ctx))
			assert.Equal(t, uint64(43), x)
		})
	}
}

// TestPooledTasksCanceledAndRun: tasks Submit makes without data are
// reused once completed; those canceled by a failed predecessor and
// those that run, over many rounds, each complete once.
func TestPooledTasksCanceledAndRun(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var ran atomic.Int64
	count := &scheduler.Codelet{Name: "count", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("bad") }}
	for round := 0; round < 50; round++ {
		failed := scheduler.NewTask(boom)
		require.NoError(t, s.SubmitTask(ctx, failed))
		ok := scheduler.NewTask(count)
		require.NoError(t, s.SubmitTask(ctx, ok))
		for i := 0; i < 100; i++ {
			require.NoError(t, s.Submit(ctx, count, scheduler.After(failed)))
			require.NoError(t, s.Submit(ctx, count, scheduler.After(ok)))
			require.NoError(t, s.Submit(ctx, count))
		}
		err := s.WaitAll(ctx)
		require.ErrorIs(t, err, scheduler.ErrCanceled)
		assert.Contains(t, err.Error(), "100 tasks not run")
	}
	assert.Equal(t, int64(50*201), ran.Load())
}

// TestOneEdgePerPredecessor: a task that reaches the same predecessor
// through several handles waits for it once (wire merges the edges),
// and the merged dependency is as strong as the strongest access: a
// task that only writes one handle but reads or updates another one the
// failed task wrote is canceled, in either order of its accesses, while
// a task that only writes both runs; tasks reaching one predecessor
// through several handles, in a long run, each run once.
func TestOneEdgePerPredecessor(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	for _, tc := range []struct {
		name   string
		access func(a, b *scheduler.Handle) []scheduler.Arg
		runs   bool
	}{
		{"W then RW", func(a, b *scheduler.Handle) []scheduler.Arg { return []scheduler.Arg{scheduler.W(a), scheduler.RW(b)} }, false},
		{"R then W", func(a, b *scheduler.Handle) []scheduler.Arg { return []scheduler.Arg{scheduler.R(b), scheduler.W(a)} }, false},
		{"W and W", func(a, b *scheduler.Handle) []scheduler.Arg { return []scheduler.Arg{scheduler.W(a), scheduler.W(b)} }, true},
	} {
		var a, b uint64
		ha, err := s.RegisterValue(&a)
		require.NoError(t, err)
		hb, err := s.RegisterValue(&b)
		require.NoError(t, err)
		gate := make(chan struct{})
		boom := &scheduler.Codelet{Name: "boom " + tc.name, CPU: func(*scheduler.Call) error { <-gate; return errors.New("bad pair") }}
		require.NoError(t, s.Submit(ctx, boom, scheduler.RW(ha), scheduler.RW(hb)))
		// ha and hb were last written by boom, which has not run yet.
		task := scheduler.NewTask(nop, tc.access(ha, hb)...)
		require.NoError(t, s.SubmitTask(ctx, task))
		close(gate)
		err = s.WaitAll(ctx)
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), "bad pair", tc.name)
		if tc.runs {
			require.NoError(t, task.Err(), "%s: a task that only writes both handles starts new versions", tc.name)
			continue
		}
		require.ErrorIs(t, task.Err(), scheduler.ErrCanceled, tc.name)
		assert.Contains(t, task.Err().Error(), `codelet "boom `+tc.name+`"`, tc.name)
	}

	var a, b uint64
	ha, err := s.RegisterValue(&a)
	require.NoError(t, err)
	hb, err := s.RegisterValue(&b)
	require.NoError(t, err)
	inc2 := &scheduler.Codelet{Name: "inc2", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0)++
		*scheduler.ValueOf[*uint64](c, 1)++
		return nil
	}}
	const n = 5000
	for i := 0; i < n; i++ {
		require.NoError(t, s.Submit(ctx, inc2, scheduler.RW(ha), scheduler.RW(hb)))
	}
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, uint64(n), a)
	assert.Equal(t, uint64(n), b)
}

// TestFailedReaderDoesNotCancelWriter: a task that only reads a handle
// and fails leaves the data as it was, so the tasks after it on that
// handle run (a write after the read is ordered after it, it does not
// need its success); a writer's failure still cancels the tasks that
// read its version, through a group of readers too.
func TestFailedReaderDoesNotCancelWriter(t *testing.T) {
	for _, waitFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("waitFirst=%v", waitFirst), func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, scheduler.WithWorkers(2))
			var x uint64
			h, err := s.RegisterValue(&x, scheduler.Named("x"))
			require.NoError(t, err)
			badRead := &scheduler.Codelet{Name: "badRead", CPU: func(*scheduler.Call) error { return errors.New("reader failed") }}
			boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("writer failed") }}
			okRead := &scheduler.Codelet{Name: "okRead", CPU: func(*scheduler.Call) error { return nil }}
			inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
				*scheduler.ValueOf[*uint64](c, 0)++
				return nil
			}}
			submit := func(cl *scheduler.Codelet, a scheduler.Arg) *scheduler.Task {
				task := scheduler.NewTask(cl, a)
				require.NoError(t, s.SubmitTask(ctx, task))
				return task
			}
			// A failed reader beside a good one; the RW, the R and the
			// Commute after them run.
			bad := submit(badRead, scheduler.R(h))
			peer := submit(okRead, scheduler.R(h))
			if waitFirst {
				require.ErrorContains(t, s.WaitAll(ctx), "reader failed")
			}
			rw := submit(inc, scheduler.RW(h))
			after := submit(okRead, scheduler.R(h))
			com := submit(inc, scheduler.Commute(h))
			err = s.WaitAll(ctx)
			if !waitFirst {
				require.ErrorContains(t, err, "reader failed")
				require.NotErrorIs(t, err, scheduler.ErrCanceled)
			} else {
				require.NoError(t, err)
			}
			require.Error(t, bad.Err())
			for _, task := range []*scheduler.Task{peer, rw, after, com} {
				require.NoError(t, task.Err(), task.Codelet.Name)
			}
			assert.Equal(t, uint64(2), x)

			// A failed writer: the readers of its version are canceled,
			// and so is the RW after them, although it waits on the
			// readers and not on the writer.
			require.NoError(t, s.Submit(ctx, boom, scheduler.RW(h)))
			r1 := submit(okRead, scheduler.R(h))
			r2 := submit(okRead, scheduler.R(h))
			stale := submit(inc, scheduler.RW(h))
			err = s.WaitAll(ctx)
			require.ErrorContains(t, err, "writer failed")
			for _, task := range []*scheduler.Task{r1, r2, stale} {
				require.ErrorIs(t, task.Err(), scheduler.ErrCanceled)
				assert.Contains(t, task.Err().Error(), `codelet "boom"`)
			}
			assert.Equal(t, uint64(2), x)
		})
	}
}

// TestGroupAfterCanceledReader: the Redux and Commute tasks after a
// reader that failed or was canceled all run, not only the first of
// their group (the second and later ones waited on the reader as on a
// writer: canceled, and with them the reduction's combination and
// everything after it, while the data were fine); after a failed
// writer, all of them are canceled.
func TestGroupAfterCanceledReader(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var other, r, c uint64
	ho, err := s.RegisterValue(&other, scheduler.Named("other"))
	require.NoError(t, err)
	hr, err := s.RegisterValue(&r, scheduler.Named("r"))
	require.NoError(t, err)
	hc, err := s.RegisterValue(&c, scheduler.Named("c"))
	require.NoError(t, err)
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) = 0
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) += *scheduler.ValueOf[*uint64](c, 1)
		return nil
	}}
	require.NoError(t, hr.SetReduction(zero, add))
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("writer failed") }}
	read := &scheduler.Codelet{Name: "read", CPU: func(*scheduler.Call) error { return nil }}
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0)++
		return nil
	}}
	submit := func(cl *scheduler.Codelet, args ...scheduler.Arg) *scheduler.Task {
		task := scheduler.NewTask(cl, args...)
		require.NoError(t, s.SubmitTask(ctx, task))
		return task
	}
	for _, waitFirst := range []bool{false, true} {
		r, c = 10, 20
		// A reader of r and c that is canceled: another handle's writer
		// failed.
		require.NoError(t, s.Submit(ctx, boom, scheduler.W(ho)))
		reader := submit(read, scheduler.R(hr), scheduler.R(hc), scheduler.R(ho))
		if waitFirst {
			require.ErrorContains(t, s.WaitAll(ctx), "writer failed")
		}
		var group []*scheduler.Task
		for range 3 {
			group = append(group, submit(inc, scheduler.Redux(hr)), submit(inc, scheduler.Commute(hc)))
		}
		sum := submit(read, scheduler.R(hr), scheduler.R(hc))
		err := s.WaitAll(ctx)
		if !waitFirst {
			require.ErrorContains(t, err, "writer failed")
		}
		require.ErrorIs(t, reader.Err(), scheduler.ErrCanceled)
		for i, task := range append(group, sum) {
			require.NoError(t, task.Err(), "task %d after the canceled reader (waitFirst %v)", i, waitFirst)
		}
		assert.Equal(t, uint64(13), r)
		assert.Equal(t, uint64(23), c)
	}

	// After a failed writer, every task of the group is canceled, and
	// so is what reads the result; the data are as the writer found
	// them, and a W starts anew.
	for _, h := range []*scheduler.Handle{hr, hc} {
		require.NoError(t, s.Submit(ctx, boom, scheduler.RW(h)))
	}
	readers := []*scheduler.Task{submit(read, scheduler.R(hr)), submit(read, scheduler.R(hc))}
	var group []*scheduler.Task
	for range 3 {
		group = append(group, submit(inc, scheduler.Redux(hr)), submit(inc, scheduler.Commute(hc)))
	}
	sum := submit(read, scheduler.R(hr), scheduler.R(hc))
	require.ErrorContains(t, s.WaitAll(ctx), "writer failed")
	for i, task := range append(append(readers, group...), sum) {
		require.ErrorIs(t, task.Err(), scheduler.ErrCanceled, "task %d", i)
		assert.Contains(t, task.Err().Error(), `codelet "boom"`)
	}
	assert.Equal(t, uint64(13), r)
	assert.Equal(t, uint64(23), c)
	set := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) = 5
		return nil
	}}
	for _, h := range []*scheduler.Handle{hr, hc} {
		require.NoError(t, s.Submit(ctx, set, scheduler.W(h)))
		require.NoError(t, s.Submit(ctx, read, scheduler.R(h)))
		for range 2 {
			require.NoError(t, s.Submit(ctx, inc, map[*scheduler.Handle]scheduler.Arg{hr: scheduler.Redux(hr), hc: scheduler.Commute(hc)}[h]))
		}
	}
	require.NoError(t, s.WaitAll(ctx))
	for _, h := range []*scheduler.Handle{hr, hc} {
		v, err := h.Fetch(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(7), *v.(*uint64), "%v", h)
	}
}

// TestFailedDetachedReaderCancelsWriter: a detached reader (a transfer,
// say) may fail while its operation still reads the data, so the writer
// after it is canceled, RW or W, unlike after a plain reader.
func TestFailedDetachedReaderCancelsWriter(t *testing.T) {
	for _, mode := range []func(*scheduler.Handle) scheduler.Arg{scheduler.RW, scheduler.W} {
		ctx := testCtx(t)
		s := newSched(t, scheduler.WithWorkers(2))
		var x uint64
		h, err := s.RegisterValue(&x)
		require.NoError(t, err)
		send := &scheduler.Codelet{Name: "send", Detached: func(_ *scheduler.Task, done func(error)) {
			go done(errors.New("transfer ended"))
		}}
		inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
			*scheduler.ValueOf[*uint64](c, 0)++
			return nil
		}}
		require.NoError(t, s.Submit(ctx, send, scheduler.R(h)))
		w := scheduler.NewTask(inc, mode(h))
		require.NoError(t, s.SubmitTask(ctx, w))
		err = s.WaitAll(ctx)
		require.ErrorContains(t, err, "transfer ended")
		require.ErrorIs(t, w.Err(), scheduler.ErrCanceled)
		assert.Contains(t, w.Err().Error(), `codelet "send"`)
		assert.Equal(t, uint64(0), x)
	}
}

// TestWAfterFailedDetachedWriter: a W task after a failed writer starts
// a new version and runs, whether that writer was detached or not (only
// a detached reader's failure cancels the writer after it).
func TestWAfterFailedDetachedWriter(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var x uint64
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	recv := &scheduler.Codelet{Name: "recv", Detached: func(_ *scheduler.Task, done func(error)) {
		go done(errors.New("recv failed"))
	}}
	set := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) = 7
		return nil
	}}
	require.NoError(t, s.Submit(ctx, recv, scheduler.RW(h)))
	w := scheduler.NewTask(set, scheduler.W(h))
	require.NoError(t, s.SubmitTask(ctx, w))
	require.ErrorContains(t, s.WaitAll(ctx), "recv failed")
	require.NoError(t, w.Err())
	assert.Equal(t, uint64(7), x)
}

// TestFetchAfterFailedWriter: Fetch, the host's read, is told when the
// task that wrote the data last failed or was canceled, as a task that
// reads the handle then is (it returned the data from before that task
// without a word: a trial program found stale results that way after
// tasks had run out of device memory); a task that only writes the
// handle starts anew.
func TestFetchAfterFailedWriter(t *testing.T) {
	for _, waitFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("waitFirst=%v", waitFirst), func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, scheduler.WithWorkers(2))
			x := []float64{1}
			h, err := s.RegisterVector(x, scheduler.Named("x"))
			require.NoError(t, err)
			boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("bad tile") }}
			inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
				scheduler.VectorOf[float64](c, 0)[0]++
				return nil
			}}
			set := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error {
				scheduler.VectorOf[float64](c, 0)[0] = 40
				return nil
			}}
			read := &scheduler.Codelet{Name: "read", CPU: func(*scheduler.Call) error { return nil }}

			require.NoError(t, s.Submit(ctx, inc, scheduler.RW(h)))
			v, err := h.Fetch(ctx)
			require.NoError(t, err, "the writer succeeded")
			assert.Equal(t, []float64{2}, v)

			require.NoError(t, s.Submit(ctx, boom, scheduler.RW(h)))
			if waitFirst {
				require.Error(t, s.WaitAll(ctx))
			}
			_, err = h.Fetch(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `Fetch of handle "x": task "boom", which wrote the data last, did not complete`)
			assert.Contains(t, err.Error(), "bad tile", "wraps the task's error")
			assert.Contains(t, err.Error(), "only writes")
			var te *scheduler.TaskError
			assert.True(t, errors.As(err, &te) && te.Codelet == "boom", "the task's error is wrapped: %v", err)

			// Readers after it do not hide it, nor does a writer canceled
			// because of it.
			require.NoError(t, s.Submit(ctx, read, scheduler.R(h)))
			_, err = h.Fetch(ctx)
			assert.ErrorContains(t, err, `task "boom"`)
			require.NoError(t, s.Submit(ctx, inc, scheduler.RW(h)))
			_, err = h.Fetch(ctx)
			assert.ErrorContains(t, err, `task "inc", which wrote the data last, did not complete`)
			assert.ErrorIs(t, err, scheduler.ErrCanceled)

			require.NoError(t, s.Submit(ctx, set, scheduler.W(h)))
			v, err = h.Fetch(ctx)
			require.NoError(t, err, "a task that only writes the handle starts anew")
			assert.Equal(t, []float64{40}, v)
			require.Error(t, s.WaitAll(ctx), "the cancellations are still reported")
			require.NoError(t, s.WaitAll(ctx))
		})
	}
}

// TestUnpartitionAfterFailedTileReader: after Unpartition, a reader of a
// tile that failed cancels nothing on the whole handle, whether or not
// other tiles were last written and with or without devices (where
// Unpartition gathers the tiles with a task of its own, which waited on
// the readers as on writers); a tile writer that failed cancels the
// accesses to the whole that follow.
func TestUnpartitionAfterFailedTileReader(t *testing.T) {
	for _, devices := range []bool{false, true} {
		t.Run(fmt.Sprintf("devices=%v", devices), func(t *testing.T) {
			ctx := testCtx(t)
			opts := []scheduler.Option{scheduler.WithWorkers(2)}
			if devices {
				opts = append(opts, scheduler.WithSimDevices(scheduler.SimDevice{Memory: 1 << 20}))
			}
			s := newSched(t, opts...)
			add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
				for i, v := 0, scheduler.VectorOf[float64](c, 0); i < len(v); i++ {
					v[i]++
				}
				return nil
			}}
			bad := &scheduler.Codelet{Name: "bad", CPU: func(*scheduler.Call) error { return errors.New("reader fails") }}
			boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("writer fails") }}
			data := make([]float64, 4)
			h, err := s.RegisterVector(data, scheduler.Named("v"))
			require.NoError(t, err)
			round := func(tileWriter *scheduler.Codelet) *scheduler.Task {
				tiles, err := h.Partition(scheduler.Blocks(2, 1))
				require.NoError(t, err)
				require.NoError(t, s.Submit(ctx, add, scheduler.RW(tiles[0][0])))
				require.NoError(t, s.Submit(ctx, bad, scheduler.R(tiles[0][0])))
				require.NoError(t, s.Submit(ctx, tileWriter, scheduler.RW(tiles[1][0]))) // tile 1 last written
				require.NoError(t, h.Unpartition())
				whole := scheduler.NewTask(add, scheduler.RW(h))
				require.NoError(t, s.SubmitTask(ctx, whole))
				require.ErrorContains(t, s.WaitAll(ctx), "fails")
				return whole
			}
			whole := round(add)
			require.NoError(t, whole.Err(), "RW of the whole after a failed reader of a tile")
			got, err := h.Fetch(ctx)
			require.NoError(t, err)
			assert.Equal(t, []float64{2, 2, 2, 2}, got)

			whole = round(boom)
			require.ErrorIs(t, whole.Err(), scheduler.ErrCanceled, "after a failed tile writer")
			assert.Contains(t, whole.Err().Error(), `codelet "boom"`)
		})
	}
}

// TestTaskErrorNamesContext: a task's error names the context it was
// submitted to, so that two libraries sharing a scheduler, each in a
// context of its own, tell whose task failed (helper-145's trial: the
// context showed only in the wait's error around it); the global
// context is not named.
func TestTaskErrorNamesContext(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	liba, err := s.NewContext("liba", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	boom := &scheduler.Codelet{Name: "gemm", CPU: func(*scheduler.Call) error { return errors.New("bad tile") }}
	in := scheduler.NewTask(boom, scheduler.InContext(liba))
	require.NoError(t, s.SubmitTask(ctx, in))
	global := scheduler.NewTask(boom)
	require.NoError(t, s.SubmitTask(ctx, global))
	require.Error(t, s.WaitAll(ctx))
	var te *scheduler.TaskError
	require.ErrorAs(t, in.Err(), &te)
	assert.Equal(t, "liba", te.Context)
	assert.Contains(t, in.Err().Error(), `of codelet "gemm" in context "liba" failed on worker 0: bad tile`)
	require.ErrorAs(t, global.Err(), &te)
	assert.Equal(t, "", te.Context)
	assert.NotContains(t, global.Err().Error(), "in context")
}
