package local_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// A persistent receive's Done channel of a round is closed by that round's
// send, and a later round gets a channel of its own: Done before the
// message arrives, then the send, then the next round's Done is open again
// until its send.
func TestPersistentDoneEachRound(t *testing.T) {
	c := oneRank(t)
	in, out := []int32{0}, []int32{7}
	recv, err := comm.RecvInit(c, in, 0, 0)
	require.NoError(t, err)
	for k := range 3 {
		require.NoError(t, recv.Start())
		done := recv.Done()
		select {
		case <-done:
			t.Fatalf("round %d: Done closed before its message was sent", k)
		default:
		}
		out[0] = int32(k)
		s, err := c.Isend(comm.BufOf(out), 0, 0)
		require.NoError(t, err)
		<-done // closed by the send's delivery
		ok, st, err := recv.Test()
		require.True(t, ok)
		require.NoError(t, err)
		assert.Equal(t, 1, st.Count)
		assert.Equal(t, int32(k), in[0])
		_, err = s.Wait(context.Background())
		require.NoError(t, err)
	}
}

// oneRank returns the communicator of a 1-rank group, which the tests
// that send to themselves on the test's goroutine use.
func oneRank(t *testing.T) comm.Comm {
	t.Helper()
	comms, err := local.New(1)
	require.NoError(t, err)
	return comms[0]
}
