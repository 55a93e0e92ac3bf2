package scheduler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTaskPoolBatches: the tasks a worker frees reach the submitters a
// full batch at a time, each task once and zeroed; batches past
// maxFullBatches and
// frees off a worker go to the sync.Pool; get falls back to it (or to a
// new task) when no batch is at hand.
func TestTaskPoolBatches(t *testing.T) {
	var p taskPool
	w := &worker{}
	freed := make(map[*Task]bool)
	for range recycleBatch - 1 {
		x := &Task{Priority: 7, Arg: "kept alive"}
		freed[x] = true
		p.put(x, w)
	}
	require.Empty(t, p.full, "a batch is handed over only once full")
	last := new(Task)
	freed[last] = true
	p.put(last, w)
	require.Len(t, p.full, 1)
	assert.Empty(t, w.freed, "the worker starts an empty batch")

	got := make(map[*Task]bool)
	for range recycleBatch {
		x := p.get()
		require.True(t, freed[x], "a task the worker freed")
		require.False(t, got[x], "each task once")
		require.True(t, x.Priority == 0 && x.Arg == nil, "zeroed: it keeps nothing of its last use alive")
		got[x] = true
	}
	assert.Empty(t, p.full)
	x := p.get()
	assert.False(t, freed[x], "no batch at hand: a task of the sync.Pool or a new one")

	// The emptied batch goes back to the workers once the next full one
	// is taken.
	for range recycleBatch {
		p.put(new(Task), w)
	}
	p.get()
	require.Len(t, p.empty, 1)
	assert.Equal(t, recycleBatch, cap(p.empty[0]))

	for range recycleBatch {
		p.put(new(Task), w)
	}
	// Past maxFullBatches the batches go to the sync.Pool.
	for range (maxFullBatches + 2) * recycleBatch {
		p.put(new(Task), w)
	}
	assert.Len(t, p.full, maxFullBatches)
	p.put(new(Task), nil) // off a worker: to the sync.Pool, not a batch
	assert.Len(t, p.full, maxFullBatches)
	assert.Empty(t, w.freed)
}
