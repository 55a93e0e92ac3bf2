package local_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// Every way a receiver releases a message sent by reference (a large
// send, or a synchronous one) counts it out of its sender's pending
// sends, which Free sweeps the mailboxes for only while there are some:
// a blocking Recv, an Irecv that finds it queued, a matched probe's
// Recv, a probe whose datatype does not match, and Free's withdrawal of
// one no rank received.
func TestByRefCountedOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	comms, err := local.New(2)
	require.NoError(t, err)
	big := make([]float64, 10000) // past the eager size: by reference
	got := make([]float64, len(big))
	// Rank 0 sends, rank 1 receives: each step's send is queued before
	// the receive (Ssend and Isend of a large message wait for it).
	steps := []struct {
		name string
		recv func() error
	}{
		{"Recv", func() error { _, err := comm.Recv(ctx, comms[1], got, 0, 1); return err }},
		{"Irecv of a queued message", func() error {
			r, err := comm.Irecv(comms[1], got, 0, 1)
			if err != nil {
				return err
			}
			_, err = r.Wait(ctx)
			return err
		}},
		{"Mprobe and Recv", func() error {
			m, err := comms[1].Mprobe(ctx, comm.Float64, 0, 1)
			if err != nil {
				return err
			}
			_, err = m.Recv(func(int) ([]byte, error) { return comm.BufOf(got).Bytes, nil })
			return err
		}},
		{"Mprobe of another datatype", func() error {
			// The mismatch consumes the message, releasing its sender.
			if _, err := comms[1].Mprobe(ctx, comm.Int32, 0, 1); err == nil {
				return errors.New("Mprobe as int32 of a float64 message succeeded")
			}
			return nil
		}},
	}
	for _, st := range steps {
		s, err := comm.Isend(comms[0], big, 1, 1)
		require.NoError(t, err, st.name)
		if st.name != "Recv" {
			// Queued in rank 1's mailbox before the receive looks.
			_, err := comms[1].Probe(ctx, comm.Float64, 0, 1)
			require.NoError(t, err, st.name)
		}
		assert.EqualValues(t, 1, local.ByRef(comms[0]), "%s: the send is pending", st.name)
		require.NoError(t, st.recv(), st.name)
		_, err = s.Wait(ctx)
		require.NoError(t, err, st.name)
		assert.EqualValues(t, 0, local.ByRef(comms[0]), "%s: the receiver released the send", st.name)
	}
	// A send no rank receives: Free withdraws it, and counts it out.
	s, err := comm.Isend(comms[0], big, 1, 9)
	require.NoError(t, err)
	assert.EqualValues(t, 1, local.ByRef(comms[0]))
	require.NoError(t, comms[0].Free())
	_, err = s.Wait(ctx)
	assert.True(t, errors.Is(err, comm.ErrFreed), "%v", err)
	assert.EqualValues(t, 0, local.ByRef(comms[0]))
}
