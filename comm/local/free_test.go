package local_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// TestFreeWithdrawsSends: Free ends a send that no receive took (1 MiB,
// above the eager limit) with ErrFreed, and the message is withdrawn:
// done at once, Done closed, Wait returning ErrFreed. (The conformance
// suite leaves sends out: MPI cannot withdraw one.)
func TestFreeWithdrawsSends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		d, err := c.Dup(ctx)
		if err != nil {
			return err
		}
		var isend comm.Request
		if c.Rank() == 0 {
			if isend, err = comm.Isend(d, make([]byte, 1<<20), 1, 3); err != nil {
				return err
			}
		}
		if err := d.Free(); err != nil {
			return err
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		if isend == nil {
			return nil
		}
		done, st, err := isend.Test()
		if !done || !errors.Is(err, comm.ErrFreed) || st != (comm.Status{}) {
			return errors.Join(errors.New("Isend pending at Free: want done with ErrFreed"), err)
		}
		select {
		case <-isend.(comm.Notifier).Done():
		default:
			return errors.New("Isend pending at Free: Done is not closed")
		}
		_, err = isend.Wait(context.Background())
		assert.ErrorIs(t, err, comm.ErrFreed)
		return nil
	})
	require.NoError(t, err)
}
