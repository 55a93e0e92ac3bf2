package comm

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// doneReq is a completed request with a status and an error of its own.
type doneReq struct {
	st  Status
	err error
}

func (r doneReq) Wait(context.Context) (Status, error) { return r.st, r.err }
func (r doneReq) Test() (bool, Status, error)          { return true, r.st, r.err }

// TestWaitAllInto: statuses land by index in the caller's slice (nil
// entries skipped, every entry cleared), nil statuses are ignored, a
// failed request is named by its index, and a slice too short for the
// requests is refused before any wait.
func TestWaitAllInto(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	reqs := []Request{doneReq{st: Status{Source: 1, Tag: 2}}, nil, doneReq{st: Status{Source: 3, Tag: 4}, err: boom}}
	sts := make([]Status, 3)
	err := WaitAllInto(ctx, reqs, sts)
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "request 2")
	require.Equal(t, []Status{{Source: 1, Tag: 2}, {}, {Source: 3, Tag: 4}}, sts)
	require.Equal(t, []Request{nil, nil, nil}, reqs)

	reqs = []Request{doneReq{}, doneReq{}}
	require.NoError(t, WaitAllInto(ctx, reqs, nil))
	require.Equal(t, []Request{nil, nil}, reqs)

	reqs = []Request{doneReq{}, doneReq{}}
	require.ErrorIs(t, WaitAllInto(ctx, reqs, make([]Status, 1)), ErrInvalidArg)
	require.NotNil(t, reqs[0], "nothing waited for")

	got, err := WaitAll(ctx, []Request{doneReq{st: Status{Count: 5}}})
	require.NoError(t, err)
	require.Equal(t, []Status{{Count: 5}}, got)
}

// lateReq completed just as its wait ended with the context: Wait
// reports ctx's error, Test the request's own result.
type lateReq struct{ st Status }

func (r lateReq) Wait(ctx context.Context) (Status, error) { return Status{}, ctx.Err() }
func (r lateReq) Test() (bool, Status, error)              { return true, r.st, nil }

// TestWaitAllReportsCompletionOverContext: a request that completed as
// WaitAll's context ended reports its own status and no error, not the
// context's.
func TestWaitAllReportsCompletionOverContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sts, err := WaitAll(ctx, []Request{lateReq{st: Status{Source: 2, Count: 3}}})
	require.NoError(t, err)
	require.Equal(t, []Status{{Source: 2, Count: 3}}, sts)
}

// pendingReq has not completed.
type pendingReq struct{}

func (pendingReq) Wait(ctx context.Context) (Status, error) { <-ctx.Done(); return Status{}, ctx.Err() }
func (pendingReq) Test() (bool, Status, error)              { return false, Status{}, nil }

// TestTestAll: with a request still pending TestAll reports false and
// changes nothing; once all have completed it reports their statuses by
// index, names the failed one's index and clears every entry.
func TestTestAll(t *testing.T) {
	boom := errors.New("boom")
	reqs := []Request{doneReq{st: Status{Source: 1}}, nil, pendingReq{}}
	done, sts, err := TestAll(reqs)
	require.False(t, done)
	require.NoError(t, err)
	require.Nil(t, sts)
	require.Equal(t, doneReq{st: Status{Source: 1}}, reqs[0], "a completed request stays in the set")

	reqs[2] = doneReq{st: Status{Source: 3, Count: 2}, err: boom}
	done, sts, err = TestAll(reqs)
	require.True(t, done)
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "request 2")
	require.Equal(t, []Status{{Source: 1}, {}, {Source: 3, Count: 2}}, sts)
	require.Equal(t, []Request{nil, nil, nil}, reqs)

	done, sts, err = TestAll(reqs)
	require.True(t, done, "a set of inactive requests has completed")
	require.NoError(t, err)
	require.Len(t, sts, 3)
}

// TestTestAnyDrained: TestAny on a set with no active request says so
// (Index -1, ok), as MPI_Testany (MPI_UNDEFINED, flag true) and WaitAny
// do, so that a loop polling with TestAny ends; a set with a pending
// request is not done.
func TestTestAnyDrained(t *testing.T) {
	for _, reqs := range [][]Request{nil, {}, {nil, nil}} {
		c, ok := TestAny(reqs)
		require.True(t, ok, "%v", reqs)
		require.Equal(t, -1, c.Index)
		w, err := WaitAny(context.Background(), reqs)
		require.NoError(t, err)
		require.Equal(t, -1, w.Index)
	}
	reqs := []Request{nil, pendingReq{}}
	c, ok := TestAny(reqs)
	require.False(t, ok)
	require.Equal(t, -1, c.Index)
	reqs = []Request{pendingReq{}, doneReq{st: Status{Source: 2}}}
	c, ok = TestAny(reqs)
	require.True(t, ok)
	require.Equal(t, 1, c.Index)
	require.Equal(t, 2, c.Status.Source)
	c, ok = TestAny(reqs)
	require.False(t, ok, "%+v", c)
}
