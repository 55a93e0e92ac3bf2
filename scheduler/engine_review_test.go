package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// The engine under review: submissions from several goroutines at once
// that the checks of one submission at a time must still catch.

// submitPair submits a and b from two goroutines released together and
// returns their submission errors.
func submitPair(ctx context.Context, s *scheduler.Scheduler, a, b *scheduler.Task) (error, error) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	var ea, eb error
	wg.Add(2)
	go func() { defer wg.Done(); <-start; ea = s.SubmitTask(ctx, a) }()
	go func() { defer wg.Done(); <-start; eb = s.SubmitTask(ctx, b) }()
	close(start)
	wg.Wait()
	return ea, eb
}

// checkPairEnds waits for the submitted tasks of a pair that would wait
// for each other: they must end (one of them refused or failed with
// ErrBadData, the other canceled), never hang.
func checkPairEnds(t *testing.T, what string, i int, ts []*scheduler.Task, errs []error) {
	t.Helper()
	bad := 0
	for k := range ts {
		if errs[k] != nil {
			if !errors.Is(errs[k], scheduler.ErrBadData) {
				t.Fatalf("%s %d: Submit: %v, want nil or ErrBadData", what, i, errs[k])
			}
			bad++
		}
	}
	if bad > 0 {
		// The other waits for a task never submitted, as it would
		// after the same calls made one after the other; Close ends it.
		return
	}
	for _, x := range ts {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := x.Wait(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s %d: the two tasks, submitted at once, wait for each other forever (submissions: %v, %v)", what, i, errs[0], errs[1])
		}
		if errors.Is(err, scheduler.ErrBadData) && !errors.Is(err, scheduler.ErrCanceled) {
			bad++
		}
	}
	if bad == 0 {
		t.Fatalf("%s %d: neither task of the cycle was refused (errors %v, %v; task errors %v, %v)", what, i, errs[0], errs[1], ts[0].Err(), ts[1].Err())
	}
}

// TestConcurrentTagCycle submits, from two goroutines at once, a task
// with tag a waiting for tag b and one with tag b waiting for tag a:
// submitted one after the other the second is refused (ErrBadData), and
// submitted at once they must not both pass the check and wait for
// each other forever.
func TestConcurrentTagCycle(t *testing.T) {
	ctx := testCtx(t)
	s := newSchedBounded(t, scheduler.WithWorkers(2))
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	for i := range 300 {
		ga, gb := scheduler.Tag(2*i+1), scheduler.Tag(2*i+2)
		a := scheduler.NewTask(nop, scheduler.WithTag(ga), scheduler.AfterTags(gb))
		b := scheduler.NewTask(nop, scheduler.WithTag(gb), scheduler.AfterTags(ga))
		ea, eb := submitPair(ctx, s, a, b)
		checkPairEnds(t, "tag cycle", i, []*scheduler.Task{a, b}, []error{ea, eb})
	}
	_ = closeWithin(t, s, 10*time.Second)
}

// TestConcurrentAfterCycle is TestConcurrentTagCycle with After: a waits
// for b and b for a, each submitted from its own goroutine at once.
func TestConcurrentAfterCycle(t *testing.T) {
	ctx := testCtx(t)
	s := newSchedBounded(t, scheduler.WithWorkers(2))
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	for i := range 300 {
		a := scheduler.NewTask(nop)
		b := scheduler.NewTask(nop, scheduler.After(a))
		a.After = []*scheduler.Task{b}
		ea, eb := submitPair(ctx, s, a, b)
		checkPairEnds(t, "After cycle", i, []*scheduler.Task{a, b}, []error{ea, eb})
	}
	_ = closeWithin(t, s, 10*time.Second)
}

// TestCloseRacingStuckWaits submits, while Close runs, tasks that wait
// for what only a later submission could end (a tag no task carries, a
// task never submitted): Close cancels those it finds, and a task wired
// just after it looked must not be left waiting, with Close waiting for
// it forever.
func TestCloseRacingStuckWaits(t *testing.T) {
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	for _, kind := range []string{"AfterTags", "After"} {
		t.Run(kind, func(t *testing.T) {
			for round := range 200 {
				s := newSchedBounded(t, scheduler.WithWorkers(1))
				ctx := testCtx(t)
				started := make(chan struct{})
				var tasks []*scheduler.Task
				done := make(chan struct{})
				go func() {
					defer close(done)
					for i := 1; ; i++ {
						var x *scheduler.Task
						if kind == "After" {
							x = scheduler.NewTask(nop, scheduler.After(scheduler.NewTask(nop)))
						} else {
							x = scheduler.NewTask(nop, scheduler.AfterTags(scheduler.Tag(i)))
						}
						if err := s.SubmitTask(ctx, x); err != nil {
							if !errors.Is(err, scheduler.ErrClosed) {
								t.Errorf("round %d: Submit: %v", round, err)
							}
							return
						}
						tasks = append(tasks, x)
						if i == 1 {
							close(started)
						}
					}
				}()
				<-started
				_ = closeWithin(t, s, 10*time.Second)
				<-done
				for i, x := range tasks {
					select {
					case <-x.Done():
					default:
						t.Fatalf("round %d: task %d of %d not done after Close", round, i, len(tasks))
					}
					if !errors.Is(x.Err(), scheduler.ErrNotSubmitted) {
						t.Fatalf("round %d: task %d: %v, want ErrNotSubmitted", round, i, x.Err())
					}
				}
			}
		})
	}
}

// The chaos test: lanes of tasks, each lane a goroutine with a handle of
// its own and a sequential model of it, submitted at once with tags,
// After, priorities, batches, teams, failures and panics, beside a lane
// whose tasks a CancelOn context ends mid-run, a lane in scheduling
// contexts created, resized and deleted while its tasks run, a lane
// that partitions its matrix, commuting updates of a shared handle,
// waiters on everything, and, every other round, Close racing with all
// of it.

const chaosP = 1 << 20

// chaosOp is one lane task, with what the model expects of it.
type chaosOp struct {
	task   *scheduler.Task // nil for Submit's (pooled) tasks
	idx    int
	want   string // "done", "failed", "canceled"
	cancel bool   // of the CancelOn lane: "canceled" or "done"
}

// chaosLane is the model of one lane's handle.
type chaosLane struct {
	val  []float64
	ok   bool // its last writer completed
	tags map[scheduler.Tag]string
}

type chaosArg struct {
	idx  int
	k    float64
	in   []float64 // the data the task must find, nil: not checked
	fail int       // 1 error, 2 panic
	rank int       // a team's rank that writes
}

// chaosRun is what the chaos tasks run; bad collects what they found
// wrong (data differing from the model).
type chaosRun struct {
	mu   sync.Mutex
	bad  []string
	runs []atomic.Int32
}

func (r *chaosRun) badf(format string, args ...any) {
	r.mu.Lock()
	r.bad = append(r.bad, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *chaosRun) codelet(name string, write bool) *scheduler.Codelet {
	return &scheduler.Codelet{Name: name, Parallel: scheduler.SPMD, CPU: func(c *scheduler.Call) error {
		a := c.Arg.(chaosArg)
		if c.Rank == 0 {
			r.runs[a.idx].Add(1)
		}
		if c.Len() > 0 && a.in != nil && c.Rank == a.rank {
			v := scheduler.VectorOf[float64](c, 0)
			if !slices.Equal(v, a.in) {
				r.badf("task %d (%s) found %v, the model %v", a.idx, name, v, a.in)
			}
		}
		switch a.fail {
		case 1:
			return fmt.Errorf("chaos failure %d", a.idx)
		case 2:
			panic(fmt.Sprintf("chaos panic %d", a.idx))
		}
		if write && c.Rank == a.rank {
			v := scheduler.VectorOf[float64](c, 0)
			for i := range v {
				v[i] = chaosApply(name, v[i], a.k, i)
			}
		}
		return nil
	}}
}

func chaosApply(kind string, x, k float64, i int) float64 {
	switch kind {
	case "w":
		return math.Mod(k+float64(i), chaosP)
	default:
		return math.Mod(3*x+k+float64(i), chaosP)
	}
}

func TestEngineChaos(t *testing.T) {
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		seed := uint64(time.Now().UnixNano())
		t.Run(fmt.Sprint(round), func(t *testing.T) { chaosRound(t, seed, round%2 == 1) })
	}
}

func chaosRound(t *testing.T, seed uint64, closeRace bool) {
	t.Logf("seed %d, Close racing: %v", seed, closeRace)
	const nTasks = 4000
	policies := []string{"lws", "eager", "prio", "ws", "random", "dmda"}
	rng := rand.New(rand.NewPCG(seed, 1))
	policy := policies[rng.IntN(len(policies))]
	// Under dmda, half the rounds give the codelets a performance
	// model: once calibrated, their tasks are placed by it in the
	// workers' own queues (closed and pushed again as workers leave
	// contexts) instead of all going to the shared FIFO.
	modeled := policy == "dmda" && rng.IntN(2) == 0
	t.Logf("policy %s, codelets with a model: %v", policy, modeled)
	s := newSchedBounded(t, scheduler.WithWorkers(5), scheduler.WithPolicy(policy))
	ctx := testCtx(t)
	run := &chaosRun{runs: make([]atomic.Int32, nTasks+1000)}
	cls := map[string]*scheduler.Codelet{}
	for _, n := range []string{"r", "w", "rw"} {
		cls[n] = run.codelet(n, n != "r")
	}
	commuteCl := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*int64](c, 0) += int64(c.Arg.(int))
		return nil
	}}
	if modeled {
		for n, cl := range cls {
			cl.Model = scheduler.HistoryModel("chaos-" + n)
		}
		commuteCl.Model = scheduler.HistoryModel("chaos-add")
	}
	var shared int64
	hc, err := s.RegisterValue(&shared)
	if err != nil {
		t.Fatal(err)
	}
	var nextIdx, nextTag atomic.Int64
	var commuted atomic.Int64
	closed := make(chan struct{})
	var ops sync.Mutex
	var all []chaosOp
	hists := make([][]string, 4)
	record := func(o chaosOp) { ops.Lock(); all = append(all, o); ops.Unlock() }
	tagc := make(chan scheduler.Tag, 256)
	var submitted atomic.Int64
	closeAt := int64(nTasks/2 + rng.IntN(nTasks/2))

	// submitOne submits one task of a lane, through its batch or not;
	// false: the scheduler refused it as closed.
	submitOne := func(r *rand.Rand, b *scheduler.Batch, x *scheduler.Task, args []scheduler.Arg, cl *scheduler.Codelet) (*scheduler.Task, bool) {
		var err error
		if x == nil && r.IntN(3) == 0 {
			if b != nil && r.IntN(2) == 0 {
				err = b.Submit(ctx, cl, args...)
			} else {
				err = s.Submit(ctx, cl, args...)
			}
		} else {
			if x == nil {
				x = scheduler.NewTask(cl, args...)
			}
			if b != nil && r.IntN(2) == 0 {
				err = b.SubmitTask(ctx, x)
			} else {
				err = s.SubmitTask(ctx, x)
			}
		}
		if err != nil {
			if !errors.Is(err, scheduler.ErrClosed) {
				t.Errorf("Submit: %v", err)
			}
			return nil, false
		}
		if closeRace && submitted.Add(1) == closeAt {
			go func() { _ = s.Close(); close(closed) }()
		}
		return x, true
	}

	lane := func(id int, inCtx, partition bool) {
		r := rand.New(rand.NewPCG(seed, uint64(id)+2))
		m := chaosLane{val: make([]float64, 4), ok: true, tags: map[scheduler.Tag]string{}}
		data := slices.Clone(m.val)
		h, err := s.RegisterVector(data)
		if err != nil {
			t.Errorf("lane %d: %v", id, err)
			return
		}
		b := s.NewBatch()
		defer b.Flush()
		var prev *scheduler.Task
		prevWant := ""
		var c *scheduler.Context
		var hist []string
		defer func() { ops.Lock(); hists[id] = hist; ops.Unlock() }()
		for step := 0; step < nTasks/8; step++ {
			if inCtx && r.IntN(20) == 0 {
				// A new context of one worker, the old one deleted
				// into it while its tasks run.
				n, err := s.NewContext(fmt.Sprintf("lane%d-%d", id, step), scheduler.ContextSize(1))
				if err != nil && !errors.Is(err, scheduler.ErrClosed) && !errors.Is(err, scheduler.ErrBadWorker) {
					t.Errorf("NewContext: %v", err)
				}
				if c != nil {
					var in *scheduler.Context
					if err == nil {
						in = n
					}
					if err := c.Delete(in); err != nil && !errors.Is(err, scheduler.ErrClosed) {
						t.Errorf("Delete: %v", err)
					}
				}
				c = nil
				if err == nil {
					c = n
				}
			}
			switch k := r.IntN(40); {
			case k == 0:
				v, err := h.Fetch(ctx)
				if m.ok != (err == nil) {
					t.Errorf("lane %d step %d: Fetch: %v, the model's last writer completed: %v", id, step, err, m.ok)
				} else if err == nil && !slices.Equal(v.([]float64), m.val) {
					t.Errorf("lane %d step %d: Fetch: %v, want %v", id, step, v, m.val)
				}
				continue
			case k == 1:
				b.Flush()
				hist = append(hist, fmt.Sprintf("step %d unregister", step))
				v, err := h.Unregister(ctx)
				if err != nil {
					t.Errorf("lane %d: Unregister: %v", id, err)
					return
				}
				if !slices.Equal(v.([]float64), m.val) {
					t.Errorf("lane %d step %d: Unregister: %v, want %v", id, step, v, m.val)
				}
				if h, err = s.RegisterVector(data); err != nil {
					if !errors.Is(err, scheduler.ErrClosed) {
						t.Errorf("lane %d: RegisterVector again: %v", id, err)
					}
					return
				}
				m.ok = true
				continue
			case k == 2 && partition:
				hist = append(hist, fmt.Sprintf("step %d partition ok=%v", step, m.ok))
				tiles, err := h.Partition(scheduler.Blocks(2, 1))
				if err != nil {
					if !errors.Is(err, scheduler.ErrClosed) {
						t.Errorf("Partition: %v", err)
					}
					return
				}
				stop := false
				for i, tile := range tiles {
					idx := int(nextIdx.Add(1))
					x, ok := submitOne(r, b, nil, []scheduler.Arg{scheduler.RW(tile[0]), scheduler.WithArg(chaosArg{idx: idx, k: float64(i)})}, cls["rw"])
					if !ok {
						stop = true
						break
					}
					want := "done"
					if !m.ok {
						want = "canceled"
					}
					record(chaosOp{task: x, idx: idx, want: want})
					if want == "done" {
						// a tile's element j is element i*2+j of the whole
						for j := 0; j < 2; j++ {
							m.val[i*2+j] = chaosApply("rw", m.val[i*2+j], float64(i), j)
						}
					}
				}
				if err := h.Unpartition(); err != nil && !errors.Is(err, scheduler.ErrClosed) {
					t.Errorf("Unpartition: %v", err)
				}
				if stop {
					return
				}
				continue
			case k == 4:
				// Data waits for every task on h; the memory is the
				// model's whatever the last writer did.
				b.Flush()
				if v := h.Data(); !slices.Equal(v.([]float64), m.val) {
					t.Errorf("lane %d step %d: Data: %v, want %v", id, step, v, m.val)
				}
				continue
			case k == 5 && c != nil:
				// Workers moved into the lane's context while its
				// tasks run.
				if err := c.AddWorkers(r.IntN(5)); err != nil && !errors.Is(err, scheduler.ErrClosed) && !errors.Is(err, scheduler.ErrBadWorker) && !errors.Is(err, scheduler.ErrBadContext) && !errors.Is(err, scheduler.ErrContextDeleted) && !errors.Is(err, scheduler.ErrWorkerBusy) {
					t.Errorf("AddWorkers: %v", err)
				}
				continue
			case k == 3:
				n := int(nextIdx.Add(1))
				if _, ok := submitOne(r, b, nil, []scheduler.Arg{scheduler.Commute(hc), scheduler.WithArg(n)}, commuteCl); !ok {
					return
				}
				commuted.Add(int64(n))
				continue
			}
			kind := []string{"r", "w", "rw", "rw", "rw"}[r.IntN(5)]
			a := chaosArg{idx: int(nextIdx.Add(1)), k: float64(r.IntN(1000))}
			args := []scheduler.Arg{scheduler.WithPriority(r.IntN(5) - 2)}
			switch kind {
			case "r":
				args = append(args, scheduler.R(h))
			case "w":
				args = append(args, scheduler.W(h))
			default:
				args = append(args, scheduler.RW(h))
			}
			if kind != "w" {
				a.in = slices.Clone(m.val)
			}
			strongFailed := false
			var x *scheduler.Task
			if r.IntN(4) == 0 && prev != nil {
				x = scheduler.NewTask(nil)
				args = append(args, scheduler.After(prev))
				strongFailed = prevWant != "done"
			}
			if r.IntN(4) == 0 && len(m.tags) > 0 {
				for g, w := range m.tags {
					args = append(args, scheduler.AfterTags(g))
					strongFailed = strongFailed || w != "done"
					break
				}
			}
			tag := scheduler.Tag(0)
			if r.IntN(3) == 0 {
				tag = scheduler.Tag(nextTag.Add(1))
				args = append(args, scheduler.WithTag(tag))
			}
			if r.IntN(15) == 0 && c == nil {
				args = append(args, scheduler.WithTeam(2))
				a.rank = r.IntN(2)
			}
			if r.IntN(12) == 0 {
				a.fail = 1 + r.IntN(2)
			}
			if c != nil {
				args = append(args, scheduler.InContext(c))
			}
			args = append(args, scheduler.WithArg(a))
			want := "done"
			switch {
			case strongFailed || (kind != "w" && !m.ok):
				want = "canceled"
				a.in = nil
			case a.fail != 0:
				want = "failed"
			}
			if x != nil {
				*x = *scheduler.NewTask(cls[kind], args...)
			}
			x, ok := submitOne(r, b, x, args, cls[kind])
			if !ok {
				return
			}
			hist = append(hist, fmt.Sprintf("step %d: task %d %s, want %s", step, a.idx, kind, want))
			record(chaosOp{task: x, idx: a.idx, want: want})
			if tag != 0 {
				m.tags[tag] = want
				select {
				case tagc <- tag:
				default:
				}
			}
			if x != nil {
				prev, prevWant = x, want
			}
			if kind != "r" {
				m.ok = want == "done"
				if m.ok {
					for i := range m.val {
						m.val[i] = chaosApply(kind, m.val[i], a.k, i)
					}
				}
			}
			if x != nil && r.IntN(10) == 0 {
				err := x.Wait(ctx)
				if (err == nil) != (want == "done") {
					t.Errorf("lane %d: Wait of task %d: %v, want %s", id, a.idx, err, want)
				}
			}
			if r.IntN(30) == 0 {
				b.Flush()
			}
		}
	}

	// The CancelOn lane: an RW chain whose context ends mid-run; the
	// tasks that ran are a prefix, the handle holds their count.
	var cancelOps []chaosOp
	var cancelVal int64
	cancelLane := func() {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		hv, err := s.RegisterValue(&cancelVal)
		if err != nil {
			t.Errorf("cancel lane: %v", err)
			return
		}
		inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
			run.runs[c.Arg.(int)].Add(1)
			*scheduler.ValueOf[*int64](c, 0)++
			return nil
		}}
		if modeled {
			inc.Model = scheduler.HistoryModel("chaos-inc")
		}
		stopAt := rng.IntN(400)
		for i := range 500 {
			if i == stopAt {
				cancel()
			}
			idx := int(nextIdx.Add(1))
			x := scheduler.NewTask(inc, scheduler.RW(hv), scheduler.CancelOn(cctx), scheduler.WithArg(idx))
			if _, ok := submitOne(rand.New(rand.NewPCG(seed, 99)), nil, x, nil, nil); !ok {
				return
			}
			cancelOps = append(cancelOps, chaosOp{task: x, idx: idx, cancel: true})
		}
	}

	// Waiters: WaitAll with short deadlines, WaitTag of lanes' tags,
	// Fetch of handles being used (its data not read: lanes write it).
	stopWaiters := make(chan struct{})
	var waiters sync.WaitGroup
	for w := range 2 {
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			for {
				select {
				case <-stopWaiters:
					return
				default:
				}
				wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
				if w == 0 {
					_ = s.WaitAll(wctx)
				} else {
					select {
					case g := <-tagc:
						_ = s.WaitTag(wctx, g)
					default:
						_ = s.WaitAll(wctx)
					}
				}
				cancel()
			}
		}()
	}

	var lanes sync.WaitGroup
	for id := range 4 {
		lanes.Add(1)
		go func() { defer lanes.Done(); lane(id, id == 2, id == 3) }()
	}
	lanes.Add(1)
	go func() { defer lanes.Done(); cancelLane() }()
	// Teams resized under them: a context of two workers that loses one
	// and is deleted with a team task pending.
	lanes.Add(1)
	go func() {
		defer lanes.Done()
		for i := range 20 {
			c, err := s.NewContext(fmt.Sprint("team", i), scheduler.ContextSize(2))
			if err != nil {
				if !errors.Is(err, scheduler.ErrClosed) && !errors.Is(err, scheduler.ErrBadWorker) {
					t.Errorf("NewContext: %v", err)
				}
				continue
			}
			idx := int(nextIdx.Add(1))
			x := scheduler.NewTask(cls["r"], scheduler.WithTeam(2), scheduler.InContext(c), scheduler.WithArg(chaosArg{idx: idx}))
			if err := s.SubmitTask(ctx, x); err == nil {
				record(chaosOp{task: x, idx: idx, want: "done"})
			} else if !errors.Is(err, scheduler.ErrClosed) && !errors.Is(err, scheduler.ErrBadTeam) {
				t.Errorf("team Submit: %v", err)
			}
			if ws := c.Workers(); len(ws) > 1 {
				if err := c.RemoveWorkers(ws[1]); err != nil && !errors.Is(err, scheduler.ErrClosed) {
					t.Errorf("RemoveWorkers: %v", err)
				}
			}
			if err := c.Delete(nil); err != nil && !errors.Is(err, scheduler.ErrClosed) {
				t.Errorf("Delete: %v", err)
			}
		}
	}()

	finished := make(chan struct{})
	go func() { lanes.Wait(); close(finished) }()
	watchdog := time.After(2 * time.Minute)
	select {
	case <-finished:
	case <-watchdog:
		chaosStuck(t, s, "the lanes")
	}
	if !closeRace {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := s.WaitAll(wctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			chaosStuck(t, s, "WaitAll: "+err.Error())
		}
		go func() { _ = s.Close(); close(closed) }()
	} else if submitted.Load() < closeAt {
		go func() { _ = s.Close(); close(closed) }()
	}
	select {
	case <-closed:
	case <-time.After(2 * time.Minute):
		chaosStuck(t, s, "Close")
	}
	close(stopWaiters)
	waiters.Wait()

	for _, b := range run.bad {
		t.Error(b)
	}
	check := func(o chaosOp) {
		n := run.runs[o.idx].Load()
		if o.task != nil {
			select {
			case <-o.task.Done():
			default:
				t.Errorf("task %d (%s) not done after Close", o.idx, o.task.Name())
				return
			}
			err := o.task.Err()
			var te *scheduler.TaskError
			got := "done"
			switch {
			case errors.Is(err, scheduler.ErrCanceled):
				got = "canceled"
			case errors.As(err, &te):
				got = "failed"
			case err != nil:
				got = "error: " + err.Error()
			}
			if o.cancel {
				if got != "done" && got != "canceled" {
					t.Errorf("CancelOn task %d: %v", o.idx, err)
				}
				o.want = got
			} else if got != o.want {
				t.Errorf("task %d (%s): %v (%s), the model: %s", o.idx, o.task.Name(), err, got, o.want)
			}
		}
		if want := int32(map[bool]int{true: 1}[o.want != "canceled"]); n != want {
			t.Errorf("task %d ran %d times, want %d (%s)", o.idx, n, want, o.want)
		}
	}
	for _, o := range all {
		check(o)
	}
	ran := int64(0)
	for i, o := range cancelOps {
		check(o)
		if o.task.Err() == nil {
			if i > 0 && cancelOps[i-1].task.Err() != nil {
				t.Errorf("CancelOn task %d ran after its predecessor was canceled", o.idx)
			}
			ran++
		}
	}
	if cancelVal != ran {
		t.Errorf("CancelOn lane: value %d, %d tasks ran", cancelVal, ran)
	}
	if t.Failed() {
		for id, h := range hists {
			t.Logf("lane %d history:\n%s", id, strings.Join(h, "\n"))
		}
	}
	if shared != commuted.Load() {
		t.Errorf("commuting updates: %d, want %d", shared, commuted.Load())
	}
}

// chaosStuck fails the test with what the scheduler and the goroutines
// are doing.
func chaosStuck(t *testing.T, s *scheduler.Scheduler, what string) {
	t.Helper()
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	running, _ := s.Running()
	t.Fatalf("stuck in %s; running %v; goroutines:\n%s", what, running, b.String())
}

// TestPartitionAfterFailedReader: a reader that fails changes nothing
// on its handle, so the tasks after it run - also on the tiles of the
// handle partitioned after it, and on the whole again after every tile
// was last read by a failing reader and gathered back.
func TestPartitionAfterFailedReader(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		for i, v := 0, scheduler.VectorOf[float64](c, 0); i < len(v); i++ {
			v[i]++
		}
		return nil
	}}
	bad := &scheduler.Codelet{Name: "bad", CPU: func(*scheduler.Call) error { return errors.New("reader fails") }}
	data := make([]float64, 4)
	h, err := s.RegisterVector(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, add, scheduler.RW(h)); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, bad, scheduler.R(h)); err != nil {
		t.Fatal(err)
	}
	tiles, err := h.Partition(scheduler.Blocks(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	onTile := scheduler.NewTask(add, scheduler.RW(tiles[0][0]))
	if err := s.SubmitTask(ctx, onTile); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, bad, scheduler.R(tiles[0][0])); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, bad, scheduler.R(tiles[1][0])); err != nil {
		t.Fatal(err)
	}
	if err := h.Unpartition(); err != nil {
		t.Fatal(err)
	}
	onWhole := scheduler.NewTask(add, scheduler.RW(h))
	if err := s.SubmitTask(ctx, onWhole); err != nil {
		t.Fatal(err)
	}
	_ = s.WaitAll(ctx)
	if err := onTile.Err(); err != nil {
		t.Errorf("RW of a tile after a failed reader of the whole: %v", err)
	}
	if err := onWhole.Err(); err != nil {
		t.Errorf("RW of the whole after a failed reader of a tile: %v", err)
	}
}
