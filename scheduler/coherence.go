package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/hardware/accel"
)

// The data layer: memory nodes and MSI coherence (after StarPU's
// datawizard). RAM is node 0; each accelerator is a node of its own. A
// handle has a replica per node, each invalid, shared or modified. A
// task's data are made valid on its worker's node before it runs: a
// missing replica is allocated (evicting least-recently-used replicas
// when the node is full, writing back the only valid ones) and filled
// by a copy from a valid one, staged through RAM; a write leaves the
// writer's replica modified and every other invalid. Copies are
// asynchronous on the devices' copy engines; a policy that assigns a
// task ahead of time starts its inputs moving (prefetch). Fetch,
// Unregister, WaitAll and Close bring the newest version back to RAM;
// Data does too and then invalidates the devices' replicas, as the host
// may write what it returns (a host read-write access). Freed
// allocations go to a per-size cache for reuse; the scheduler gives the
// cache, and replicas nothing uses (clean ones, and modified ones after
// a write-back when the one asking may wait), back to another user of
// the device that runs short (reclaim). A full node admits one task waiting
// for room at a time (acquireTask), so that tasks waiting for room do
// not evict each other's inputs.
//
// A scheduler with no device has no data layer (s.data is nil): its
// handles live in RAM only and tasks take them without a lock.
//
// All coherence state is guarded by dataLayer.mu. Copies run outside it;
// a replica being filled has a fill channel, closed when the copy ends,
// that whoever needs the replica waits on. Three rules keep copies and
// tasks apart: a write waits until no copy of the handle is in flight;
// a copy only reads a valid replica, which cannot be written meanwhile;
// eviction takes only replicas no task or copy uses.

type mstate uint8

const (
	invalid mstate = iota
	shared
	modified
)

func (st mstate) String() string { return [...]string{"I", "S", "M"}[st] }

// A replica is a handle's data on one memory node.
type replica struct {
	state mstate
	mem   accel.Mem // the device allocation; nil in RAM or when none
	buf   *buffer   // what tasks see; RAM's is the handle's own buffer
	tasks int32     // running tasks using it
	reads int32     // copies reading it
	fill  chan struct{}
	err   error  // the error of the last copy into it, for the next acquirer
	last  uint64 // LRU stamp
	// wanted counts the tasks placed on this node that prefetched it and
	// have not run yet; kept when the replica is freed.
	wanted int32
	// undo marks a replica a task writes without reading it (W) that
	// held no valid data when the task took it: it holds nothing of the
	// handle's until the task has written it, so if the task fails (or
	// does not run) RAM's replica, valid before it and kept meanwhile
	// (keep, with its state in prior), is valid again (releaseLocked).
	// Only RAM's replica is ever kept: when only devices held valid
	// data, the task first brought them to RAM (acquireLocked), so a
	// kept replica holds no device memory. (Keeping devices' replicas,
	// which eviction then had to spare, deadlocked: a task waiting for
	// room on a full device waited for one, while the task it was kept
	// for could not end first - a detached receive in RAM waiting for
	// another rank whose tasks waited for this one, in
	// TestRandomGraphsOnDevices under load; as could a W task admitted
	// on another device, waiting for room there likewise.)
	undo, failed bool // failed: a task that pins it failed
	keep         bool // RAM's only
	prior        mstate
}

// A memNode is a memory node's allocator.
type memNode struct {
	id       MemoryNode
	dev      *device // nil for RAM
	capacity int64
	used     int64 // allocated bytes, including the cache
	cache    map[cacheKey][]accel.Mem
	handles  map[*Handle]struct{} // handles with an allocation here
	changed  chan struct{}        // closed when a replica here is unpinned or freed
	in, out  busLink              // the measured link, RAM to here and back (bus.go)
	// admitting is the task that waits for room here keeping the data
	// it has pinned, nil when none (acquireTask); admitted is closed
	// when it is done waiting.
	admitting *Task
	admitted  chan struct{}
	// scratch counts the Scratch buffers here that running tasks hold
	// (allocScratch): they go back to the cache when the tasks end.
	scratch int
	// redux counts, by handle, the workers' Redux copies here that the
	// reduction task has not yet combined (allocRedux, freeRedux): they
	// hold their memory until the handle's next access other than Redux,
	// and an error for want of room names them (othersHold).
	redux  map[*Handle]int
	unhold func() // withdraws the scheduler as a holder of the device's memory (nodeHolder)
}

type cacheKey struct {
	typ reflect.Type
	n   int
}

// A xferEvent is one copy, for the trace.
type xferEvent struct {
	handle     string
	from, to   MemoryNode
	bytes      int64
	start, end time.Duration
	prefetch   bool
}

// TransferStats are the figures of the copies from one memory node to
// another.
type TransferStats struct {
	From, To MemoryNode
	// Count is the number of copies, Bytes their size.
	Count, Bytes int64
	// Prefetches is how many of them prefetch started.
	Prefetches int64
	// Evictions counts replicas dropped from To to make room (From is
	// To for those rows' other figures: 0).
	Evictions int64
	// WriteBacks counts copies that saved the only valid replica
	// before it was evicted.
	WriteBacks int64
}

type dataLayer struct {
	s        *Scheduler
	mu       sync.Mutex
	nodes    []*memNode
	clock    uint64
	resident map[*Handle]struct{} // handles with replicas off RAM
	stats    map[[2]MemoryNode]*TransferStats
	events   []xferEvent
}

func newDataLayer(s *Scheduler, devs []*device) *dataLayer {
	d := &dataLayer{s: s, resident: make(map[*Handle]struct{}), stats: make(map[[2]MemoryNode]*TransferStats)}
	d.nodes = append(d.nodes, &memNode{id: RAM})
	for i, dev := range devs {
		capacity := dev.dev.Capacity()
		if s.cfg.cuda.memLimit > 0 {
			capacity = min(capacity, s.cfg.cuda.memLimit) // WithCUDAMemoryLimit, on every device
		}
		nd := &memNode{
			id: MemoryNode(i + 1), dev: dev, capacity: capacity,
			cache: make(map[cacheKey][]accel.Mem), handles: make(map[*Handle]struct{}), changed: make(chan struct{}),
		}
		d.nodes = append(d.nodes, nd)
		if r, ok := dev.dev.(accel.Reclaimer); ok {
			dev.own, nd.unhold = r.Hold(nodeHolder{d, nd.id})
		}
	}
	return d
}

// A nodeHolder is the scheduler as a holder of a device's memory
// (accel.Holder): a device that runs short for another user (a resource
// set's Alloc) asks it for what it keeps there but does not need.
type nodeHolder struct {
	d *dataLayer
	n MemoryNode
}

// Reclaim gives back what the scheduler keeps on the device but does not
// need (dataLayer.reclaim).
func (h nodeHolder) Reclaim(need int64, wait bool) (int64, string) {
	return h.d.reclaim(h.n, need, wait)
}

// reclaim frees up to about need bytes of node n for another user of
// its device: cached allocations first, then replicas that no task or
// copy uses, least recently used first and those a queued task
// prefetched last - invalid and shared ones (RAM or another node holds
// their data) at once and, with wait, modified ones after a write-back
// to RAM, as eviction does (evictLocked): the copy reads the replica,
// so that a task submitted meanwhile that writes the handle waits for
// it (acquireLocked) and one that reads it pins it, and the replica is
// freed only if still unused and clean once the copy has ended. Each
// replica is written back at most once per call, so a task that writes
// it again meanwhile, or a copy that fails, ends the attempt on it. It
// reports the bytes freed and what the scheduler still holds there.
//
// wait false (another holder of the device allocating, which may hold
// its own data layer's lock) writes back nothing and gives up at once
// when the lock is taken, rather than wait for it. wait true (an
// allocation by a caller that holds no scheduler lock: a resource set's
// Alloc) waits for the lock and for the write-backs.
func (d *dataLayer) reclaim(n MemoryNode, need int64, wait bool) (int64, string) {
	if wait {
		d.mu.Lock()
	} else if !d.mu.TryLock() {
		return 0, ""
	}
	defer d.mu.Unlock()
	nd := d.nodes[n]
	var freed int64
	var written map[*Handle]bool // written back by this call
	for freed < need {
		before := nd.used
		nd.dropCache(need - freed)
		freed += before - nd.used
		if freed >= need {
			break
		}
		v := nd.victim(nil, written, false, !wait)
		if v == nil {
			break
		}
		if v.reps[n].state == modified {
			// The only valid copy: write it back first, then look again
			// (it is the least recently used clean one now, unless a task
			// took it meanwhile).
			if written == nil {
				written = make(map[*Handle]bool)
			}
			written[v] = true
			d.statLocked(n, RAM).WriteBacks++
			w := d.copyLocked(v, n, RAM, false)
			d.mu.Unlock()
			<-w
			d.mu.Lock()
			continue
		}
		d.freeLocked(v, n) // into the cache, dropped above next
		d.statLocked(n, n).Evictions++
	}
	return freed, nd.holdsLocked()
}

// holdsLocked describes, for a device's out-of-memory error, the memory
// the scheduler still holds on node nd after reclaim and what frees it.
func (nd *memNode) holdsLocked() string {
	if nd.used == 0 {
		return ""
	}
	var busy, dirty, clean, cached int64
	for h := range nd.handles {
		r := &h.reps[nd.id]
		b := bufBytes(&h.ram)
		switch {
		case r.tasks > 0 || r.reads > 0 || r.fill != nil:
			busy += b
		case r.state == modified:
			dirty += b
		default:
			clean += b
		}
	}
	for key, l := range nd.cache {
		cached += int64(len(l)) * int64(key.n) * int64(key.typ.Elem().Size())
	}
	parts := []string{fmt.Sprintf("the scheduler holds %d bytes of %s", nd.used, nd.dev.name())}
	add := func(b int64, what string) {
		if b > 0 {
			parts = append(parts, fmt.Sprintf("%d in %s", b, what))
		}
	}
	add(busy, "data that running tasks or copies use (it frees them when they end)")
	add(dirty, "modified data, their only valid copy (an allocation that may wait, such as resourceset.Alloc, gets them after a write-back to RAM; one that may not, another holder's, after WaitAll, Handle.Fetch or Unregister copies them to RAM)")
	add(clean+cached, "data and allocations it gives back when asked")
	add(nd.used-busy-dirty-clean-cached, "workers' private buffers (running tasks' Scratch buffers, given back when they end; reduction copies, freed by the reduction)")
	return strings.Join(parts, ": ")
}

// nodeName names a memory node in errors and traces.
func (d *dataLayer) nodeName(n MemoryNode) string {
	if n == RAM {
		return "ram"
	}
	return d.nodes[n].dev.name()
}

// deviceData reports whether h's data can live on an accelerator: a
// vector or matrix of numbers.
func deviceData(h *Handle) bool {
	if h.kind == kindValue {
		return false
	}
	switch h.ram.typ.Elem().Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	}
	return false
}

// readyLocked creates h's replicas on first use. A tile's come after
// its parent's newest data is in RAM and the parent's device replicas
// are gone, since the tiles write RAM under the parent; the first use of
// a tile follows every earlier task on the parent.
func (d *dataLayer) readyLocked(h *Handle) (<-chan struct{}, error) {
	if h.reps != nil {
		return nil, nil
	}
	if p := h.parent; p != nil {
		if w, err := d.fetchLocked(p); w != nil || err != nil {
			return w, err
		}
		d.dropDeviceLocked(p)
		p.reps[RAM].state = modified
	}
	h.reps = make([]replica, len(d.nodes))
	h.reps[RAM] = replica{state: modified, buf: &h.ram}
	return nil, nil
}

// gather brings the newest data of tiles back into their parent h's RAM
// and frees their replicas: the work of the task Unpartition inserts
// after the tiles' last tasks and before h's next ones.
func (d *dataLayer) gather(h *Handle, tiles [][]*Handle) error {
	used := false
	for _, row := range tiles {
		for _, c := range row {
			d.mu.Lock()
			ok := c.reps != nil
			d.mu.Unlock()
			if !ok {
				continue // never used: nothing to gather
			}
			used = true
			if err := d.unregister(context.Background(), c); err != nil {
				return err
			}
			d.mu.Lock()
			c.reps = nil
			d.mu.Unlock()
		}
	}
	if used {
		// The tiles wrote RAM: h's device replicas, dropped when the
		// first tile was used, stay gone, and RAM is the newest.
		d.mu.Lock()
		if h.reps != nil {
			d.dropDeviceLocked(h)
			h.reps[RAM].state = modified
		}
		d.mu.Unlock()
	}
	return nil
}

// fetchLocked makes h's RAM replica valid, starting a copy from a valid
// one if need be; it returns the channel to wait on then.
func (d *dataLayer) fetchLocked(h *Handle) (<-chan struct{}, error) {
	if w, err := d.readyLocked(h); w != nil || err != nil {
		return w, err
	}
	return d.fetchRAMLocked(h)
}

// fetchRAMLocked is fetchLocked for a handle already readied.
func (d *dataLayer) fetchRAMLocked(h *Handle) (<-chan struct{}, error) {
	r := &h.reps[RAM]
	if r.fill != nil {
		return r.fill, nil
	}
	if err := r.err; err != nil {
		r.err = nil
		return nil, err
	}
	if r.state != invalid {
		return nil, nil
	}
	src := d.validLocked(h)
	if src < 0 {
		return nil, fmt.Errorf("scheduler: %v has no valid replica (a copy failed)", h)
	}
	return d.copyLocked(h, MemoryNode(src), RAM, false), nil
}

// validLocked returns a node holding a valid replica of h, RAM first,
// or -1.
func (d *dataLayer) validLocked(h *Handle) int {
	for i := range h.reps {
		if h.reps[i].state != invalid {
			return i
		}
	}
	return -1
}

// copyLocked starts a copy of h from node src to node dst (one of them
// RAM) and returns the channel closed when it ends.
func (d *dataLayer) copyLocked(h *Handle, src, dst MemoryNode, prefetch bool) <-chan struct{} {
	rs, rd := &h.reps[src], &h.reps[dst]
	if rd.fill != nil || rs.state == invalid {
		panic(fmt.Sprintf("scheduler: internal error: copy of %v from %s (%v) to %s while another fills it", h, d.nodeName(src), rs.state, d.nodeName(dst)))
	}
	rs.reads++
	ch := make(chan struct{})
	rd.fill = ch
	st := d.statLocked(src, dst)
	st.Count++
	st.Bytes += bufBytes(&h.ram)
	if prefetch {
		st.Prefetches++
	}
	// ended records the copy's end under d.mu.
	ended := func(start time.Time, err error) {
		rs, rd := &h.reps[src], &h.reps[dst]
		rs.reads--
		rd.fill = nil
		if err != nil {
			rd.err = fmt.Errorf("scheduler: copying %v from %s to %s: %w", h, d.nodeName(src), d.nodeName(dst), err)
		} else {
			// MSI: a read of a modified replica shares it.
			rd.state = shared
			if rs.state == modified {
				rs.state = shared
			}
		}
		if d.s.cfg.stats {
			d.events = append(d.events, xferEvent{
				handle: h.String(), from: src, to: dst, bytes: bufBytes(&h.ram), prefetch: prefetch,
				start: start.Sub(d.s.epoch), end: time.Since(d.s.epoch),
			})
		}
		for _, n := range [2]MemoryNode{src, dst} {
			d.nodes[n].signalLocked()
		}
		close(ch)
	}
	// A device may call done before the copy call returns, on this
	// goroutine (a closed device's ErrClosed, an empty buffer), which
	// holds d.mu: the copy that ends before its issue does is recorded
	// by the issuer instead, under the lock it holds.
	var early syncEnd
	done := func(start time.Time, err error) {
		if early.claim(start, err) {
			return
		}
		d.mu.Lock()
		ended(start, err)
		d.mu.Unlock()
	}
	if dst == RAM {
		d.nodes[src].dev.copyOut(&h.ram, rs.mem, done)
	} else {
		d.nodes[dst].dev.copyIn(rd.mem, &h.ram, done)
	}
	if start, err, ok := early.issued(); ok {
		ended(start, err)
	}
	return ch
}

// A syncEnd tells a copy's done callback that runs before the call that
// issued the copy returns from one that runs after: the first hands its
// result to the issuer (which may hold the lock done would take), the
// second handles it itself.
type syncEnd struct {
	state atomic.Int32 // 0 issuing, 1 issued, 2 ended while issuing
	start time.Time
	err   error
}

// claim records the end of a copy still being issued and reports true,
// or reports false once the issue has returned.
func (e *syncEnd) claim(start time.Time, err error) bool {
	if e.state.Load() != 0 {
		return false
	}
	e.start, e.err = start, err
	return e.state.CompareAndSwap(0, 2)
}

// issued marks the issue as returned; it reports the copy's end when
// done ran before.
func (e *syncEnd) issued() (time.Time, error, bool) {
	if e.state.CompareAndSwap(0, 1) {
		return time.Time{}, nil, false
	}
	return e.start, e.err, true
}

func (d *dataLayer) statLocked(src, dst MemoryNode) *TransferStats {
	st := d.stats[[2]MemoryNode{src, dst}]
	if st == nil {
		st = &TransferStats{From: src, To: dst}
		d.stats[[2]MemoryNode{src, dst}] = st
	}
	return st
}

// signalLocked wakes whoever waits for room or a replica on the node.
func (nd *memNode) signalLocked() {
	if nd.changed == nil {
		return
	}
	close(nd.changed)
	nd.changed = make(chan struct{})
}

// acquireLocked takes h on node n for mode m for a task (pin, so that
// it is neither evicted nor copied over while the task runs) or, with
// prefetch, only starts its copy. It returns a channel to wait on, and
// then must be called again; or the buffer; or an error.
func (d *dataLayer) acquireLocked(h *Handle, n MemoryNode, m Mode, prefetch, restore bool) (<-chan struct{}, *buffer, error) {
	if w, err := d.readyLocked(h); w != nil || err != nil {
		return w, nil, err
	}
	r := &h.reps[n]
	if r.fill != nil {
		return r.fill, nil, nil
	}
	if err := r.err; err != nil {
		r.err = nil
		return nil, nil, err
	}
	reads, writes := m&ModeR != 0, m&ModeW != 0
	if writes {
		if w := h.filling(); w != nil {
			return w, nil, nil
		}
	}
	if n != RAM && r.mem == nil {
		if w, err := d.allocLocked(h, n, prefetch); w != nil || err != nil {
			return w, nil, err
		}
		if r.mem == nil { // a prefetch that found no room
			return nil, nil, nil
		}
	}
	// A write without a read (W) over a replica with no valid data,
	// when only devices hold the valid ones, first brings them to RAM,
	// staged as for a read: a task that fails (or does not run) leaves
	// the data as they were, and what it keeps for that until it ends
	// is RAM's replica only (replica.undo); on RAM (n == RAM) the task
	// writes over the data themselves, which a failure before it writes
	// leaves. It cannot deadlock: a kept RAM replica holds no device
	// memory, so eviction, reclaim and a task waiting for room see the
	// devices as they would without it, and the staging is a copy, which
	// ends, as a read's does. The cost is that copy, made only when RAM
	// is stale.
	// Not for a detached task (restore false: the engine's receives of
	// scheduler/dist, whose failure fails the whole graph): a received
	// tile's older version on this rank's device would be copied to RAM
	// only to be overwritten, on every receive of a new version.
	stage := restore && writes && !reads && r.state == invalid && h.reps[RAM].state == invalid && d.validLocked(h) >= 0
	if (reads || stage) && r.state == invalid {
		src := d.validLocked(h)
		if src < 0 {
			return nil, nil, fmt.Errorf("scheduler: %v has no valid replica (a copy failed)", h)
		}
		if src != int(RAM) && n != RAM {
			// Staged through RAM: first the device's newest to RAM,
			// unless that copy is under way.
			if f := h.reps[RAM].fill; f != nil {
				return f, nil, nil
			}
			return d.copyLocked(h, MemoryNode(src), RAM, prefetch), nil, nil
		}
		return d.copyLocked(h, MemoryNode(src), n, prefetch), nil, nil
	}
	d.clock++
	r.last = d.clock
	if prefetch {
		return nil, nil, nil
	}
	r.tasks++
	if writes {
		// Written without being read over no valid data (a replica
		// allocated or cached, holding anything): RAM's replica, valid
		// if any is (staged above), is kept until the task ends, for
		// its failure; the devices' are invalid as after any write.
		if restore && !reads && r.state == invalid {
			r.undo = true // until its last pin goes (a team's members each pin it)
		}
		for i := range h.reps {
			if o := &h.reps[i]; i != int(n) {
				if r.undo && i == int(RAM) && o.state != invalid {
					o.keep, o.prior = true, o.state
				}
				o.state = invalid
			}
		}
		r.state = modified
	} else if r.state == invalid {
		r.state = shared
	}
	return nil, r.buf, nil
}

// releaseLocked unpins h on node n after a task; failed says the task
// failed or did not run, so that a replica it took to write without
// reading holds no data of the handle's (see replica.undo): RAM's
// replica, valid before, is valid again.
func (d *dataLayer) releaseLocked(h *Handle, n MemoryNode, failed bool) {
	r := &h.reps[n]
	r.tasks--
	r.failed = r.failed || failed
	if r.tasks > 0 {
		return
	}
	failed, r.failed = r.failed, false
	if r.undo {
		r.undo = false
		if k := &h.reps[RAM]; k.keep {
			k.keep = false
			if failed {
				k.state, r.state = k.prior, invalid
			}
		}
	}
	d.nodes[n].signalLocked()
}

// allocLocked gives h a replica allocation on node n, from the node's
// cache or the device, evicting least-recently-used replicas when the
// node is full: invalid and shared ones are dropped, the only valid ones
// written back to RAM first. A prefetch evicts nothing that needs a
// write-back and gives up quietly.
func (d *dataLayer) allocLocked(h *Handle, n MemoryNode, prefetch bool) (<-chan struct{}, error) {
	nd := d.nodes[n]
	size := bufBytes(&h.ram)
	if size > nd.capacity {
		return nil, fmt.Errorf("%w: %v needs %d bytes on %s, which has %d", ErrDeviceMemory, h, size, nd.dev.name(), nd.capacity)
	}
	key := cacheKey{h.ram.typ, h.ram.rows * h.ram.cols}
	mem := nd.takeCached(key)
	for mem == nil {
		need := nd.used + size - nd.capacity
		if need <= 0 {
			m, err := nd.dev.alloc(&h.ram)
			if err == nil {
				mem = m
				nd.used += size
				break
			}
			if !isOutOfMemory(err) {
				return nil, fmt.Errorf("scheduler: allocating %d bytes for %v on %s: %w", size, h, nd.dev.name(), err)
			}
			// Others allocate on the device too (a resource set's
			// buffers): make room as if it were full.
			need = size
		}
		if nd.dropCache(need) {
			continue
		}
		if w, ok := d.evictLocked(h, n, prefetch); !ok {
			return w, nil
		}
	}
	h.reps[n].mem = mem
	h.reps[n].buf = nd.dev.view(mem, &h.ram)
	nd.handles[h] = struct{}{}
	d.resident[h] = struct{}{}
	return nil, nil
}

// allocScratch is allocPrivateLocked for a task's Scratch buffer, which goes
// back to the node's cache when the task ends (freeScratch); until then
// it counts as memory a running task uses, which a task waiting for room
// waits for (busyLocked).
func (d *dataLayer) allocScratch(n MemoryNode, like *buffer, what string, drain func() bool) (accel.Mem, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, err := d.allocPrivateLocked(n, like, what, drain)
	if err == nil {
		d.nodes[n].scratch++
	}
	return m, err
}

// allocPrivateLocked allocates device memory of like's shape on node n
// for a worker's own buffer (a Scratch buffer, a Redux copy), from the node's
// cache or the device, counted in the node's use and made room for as a
// replica is: cached allocations dropped, least-recently-used replicas
// evicted (written back first when modified). When all else on the
// node is in use it first calls drain, if given (the worker's own tasks
// in flight, whose data may be what fills the node, complete), then
// waits for a change there (a task's or a copy's end) and tries again;
// after outsideWaits waits that no change ended (after 1, 2, 4 ... ms:
// the rest is memory that others hold, or that tasks waiting like this
// one keep) it gives up with ErrDeviceMemory, naming the sizes and who
// holds the device (the task then goes to a CPU worker if it may).
// d.mu is held (it is unlocked while it waits); freeScratch and the end
// of the Redux copies give the memory back to the node's cache.
func (d *dataLayer) allocPrivateLocked(n MemoryNode, like *buffer, what string, drain func() bool) (accel.Mem, error) {
	nd := d.nodes[n]
	size := bufBytes(like)
	if size > nd.capacity {
		return nil, fmt.Errorf("%w: %s needs %d bytes on %s, which has %d", ErrDeviceMemory, what, size, nd.dev.name(), nd.capacity)
	}
	if mem := nd.takeCached(cacheKey{like.typ, like.rows * like.cols}); mem != nil {
		return mem, nil
	}
	for waits := 0; ; {
		need := nd.used + size - nd.capacity
		if need <= 0 {
			m, err := nd.dev.alloc(like)
			if err == nil {
				nd.used += size
				return m, nil
			}
			if !isOutOfMemory(err) {
				return nil, fmt.Errorf("scheduler: allocating %d bytes for %s on %s: %w", size, what, nd.dev.name(), err)
			}
			need = size // others hold the rest (see allocLocked)
		}
		if nd.dropCache(need) {
			continue
		}
		wait, ok := d.evictLocked(nil, n, false)
		if ok {
			continue
		}
		if wait != nil && wait != (<-chan struct{})(nd.changed) {
			// The write-back of the replica evicted: a copy, which ends.
			// Waited for whole, not for the retry below, which would
			// pick the next replica (and write it back too) while this
			// one is still being copied out.
			d.mu.Unlock()
			<-wait
			d.mu.Lock()
			continue
		}
		if drain != nil {
			d.mu.Unlock()
			drained := drain()
			d.mu.Lock()
			if drained {
				continue
			}
		}
		if waits == outsideWaits {
			return nil, fmt.Errorf("%w: no room for %s (%d bytes) on %s, %s; use smaller tiles or a larger device, or free memory there",
				ErrDeviceMemory, what, size, nd.dev.name(), nd.othersHold())
		}
		retry := time.NewTimer(time.Millisecond << waits)
		d.mu.Unlock()
		select {
		case <-wait:
			retry.Stop() // a task or a copy ended: look again, without counting
		case <-retry.C:
			waits++
		}
		d.mu.Lock()
	}
}

// allocRedux is allocPrivateLocked for a worker's Redux copy of h, which
// stays on node n until the reduction task has combined it (freeRedux);
// the node counts it meanwhile, for errors (othersHold).
func (d *dataLayer) allocRedux(n MemoryNode, h *Handle, drain func() bool) (accel.Mem, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, err := d.allocPrivateLocked(n, &h.ram, fmt.Sprintf("a reduction copy of %v", h), drain)
	if err == nil {
		nd := d.nodes[n]
		if nd.redux == nil {
			nd.redux = make(map[*Handle]int)
		}
		nd.redux[h]++
	}
	return m, err
}

// freeRedux puts a Redux copy of allocRedux into the node's cache once
// the reduction task has combined it.
func (d *dataLayer) freeRedux(n MemoryNode, m accel.Mem, h *Handle) {
	d.mu.Lock()
	defer d.mu.Unlock()
	nd := d.nodes[n]
	if nd.redux[h]--; nd.redux[h] <= 0 {
		delete(nd.redux, h)
	}
	nd.cacheLocked(m, &h.ram)
}

// freeScratch puts a Scratch buffer of allocScratch into the node's
// cache when its task has ended.
func (d *dataLayer) freeScratch(n MemoryNode, m accel.Mem, like *buffer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	nd := d.nodes[n]
	nd.scratch--
	nd.cacheLocked(m, like)
}

// cacheLocked puts an allocation of like's shape into the node's cache
// and signals the room it makes.
func (nd *memNode) cacheLocked(m accel.Mem, like *buffer) {
	key := cacheKey{like.typ, like.rows * like.cols}
	nd.cache[key] = append(nd.cache[key], m)
	nd.signalLocked()
}

// evictLocked drops one replica from node n to make room for h (nil: for
// a private buffer, allocPrivateLocked): it reports ok when it freed one;
// otherwise it returns the channel to wait on - a write-back under way,
// or the node's signal when no replica of this scheduler there can go
// now (those running tasks and copies use end and signal; if there is
// none, the rest of the device is others' memory, and the caller looks
// again a few times before it gives up: acquireTask, allocPrivateLocked) - or
// nothing for a prefetch, which gives up.
func (d *dataLayer) evictLocked(h *Handle, n MemoryNode, prefetch bool) (wait <-chan struct{}, ok bool) {
	nd := d.nodes[n]
	v := nd.victim(h, nil, prefetch, false)
	if v == nil {
		if prefetch {
			return nil, false
		}
		return nd.changed, false
	}
	if v.reps[n].state == modified {
		if prefetch {
			return nil, false
		}
		d.statLocked(n, RAM).WriteBacks++
		return d.copyLocked(v, n, RAM, false), false
	}
	d.freeLocked(v, n)
	d.statLocked(n, n).Evictions++
	return nil, true
}

// victim returns the least-recently-used replica on nd that nothing
// uses (other than h's), preferring invalid ones, or nil. spareWanted
// leaves out those a queued task prefetched; clean leaves out modified
// ones (whose data no other node holds), and written the modified ones
// of its handles (written back once already, by reclaim).
func (nd *memNode) victim(h *Handle, written map[*Handle]bool, spareWanted, clean bool) *Handle {
	var best *Handle
	var bestKey [3]uint64
	for v := range nd.handles {
		if v == h {
			continue
		}
		r := &v.reps[nd.id]
		if r.tasks > 0 || r.reads > 0 || r.fill != nil || spareWanted && r.wanted > 0 || r.state == modified && (clean || written[v]) {
			continue
		}
		// Unwanted before wanted, then invalid before valid, then LRU.
		key := [3]uint64{0, uint64(r.state), r.last}
		if r.wanted > 0 {
			key[0] = 1
		}
		if best == nil || key[0] < bestKey[0] || key[0] == bestKey[0] && (key[1] < bestKey[1] || key[1] == bestKey[1] && key[2] < bestKey[2]) {
			best, bestKey = v, key
		}
	}
	return best
}

// filling returns the channel of a copy of h in flight, or nil.
func (h *Handle) filling() <-chan struct{} {
	for i := range h.reps {
		if h.reps[i].fill != nil {
			return h.reps[i].fill
		}
	}
	return nil
}

// freeLocked drops h's replica on device node n into the node's cache.
func (d *dataLayer) freeLocked(h *Handle, n MemoryNode) {
	nd := d.nodes[n]
	r := &h.reps[n]
	if r.mem != nil {
		key := cacheKey{h.ram.typ, h.ram.rows * h.ram.cols}
		nd.cache[key] = append(nd.cache[key], r.mem)
	}
	*r = replica{wanted: r.wanted}
	delete(nd.handles, h)
	d.updateResidentLocked(h)
	nd.signalLocked()
}

func (nd *memNode) takeCached(key cacheKey) accel.Mem {
	l := nd.cache[key]
	if len(l) == 0 {
		return nil
	}
	mem := l[len(l)-1]
	nd.cache[key] = l[:len(l)-1]
	return mem
}

// dropCache frees cached allocations, need bytes or all of them; it
// reports whether it freed anything.
func (nd *memNode) dropCache(need int64) bool {
	var freed int64
	for key, l := range nd.cache {
		for len(l) > 0 && freed < need {
			nd.dev.free(l[len(l)-1])
			l[len(l)-1] = nil
			l = l[:len(l)-1]
			b := int64(key.n) * int64(key.typ.Elem().Size())
			nd.used -= b
			freed += b
		}
		nd.cache[key] = l
		if freed >= need {
			break
		}
	}
	return freed > 0
}

// dropDeviceLocked frees h's device replicas (RAM must be valid).
func (d *dataLayer) dropDeviceLocked(h *Handle) {
	for n := 1; n < len(h.reps); n++ {
		if h.reps[n].mem != nil || h.reps[n].state != invalid {
			d.freeLocked(h, MemoryNode(n))
		}
	}
}

func (d *dataLayer) updateResidentLocked(h *Handle) {
	for n := 1; n < len(h.reps); n++ {
		if h.reps[n].mem != nil {
			return
		}
	}
	delete(d.resident, h)
}

// ErrDeviceMemory is returned (wrapped, naming the handles, the sizes
// and who holds the device's memory) when a task's data, Scratch buffers
// and Redux copies cannot fit in a device's memory at all, or not beside
// memory others hold that stays there while the task looks again (about
// a quarter of a second) and nothing of the scheduler's on the device is
// running or copying. A task that fails so on a device worker runs on a
// CPU worker of its context instead when one may run it.
var ErrDeviceMemory = errors.New("scheduler: out of device memory")

// acquireTask makes t's data valid on node n and pins it, filling bufs
// with the buffers the implementation sees. Scratch and Redux accesses
// are left nil for the worker to fill. It waits for copies, and for room
// on a full node, outside the lock; before waiting for room it calls
// drain, if given, which completes the worker's own tasks in flight
// (whose data may be what fills the node) and reports whether it had
// any, and then looks again at once.
//
// A full node admits one waiting task at a time. The first task that
// finds no room is admitted (memNode.admitting): it keeps the data it
// has pinned while it waits, and the node's other tasks wait for it to
// be done before they take any of the node's memory. Without it, tasks
// waiting for room would each unpin what they had copied in so that
// another could evict it, and start again, for ever on a node that fits
// only a few tasks' data (several workers on one device). It cannot
// deadlock: the admitted task is the only one holding data while it
// waits, so what it waits for is the end of a task that already has all
// its data, or of a copy. A task with Scratch or Redux accesses on a
// device stays admitted once it has its data, until the worker has
// allocated its scratch buffers and reduction copies (endAdmission):
// were it to wait for their room unadmitted, holding its data, a task
// admitted meanwhile could hold the rest of the node waiting for that
// task's data to go, and each would wait for the other. If nothing
// of the scheduler's is running or copying (or it holds nothing on the
// node), the rest of the node is others' memory, and it looks again a
// few times and gives up (see below), naming the sizes.
func (d *dataLayer) acquireTask(t *Task, n MemoryNode, bufs []*buffer, drain func() bool) ([]*buffer, error) {
	base := len(bufs)
	for range t.Access {
		bufs = append(bufs, nil)
	}
	nd := d.nodes[n]
	d.mu.Lock()
	d.unwantLocked(t)
	if n != RAM {
		if err := d.fitsLocked(t, nd); err != nil {
			d.mu.Unlock()
			return bufs[:base], err
		}
	}
	// fail gives up on t's data: it unpins them and ends t's admission.
	fail := func(err error) ([]*buffer, error) {
		d.unpinLocked(t, n, bufs[base:])
		nd.admitDoneLocked(t)
		d.mu.Unlock()
		return bufs[:base], err
	}
	outside := 0 // waits for memory others hold (see below)
	for {
		if a := nd.admitting; a != nil && a != t {
			// Another task waits for room here: this one holds and takes
			// none until it is done. The worker's own tasks in flight
			// may be what it waits for.
			d.unpinLocked(t, n, bufs[base:])
			admitted := nd.admitted
			d.mu.Unlock()
			if drain == nil || !drain() {
				<-admitted
			}
			d.mu.Lock()
			continue
		}
		var wait <-chan struct{}
		room := false     // some access waits for room, not for a copy
		var short *Handle // the first that does
		for i, a := range t.Access {
			if bufs[base+i] != nil || a.Mode == ModeScratch || a.Mode == ModeRedux {
				continue
			}
			w, b, err := d.acquireLocked(a.Handle, n, a.Mode, false, t.Codelet.Detached == nil)
			if err != nil {
				return fail(err)
			}
			if w != nil {
				if wait == nil {
					wait = w
				}
				// Room: the node's signal, or the write-back of a
				// replica evicted to make it (no allocation yet).
				r := a.Handle.reps
				if w == (<-chan struct{})(nd.changed) || n != RAM && r != nil && r[n].mem == nil {
					room = true
					if short == nil {
						short = a.Handle
					}
				}
				continue // start the other copies too
			}
			bufs[base+i] = b
		}
		if wait == nil {
			if n != RAM && privateOnDevice(t) {
				// Admitted until the worker has allocated its private
				// buffers (see above).
				if nd.admitting == nil {
					nd.admitting, nd.admitted = t, make(chan struct{})
				}
			} else {
				nd.admitDoneLocked(t)
			}
			d.mu.Unlock()
			return bufs, nil
		}
		if room && nd.admitting == nil {
			nd.admitting, nd.admitted = t, make(chan struct{})
		}
		if nd.admitting != t {
			// While it waits, a task not admitted holds none of the
			// node's memory: two tasks each holding part of a full node
			// would wait for each other forever.
			d.unpinLocked(t, n, bufs[base:])
		}
		if room && drain != nil {
			d.mu.Unlock()
			drained := drain()
			d.mu.Lock()
			if drained {
				continue
			}
		}
		var retry <-chan time.Time
		if room {
			// What frees room is another task's end, or a copy's: the
			// next signal.
			wait = nd.changed
			if !nd.busyLocked(t, bufs[base:]) {
				// Nothing of this scheduler's on the node will end and
				// signal: the device is full of memory others hold
				// (another rank's scheduler on a shared GPU, a resource
				// set's buffers), which may go but sends no signal. This
				// holds also when the scheduler has nothing at all on
				// the node. Look again a few times, then give up: the
				// task goes to a CPU worker if it may, else fails.
				if outside == outsideWaits {
					total, what := taskBytes(t)
					return fail(fmt.Errorf("%w: task %q's data do not fit on %s beside %s: %v needs %d bytes on %s (the task %d in all: %s), %s; looked again for %v; use smaller tiles or a larger device, or free memory there",
						ErrDeviceMemory, t.Codelet.name(), nd.dev.name(), nd.blocker(), short, bufBytes(&short.ram), nd.dev.name(), total, what, nd.othersHold(), outsideWait))
				}
				retry = time.After(time.Millisecond << outside)
				outside++
			}
		}
		d.mu.Unlock()
		select {
		case <-wait:
		case <-retry:
		}
		d.mu.Lock()
	}
}

// privateOnDevice reports whether a device worker allocates buffers of
// its own for t after acquireTask: a Scratch buffer of a handle that can
// live on the device, or a Redux copy.
func privateOnDevice(t *Task) bool {
	for _, a := range t.Access {
		if a.Mode == ModeRedux || a.Mode == ModeScratch && a.Handle.dev {
			return true
		}
	}
	return false
}

// endAdmission ends t's admission to node n, which acquireTask kept for
// the private buffers the worker allocates next (see acquireTask); it
// does nothing if t is not the admitted task.
func (d *dataLayer) endAdmission(t *Task, n MemoryNode) {
	if n == RAM {
		return
	}
	d.mu.Lock()
	d.nodes[n].admitDoneLocked(t)
	d.mu.Unlock()
}

// admitDoneLocked ends t's admission to nd, if it is the admitted task:
// the tasks waiting for it go on.
func (nd *memNode) admitDoneLocked(t *Task) {
	if nd.admitting == t && t != nil {
		nd.admitting = nil
		close(nd.admitted)
		nd.admitted = nil
	}
}

// outsideWaits is how many times a task looks again for room on a device
// full of others' memory (after 1, 2, 4 ... ms: about a quarter of a
// second in all) before ErrDeviceMemory.
const outsideWaits = 8

// outsideWait is how long those waits last in all.
const outsideWait = (1<<outsideWaits - 1) * time.Millisecond

// othersHold describes, for an error, the device memory of nd held
// outside this scheduler: how much, where the device reports its use
// (accel.Sim's InUse), and by what it may be.
func (nd *memNode) othersHold() string {
	total := nd.dev.dev.Capacity()
	held := "the rest"
	if u, ok := nd.dev.dev.(interface{ InUse() int64 }); ok {
		held = fmt.Sprintf("%d bytes", max(u.InUse()-nd.used, 0))
	}
	return fmt.Sprintf("which has %d bytes: others (a resource set's device buffers, another rank or process) hold %s, this scheduler %d (limit %d)%s",
		total, held, nd.used, nd.capacity, nd.reduxHeld())
}

// blocker names, for the headline of an error, what holds the room a
// task waits for when nothing of the scheduler's on nd is running or
// copying: memory the scheduler does not hold, unless the device says
// that nobody else holds any and the scheduler's Redux copies not yet
// combined (which no eviction frees) are there.
func (nd *memNode) blocker() string {
	if u, ok := nd.dev.dev.(interface{ InUse() int64 }); ok && u.InUse()-nd.used <= 0 && len(nd.redux) > 0 {
		return "the reduction copies not yet combined there"
	}
	return "memory this scheduler does not hold"
}

// reduxHeld describes, for an error, the Redux copies on nd that wait
// for their reduction, which no eviction frees: their bytes, and the
// copies of each handle (the first few); "" when there are none.
func (nd *memNode) reduxHeld() string {
	if len(nd.redux) == 0 {
		return ""
	}
	hs := make([]*Handle, 0, len(nd.redux))
	var bytes int64
	for h, k := range nd.redux {
		hs = append(hs, h)
		bytes += int64(k) * bufBytes(&h.ram)
	}
	slices.SortFunc(hs, func(a, b *Handle) int { return strings.Compare(a.String(), b.String()) })
	var b strings.Builder
	for i, h := range hs {
		if i == 3 {
			fmt.Fprintf(&b, ", and %d more", len(hs)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		k := nd.redux[h]
		fmt.Fprintf(&b, "%v: %d %s", h, k, map[bool]string{true: "copy", false: "copies"}[k == 1])
	}
	return fmt.Sprintf(", of which reduction copies not yet combined hold %d bytes (%s), which no eviction frees: a task that accesses the handle other than by Redux (or WaitAll) combines and frees them", bytes, b.String())
}

// busyLocked reports whether a task or a copy of this scheduler uses a
// replica on the node, other than task t's own pins (bufs, its buffers
// acquired so far), or a running task holds a Scratch buffer there: its
// end will signal.
func (nd *memNode) busyLocked(t *Task, bufs []*buffer) bool {
	if nd.scratch > 0 {
		return true // t takes its own after its data (worker.prepare)
	}
	for h := range nd.handles {
		r := &h.reps[nd.id]
		if r.reads > 0 || r.fill != nil {
			return true
		}
		if r.tasks == 0 {
			continue
		}
		own := int32(0)
		for i, a := range t.Access {
			if a.Handle == h && bufs[i] != nil && a.Mode != ModeScratch && a.Mode != ModeRedux {
				own++
			}
		}
		if r.tasks > own {
			return true
		}
	}
	return false
}

// fitsLocked fails if t's device data (each handle once, with the
// worker's Scratch buffers and Redux copies of the shape of theirs)
// cannot fit in the node's memory at all.
func (d *dataLayer) fitsLocked(t *Task, nd *memNode) error {
	total, what := taskBytes(t)
	if total > nd.capacity {
		fix := "use smaller tiles or a larger device"
		if lim := d.s.cfg.cuda.memLimit; lim > 0 && lim == nd.capacity && lim < nd.dev.dev.Capacity() {
			fix = fmt.Sprintf("its %d bytes are the cap of WithCUDAMemoryLimit (PZ_LIMIT_CUDA_MEM; the device has %d): raise the cap, or use smaller tiles", lim, nd.dev.dev.Capacity())
		}
		return fmt.Errorf("%w: task %q needs %d bytes of data on %s, which has %d (%s); %s", ErrDeviceMemory, t.Codelet.name(), total, nd.dev.name(), nd.capacity, what, fix)
	}
	return nil
}

// fits reports whether t's device data (each handle once, as
// fitsLocked counts it) fits in node n's memory at all. The capacity is
// fixed, so it needs no lock.
func (d *dataLayer) fits(t *Task, n MemoryNode) bool {
	return taskDataBytes(t) <= d.nodes[n].capacity
}

// taskDataBytes is taskBytes' total: the device memory t needs, each
// handle once.
func taskDataBytes(t *Task) (total int64) {
	for i, a := range t.Access {
		if firstIndex(t.Access, a.Handle) == i {
			total += bufBytes(&a.Handle.ram)
		}
	}
	return total
}

// taskBytes is the device memory t needs on a device worker's node, each
// handle once: its data's replicas, and the private buffers of its
// Scratch and Redux accesses (allocPrivateLocked); what lists them for an
// error.
func taskBytes(t *Task) (total int64, what string) {
	var parts []string
	for i, a := range t.Access {
		if firstIndex(t.Access, a.Handle) != i {
			continue
		}
		b := bufBytes(&a.Handle.ram)
		switch a.Mode {
		case ModeScratch:
			parts = append(parts, fmt.Sprintf("a scratch buffer of %v: %d bytes", a.Handle, b))
		case ModeRedux:
			parts = append(parts, fmt.Sprintf("a reduction copy of %v: %d bytes", a.Handle, b))
		default:
			parts = append(parts, fmt.Sprintf("%v: %d bytes", a.Handle, b))
		}
	}
	return taskDataBytes(t), strings.Join(parts, ", ")
}

// unpinLocked releases the accesses of t acquired so far (bufs non-nil)
// and clears them.
func (d *dataLayer) unpinLocked(t *Task, n MemoryNode, bufs []*buffer) {
	for i, a := range t.Access {
		if bufs[i] != nil && a.Mode != ModeScratch && a.Mode != ModeRedux {
			d.releaseLocked(a.Handle, n, true) // t does not run now
			bufs[i] = nil
		}
	}
}

// releaseTask unpins t's data on node n after it ran; failed says it
// failed or did not run (see releaseLocked).
func (d *dataLayer) releaseTask(t *Task, n MemoryNode, failed bool) {
	d.mu.Lock()
	for _, a := range t.Access {
		if a.Mode != ModeScratch && a.Mode != ModeRedux {
			d.releaseLocked(a.Handle, n, failed)
		}
	}
	d.mu.Unlock()
}

// prefetch starts copying the data t reads to node n, where a policy
// has just placed it. It never waits, and gives up on data that would
// need a write-back to make room.
//
// The replicas it prefetches are wanted by t until t takes its data
// (acquireTask): eviction spares wanted replicas while it finds others,
// and a prefetch never evicts one, so the copies for queued tasks do not
// push out each other's data.
func (d *dataLayer) prefetch(t *Task, n MemoryNode) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unwantLocked(t) // placed again (its worker left): the old wish goes
	if d.nodes[n].admitting != nil {
		return // a task waits for room there, which the copies would take
	}
	for i, a := range t.Access {
		if a.Mode&ModeR == 0 || a.Mode&ModeCommute != 0 {
			continue // a commuting writer may be writing it right now
		}
		d.acquireLocked(a.Handle, n, ModeR, true, false)
		if h := a.Handle; h.reps != nil && i < 64 {
			h.reps[n].wanted++
			t.wantMask |= 1 << i
			t.wantNode = n
		}
	}
}

// unwant drops t's wish for the replicas it prefetched: t will not
// take its data (it was canceled in its queue).
func (d *dataLayer) unwant(t *Task) {
	d.mu.Lock()
	d.unwantLocked(t)
	d.mu.Unlock()
}

// unwantLocked drops t's wish for the replicas it prefetched.
func (d *dataLayer) unwantLocked(t *Task) {
	for i := 0; t.wantMask != 0 && i < len(t.Access); i++ {
		if t.wantMask&(1<<i) != 0 {
			if h := t.Access[i].Handle; h.reps != nil {
				h.reps[t.wantNode].wanted--
			}
			t.wantMask &^= 1 << i
		}
	}
}

// transferCost predicts the time, in ns, to make t's inputs valid on
// node n.
func (d *dataLayer) transferCost(t *Task, n MemoryNode) float64 {
	if n != RAM && !d.fits(t, n) {
		// It would never run there (fitsLocked fails it, and a worker
		// sends it back to the CPU): a policy that weighs transfers
		// must not choose that node, nor prefetch data to it.
		return math.Inf(1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var ns float64
	for _, a := range t.Access {
		if a.Mode&ModeR == 0 || a.Mode == ModeRedux {
			continue
		}
		h := a.Handle
		if h.reps == nil {
			if n != RAM {
				ns += d.nodes[n].in.cost(bufBytes(&h.ram))
			}
			continue
		}
		if h.reps[n].state != invalid || h.reps[n].fill != nil {
			continue
		}
		src := d.validLocked(h)
		size := bufBytes(&h.ram)
		if src > int(RAM) {
			ns += d.nodes[src].out.cost(size)
		}
		if n != RAM {
			ns += d.nodes[n].in.cost(size)
		}
	}
	return ns
}

// fetch waits until h's newest data is in RAM, for the host (Fetch,
// Data). A tile of an unpartitioned handle is refused: its data are its
// parent's again, which tasks on the device may be writing now, and
// making the dead tile's replicas (readyLocked) would copy the parent's
// device replica to RAM under those writes and free it under the task;
// or, gathered back or not yet, the tile's own device replica may be
// under a task that Unpartition's caller submitted before, which a host
// call on the tile does not wait for.
func (d *dataLayer) fetch(ctx context.Context, h *Handle) error {
	if h.parent != nil && h.status.Load() == handleUnregistered {
		return fmt.Errorf("%w: %v is a tile of an unpartitioned handle: its data are its parent's again; read the parent, or Partition it again", ErrUnregistered, h)
	}
	return d.fetchNewest(ctx, h)
}

// fetchNewest is fetch for any handle, a tile that Unpartition's
// gathering brings back among them. When ctx ends first it still waits
// for the copy in flight, which writes the registered memory (RAM's
// replica, or the parent's that a tile's first use fetches): the caller
// may use that memory once it returns. A copy is bounded local work -
// one handle over the link - and the devices cannot cancel one.
func (d *dataLayer) fetchNewest(ctx context.Context, h *Handle) error {
	d.mu.Lock()
	for {
		w, err := d.fetchLocked(h)
		if err != nil || w == nil {
			d.mu.Unlock()
			return err
		}
		d.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			<-w
			return fmt.Errorf("scheduler: fetching %v to RAM: %w", h, ctx.Err())
		}
		d.mu.Lock()
	}
}

// own makes RAM hold h's only valid copy, for the host to read and write
// it (Handle.Data): the newest version is fetched, then the devices'
// replicas are invalidated (their allocations stay, for the next task
// there to copy the data in again).
func (d *dataLayer) own(ctx context.Context, h *Handle) error {
	for {
		if err := d.fetch(ctx, h); err != nil {
			return err
		}
		d.mu.Lock()
		// A copy started since (a prefetch, for a task submitted
		// meanwhile) would make its replica valid when it ends: let it.
		for w := h.filling(); w != nil; w = h.filling() {
			d.mu.Unlock()
			<-w
			d.mu.Lock()
		}
		if h.reps == nil || h.reps[RAM].state != invalid {
			break
		}
		d.mu.Unlock() // written on a device meanwhile: fetch again
	}
	defer d.mu.Unlock()
	if h.reps != nil {
		for n := range h.reps {
			h.reps[n].state = invalid
		}
		h.reps[RAM].state = modified
	}
	return nil
}

// unregister brings h back to RAM and frees its device replicas.
func (d *dataLayer) unregister(ctx context.Context, h *Handle) error {
	for {
		w, err := d.unregisterStep(h)
		if w == nil || err != nil {
			return err
		}
		if err := awaitCopy(ctx, h, w); err != nil {
			return err
		}
	}
}

// unregisterStep is one step of unregister that never blocks, so that
// Handle.Unregister may take it with the scheduler's handle lock held:
// while a copy of h is in flight (one it starts to bring the newest data
// to RAM, or a prefetch) it returns that copy's channel, for the caller
// to wait on, without the lock, before it tries again; else it frees h's
// device replicas, forgets h and returns nil.
func (d *dataLayer) unregisterStep(h *Handle) (<-chan struct{}, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w, err := d.fetchLocked(h); w != nil || err != nil {
		return w, err
	}
	if w := h.filling(); w != nil {
		return w, nil
	}
	if h.reps != nil {
		d.dropDeviceLocked(h)
	}
	delete(d.resident, h)
	return nil, nil
}

// awaitCopy waits for the copy of h that w ends. When ctx ends first it
// still waits for the copy, which writes the registered memory or a
// device's (see fetchNewest), and returns ctx's error.
func awaitCopy(ctx context.Context, h *Handle, w <-chan struct{}) error {
	select {
	case <-w:
		return nil
	case <-ctx.Done():
		<-w
		return fmt.Errorf("scheduler: fetching %v to RAM: %w", h, ctx.Err())
	}
}

// writeBack brings every handle's newest data back to RAM, skipping
// those that tasks are using now (submitted by another goroutine since).
func (d *dataLayer) writeBack(ctx context.Context) error {
	d.mu.Lock()
	var hs []*Handle
	for h := range d.resident {
		hs = append(hs, h)
	}
	d.mu.Unlock()
	var errs []error
	for _, h := range hs {
		d.mu.Lock()
		busy := false
		for i := range h.reps {
			busy = busy || h.reps[i].tasks > 0
		}
		d.mu.Unlock()
		if busy {
			continue
		}
		// A tile Unpartition made unusable, whose gathering is to come,
		// is fetched as any handle.
		if err := d.fetchNewest(ctx, h); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// Transfers returns the figures of the copies between memory nodes so
// far, one row per pair of nodes (and one per node for evictions),
// sorted by From then To. It is empty for a scheduler without devices.
func (s *Scheduler) Transfers() []TransferStats {
	d := s.data
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []TransferStats
	for _, st := range d.stats {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b TransferStats) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	return out
}

// MemoryNodes returns the names of the memory nodes, indexed by
// MemoryNode: "ram", then one per device ("sim0", ...).
func (s *Scheduler) MemoryNodes() []string {
	if s.data == nil {
		return []string{"ram"}
	}
	out := make([]string, len(s.data.nodes))
	for i := range out {
		out[i] = s.data.nodeName(MemoryNode(i))
	}
	return out
}

// close stops the devices' copy engines, and gives a borrowed device
// (WithDevices) back the memory this scheduler allocated on it: its
// owner goes on using it. The cached allocations (among them the
// workers' Scratch buffers) go back to every device, whose memory
// others may hold beside the scheduler (a GPU's primary context).
func (d *dataLayer) close() {
	for _, nd := range d.nodes[1:] {
		if nd.unhold != nil {
			nd.unhold()
		}
		d.mu.Lock()
		if nd.dev.borrowed {
			for h := range nd.handles {
				d.freeLocked(h, nd.id)
			}
		}
		nd.dropCache(math.MaxInt64)
		d.mu.Unlock()
		nd.dev.close()
	}
}
