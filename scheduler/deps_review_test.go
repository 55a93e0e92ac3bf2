package scheduler_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestReduxAfterPartlyFailedGroup: a group of Redux tasks one of which
// failed combines none of its contributions; the next group's
// reduction, after a W starts anew, combines its own only.
func TestReduxAfterPartlyFailedGroup(t *testing.T) {
	for _, devs := range []bool{false, true} {
		opts := []scheduler.Option{scheduler.WithWorkers(1)}
		if devs {
			// The copies on the device, whose memory they hold.
			opts = []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 64, Workers: 2})}
		}
		reduxAfterPartlyFailedGroup(t, opts)
	}
}

func reduxAfterPartlyFailedGroup(t *testing.T, opts []scheduler.Option) {
	ctx := testCtx(t)
	s := newSched(t, opts...)
	var x uint64
	h, err := s.RegisterValue(&x, scheduler.Named("x"))
	require.NoError(t, err)
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) = 0
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) += *scheduler.ValueOf[*uint64](c, 1)
		return nil
	}}
	require.NoError(t, h.SetReduction(zero, add))
	addK := &scheduler.Codelet{Name: "addk", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) += uint64(c.Arg.(int))
		return nil
	}}
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("contribution failed") }}
	set := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) = 100
		return nil
	}}
	for round := range 20 {
		// Contributions of 5 on whichever workers run them, one failing.
		for range 4 {
			require.NoError(t, s.Submit(ctx, addK, scheduler.Redux(h), scheduler.WithArg(5)))
		}
		require.NoError(t, s.Submit(ctx, boom, scheduler.Redux(h)))
		require.ErrorContains(t, s.WaitAll(ctx), "contribution failed")
		require.NoError(t, s.Submit(ctx, set, scheduler.W(h)))
		for range 3 {
			require.NoError(t, s.Submit(ctx, addK, scheduler.Redux(h), scheduler.WithArg(1)))
		}
		require.NoError(t, s.WaitAll(ctx))
		v, err := h.Fetch(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(103), *v.(*uint64), "round %d: the failed group's contributions were combined into the next group's", round)
	}
}

// TestFailuresAcrossPartitionsModel: random graphs of R, RW, W, Commute
// and Redux tasks, some of which fail, on vectors partitioned, tiles
// partitioned again and unpartitioned in between, on CPU workers and on
// simulated devices, checked against a sequential model: each task's
// outcome (ran, failed, canceled), Fetch's error, and the data. The
// model's version of a handle is bad when its last writer did not run;
// a task that reads a bad version is canceled, a task that only writes
// (W) starts a good one; a failed reader changes nothing; a group of
// Commute or Redux tasks is canceled, all or none, by the version
// before it, and its result is bad when one of them did not run (a
// reduction then combines none). Tiles take their parent's version, and
// a parent unpartitioned is bad when one of its tiles is.
// PZ_FP_SEEDS sets the number of graphs (60), PZ_FP_SEED the one graph to run.
func TestFailuresAcrossPartitionsModel(t *testing.T) {
	seeds := uint64(60)
	if v := os.Getenv("PZ_FP_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		seeds = uint64(n)
	}
	for seed := range seeds {
		if v := os.Getenv("PZ_FP_SEED"); v != "" && v != strconv.Itoa(int(seed)) {
			continue
		}
		failuresAcrossPartitions(t, seed)
	}
}

// fpArg is a task's argument in TestFailuresAcrossPartitionsModel.
type fpArg struct {
	k    int
	fail bool
}

// fpNode is a handle of the model: a vector or a tile, partitioned or a
// leaf.
type fpNode struct {
	h        *scheduler.Handle
	off, n   int // its elements in the vector
	children []*fpNode
	bad      bool
	// The group of Commute or Redux accesses in progress (0: none).
	gcat   int
	gbase  bool      // the version before the group was bad
	gnotOK bool      // one of its tasks did not run
	gacc   []float64 // a reduction's contributions, not yet combined
}

const (
	fpCommute = 1
	fpRedux   = 2
)

func failuresAcrossPartitions(t *testing.T, seed uint64) {
	const (
		nv = 4  // vectors
		vl = 16 // their length
	)
	r := rand.New(rand.NewPCG(seed, 140))
	fail := errors.New("task failed on purpose")
	args := func(c *scheduler.Call) fpArg { return c.Arg.(fpArg) }
	rw := &scheduler.Codelet{Name: "rw", CPU: func(c *scheduler.Call) error {
		a := args(c)
		if a.fail {
			return fail
		}
		v := scheduler.VectorOf[float64](c, 0)
		for i := range v {
			v[i] = pmod(v[i]*3 + float64(a.k))
		}
		return nil
	}}
	w := &scheduler.Codelet{Name: "w", CPU: func(c *scheduler.Call) error {
		a := args(c)
		if a.fail {
			return fail
		}
		v := scheduler.VectorOf[float64](c, 0)
		for i := range v {
			v[i] = float64(a.k + i)
		}
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error { // R src, then dst
		a := args(c)
		if a.fail {
			return fail
		}
		src := scheduler.VectorOf[float64](c, 0)
		d := scheduler.VectorOf[float64](c, 1)
		for i := range d {
			d[i] += pmod(src[0]) + float64(a.k)
		}
		return nil
	}}
	read := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error {
		if args(c).fail {
			return fail
		}
		return nil
	}}
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[float64](c, 0))
		return nil
	}}
	comb := &scheduler.Codelet{Name: "comb", CPU: func(c *scheduler.Call) error {
		d := scheduler.VectorOf[float64](c, 0)
		s := scheduler.VectorOf[float64](c, 1)
		for i := range d {
			d[i] += s[i]
		}
		return nil
	}}
	ctx := testCtx(t)
	opts := []scheduler.Option{scheduler.WithWorkers(2), scheduler.WithPolicy([]string{"eager", "lws", "dmda"}[seed%3]), scheduler.WithPerfModelDir("")}
	if seed%2 == 1 {
		opts = append(opts, scheduler.WithSimDevices(scheduler.SimDevice{Memory: 6 * vl * 8, Workers: 2}))
	}
	s := newSched(t, opts...)
	mem := make([][]float64, nv)
	model := make([][]float64, nv)
	roots := make([]*fpNode, nv)
	for i := range mem {
		mem[i] = make([]float64, vl)
		model[i] = make([]float64, vl)
		for j := range mem[i] {
			mem[i][j] = float64(r.IntN(1000))
			model[i][j] = mem[i][j]
		}
		h, err := s.RegisterVector(mem[i], scheduler.Named(fmt.Sprint("v", i)))
		require.NoError(t, err)
		require.NoError(t, h.SetReduction(zero, comb))
		roots[i] = &fpNode{h: h, n: vl}
	}
	leaves := func() (ls []*fpNode, vec []int) {
		var walk func(v int, n *fpNode)
		walk = func(v int, n *fpNode) {
			if n.children == nil {
				ls = append(ls, n)
				vec = append(vec, v)
				return
			}
			for _, c := range n.children {
				walk(v, c)
			}
		}
		for v, n := range roots {
			walk(v, n)
		}
		return ls, vec
	}
	// endGroup ends n's group of Commute or Redux accesses, combining a
	// reduction that can be.
	endGroup := func(v int, n *fpNode) {
		if n.gcat == fpRedux && !n.gbase && !n.gnotOK {
			for x := range n.n {
				model[v][n.off+x] += n.gacc[x]
			}
		}
		n.gcat, n.gacc = 0, nil
	}
	type want struct {
		task     *scheduler.Task
		what     string
		ok, fail bool // ran; else failed, else canceled
	}
	var wants []want
	// submit submits a task that the model runs unless canceled or
	// failing (a.fail), and returns whether it runs.
	submit := func(what string, cl *scheduler.Codelet, a fpArg, canceled bool, acc ...scheduler.Arg) bool {
		task := scheduler.NewTask(cl, append(acc, scheduler.WithArg(a))...)
		require.NoError(t, s.SubmitTask(ctx, task), "seed %d: %s", seed, what)
		ok := !canceled && !a.fail
		wants = append(wants, want{task, what, ok, !canceled && a.fail})
		return ok
	}
	check := func(step int) {
		// WaitAll combines the reductions in progress.
		ls, vec := leaves()
		for i, n := range ls {
			if n.gcat == fpRedux {
				endGroup(vec[i], n)
			}
		}
		err := s.WaitAll(ctx)
		nfail, nbad := 0, 0
		for _, w := range wants {
			err := w.task.Err()
			if !w.ok {
				nbad++
			}
			switch {
			case w.ok:
				require.NoError(t, err, "seed %d step %d: %s", seed, step, w.what)
			case w.fail:
				nfail++
				require.ErrorIs(t, err, fail, "seed %d step %d: %s should fail", seed, step, w.what)
				require.NotErrorIs(t, err, scheduler.ErrCanceled, "seed %d step %d: %s should fail", seed, step, w.what)
			default:
				require.ErrorIs(t, err, scheduler.ErrCanceled, "seed %d step %d: %s should be canceled", seed, step, w.what)
			}
		}
		if nfail > 0 {
			require.ErrorIs(t, err, fail, "seed %d step %d: WaitAll", seed, step)
		} else if nbad > 0 {
			require.ErrorIs(t, err, scheduler.ErrCanceled, "seed %d step %d: WaitAll", seed, step)
		} else {
			require.NoError(t, err, "seed %d step %d: WaitAll", seed, step)
		}
		wants = wants[:0]
	}
	for step := range 120 {
		ls, vec := leaves()
		li := r.IntN(len(ls))
		n, v := ls[li], vec[li]
		a := fpArg{k: r.IntN(100), fail: r.IntN(5) == 0}
		what := fmt.Sprintf("step %d %v", step, n.h)
		switch op := r.IntN(14); op {
		case 0, 1: // RW
			endGroup(v, n)
			ok := submit(what+" rw", rw, a, n.bad, scheduler.RW(n.h))
			if ok {
				for x := n.off; x < n.off+n.n; x++ {
					model[v][x] = pmod(model[v][x]*3 + float64(a.k))
				}
			}
			n.bad = !ok
		case 2: // W
			endGroup(v, n)
			submit(what+" w", w, a, false, scheduler.W(n.h))
			if !a.fail {
				for x := range n.n {
					model[v][n.off+x] = float64(a.k + x)
				}
			}
			n.bad = a.fail
		case 3, 4: // R of one leaf, RW of another
			src := ls[r.IntN(len(ls))]
			if src == n {
				continue
			}
			endGroup(v, n)
			for sv, x := range ls { // src's group ends too
				if x == src {
					endGroup(vec[sv], x)
				}
			}
			srcVal := 0.0
			for sv, x := range ls {
				if x == src {
					srcVal = model[vec[sv]][src.off]
				}
			}
			ok := submit(what+" add", add, a, n.bad || src.bad, scheduler.R(src.h), scheduler.RW(n.h))
			if ok {
				for x := n.off; x < n.off+n.n; x++ {
					model[v][x] += pmod(srcVal) + float64(a.k)
				}
			}
			n.bad = !ok
		case 5, 6, 7, 8: // Commute or Redux of n, reading another leaf
			src := ls[r.IntN(len(ls))]
			if src == n {
				continue
			}
			cat := fpCommute
			if op >= 7 {
				cat = fpRedux
			}
			if n.gcat != cat {
				endGroup(v, n)
				n.gcat, n.gbase, n.gnotOK = cat, n.bad, false
				n.gacc = make([]float64, n.n)
			}
			srcVal := 0.0
			for sv, x := range ls {
				if x == src {
					endGroup(vec[sv], x)
					srcVal = model[vec[sv]][src.off]
				}
			}
			m := scheduler.Commute(n.h)
			if cat == fpRedux {
				m = scheduler.Redux(n.h)
			}
			ok := submit(what+fmt.Sprintf(" group%d", cat), add, a, n.gbase || src.bad, scheduler.R(src.h), m)
			if ok {
				for x := range n.n {
					if cat == fpCommute {
						model[v][n.off+x] += pmod(srcVal) + float64(a.k)
					} else {
						n.gacc[x] += pmod(srcVal) + float64(a.k)
					}
				}
			}
			n.gnotOK = n.gnotOK || !ok
			n.bad = n.gbase || n.gnotOK
		case 9: // R that may fail
			endGroup(v, n)
			submit(what+" r", read, a, n.bad, scheduler.R(n.h))
		case 10: // Fetch: it combines a reduction; Commute tasks go on
			if n.gcat == fpRedux {
				endGroup(v, n)
			}
			got, err := n.h.Fetch(ctx)
			if n.bad {
				require.Error(t, err, "seed %d step %d: Fetch of %v, whose last writer did not run", seed, step, n.h)
				continue
			}
			require.NoError(t, err, "seed %d step %d: Fetch of %v", seed, step, n.h)
			require.Equal(t, model[v][n.off:n.off+n.n], got.([]float64), "seed %d step %d: Fetch of %v", seed, step, n.h)
		case 11, 12: // Partition a leaf in 2 or 4
			k := 2 + 2*r.IntN(2)
			if n.n < k {
				continue
			}
			endGroup(v, n)
			tl, err := n.h.Partition(scheduler.Blocks(n.n/k, 1))
			require.NoError(t, err)
			for i, row := range tl {
				n.children = append(n.children, &fpNode{h: row[0], off: n.off + i*(n.n/k), n: n.n / k, bad: n.bad})
			}
		case 13: // Unpartition a parent of leaves only
			var p *fpNode
			var find func(x *fpNode)
			find = func(x *fpNode) {
				if x.children == nil || p != nil {
					return
				}
				all := true
				for _, c := range x.children {
					all = all && c.children == nil
				}
				if all && r.IntN(2) == 0 {
					p = x
					return
				}
				for _, c := range x.children {
					find(c)
				}
			}
			find(roots[v])
			if p == nil {
				continue
			}
			p.bad = false
			for _, c := range p.children {
				endGroup(v, c)
				p.bad = p.bad || c.bad
			}
			require.NoError(t, p.h.Unpartition())
			p.children = nil
		}
		if r.IntN(10) == 0 {
			check(step)
		}
	}
	check(-1)
	for v, root := range roots {
		var unp func(x *fpNode)
		unp = func(x *fpNode) {
			if x.children == nil {
				return
			}
			for _, c := range x.children {
				unp(c)
				endGroup(v, c)
			}
			require.NoError(t, x.h.Unpartition())
			x.children = nil
		}
		unp(root)
		endGroup(v, root)
		got, err := root.h.Unregister(ctx)
		require.NoError(t, err)
		require.Equal(t, model[v], got.([]float64), "seed %d: v%d at the end", seed, v)
	}
}

// TestWAfterCanceledGather: after Unpartition of tiles one of which
// was last written by a failed task, the gather is canceled; a W on the
// whole then starts anew, and WaitAll's write-back must not copy the
// tiles' device replicas (one written on the device, one the failed
// task's) over it.
func TestWAfterCanceledGather(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 1 << 12}))
	var dev, cpu []int
	for _, w := range s.Workers() {
		if w.Kind != scheduler.CPUWorker {
			dev = append(dev, w.ID)
		} else {
			cpu = append(cpu, w.ID)
		}
	}
	dc, err := s.NewContext("dev", scheduler.ContextWorkers(dev...))
	require.NoError(t, err)
	cc, err := s.NewContext("cpu", scheduler.ContextWorkers(cpu...))
	require.NoError(t, err)
	v := make([]float64, 8)
	h, err := s.RegisterVector(v)
	require.NoError(t, err)
	tl, err := h.Partition(scheduler.Blocks(4, 1))
	require.NoError(t, err)
	set := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			x[i] = float64(c.Arg.(int))
		}
		return nil
	}}
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("boom") }}
	require.NoError(t, s.Submit(scheduler.Within(ctx, dc), set, scheduler.W(tl[0][0]), scheduler.WithArg(7)))
	require.NoError(t, s.Submit(scheduler.Within(ctx, dc), boom, scheduler.RW(tl[1][0])))
	require.NoError(t, h.Unpartition())
	require.NoError(t, s.Submit(scheduler.Within(ctx, cc), set, scheduler.W(h), scheduler.WithArg(1)))
	require.ErrorContains(t, s.WaitAll(ctx), "boom")
	require.NoError(t, s.WaitAll(ctx))
	got, err := h.Unregister(ctx)
	require.NoError(t, err)
	require.Equal(t, []float64{1, 1, 1, 1, 1, 1, 1, 1}, got)
}

// TestReadersAfterFailedDetachedReaderAcrossPartition: a detached reader
// (a transfer) that fails cancels the writers after it, not the readers,
// also when the handle is partitioned after it: a tile's readers ran
// before as the whole's do, and its writer is canceled as the whole's.
func TestReadersAfterFailedDetachedReaderAcrossPartition(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	h, err := s.RegisterVector(make([]float64, 8), scheduler.Named("v"))
	require.NoError(t, err)
	send := &scheduler.Codelet{Name: "send", Detached: func(_ *scheduler.Task, done func(error)) { done(errors.New("send failed")) }}
	read := &scheduler.Codelet{Name: "read", CPU: func(*scheduler.Call) error { return nil }}
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0]++
		return nil
	}}
	submit := func(cl *scheduler.Codelet, a scheduler.Arg) *scheduler.Task {
		task := scheduler.NewTask(cl, a)
		require.NoError(t, s.SubmitTask(ctx, task))
		return task
	}
	submit(send, scheduler.R(h))
	whole := submit(read, scheduler.R(h))
	tl, err := h.Partition(scheduler.Blocks(4, 1))
	require.NoError(t, err)
	tile := submit(read, scheduler.R(tl[0][0]))
	joined := submit(read, scheduler.R(tl[0][0]))
	writer := submit(inc, scheduler.RW(tl[1][0]))
	writerAfterReaders := submit(inc, scheduler.RW(tl[0][0]))
	require.ErrorContains(t, s.WaitAll(ctx), "send failed")
	require.NoError(t, whole.Err(), "the whole's reader")
	require.NoError(t, tile.Err(), "a tile's first reader")
	require.NoError(t, joined.Err(), "a tile's second reader")
	require.ErrorIs(t, writer.Err(), scheduler.ErrCanceled, "a tile's writer")
	require.ErrorIs(t, writerAfterReaders.Err(), scheduler.ErrCanceled, "a tile's writer after its readers")
}
