package scheduler

import (
	"errors"
	"fmt"
	"time"
)

// Stage 2: dependencies. A submitted task is wired after the earlier
// accesses to its data (StarPU's sequential consistency), its After tasks
// and its tags; when its last predecessor completes (finish.go) it goes
// on to ready.go.

// wire adds t's dependencies and returns how many edges it pushed on
// predecessors' successor stacks, which the caller adds to t.pending at
// once (see pushEdge).
//
// A task's accesses to all its handles are wired atomically, under the
// one lock of the scheduler's handles (Scheduler.handleMu). Wiring them
// one by one would let two goroutines that submit at once order two
// tasks A before B on one handle and B before A on another, a dependency
// cycle that never runs (StarPU takes a task's handles' locks together,
// sorted, for the same reason).
//
// Wiring is most of what a submission costs, so it counts its atomic
// operations: one lock for all the handles, t's references from the
// access lists it joins taken at once, one edge for a predecessor
// reached through several handles, and the references the lists drop
// released together after the lock.
func (s *Scheduler) wire(t *Task) int32 {
	var ws wireState
	if !t.dupAccess {
		// Each access its own handle: wired as they are, in one pass.
		if len(t.Access) > 0 {
			s.wireAccesses(t, &ws)
		} else if t.pooled {
			storeUnpublished(&t.refs, 1) // its execution's
		}
	} else {
		s.wireMerged(t, &ws)
	}
	if len(t.After) > 0 {
		ws.edges += s.wireAfter(t)
	}
	if len(t.AfterTags) > 0 || t.Tag != 0 {
		ws.edges += s.wireTags(t)
	}
	return ws.edges
}

// wireAccesses wires t's accesses, which name each handle once, under
// s.handleMu (see wireHandles), and sets a pooled t's references: its
// execution's and one per access list it joins (see hold), at once.
// Nothing reads them until t's wiring is published: no other wiring
// sees t before s.handleMu is released, and the completions of the
// predecessors it waits for touch its pending count only.
func (s *Scheduler) wireAccesses(t *Task, ws *wireState) {
	refs := int32(1)
	s.handleMu.Lock()
	for i := range t.Access {
		a := &t.Access[i]
		if a.Mode == ModeScratch {
			continue
		}
		refs++
		s.wireAccessLocked(t, a.Handle, a.Mode, ws)
	}
	if t.pooled {
		storeUnpublished(&t.refs, refs-ws.unjoined)
	}
	s.handleMu.Unlock()
	ws.releaseAll(s)
}

// wireMerged wires the accesses of t, which names a handle more than
// once: one wiring per handle, with the union of its modes.
func (s *Scheduler) wireMerged(t *Task, ws *wireState) {
	var (
		hs    [8]wiring
		wired = hs[:0]
	)
	for i := range t.Access {
		a := t.Access[i]
		if a.Mode == ModeScratch {
			continue
		}
		dup := false
		for j := 0; j < i; j++ {
			if t.Access[j].Handle == a.Handle {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		m := a.Mode
		for j := i + 1; j < len(t.Access); j++ {
			if t.Access[j].Handle == a.Handle {
				m |= t.Access[j].Mode
			}
		}
		wired = append(wired, wiring{a.Handle, m})
	}
	if len(wired) > 0 {
		s.wireHandles(t, wired, ws)
	} else if t.pooled {
		storeUnpublished(&t.refs, 1) // its execution's
	}
}

// wireAfter makes t wait for its After tasks and returns the edges it
// pushed. The check for a cycle of After tasks (checkAfter, made again
// here when t was named in After before it was wired) and the edges are
// one step under s.tagMu: two tasks that name each other, submitted at
// once, both pass validate's check, and the second to be wired finds
// the cycle here and fails (ErrBadData) instead of waiting forever, the
// first then canceled by its failure.
//
// Once Close has ended the waits (endStuckWaits), an After task still
// new can never be submitted (Submit refuses it): it is failed as never
// submitted, and t canceled, rather than t waiting for it forever.
func (s *Scheduler) wireAfter(t *Task) int32 {
	var ready []*Task
	s.tagMu.Lock()
	n := s.wireAfterLocked(t, &ready)
	s.tagMu.Unlock()
	for _, x := range ready {
		s.ready(x, nil)
	}
	return n
}

// wireAfterLocked is wireAfter with s.tagMu held; the tasks released by
// failing never-submitted ones are appended to ready.
func (s *Scheduler) wireAfterLocked(t *Task, ready *[]*Task) int32 {
	if _, early := s.early[t]; early {
		if err := s.afterCycleLocked(t); err != nil {
			t.fail(err)
			t.afterWired = true
			return 0
		}
	}
	var n int32
	for _, p := range t.After {
		if p == nil {
			continue
		}
		if s.tagsEnded && p.state.Load() == stateNew {
			*ready = s.failNeverSubmitted(p, *ready)
		}
		if !p.afterWired && p.state.Load() < stateDone {
			// Named before its own After edges are wired (not
			// submitted yet, or being submitted): its wiring looks
			// for a cycle through t.
			s.noteEarlyLocked(p)
		}
		if s.pushEdge(p, t, false, false) {
			n++
		}
	}
	t.afterWired = true
	return n
}

// wireTags makes t wait for its AfterTags and binds its tag to it, and
// returns the edges it pushed. As in wireAfter, the check for a cycle
// of tags (validate's checkTags, made again here) and the declaration
// are one step under s.tagMu, so that of two tasks waiting for each
// other's tag, submitted at once, the second fails (ErrBadData) and the
// first is canceled by it, instead of both waiting forever.
func (s *Scheduler) wireTags(t *Task) int32 {
	s.tagMu.Lock()
	defer s.tagMu.Unlock()
	var n int32
	if err := s.tagCycleLocked(t); err != nil {
		t.fail(err)
	} else {
		for _, g := range t.AfterTags {
			if g != 0 && s.addTagDepLocked(g, t) { // tag 0: no tag
				n++
			}
		}
	}
	if t.Tag != 0 {
		s.declareTagLocked(t)
	}
	return n
}

// wireHandles wires t's accesses to its handles, wired (one per handle,
// at least one), under s.handleMu: no other task's wiring can come
// between t's on two handles.
func (s *Scheduler) wireHandles(t *Task, wired []wiring, ws *wireState) {
	s.handleMu.Lock()
	for _, w := range wired {
		s.wireAccessLocked(t, w.h, w.m, ws)
	}
	if t.pooled {
		// As in wireAccesses.
		storeUnpublished(&t.refs, int32(1+len(wired))-ws.unjoined)
	}
	s.handleMu.Unlock()
	ws.releaseAll(s)
}

// wiring is one handle of a task to wire and the union of its modes.
type wiring struct {
	h *Handle
	m Mode
}

// wireState is what one wire call remembers across a task's handles:
// the predecessors it has waited for (a task that wrote all of them is
// one dependency, not one per handle) and the task references the
// handles' lists dropped, released after the locks.
type wireState struct {
	preds [6]predDep
	np    int
	drops [6]dropRef
	nd    int
	edges int32 // edges pushed, not yet in t.pending
	// unjoined counts the handles whose lists t did not join (unusable
	// handles): wire sets t's references without theirs.
	unjoined int32
}

// predDep is a predecessor wire has made the task wait for.
type predDep struct {
	p    *Task
	weak bool
}

// dropRef counts the references to one task that wire dropped.
type dropRef struct {
	t *Task
	n int32
}

// dep makes t wait for p, unless it already does (with an edge at least
// as strong).
func (s *Scheduler) dep(ws *wireState, p, t *Task, weak bool) {
	for i := range ws.np {
		if d := ws.preds[i]; d.p == p && (!d.weak || weak) {
			return
		}
	}
	if ws.np < len(ws.preds) {
		ws.preds[ws.np] = predDep{p, weak}
		ws.np++
	}
	if s.pushEdge(p, t, weak, false) {
		ws.edges++
	}
}

// drop releases a list's reference to x, later (releaseAll) when there
// is room to remember it.
func (s *Scheduler) drop(ws *wireState, x *Task) {
	if !x.pooled {
		return
	}
	for i := range ws.nd {
		if ws.drops[i].t == x {
			ws.drops[i].n++
			return
		}
	}
	if ws.nd < len(ws.drops) {
		ws.drops[ws.nd] = dropRef{x, 1}
		ws.nd++
		return
	}
	s.release(x)
}

// releaseAll releases the references drop kept.
func (ws *wireState) releaseAll(s *Scheduler) {
	for _, d := range ws.drops[:ws.nd] {
		s.releaseN(d.t, d.n)
	}
}

// wireAccessLocked makes t depend on the previous accesses to h, after
// StarPU's sequential consistency: accesses are grouped into runs of
// compatible ones (reads, commuting writes, reductions); a task depends
// on the group before its own, and a write starts a new group. wire
// counts t's reference for h's list (wireState.unjoined when t does not
// join it). s.handleMu is held.
func (s *Scheduler) wireAccessLocked(t *Task, h *Handle, m Mode, ws *wireState) {
	if h.status.Load() != handleLive {
		if err := h.usableLocked(); err != nil {
			t.fail(err)
			ws.unjoined++
			return
		}
	}
	if !h.implicit {
		// Remember users only, for Unregister.
		h.cur = s.appendPruned(h.cur, t)
		return
	}
	cat := category(m)
	if h.curCat == catRedux && cat != catRedux {
		h.flushReduxLocked()
	}
	// A task that only writes h starts a new version of it: it is
	// ordered after the earlier accesses but does not need their data, so
	// their failure does not cancel it (it is how a handle recovers after
	// a failed task).
	weak := m == ModeW
	if cat == h.curCat && cat != catWrite && cat != catSync {
		// t joins the group: it waits for what its first task waited
		// for, with the same edges (see nread).
		for i, p := range h.prev {
			w := weak
			if i < int(h.nread) {
				// A reader does not conflict with a detached reader
				// that failed; a commuting write or reduction does.
				w = p.Codelet.Detached == nil || cat == catRead
			}
			s.dep(ws, p, t, w)
		}
		h.cur = s.appendPruned(h.cur, t)
	} else {
		// After a group of readers, t needs the data they read, not
		// their success: a reader's failure does not cancel t, the
		// failure of the data's writers (the group before the readers)
		// does. A detached reader is the exception: it may fail while
		// its operation (a transfer) still reads the data, and t must
		// not write it then.
		// After a Partition or Unpartition (catSync), the group may
		// begin with readers too (see nread).
		readers := h.curCat == catRead
		nr := 0
		if h.curCat == catSync {
			nr = int(h.nread)
		}
		for i, p := range h.cur {
			w := weak
			if readers || i < nr {
				// A reader after a partition boundary does not
				// conflict with a detached reader before it either.
				w = p.Codelet.Detached == nil || cat == catRead
			}
			s.dep(ws, p, t, w)
		}
		if readers && !weak {
			for i, p := range h.prev {
				s.dep(ws, p, t, i < int(h.nread) && p.Codelet.Detached == nil)
			}
		}
		old := h.prev
		if readers && !weak && (cat == catCommute || cat == catRedux) {
			// The tasks that will join t's group need the same edges
			// as t: prev keeps the readers and, after them, their
			// predecessors (its own readers first), whose references
			// move with them.
			h.nread += int32(len(h.cur))
			h.prev = append(h.cur, old...)
			clear(old)
			h.cur = append(old[:0], t)
			h.curCat = cat
			if cat == catRedux {
				s.regMu.Lock()
				s.reduxLive[h] = struct{}{}
				s.regMu.Unlock()
			}
			return
		}
		h.nread = int32(nr) // a sync group's readers lead the new prev
		if len(old) <= 2 {
			// A task reached through several handles is one of a few
			// writers; a long list of readers is released at once.
			for i, x := range old {
				s.drop(ws, x)
				old[i] = nil
			}
		} else {
			s.dropAll(old)
		}
		h.prev = h.cur
		h.cur = append(old[:0], t)
		h.curCat = cat
	}
	if cat == catRedux {
		s.regMu.Lock()
		s.reduxLive[h] = struct{}{}
		s.regMu.Unlock()
	}
}

// appendPruned appends t, which holds a reference for the list (see
// hold), first dropping completed tasks when the slice is full, so long
// runs of readers do not grow without bound.
func (s *Scheduler) appendPruned(ts []*Task, t *Task) []*Task {
	if len(ts) == cap(ts) && len(ts) >= 16 {
		n := 0
		for _, x := range ts {
			if x.state.Load() < stateDone {
				ts[n] = x
				n++
			} else {
				s.release(x)
			}
		}
		clear(ts[n:])
		ts = ts[:n]
	}
	return append(ts, t)
}

// dropAll releases the references a handle's access list holds on its
// tasks and clears it.
func (s *Scheduler) dropAll(ts []*Task) {
	for _, x := range ts {
		s.release(x)
	}
	clear(ts)
}

// flushReduxLocked ends a group of Redux accesses to h: it submits the
// task that combines the per-worker copies into h, which the next
// accesses depend on. s.handleMu is held.
func (h *Handle) flushReduxLocked() {
	if h.curCat != catRedux {
		return
	}
	r := h.insertLocked(&Codelet{Name: "redux:" + h.rcombine.name(), CPU: h.reduceInto}, nil)
	r.cpuOnly = true // it reads the copies on devices through RAM
	// A reduction that does not combine (a contribution failed or was
	// canceled, so it is canceled; or a combine failed) combines none
	// of the copies left: they would otherwise stay live and be added
	// into the next group's result, and hold their devices' memory.
	// The callback runs before the next accesses to h are released.
	r.Callback = func(r *Task) {
		if r.err != nil {
			h.discardRedux()
		}
	}
	s := h.s
	s.regMu.Lock()
	delete(s.reduxLive, h)
	s.regMu.Unlock()
	s.readyInserted(r)
}

// gatherLocked inserts, with devices, the task that brings the newest
// data of h's tiles back into h's RAM (dataLayer.gather) after the
// tiles' last accesses, and before h's next ones. It runs on no worker:
// its copies run on the copy engines, waited for on a goroutine of its
// own. s.handleMu is held.
//
// It gathers also when a tile's last writer failed or was canceled, as
// the tiles' data are in RAM without devices (a task that failed
// changed nothing there), and then completes canceled by that failure,
// so that h's next readers are canceled and a W starts anew: canceled
// before it ran, it gathered nothing, and WaitAll's write-back of the
// tiles' replicas, still resident, copied them over what h's next
// writers had put in RAM. After a detached reader that failed, which
// may still be reading, it writes nothing.
func (h *Handle) gatherLocked(tiles [][]*Handle) {
	s := h.s
	var writers []*Task // held; their failure cancels the gather
	g := h.insertLocked(&Codelet{Name: "gather", Detached: func(g *Task, done func(error)) {
		go func() {
			var err error
			gather := true
			for _, w := range writers {
				// A detached reader that failed may still be reading
				// a tile: nothing is written then (as before a writer).
				if w.Codelet.Detached != nil && w.state.Load() == stateFailed {
					gather = false
				}
			}
			if gather {
				err = s.data.gather(h, tiles)
			}
			for _, w := range writers {
				if err == nil && w.state.Load() == stateFailed {
					g.cancel(w.err)
					g.mu.Lock()
					err = g.depErr
					g.mu.Unlock()
				}
				s.release(w)
			}
			done(err)
		}()
	}}, &writers)
	g.internal = true
	s.readyInserted(g)
}

// insertLocked makes a task of cl that writes h after the accesses
// submitted so far and before the next ones: how a step of the engine's
// own (a reduction's combination, a partition's gather) joins the
// sequential task flow. The caller finishes it and calls readyInserted.
// With strong non-nil, the task waits for every predecessor weakly, and
// those whose failure would cancel it are appended to *strong, held, for
// the task to check itself. h.s.handleMu is held.
func (h *Handle) insertLocked(cl *Codelet, strong *[]*Task) *Task {
	s := h.s
	t := &Task{Codelet: cl, Context: s.cx.global, engine: true}
	t.Access = append(t.inlineAcc[:0], Access{h, ModeRW})
	t.state.Store(stateSubmitted)
	t.s = s
	t.pending.Store(1)
	if s.cfg.stats {
		t.id = s.nextID.Add(1)
		s.noteCodelet(cl, t.id)
	}
	s.inflight.add(1)
	edge := func(p *Task, weak bool) {
		if !weak && strong != nil {
			p.hold()
			*strong = append(*strong, p)
			weak = true
		}
		s.pushEdge(p, t, weak, true)
	}
	// After readers, t needs the data they read, not their success (see
	// wireAccessLocked and nread).
	switch h.curCat {
	case catRead:
		for _, p := range h.cur {
			edge(p, p.Codelet.Detached == nil)
		}
		for i, p := range h.prev {
			edge(p, i < int(h.nread) && p.Codelet.Detached == nil)
		}
	case catSync:
		for i, p := range h.cur {
			edge(p, i < int(h.nread) && p.Codelet.Detached == nil)
		}
	default:
		for _, p := range h.cur {
			edge(p, false)
		}
	}
	old := h.prev
	s.dropAll(old)
	h.prev = h.cur
	h.cur = append(old[:0], t)
	h.curCat = catWrite
	h.nread = 0
	return t
}

// readyInserted readies a task of insertLocked once its predecessors,
// if any, are done.
func (s *Scheduler) readyInserted(t *Task) {
	if t.pending.Add(-1) == 0 {
		s.ready(t, nil)
	}
}

// discardRedux drops the per-worker copies of h's last group of Redux
// accesses that its reduction task did not combine, freeing those on
// devices. Every task of the group has completed.
func (h *Handle) discardRedux() {
	for id, rc := range h.rcopies {
		if rc == nil || !rc.live {
			continue
		}
		rc.live = false
		if rc.dev != nil {
			h.rcopies[id] = nil
			h.s.data.freeRedux(rc.node, rc.mem, h)
		}
	}
}

// reduceInto is the reduction task: combine every live per-worker copy
// into the handle (buffer 0). A copy on a device whose memory the host
// cannot address (a GPU) is copied to RAM first; copies on devices are
// freed once combined.
func (h *Handle) reduceInto(c *Call) error {
	cc := Call{Task: c.Task, Worker: c.Worker, Size: 1}
	pair := [2]*buffer{c.bufs[0], nil}
	var staged *buffer // RAM for copies on GPUs, allocated once
	var errs []error
	for id, rc := range h.rcopies {
		if rc == nil || !rc.live {
			continue
		}
		rc.live = false
		src := rc.buf
		if rc.dev != nil {
			h.rcopies[id] = nil
			defer h.s.data.freeRedux(rc.node, rc.mem, h) // after its bytes are combined
		}
		if rc.dev != nil && rc.dev.host == nil {
			if staged == nil {
				var err error
				if staged, err = h.ram.newLike(h.kind); err != nil {
					return err
				}
			}
			done := make(chan error, 1)
			rc.dev.copyOut(staged, rc.mem, func(_ time.Time, err error) { done <- err })
			if err := <-done; err != nil {
				errs = append(errs, fmt.Errorf("reading a reduction copy of %v on %s: %w", h, rc.dev.name(), err))
				continue
			}
			src = staged
		}
		pair[1] = src
		cc.bufs = pair[:]
		if err := h.rcombine.CPU(&cc); err != nil {
			return fmt.Errorf("combining a reduction copy of %v: %w", h, err)
		}
	}
	return errors.Join(errs...)
}

// sealed marks a completed task's successor stack.
var sealed = &edge{}

// pushEdge makes t wait for p; unless weak, p's failure cancels t.
// Lock-free: t's edge is pushed on p's successor stack unless p has
// sealed it by completing; it reports whether it was.
//
// p's completion takes one from t.pending per edge. With live, the edge
// is counted in t.pending before it is pushed, as t may already be
// counted down by others (an engine task's hold, insertLocked). Without,
// the caller counts the edges it pushed, all at once when t is wired
// (submitHeld): until then nothing but these edges' completions touches
// t.pending, which they take below zero, so it reaches zero only after
// that one add, once, for whichever takes the last count. One atomic add
// per task instead of one per edge and two for the submission's hold.
func (s *Scheduler) pushEdge(p, t *Task, weak, live bool) bool {
	if p == t {
		return false
	}
	if s.cfg.stats {
		// Traced even when p has already completed: the dependency is
		// part of the graph whatever the timing.
		t.preds = append(t.preds, p.id)
	}
	if st := p.state.Load(); st >= stateDone {
		if st == stateFailed && !weak {
			t.cancel(p.err)
		}
		return false
	}
	if p.batch.Load() != nil || p.heldDep.Load() {
		t.heldDep.Store(true) // t's Wait must flush the batches (Task.Wait)
	}
	e := t.newEdge()
	e.weak = weak
	if live {
		t.pending.Add(1)
	}
	for {
		head := p.succs.Load()
		if head == sealed {
			// p completed meanwhile; its state and err are set.
			if live {
				t.pending.Add(-1)
			}
			if p.state.Load() == stateFailed && !weak {
				t.cancel(p.err)
			}
			return false
		}
		e.next = head
		if p.succs.CompareAndSwap(head, e) {
			return true
		}
	}
}

// cancel marks t as not to be run because a predecessor failed with err
// (or was canceled with it).
func (t *Task) cancel(err error) {
	var root error = err
	var ce *canceledError
	via := ""
	if errors.As(err, &ce) {
		root, via = ce.cause, ce.via
		if ce.unstarted {
			via = ce.name // canceled by its CancelOn context: name it
		}
	}
	t.fail(&canceledError{name: t.Codelet.name(), cause: root, via: via})
}

// fail marks t as not to be run, with err as its error.
func (t *Task) fail(err error) {
	t.mu.Lock()
	if t.depErr == nil {
		t.depErr = err
	}
	t.mu.Unlock()
}
