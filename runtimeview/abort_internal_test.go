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
// task). Both paths now share one abort: the world's is called once.
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
		go rt.abortJob(errors.New("the rank's function failed"), exit)
		select {
		case <-entered: // abortJob is inside the world's abort
		case <-ctx.Done():
			return ctx.Err()
		}
		signaled := make(chan struct{})
		go func() {
			defer close(signaled)
			rt.onSignal(syscall.SIGTERM, exit) // the launcher's SIGTERM, meanwhile
		}()
		close(release) // the first abort returns (a failed MPI_Abort), so both paths end
		var got []int
		for range 2 {
			select {
			case c := <-exits:
				got = append(got, c)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		<-signaled
		assert.ElementsMatch(t, []int{1, ExitStatus(syscall.SIGTERM)}, got)
		return nil
	}, quiet, WithMachine(syntheticMachine()))
	require.NoError(t, err)
	assert.Equal(t, int32(1), calls.Load(), "MPI_Abort was called more than once by one process")
}
