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

// Left reports whether rank r of c's group has left Run (its function
// returned).
func Left(c comm.Comm, r int) bool {
	return c.(*rankComm).g.gone[r].Load() != nil
}

// Probing reports how many blocked probes wait on rank c's mailbox.
func Probing(c comm.Comm) int {
	rc := c.(*rankComm)
	box := &rc.g.boxes[rc.rank]
	box.mu.Lock()
	defer box.mu.Unlock()
	return len(box.probes)
}

// Waiting reports how many receives and blocked probes wait on rank r's
// mailbox in c's group.
func Waiting(c comm.Comm, r int) int {
	box := &c.(*rankComm).g.boxes[r]
	box.mu.Lock()
	defer box.mu.Unlock()
	return len(box.posted) + len(box.probes)
}

// Queued reports how many unreceived messages rank r's mailbox in c's
// group holds.
func Queued(c comm.Comm, r int) int {
	box := &c.(*rankComm).g.boxes[r]
	box.mu.Lock()
	defer box.mu.Unlock()
	return len(box.unexp)
}

// Awaited reports whether c's group counts a receive or probe from rank
// r as possibly posted (see group.await): once none is, the counts must
// balance, or every departure of r would sweep every mailbox.
func Awaited(c comm.Comm, r int) bool { return c.(*rankComm).g.awaited(r) }

// BeforePark makes the first rank of c's group about to park in a
// collective's wait call f first (once), so that a test can make things
// happen in the window between its last check and its select.
func BeforePark(c comm.Comm, f func()) { c.(*rankComm).g.beforePark.Store(&f) }

// ByRef reports how many messages by reference rank c sent that no
// receiver has released yet (Free withdraws them only when there are).
func ByRef(c comm.Comm) int64 {
	rc := c.(*rankComm)
	return rc.g.boxes[rc.rank].byRef.Load()
}
