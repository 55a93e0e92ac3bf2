package static

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostStreamOrderAndMarks(t *testing.T) {
	s := NewHostStream()
	defer s.Close()
	var got []int
	for i := range 100 {
		s.Enqueue(func() { got = append(got, i) })
	}
	m, err := s.Mark(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.WaitMark(context.Background(), m))
	require.Len(t, got, 100)
	for i, v := range got {
		assert.Equal(t, i, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	block := make(chan struct{})
	s.Enqueue(func() { <-block })
	m, _ = s.Mark(ctx)
	cancel()
	assert.ErrorIs(t, s.WaitMark(ctx, m), context.Canceled)
	close(block)
	assert.NoError(t, s.WaitMark(context.Background(), m))
}

// A steady stream of enqueue, mark and wait allocates nothing once warm.
func TestHostStreamSteadyStateDoesNotAllocate(t *testing.T) {
	s := NewHostStream()
	defer s.Close()
	ctx := context.Background()
	work := func() {}
	cctx, cancel := context.WithCancel(ctx) // as the runs' contexts are
	defer cancel()
	step := func() {
		s.Enqueue(work)
		m, _ := s.Mark(cctx)
		s.WaitMark(cctx, m)
	}
	step()
	assert.Zero(t, testing.AllocsPerRun(50, step))
}
