package gantt

import (
	"cmp"
	"slices"
	"time"
)

// task is a task's runs merged: a team task spans from its first
// member's start to its last member's end.
type task struct {
	id         uint64
	start, end time.Duration
	deps       []uint64
}

// tasks merges the bars by ID.
func tasks(bars []Bar) map[uint64]*task {
	ts := make(map[uint64]*task, len(bars))
	for _, b := range bars {
		t := ts[b.ID]
		if t == nil {
			t = &task{id: b.ID, start: b.Start, end: b.End}
			ts[b.ID] = t
		}
		t.start, t.end = min(t.start, b.Start), max(t.end, b.End)
		for _, p := range b.Deps {
			if !slices.Contains(t.deps, p) {
				t.deps = append(t.deps, p)
			}
		}
	}
	return ts
}

// CriticalPath returns the IDs of the tasks on the longest path through
// the dependency graph of bars, first to last, where a path's length is
// the sum of its tasks' durations (a team task lasts from its first
// member's start to its last member's end). Dependencies on IDs with no
// bar are ignored. Ties go to the lower ID, so the result is a function
// of bars alone. It runs in O(V log V + E) for V tasks and E
// dependencies: a longest path in a DAG by dynamic programming in
// topological order (Kahn's algorithm; Cormen et al., Introduction to
// Algorithms, §24.2). It returns nil for no bars.
func CriticalPath(bars []Bar) []uint64 {
	ts := tasks(bars)
	if len(ts) == 0 {
		return nil
	}
	ids := make([]uint64, 0, len(ts))
	for id := range ts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	succ := make(map[uint64][]uint64, len(ts))
	indeg := make(map[uint64]int, len(ts))
	for _, id := range ids {
		for _, p := range ts[id].deps {
			if _, ok := ts[p]; ok && p != id {
				succ[p] = append(succ[p], id)
				indeg[id]++
			}
		}
	}
	length := make(map[uint64]time.Duration, len(ts)) // of the longest path ending at a task
	pred := make(map[uint64]uint64, len(ts))
	hasPred := make(map[uint64]bool, len(ts))
	queue := make([]uint64, 0, len(ts))
	for _, id := range ids {
		if indeg[id] == 0 {
			queue = append(queue, id)
		}
	}
	// A trace's graph has no cycle; a task on one would never be queued
	// and is left out.
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		t := ts[id]
		length[id] += t.end - t.start
		for _, s := range succ[id] {
			if l := length[id]; !hasPred[s] || l > length[s] || (l == length[s] && id < pred[s]) {
				length[s], pred[s], hasPred[s] = l, id, true
			}
			if indeg[s]--; indeg[s] == 0 {
				queue = append(queue, s)
			}
		}
	}
	last := slices.MaxFunc(ids, func(a, b uint64) int {
		// MaxFunc returns the first maximum; compare IDs reversed so that
		// it is the lowest ID among equal lengths.
		return cmp.Or(cmp.Compare(length[a], length[b]), cmp.Compare(b, a))
	})
	var path []uint64
	for id, ok := last, true; ok; id, ok = pred[id], hasPred[id] {
		path = append(path, id)
	}
	slices.Reverse(path)
	return path
}
