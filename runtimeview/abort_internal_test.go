package runtimeview

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under MPI, a rank whose function failed is inside MPI_Abort (abortJob)
// when Open MPI, ending the job, sends SIGTERM to every process, this one
// included; the signal's handler (onSignal) called MPI_Abort a second
// time, concurrently, and Open MPI crashed (SIGSEGV and a goroutine dump
// after the rank's message; 1 job in 12 of a 3-rank job with a failing
// task). It also announced a signal-driven end after the rank's failure
// ("terminated received: ending the job"), which misreported why the job
// ended. The handler now stands aside while abortJob ends the job: it
// returns at once, without exiting, and the world's abort is called once.
func TestAbortJobAndSignalAbortOnce(t *testing.T) {
	checkAbortOnce(t,
		func(rt *RuntimeView, exit func(int)) {
			rt.abortJob(errors.New("the rank's function failed"), exit)
		},
		func(rt *RuntimeView, exit func(int)) {
			// The launcher's SIGTERM, meanwhile: the handler returns while
			// the abort is still under way, neither exiting nor aborting.
			rt.onSignal(syscall.SIGTERM, exit)
			assert.False(t, rt.signaled(), "the signal's handler claimed a job that abortJob is ending")
		},
		[]int{1}) // the first abort returns (a failed MPI_Abort), so abortJob exits
}

// The other order: a signal's handler is ending the job (inside MPI_Abort)
// when the rank's function returns an error; abortJob stands aside
// instead of reporting the failure, since the failure is the signal's
// consequence.
func TestSignalThenAbortJobStandsAside(t *testing.T) {
	checkAbortOnce(t,
		func(rt *RuntimeView, exit func(int)) {
			rt.onSignal(syscall.SIGTERM, exit)
		},
		func(rt *RuntimeView, exit func(int)) {
			rt.abortJob(errors.New("context canceled"), exit) // returns at once
		},
		[]int{ExitStatus(syscall.SIGTERM)})
}

// checkAbortOnce runs on rank 0 of an in-process job, with a stand-in
// for mpi.World.Abort that, like MPI_Abort, returns only on failure and
// holds its first call until released: first, in a goroutine, until it
// is inside that abort; then second, while the abort is under way; then
// it releases the abort and waits for first to return. The exit
// statuses that first and second gave must be wantExits, and the world's
// abort must have been called once.
func checkAbortOnce(t *testing.T, first, second func(rt *RuntimeView, exit func(int)), wantExits []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var calls atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	worldAbort := func(code int) error {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return errors.New("MPI_Abort returned")
	}
	exits := make(chan int, 2)
	exit := func(code int) { exits <- code }
	err := RunLocal(ctx, 2, func(ctx context.Context, rt *RuntimeView) error {
		if rt.Rank() != 0 {
			return nil
		}
		rt.aborting = new(atomic.Bool)
		rt.setAbort(worldAbort)
		firstDone := make(chan struct{})
		go func() {
			defer close(firstDone)
			first(rt, exit)
		}()
		select {
		case <-entered: // first is inside the world's abort
		case <-ctx.Done():
			return ctx.Err()
		}
		second(rt, exit)
		close(release)
		select {
		case <-firstDone:
		case <-ctx.Done():
			return ctx.Err()
		}
		close(exits)
		var got []int
		for c := range exits {
			got = append(got, c)
		}
		assert.Equal(t, wantExits, got, "exit statuses")
		return nil
	}, quiet, WithMachine(syntheticMachine()))
	require.NoError(t, err)
	assert.Equal(t, int32(1), calls.Load(), "MPI_Abort was called more than once by one process")
}
