package dist

// CtrlTag is the tag of control messages (data transfers of handle id use
// id+1), for tests that watch the messages.
const CtrlTag = ctrlTag

// PingTag is the tag of the master's start-up pings of the worker
// ranks (measureLinks), for tests that end them.
const PingTag = pingTag

// CheckWindow is the number of submissions the ranks compare at once.
const CheckWindow = checkWindow

// SetTagLimit makes d allow n handle numbers (handles and reductions'
// partial results) rather than maxTag, for tests of the limit. Call it
// on every rank alike, before the first Register.
func SetTagLimit(d *Scheduler, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tagLimit = n
}

// Submitted is the number of submissions d's graph check has recorded
// (the program's Submit, Unregister, Flush and collectives).
func Submitted(d *Scheduler) int64 { return d.pos.submitted.Load() }

// BeforeAgreement makes WaitAll on d call f just before the agreement on
// the outcome.
func BeforeAgreement(d *Scheduler, f func()) { d.beforeAgreement.Store(&f) }

// BeforeExchange makes Scatter, Gather, ScatterMatrix and GatherMatrix
// on d call f between the comparison of the graphs and the exchange of
// their arguments.
func BeforeExchange(d *Scheduler, f func()) { d.beforeExchange.Store(&f) }

// GraphFailed returns a channel closed once d knows that its graph
// failed (a failure here, or heard of), for tests that wait for it.
func GraphFailed(d *Scheduler) <-chan struct{} { return d.graph.Done() }

// CachedCopies is the number of copies this rank of d holds of handles
// that other ranks own (reductions' partial results not counted).
func CachedCopies(d *Scheduler) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, h := range d.handles {
		if h.local != nil && h.owner != d.rank && !h.isPartial {
			n++
		}
	}
	return n
}

// Kept returns how many handles d keeps on this rank (reductions'
// partial results included) and the capacity of the slice that keeps
// them.
func Kept(d *Scheduler) (live, capacity int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.handles), cap(d.handles)
}

// PeersReached asks the other ranks of d how many steps of the graph
// check each has started (ctrlAsk), for tests that wait until a rank
// has started a comparison; a rank that did not answer is absent.
func PeersReached(d *Scheduler) map[int]int {
	answers, _ := d.askAll()
	out := make(map[int]int, len(answers))
	for r, a := range answers {
		out[r] = a.reached
	}
	return out
}

// BeforeCheckExchange makes the graph check on d call f between a
// comparison of the graphs that found the ranks' windows apart and the
// exchange of their submissions.
func BeforeCheckExchange(d *Scheduler, f func()) { d.beforeCheckExchange.Store(&f) }
