//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// skipAdopted skips a test of how World.Finalize finalizes MPI when the
// tests run on an MPI that TestMain initialized as an embedding program
// would (serializedEnv): Finalize leaves that MPI to its owner.
func skipAdopted(t *testing.T) {
	t.Helper()
	if serialized() {
		t.Skipf("%s=1: Init adopted MPI, and Finalize does not finalize it", serializedEnv)
	}
}

// unjoinedEnv selects the job of TestFinalizeWithUnjoinedCollective.
const unjoinedEnv = "PZ_MPI_TEST_UNJOINED"

// TestFinalizeWithUnjoinedCollective: rank 0 starts an Ibarrier that rank
// 1 never starts, then finalizes. Its Finalize waits for the engine's
// goroutine, inside MPI_Barrier, for the bound (shortened here to 200 ms)
// and then returns an error wrapping mpi.ErrUnfinalized that names the
// Ibarrier, without calling MPI_Finalize. (Before, it called MPI_Finalize
// with the goroutine inside MPI_Barrier, which is undefined: under Open
// MPI 4.1.4 rank 0 hung in MPI_Finalize until rank 1 exited and mpirun
// ended the job.) Rank 0 then exits from TestMain without MPI_Finalize
// (status 1: its world is finalized for pz, so the exit status cannot be
// agreed on), and mpirun reports it and ends the job, rank 1 included,
// which waits in MPI_Finalize. The parent checks what rank 0 said, and
// that the job ended. It runs so on an adopted MPI too (serializedEnv):
// there rank 0's Finalize says that the program must not finalize MPI
// yet, and TestMain, the program, exits without MPI_Finalize. (Before,
// an adopted World's Finalize returned nil with the engine's goroutine
// still testing the Ibarrier, and the program's MPI_Finalize crashed.)
func TestFinalizeWithUnjoinedCollective(t *testing.T) {
	if underLauncher() {
		if os.Getenv(unjoinedEnv) == "" {
			t.Skip("run by TestFinalizeWithUnjoinedCollective under its own mpirun")
		}
		require.Equal(t, 2, world.Size(), "runs on 2 ranks")
		if world.Rank() == 1 {
			// Rank 1 is elsewhere: it never starts the Ibarrier, and
			// finalizes (MPI_Finalize may wait there for rank 0).
			err := world.Finalize()
			fmt.Fprintf(os.Stderr, "rank 1: Finalize: %v\n", err)
			return
		}
		mpi.SetFinalizeWait(world, 200*time.Millisecond)
		req, err := world.Ibarrier()
		require.NoError(t, err)
		// Finalize must find the collective inside MPI, not queued
		// (Close fails a queued one without running it).
		require.Eventually(t, func() bool { return len(mpi.EnginesRunning(world)) > 0 }, time.Minute, time.Millisecond)
		start := time.Now()
		err = world.Finalize()
		fmt.Fprintf(os.Stderr, "rank 0: Finalize returned after %v: %v\n", time.Since(start), err)
		require.ErrorIs(t, err, mpi.ErrUnfinalized)
		require.ErrorContains(t, err, "Ibarrier #1 on rank 0 is still running: another rank has not taken part in it within 200ms")
		if serialized() {
			require.ErrorContains(t, err, "the program must not call MPI_Finalize yet")
		}
		require.ErrorIs(t, world.Finalize(), mpi.ErrUnfinalized, "a second Finalize returns the first one's error")
		assert.True(t, mpi.Initialized(), "MPI left initialized")
		done, _, _ := req.Test()
		assert.False(t, done, "the Ibarrier completed without rank 1")
		assert.Equal(t, []string{"Ibarrier #1 on rank 0"}, mpi.EnginesRunning(world))
		return
	}
	for _, mode := range []string{"started", "adopted"} {
		t.Run(mode, func(t *testing.T) {
			env := []string{unjoinedEnv + "=1"}
			if mode == "adopted" {
				env = append(env, serializedEnv+"=1")
			}
			s, err := ownJob(t, "TestFinalizeWithUnjoinedCollective", time.Minute, env...)
			// A rank exited without MPI_Finalize: mpirun says so and fails.
			require.Error(t, err, "%s", s)
			require.Contains(t, s, "rank 0: Finalize returned after ", s)
			require.Contains(t, s, "mpi: MPI left unfinalized: Finalize found non-blocking collectives still inside MPI: comm: Ibarrier #1 on rank 0 is still running", s)
			require.Contains(t, s, "--- PASS: TestFinalizeWithUnjoinedCollective", s)
			requireNoFailure(t, s)
			require.NotContains(t, s, "after MPI_FINALIZE", s)
		})
	}
}

// pendingEnv selects the job of TestWaitAfterFinalize.
const pendingEnv = "PZ_MPI_TEST_PENDING_AT_FINALIZE"

// TestWaitAfterFinalize: requests still pending when MPI is finalized -
// an Irecv that no message matches, a 1 MiB Isend that no receive takes,
// a started persistent receive, an Irecv the progress engine tests (its
// Done was asked for), an Irecv a goroutine waits for inside MPI_Wait -
// and a message taken by Mprobe: Finalize ends them (receives canceled,
// the send handed to MPI) and finalizes MPI; then Test, Wait, WaitAll,
// WaitAny, Cancel, Message.Recv and a persistent Free return at once,
// each error wrapping comm.ErrFreed, without calling MPI. (Before, a
// Wait or Test after Finalize called MPI_Test, and Open MPI aborted the
// process: "The MPI_Test() function was called after MPI_FINALIZE was
// invoked".) Runs on 2 ranks under its own mpirun, since it finalizes
// MPI; the job must end cleanly.
func TestWaitAfterFinalize(t *testing.T) {
	skipAdopted(t)
	if underLauncher() {
		if os.Getenv(pendingEnv) == "" {
			t.Skip("run by TestWaitAfterFinalize under its own mpirun")
		}
		me, n := world.Rank(), world.Size()
		other := (me + 1) % n
		ctx := context.Background()
		r1, err := comm.Irecv(world, make([]int32, 2), other, 1)
		require.NoError(t, err)
		s1, err := comm.Isend(world, make([]byte, 1<<20), other, 2)
		require.NoError(t, err)
		p1, err := comm.RecvInit(world, make([]float64, 1), comm.AnySource, 3)
		require.NoError(t, err)
		require.NoError(t, p1.Start())
		r2, err := comm.Irecv(world, make([]int32, 1), other, 4)
		require.NoError(t, err)
		done2 := r2.(comm.Notifier).Done() // the progress engine tests it
		r3, err := comm.Irecv(world, make([]int32, 1), other, 5)
		require.NoError(t, err)
		waited := make(chan error, 1)
		go func() {
			_, err := r3.Wait(context.Background()) // inside MPI_Wait
			waited <- err
		}()
		require.Eventually(t, func() bool { return mpi.WaitingInMPI(r3) }, time.Minute, time.Millisecond)
		require.NoError(t, comm.Send(ctx, world, []int64{9}, me, 6))
		msg, err := world.Mprobe(ctx, comm.Int64, me, 6)
		require.NoError(t, err)
		require.NoError(t, world.Barrier(ctx))

		require.NoError(t, world.Finalize())

		select {
		case err := <-waited:
			assert.ErrorIs(t, err, comm.ErrFreed, "the Wait inside MPI_Wait")
		case <-time.After(time.Minute):
			t.Fatal("the Wait inside MPI_Wait did not return")
		}
		select {
		case <-done2:
		default:
			t.Error("Done of an Irecv the progress engine tested is not closed")
		}
		for i, r := range []comm.Request{r1, s1, p1, r2, r3} {
			done, st, err := r.Test()
			assert.True(t, done, "request %d: Test", i)
			assert.ErrorIs(t, err, comm.ErrFreed, "request %d: Test", i)
			assert.NotErrorIs(t, err, comm.ErrCanceled, "request %d: Test", i)
			assert.Equal(t, comm.Status{}, st, "request %d", i)
			_, err = r.Wait(ctx)
			assert.ErrorIs(t, err, comm.ErrFreed, "request %d: Wait", i)
		}
		_, err = comm.WaitAll(ctx, []comm.Request{r1, s1, p1})
		assert.ErrorIs(t, err, comm.ErrFreed, "WaitAll")
		cp, err := comm.WaitAny(ctx, []comm.Request{nil, s1})
		assert.NoError(t, err)
		assert.Equal(t, 1, cp.Index)
		assert.ErrorIs(t, cp.Err, comm.ErrFreed, "WaitAny")
		assert.NoError(t, r1.(comm.Canceler).Cancel())
		_, err = msg.Recv(func(int) ([]byte, error) { return make([]byte, 8), nil })
		assert.ErrorIs(t, err, comm.ErrFreed, "Recv of a matched message")
		assert.NoError(t, p1.Free())
		assert.ErrorIs(t, comm.Send(ctx, world, []int64{1}, other, 7), comm.ErrFreed, "Send after Finalize")
		return
	}
	s, err := ownJob(t, "TestWaitAfterFinalize", time.Minute, pendingEnv+"=1")
	require.NoError(t, err, "%s", s)
	require.Equal(t, 2, strings.Count(s, "--- PASS: TestWaitAfterFinalize"), s)
	requireNoFailure(t, s)
	require.NotContains(t, s, "after MPI_FINALIZE", s)
}

// sendHeldEnv selects the job of TestFinalizeWithSendInWait.
const sendHeldEnv = "PZ_MPI_TEST_SEND_HELD_AT_FINALIZE"

// TestFinalizeWithSendInWait: rank 0 Isends 1 MiB that rank 1 never
// receives, and a goroutine waits for it inside MPI_Wait (a Wait whose ctx
// cannot be canceled). MPI cannot cancel a send nor end that MPI_Wait, so
// Finalize waits for it for its bound (2 s) and then returns an error
// wrapping mpi.ErrUnfinalized that names the send, without calling
// MPI_Finalize (a thread is inside MPI); the Wait stays inside MPI. Rank 0
// then exits without MPI_Finalize, and mpirun ends the job.
func TestFinalizeWithSendInWait(t *testing.T) {
	skipAdopted(t)
	if underLauncher() {
		if os.Getenv(sendHeldEnv) == "" {
			t.Skip("run by TestFinalizeWithSendInWait under its own mpirun")
		}
		require.Equal(t, 2, world.Size(), "runs on 2 ranks")
		if world.Rank() == 1 {
			err := world.Finalize() // never receives rank 0's message
			fmt.Fprintf(os.Stderr, "rank 1: Finalize: %v\n", err)
			return
		}
		s, err := comm.Isend(world, make([]byte, 1<<20), 1, 9)
		require.NoError(t, err)
		waited := make(chan error, 1)
		go func() {
			_, err := s.Wait(context.Background()) // inside MPI_Wait
			waited <- err
		}()
		// A send's Wait holds the request inside MPI_Wait.
		require.Eventually(t, func() bool { return mpi.Held(s) }, time.Minute, time.Millisecond)
		start := time.Now()
		err = world.Finalize()
		took := time.Since(start)
		fmt.Fprintf(os.Stderr, "rank 0: Finalize returned after %v: %v\n", took, err)
		require.ErrorIs(t, err, mpi.ErrUnfinalized)
		require.ErrorContains(t, err, "Finalize found waits for sends still inside MPI_Wait after 2s")
		require.ErrorContains(t, err, "Wait for an Isend to rank 1, tag 9 is inside MPI_Wait on rank 0")
		assert.GreaterOrEqual(t, took, 2*time.Second, "Finalize waited for the send for its bound")
		assert.True(t, mpi.Initialized(), "MPI left initialized")
		select {
		case err := <-waited:
			t.Errorf("the Wait inside MPI_Wait returned (%v): MPI completed a send no rank received", err)
		default:
		}
		return
	}
	s, err := ownJob(t, "TestFinalizeWithSendInWait", time.Minute, sendHeldEnv+"=1")
	// A rank exited without MPI_Finalize: mpirun says so and fails.
	require.Error(t, err, "%s", s)
	require.Contains(t, s, "rank 0: Finalize returned after ", s)
	require.Contains(t, s, "--- PASS: TestFinalizeWithSendInWait", s)
	requireNoFailure(t, s)
}

// finalizeWaitEnv selects the job of TestFinalizeWaitReported.
const finalizeWaitEnv = "PZ_MPI_TEST_FINALIZE_WAIT"

// TestFinalizeWaitReported: rank 1 finalizes while rank 0 never does (it
// is elsewhere, as a rank that waits for rank 1 in a collective rank 1
// never called). Rank 1 waits in MPI_Finalize, which waits for every
// rank: it says so after each report interval, and past PZ_COMM_TIMEOUT
// it ends, and mpirun ends the job. (It waited there in silence for
// ever.)
func TestFinalizeWaitReported(t *testing.T) {
	skipAdopted(t)
	if underLauncher() {
		if os.Getenv(finalizeWaitEnv) == "" {
			t.Skip("run by TestFinalizeWaitReported under its own mpirun")
		}
		require.Equal(t, 2, world.Size(), "runs on 2 ranks")
		if world.Rank() == 1 {
			err := world.Finalize()
			t.Fatalf("Finalize returned without rank 0: %v", err)
		}
		select {} // rank 0 is elsewhere: it never finalizes
	}
	s, err := ownJob(t, "TestFinalizeWaitReported", time.Minute, finalizeWaitEnv+"=1", "PZ_COMM_REPORT=500ms", "PZ_COMM_TIMEOUT=3s")
	require.Error(t, err, "the job must fail:\n%s", s)
	require.Contains(t, s, "pz mpi: rank 1 of 2: waiting ", s)
	require.Contains(t, s, "in MPI_Finalize: this rank is done, and MPI_Finalize waits for every rank to call it", s)
	require.Contains(t, s, "the job ends after 3s (PZ_COMM_TIMEOUT)", s)
	require.Contains(t, s, "in MPI_Finalize; ending the job (PZ_COMM_TIMEOUT=3s)", s)
	require.NotContains(t, s, "Finalize returned without rank 0", s)
}

// endedEnv selects the job of TestFinalizeEndsPendingWork: "started" (pz
// initializes MPI) or "adopted" (TestMain initializes it first, as a
// program embedding pz, serializedEnv).
const endedEnv = "PZ_MPI_TEST_FINALIZE_ENDS"

// TestFinalizeEndsPendingWork: with work of pz still pending - an
// Ibarrier and an Iallreduce that every rank starts, an Irecv that no message matches, a started
// persistent receive, an Irecv the progress engine tests (its Done was
// asked for), a WaitAny on two Irecvs (the progress engine), a user
// reduction done and a Dup, a Split and an Import not freed - Finalize
// returns nil: the collectives complete (every rank takes part), every
// receive ends with an error
// wrapping comm.ErrFreed, and later calls return mpi.ErrFinalized without
// MPI. On an adopted MPI (Init did not start it) Finalize then leaves MPI
// initialized and holding nothing pz made (TestMain checks: no
// communicator, persistent request, type or op, MPI_COMM_WORLD's error
// handler back), and TestMain's MPI_Finalize, the program's, ends the
// job cleanly. (Before, an adopted World's Finalize did nothing: the
// engine's goroutine and the progress engine went on testing requests
// after the program's MPI_Finalize - a SIGSEGV in pz_test_u, or Open
// MPI's "MPI_Test() was called after MPI_FINALIZE" abort.)
func TestFinalizeEndsPendingWork(t *testing.T) {
	if underLauncher() {
		mode := os.Getenv(endedEnv)
		if mode == "" {
			t.Skip("run by TestFinalizeEndsPendingWork under its own mpirun")
		}
		require.Equal(t, mode == "started", world.Started())
		me, n := world.Rank(), world.Size()
		other := (me + 1) % n
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sum, err := comm.AllReduceUser(ctx, world, []int64{1}, comm.UserOp("sum", func(in, inout []int64) {
			for i := range in {
				inout[i] += in[i]
			}
		}, true))
		require.NoError(t, err)
		require.Equal(t, int64(n), sum[0])
		d, err := world.Dup(ctx)
		require.NoError(t, err)
		s, err := world.Split(ctx, 0, me)
		require.NoError(t, err)
		imp, err := world.Import(ctx, world.Handle())
		require.NoError(t, err)

		r1, err := comm.Irecv(world, make([]int32, 1), other, 1)
		require.NoError(t, err)
		p1, err := comm.RecvInit(d, make([]float64, 1), comm.AnySource, 2)
		require.NoError(t, err)
		require.NoError(t, p1.Start())
		r2, err := comm.Irecv(s, make([]int32, 1), other, 3)
		require.NoError(t, err)
		done2 := r2.(comm.Notifier).Done() // the progress engine tests it
		a1, err := comm.Irecv(imp, make([]int32, 1), other, 4)
		require.NoError(t, err)
		a2, err := comm.Irecv(imp, make([]int32, 1), other, 5)
		require.NoError(t, err)
		any := make(chan comm.Completion, 1)
		go func() {
			cp, err := comm.WaitAny(context.Background(), []comm.Request{a1, a2})
			assert.NoError(t, err, "WaitAny")
			any <- cp
		}()
		ib, err := world.Ibarrier()
		require.NoError(t, err)
		ia, err := d.Iallreduce(comm.BufOf([]int64{2}), comm.BufOf(make([]int64, 1)), comm.Sum)
		require.NoError(t, err)
		// Finalize must find the first collective inside MPI.
		require.Eventually(t, func() bool { return len(mpi.EnginesRunning(world)) > 0 || done(ib) }, time.Minute, time.Millisecond)

		require.NoError(t, world.Finalize())

		_, err = ib.Wait(ctx)
		assert.NoError(t, err, "the Ibarrier every rank started")
		_, err = ia.Wait(ctx)
		assert.NoError(t, err, "the Iallreduce every rank started")
		for i, r := range []comm.Request{r1, r2} {
			_, err := r.Wait(ctx)
			assert.ErrorIs(t, err, comm.ErrFreed, "Irecv %d", i)
		}
		select {
		case <-done2:
		default:
			t.Error("Done of an Irecv the progress engine tested is not closed")
		}
		select {
		case cp := <-any:
			assert.ErrorIs(t, cp.Err, comm.ErrFreed, "WaitAny's completion")
		case <-time.After(time.Minute):
			t.Fatal("WaitAny did not return")
		}
		_, err = p1.Wait(ctx)
		assert.ErrorIs(t, err, comm.ErrFreed, "the started persistent receive")
		assert.NoError(t, p1.Free())
		assert.ErrorIs(t, comm.Send(ctx, world, []int64{1}, other, 7), mpi.ErrFinalized)
		assert.ErrorIs(t, s.Barrier(ctx), mpi.ErrFinalized)
		_, err = d.Ibarrier()
		assert.ErrorIs(t, err, mpi.ErrFinalized)
		assert.ErrorIs(t, imp.Free(), mpi.ErrFinalized)
		assert.ErrorIs(t, world.Abort(3), mpi.ErrFinalized)
		assert.Equal(t, mode == "adopted", mpi.Initialized(), "an adopted MPI stays initialized")
		return
	}
	for _, mode := range []string{"started", "adopted"} {
		t.Run(mode, func(t *testing.T) {
			env := []string{endedEnv + "=" + mode}
			if mode == "adopted" {
				env = append(env, serializedEnv+"=1")
			}
			s, err := ownJob(t, "TestFinalizeEndsPendingWork", time.Minute, env...)
			require.NoError(t, err, "%s", s)
			require.Equal(t, 2, strings.Count(s, "--- PASS: TestFinalizeEndsPendingWork"), s)
			requireNoFailure(t, s)
			require.NotContains(t, s, "after MPI_FINALIZE", s)
		})
	}
}

// done reports whether r has completed, without waiting.
func done(r comm.Request) bool {
	ok, _, _ := r.Test()
	return ok
}

// twoWorldsEnv selects the job of TestAdoptedWorldsFinalizedInInitOrder.
const twoWorldsEnv = "PZ_MPI_TEST_TWO_WORLDS"

// TestAdoptedWorldsFinalizedInInitOrder: two Worlds adopt the program's
// MPI (TestMain's world, then a second; runtimeview adopts the MPI a
// World of the program uses) and are finalized in the order of their
// Inits. Each World saved MPI_COMM_WORLD's error handler at its Init and
// set it back at its Finalize: the first World's Finalize gave the world
// MPI_ERRORS_ARE_FATAL while the second still used it (an MPI error of
// the second World's then aborted the job instead of being returned),
// and the second's Finalize then left it MPI_ERRORS_RETURN, the handler
// the first had set, for the program's own calls. The handler is now
// saved by the first World to adopt MPI and given back by the last to
// end its use (a count for the process, as for user reductions).
func TestAdoptedWorldsFinalizedInInitOrder(t *testing.T) {
	if underLauncher() {
		if os.Getenv(twoWorldsEnv) == "" {
			t.Skip("run by TestAdoptedWorldsFinalizedInInitOrder under its own mpirun")
		}
		require.False(t, world.Started())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		w2, err := mpi.Init(ctx, mpi.WithGOMAXPROCS(false))
		require.NoError(t, err)
		require.NoError(t, world.Finalize())
		require.False(t, mpi.WorldErrorsFatal(), "the first World's Finalize made MPI_COMM_WORLD's errors fatal while the second World uses it")
		sum, err := comm.AllReduce(ctx, comm.Comm(w2), []int64{1}, comm.Sum)
		require.NoError(t, err)
		require.Equal(t, int64(w2.Size()), sum[0])
		require.NoError(t, w2.Finalize())
		require.True(t, mpi.WorldErrorsFatal(), "MPI_COMM_WORLD's error handler is not the program's once the last World ended its use of MPI")
		return
	}
	s, err := ownJob(t, "TestAdoptedWorldsFinalizedInInitOrder", time.Minute, twoWorldsEnv+"=1", serializedEnv+"=1")
	require.NoError(t, err, "%s", s)
	require.Equal(t, 2, strings.Count(s, "--- PASS: TestAdoptedWorldsFinalizedInInitOrder"), s)
	requireNoFailure(t, s)
}
