package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// The data layer under review: random task graphs on CPU workers and
// two simulated devices with room for only a few handles, with host
// calls (Fetch, Data and a write through it, Unregister and
// re-registration) and failing tasks in the middle, checked against a
// sequential model of the same operations in submission order: what each
// task does (runs, fails, is canceled) and the data the host sees.

// A dlOp is one task of the graph. Its output is out (mode kind) and it
// reads ins; fail makes it return an error before it writes anything.
type dlOp struct {
	idx  int
	kind string // "R", "W", "RW", "commute", "redux"
	out  int
	ins  []int
	fail bool
	// where: 0 anywhere, 1 CPU workers only, 2 device workers only.
	where int
}

// dlIn is what op computes from its inputs: integers modulo 2^20, so
// that commuting updates and reductions give the same result in any
// order.
func dlIn(op dlOp, ins [][]float64) float64 {
	in := float64(op.idx % 97)
	for _, v := range ins {
		for _, x := range v {
			in = modp(in + x)
		}
	}
	return in
}

// dlApply applies op to out (a private Redux copy starts at zero and is
// added in: the same as adding to the data).
func dlApply(op dlOp, out []float64, in float64) {
	for i := range out {
		switch op.kind {
		case "W":
			out[i] = modp(in + float64(i))
		case "RW":
			out[i] = modp(3*out[i] + in + float64(i))
		case "commute", "redux":
			out[i] = modp(out[i] + in + float64(i))
		}
	}
}

func TestDataLayerRandomGraphs(t *testing.T) {
	seeds := 16
	if v := os.Getenv("PZ_DATALAYER_SEEDS"); v != "" {
		seeds, _ = strconv.Atoi(v)
	}
	first := 1
	if v := os.Getenv("PZ_DATALAYER_SEED"); v != "" {
		first, _ = strconv.Atoi(v)
		seeds = 1
	}
	for seed := first; seed < first+seeds; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { runDataLayer(t, uint64(seed), true) })
	}
}

// runDataLayer runs one random graph; devices false runs it on CPU
// workers only (the model's own check).
func runDataLayer(t *testing.T, seed uint64, devices bool) {
	rng := rand.New(rand.NewPCG(seed, 11))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stallMu sync.Mutex
	var stalls []string
	opts := []scheduler.Option{
		scheduler.WithWorkers(2),
		scheduler.WithPolicy([]string{"eager", "lws", "dmda", "random"}[seed%4]),
		scheduler.WithWatchdog(2*time.Second, func(st scheduler.Stall) {
			stallMu.Lock()
			stalls = append(stalls, st.String())
			stallMu.Unlock()
		}),
	}
	// Sizes in float64s: the reduction handle is small, the others up to
	// 64; a task touches at most three handles.
	sizes := []int{16, 64, 48, 64, 32, 40}
	const red = 0
	if devices {
		opts = append(opts, scheduler.WithSimDevices(
			scheduler.SimDevice{Memory: 3*64*8 + 4*16*8 + 256, Workers: 2, Bandwidth: -1, Latency: time.Microsecond},
			scheduler.SimDevice{Memory: 3*64*8 + 2*16*8 + 128, Workers: 1, Bandwidth: 4e9, Latency: 2 * time.Microsecond},
		))
	}
	s := newSchedBounded(t, opts...)
	fatal := func(format string, args ...any) {
		t.Helper()
		stallMu.Lock()
		st := strings.Join(stalls, "\n")
		stallMu.Unlock()
		if st != "" {
			st = "\nwatchdog:\n" + st
		}
		t.Fatalf("seed %d: "+format+st, append([]any{seed}, args...)...)
	}
	check := func(err error, what string) {
		t.Helper()
		if err != nil {
			fatal("%s: %v", what, err)
		}
	}

	var cpuIDs, devIDs []int
	for _, w := range s.Workers() {
		if w.Kind == scheduler.CPUWorker {
			cpuIDs = append(cpuIDs, w.ID)
		} else {
			devIDs = append(devIDs, w.ID)
		}
	}
	cpuCtx, err := s.NewContext("cpus", scheduler.ContextWorkers(cpuIDs...))
	check(err, "NewContext")
	var devCtx *scheduler.Context
	if devices {
		devCtx, err = s.NewContext("devices", scheduler.ContextWorkers(devIDs...))
		check(err, "NewContext")
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
	kernel := &scheduler.Codelet{Name: "op", CPU: func(c *scheduler.Call) error {
		op := c.Arg.(dlOp)
		var ins [][]float64
		for i := range op.ins {
			ins = append(ins, scheduler.VectorOf[float64](c, 1+i))
		}
		in := dlIn(op, ins)
		if op.fail {
			return fmt.Errorf("op %d fails", op.idx)
		}
		dlApply(op, scheduler.VectorOf[float64](c, 0), in)
		return nil
	}}

	nh := len(sizes)
	ref := make([][]float64, nh)
	data := make([][]float64, nh)
	hs := make([]*scheduler.Handle, nh)
	// poisoned: the handle's last writer failed or was canceled; its
	// readers are canceled until a task that only writes it.
	poisoned := make([]bool, nh)
	// The group of commuting writes or reductions that the handle's
	// last accesses form ("commute", "redux" or ""): its tasks depend on
	// the accesses before the group, not on each other, so the group's
	// tasks see the handle as it was when the group began (grpPoisoned).
	// A reduction's contributions are combined when the group ends;
	// when one of them did not run, none is, and the data stay as they
	// were before the group (reduxFrom), poisoned.
	grp := make([]string, nh)
	grpPoisoned := make([]bool, nh)
	var reduxFrom []float64
	reduxLost := false
	endGroup := func(i int) {
		if grp[i] == "redux" && reduxLost {
			copy(ref[i], reduxFrom)
			poisoned[i] = true
		}
		grp[i] = ""
	}
	register := func(i int) {
		h, err := s.RegisterVector(data[i], scheduler.Named(fmt.Sprintf("h%d", i)))
		check(err, "RegisterVector")
		if i == red {
			check(h.SetReduction(zero, add), "SetReduction")
		}
		hs[i] = h
		poisoned[i] = false
		grp[i] = ""
	}
	for i := range nh {
		ref[i] = make([]float64, sizes[i])
		for j := range ref[i] {
			ref[i][j] = float64(rng.IntN(1000))
		}
		data[i] = append([]float64(nil), ref[i]...)
		register(i)
	}

	type submitted struct {
		op   dlOp
		task *scheduler.Task
		want string // "ok", "failed", "canceled"
	}
	var tasks []submitted
	// hostCall runs f, a host call that takes no context (Data), bounded.
	hostCall := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			fatal("%s still blocked", what)
		}
	}
	const ntasks = 220
	for idx := 1; idx <= ntasks; idx++ {
		switch r := rng.IntN(100); {
		case r < 4: // Fetch: the newest data, or the failed writer's error
			i := rng.IntN(nh)
			if i == red {
				endGroup(i) // a host call combines a pending reduction
			}
			got, err := hs[i].Fetch(ctx)
			if ctx.Err() != nil {
				fatal("Fetch of h%d: %v", i, err)
			}
			if poisoned[i] {
				if err == nil {
					fatal("Fetch of h%d, whose last writer failed: no error", i)
				}
			} else {
				check(err, fmt.Sprintf("Fetch of h%d", i))
				if !equalFloats(got.([]float64), ref[i]) {
					fatal("Fetch of h%d before op %d: %v, want %v", i, idx, got, ref[i])
				}
			}
			continue
		case r < 7: // Data, then a write on the host
			i := rng.IntN(nh)
			if i == red {
				endGroup(i)
			}
			var got any
			hostCall("Data", func() { got = hs[i].Data() })
			if !equalFloats(got.([]float64), ref[i]) {
				fatal("Data of h%d before op %d (poisoned %v): %v, want %v", i, idx, poisoned[i], got, ref[i])
			}
			if !poisoned[i] {
				v := got.([]float64)
				for j := range v {
					v[j] = float64((idx*7 + j) % 1000)
					ref[i][j] = v[j]
				}
			}
			continue
		case r < 10: // Unregister, and register the data again
			i := rng.IntN(nh)
			endGroup(i)
			got, err := hs[i].Unregister(ctx)
			check(err, fmt.Sprintf("Unregister of h%d", i))
			if !equalFloats(got.([]float64), ref[i]) {
				fatal("Unregister of h%d before op %d (poisoned %v): %v, want %v", i, idx, poisoned[i], got, ref[i])
			}
			if rng.IntN(2) == 0 {
				data[i] = append([]float64(nil), ref[i]...) // fresh memory
			}
			register(i)
			continue
		}
		op := dlOp{idx: idx, out: rng.IntN(nh)}
		switch r := rng.IntN(10); {
		case op.out == red && r < 5:
			op.kind = "redux"
		case r < 2:
			op.kind = "W"
		case r < 4:
			op.kind = "commute"
		case r < 5:
			op.kind = "R"
		default:
			op.kind = "RW"
		}
		for range rng.IntN(3) {
			in := rng.IntN(nh)
			if in != op.out && !contains(op.ins, in) {
				op.ins = append(op.ins, in)
			}
		}
		op.fail = rng.IntN(30) == 0
		op.where = rng.IntN(3)
		if !devices && op.where == 2 {
			op.where = 1
		}

		// The model: a task that reads a poisoned handle is canceled, and
		// so poisons what it writes; a failed task poisons what it
		// writes (a reader that fails or is canceled changes nothing);
		// a task that runs writes the reference.
		for _, i := range op.ins {
			endGroup(i)
		}
		group := op.kind == "commute" || op.kind == "redux"
		if !group || grp[op.out] != op.kind {
			endGroup(op.out)
		}
		if group && grp[op.out] == "" {
			grp[op.out], grpPoisoned[op.out] = op.kind, poisoned[op.out]
			if op.kind == "redux" {
				reduxFrom, reduxLost = append(reduxFrom[:0], ref[op.out]...), false
			}
		}
		want := "ok"
		for _, i := range op.ins {
			if poisoned[i] {
				want = "canceled"
			}
		}
		switch {
		case group && grpPoisoned[op.out], !group && op.kind != "W" && poisoned[op.out]:
			want = "canceled"
		}
		if want == "ok" && op.fail {
			want = "failed"
		}
		switch {
		case want == "ok":
			var ins [][]float64
			for _, i := range op.ins {
				ins = append(ins, ref[i])
			}
			dlApply(op, ref[op.out], dlIn(op, ins))
			if !group && op.kind != "R" {
				poisoned[op.out] = false
			}
		case op.kind == "redux":
			reduxLost = true
		case op.kind != "R":
			poisoned[op.out] = true
		}

		args := []scheduler.Arg{scheduler.WithArg(op)}
		h := hs[op.out]
		args = append(args, map[string]scheduler.Arg{
			"R": scheduler.R(h), "W": scheduler.W(h), "RW": scheduler.RW(h),
			"commute": scheduler.Commute(h), "redux": scheduler.Redux(h),
		}[op.kind])
		for _, i := range op.ins {
			args = append(args, scheduler.R(hs[i]))
		}
		switch op.where {
		case 1:
			args = append(args, scheduler.InContext(cpuCtx))
		case 2:
			args = append(args, scheduler.InContext(devCtx))
		}
		task := scheduler.NewTask(kernel, args...)
		check(s.SubmitTask(ctx, task), fmt.Sprintf("Submit of op %d", idx))
		tasks = append(tasks, submitted{op, task, want})
	}
	err = s.WaitAll(ctx)
	if ctx.Err() != nil {
		fatal("WaitAll: %v", err)
	}
	endGroup(red) // Unregister below combines a pending reduction
	for _, st := range tasks {
		terr := st.task.Err()
		got := "ok"
		switch {
		case errors.Is(terr, scheduler.ErrCanceled):
			got = "canceled"
		case terr != nil:
			got = "failed"
		}
		if got != st.want {
			fatal("op %d (%+v): %s (%v), want %s", st.op.idx, st.op, got, terr, st.want)
		}
	}
	if devices {
		var devTasks, evictions int64
		for _, st := range s.Stats() {
			if st.Kind == scheduler.SimWorker {
				devTasks += st.Tasks
			}
		}
		for _, x := range s.Transfers() {
			evictions += x.Evictions
		}
		if devTasks == 0 {
			fatal("no task ran on the devices")
		}
		t.Logf("%d tasks on the devices, %d evictions", devTasks, evictions) // -v
	}
	for i := range nh {
		got, err := hs[i].Unregister(ctx)
		check(err, fmt.Sprintf("final Unregister of h%d", i))
		if !equalFloats(got.([]float64), ref[i]) {
			fatal("h%d at the end (poisoned %v): %v, want %v", i, poisoned[i], got, ref[i])
		}
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDataLayerModel runs the random graphs on CPU workers alone: the
// sequential model is the scheduler's documented behaviour there.
func TestDataLayerModel(t *testing.T) {
	n := 4
	if v := os.Getenv("PZ_DATALAYER_SEEDS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	for seed := 1; seed <= n; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { runDataLayer(t, uint64(seed), false) })
	}
}

// TestFailedWriteOnDeviceKeepsData: a task that only writes a handle
// (W) and fails without writing leaves the data as they were before it
// (docs/scheduler.md, Failures): on a device, the replica it took holds
// no data of the handle's - here another handle's, from the node's cache
// - and must not be what Unregister returns; on a CPU worker after a
// device wrote the newest version, that version must not be lost.
func TestFailedWriteOnDeviceKeepsData(t *testing.T) {
	ctx := testCtx(t)
	const n = 16
	s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 4 * n * 8, Bandwidth: -1}))
	dc := devOnly(t, s)
	var cpuIDs []int
	for _, w := range s.Workers() {
		if w.Kind == scheduler.CPUWorker {
			cpuIDs = append(cpuIDs, w.ID)
		}
	}
	cc, err := s.NewContext("cpu", scheduler.ContextWorkers(cpuIDs...))
	if err != nil {
		t.Fatal(err)
	}
	fill := &scheduler.Codelet{Name: "fill", CPU: func(c *scheduler.Call) error {
		for i := range scheduler.VectorOf[float64](c, 0) {
			scheduler.VectorOf[float64](c, 0)[i] = 777
		}
		return nil
	}}
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		for i := range scheduler.VectorOf[float64](c, 0) {
			scheduler.VectorOf[float64](c, 0)[i]++
		}
		return nil
	}}
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("boom") }}

	// Another handle's data stay in the device's cache.
	hy, err := s.RegisterVector(make([]float64, n), scheduler.Named("y"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, fill, scheduler.W(hy), scheduler.InContext(dc)); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := hy.Unregister(ctx); err != nil {
		t.Fatal(err)
	}

	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
	}
	want := append([]float64(nil), x...)
	hx, err := s.RegisterVector(x, scheduler.Named("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, boom, scheduler.W(hx), scheduler.InContext(dc)); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAll(ctx); err == nil {
		t.Fatal("WaitAll: no error after a failed task")
	}
	if got := hx.Data().([]float64); !equalFloats(got, want) {
		t.Fatalf("Data after a W task failed on the device: %v, want %v (from before the task)", got, want)
	}

	// The newest version on the device, then a W that fails in RAM.
	if _, err := hx.Unregister(ctx); err != nil {
		t.Fatal(err)
	}
	if hx, err = s.RegisterVector(x, scheduler.Named("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, inc, scheduler.RW(hx), scheduler.InContext(dc)); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, boom, scheduler.W(hx), scheduler.InContext(cc)); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAll(ctx); err == nil {
		t.Fatal("WaitAll: no error after a failed task")
	}
	for i := range want {
		want[i]++
	}
	got, err := hx.Unregister(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !equalFloats(got.([]float64), want) {
		t.Fatalf("Unregister after a W task failed on a CPU worker: %v, want %v (the device's version, from before the task)", got, want)
	}
}

// A detached task that writes a handle without reading it (the shape of
// scheduler/dist's receive of a new version) does not first copy the
// device's older version to RAM, as a program's W task does so that its
// failure can leave the data as they were: the receive would overwrite
// it at once, on every new version received.
func TestDetachedWriteDoesNotStage(t *testing.T) {
	ctx := testCtx(t)
	const n = 16
	s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 4 * n * 8, Bandwidth: -1}))
	dc := devOnly(t, s)
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		for i := range scheduler.VectorOf[float64](c, 0) {
			scheduler.VectorOf[float64](c, 0)[i]++
		}
		return nil
	}}
	gate := make(chan struct{})
	busy := &scheduler.Codelet{Name: "busy", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	received := make(chan struct{})
	recv := &scheduler.Codelet{Name: "recv", Detached: func(t *scheduler.Task, done func(error)) {
		close(received)
		go done(nil) // (a receive would write the RAM buffer first)
	}}
	toRAM := func() int64 {
		var c int64
		for _, tr := range s.Transfers() {
			if tr.To == scheduler.RAM && tr.From != scheduler.RAM {
				c += tr.Count
			}
		}
		return c
	}
	hx, err := s.RegisterVector(make([]float64, n), scheduler.Named("x"))
	if err != nil {
		t.Fatal(err)
	}
	hb, err := s.RegisterVector(make([]float64, n), scheduler.Named("b"))
	if err != nil {
		t.Fatal(err)
	}
	// The newest version on the device only, which stays busy (no idle
	// write-back) until the receive has run.
	if err := s.Submit(ctx, inc, scheduler.RW(hx), scheduler.InContext(dc)); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, busy, scheduler.RW(hb), scheduler.InContext(dc)); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, recv, scheduler.W(hx)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-received:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	got := toRAM()
	close(gate)
	if err := s.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got != 0 {
		t.Fatalf("a detached W copied the device's version to RAM first: %d copies to RAM, want 0 (%+v)", got, s.Transfers())
	}
}
