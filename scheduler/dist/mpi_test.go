//go:build mpi

package dist_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// distUnderMPI begins a test that runs on every rank of an MPI job
// (name, the test's own name): outside mpirun it runs the test under
// mpirun on 1 to 4 ranks, each job bounded by job (skipped without
// mpirun), and returns ok false; under mpirun it initializes MPI and a
// distributed scheduler over a local one of one worker, which the test's
// end closes and finalizes, and returns them with a context bounded by
// timeout.
func distUnderMPI(t *testing.T, name string, job, timeout time.Duration) (ctx context.Context, w *mpi.World, d *dist.Scheduler, ok bool) {
	t.Helper()
	if !launch.Detect(os.Getenv).Launched() {
		for n := 1; n <= 4; n++ {
			t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) { runUnderMPI(t, name, n, job) })
		}
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	w, err := mpi.Init(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Finalize()) })
	d = oneWorkerDist(t, ctx, w)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return ctx, w, d, true
}

// TestMPIRandomGraphs runs the random graphs under real MPI: outside mpirun
// it starts itself with mpirun on 1 to 4 ranks (and skips without
// mpirun); under mpirun it is one rank of the job.
func TestMPIRandomGraphs(t *testing.T) {
	ctx, w, d, ok := distUnderMPI(t, "TestMPIRandomGraphs", 3*time.Minute, 2*time.Minute)
	if !ok {
		return
	}
	for seed := range uint64(3) {
		require.NoError(t, checkRandomGraph(ctx, d, seed), "seed %d", seed)
	}
	// Master/worker mode: the same kind of graph submitted on rank 0 only.
	const nh = 8
	_, ops := randomGraph(42, nh, 100, w.Size())
	want := sequential(nh, ops)
	reg, err := dist.NewRegistry(mwApply, zero, add)
	require.NoError(t, err)
	err = dist.RunMaster(ctx, w, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
		data := make([][]int64, nh)
		hs := make([]*scheduler.Handle, nh)
		for h := range nh {
			data[h] = make([]int64, vecLen)
			for i := range data[h] {
				data[h][i] = initial(h, i)
			}
			var err error
			if hs[h], err = m.Local().RegisterVector(data[h]); err != nil {
				return err
			}
			if err := hs[h].SetReduction(zero, add); err != nil {
				return err
			}
		}
		for _, o := range ops {
			args := []scheduler.Arg{scheduler.Data(hs[o.target], o.mode), scheduler.WithArg([]int64{int64(o.mode), o.add})}
			for _, r := range o.reads {
				args = append(args, scheduler.R(hs[r]))
			}
			if err := m.Submit(ctx, mwApply, args...); err != nil {
				return err
			}
		}
		if err := m.WaitAll(ctx); err != nil {
			return err
		}
		for h := range nh {
			if _, err := hs[h].Unregister(ctx); err != nil {
				return err
			}
			if !slices.Equal(data[h], want[h]) {
				return fmt.Errorf("master/worker: handle %d differs from the sequential run", h)
			}
		}
		return nil
	})
	require.NoError(t, err)
}

// TestMPIStalledRankEndsOthers: under MPI, a rank whose WaitAll gives up
// (its stall timeout, while another rank has not reached WaitAll) tells
// the others, so a rank that reaches WaitAll later returns
// ErrRankFailed at once instead of waiting in the outcome's agreement
// for a rank that has gone on to MPI_Finalize.
func TestMPIStalledRankEndsOthers(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIStalledRankEndsOthers")
	if w == nil {
		return // run under mpirun, as a child
	}
	ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
	require.NoError(t, err)
	defer ls.Close()
	d, err := dist.New(ctx, w, ls, dist.WithStallTimeout(time.Second))
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	hs := make([]*dist.Handle, 2)
	for r := range hs {
		var data []int64
		if r == w.Rank() {
			data = make([]int64, 4)
		}
		hs[r], err = dist.Register(d, r, data, 4, 1)
		require.NoError(t, err)
	}
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, d.Submit(ctx, noop, dist.RW(hs[0]), dist.R(hs[1])))
	gaveUp := []int64{1}
	if w.Rank() == 0 {
		// Rank 1 is not in WaitAll: rank 0 gives up after a second.
		err := d.WaitAll(ctx)
		require.ErrorIs(t, err, dist.ErrStalled)
		require.NoError(t, comm.Send(ctx, w, gaveUp, 1, 0))
		return
	}
	_, err = comm.Recv(ctx, w, gaveUp, 0, 0)
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	err = d.WaitAll(wctx)
	require.ErrorIs(t, err, dist.ErrRankFailed)
	require.Contains(t, err.Error(), "rank 0 left WaitAll")
	require.NoError(t, wctx.Err(), "WaitAll returned at once, not at its deadline")
}

// TestMPINoWriteAfterFailedWaitAll is TestNoWriteAfterFailedWaitAll under
// MPI, on 2 ranks: rank 0's WaitAll gives up while its receive of the
// handle it owns is posted (MPI_Irecv into its registered slice); rank
// 1, not told yet, sends the data afterwards. Rank 0's slice must not
// change: its receive was canceled (MPI_Cancel) before WaitAll returned.
// (Before, the receive stayed posted and MPI filled the slice when the
// message came.) The ranks pace each other with messages on the world
// communicator.
func TestMPINoWriteAfterFailedWaitAll(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPINoWriteAfterFailedWaitAll")
	if w == nil {
		return // run under mpirun, as a child
	}
	// The pacing messages on w: rank 0 lets rank 1 produce (after its
	// WaitAll returned); rank 1 says its send of the data has completed.
	const tagProduce, tagSent = 1, 2
	// 16 float64s (128 B): an eager message, whose send completes
	// whether a receive takes it or not.
	const n = 16
	g := noLateWrite{n: n, produce: &scheduler.Codelet{Name: "produce", CPU: func(c *scheduler.Call) error {
		if _, err := comm.Recv(ctx, w, []int8{0}, 0, tagProduce); err != nil {
			return err
		}
		v := scheduler.VectorOf[float64](c, 0)
		for i := range v {
			v[i] = float64(1000 + i)
		}
		return nil
	}}}
	recvs, sends := make(chan comm.Request, 1), make(chan comm.Request, 1)
	gate := make(chan struct{})
	spy := &spyComm{Comm: w, recvs: recvs}
	if w.Rank() == 1 {
		spy = &spyComm{Comm: w, sends: sends, gate: gate}
	}
	ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
	require.NoError(t, err)
	defer ls.Close()
	d, err := dist.New(ctx, spy, ls)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	_, mine, err := g.register(ctx, d)
	require.NoError(t, err)
	if w.Rank() == 1 {
		told := make(chan error, 1)
		go func() {
			// Once the data is sent, tell rank 0, then let this rank
			// hear of its failure.
			defer close(gate)
			select {
			case s := <-sends:
				if _, err := s.Wait(ctx); err != nil {
					told <- err
					return
				}
				told <- comm.Send(ctx, w, []int8{1}, 0, tagSent)
			case <-ctx.Done():
				told <- ctx.Err()
			}
		}()
		err := d.WaitAll(ctx)
		require.NoError(t, <-told, "rank 1's send")
		require.ErrorIs(t, err, dist.ErrRankFailed)
		require.Contains(t, err.Error(), "rank 0 left WaitAll")
		return
	}
	recv, err := leaveOnRecv(ctx, d, recvs)
	require.ErrorIs(t, err, context.Canceled, "rank 0 left WaitAll")
	require.NotNil(t, recv, "rank 0 posted its receive")
	before := slices.Clone(mine)
	require.NoError(t, comm.Send(ctx, w, []int8{1}, 1, tagProduce))
	_, err = comm.Recv(ctx, w, []int8{0}, 1, tagSent)
	require.NoError(t, err)
	// The receive has ended: canceled, or (before the fix) filled by the
	// message once it came.
	_, rerr := recv.Wait(ctx)
	assert.ErrorIs(t, rerr, comm.ErrCanceled, "rank 0's receive was canceled")
	want := slices.Repeat([]float64{7}, n)
	assert.Equal(t, want, before, "rank 0's slice when its WaitAll returned")
	assert.Equal(t, want, mine, "rank 0's slice after rank 1's late send: written after WaitAll returned")
}

// TestMPILeaverMissesComparison is TestLeaverMissesComparison under MPI,
// on 2 ranks: rank 1 leaves WaitAll ahead of rank 0 (leaveAhead) and
// lingers until rank 0's WaitAll has returned; rank 0, whose control
// messages are held back until its submissions are done, must return
// ErrRankFailed naming rank 1 at once, and must not start the
// comparison rank 1 never joins: its collective would be left unmatched
// for MPI_Finalize to wait for (then finalize with a thread inside
// MPI_Allreduce). Rank 1's comparison is matched by rank 0's first.
// The ranks pace each other with messages on the world communicator.
func TestMPILeaverMissesComparison(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPILeaverMissesComparison")
	if w == nil {
		return // run under mpirun, as a child
	}
	// The pacing messages on w: rank 1 has left WaitAll; rank 0's
	// WaitAll has returned.
	const tagLeft, tagDone = 1, 2
	gate := make(chan struct{})
	started := 0 // rank 0's comparisons
	spy := &spyComm{Comm: w}
	if w.Rank() == 0 {
		spy = &spyComm{Comm: w, gate: gate, started: func() { started++ }}
	}
	ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
	require.NoError(t, err)
	defer ls.Close()
	d, err := dist.New(ctx, spy, ls, dist.WithStallTimeout(longStall))
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	hs, err := onePerRank[int64](d, 4)
	require.NoError(t, err)
	if w.Rank() == 1 {
		err := leaveAhead(ctx, d, hs[0])
		require.ErrorIs(t, err, context.Canceled, "rank 1 left WaitAll")
		require.NoError(t, comm.Send(ctx, w, []int8{1}, 0, tagLeft))
		_, err = comm.Recv(ctx, w, []int8{0}, 0, tagDone)
		require.NoError(t, err)
		return
	}
	_, err = comm.Recv(ctx, w, []int8{0}, 1, tagLeft)
	require.NoError(t, err)
	defer func() { assert.NoError(t, comm.Send(ctx, w, []int8{1}, 1, tagDone)) }()
	require.NoError(t, submitWindow(ctx, d, hs[0]))
	close(gate)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	err = d.WaitAll(wctx)
	checkLeftBehind(t, err, wctx.Err())
	assert.Equal(t, 1, started, "rank 0 started no comparison that rank 1 never joins")
}

// onMPIRanks runs the test named name under MPI: started by go test, it
// runs the test under mpirun on each rank count of ranks in turn
// (runUnderMPI, job bounding each job) and returns a nil World; under
// mpirun it initializes MPI (finalized at the test's end) and returns a
// context of deadline and the World.
func onMPIRanks(t *testing.T, name string, ranks []int, job, deadline time.Duration) (context.Context, *mpi.World) {
	t.Helper()
	if !launch.Detect(os.Getenv).Launched() {
		for _, n := range ranks {
			runUnderMPI(t, name, n, job)
		}
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	w, err := mpi.Init(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Finalize()) })
	return ctx, w
}

// onTwoMPIRanks is onMPIRanks on 2 ranks, with a minute's context.
func onTwoMPIRanks(t *testing.T, name string) (context.Context, *mpi.World) {
	t.Helper()
	ctx, w := onMPIRanks(t, name, []int{2}, 2*time.Minute, time.Minute)
	if w != nil && w.Size() != 2 {
		t.Skip("runs on 2 ranks")
	}
	return ctx, w
}

// oneWorkerDist is a distributed scheduler over w and a local one of one
// worker, which the test's end closes; the test closes d itself (or
// checks its Close).
func oneWorkerDist(t *testing.T, ctx context.Context, w comm.Comm, opts ...dist.Option) *dist.Scheduler {
	t.Helper()
	ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ls.Close() })
	d, err := dist.New(ctx, w, ls, opts...)
	require.NoError(t, err)
	return d
}

// stallingTiles is the graph of the MPI stall tests: a scheduler of one
// worker, a dist scheduler over w with a 300 ms stall timeout (and no
// stall reports), and a 1 x 2 grid of 2 x 2 tiles, one per rank; both
// are closed at the test's end.
func stallingTiles(t *testing.T, ctx context.Context, w *mpi.World) (*dist.Scheduler, [][]*dist.Handle) {
	t.Helper()
	d := oneWorkerDist(t, ctx, w, dist.WithStallTimeout(300*time.Millisecond), dist.WithStallReport(0, nil))
	t.Cleanup(func() { d.Close() })
	tiles, err := dist.RegisterTiles[float64](d, 1, 2, 2, 2, dist.BlockCyclic2D(1, 2), nil)
	require.NoError(t, err)
	return d, tiles
}

// runUnderMPI runs the test named name of this binary under mpirun on n
// ranks (skipping without mpirun) and checks that every rank passed it.
func runUnderMPI(t *testing.T, name string, n int, timeout time.Duration) {
	t.Helper()
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not found: install Open MPI (Debian: openmpi-bin) to test under MPI")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := append(lau.Args(n), os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(os.Environ(), "OMPI_MCA_btl_vader_single_copy_mechanism=none")
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "mpirun -n %d timed out:\n%s", n, out)
	require.NoError(t, err, "mpirun %s:\n%s", strings.Join(args, " "), out)
	assert.Equal(t, n, strings.Count(string(out), "--- PASS: "+name), "%s", out)
}

// TestMPIMasterContextEnded: a master whose context has ended when its
// function returns still stops the worker rank, which returns nil (it
// waits for the stop with comm.Idle: no timeout would end it).
func TestMPIMasterContextEnded(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIMasterContextEnded")
	if w == nil {
		return
	}
	reg, err := dist.NewRegistry(mwInc0)
	require.NoError(t, err)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	err = dist.RunMaster(rctx, w, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
		rcancel()
		return nil // the master swallows its context's end
	})
	if w.Rank() != 0 {
		require.NoError(t, err, "rank %d", w.Rank())
	}
	require.NoError(t, ctx.Err(), "rank %d waited until the test's deadline", w.Rank())
}

// TestMPIUnregister: under MPI, a loop that registers a temporary on
// alternate owners, reads it on both ranks and unregisters it gives the
// owner its latest version, keeps no more handles or cached copies than
// after the first pass, and Flush makes the next remote read a message
// again.
func TestMPIUnregister(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIUnregister")
	if w == nil {
		return
	}
	d := oneWorkerDist(t, ctx, w)
	defer func() { require.NoError(t, d.Close()) }()
	accs, err := onePerRank[float64](d, 8)
	require.NoError(t, err)
	var kept, capacity int
	const iters = 200
	for it := range iters {
		owner := it % 2
		var mine []float64
		if owner == w.Rank() {
			mine = make([]float64, 8)
		}
		tmp, err := dist.Register(d, owner, mine, 8, 1)
		require.NoError(t, err)
		require.NoError(t, d.Submit(ctx, fillWith, dist.W(tmp), dist.With(scheduler.WithArg(float64(it)))))
		require.NoError(t, d.Submit(ctx, double, dist.RW(tmp), dist.OnRank(1-owner))) // written on the other rank
		for r := range 2 {
			require.NoError(t, d.Submit(ctx, addInto, dist.RW(accs[r]), dist.R(tmp)))
		}
		data, err := d.Unregister(ctx, tmp)
		require.NoError(t, err)
		if owner == w.Rank() {
			require.Equal(t, float64(2*it), data.([]float64)[7], "pass %d", it)
		} else {
			require.Nil(t, data)
		}
		if it == 0 {
			kept, capacity = dist.Kept(d)
		}
	}
	require.NoError(t, d.WaitAll(ctx))
	live, c := dist.Kept(d)
	assert.Equal(t, kept, live)
	assert.LessOrEqual(t, c, capacity)
	assert.Equal(t, 0, dist.CachedCopies(d))
	assert.Equal(t, float64(iters*(iters-1)), accs[w.Rank()].Data().([]float64)[0])

	// Flush: rank 1 reads rank 0's vector twice (one message), then
	// after a Flush once more (another).
	before := d.Stats().MessagesSent
	for _, flush := range []bool{false, false, true} {
		if flush {
			require.NoError(t, d.Flush(ctx, accs[0]))
			assert.Equal(t, 0, dist.CachedCopies(d))
		}
		require.NoError(t, d.Submit(ctx, addInto, dist.RW(accs[1]), dist.R(accs[0])))
		require.NoError(t, d.WaitAll(ctx))
	}
	if w.Rank() == 0 {
		assert.Equal(t, before+2, d.Stats().MessagesSent)
	}
}
