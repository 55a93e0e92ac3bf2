package local

import "github.com/pzgo/pz/comm"

// ArrivedAt reports whether rank r of c's group has entered the k-th
// collective on it (counting from 1), so that tests wait for that event
// rather than sleep.
func ArrivedAt(c comm.Comm, r int, k uint64) bool {
	return c.(*rankComm).g.slots[r].a[k&1].seq.Load() >= k
}

// Posted reports how many receives rank c has posted and not matched yet.
func Posted(c comm.Comm) int {
	rc := c.(*rankComm)
	box := &rc.g.boxes[rc.rank]
	box.mu.Lock()
	defer box.mu.Unlock()
	return len(box.posted)
}

// Counted reports whether c's group arrives through the counter.
func Counted(c comm.Comm) bool { return c.(*rankComm).g.counted }
