//go:build mpi

package mpi_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/commtest"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/internal/procs"
)

// world is the MPI world of this test process, set up by TestMain: MPI can
// be initialized once per process, so every test shares it.
var world *mpi.World

// serializedEnv, set to 1, makes TestMain play a C program that embeds
// pz: it initializes MPI itself at MPI_THREAD_SERIALIZED before Init,
// which adopts it and then makes every MPI call under one lock and polls
// its blocking operations (doc.go, "Threads and latency"); TestMain
// finalizes MPI after the World's Finalize has left it running.
// mpitest.sh runs the tests so too.
const serializedEnv = "PZ_MPI_TEST_SERIALIZED"

// serialized reports whether the tests run on an adopted MPI at
// MPI_THREAD_SERIALIZED (serializedEnv).
func serialized() bool { return os.Getenv(serializedEnv) == "1" }

// TestMain initializes MPI (as a singleton when not under mpirun), runs the
// tests, and makes every rank exit with the same status, so that mpirun
// fails when any rank failed.
func TestMain(m *testing.M) {
	var embedderFinalize func() error
	if serialized() {
		fin, provided, err := mpi.InitEmbedded(mpi.ThreadSerialized)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if provided != mpi.ThreadSerialized {
			fmt.Fprintf(os.Stderr, "MPI_Init_thread(MPI_THREAD_SERIALIZED) provided level %d\n", provided)
			os.Exit(2)
		}
		embedderFinalize = fin
	}
	w, err := mpi.Init(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpi.Init:", err)
		os.Exit(2)
	}
	if embedderFinalize != nil && (w.Started() || w.ThreadLevel() != mpi.ThreadSerialized || !mpi.Serialized(w)) {
		fmt.Fprintf(os.Stderr, "mpi.Init on MPI the program initialized at MPI_THREAD_SERIALIZED: Started %v, ThreadLevel %d, serialized %v; want false, %d, true\n",
			w.Started(), w.ThreadLevel(), mpi.Serialized(w), mpi.ThreadSerialized)
		os.Exit(2)
	}
	world = w
	code := m.Run()
	if mpi.FinalizedCleanly(w) {
		// A test finalized MPI (TestWaitAfterFinalize's job), or ended
		// pz's use of the program's MPI, which the program finalizes
		// now: the ranks cannot agree on the status any more; mpirun
		// fails if one fails.
		if embedderFinalize != nil {
			if err := embedderFinalize(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				code = max(code, 1)
			}
		}
		os.Exit(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	worst, err := comm.AllReduce(ctx, comm.Comm(w), []int32{int32(code)}, comm.Max)
	cancel()
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "rank %d: agreeing on the exit status: %v\n", w.Rank(), err)
		code = max(code, 1)
	case worst[0] != 0 && code == 0:
		fmt.Fprintf(os.Stderr, "rank %d: another rank failed\n", w.Rank())
		code = int(worst[0])
	}
	// Finalize from another goroutine: MPI_Finalize must still run on the
	// thread that ran MPI_Init_thread.
	ferr := make(chan error)
	go func() { ferr <- w.Finalize() }()
	err = <-ferr
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	} else if ids := mpi.MPIThreadIDs(w); w.Started() && (len(ids) != 2 || ids[0] != ids[1]) {
		fmt.Fprintf(os.Stderr, "MPI_Init_thread and MPI_Finalize ran on threads %v, not on one\n", ids)
		code = max(code, 1)
	}
	if embedderFinalize != nil && errors.Is(err, mpi.ErrUnfinalized) {
		// A thread of pz is still inside MPI (a test left it so): the
		// program must not finalize MPI, and exits without.
		os.Exit(max(code, 1))
	}
	if embedderFinalize != nil {
		// Finalize left the program's MPI running, for the program to
		// finalize.
		if !mpi.Initialized() {
			fmt.Fprintln(os.Stderr, "Finalize of an adopted MPI finalized it")
			os.Exit(max(code, 1))
		}
		if comms, persist, types, userOps := mpi.HeldInMPI(w); comms+persist > 0 || types || userOps || !mpi.WorldErrorsFatal() {
			fmt.Fprintf(os.Stderr, "Finalize of an adopted MPI left in it %d communicators, %d persistent requests, types and ops %v, user ops %v; MPI_COMM_WORLD's handler given back: %v\n",
				comms, persist, types, userOps, mpi.WorldErrorsFatal())
			code = max(code, 1)
		}
		if err := embedderFinalize(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = max(code, 1)
		}
	}
	os.Exit(code)
}

// underLauncher reports whether mpirun started this process.
func underLauncher() bool { return launch.Detect(os.Getenv).Launched() }

// TestSpawn runs this test binary under `mpirun -n 2` and `-n 4` when it was
// not itself started by mpirun, so that plain `go test -tags mpi
// ./comm/mpi` covers 1, 2 and 4 ranks.
func TestSpawn(t *testing.T) {
	if underLauncher() {
		t.Skip("already under an MPI launcher")
	}
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not found: only 1 rank tested; install Open MPI (Debian: openmpi-bin) for 2 and 4")
	}
	run := "^Test[^S]" // every test but this one
	if f := flagValue("test.run"); f != "" && f != "^TestSpawn$" {
		run = f
	}
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			args := lau.Args(n)
			args = append(args, os.Args[0], "-test.run="+run, "-test.count=1")
			if testing.Short() {
				args = append(args, "-test.short")
			}
			if skip := flagValue("test.skip"); skip != "" {
				args = append(args, "-test.skip="+skip)
			}
			if testing.Verbose() {
				args = append(args, "-test.v")
			}
			cmd := exec.CommandContext(ctx, mpirun, args...)
			out, err := cmd.CombinedOutput()
			if err != nil || testing.Verbose() {
				t.Logf("mpirun %s\n%s", strings.Join(args, " "), out)
			}
			require.NoError(t, ctx.Err(), "mpirun -n %d timed out", n)
			require.NoError(t, err, "mpirun -n %d failed", n)
		})
	}
}

// flagValue is the value the testing package parsed for the flag name
// (test.run, test.skip), whichever form it was given in: go test passes
// -test.skip=X, but a test binary run by hand may get -test.skip X or
// --test.skip=X, and a skip dropped here made the ranks run TestLargeCounts.
func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// TestConformance runs the shared conformance suite on the world with the
// agreement step on and deadline contexts (the non-blocking, polled path).
func TestConformance(t *testing.T) {
	commtest.RunWorld(t, world)
}

// TestLargeCounts runs the large-count cases (buffers past 2^31-1
// elements: derived datatypes, reductions in pieces, MPI_Alltoallw) on the
// world; each is skipped where the machine lacks the memory, all in -short.
func TestLargeCounts(t *testing.T) {
	commtest.RunLargeWorld(t, world)
}

// runCases runs the non-misuse conformance cases with ctx on every rank and
// fails every rank if any rank failed.
func runCases(t *testing.T, c comm.Comm, ctx context.Context) {
	for _, cs := range commtest.Cases() {
		if strings.HasPrefix(cs.Name, "Misuse/") {
			continue // without the check, misuse is only caught locally
		}
		t.Run(cs.Name, func(t *testing.T) {
			err := cs.Run(ctx, c)
			assert.NoError(t, err, "rank %d", c.Rank())
			// Every rank finishes a case before any starts the next: a
			// rank running ahead would send the next case's messages
			// while another still receives with AnySource and AnyTag.
			require.NoError(t, c.Barrier(ctx), "rank %d: barrier after the case", c.Rank())
		})
	}
}

// TestConformanceBlocking runs the suite's cases with context.Background,
// which takes the blocking MPI calls, with and without the check.
func TestConformanceBlocking(t *testing.T) {
	sub := splitAll(t)
	t.Run("check", func(t *testing.T) { runCases(t, sub, context.Background()) })
	sub.SetCheck(false)
	t.Run("nocheck", func(t *testing.T) { runCases(t, sub, context.Background()) })
}

// splitAll returns a copy of the world communicator for one test.
func splitAll(t *testing.T) *mpi.Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sub, err := world.Split(ctx, 0, world.Rank())
	require.NoError(t, err)
	require.NotNil(t, sub)
	c := sub.(*mpi.Comm)
	t.Cleanup(func() {
		if err := c.Free(); err != nil && !errors.Is(err, comm.ErrFreed) {
			t.Errorf("Free: %v", err)
		}
	})
	return c
}

func TestInitAdopts(t *testing.T) {
	assert.True(t, mpi.Available())
	assert.True(t, mpi.Initialized())
	assert.Equal(t, !serialized(), world.Started(), "Init starts MPI unless the program did (%s)", serializedEnv)
	w2, err := mpi.Init(context.Background(), mpi.WithGOMAXPROCS(false), mpi.WithCheck(false))
	require.NoError(t, err)
	assert.False(t, w2.Started(), "second Init must adopt")
	assert.Equal(t, world.Rank(), w2.Rank())
	assert.Equal(t, world.Size(), w2.Size())
	assert.False(t, w2.Check())
	assert.Equal(t, world.LocalSize(), w2.LocalSize())
	require.NoError(t, w2.Finalize())
	assert.True(t, mpi.Initialized(), "Finalize of an adopted MPI must not finalize it")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// w2's Finalize ended its use of MPI; the MPI and world go on.
	_, err = comm.AllReduce(ctx, comm.Comm(w2), []int64{1}, comm.Sum)
	require.ErrorIs(t, err, mpi.ErrFinalized)
	sum, err := comm.AllReduce(ctx, comm.Comm(world), []int64{1}, comm.Sum)
	require.NoError(t, err)
	assert.Equal(t, int64(world.Size()), sum[0])
}

func TestLocalSizeAndProcs(t *testing.T) {
	want := world.Size() // every rank of this test runs on one machine
	assert.Equal(t, want, world.LocalSize())
	if s := os.Getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); s != "" {
		assert.Equal(t, s, strconv.Itoa(world.LocalSize()))
	}
	rep := world.Procs()
	assert.Equal(t, want, rep.LocalRanks)
	t.Log(rep)
	// The runtime runs the decision taken from what was read: the rank's
	// share of the CPUs it may use, unless the user set GOMAXPROCS.
	assert.Equal(t, runtime.GOMAXPROCS(0), rep.After)
	assert.Equal(t, procs.Decide(rep.Input).Procs, rep.After)
	// The share comes from every local rank's real affinity mask: gather
	// them here independently (all ranks of this test share one machine).
	mine, err := procs.AffinityMask()
	require.NoError(t, err)
	parts, err := comm.AllGather(context.Background(), comm.Comm(world), mine[:])
	require.NoError(t, err)
	all := make([]procs.CPUMask, len(parts))
	for r, p := range parts {
		copy(all[r][:], p)
	}
	share := procs.MaskShare(mine, all)
	assert.InDelta(t, share, rep.MaskShare, 1e-9)
	assert.Contains(t, rep.Reason, "affinity masks")
	if rep.UserGOMAXPROCS == "" && rep.Quota == 0 {
		assert.Equal(t, max(1, int(share+1e-9)), rep.After, "share %.2f of %d CPUs", share, mine.Count())
	}
}

func TestErrorConversion(t *testing.T) {
	c := splitAll(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A 1003-element message into a 1000-element Irecv: MPI_ERR_TRUNCATE.
	// It goes around a ring, from another rank, and past 4 KiB: a
	// receive of at most 4 KiB, or one that may match the rank's own
	// message, has room past its buffer, and pz sees a longer message
	// there, without an MPI error (Irecv).
	if n := c.Size(); n > 1 {
		me := c.Rank()
		rreq, err := comm.Irecv(c, make([]float64, 1000), (me+n-1)%n, 7)
		require.NoError(t, err)
		require.NoError(t, comm.Send(ctx, c, make([]float64, 1003), (me+1)%n, 7))
		_, err = rreq.Wait(ctx)
		require.Error(t, err)
		assert.ErrorIs(t, err, comm.ErrTruncated)
		assert.ErrorIs(t, err, mpi.ErrMPI)
		var me2 *mpi.Error
		require.ErrorAs(t, err, &me2)
		assert.Contains(t, strings.ToLower(me2.Msg), "truncat")
		assert.NotZero(t, me2.Code)
		// Both sizes where the library reports the message's (Open MPI;
		// MPICH's status counts what it wrote), and each call named once.
		left := (me + n - 1) % n
		if mpi.Library() == "openmpi" {
			assert.ErrorContains(t, err, fmt.Sprintf("mpi: Irecv on rank %d from rank %d tag 7: comm: message larger than receive buffer: message from rank %d has 1003 elements, buffer holds 1000 (mpi: MPI_Irecv: ", me, left, left))
		} else {
			assert.ErrorContains(t, err, fmt.Sprintf("mpi: Irecv on rank %d from rank %d tag 7: comm: message larger than receive buffer: message from rank %d has ", me, left, left))
		}
		assert.Equal(t, 1, strings.Count(err.Error(), "MPI_Irecv"), err.Error())

		// The same for a persistent receive's round.
		pr, err := comm.RecvInit(c, make([]float64, 2), left, 8)
		require.NoError(t, err)
		require.NoError(t, pr.Start())
		require.NoError(t, comm.Send(ctx, c, []float64{1, 2, 3}, (me+1)%n, 8))
		_, err = pr.Wait(ctx)
		assert.ErrorIs(t, err, comm.ErrTruncated)
		if mpi.Library() == "openmpi" {
			assert.ErrorContains(t, err, fmt.Sprintf("mpi: RecvInit on rank %d from rank %d tag 8: comm: message larger than receive buffer: message from rank %d has 3 elements, buffer holds 2 (mpi: MPI_Recv_init: ", me, left, left))
		} else {
			assert.ErrorContains(t, err, fmt.Sprintf("mpi: RecvInit on rank %d from rank %d tag 8: comm: message larger than receive buffer: message from rank %d has ", me, left, left))
		}
		assert.Equal(t, 1, strings.Count(err.Error(), "MPI_Recv_init"), err.Error())
		require.NoError(t, pr.Free())
	}

	// Another datatype than the sender's whose size does not divide the
	// message's: an error wrapping comm.ErrMismatch naming the call, the
	// rank, the peer and the tag, as comm/local's (MPI carries no type; a
	// size that divides passes: docs/backends.md). No *comm.MismatchError,
	// which reports a collective's ranks disagreeing.
	me := c.Rank()
	sreq, err := comm.Isend(c, []int8{1, 2, 3}, me, 9)
	require.NoError(t, err)
	_, err = c.Probe(ctx, comm.Int64, me, 9)
	require.ErrorIs(t, err, comm.ErrMismatch)
	var mm *comm.MismatchError
	assert.False(t, errors.As(err, &mm), "%v", err)
	assert.ErrorContains(t, err, fmt.Sprintf("mpi: Probe on rank %d from rank %d tag 9: comm: arguments do not match: datatype of the message from rank %d (tag 9): its 3 bytes are not a whole number of int64", me, me, me))
	_, err = comm.Recv(ctx, c, make([]int64, 1), me, 9)
	require.ErrorIs(t, err, comm.ErrMismatch)
	assert.ErrorContains(t, err, fmt.Sprintf("mpi: Recv on rank %d from rank %d tag 9: comm: arguments do not match: ", me, me))
	_, err = sreq.Wait(ctx)
	require.NoError(t, err)

	// Invalid arguments are caught in Go before MPI.
	err = c.Send(ctx, comm.BufOf([]int32{1}), c.Size(), 0)
	assert.ErrorIs(t, err, comm.ErrInvalidArg)
	_, err = c.Isend(comm.BufOf([]int32{1}), 0, -3)
	assert.ErrorIs(t, err, comm.ErrInvalidArg)
}

// TestTagUB: the largest tag the library takes (MPI_TAG_UB, read at
// Init) goes through; one more is a *comm.ArgError naming the limit from
// every point-to-point call, before MPI sees it (MPICH's 2^28-1 was
// checked against 2^31-1, and MPI's own error came back).
func TestTagUB(t *testing.T) {
	c := splitAll(t)
	ub, me := c.TagUB(), c.Rank()
	assert.GreaterOrEqual(t, ub, 32767, "MPI's promise")
	assert.LessOrEqual(t, ub, math.MaxInt32)
	if mpi.Library() == "openmpi" {
		assert.Equal(t, math.MaxInt32, ub)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sreq, err := comm.Isend(c, []int64{42}, me, ub)
	require.NoError(t, err)
	got := make([]int64, 1)
	st, err := comm.Recv(ctx, c, got, me, ub)
	require.NoError(t, err)
	assert.Equal(t, ub, st.Tag)
	assert.Equal(t, int64(42), got[0])
	_, err = sreq.Wait(ctx)
	require.NoError(t, err)

	bad := ub + 1
	buf := []int64{1}
	calls := map[string]func() error{
		"Send":  func() error { return comm.Send(ctx, c, buf, me, bad) },
		"Ssend": func() error { return comm.Ssend(ctx, c, buf, me, bad) },
		"Isend": func() error { _, err := comm.Isend(c, buf, me, bad); return err },
		"Irecv": func() error { _, err := comm.Irecv(c, buf, me, bad); return err },
		"Recv":  func() error { _, err := comm.Recv(ctx, c, buf, me, bad); return err },
		"Sendrecv": func() error {
			_, err := comm.Sendrecv(ctx, c, buf, me, 0, make([]int64, 1), me, bad)
			return err
		},
		"Probe":    func() error { _, err := c.Probe(ctx, comm.Int64, me, bad); return err },
		"Iprobe":   func() error { _, _, err := c.Iprobe(comm.Int64, me, bad); return err },
		"Mprobe":   func() error { _, err := c.Mprobe(ctx, comm.Int64, me, bad); return err },
		"SendInit": func() error { _, err := comm.SendInit(c, buf, me, bad); return err },
		"RecvInit": func() error { _, err := comm.RecvInit(c, buf, me, bad); return err },
	}
	for _, name := range sortedNames(calls) {
		err := calls[name]()
		var ae *comm.ArgError
		if assert.ErrorAs(t, err, &ae, name) {
			assert.Equal(t, me, ae.Rank, name)
			want := fmt.Sprintf("tag %d exceeds %d, the largest this MPI library takes (MPI_TAG_UB", bad, ub)
			if bad > comm.MaxTag { // Open MPI's MPI_TAG_UB is MaxTag: the tag is no int at all
				want = fmt.Sprintf("tag %d exceeds %d (comm.MaxTag)", bad, comm.MaxTag)
			}
			assert.Contains(t, ae.Detail, want, name)
		}
	}
}

// TestMismatchEveryRank provokes each kind of disagreement and checks that
// every rank gets the same error and that the communicator still works.
func TestMismatchEveryRank(t *testing.T) {
	c := splitAll(t)
	n, me := c.Size(), c.Rank()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	healthy := func() {
		t.Helper()
		sum, err := comm.AllReduce(ctx, c, []int64{int64(me)}, comm.Sum)
		require.NoError(t, err)
		require.Equal(t, int64(n*(n-1)/2), sum[0])
	}
	if n > 1 {
		// Counts differ: rank r passes r+1 elements.
		_, err := comm.AllReduce(ctx, c, make([]float64, me+1), comm.Sum)
		var mm *comm.MismatchError
		require.ErrorAs(t, err, &mm, "rank %d", me)
		assert.Contains(t, mm.Detail, "count: rank 0 has 1, rank 1 has 2")
		healthy()

		// Different collectives: rank 0 broadcasts, the others reduce.
		if me == 0 {
			err = comm.Bcast(ctx, c, []float64{1}, 0)
		} else {
			_, err = comm.AllReduce(ctx, c, []float64{1}, comm.Sum)
		}
		require.ErrorAs(t, err, &mm, "rank %d", me)
		assert.Contains(t, mm.Detail, "call: rank 0 has Bcast, rank 1 has AllReduce")
		healthy()

		// Datatypes differ.
		if me == n-1 {
			_, err = comm.AllReduce(ctx, c, []float32{1}, comm.Sum)
		} else {
			_, err = comm.AllReduce(ctx, c, []float64{1}, comm.Sum)
		}
		require.ErrorIs(t, err, comm.ErrMismatch, "rank %d", me)
		assert.Contains(t, err.Error(), "datatype")
		healthy()

		// ReduceScatterBlock lengths differ (2n, 2n+1, ...: some do not
		// split into n blocks): a mismatch first, as on comm/local.
		_, err = comm.ReduceScatterBlock(ctx, c, make([]int64, 2*n+me), comm.Sum)
		require.ErrorAs(t, err, &mm, "rank %d", me)
		assert.Contains(t, mm.Detail, fmt.Sprintf("count: rank 0 has %d, rank 1 has %d", 2*n, 2*n+1))
		healthy()
	}
	// A ReduceScatterBlock length every rank passes that does not split
	// into n blocks: an ArgError on every rank.
	if n > 1 {
		_, err := comm.ReduceScatterBlock(ctx, c, make([]int64, n+1), comm.Sum)
		var ae *comm.ArgError
		require.ErrorAs(t, err, &ae, "rank %d", me)
		assert.Contains(t, ae.Detail, fmt.Sprintf("%d elements do not split into %d equal blocks", n+1, n))
		healthy()
	}
	// Root out of range on the last rank only: an ArgError naming it.
	root := 0
	if me == n-1 {
		root = n + 5
	}
	err := comm.Bcast(ctx, c, []int32{1, 2}, root)
	var ae *comm.ArgError
	require.ErrorAs(t, err, &ae, "rank %d", me)
	assert.Equal(t, n-1, ae.Rank)
	assert.Contains(t, ae.Detail, "root")
	healthy()

	// Counts that do not add up on root of a Scatter.
	err = c.Scatter(ctx, comm.BufOf(make([]int32, 3)), make([]int, n), 0, func(k int) []byte { return make([]byte, 4*k) })
	require.ErrorAs(t, err, &ae, "rank %d", me)
	assert.Equal(t, 0, ae.Rank)
	healthy()
}

// TestCanceledCollective shows what MPI allows for a rank that never
// arrives: the others wait until their deadline, then get an error wrapping
// context.DeadlineExceeded and ErrBroken, and the communicator stays broken.
// The abandoned MPI_Iallreduce stays with MPI; rank 0 completes it later so
// that MPI's state stays clean for the following tests.
//
// In the blocking form (WithBlocking, PZ_COMM_BLOCKING=1) a ctx is looked
// at before each MPI call only, and the test is skipped.
func TestCanceledCollective(t *testing.T) {
	if world.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	c := splitAll(t)
	if c.Blocking() {
		// Rank 1 would wait inside MPI_Allreduce for good, and rank 0 in
		// the world's Barrier.
		t.Skip(skipBlockingCtx)
	}
	c.SetCheck(false) // the pending operation is then the AllReduce itself
	if c.Rank() != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := comm.AllReduce(ctx, c, []float64{1}, comm.Sum)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, comm.ErrBroken)
		err = c.Barrier(context.Background())
		require.ErrorIs(t, err, comm.ErrBroken)
		// The Barrier's own context did not end: its error names the
		// earlier one's end without wrapping it.
		require.NotErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "an earlier collective was abandoned: ")
	}
	require.NoError(t, world.Barrier(context.Background()))
	if c.Rank() == 0 {
		// Rank 0 arrives late; its MPI_Iallreduce matches the abandoned ones.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sum, err := comm.AllReduce(ctx, c, []float64{1}, comm.Sum)
		require.NoError(t, err)
		assert.Equal(t, float64(c.Size()), sum[0])
	}
	require.NoError(t, world.Barrier(context.Background()))
}

func TestSplitUndefinedAndFree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	color := comm.Undefined
	if world.Rank()%2 == 0 {
		color = 0
	}
	sub, err := world.Split(ctx, color, -world.Rank())
	require.NoError(t, err)
	if color == comm.Undefined {
		assert.Nil(t, sub)
		return
	}
	require.NotNil(t, sub)
	// Keys reverse the order.
	evens := (world.Size() + 1) / 2
	assert.Equal(t, evens, sub.Size())
	assert.Equal(t, evens-1-world.Rank()/2, sub.Rank())
	require.NoError(t, sub.Free())
	assert.ErrorIs(t, sub.Barrier(ctx), comm.ErrFreed)
	assert.ErrorIs(t, sub.Free(), comm.ErrFreed)
}

// stallEnv selects the stalled job of TestStallEndsJob.
const stallEnv = "PZ_MPI_TEST_STALL"

// stallColl are the collectives TestStallEndsJob leaves rank 0 waiting
// in, by name: the agreement step (check on), and the blocking calls
// that skip it (check off), with what the watch's report names.
var stallColl = map[string]struct {
	check  bool
	wait   func(c comm.Comm) error
	report string
}{
	"allreduce": {true, func(c comm.Comm) error {
		_, err := comm.AllReduce(context.Background(), c, []float64{1}, comm.Sum)
		return err
	}, "AllReduce's agreement step (MPI_Allreduce) (collective #"},
	// The user's call is named, not the agreement step's MPI call alone.
	"barrier": {true, func(c comm.Comm) error {
		return c.Barrier(context.Background())
	}, "Barrier's agreement step (MPI_Allreduce) (collective #"},
	"allreduce-nocheck": {false, func(c comm.Comm) error {
		_, err := comm.AllReduce(context.Background(), c, []float64{1}, comm.Sum)
		return err
	}, "MPI_Allreduce (collective #"},
	"bcast-nocheck": {false, func(c comm.Comm) error {
		return comm.Bcast(context.Background(), c, []float64{1}, 1)
	}, "MPI_Bcast (collective #"},
	"reduce-nocheck": {false, func(c comm.Comm) error {
		_, err := comm.Reduce(context.Background(), c, []float64{1}, comm.Sum, 0)
		return err
	}, "MPI_Reduce (collective #"},
	"barrier-nocheck": {false, func(c comm.Comm) error {
		return c.Barrier(context.Background())
	}, "MPI_Barrier (collective #"},
	"allgatherto-nocheck": {false, func(c comm.Comm) error {
		return comm.AllGatherTo(context.Background(), c, make([]float64, 2), []float64{1})
	}, "MPI_Allgather (collective #"},
}

// TestStallEndsJob: rank 1 never enters a collective that rank 0 waits
// in, with no deadline. Rank 0 says every second what it waits in, and
// after PZ_COMM_TIMEOUT it says so and ends; mpirun ends the job.
func TestStallEndsJob(t *testing.T) {
	if underLauncher() {
		mode := os.Getenv(stallEnv)
		if mode == "" {
			t.Skip("run by TestStallEndsJob under its own mpirun")
		}
		if world.Rank() == 0 {
			world.SetCheck(stallColl[mode].check)
			err := stallColl[mode].wait(world)
			t.Fatalf("the stalled collective returned: %v", err)
		}
		select {} // rank 1 is elsewhere: it never takes part
	}
	for _, mode := range sortedNames(stallColl) {
		t.Run(mode, func(t *testing.T) {
			s := runStalledJob(t, "TestStallEndsJob", stallEnv+"="+mode, "PZ_COMM_TIMEOUT=3s", "PZ_COMM_REPORT=1s")
			require.Contains(t, s, stallColl[mode].report, s)
			require.Contains(t, s, "a rank that returned early", s)
			require.Contains(t, s, "ending the job (PZ_COMM_TIMEOUT=3s)", s)
			require.NotContains(t, s, "the stalled collective returned")
		})
	}
}

// runStalledJob runs test on 2 ranks under mpirun with env added, as a
// stalled job: the stall watch must end it (within two minutes) with a
// failure, having said on stderr that rank 0 waits. It returns the job's
// output.
func runStalledJob(t *testing.T, test string, env ...string) string {
	t.Helper()
	s, err := ownJob(t, test, 2*time.Minute, env...)
	require.Error(t, err, "the stalled job must fail:\n%s", s)
	require.Contains(t, s, "pz mpi: rank 0 of 2: waiting", s)
	return s
}

// ownJob runs test alone on 2 ranks of a job of its own under mpirun
// (-test.v), with env added to the environment (the variable that tells
// the ranks to run it among them), as the tests do that finalize MPI or
// end their job. It skips t where mpirun is missing, fails it when the
// job has not ended within limit, and returns the job's output and its
// error (mpirun's exit status).
func ownJob(t *testing.T, test string, limit time.Duration, env ...string) (string, error) {
	t.Helper()
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not found: install Open MPI (Debian: openmpi-bin)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	args := append(lau.Args(2), os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "the job did not end within %v:\n%s", limit, out)
	return string(out), err
}

// requireNoFailure fails t when the output s of an ownJob says that a
// test failed or a rank crashed on a job's rank.
func requireNoFailure(t *testing.T, s string) {
	t.Helper()
	require.NotContains(t, s, "--- FAIL", s)
	require.False(t, strings.Contains(s, "SIGSEGV") || strings.Contains(s, "Segmentation fault"), "a rank crashed:\n%s", s)
}

// stallP2PEnv selects the stalled job of TestStallP2PEndsJob: the wait
// rank 0 makes.
const stallP2PEnv = "PZ_MPI_TEST_STALL_P2P"

// stallP2P are the point-to-point waits TestStallP2PEndsJob leaves
// unanswered, by name: what rank 0 calls (rank 1 never sends), and what
// the watch's report says. A cancelable context takes the polled path
// (MPI_Improbe, MPI_Iprobe, MPI_Test), context.Background the blocking
// MPI call.
var stallP2P = map[string]struct {
	wait   func(ctx context.Context, c comm.Comm) error
	report string
}{
	"recv": {func(ctx context.Context, c comm.Comm) error {
		_, _, err := comm.RecvNew[float64](ctx, c, 1, 3)
		return err
	}, "Recv from rank 1, tag 3"},
	"recvbuf": {func(ctx context.Context, c comm.Comm) error {
		_, err := comm.Recv(ctx, c, make([]float64, 1), 1, 3)
		return err
	}, "Recv from rank 1, tag 3"},
	"recv-any-blocking": {func(_ context.Context, c comm.Comm) error {
		_, _, err := comm.RecvNew[float64](context.Background(), c, comm.AnySource, comm.AnyTag)
		return err
	}, "Recv from any rank, any tag"},
	"probe": {func(ctx context.Context, c comm.Comm) error {
		_, err := c.Probe(ctx, comm.Float64, 1, comm.AnyTag)
		return err
	}, "Probe from rank 1, any tag"},
	"mprobe-blocking": {func(_ context.Context, c comm.Comm) error {
		_, err := c.Mprobe(context.Background(), comm.Float64, 1, 4)
		return err
	}, "Mprobe from rank 1, tag 4"},
	"waitall": {func(ctx context.Context, c comm.Comm) error {
		r, err := comm.Irecv(c, make([]float64, 1), 1, 5)
		if err != nil {
			return err
		}
		_, err = comm.WaitAll(ctx, []comm.Request{r})
		return err
	}, "Wait for an Irecv from rank 1, tag 5"},
	"waitany": {func(ctx context.Context, c comm.Comm) error {
		r, err := comm.Irecv(c, make([]float64, 1), 1, 6)
		if err != nil {
			return err
		}
		_, err = comm.WaitAny(ctx, []comm.Request{nil, r})
		return err
	}, "Wait for an Irecv from rank 1, tag 6"},
	"waitsome-blocking": {func(_ context.Context, c comm.Comm) error {
		r, err := comm.Irecv(c, make([]float64, 1), 1, 7)
		if err != nil {
			return err
		}
		_, err = comm.WaitSome(context.Background(), []comm.Request{r})
		return err
	}, "Wait for an Irecv from rank 1, tag 7"},
	"wait-blocking": {func(_ context.Context, c comm.Comm) error {
		r, err := comm.Irecv(c, make([]float64, 1), 1, 5)
		if err != nil {
			return err
		}
		_, err = r.Wait(context.Background())
		return err
	}, "Wait for an Irecv from rank 1, tag 5"},
}

// TestStallP2PEndsJob runs a job for each of stallP2P's waits in which
// rank 0 waits for a message rank 1 never sends, and checks that the
// watch reports the wait and ends the job at PZ_COMM_TIMEOUT, on the
// polled path (a cancelable context, as runtimeview.Run's) as on the
// blocking one.
func TestStallP2PEndsJob(t *testing.T) {
	if underLauncher() {
		mode := os.Getenv(stallP2PEnv)
		if mode == "" {
			t.Skip("run by TestStallP2PEndsJob under its own mpirun")
		}
		if world.Rank() == 0 {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := stallP2P[mode].wait(ctx, world)
			t.Fatalf("the stalled %s returned: %v", mode, err)
		}
		select {} // rank 1 is elsewhere: it never sends
	}
	for _, mode := range sortedNames(stallP2P) {
		t.Run(mode, func(t *testing.T) {
			s := runStalledJob(t, "TestStallP2PEndsJob", stallP2PEnv+"="+mode, "PZ_COMM_TIMEOUT=2s", "PZ_COMM_REPORT=500ms")
			require.Contains(t, s, " in "+stallP2P[mode].report+"; a peer that returned early", s)
			require.Contains(t, s, " in "+stallP2P[mode].report+"; ending the job (PZ_COMM_TIMEOUT=2s)", s)
			require.NotContains(t, s, "the stalled "+mode+" returned")
		})
	}
}

// idleEnv selects the job of TestIdleWaitNotWatched.
const idleEnv = "PZ_MPI_TEST_IDLE"

// TestIdleWaitNotWatched: a wait made with comm.Idle (a worker waiting
// for its next task) lasts past the stall report interval and the
// timeout without a report and without ending the job, on the polled and
// the blocking path.
func TestIdleWaitNotWatched(t *testing.T) {
	if underLauncher() {
		if os.Getenv(idleEnv) == "" {
			t.Skip("run by TestIdleWaitNotWatched under its own mpirun")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if world.Rank() == 0 {
			got, _, err := comm.RecvNew[float64](comm.Idle(ctx), world, 1, 3)
			require.NoError(t, err)
			require.Equal(t, []float64{1}, got)
			got, _, err = comm.RecvNew[float64](comm.Idle(context.Background()), world, 1, 4)
			require.NoError(t, err)
			require.Equal(t, []float64{2}, got)
			return
		}
		// Past PZ_COMM_TIMEOUT each time: the idle waits must outlast it.
		time.Sleep(1500 * time.Millisecond)
		require.NoError(t, comm.Send(ctx, world, []float64{1}, 0, 3))
		time.Sleep(1500 * time.Millisecond)
		require.NoError(t, comm.Send(ctx, world, []float64{2}, 0, 4))
		return
	}
	s, err := ownJob(t, "TestIdleWaitNotWatched", time.Minute, idleEnv+"=1", "PZ_COMM_TIMEOUT=1s", "PZ_COMM_REPORT=300ms")
	require.NoError(t, err, "%s", s)
	assert.NotContains(t, s, "pz mpi: rank 0 of 2: waiting")
}

// TestUserOpPanicEveryRank: a user op that panics on one rank panics
// there after the reduction, and every other rank gets an error naming
// that rank (mpi.ErrUserOpPanicked, a *comm.RankError) instead of a
// result MPI computed without the op's work: with the blocking and the
// polled calls, one element and many (which MPI splits into segments),
// AllReduceUser and ReduceUser. The op panics on the last rank, where
// MPI calls it there (at the root of a Reduce always; in an AllReduce
// as the library's algorithm has it); where it was not called, every
// rank has the right result. The communicator works afterwards.
func TestUserOpPanicEveryRank(t *testing.T) {
	sub := splitAll(t)
	n, me := sub.Size(), sub.Rank()
	if n == 1 {
		t.Skip("on one rank MPI calls no op")
	}
	bad := n - 1
	cancelable, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ctx := range []context.Context{context.Background(), cancelable} {
		for _, count := range []int{1, 100000} {
			for _, root := range []int{-1, bad} { // -1: AllReduceUser
				name := fmt.Sprintf("blocking=%v/count=%d/root=%d", ctx.Done() == nil, count, root)
				t.Run(name, func(t *testing.T) {
					op := comm.UserOp("boom", func(in, inout []float64) {
						if me == bad {
							panic("user op exploded")
						}
						for i := range inout {
							inout[i] += in[i]
						}
					}, true)
					send := make([]float64, count)
					for i := range send {
						send[i] = 1
					}
					var got []float64
					var err error
					p := func() (p any) {
						defer func() { p = recover() }()
						if root < 0 {
							got, err = comm.AllReduceUser(ctx, sub, send, op)
						} else {
							got, err = comm.ReduceUser(ctx, sub, send, op, root)
						}
						return nil
					}()
					// Every rank learns whether the op panicked on bad;
					// asserts, not requires, keep the ranks in step.
					panicked, aerr := comm.AllReduce(ctx, sub, []int32{int32(b2i(p != nil))}, comm.Max)
					require.NoError(t, aerr, "rank %d: the communicator afterwards", me)
					switch {
					case me == bad && p != nil:
						assert.Equal(t, "user op exploded", p, "rank %d: the op's own panic", me)
					case p != nil:
						t.Errorf("rank %d panicked: %v", me, p)
					case panicked[0] != 0:
						assert.ErrorIs(t, err, mpi.ErrUserOpPanicked, "rank %d", me)
						var re *comm.RankError
						if assert.ErrorAs(t, err, &re, "rank %d", me) {
							assert.Equal(t, bad, re.Rank, "rank %d", me)
						}
						assert.ErrorContains(t, err, `user op "boom" panicked`, "rank %d", me)
						assert.Regexp(t, `^mpi: (All)?ReduceUser on rank \d+: rank \d+: the user op`, err.Error(), "rank %d: the call named once", me)
					default: // the library never called the op on bad
						assert.NoError(t, err, "rank %d", me)
						if root < 0 || me == root {
							assert.Equal(t, float64(n), got[count-1], "rank %d", me)
						}
					}
					if root >= 0 {
						assert.Equal(t, int32(1), panicked[0], "a Reduce's root combines")
					}
				})
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestReduceInPlaceAtLastRank reduces 3000 float64 in place at the last
// rank with the blocking call (context.Background), check on and off:
// MPICH before 4.2 crashed in MPI_Reduce with MPI_IN_PLACE past 2 KiB at
// a root other than 0 (pmodels/mpich#6540), so pz takes MPI_Ireduce
// there.
func TestReduceInPlaceAtLastRank(t *testing.T) {
	sub := splitAll(t)
	ctx := context.Background()
	n, me := sub.Size(), sub.Rank()
	for _, check := range []bool{true, false} {
		sub.SetCheck(check)
		b := make([]float64, 3000)
		for i := range b {
			b[i] = float64(me + i)
		}
		in := comm.BufOf(b)
		require.NoError(t, sub.Reduce(ctx, in, in, comm.Sum, n-1), "check %v", check)
		if me == n-1 {
			for _, i := range []int{0, 1500, 2999} {
				require.Equal(t, float64(n*(n-1)/2+n*i), b[i], "element %d, check %v", i, check)
			}
		}
	}
}

// TestSmallMessagesStaged sends messages around the size below which
// Isend and Irecv pass data through C memory instead of pinning the
// caller's buffer (4 KiB), each rank to the next of a ring, into a
// receive buffer one element longer than the message: every element
// arrives, the count is the message's, and the element past it keeps
// its value (a staged receive's C memory starts as a copy of the
// buffer). Receives
// are posted before, and after, the matching send, and completed by
// Wait and by Test.
func TestSmallMessagesStaged(t *testing.T) {
	sub := splitAll(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, me := sub.Size(), sub.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	for _, bytes := range []int{8, 4088, 4096, 4104, 1 << 16} {
		for _, recvFirst := range []bool{true, false} {
			count := bytes / 8
			send := make([]float64, count)
			for i := range send {
				send[i] = float64(1000*me + i)
			}
			into := make([]float64, count+1)
			into[count] = -7
			var rr, sr comm.Request
			var err error
			if recvFirst {
				rr, err = comm.Irecv(sub, into, left, 3)
				require.NoError(t, err)
			}
			sr, err = comm.Isend(sub, send, right, 3)
			require.NoError(t, err)
			if !recvFirst {
				require.NoError(t, sub.Barrier(ctx)) // the message waits, unexpected, at the receiver
				rr, err = comm.Irecv(sub, into, left, 3)
				require.NoError(t, err)
			}
			var st comm.Status
			if recvFirst {
				st, err = rr.Wait(ctx)
			} else {
				for {
					var done bool
					done, st, err = rr.Test()
					if done || ctx.Err() != nil {
						break
					}
					runtime.Gosched()
				}
			}
			require.NoError(t, err, "%d bytes", bytes)
			_, err = sr.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, count, st.Count, "%d bytes", bytes)
			for i := range count {
				require.Equal(t, float64(1000*left+i), into[i], "%d bytes, element %d", bytes, i)
			}
			require.Equal(t, float64(-7), into[count], "%d bytes: the element past the message changed", bytes)
		}
	}
}

// TestWaitAllBlockingAndPolling: comm.WaitAll of several MPI requests
// with a ctx that cannot be canceled (each Wait calls MPI_Wait) gives what
// it gives with one that can (each Wait polls MPI_Test): every status,
// the data, a truncated receive's error naming its index, a request
// completed before, and every entry set to nil. A truncated receive
// leaves in its buffer what the library wrote, never another message's
// bytes (a receive of at most 4 KiB passes through memory a request
// slot keeps, and used before).
func TestWaitAllBlockingAndPolling(t *testing.T) {
	sub := splitAll(t)
	n, me := sub.Size(), sub.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	background := context.Background()
	cancelable, cancel := context.WithTimeout(background, time.Minute)
	defer cancel()
	type result struct {
		sts   []comm.Status
		err   error
		short []int32
		long  []float64
	}
	run := func(ctx context.Context) result {
		short := []int32{-1, -1}      // the left neighbour sends 6: truncated
		long := make([]float64, 3000) // past the 4 KiB staged size
		ahead := make([]int32, 1)     // completed before WaitAll
		send6 := []int32{1, 2, 3, 4, 5, int32(me)}
		sendLong := make([]float64, 3000) // 24 KiB
		for i := range sendLong {
			sendLong[i] = float64(me*10000 + i + 7)
		}
		r0, err := comm.Irecv(sub, short, left, 1)
		require.NoError(t, err)
		r1, err := comm.Irecv(sub, long, left, 2)
		require.NoError(t, err)
		r2, err := comm.Irecv(sub, ahead, left, 3)
		require.NoError(t, err)
		s0, err := comm.Isend(sub, send6, right, 1)
		require.NoError(t, err)
		s1, err := comm.Isend(sub, sendLong, right, 2)
		require.NoError(t, err)
		s2, err := comm.Isend(sub, []int32{int32(me)}, right, 3)
		require.NoError(t, err)
		_, err = r2.Wait(cancelable)
		require.NoError(t, err)
		reqs := []comm.Request{r0, nil, r1, r2, s0, s1, s2}
		sts, err := comm.WaitAll(ctx, reqs)
		for i, r := range reqs {
			require.Nil(t, r, "entry %d left in the set", i)
		}
		require.Equal(t, int32(left), ahead[0])
		return result{sts: sts, err: err, short: short, long: long}
	}
	blocking, each := run(background), run(cancelable)
	// At one rank the messages are the rank's own, which Open MPI 4.1
	// truncates silently: the receive's room past its buffer tells.
	for _, r := range []result{blocking, each} {
		require.ErrorContains(t, r.err, "request 0: ")
		require.ErrorIs(t, r.err, comm.ErrTruncated)
	}
	assert.Equal(t, each.sts, blocking.sts)
	assert.Equal(t, each.short, blocking.short)
	// MPI leaves a truncated receive's buffer undefined: Open MPI
	// writes the message's start, MPICH nothing.
	assert.Contains(t, [][]int32{{1, 2}, {-1, -1}}, blocking.short, "a truncated receive's buffer")
	for _, i := range []int{0, 1500, 2999} {
		assert.Equal(t, float64(left*10000+i+7), blocking.long[i], "element %d", i)
	}
	assert.Equal(t, 3000, blocking.sts[2].Count)
	assert.Equal(t, left, blocking.sts[2].Source)
}

// TestFreedEnginesForgotten: a program that duplicates a communicator,
// runs a non-blocking collective on it and frees it, in a loop, leaves no
// engine behind for Finalize (the list of engines grew by one per
// communicator for the life of the process).
func TestFreedEnginesForgotten(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := mpi.Engines(world)
	for i := range 50 {
		d, err := world.Dup(ctx)
		require.NoError(t, err)
		out := make([]float64, 1)
		req, err := d.Iallreduce(comm.BufOf([]float64{float64(i)}), comm.BufOf(out), comm.Sum)
		require.NoError(t, err)
		_, err = req.Wait(ctx)
		require.NoError(t, err)
		assert.Equal(t, float64(i*d.Size()), out[0])
		require.NoError(t, d.Free())
	}
	assert.LessOrEqual(t, mpi.Engines(world), before+1, "engines kept after 50 communicators were freed")
}
