package dist

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
)

// In master/worker mode a worker rank keeps the data it received for a
// task that only reads them (R), as StarPU-MPI keeps received data on
// the receiving node until they are written (starpu_mpi_cache): the
// next task on that rank that reads the same version of the same handle
// gets a reference to the copy instead of the bytes. The master decides
// everything (what each rank keeps, and what it evicts when its bytes
// pass the limit), and tells the worker rank in the task's header, so
// that its view of each rank's copies is exact: a rankHeld on the master,
// a heldData on the worker rank.
//
// A copy stops being current when the handle is written: by a task the
// master submitted (Master.Submit) that writes the handle, or a handle
// whose memory overlaps it (a tile, the whole it is a tile of), on any
// rank, or by the host through Handle.Data on the master
// (Handle.HostWrites). The master then drops it, and tells the rank at
// its next task there.

// DefaultMasterCacheBytes is the bytes of read-only data each worker
// rank keeps between tasks by default (Master.SetCacheLimit).
const DefaultMasterCacheBytes = 256 << 20

// masterCache is the master's view of the copies every worker rank
// holds.
type masterCache struct {
	mu     sync.Mutex
	limit  int64
	nextID uint64
	tick   uint64
	ranks  []*rankHeld // by rank; nil at the master's
}

// rankHeld is what one worker rank holds, as the master decided.
type rankHeld struct {
	bytes    int64                            // of every entry, stale ones included
	entries  map[uint64]*heldEntry            // by id, stale ones included
	byHandle map[*scheduler.Handle]*heldEntry // the current ones
	drops    []uint64                         // dropped, not yet told to the rank
}

// heldEntry is one copy on a worker rank.
type heldEntry struct {
	id         uint64
	h          *scheduler.Handle
	lo, hi     uintptr // the master's memory the copy is of
	bytes      int64
	typ        uint8
	hostWrites uint64 // h.HostWrites() when it was sent
	pins       int    // tasks in flight that use it
	used       uint64 // the tick of its last use: least recently used goes first
	stale      bool   // written since: dropped once unpinned
}

func newMasterCache(size int) *masterCache {
	return &masterCache{limit: DefaultMasterCacheBytes, ranks: make([]*rankHeld, size)}
}

// rank returns rank r's view, made on first use. mc.mu is held.
func (mc *masterCache) rank(r int) *rankHeld {
	if mc.ranks[r] == nil {
		mc.ranks[r] = &rankHeld{entries: map[uint64]*heldEntry{}, byHandle: map[*scheduler.Handle]*heldEntry{}}
	}
	return mc.ranks[r]
}

// current reports whether e is the current version of its handle's
// data. mc.mu is held.
func (e *heldEntry) current() bool {
	return !e.stale && e.hostWrites == e.h.HostWrites()
}

// holds reports whether rank r holds the current version of h's data.
func (mc *masterCache) holds(r int, h *scheduler.Handle) bool {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	rh := mc.ranks[r]
	if rh == nil {
		return false
	}
	e := rh.byHandle[h]
	return e != nil && e.current()
}

// retire makes e stale, and drops it unless a task in flight uses it.
// mc.mu is held.
func (rh *rankHeld) retire(e *heldEntry) {
	if !e.stale {
		e.stale = true
		if rh.byHandle[e.h] == e {
			delete(rh.byHandle, e.h)
		}
	}
	if e.pins == 0 {
		rh.drop(e)
	}
}

// drop forgets e, to be told to the rank. mc.mu is held.
func (rh *rankHeld) drop(e *heldEntry) {
	if _, ok := rh.entries[e.id]; !ok {
		return
	}
	delete(rh.entries, e.id)
	if rh.byHandle[e.h] == e {
		delete(rh.byHandle, e.h)
	}
	rh.bytes -= e.bytes
	rh.drops = append(rh.drops, e.id)
}

// room evicts the least recently used entries that no task in flight
// uses until need more bytes fit under limit; it reports whether they
// do. mc.mu is held.
func (rh *rankHeld) room(need, limit int64) bool {
	for rh.bytes+need > limit {
		var lru *heldEntry
		for _, e := range rh.entries {
			if e.pins == 0 && (lru == nil || e.used < lru.used) {
				lru = e
			}
		}
		if lru == nil {
			return false
		}
		rh.drop(lru)
	}
	return true
}

// region is the master's memory of a task's buffer: from its first
// element to its last.
type region struct{ lo, hi uintptr }

// dataRegion returns the memory of v, a slice of numbers seen as a rows x
// cols matrix of leading dimension ld (a vector: cols and ld 1).
func dataRegion(v any, rows, cols, ld int) region {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rows == 0 || cols == 0 {
		return region{}
	}
	lo := rv.Pointer()
	n := uintptr((rows-1)*max(ld, cols)+cols) * rv.Type().Elem().Size()
	return region{lo, lo + n}
}

func (a region) overlaps(lo, hi uintptr) bool { return a.lo < hi && lo < a.hi }

// written drops every rank's copies of the handles and memory that a
// task writes (hs, rs: the handle and memory of each written access).
func (mc *masterCache) written(hs []*scheduler.Handle, rs []region) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	for _, rh := range mc.ranks {
		if rh == nil || len(rh.byHandle) == 0 {
			continue
		}
		for _, e := range rh.byHandle {
			for i, h := range hs {
				if e.h == h || rs[i].overlaps(e.lo, e.hi) {
					rh.retire(e)
					break
				}
			}
		}
	}
}

// written drops every rank's copies of what c's task writes, before it
// runs: a write through Master.Submit on any worker, the master's own
// cores included.
func (m *Master) written(c *scheduler.Call) {
	var hs []*scheduler.Handle
	var rs []region
	for i, a := range c.Task.Access {
		if !writes(a.Mode) {
			continue
		}
		rows, cols, ld := c.Dims(i)
		hs = append(hs, a.Handle)
		rs = append(rs, dataRegion(c.Data(i), rows, cols, ld))
	}
	if len(hs) > 0 {
		m.cache.written(hs, rs)
	}
}

// setLimit sets the bytes each worker rank keeps; ranks above it evict
// at their next task.
func (mc *masterCache) setLimit(n int64) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	mc.limit = max(n, 0)
}

// cachePlan is what the master tells a worker rank about its copies for
// one task, and what it releases once the task's result is in.
type cachePlan struct {
	held  []uint64 // by buffer: the id of the rank's copy it reads, 0: sent
	keep  []uint64 // by buffer: the id under which the rank keeps it, 0: not kept
	evict []uint64 // the ids the rank drops first
	pins  []*heldEntry
	made  []*heldEntry // entries this task sends
}

// plan decides, for a task to rank r whose first buffer of each handle
// (same[i] == i) reads data in modes, which buffers the rank holds
// already (sent as a reference), which it keeps, and what it evicts.
// regions and types are the buffers' master memory and comm.Datatype.
func (mc *masterCache) plan(r int, acc []scheduler.Access, same []int, modes []scheduler.Mode, bufs []comm.Buf, regions []region) *cachePlan {
	p := &cachePlan{held: make([]uint64, len(bufs)), keep: make([]uint64, len(bufs))}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	rh := mc.rank(r)
	// Make room for what the limit no longer allows (SetCacheLimit).
	rh.room(0, mc.limit)
	for i, b := range bufs {
		if same[i] != i || modes[i] != scheduler.ModeR || len(b.Bytes) == 0 {
			continue
		}
		h := acc[i].Handle
		mc.tick++
		if e := rh.byHandle[h]; e != nil {
			if e.current() && e.bytes == int64(len(b.Bytes)) && e.typ == uint8(b.Type) {
				e.pins++
				e.used = mc.tick
				p.pins = append(p.pins, e)
				p.held[i] = e.id
				continue
			}
			rh.retire(e) // the host wrote it (Handle.Data), or its shape changed
		}
		n := int64(len(b.Bytes))
		if n > mc.limit || !rh.room(n, mc.limit) {
			continue
		}
		mc.nextID++
		e := &heldEntry{id: mc.nextID, h: h, lo: regions[i].lo, hi: regions[i].hi, bytes: n, typ: uint8(b.Type),
			hostWrites: h.HostWrites(), pins: 1, used: mc.tick}
		rh.entries[e.id] = e
		rh.byHandle[h] = e
		rh.bytes += n
		p.pins = append(p.pins, e)
		p.made = append(p.made, e)
		p.keep[i] = e.id
	}
	p.evict, rh.drops = rh.drops, nil
	return p
}

// done releases p's entries once its task's result is in (or the task
// failed): header reports whether its header reached the rank (with the
// evictions it tells), sent whether its buffers did; if not, what p sent
// is dropped, as the rank may not hold it.
func (mc *masterCache) done(r int, p *cachePlan, header, sent bool) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	rh := mc.rank(r)
	for _, e := range p.pins {
		e.pins--
	}
	if !header {
		rh.drops = append(rh.drops, p.evict...) // not told
	}
	if !sent {
		for _, e := range p.made {
			rh.retire(e)
		}
	}
	for _, e := range p.pins {
		if e.stale && e.pins == 0 {
			rh.drop(e)
		}
	}
}

// heldLink is a worker rank's link that knows what the rank holds
// (scheduler.HoldingLink): dmda prices no transfer for a task's
// read-only data the rank holds, and prefers that rank.
type heldLink struct {
	*rankLink
	mc   *masterCache
	rank int
}

// Holds implements scheduler.HoldingLink.
func (l heldLink) Holds(h *scheduler.Handle) bool { return l.mc.holds(l.rank, h) }

var _ scheduler.HoldingLink = heldLink{}

// heldData is a worker rank's copies, shared by its slots: the master
// names them by id in a task's header (taskHeader.Held, Keep, Evict).
// Each copy is registered once with the rank's scheduler (which refuses
// two handles over one memory), and its tasks read it through that
// handle. A slot may read a copy that another slot is still receiving
// (the master sent that task's header first, but the slots take their
// messages concurrently): get waits for it.
type heldData struct {
	ls *scheduler.Scheduler
	mu sync.Mutex
	m  map[uint64]*heldCopy
}

// heldCopy is one copy; ready is closed once it is received and
// registered (h), or failed to be (err).
type heldCopy struct {
	ready chan struct{}
	data  any
	buf   comm.Buf
	h     *scheduler.Handle
	err   error
}

func newHeldData(ls *scheduler.Scheduler) *heldData {
	return &heldData{ls: ls, m: map[uint64]*heldCopy{}}
}

// slot returns id's copy, made empty if it is not there.
func (d *heldData) slot(id uint64) *heldCopy {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.m[id]
	if c == nil {
		c = &heldCopy{ready: make(chan struct{})}
		d.m[id] = c
	}
	return c
}

// fill keeps data (its bytes buf, a rows x cols matrix or a vector) as
// id's copy, registered with the rank's scheduler.
func (d *heldData) fill(id uint64, data any, buf comm.Buf, sh [3]int) error {
	c := d.slot(id)
	c.data, c.buf = data, buf
	if sh[1] == 1 && sh[2] == 1 {
		c.h, c.err = d.ls.RegisterVector(data)
	} else {
		c.h, c.err = d.ls.RegisterMatrix(data, sh[0], sh[1])
	}
	if c.err != nil {
		c.err = fmt.Errorf("keeping the copy %d: %w", id, c.err)
	}
	close(c.ready)
	return c.err
}

// get returns id's copy, waiting until it is received.
func (d *heldData) get(ctx context.Context, id uint64) (*heldCopy, error) {
	c := d.slot(id)
	select {
	case <-c.ready:
		return c, c.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the copy %d the master says this rank holds: %w", id, context.Cause(ctx))
	}
}

// drop forgets the copies ids, which no task uses (the master evicts
// only those), and unregisters them.
func (d *heldData) drop(ctx context.Context, ids []uint64) error {
	var cs []*heldCopy
	d.mu.Lock()
	for _, id := range ids {
		if c := d.m[id]; c != nil {
			cs = append(cs, c)
			delete(d.m, id)
		}
	}
	d.mu.Unlock()
	for _, c := range cs {
		select {
		case <-c.ready:
		default:
			continue // never received: nothing registered
		}
		if c.h != nil {
			if _, err := c.h.Unregister(ctx); err != nil {
				return fmt.Errorf("dropping a copy: %w", err)
			}
		}
	}
	return nil
}

// close unregisters every copy (the rank's RunMaster ends).
func (d *heldData) close(ctx context.Context) {
	d.mu.Lock()
	ids := make([]uint64, 0, len(d.m))
	for id := range d.m {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	_ = d.drop(ctx, ids)
}

// SetCacheLimit sets the bytes of read-only data each worker rank keeps
// between tasks (DefaultMasterCacheBytes until set): a task that only
// reads (R) a handle whose current version a worker rank holds sends the
// rank no bytes of it. Past the limit, the master evicts the copies
// least recently used (not those a running task reads); data larger
// than the limit are not kept. 0 keeps nothing, and every task sends
// all its data, as before the cache. A lower limit takes effect at each
// rank's next task. Call it within RunMaster's fn.
func (m *Master) SetCacheLimit(bytes int64) { m.cache.setLimit(bytes) }

// PeerStats returns the master's data transfers with each rank so far,
// indexed by rank: the buffers of its tasks sent to the rank
// (MessagesSent, BytesSent) and those the rank sent back
// (MessagesReceived, BytesReceived). Data a worker rank held already
// count nothing. The master's own entry is zero.
func (m *Master) PeerStats() []Stats {
	out := make([]Stats, len(m.peers))
	for r := range m.peers {
		out[r] = m.peers[r].load()
	}
	return out
}
