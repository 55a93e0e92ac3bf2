package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

func TestParallelTeams(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(3))
	type seen struct {
		mu    sync.Mutex
		ranks map[int]int // rank -> worker
		sizes []int
	}
	var spmdCalls, fjCalls []*seen
	spmd := &scheduler.Codelet{Name: "spmd", Parallel: scheduler.SPMD, CPU: func(c *scheduler.Call) error {
		r := c.Arg.(*seen)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ranks[c.Rank] = c.Worker
		r.sizes = append(r.sizes, c.Size)
		return nil
	}}
	fj := &scheduler.Codelet{Name: "forkjoin", Parallel: scheduler.ForkJoin, CPU: spmd.CPU}
	var plain atomic.Int64
	inc := &scheduler.Codelet{Name: "plain", CPU: func(*scheduler.Call) error { plain.Add(1); return nil }}
	for i := 0; i < 20; i++ {
		a := &seen{ranks: map[int]int{}}
		spmdCalls = append(spmdCalls, a)
		require.NoError(t, s.Submit(ctx, spmd, scheduler.WithTeam(2+i%2), scheduler.WithArg(a)))
		b := &seen{ranks: map[int]int{}}
		fjCalls = append(fjCalls, b)
		require.NoError(t, s.Submit(ctx, fj, scheduler.WithTeam(3), scheduler.WithArg(b)))
		for j := 0; j < 5; j++ {
			require.NoError(t, s.Submit(ctx, inc))
		}
	}
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, int64(100), plain.Load())
	for i, a := range spmdCalls {
		k := 2 + i%2
		require.Len(t, a.ranks, k, "spmd task %d", i)
		ws := map[int]bool{}
		for r := 0; r < k; r++ {
			w, ok := a.ranks[r]
			require.True(t, ok, "rank %d of task %d", r, i)
			ws[w] = true
		}
		assert.Len(t, ws, k, "distinct workers in task %d", i)
		for _, sz := range a.sizes {
			assert.Equal(t, k, sz)
		}
	}
	for i, b := range fjCalls {
		require.Len(t, b.ranks, 1, "fork-join task %d runs once", i)
		assert.Contains(t, b.ranks, 0)
		assert.Equal(t, []int{3}, b.sizes)
	}
}

func TestTagsAndWait(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var order []int
	var mu sync.Mutex
	rec := &scheduler.Codelet{Name: "rec", CPU: func(c *scheduler.Call) error {
		mu.Lock()
		order = append(order, c.Arg.(int))
		mu.Unlock()
		return nil
	}}
	// Task 2 depends on tag 1, submitted after it.
	require.NoError(t, s.Submit(ctx, rec, scheduler.WithArg(2), scheduler.WithTag(2), scheduler.AfterTags(1)))
	everyWorkerLooked(t, s)
	mu.Lock()
	assert.Empty(t, order, "task 2 must wait for tag 1")
	mu.Unlock()
	t1 := scheduler.NewTask(rec, scheduler.WithArg(1), scheduler.WithTag(1))
	require.NoError(t, s.SubmitTask(ctx, t1))
	require.NoError(t, s.WaitTag(ctx, 2))
	require.NoError(t, s.Wait(ctx, t1))
	mu.Lock()
	assert.Equal(t, []int{1, 2}, order)
	mu.Unlock()
	select {
	case <-t1.Done():
	case <-ctx.Done():
		t.Fatal("Done not closed")
	}
	// Waiting for a tag nobody submits ends with the context.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.WaitTag(short, 99), context.DeadlineExceeded)
}

func TestPriorityOrder(t *testing.T) {
	ctx := testCtx(t)
	for _, p := range []string{"prio", "lws", "dmda"} {
		t.Run(p, func(t *testing.T) {
			s := newSched(t, scheduler.WithPolicy(p), scheduler.WithWorkers(1))
			gate := make(chan struct{})
			inside := make(chan struct{})
			block := &scheduler.Codelet{Name: "gate", CPU: func(*scheduler.Call) error {
				close(inside)
				select {
				case <-gate:
				case <-time.After(10 * time.Second):
				}
				return nil
			}}
			var order []int
			rec := &scheduler.Codelet{Name: "rec", CPU: func(c *scheduler.Call) error {
				order = append(order, c.Arg.(int))
				return nil
			}}
			require.NoError(t, s.Submit(ctx, block))
			<-inside // the worker is inside gate
			prios := []int{1, 5, 3, 5, 0, 9, 2}
			for _, pr := range prios {
				require.NoError(t, s.Submit(ctx, rec, scheduler.WithArg(pr), scheduler.WithPriority(pr)))
			}
			close(gate)
			require.NoError(t, s.WaitAll(ctx))
			assert.Equal(t, []int{9, 5, 5, 3, 2, 1, 0}, order)
		})
	}
}

func TestNoImplicitDeps(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var x int
	h, err := s.RegisterValue(&x, scheduler.NoImplicitDeps())
	require.NoError(t, err)
	// Two writers of h that must run at the same time to finish: they
	// would deadlock (and time out) if they were serialized.
	var wg sync.WaitGroup
	wg.Add(2)
	both := make(chan struct{})
	go func() { wg.Wait(); close(both) }()
	meet := &scheduler.Codelet{Name: "meet", CPU: func(*scheduler.Call) error {
		wg.Done()
		select {
		case <-both:
			return nil
		case <-time.After(5 * time.Second):
			return assert.AnError
		}
	}}
	require.NoError(t, s.Submit(ctx, meet, scheduler.RW(h)))
	require.NoError(t, s.Submit(ctx, meet, scheduler.RW(h)))
	_, err = h.Unregister(ctx)
	require.NoError(t, err)
	require.NoError(t, s.WaitAll(ctx))
}

func TestCommuteExclusive(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(3))
	var acc int64
	h, _ := s.RegisterValue(&acc)
	var inside, maxInside atomic.Int32
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		n := inside.Add(1)
		for {
			m := maxInside.Load()
			if n <= m || maxInside.CompareAndSwap(m, n) {
				break
			}
		}
		*scheduler.ValueOf[*int64](c, 0) += int64(c.Arg.(int))
		time.Sleep(50 * time.Microsecond)
		inside.Add(-1)
		return nil
	}}
	want := int64(0)
	for i := 1; i <= 200; i++ {
		want += int64(i)
		require.NoError(t, s.Submit(ctx, add, scheduler.Commute(h), scheduler.WithArg(i)))
	}
	v, err := h.Unregister(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, *v.(*int64))
	assert.Equal(t, int32(1), maxInside.Load(), "commuting writers never overlap")
}

func TestTraceAndStats(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "run.json")
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithTrace(file), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	a := spd(64, 7)
	l := append([]float64(nil), a...)
	require.NoError(t, cholesky(ctx, s, l, 64, 16))
	require.NoError(t, s.WaitAll(ctx))
	require.NoError(t, s.Close())
	checkCholesky(t, a, l, 64)

	// 4x4 tiles: 4 potrf, 6 trsm, 10 gemm (syrk folded into gemm).
	st := s.Stats()
	require.Len(t, st, 2)
	var tasks int64
	for _, w := range st {
		tasks += w.Tasks
		assert.Greater(t, w.Busy+w.Idle+w.Overhead, time.Duration(0))
	}
	assert.Equal(t, int64(20), tasks)

	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Tid  int            `json:"tid"`
			Dur  float64        `json:"dur"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(raw, &tr))
	count := map[string]int{}
	flows := 0
	withDeps := 0
	named := map[string]bool{}
	for _, e := range tr.TraceEvents {
		switch e.Ph {
		case "M":
			named[e.Name+":"+fmt.Sprint(e.Args["name"])] = true
		case "X":
			count[e.Name]++
			assert.Contains(t, []int{0, 1}, e.Tid)
			if deps, _ := e.Args["deps"].([]any); len(deps) > 0 {
				withDeps++
			}
		case "s":
			flows++
		}
	}
	assert.Equal(t, map[string]int{"potrf": 4, "trsm": 6, "gemm": 10}, count)
	assert.True(t, named["process_name:workers"], "the workers' process is named (Perfetto showed \"Process 0\"): %v", named)
	assert.Equal(t, 19, withDeps, "every task but the first potrf has dependencies")
	assert.Greater(t, flows, 19)
	svg, err := os.ReadFile(filepath.Join(dir, "run.svg"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(svg), "<svg"))
	assert.Equal(t, 2+2+20+3+1, strings.Count(string(svg), "<rect"), "background and idle hatching, worker rows, tasks, legend (3 codelets, idle)")
}

// TestModelPersistenceAcrossProcesses calibrates a model in one process
// and checks that a second process finds it calibrated.
func TestModelPersistenceAcrossProcesses(t *testing.T) {
	if os.Getenv("PZ_SCHED_TEST_HELPER") != "" {
		t.Skip("helper")
	}
	dir := t.TempDir()
	run := func(mode string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestModelHelper$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "PZ_SCHED_TEST_HELPER="+mode, "PZ_PERFMODEL_DIR="+dir)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	run("calibrate")
	files, err := filepath.Glob(filepath.Join(dir, "test_persist.*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	out := run("check")
	assert.Contains(t, out, "calibrated")
}

var clPersist = &scheduler.Codelet{Name: "sleepy", Model: scheduler.HistoryModel("test_persist"), CPU: func(c *scheduler.Call) error {
	time.Sleep(200 * time.Microsecond)
	return nil
}}

func TestModelHelper(t *testing.T) {
	mode := os.Getenv("PZ_SCHED_TEST_HELPER")
	if mode == "" {
		t.Skip("run by TestModelPersistenceAcrossProcesses")
	}
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPolicy("dmda")) // dir from PZ_PERFMODEL_DIR
	require.NoError(t, err)
	defer s.Close()
	v, _ := s.RegisterVector(make([]float64, 100))
	switch mode {
	case "calibrate":
		_, ok := s.ModelEstimate(clPersist, scheduler.CPUWorker, scheduler.R(v))
		require.False(t, ok, "fresh directory: not calibrated")
		for i := 0; i < 20; i++ {
			require.NoError(t, s.Submit(ctx, clPersist, scheduler.R(v)))
		}
		require.NoError(t, s.WaitAll(ctx))
		ns, ok := s.ModelEstimate(clPersist, scheduler.CPUWorker, scheduler.R(v))
		require.True(t, ok)
		require.Greater(t, ns, 150e3)
	case "check":
		ns, ok := s.ModelEstimate(clPersist, scheduler.CPUWorker, scheduler.R(v))
		require.True(t, ok, "model saved by the first process")
		require.Greater(t, ns, 150e3)
		require.Less(t, ns, 50e6)
		// Another shape is a different footprint: not calibrated.
		w, _ := s.RegisterVector(make([]float64, 7))
		_, ok = s.ModelEstimate(clPersist, scheduler.CPUWorker, scheduler.R(w))
		require.False(t, ok)
		t.Log("calibrated", ns)
	}
	require.NoError(t, s.Close())
}

func TestPerfModelDirOption(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	env := scheduler.WithGetenv(func(k string) string {
		if k == "PZ_PERFMODEL_DIR" {
			return dir
		}
		return ""
	})
	for _, tc := range []struct {
		name  string
		opts  []scheduler.Option
		files int
	}{
		{"disabled", []scheduler.Option{env, scheduler.WithPerfModelDir("")}, 0},
		{"from environment", []scheduler.Option{env}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.RemoveAll(dir))
			s, err := scheduler.New(ctx, append(tc.opts, scheduler.WithWorkers(1))...)
			require.NoError(t, err)
			cl := &scheduler.Codelet{Name: "m", CPU: func(*scheduler.Call) error { return nil }, Model: scheduler.HistoryModel("opt_model")}
			require.NoError(t, s.Submit(ctx, cl))
			require.NoError(t, s.Close())
			files, _ := filepath.Glob(filepath.Join(dir, "opt_model.*.json"))
			assert.Len(t, files, tc.files)
		})
	}
}

// TestRepeatedErrorsCollapse: tasks failing with the same message are
// reported once, with their count; errors.As still reaches each kind.
func TestRepeatedErrorsCollapse(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	fail := &scheduler.Codelet{Name: "fail", CPU: func(c *scheduler.Call) error {
		if c.Arg.(int) == 0 {
			return errors.New("odd one out")
		}
		return errors.New("the usual failure")
	}}
	for i := range 20 {
		require.NoError(t, s.Submit(ctx, fail, scheduler.WithArg(i%10)))
	}
	err := s.WaitAll(ctx)
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, "the usual failure (and 17 more like it)")
	require.Contains(t, msg, "odd one out (and 1 more like it)")
	require.Equal(t, 2, strings.Count(msg, "\n")+1, msg)
	var te *scheduler.TaskError
	require.ErrorAs(t, err, &te)
}

// TestTagMisuse: a task waiting for its own tag, a tag a pending task
// carries and a cycle of tags are refused at Submit; waits that only a
// later submission can end are named when WaitAll's context ends, and
// end once that submission comes.
func TestTagMisuse(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	cl := func(name string) *scheduler.Codelet {
		return &scheduler.Codelet{Name: name, CPU: func(*scheduler.Call) error { return nil }}
	}

	err := s.Submit(ctx, cl("self"), scheduler.WithTag(9), scheduler.AfterTags(3, 9))
	require.ErrorIs(t, err, scheduler.ErrBadData)
	assert.Contains(t, err.Error(), `task "self" with tag 9 waits for tag 9, its own`)

	gate := make(chan struct{})
	held := &scheduler.Codelet{Name: "held", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	require.NoError(t, s.Submit(ctx, held, scheduler.WithTag(7)))
	err = s.Submit(ctx, cl("again"), scheduler.WithTag(7))
	require.ErrorIs(t, err, scheduler.ErrBadData)
	assert.Contains(t, err.Error(), `tag 7 of task "again" is already carried by a pending task "held"`)

	// Two and three tasks waiting for each other's tags.
	require.NoError(t, s.Submit(ctx, cl("a10"), scheduler.WithTag(10), scheduler.AfterTags(11)))
	err = s.Submit(ctx, cl("b11"), scheduler.WithTag(11), scheduler.AfterTags(10))
	require.ErrorIs(t, err, scheduler.ErrBadData)
	assert.Contains(t, err.Error(), `task "b11" with tag 11 waits for tag 10, carried by task "a10", which waits for tag 11`)
	require.NoError(t, s.Submit(ctx, cl("c20"), scheduler.WithTag(20), scheduler.AfterTags(21)))
	require.NoError(t, s.Submit(ctx, cl("c21"), scheduler.WithTag(21), scheduler.AfterTags(22)))
	err = s.Submit(ctx, cl("c22"), scheduler.WithTag(22), scheduler.AfterTags(20))
	require.ErrorIs(t, err, scheduler.ErrBadData)
	assert.Contains(t, err.Error(), `task "c22" with tag 22 waits for tag 20, carried by task "c20", which waits for tag 21, carried by task "c21", which waits for tag 22`)

	// Waits only a later submission can end: named, not hung on.
	early := scheduler.NewTask(cl("early"))
	require.NoError(t, s.Submit(ctx, cl("waiter"), scheduler.After(early)))
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	err = s.WaitAll(short)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, scheduler.ErrNotSubmitted)
	assert.Contains(t, err.Error(), `task "a10" waits for tag 11, which no submitted task carries`)
	assert.Contains(t, err.Error(), `task "c21" waits for tag 22, which no submitted task carries`)
	assert.Contains(t, err.Error(), `1 task waits (After) for task "early", which was never submitted`)

	close(gate)
	require.NoError(t, s.Submit(ctx, cl("b11"), scheduler.WithTag(11)))
	require.NoError(t, s.Submit(ctx, cl("c22"), scheduler.WithTag(22)))
	require.NoError(t, s.SubmitTask(ctx, early))
	require.NoError(t, s.WaitAll(ctx))
	// Tag 7's task completed: the tag may be carried again.
	require.NoError(t, s.Submit(ctx, cl("again"), scheduler.WithTag(7)))
	require.NoError(t, s.WaitAll(ctx))
}

// TestCloseEndsStuckWaits: at Close no submission can come any more, so
// the tasks waiting for a tag no task carries, or for a task never
// submitted, are canceled (ErrNotSubmitted) instead of keeping Close
// waiting forever; the task never submitted fails without running.
func TestCloseEndsStuckWaits(t *testing.T) {
	for _, withContext := range []bool{false, true} {
		t.Run(fmt.Sprintf("context=%v", withContext), func(t *testing.T) { testCloseEndsStuckWaits(t, withContext) })
	}
}

// testCloseEndsStuckWaits is TestCloseEndsStuckWaits, with a scheduling
// context created first or not: Close drains the contexts' tasks, and it
// drained them before canceling the stuck waits, so it waited forever.
func testCloseEndsStuckWaits(t *testing.T, withContext bool) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	if withContext {
		_, err := s.NewContext("c1", scheduler.ContextSize(1))
		require.NoError(t, err)
	}
	var ran atomic.Int64
	cl := func(name string) *scheduler.Codelet {
		return &scheduler.Codelet{Name: name, CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
	}
	byTag := scheduler.NewTask(cl("byTag"), scheduler.AfterTags(9))
	require.NoError(t, s.SubmitTask(ctx, byTag))
	never := scheduler.NewTask(cl("never"))
	byTask := scheduler.NewTask(cl("byTask"), scheduler.After(never))
	require.NoError(t, s.SubmitTask(ctx, byTask))
	require.NoError(t, s.Submit(ctx, cl("fine")))

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err = <-closed:
	case <-ctx.Done():
		t.Fatal("Close waits for tasks nothing can start")
	}
	require.ErrorIs(t, err, scheduler.ErrCanceled)
	assert.Contains(t, err.Error(), "2 tasks not run")
	require.ErrorIs(t, byTag.Err(), scheduler.ErrNotSubmitted)
	assert.Contains(t, byTag.Err().Error(), "no task carries tag 9")
	require.ErrorIs(t, byTask.Err(), scheduler.ErrNotSubmitted)
	assert.Contains(t, byTask.Err().Error(), `task "never" was never submitted`)
	require.ErrorIs(t, never.Err(), scheduler.ErrNotSubmitted)
	require.ErrorIs(t, s.SubmitTask(ctx, never), scheduler.ErrClosed)
	assert.Equal(t, int64(1), ran.Load(), "only the task with nothing to wait for ran")
}

// TestAfterCycles: a task after itself, or after tasks that wait (After)
// for it, is refused at Submit, naming the tasks on the cycle; it was
// submitted and waited for forever.
func TestAfterCycles(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	cl := func(name string) *scheduler.Codelet {
		return &scheduler.Codelet{Name: name, CPU: func(*scheduler.Call) error { return nil }}
	}
	self := scheduler.NewTask(cl("self"))
	self.After = append(self.After, self)
	err := s.SubmitTask(ctx, self)
	require.ErrorIs(t, err, scheduler.ErrBadData)
	assert.Contains(t, err.Error(), `task "self" is in its own After list`)

	a, b, c := scheduler.NewTask(cl("a")), scheduler.NewTask(cl("b")), scheduler.NewTask(cl("c"))
	a.After = []*scheduler.Task{b}
	b.After = []*scheduler.Task{c}
	c.After = []*scheduler.Task{a}
	require.NoError(t, s.SubmitTask(ctx, a))
	require.NoError(t, s.SubmitTask(ctx, b))
	err = s.SubmitTask(ctx, c)
	require.ErrorIs(t, err, scheduler.ErrBadData)
	assert.Contains(t, err.Error(), `task "c" waits (After) for "a", which waits for "b", which waits for it`)

	// Without the cycle, c runs and releases the others.
	c.After = nil
	require.NoError(t, s.SubmitTask(ctx, c))
	require.NoError(t, s.WaitAll(ctx))
	for _, x := range []*scheduler.Task{a, b, c} {
		require.NoError(t, x.Err())
	}
}

// TestAfterAcrossSchedulers: a task that waits (After) for a task of
// another scheduler, submitted there before or after, is refused at
// Submit; it was accepted, never ran, and Close hung forever.
func TestAfterAcrossSchedulers(t *testing.T) {
	ctx := testCtx(t)
	a := newSched(t, scheduler.WithWorkers(1))
	b := newSched(t, scheduler.WithWorkers(1))
	cl := func(name string) *scheduler.Codelet {
		return &scheduler.Codelet{Name: name, CPU: func(*scheduler.Call) error { return nil }}
	}

	// Submitted to b first, then named by a task of a.
	inB := scheduler.NewTask(cl("inB"))
	require.NoError(t, b.SubmitTask(ctx, inB))
	waiter := scheduler.NewTask(cl("waiter"), scheduler.After(inB))
	err := a.SubmitTask(ctx, waiter)
	require.ErrorIs(t, err, scheduler.ErrBadData)
	assert.Contains(t, err.Error(), `task "waiter" waits (After) for task "inB", which belongs to another scheduler`)

	// Named by a task of a first, then submitted to b.
	later := scheduler.NewTask(cl("later"))
	early := scheduler.NewTask(cl("early"), scheduler.After(later))
	require.NoError(t, a.SubmitTask(ctx, early))
	err = b.SubmitTask(ctx, later)
	require.ErrorIs(t, err, scheduler.ErrBadData)
	assert.Contains(t, err.Error(), `task "later" belongs to another scheduler`)

	// Submitted to its own scheduler, it runs and releases early; nil
	// entries in After add no dependency.
	require.NoError(t, a.SubmitTask(ctx, later))
	alone := scheduler.NewTask(cl("alone"), scheduler.After(nil))
	require.NoError(t, a.SubmitTask(ctx, alone))
	require.NoError(t, a.WaitAll(ctx))
	require.NoError(t, b.WaitAll(ctx))
	for _, x := range []*scheduler.Task{inB, later, early, alone} {
		require.NoError(t, x.Err())
	}
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
}
