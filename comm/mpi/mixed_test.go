//go:build mpi

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// watchdog ends the job (Abort) when the test has not stopped it within
// d: a rank left in a blocking MPI call that no peer matches cannot be
// freed by its context, so a hang would otherwise outlast go test's own
// timeout. What it says on stderr names the test.
func watchdog(t *testing.T, d time.Duration) {
	t.Helper()
	name := t.Name()
	timer := time.AfterFunc(d, func() {
		fmt.Fprintf(os.Stderr, "rank %d: %s still running after %v: the ranks hang in MPI; ending the job\n", world.Rank(), name, d)
		_ = world.Abort(1)
	})
	t.Cleanup(func() { timer.Stop() })
}

// TestMixedContextKinds: even ranks pass context.Background, odd ranks a
// ctx with a deadline, to the same collectives. The choice between MPI's
// blocking and non-blocking function was made per call from the ctx, and
// MPI does not match MPI_Allreduce with MPI_Iallreduce (nor
// MPI_Comm_split with the MPI_Ibarrier before it with the check off): the
// ranks hung in their first collective. The form is now the
// communicator's (WithBlocking), the same on every rank; each case runs in
// both forms, with the check on and off, under a watchdog that ends the
// job if the ranks hang.
func TestMixedContextKinds(t *testing.T) {
	if world.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	ops := []struct {
		name string
		run  func(ctx context.Context, c *mpi.Comm) error
	}{
		{"AllReduce8", func(ctx context.Context, c *mpi.Comm) error {
			got, err := comm.AllReduce(ctx, c, []int64{int64(c.Rank())}, comm.Sum)
			if err == nil && got[0] != int64(c.Size()*(c.Size()-1)/2) {
				err = fmt.Errorf("AllReduce: got %d", got[0])
			}
			return err
		}},
		{"AllReduce1KiB", func(ctx context.Context, c *mpi.Comm) error {
			in := make([]float64, 128)
			for i := range in {
				in[i] = 1
			}
			got, err := comm.AllReduce(ctx, c, in, comm.Sum)
			if err == nil && got[127] != float64(c.Size()) {
				err = fmt.Errorf("AllReduce: got %v", got[127])
			}
			return err
		}},
		{"Reduce", func(ctx context.Context, c *mpi.Comm) error {
			_, err := comm.Reduce(ctx, c, make([]int32, 100), comm.Max, 0)
			return err
		}},
		{"Bcast", func(ctx context.Context, c *mpi.Comm) error {
			buf := make([]byte, 4096)
			if c.Rank() == 1 {
				buf[4095] = 7
			}
			err := comm.Bcast(ctx, c, buf, 1)
			if err == nil && buf[4095] != 7 {
				err = fmt.Errorf("Bcast: got %d", buf[4095])
			}
			return err
		}},
		{"Barrier", func(ctx context.Context, c *mpi.Comm) error { return c.Barrier(ctx) }},
		{"AllGather", func(ctx context.Context, c *mpi.Comm) error {
			_, err := comm.AllGather(ctx, c, make([]int64, 50+c.Rank()))
			return err
		}},
		{"Dup", func(ctx context.Context, c *mpi.Comm) error {
			d, err := c.Dup(ctx)
			if err == nil {
				err = d.Free()
			}
			return err
		}},
		{"Split", func(ctx context.Context, c *mpi.Comm) error {
			d, err := c.Split(ctx, c.Rank()%2, 0)
			if err == nil {
				err = d.Free()
			}
			return err
		}},
		{"SplitShared", func(ctx context.Context, c *mpi.Comm) error {
			d, err := c.SplitShared(ctx, 0)
			if err == nil {
				err = d.Free()
			}
			return err
		}},
	}
	for _, blocking := range []bool{false, true} {
		for _, check := range []bool{true, false} {
			for _, op := range ops {
				t.Run(fmt.Sprintf("blocking=%v/check=%v/%s", blocking, check, op.name), func(t *testing.T) {
					watchdog(t, 30*time.Second)
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					c := splitAll(t)
					c.SetCheck(check)
					mpi.SetBlocking(c, blocking)
					mine := ctx
					if c.Rank()%2 == 0 {
						mine = context.Background()
					}
					// Twice: the first call of a communicator and one after.
					for range 2 {
						require.NoError(t, op.run(mine, c), "rank %d", c.Rank())
					}
				})
			}
		}
	}
}

// TestSplitAgainstSplitShared: rank 0 calls Split, the others
// SplitShared. Both were the same call to the agreement step, which
// passed them; then rank 0 waited in MPI_Comm_split and the others in
// MPI_Comm_split_type for good. SplitShared is now a call of its own, and
// every rank gets a *comm.MismatchError naming both.
func TestSplitAgainstSplitShared(t *testing.T) {
	if world.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	watchdog(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := splitAll(t)
	var err error
	if c.Rank() == 0 {
		_, err = c.Split(ctx, 0, 0)
	} else {
		_, err = c.SplitShared(ctx, 0)
	}
	var me *comm.MismatchError
	require.True(t, errors.As(err, &me), "rank %d: %v", c.Rank(), err)
	require.Contains(t, me.Detail, "SplitShared", "rank %d", c.Rank())
	require.Contains(t, me.Detail, "has Split,", "rank %d", c.Rank())
	// The communicator still works on every rank.
	sum, err := comm.AllReduce(ctx, c, []int64{1}, comm.Sum)
	require.NoError(t, err)
	require.Equal(t, int64(c.Size()), sum[0])
}
