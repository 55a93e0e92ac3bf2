package scheduler_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// A completed tagged task was kept for ever by the scheduler's table of
// tags (about 550 bytes a tag, the task included): a stream of tagged
// tasks, or a recursive graph that takes a new tag for every join,
// grew the heap without bound (2 million tags: 1.1 GB). The table keeps
// a completed tag's outcome, not its task.
func TestCompletedTagReleasesTask(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	cl := &scheduler.Codelet{Name: "tagged", CPU: func(*scheduler.Call) error { return nil }}
	freed := make(chan struct{})
	func() {
		task := scheduler.NewTask(cl, scheduler.WithTag(7))
		runtime.AddCleanup(task, func(ch chan struct{}) { close(ch) }, freed)
		require.NoError(t, s.SubmitTask(ctx, task))
		require.NoError(t, task.Wait(ctx))
	}()
	// Tasks run after it replace it wherever a worker remembers the task
	// it ran last.
	other := &scheduler.Codelet{Name: "other", CPU: func(*scheduler.Call) error { return nil }}
	for range 8 {
		require.NoError(t, s.Submit(ctx, other))
	}
	require.NoError(t, s.WaitAll(ctx))
	for i := 0; ; i++ {
		runtime.GC()
		select {
		case <-freed:
			// A completed tag still ends a later wait at once.
			require.NoError(t, s.WaitTag(ctx, 7))
			return
		default:
		}
		if i == 100 {
			t.Fatal("a completed task carrying a tag is never collected: the scheduler's tags keep it")
		}
		runtime.Gosched()
	}
}

// RemoveTags (StarPU's starpu_tag_remove) forgets completed tags, so a
// program that takes a new tag for every task keeps a bounded heap.
func TestRemoveTagsBoundsMemory(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	cl := &scheduler.Codelet{Name: "tagged", CPU: func(*scheduler.Call) error { return nil }}
	const rounds, per = 12, 10000
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var base uint64
	next := scheduler.Tag(1)
	for r := range rounds {
		first := next
		for range per {
			require.NoError(t, s.Submit(ctx, cl, scheduler.WithTag(next)))
			next++
		}
		require.NoError(t, s.WaitAll(ctx))
		tags := make([]scheduler.Tag, 0, per)
		for g := first; g < next; g++ {
			tags = append(tags, g)
		}
		require.NoError(t, s.RemoveTags(tags...))
		if r == 1 {
			base = heap()
		}
	}
	grown := int64(heap()) - int64(base)
	// 100,000 tags kept would be tens of MB.
	require.Less(t, grown, int64(4<<20), "heap grew by %d bytes over %d removed tags", grown, (rounds-2)*per)
}

// A removed tag is unknown: a later AfterTags waits for a new carrier;
// a tag a pending task carries is kept, and the error names it.
func TestRemoveTagsSemantics(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var order []string
	step := func(name string) *scheduler.Codelet {
		return &scheduler.Codelet{Name: name, CPU: func(*scheduler.Call) error { order = append(order, name); return nil }}
	}
	require.NoError(t, s.Submit(ctx, step("a"), scheduler.WithTag(5), scheduler.Synchronous()))
	require.NoError(t, s.RemoveTags(5, 0, 99), "a completed tag, tag 0 and an unknown tag")
	after := scheduler.NewTask(step("c"), scheduler.AfterTags(5))
	require.NoError(t, s.SubmitTask(ctx, after))
	require.NoError(t, s.Submit(ctx, step("b"), scheduler.WithTag(5)))
	require.NoError(t, after.Wait(ctx))
	require.Equal(t, []string{"a", "b", "c"}, order, "the task after removed tag 5 waits for its new carrier")

	gate := make(chan struct{})
	blocked := &scheduler.Codelet{Name: "blocked", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	require.NoError(t, s.Submit(ctx, blocked, scheduler.WithTag(6)))
	err := s.RemoveTags(6)
	require.ErrorIs(t, err, scheduler.ErrBadData)
	require.ErrorContains(t, err, `tag 6 (task "blocked", which carries it, has not completed)`)
	close(gate)
	require.NoError(t, s.WaitTag(ctx, 6), "the kept tag is still waited for")
	require.NoError(t, s.RemoveTags(6))
}

// The loop the docs show, each task After(prev), kept every task of the
// chain reachable from the last one through its After list: 10 million
// tasks streamed that way held 4.6 GB. A completed task forgets its
// predecessors.
func TestAfterChainReleasesTasks(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	cl := &scheduler.Codelet{Name: "step", CPU: func(*scheduler.Call) error { return nil }}
	freed := make(chan struct{})
	chain := func() *scheduler.Task {
		var prev *scheduler.Task
		for i := range 100 {
			next := scheduler.NewTask(cl, scheduler.After(prev))
			if i == 10 {
				runtime.AddCleanup(next, func(ch chan struct{}) { close(ch) }, freed)
			}
			require.NoError(t, s.SubmitTask(ctx, next))
			prev = next
		}
		return prev
	}
	last := chain()
	require.NoError(t, last.Wait(ctx))
	require.NoError(t, s.WaitAll(ctx))
	for i := 0; ; i++ {
		runtime.GC()
		select {
		case <-freed:
			runtime.KeepAlive(last)
			return
		default:
		}
		if i == 100 {
			t.Fatal("a task of a chain of After(prev) is never collected while the last is reachable")
		}
		runtime.Gosched()
	}
}

// A completed task's After list is cleared (TestAfterChainReleasesTasks)
// before the task is seen done: a program that reads it once Wait or
// Done has returned reads nil, and races with nothing. It was cleared
// after the state that Wait reads, so such a read raced with the
// clearing (go test -race) and saw the list or nil by timing.
func TestAfterClearedBeforeDone(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	cl := &scheduler.Codelet{Name: "step", CPU: func(*scheduler.Call) error { return nil }}
	for i := range 200 {
		p := scheduler.NewTask(cl)
		q := scheduler.NewTask(cl, scheduler.After(p))
		require.NoError(t, s.SubmitTask(ctx, p))
		require.NoError(t, s.SubmitTask(ctx, q))
		if i%2 == 0 {
			require.NoError(t, q.Wait(ctx))
		} else {
			<-q.Done()
		}
		require.Nil(t, q.After, "task %d: After read once the task was done", i)
	}
}
