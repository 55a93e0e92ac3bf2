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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var calls atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	worldAbort := func(code int) error { // stands in for mpi.World.Abort, which returns only on failure
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
		aborted := make(chan struct{})
		go func() {
			defer close(aborted)
			rt.abortJob(errors.New("the rank's function failed"), exit)
		}()
		select {
		case <-entered: // abortJob is inside the world's abort
		case <-ctx.Done():
			return ctx.Err()
		}
		// The launcher's SIGTERM, meanwhile: the handler returns while
		// the abort is still under way, neither exiting nor aborting.
		rt.onSignal(syscall.SIGTERM, exit)
		assert.False(t, rt.signaled(), "the signal's handler claimed a job that abortJob is ending")
		close(release) // the first abort returns (a failed MPI_Abort), so abortJob exits
		select {
		case <-aborted:
		case <-ctx.Done():
			return ctx.Err()
		}
		close(exits)
		var got []int
		for c := range exits {
			got = append(got, c)
		}
		assert.Equal(t, []int{1}, got, "exit statuses")
		return nil
	}, quiet, WithMachine(syntheticMachine()))
	require.NoError(t, err)
	assert.Equal(t, int32(1), calls.Load(), "MPI_Abort was called more than once by one process")
}

// The other order: a signal's handler is ending the job (inside MPI_Abort)
// when the rank's function returns an error; abortJob stands aside
// instead of reporting the failure, since the failure is the signal's
// consequence.
func TestSignalThenAbortJobStandsAside(t *testing.T) {
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
		signaled := make(chan struct{})
		go func() {
			defer close(signaled)
			rt.onSignal(syscall.SIGTERM, exit)
		}()
		select {
		case <-entered: // onSignal is inside the world's abort
		case <-ctx.Done():
			return ctx.Err()
		}
		rt.abortJob(errors.New("context canceled"), exit) // returns at once
		close(release)
		select {
		case <-signaled:
		case <-ctx.Done():
			return ctx.Err()
		}
		close(exits)
		var got []int
		for c := range exits {
			got = append(got, c)
		}
		assert.Equal(t, []int{ExitStatus(syscall.SIGTERM)}, got, "exit statuses")
		return nil
	}, quiet, WithMachine(syntheticMachine()))
	require.NoError(t, err)
	assert.Equal(t, int32(1), calls.Load(), "MPI_Abort was called more than once by one process")
}
