package scheduler_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// view is a row-major block of float64s, as a task or the sequential
// reference sees it.
type view struct {
	data           []float64
	rows, cols, ld int
}

func (v view) at(i, j int) *float64 { return &v.data[i*v.ld+j] }

// mean is the sum of v's elements modulo 2^20: integers, so the sum is
// exact in any order.
func (v view) sum() float64 {
	s := 0.0
	for i := 0; i < v.rows; i++ {
		for j := 0; j < v.cols; j++ {
			s += *v.at(i, j)
		}
	}
	return modp(s)
}

func modp(x float64) float64 {
	const p = 1 << 20
	x -= float64(int64(x/p)) * p
	if x < 0 {
		x += p
	}
	return x
}

// One random operation of the coherence test: it writes out (in mode
// kind) from the sums of ins, and, with scratch, through a scratch
// buffer. All arithmetic is on integers below 2^53, so results do not
// depend on the order of commuting updates and reductions.
type cohOp struct {
	idx     int
	kind    string // "W", "RW", "commute", "redux"
	out     int    // object index
	ins     []int
	scratch int // object index of a scratch buffer's shape, or -1
}

func applyOp(op cohOp, out view, ins []view, scratch *view) {
	in := float64(op.idx % 97)
	for _, v := range ins {
		in = modp(in + v.sum())
	}
	if scratch != nil {
		for i := 0; i < scratch.rows; i++ {
			for j := 0; j < scratch.cols; j++ {
				*scratch.at(i, j) = float64(op.idx + i)
			}
		}
		in = modp(in + scratch.sum())
	}
	for i := 0; i < out.rows; i++ {
		for j := 0; j < out.cols; j++ {
			p := out.at(i, j)
			switch op.kind {
			case "W":
				*p = modp(in + float64(i*out.cols+j))
			case "RW":
				*p = modp(3**p + in + float64(j))
			case "commute", "redux":
				*p = modp(*p + in + float64(i))
			}
		}
	}
}

func callView(c *scheduler.Call, i int) view {
	m := scheduler.MatrixOf[float64](c, i)
	return view{m.Data, m.Rows, m.Cols, m.Stride}
}

// TestCoherenceRandomGraphs runs random task graphs - every access
// mode, vectors and a matrix partitioned into tiles and gathered back -
// on CPU workers and simulated devices with too little memory for all
// the data, under several policies, and checks the results bit for bit
// against a sequential run of the same operations.
func TestCoherenceRandomGraphs(t *testing.T) {
	seeds := 12
	if v := os.Getenv("PZ_COHERENCE_SEEDS"); v != "" {
		seeds, _ = strconv.Atoi(v)
	}
	if testing.Short() {
		seeds = 4
	}
	policies := []string{"random", "eager", "lws", "dmda", "prefetching"}
	for seed := 1; seed <= seeds; seed++ {
		pol := policies[seed%len(policies)]
		t.Run(fmt.Sprintf("seed%d-%s", seed, pol), func(t *testing.T) {
			runCoherence(t, uint64(seed), pol)
		})
	}
}

func runCoherence(t *testing.T, seed uint64, policy string) {
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := testCtx(t)
	const n = 64 // elements per vector, and of the 8x8 matrix
	// Memory for about five vectors per device: eviction and write-back.
	devs := []scheduler.SimDevice{{Memory: 5 * n * 8, Latency: time.Microsecond, Bandwidth: -1}}
	if seed%2 == 0 {
		devs = append(devs, scheduler.SimDevice{Memory: 6 * n * 8, Latency: 2 * time.Microsecond, Bandwidth: 1e9})
	}
	pol := scheduler.WithPolicy(policy)
	if policy == "prefetching" {
		pol = scheduler.WithPolicyFunc(func(cfg scheduler.PolicyConfig) scheduler.Policy {
			return &prefetching{cfg: cfg, rng: rand.New(rand.NewPCG(seed, 9)), q: map[int][]*scheduler.Task{}}
		})
	}
	s := newSched(t, scheduler.WithWorkers(2), scheduler.WithSimDevices(devs...), pol)

	// Objects: 0..5 vectors, 6 the reduction vector, 7 the matrix, 8..11
	// its 2x2 tiles of 4x4 while partitioned.
	const nvec, red, mat = 6, 6, 7
	ref := make([][]float64, 8)
	data := make([][]float64, 8)
	for i := range ref {
		ref[i] = make([]float64, n)
		data[i] = make([]float64, n)
		for j := range ref[i] {
			ref[i][j] = float64(rng.IntN(1000))
			data[i][j] = ref[i][j]
		}
	}
	hs := make([]*scheduler.Handle, 12)
	var h *scheduler.Handle
	var err error
	for i := 0; i < mat; i++ {
		h, err = s.RegisterVector(data[i], scheduler.Named(fmt.Sprintf("v%d", i)))
		require.NoError(t, err)
		hs[i] = h
	}
	h, err = s.RegisterMatrix(data[mat], 8, 8, scheduler.Named("m"))
	require.NoError(t, err)
	hs[mat] = h
	refView := func(o int) view {
		if o < 8 {
			if o == mat {
				return view{ref[mat], 8, 8, 8}
			}
			return view{ref[o], n, 1, 1}
		}
		k := o - 8
		return view{ref[mat][(k/2)*4*8+(k%2)*4:], 4, 4, 8}
	}
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[float64](c, 0))
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		dst, src := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		for i := range dst {
			dst[i] = modp(dst[i] + src[i])
		}
		return nil
	}}
	require.NoError(t, hs[red].SetReduction(zero, add))

	workers := s.Workers()
	var reduxOnDevices atomic.Int64
	kernel := &scheduler.Codelet{Name: "op", CPU: func(c *scheduler.Call) error {
		op := c.Arg.(cohOp)
		if op.kind == "redux" && workers[c.Worker].Kind == scheduler.SimWorker {
			reduxOnDevices.Add(1)
		}
		var ins []view
		for i := range op.ins {
			ins = append(ins, callView(c, 1+i))
		}
		var sc *view
		if op.scratch >= 0 {
			v := callView(c, c.Len()-1)
			sc = &v
		}
		applyOp(op, callView(c, 0), ins, sc)
		return nil
	}}
	// A quarter of the tasks go to a context of the devices' workers
	// alone, so every policy sends work there.
	var devIDs []int
	for _, w := range s.Workers() {
		if w.Kind == scheduler.SimWorker {
			devIDs = append(devIDs, w.ID)
		}
	}
	onDevices, err := s.NewContext("devices", scheduler.ContextWorkers(devIDs...))
	require.NoError(t, err)
	idx := 0
	phase := func(objs []int, ntasks int) {
		for range ntasks {
			idx++
			op := cohOp{idx: idx, out: objs[rng.IntN(len(objs))], scratch: -1}
			switch r := rng.IntN(10); {
			case op.out == red && r < 5:
				op.kind = "redux"
			case r < 2:
				op.kind = "W"
			case r < 4:
				op.kind = "commute"
			default:
				op.kind = "RW"
			}
			for range rng.IntN(3) {
				in := objs[rng.IntN(len(objs))]
				if in != op.out && !contains(op.ins, in) {
					op.ins = append(op.ins, in)
				}
			}
			if sc := rng.IntN(nvec); rng.IntN(4) == 0 && sc != op.out && !contains(op.ins, sc) {
				op.scratch = sc
			}
			var ins []view
			for _, o := range op.ins {
				ins = append(ins, refView(o))
			}
			var sc *view
			if op.scratch >= 0 {
				sc = &view{make([]float64, n), n, 1, 1}
			}
			applyOp(op, refView(op.out), ins, sc)

			mode := map[string]scheduler.Arg{
				"W": scheduler.W(hs[op.out]), "RW": scheduler.RW(hs[op.out]),
				"commute": scheduler.Commute(hs[op.out]), "redux": scheduler.Redux(hs[op.out]),
			}[op.kind]
			args := []scheduler.Arg{mode, scheduler.WithArg(op)}
			for _, o := range op.ins {
				args = append(args, scheduler.R(hs[o]))
			}
			if op.scratch >= 0 {
				args = append(args, scheduler.Scratch(hs[op.scratch]))
			}
			if rng.IntN(4) == 0 { // Redux included: private copies on the devices
				args = append(args, scheduler.InContext(onDevices))
			}
			require.NoError(t, s.Submit(ctx, kernel, args...))
		}
	}
	whole := []int{0, 1, 2, 3, 4, 5, red, mat}
	phase(whole, 150)
	tiles, err := hs[mat].Partition(scheduler.Blocks(4, 4))
	require.NoError(t, err)
	for k := range 4 {
		hs[8+k] = tiles[k/2][k%2]
	}
	phase([]int{0, 1, 2, red, 8, 9, 10, 11}, 150)
	require.NoError(t, hs[mat].Unpartition())
	phase(whole, 150)
	require.NoError(t, s.WaitAll(ctx))

	for o := 0; o < 8; o++ {
		require.Equal(t, ref[o], data[o], "object %d after WaitAll (seed %d)", o, seed)
	}
	var simTasks int64
	for _, st := range s.Stats() {
		if st.Kind == scheduler.SimWorker {
			simTasks += st.Tasks
		}
	}
	require.Positive(t, simTasks, "no task ran on a simulated device")
	require.Positive(t, reduxOnDevices.Load(), "no Redux access ran on a simulated device (a private copy there)")
	var copies, prefetches int64
	for _, x := range s.Transfers() {
		copies += x.Count
		prefetches += x.Prefetches
	}
	require.Positive(t, copies, "no copy between memory nodes")
	if policy == "prefetching" {
		require.Positive(t, prefetches, "no prefetch")
	}
}

func contains(s []int, x int) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// simOnly returns a context whose only worker is the scheduler's first
// simulated device's.
func simOnly(t *testing.T, s *scheduler.Scheduler) *scheduler.Context {
	t.Helper()
	for _, w := range s.Workers() {
		if w.Kind == scheduler.SimWorker {
			c, err := s.NewContext("sim", scheduler.ContextWorkers(w.ID))
			require.NoError(t, err)
			return c
		}
	}
	t.Fatal("no simulated device")
	return nil
}

// TestEvictionWritesBack runs, on a device with room for three of eight
// vectors, rounds of updates of every vector: each round evicts the
// others' modified replicas, which must be written back, not lost.
func TestEvictionWritesBack(t *testing.T) {
	ctx := testCtx(t)
	const n, nv, rounds = 128, 8, 4
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 3 * n * 8, Bandwidth: -1}))
	c := simOnly(t, s)
	vs := make([][]float64, nv)
	hs := make([]*scheduler.Handle, nv)
	for i := range vs {
		vs[i] = make([]float64, n)
		h, err := s.RegisterVector(vs[i], scheduler.Named(fmt.Sprintf("v%d", i)))
		require.NoError(t, err)
		hs[i] = h
	}
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		v := scheduler.VectorOf[float64](c, 0)
		for i := range v {
			v[i] += float64(i + 1)
		}
		return nil
	}}
	for range rounds {
		for _, h := range hs {
			require.NoError(t, s.Submit(ctx, inc, scheduler.RW(h), scheduler.InContext(c)))
		}
	}
	require.NoError(t, s.WaitAll(ctx))
	for k, v := range vs {
		for i := range v {
			require.Equal(t, float64(rounds*(i+1)), v[i], "vector %d element %d", k, i)
		}
	}
	var evictions, writeBacks int64
	for _, x := range s.Transfers() {
		evictions += x.Evictions
		writeBacks += x.WriteBacks
	}
	require.Positive(t, evictions)
	require.Positive(t, writeBacks)
}

// TestDeviceMemoryTooSmall: data larger than a device is an error naming
// the handle and the sizes when only the device may run the task, and
// the task runs on a CPU when one may.
func TestDeviceMemoryTooSmall(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 1024}))
	big := make([]float64, 1000)
	h, err := s.RegisterVector(big, scheduler.Named("big"))
	require.NoError(t, err)
	touch := &scheduler.Codelet{Name: "touch", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0] = 1
		return nil
	}}
	require.NoError(t, s.Submit(ctx, touch, scheduler.RW(h), scheduler.InContext(simOnly(t, s))))
	err = s.WaitAll(ctx)
	require.ErrorIs(t, err, scheduler.ErrDeviceMemory)
	require.Contains(t, err.Error(), `"big"`)
	require.Contains(t, err.Error(), "8000 bytes")
	require.Contains(t, err.Error(), "sim0, which has 1024")

	require.Equal(t, 0.0, big[0], "the failed task changed nothing")

	// Where a CPU may run it, the task goes there, even from the device
	// it was first given to.
	big2 := make([]float64, 1000)
	h2, err := s.RegisterVector(big2, scheduler.Named("big2"))
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, touch, scheduler.RW(h2)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, 1.0, big2[0])
}

// TestTilesOnDevice partitions a matrix whose newest version is on the
// device, updates the tiles there and on a CPU, gathers it back and
// reads it whole, with a leading dimension wider than the matrix.
func TestTilesOnDevice(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Bandwidth: -1}))
	sim := simOnly(t, s)
	const rows, cols, ld = 6, 6, 8
	a := make([]float64, rows*ld)
	for i := range a {
		a[i] = -1 // the gaps must stay untouched
	}
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			a[i*ld+j] = 0
		}
	}
	h, err := s.RegisterMatrix(a, rows, cols, scheduler.LD(ld), scheduler.Named("a"))
	require.NoError(t, err)
	addc := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		m := callView(c, 0)
		d := c.Arg.(float64)
		for i := 0; i < m.rows; i++ {
			for j := 0; j < m.cols; j++ {
				*m.at(i, j) += d
			}
		}
		return nil
	}}
	require.NoError(t, s.Submit(ctx, addc, scheduler.RW(h), scheduler.WithArg(1.0), scheduler.InContext(sim)))
	tiles, err := h.Partition(scheduler.Blocks(4, 4))
	require.NoError(t, err)
	for i, row := range tiles {
		for j, tl := range row {
			args := []scheduler.Arg{scheduler.RW(tl), scheduler.WithArg(float64(10 * (i*2 + j + 1)))}
			if (i+j)%2 == 0 {
				args = append(args, scheduler.InContext(sim))
			}
			require.NoError(t, s.Submit(ctx, addc, args...))
		}
	}
	require.NoError(t, h.Unpartition())
	require.NoError(t, s.Submit(ctx, addc, scheduler.RW(h), scheduler.WithArg(100.0), scheduler.InContext(sim)))
	_, err = h.Unregister(ctx)
	require.NoError(t, err)
	for i := 0; i < rows; i++ {
		for j := 0; j < ld; j++ {
			want := -1.0
			if j < cols {
				want = 101 + float64(10*((i/4)*2+j/4+1))
			}
			require.Equal(t, want, a[i*ld+j], "element (%d,%d)", i, j)
		}
	}
}

// alwaysTo is a policy that gives every task to one worker, prefetching
// its data there first, as a data-aware policy does.
type alwaysTo struct {
	cfg scheduler.PolicyConfig
	w   int
	q   chan *scheduler.Task
}

func (p *alwaysTo) Name() string                           { return "always" }
func (p *alwaysTo) AddWorkers(...scheduler.WorkerInfo)     {}
func (p *alwaysTo) RemoveWorkers(...int) []*scheduler.Task { return nil }
func (p *alwaysTo) Push(t *scheduler.Task, _ int) int {
	p.cfg.Prefetch(t, p.w)
	p.q <- t
	return p.w
}

func (p *alwaysTo) Pop(w int) *scheduler.Task {
	if w != p.w {
		return nil
	}
	select {
	case t := <-p.q:
		return t
	default:
		return nil
	}
}

// TestPrefetchInTrace: a policy that places tasks ahead of time starts
// their inputs moving (PolicyConfig.Prefetch); the copies show as
// prefetches in the statistics, the Chrome trace and the Gantt chart,
// on a track of the link's own.
func TestPrefetchInTrace(t *testing.T) {
	ctx := testCtx(t)
	var p *alwaysTo
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithStats(true),
		scheduler.WithSimDevices(scheduler.SimDevice{Bandwidth: 1e9, Latency: 50 * time.Microsecond}),
		scheduler.WithPolicyFunc(func(cfg scheduler.PolicyConfig) scheduler.Policy {
			p = &alwaysTo{cfg: cfg, w: 1, q: make(chan *scheduler.Task, 100)}
			return p
		}))
	require.Equal(t, scheduler.SimWorker, s.Workers()[1].Kind)
	const nv = 8
	var hs []*scheduler.Handle
	for i := range nv {
		h, err := s.RegisterVector(make([]float64, 4096), scheduler.Named(fmt.Sprintf("in%d", i)))
		require.NoError(t, err)
		hs = append(hs, h)
	}
	out := make([]float64, nv)
	ho, err := s.RegisterVector(out, scheduler.Named("out"))
	require.NoError(t, err)
	sum := &scheduler.Codelet{Name: "sum", CPU: func(c *scheduler.Call) error {
		v := scheduler.VectorOf[float64](c, 0)
		o := scheduler.VectorOf[float64](c, 1)
		o[c.Arg.(int)] = float64(len(v))
		return nil
	}}
	for i, h := range hs {
		require.NoError(t, s.Submit(ctx, sum, scheduler.R(h), scheduler.Commute(ho), scheduler.WithArg(i)))
	}
	require.NoError(t, s.WaitAll(ctx))
	for i := range out {
		require.Equal(t, 4096.0, out[i])
	}
	var pre int64
	for _, x := range s.Transfers() {
		if x.From == scheduler.RAM && x.To == 1 {
			pre += x.Prefetches
		}
	}
	require.Equal(t, int64(nv), pre, "each input prefetched once, the commuting output not")

	var tr bytes.Buffer
	require.NoError(t, s.WriteTrace(&tr))
	require.Equal(t, nv, strings.Count(tr.String(), `"name":"prefetch"`))
	require.Contains(t, tr.String(), `"ram→sim0"`)
	var svg bytes.Buffer
	require.NoError(t, s.WriteGantt(&svg))
	require.Contains(t, svg.String(), "ram→sim0")
	require.Contains(t, svg.String(), "sim0→ram")
	// The device's worker is named with its device, as the tracks are.
	dev := len(s.Workers()) - 1
	require.Equal(t, fmt.Sprintf("sim0 (worker %d)", dev), s.WorkerName(dev))
	require.Equal(t, "cpu0", s.WorkerName(0))
	require.Contains(t, svg.String(), fmt.Sprintf(">sim0 (worker %d)<", dev))
	require.Contains(t, tr.String(), fmt.Sprintf(`"sim0 (worker %d)"`, dev))
	// TracedCopies lists the copies the chart draws.
	copies := s.TracedCopies()
	prefetches := 0
	for _, c := range copies {
		require.Contains(t, []string{"ram→sim0", "sim0→ram"}, c.Link)
		require.LessOrEqual(t, c.Start, c.End)
		if c.Kind == "prefetch" {
			prefetches++
			require.Equal(t, int64(4096*8), c.Bytes)
		}
	}
	require.Equal(t, nv, prefetches)
}

// TestSimDevicesOptions covers the options' checks and the environment.
func TestSimDevicesOptions(t *testing.T) {
	ctx := testCtx(t)
	_, err := scheduler.New(ctx, scheduler.WithSimDevices(scheduler.SimDevice{Memory: -1}))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	env := func(m map[string]string) scheduler.Option {
		return scheduler.WithGetenv(func(k string) string { return m[k] })
	}
	// Too small to measure its link: refused as an option, naming the
	// least size (New failed measuring it, "out of device memory").
	for _, opt := range []scheduler.Option{
		scheduler.WithSimDevices(scheduler.SimDevice{Memory: 8}),
		env(map[string]string{"PZ_NSIM": "1", "PZ_SIM_MEMORY": "15"}),
	} {
		_, err = scheduler.New(ctx, scheduler.WithPerfModelDir(""), opt)
		require.ErrorIs(t, err, scheduler.ErrBadOption)
		require.ErrorContains(t, err, "it needs at least 16")
	}
	_, err = scheduler.New(ctx, env(map[string]string{"PZ_NSIM": "x"}))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	require.ErrorContains(t, err, "PZ_NSIM")
	_, err = scheduler.New(ctx, env(map[string]string{"PZ_NSIM": "1", "PZ_SIM_MEMORY": "lots"}))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	require.ErrorContains(t, err, "PZ_SIM_MEMORY")

	s := newSched(t, scheduler.WithWorkers(1), env(map[string]string{"PZ_NSIM": "2", "PZ_SIM_MEMORY": "1MiB"}))
	require.Equal(t, []string{"ram", "sim0", "sim1"}, s.MemoryNodes())
	ws := s.Workers()
	require.Len(t, ws, 3)
	require.Equal(t, scheduler.MemoryNode(2), ws[2].Node)
	require.Equal(t, "sim", ws[2].Kind.String())

	for in, want := range map[string]int64{"64MiB": 64 << 20, "1.5G": 1.5e9, "4096": 4096, "2 KiB": 2048} {
		got, err := scheduler.ParseBytes(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err = scheduler.ParseBytes("-3MiB")
	require.Error(t, err)
	// Past int64 and fractions of a byte are errors (the first wrapped
	// to a negative size with a nil error).
	_, err = scheduler.ParseBytes("99999999999999GiB")
	require.ErrorContains(t, err, `"99999999999999GiB" is past the largest size`)
	_, err = scheduler.ParseBytes("0.5B")
	require.ErrorContains(t, err, `"0.5B" is not a whole number of bytes`)
	got, err := scheduler.ParseBytes("0.5KiB")
	require.NoError(t, err)
	require.Equal(t, int64(512), got)
}

// TestValueHandlesStayOnCPU: a task with a value handle (or a Redux
// access) cannot run on a device; a context with only a device's worker
// keeps it, and the scheduler's CPU workers run it in the global one.
func TestValueHandlesStayOnCPU(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{}))
	x := new(int)
	h, err := s.RegisterValue(x)
	require.NoError(t, err)
	where := make(chan scheduler.WorkerKind, 10)
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*int](c, 0)++
		where <- s.Workers()[c.Worker].Kind
		return nil
	}}
	for range 10 {
		require.NoError(t, s.Submit(ctx, inc, scheduler.RW(h)))
	}
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, 10, *x)
	close(where)
	for k := range where {
		require.Equal(t, scheduler.CPUWorker, k)
	}
	var tk scheduler.Task
	tk.Codelet = inc
	tk.Access = []scheduler.Access{{Handle: h, Mode: scheduler.ModeRW}}
	require.False(t, tk.CanRunOn(scheduler.SimWorker))
	require.True(t, tk.CanRunOn(scheduler.CPUWorker))
}

// TestDevicePartitionContexts splits one device's two workers (two
// streams of a GPU) between two scheduling contexts: both compute from
// the same memory node, each runs its context's tasks, and the data they
// share is copied to the device once.
func TestDevicePartitionContexts(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Workers: 2, Bandwidth: -1}))
	ws := s.Workers()
	require.Len(t, ws, 3)
	require.Equal(t, ws[1].Node, ws[2].Node, "one memory node for the device's workers")
	a, err := s.NewContext("a", scheduler.ContextWorkers(1))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(2))
	require.NoError(t, err)

	in := make([]float64, 256)
	for i := range in {
		in[i] = float64(i)
	}
	hin, err := s.RegisterVector(in, scheduler.Named("in"))
	require.NoError(t, err)
	outs := [2][]float64{make([]float64, 256), make([]float64, 256)}
	var ho [2]*scheduler.Handle
	for k := range ho {
		ho[k], err = s.RegisterVector(outs[k])
		require.NoError(t, err)
	}
	ran := make(chan int, 64)
	axpy := &scheduler.Codelet{Name: "axpy", CPU: func(c *scheduler.Call) error {
		x, y := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		for i := range y {
			y[i] += x[i]
		}
		ran <- c.Worker
		return nil
	}}
	for range 10 {
		for k, cx := range []*scheduler.Context{a, b} {
			require.NoError(t, s.Submit(ctx, axpy, scheduler.R(hin), scheduler.RW(ho[k]), scheduler.InContext(cx)))
		}
	}
	require.NoError(t, s.WaitAll(ctx))
	close(ran)
	count := map[int]int{}
	for w := range ran {
		count[w]++
	}
	require.Equal(t, map[int]int{1: 10, 2: 10}, count)
	for k := range outs {
		for i, v := range outs[k] {
			require.Equal(t, float64(10*i), v)
		}
	}
	for _, x := range s.Transfers() {
		if x.From == scheduler.RAM && x.To == 1 {
			require.Equal(t, int64(3), x.Count, "in once, each output once")
		}
	}
}

// prefetching places each task on a random worker that may run it and
// starts its data moving there at once, as dmda does with calibrated
// models: it drives prefetch, and the eviction that must spare what
// queued tasks want, through random graphs.
type prefetching struct {
	cfg scheduler.PolicyConfig
	mu  sync.Mutex
	rng *rand.Rand
	ws  []scheduler.WorkerInfo
	q   map[int][]*scheduler.Task
}

func (p *prefetching) Name() string { return "prefetching" }

func (p *prefetching) AddWorkers(ws ...scheduler.WorkerInfo) {
	p.mu.Lock()
	p.ws = append(p.ws, ws...)
	orphans := p.q[-1]
	delete(p.q, -1)
	p.mu.Unlock()
	for _, t := range orphans { // pushed before any worker could run them
		p.Push(t, -1)
	}
}

func (p *prefetching) RemoveWorkers(ids ...int) []*scheduler.Task {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*scheduler.Task
	for _, id := range ids {
		out = append(out, p.q[id]...)
		delete(p.q, id)
		for i, w := range p.ws {
			if w.ID == id {
				p.ws = append(p.ws[:i], p.ws[i+1:]...)
				break
			}
		}
	}
	return out
}

func (p *prefetching) Push(t *scheduler.Task, _ int) int {
	p.mu.Lock()
	var can []int
	for _, w := range p.ws {
		if t.CanRunOn(w.Kind) {
			can = append(can, w.ID)
		}
	}
	if len(can) == 0 {
		p.q[-1] = append(p.q[-1], t) // until a worker that may run it comes
		p.mu.Unlock()
		return scheduler.NoWorker
	}
	w := can[p.rng.IntN(len(can))]
	p.mu.Unlock()
	p.cfg.Prefetch(t, w) // before queuing: once queued, t may run and be gone
	p.mu.Lock()
	p.q[w] = append(p.q[w], t)
	p.mu.Unlock()
	return w
}

func (p *prefetching) Pop(w int) *scheduler.Task {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.q[w]; len(q) > 0 {
		t := q[0]
		p.q[w] = q[1:]
		return t
	}
	return nil
}

// TestBusCalibration: the link of a device is measured when the
// scheduler starts - never faster than the simulated link allows - and
// saved: a second scheduler with the same model directory loads it
// instead of measuring again.
func TestBusCalibration(t *testing.T) {
	dir := t.TempDir()
	dev := scheduler.SimDevice{Bandwidth: 2e9, Latency: 200 * time.Microsecond}
	s1 := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(dev), scheduler.WithPerfModelDir(dir))
	links := s1.Bus()
	require.Len(t, links, 2)
	require.Equal(t, scheduler.RAM, links[0].From)
	require.Equal(t, scheduler.MemoryNode(1), links[0].To)
	for _, l := range links {
		require.GreaterOrEqual(t, l.Latency, 200*time.Microsecond, "%+v", l)
		require.Positive(t, l.Bandwidth)
		require.LessOrEqual(t, l.Bandwidth, 2.2e9, "%+v: faster than the link", l)
	}
	files, err := filepath.Glob(filepath.Join(dir, "bus.sim-*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)

	s2 := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(dev), scheduler.WithPerfModelDir(dir))
	require.Equal(t, links, s2.Bus(), "loaded, not measured again")

	// Another link is another device: measured anew.
	other := scheduler.SimDevice{Bandwidth: 1e9, Latency: 200 * time.Microsecond}
	newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(other), scheduler.WithPerfModelDir(dir))
	files, err = filepath.Glob(filepath.Join(dir, "bus.sim-*.json"))
	require.NoError(t, err)
	require.Len(t, files, 2)
}

// TestDetachedSeesRAM: a detached task (what scheduler/dist sends and
// receives with) works on the registered memory: it reads the newest
// version even when a device wrote it, and what it writes reaches the
// device's next task.
func TestDetachedSeesRAM(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Bandwidth: -1}))
	dev := simOnly(t, s)
	v := make([]float64, 64)
	h, err := s.RegisterVector(v, scheduler.Named("v"))
	require.NoError(t, err)
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		for i, x := range scheduler.VectorOf[float64](c, 0) {
			scheduler.VectorOf[float64](c, 0)[i] = x + c.Arg.(float64)
		}
		return nil
	}}
	seen := make(chan float64, 1)
	peek := &scheduler.Codelet{Name: "peek", Detached: func(_ *scheduler.Task, done func(error)) {
		seen <- v[0] // the registered memory, as dist's sends use it
		done(nil)
	}}
	poke := &scheduler.Codelet{Name: "poke", Detached: func(_ *scheduler.Task, done func(error)) {
		go func() { // as a receive completes, later, elsewhere
			for i := range v {
				v[i] = 1000
			}
			done(nil)
		}()
	}}
	require.NoError(t, s.Submit(ctx, add, scheduler.RW(h), scheduler.WithArg(5.0), scheduler.InContext(dev)))
	require.NoError(t, s.Submit(ctx, peek, scheduler.R(h)))
	require.NoError(t, s.Submit(ctx, poke, scheduler.W(h)))
	require.NoError(t, s.Submit(ctx, add, scheduler.RW(h), scheduler.WithArg(1.0), scheduler.InContext(dev)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, 5.0, <-seen)
	require.Equal(t, 1001.0, v[63])
}

// TestTeamsStayOnCPUs: a parallel task's team is made of CPU workers
// only, never a device's (whose memory node differs); a team larger than
// the CPU workers is refused at Submit.
func TestTeamsStayOnCPUs(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2), scheduler.WithSimDevices(scheduler.SimDevice{}))
	v := make([]float64, 2)
	h, err := s.RegisterVector(v)
	require.NoError(t, err)
	kinds := make(chan scheduler.WorkerKind, 100)
	spmd := &scheduler.Codelet{Name: "spmd", Parallel: scheduler.SPMD, CPU: func(c *scheduler.Call) error {
		kinds <- s.Workers()[c.Worker].Kind
		scheduler.VectorOf[float64](c, 0)[c.Rank]++
		return nil
	}}
	for range 20 {
		require.NoError(t, s.Submit(ctx, spmd, scheduler.RW(h), scheduler.WithTeam(2)))
	}
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, []float64{20, 20}, v)
	close(kinds)
	for k := range kinds {
		require.Equal(t, scheduler.CPUWorker, k)
	}
	err = s.Submit(ctx, spmd, scheduler.RW(h), scheduler.WithTeam(3))
	require.ErrorIs(t, err, scheduler.ErrBadTeam)
	require.ErrorContains(t, err, "2 CPU workers")
}
