package static

import (
	"cmp"
	"slices"
)

// Root causes of a late start (LateCause.RootCause).
const (
	// CauseRanLong: the root runnable ran past its WCET, and its late
	// end delayed what followed it.
	CauseRanLong = "ran_long"
	// CauseLateThread: the root runnable started late with no
	// predecessor ending late: its thread started it late (a loaded
	// machine, the OS, the clock).
	CauseLateThread = "late_thread"
)

// A LateCause counts the frames in which a runnable started late for one
// reason: the predecessor it waited for, and the root cause up the chain
// of late ends.
type LateCause struct {
	// WaitedFor is the predecessor (a dependency, its submitter, or the
	// run before it on its resource) whose late end delayed the start;
	// empty when none ended after its planned start: its thread started
	// it late.
	WaitedFor string `json:"waited_for,omitempty"`
	// Root is the runnable at the root of the delay, RootCause why
	// (CauseRanLong, CauseLateThread).
	Root      string `json:"root"`
	RootCause string `json:"root_cause"`
	Frames    int    `json:"frames"`
}

// A RootCause counts the late starts, over every runnable, that trace
// back to one runnable.
type RootCause struct {
	Root      string `json:"root"`
	RootCause string `json:"root_cause"`
	Frames    int    `json:"frames"`
}

// rowRef is one row of a run record: runnable r, row i; r -1 for none
// (noRow).
type rowRef struct{ r, i int }

// noRow returns the rowRef of no row.
func noRow() rowRef { return rowRef{-1, -1} }

// blamer finds, for a row that started late, the predecessor whose late
// end delayed it and the root cause of that end.
type blamer struct {
	run    *Run
	byName map[string]int
	// prev is, per runnable and row, the run before it on its resource
	// (r -1 for none).
	prev [][]rowRef
	memo map[rowRef]root
}

// root is where a delay began: a runnable and why.
type root struct {
	r     int
	cause string
}

func newBlamer(r *Run) *blamer {
	b := &blamer{run: r, byName: map[string]int{}, prev: make([][]rowRef, len(r.Runnables)), memo: map[rowRef]root{}}
	type key struct{ client, resource string }
	var keys []key
	onResource := map[key][]int{} // the runnables of each thread (or stream)
	for ri, rr := range r.Runnables {
		b.byName[rr.Name] = ri
		b.prev[ri] = make([]rowRef, len(rr.Seq))
		k := key{rr.Client, rr.Resource}
		if _, ok := onResource[k]; !ok {
			keys = append(keys, k)
		}
		onResource[k] = append(onResource[k], ri)
	}
	// The run before each on its resource: its thread (or stream) runs
	// them in the order of their planned starts.
	for _, k := range keys {
		b.linkResource(onResource[k])
	}
	return b
}

// linkResource sets prev for the rows of the runnables rs, which share
// a resource: each row's is the row before it in the order of planned
// starts (ties in the order of rs, then of the rows). Each runnable's
// rows are in the order of their frames, hence of their planned starts,
// so a merge of the runnables' rows (a heap of one cursor each, N log k
// for N rows of k runnables) gives that order without sorting every
// row; a record whose rows are out of order (written by hand) is sorted.
func (b *blamer) linkResource(rs []int) {
	inOrder := true
	n := 0
	for _, ri := range rs {
		n += len(b.run.Runnables[ri].Seq)
		inOrder = inOrder && slices.IsSorted(b.run.Runnables[ri].Planned)
	}
	if !inOrder {
		rows := make([]rowRef, 0, n)
		for _, ri := range rs {
			for i := range b.run.Runnables[ri].Seq {
				rows = append(rows, rowRef{ri, i})
			}
		}
		slices.SortStableFunc(rows, func(x, y rowRef) int { return cmp.Compare(b.planned(x), b.planned(y)) })
		last := noRow()
		for _, x := range rows {
			b.prev[x.r][x.i], last = last, x
		}
		return
	}
	// h is a min-heap of the next row of each runnable, by planned start
	// and then by runnable (rs is in runnable order: a tie goes as the
	// stable sort would put it).
	h := make([]rowRef, 0, len(rs))
	less := func(x, y rowRef) bool {
		px, py := b.planned(x), b.planned(y)
		return px < py || px == py && x.r < y.r
	}
	down := func(i int) {
		for {
			m := i
			if l := 2*i + 1; l < len(h) && less(h[l], h[m]) {
				m = l
			}
			if r := 2*i + 2; r < len(h) && less(h[r], h[m]) {
				m = r
			}
			if m == i {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for _, ri := range rs {
		if len(b.run.Runnables[ri].Seq) > 0 {
			h = append(h, rowRef{ri, 0})
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	last := noRow()
	for len(h) > 0 {
		x := h[0]
		b.prev[x.r][x.i], last = last, x
		if x.i+1 < len(b.run.Runnables[x.r].Seq) {
			h[0] = rowRef{x.r, x.i + 1}
		} else {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		down(0)
	}
}

func (b *blamer) rr(x rowRef) *RunnableRun { return &b.run.Runnables[x.r] }
func (b *blamer) planned(x rowRef) int64   { return b.rr(x).Planned[x.i] }
func (b *blamer) start(x rowRef) int64     { return b.rr(x).Start[x.i] }
func (b *blamer) end(x rowRef) int64       { return b.rr(x).End[x.i] }

// lateStart reports whether row x missed its deadline because it
// started late: started at its planned start, the same run would have
// ended in time. A deadline overrun that is not one ran longer than its
// WCET and its slack: its own body's.
func (b *blamer) lateStart(x rowRef) bool {
	rr := b.rr(x)
	f := rr.Flags[x.i]
	return f&FlagSkipped == 0 && f&FlagOverrunDeadline != 0 && rr.Planned[x.i]+rr.End[x.i]-rr.Start[x.i] <= rr.Deadline[x.i]
}

// delayer returns the predecessor of x whose end came last, when it came
// after x's planned start (x could not start on time): a dependency or
// the submitter in the same frame, or the run before x on its resource.
// Only a predecessor planned before x counts, so that the chain ends.
func (b *blamer) delayer(x rowRef) rowRef {
	rr := b.rr(x)
	seq := rr.Seq[x.i]
	best := noRow()
	consider := func(p rowRef) {
		if p == noRow() || b.planned(p) >= b.planned(x) || b.end(p) <= b.planned(x) {
			return
		}
		if best == noRow() || b.end(p) > b.end(best) {
			best = p
		}
	}
	pred := func(name string) {
		if ri, ok := b.byName[name]; ok {
			// The rows are in the order of their frames.
			if i, ok := slices.BinarySearch(b.run.Runnables[ri].Seq, seq); ok {
				consider(rowRef{ri, i})
			}
		}
	}
	for _, d := range rr.Deps {
		pred(d)
	}
	if rr.Submitter != "" {
		pred(rr.Submitter)
	}
	consider(b.prev[x.r][x.i])
	return best
}

// upstream returns the root of the delay of x's start: its thread's own
// lateness when no predecessor ended late, else the root of that
// predecessor's late end.
func (b *blamer) upstream(x rowRef) root {
	if r, ok := b.memo[x]; ok {
		return r
	}
	// Iteratively: a backlog on one resource chains many frames.
	var chain []rowRef
	var r root
	for {
		if m, ok := b.memo[x]; ok {
			r = m
			break
		}
		chain = append(chain, x)
		p := b.delayer(x)
		if p == noRow() {
			r = root{x.r, CauseLateThread}
			break
		}
		// p ended after x's planned start. If it would have, started at
		// its own planned start, it ran long (past its WCET: x was
		// planned after p's planned end); otherwise p's late start
		// delayed x, and the delay comes from further up.
		if b.planned(p)+b.end(p)-b.start(p) > b.planned(x) {
			r = root{p.r, CauseRanLong}
			break
		}
		x = p
	}
	for _, c := range chain {
		b.memo[c] = r
	}
	return r
}

// blame returns the late-start causes of runnable ri, counted by frame.
func (b *blamer) blame(ri int) (late int, causes []LateCause) {
	rr := &b.run.Runnables[ri]
	for i := range rr.Seq {
		x := rowRef{ri, i}
		if !b.lateStart(x) {
			continue
		}
		late++
		c := LateCause{}
		if p := b.delayer(x); p != noRow() {
			c.WaitedFor = b.rr(p).Name
		}
		r := b.upstream(x)
		c.Root, c.RootCause = b.run.Runnables[r.r].Name, r.cause
		if j := slices.IndexFunc(causes, func(o LateCause) bool {
			return o.WaitedFor == c.WaitedFor && o.Root == c.Root && o.RootCause == c.RootCause
		}); j >= 0 {
			causes[j].Frames++
			continue
		}
		c.Frames = 1
		causes = append(causes, c)
	}
	slices.SortStableFunc(causes, func(x, y LateCause) int { return cmp.Compare(y.Frames, x.Frames) })
	return late, causes
}
