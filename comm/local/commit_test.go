package local

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
)

// arriveAll runs the arrival step of one Barrier-like collective on every
// rank of g, so that the ranks can then be driven through commit one by
// one.
func arriveAll(t *testing.T, comms []comm.Comm) []*rankComm {
	t.Helper()
	rcs := make([]*rankComm, len(comms))
	errs := make(chan error, len(comms))
	for i, c := range comms {
		rcs[i] = c.(*rankComm)
		go func() {
			k, a, err := rcs[i].begin(context.Background(), comm.CallBarrier)
			if err == nil {
				a.fp = comm.Fingerprint{Call: comm.CallBarrier, Root: -1, Count: -1}
				err = rcs[i].arrive(context.Background(), comm.CallBarrier, k)
			}
			errs <- err
		}()
	}
	for range comms {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("arrival did not complete")
		}
	}
	return rcs
}

// A rank whose context ends while it waits for a commit that one peer
// never makes gives up and breaks the group; the peer's late commit then
// fails instead of proceeding alone.
func TestCommitAbandoned(t *testing.T) {
	comms, err := New(2)
	require.NoError(t, err)
	rcs := arriveAll(t, comms)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = rcs[0].commit(ctx, comm.CallAllReduce)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "gave up before every rank committed")
	err = rcs[1].commit(context.Background(), comm.CallAllReduce)
	assert.ErrorIs(t, err, comm.ErrBroken)
	assert.Contains(t, err.Error(), "rank 0 abandoned")
	// Rank 0's deadline is named, but rank 1's own context did not end:
	// its error does not match context.DeadlineExceeded.
	assert.Contains(t, err.Error(), "context deadline exceeded")
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
}

// A rank that abandons a collective with its context canceled by a cause
// of the program's passes the cause on to its peers: they can tell why
// (a signal's error, under runtimeview).
func TestAbandonedCollectivePassesTheCauseOn(t *testing.T) {
	comms, err := New(2)
	require.NoError(t, err)
	stop := errors.New("user pressed stop")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stop)
	done := make(chan error, 1)
	go func() { done <- comms[1].Barrier(context.Background()) }()
	err = comms[0].Barrier(ctx)
	require.ErrorIs(t, err, stop)
	peer := <-done
	assert.ErrorIs(t, peer, comm.ErrBroken)
	assert.ErrorIs(t, peer, stop, "the cause reaches the peer")
}

// Once every rank has committed, a context that ends no longer matters:
// the collective is under way and the rank must take part.
func TestCommitWinsOverLateCancel(t *testing.T) {
	comms, err := New(2)
	require.NoError(t, err)
	rcs := arriveAll(t, comms)
	done := make(chan error, 1)
	go func() { done <- rcs[1].commit(context.Background(), comm.CallAllReduce) }()
	// Wait until rank 1 has counted itself in.
	deadline := time.Now().Add(10 * time.Second)
	for rcs[1].g.committed.Load() != 1 {
		require.True(t, time.Now().Before(deadline), "rank 1 never counted in")
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Rank 0 counts itself in last with a canceled context: the count is
	// complete, so it takes part, and so does rank 1.
	require.NoError(t, rcs[0].commit(ctx, comm.CallAllReduce))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("rank 1 still waits for the commit")
	}
	// The counter is not broken: the next commit works.
	assert.Zero(t, rcs[0].g.committed.Load()&brokenBit)
	assert.NoError(t, rcs[0].usable())
}

// A rank that counted itself in and then gives up while a peer has not:
// the peer, arriving at commit afterwards, must see the counter broken
// even though its own increment would complete the count.
func TestCommitNoCountAfterBreak(t *testing.T) {
	comms, err := New(3)
	require.NoError(t, err)
	rcs := arriveAll(t, comms)
	done := make(chan error, 1)
	go func() { done <- rcs[1].commit(context.Background(), comm.CallBcast) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.Error(t, rcs[0].commit(ctx, comm.CallBcast))
	select {
	case err := <-done:
		assert.ErrorIs(t, err, comm.ErrBroken)
	case <-time.After(10 * time.Second):
		t.Fatal("rank 1 still waits for the commit")
	}
	err = rcs[2].commit(context.Background(), comm.CallBcast)
	assert.True(t, errors.Is(err, comm.ErrBroken), "late rank: %v", err)
}
