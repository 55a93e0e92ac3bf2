package scheduler

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/pzgo/pz/hardware/accel"
)

// MemoryNode identifies a memory space a worker computes in: RAM is
// node 0, the only one of CPU workers.
type MemoryNode int

// RAM is the main memory node.
const RAM MemoryNode = 0

// Handle status.
const (
	handleLive uint32 = iota
	handlePartitioned
	handleUnregistered
)

type handleKind uint8

const (
	kindVector handleKind = iota
	kindMatrix
	kindValue
)

func (k handleKind) String() string {
	return [...]string{"vector", "matrix", "value"}[k]
}

// A buffer is a handle's data as seen on one memory node.
type buffer struct {
	data     any
	rows     int
	cols     int
	ld       int
	elemSize uintptr
	typ      reflect.Type
}

// newLike allocates a buffer of b's shape (contiguous) with zero values;
// used for scratch and reduction copies.
func (b *buffer) newLike(kind handleKind) (*buffer, error) {
	nb := &buffer{rows: b.rows, cols: b.cols, ld: b.cols, elemSize: b.elemSize, typ: b.typ}
	switch kind {
	case kindVector, kindMatrix:
		nb.data = reflect.MakeSlice(b.typ, b.rows*b.cols, b.rows*b.cols).Interface()
		if kind == kindVector {
			nb.ld = 1
		}
	case kindValue:
		if b.typ.Kind() != reflect.Pointer {
			return nil, fmt.Errorf("%w: value handle holds a %v, not a pointer; register a pointer to use Scratch or Redux", ErrBadData, b.typ)
		}
		nb.data = reflect.New(b.typ.Elem()).Interface()
	}
	return nb, nil
}

// Dependency categories of a group of consecutive accesses: accesses of
// the same category (reads, commuting writes, reductions) do not depend
// on each other.
const (
	catNone uint8 = iota
	catRead
	catWrite
	catCommute
	catRedux
	catSync // a partition boundary: everything after depends on it
)

func category(m Mode) uint8 {
	switch {
	case m == ModeR:
		return catRead
	case m&ModeCommute != 0:
		return catCommute
	case m == ModeRedux:
		return catRedux
	}
	return catWrite
}

// A Handle is data registered with a Scheduler: a vector (slice), a
// row-major matrix with a leading dimension, or any value. Tasks access
// it through R, W, RW, Scratch, Redux or Commute; the scheduler infers
// dependencies from the order of submission (see the package
// documentation). Methods are safe for concurrent use.
type Handle struct {
	// The fields are laid out by who touches them (TestHandleLayout):
	// the first cache line what registration sets and the workers read,
	// the second the RAM buffer that implementations read, the third
	// what submission writes as it wires each access, so that wiring
	// the next tasks does not take the line the workers read.
	s        *Scheduler
	name     string
	kind     handleKind
	implicit bool
	dev      bool // the data can live on a device (deviceData)
	status   atomic.Uint32
	parent   *Handle
	_        [24]byte

	ram buffer

	// The wiring state, up to cmu, is guarded by s.handleMu, one lock
	// for all the handles of s (see Scheduler.handleMu).
	cur    []*Task // the last group of accesses
	prev   []*Task // the group before it (what cur depends on)
	curCat uint8
	// nread counts the readers that lead a list, whose failure cancels
	// nothing after them (a reader changed nothing; a detached one
	// excepted), before the tasks whose failure does: in cur when it is
	// a partition boundary (catSync: a tile's first accesses wait for
	// the whole's readers and writers, the whole's after Unpartition for
	// the tiles'), else in prev (the readers before a group of reads,
	// commuting writes or reductions and, after them, the writers they
	// read).
	nread int32

	children [][]*Handle
	rinit    *Codelet
	rcombine *Codelet
	rcopies  []*reduxCopy // per worker, nil until used

	cmu    sync.Mutex // commute token
	cowner *Task
	cwait  []*Task

	span span

	// The data layer's state (coherence.go), guarded by dataLayer.mu;
	// unused without devices.
	reps []replica // one per memory node, nil until first used

	// hostWrites counts the host's write accesses (Data) to h or to one
	// of its tiles, at any depth; hostOwn those to h itself. HostWrites
	// adds its ancestors' hostOwn, so that Data stays free of locks and
	// allocations (the tiles are not walked).
	hostWrites, hostOwn atomic.Uint64

	_ [16]byte // to the 384-byte size class: no line shared with another handle
}

// A reduxCopy is a worker's private copy of a handle for Redux
// accesses: in RAM, or on the worker's device (dev, mem).
type reduxCopy struct {
	buf  *buffer
	live bool
	dev  *device    // the device the copy is on; nil: RAM
	node MemoryNode // dev's node
	mem  accel.Mem  // its allocation there (dataLayer.allocPrivateLocked)
}

// HandleOption configures a handle at registration.
type HandleOption func(*handleConfig)

type handleConfig struct {
	name       string
	ld         int
	noImplicit bool
}

// Named names the handle in errors and traces.
func Named(name string) HandleOption { return func(c *handleConfig) { c.name = name } }

// NameOf returns the name that opts give a handle ("" if none), for
// layers that register handles on behalf of others (scheduler/dist).
func NameOf(opts ...HandleOption) string {
	var c handleConfig
	for _, o := range opts {
		o(&c)
	}
	return c.name
}

// LDOf returns the leading dimension that opts set (LD; the last one
// wins), 0 when none does: for a layer that registers handles for the
// program and must refuse what it cannot honour (scheduler/dist moves a
// handle's elements as one contiguous block).
func LDOf(opts ...HandleOption) int {
	var c handleConfig
	for _, o := range opts {
		o(&c)
	}
	return c.ld
}

// LD sets a matrix's leading dimension (the distance in elements between
// the starts of two consecutive rows; default: the number of columns).
func LD(ld int) HandleOption { return func(c *handleConfig) { c.ld = ld } }

// NoImplicitDeps turns off dependency inference for the handle: tasks
// using it are ordered only by explicit dependencies and tags
// (StarPU's sequential consistency off).
func NoImplicitDeps() HandleOption { return func(c *handleConfig) { c.noImplicit = true } }

// String returns the handle's name, or its kind and shape.
func (h *Handle) String() string {
	if h.name != "" {
		return fmt.Sprintf("handle %q", h.name)
	}
	switch h.kind {
	case kindMatrix:
		return fmt.Sprintf("matrix handle %dx%d", h.ram.rows, h.ram.cols)
	case kindVector:
		return fmt.Sprintf("vector handle [%d]", h.ram.rows)
	}
	return fmt.Sprintf("value handle %v", h.ram.typ)
}

// RegisterVector registers a slice (any element type) as a vector handle.
func (s *Scheduler) RegisterVector(data any, opts ...HandleOption) (*Handle, error) {
	v := reflect.ValueOf(data)
	if v.Kind() != reflect.Slice {
		return nil, fmt.Errorf("%w: RegisterVector needs a slice, got %T", ErrBadData, data)
	}
	cfg := handleConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	h := s.newHandle(cfg, kindVector)
	h.ram = buffer{data: data, rows: v.Len(), cols: 1, ld: 1, elemSize: v.Type().Elem().Size(), typ: v.Type()}
	h.dev = deviceData(h)
	return h, s.addSpan(h, v)
}

// RegisterMatrix registers a row-major matrix of rows x cols elements
// stored in data (a slice of any element type) with leading dimension
// ld (option LD, default cols): element (i, j) is data[i*ld+j].
func (s *Scheduler) RegisterMatrix(data any, rows, cols int, opts ...HandleOption) (*Handle, error) {
	v := reflect.ValueOf(data)
	if v.Kind() != reflect.Slice {
		return nil, fmt.Errorf("%w: RegisterMatrix needs a slice, got %T", ErrBadData, data)
	}
	cfg := handleConfig{ld: cols}
	for _, o := range opts {
		o(&cfg)
	}
	if rows < 0 || cols < 0 || cfg.ld < cols || cfg.ld < 1 {
		return nil, fmt.Errorf("%w: matrix %dx%d with leading dimension %d (need rows, cols >= 0 and ld >= max(cols, 1))", ErrBadData, rows, cols, cfg.ld)
	}
	need := 0
	if rows > 0 && cols > 0 {
		need = (rows-1)*cfg.ld + cols
	}
	if v.Len() < need {
		return nil, fmt.Errorf("%w: matrix %dx%d with leading dimension %d needs %d elements, slice has %d", ErrBadData, rows, cols, cfg.ld, need, v.Len())
	}
	h := s.newHandle(cfg, kindMatrix)
	h.ram = buffer{data: v.Slice(0, need).Interface(), rows: rows, cols: cols, ld: cfg.ld, elemSize: v.Type().Elem().Size(), typ: v.Type()}
	h.dev = deviceData(h)
	return h, s.addSpan(h, v.Slice(0, need))
}

// RegisterValue registers any value as a handle. Tasks see the value
// itself (ValueOf); register a pointer (or a map, or a slice) so that
// writers can modify it in place. Scratch and Redux need a pointer. The
// memory a pointer or a slice reaches, and a map, may be registered once
// in the process (ErrOverlap), like a vector's.
func (s *Scheduler) RegisterValue(v any, opts ...HandleOption) (*Handle, error) {
	if v == nil {
		return nil, fmt.Errorf("%w: RegisterValue(nil)", ErrBadData)
	}
	cfg := handleConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	h := s.newHandle(cfg, kindValue)
	t := reflect.TypeOf(v)
	h.ram = buffer{data: v, rows: 1, cols: 1, ld: 1, elemSize: t.Size(), typ: t}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		// What a writer can change in place: the memory the pointer or
		// the slice reaches, the map's contents.
		return h, s.addSpan(h, reflect.ValueOf(v))
	}
	return h, nil
}

func (s *Scheduler) newHandle(cfg handleConfig, kind handleKind) *Handle {
	h := &Handle{s: s, name: cfg.name, kind: kind, implicit: !cfg.noImplicit}
	return h
}

// Rows returns the number of rows (the length of a vector, 1 for a value).
func (h *Handle) Rows() int { return h.ram.rows }

// Cols returns the number of columns (1 for vectors and values).
func (h *Handle) Cols() int { return h.ram.cols }

// LD returns the leading dimension (1 for vectors and values).
func (h *Handle) LD() int { return h.ram.ld }

// Data returns the handle's data in RAM (the registered slice or value;
// for a tile, the sub-slice starting at its first element) for the host
// to read and write: it is the host's read-write access, as StarPU's
// starpu_data_acquire in STARPU_RW mode. It first waits for the tasks
// submitted on h before it (every access: the host is about to write),
// combining a pending reduction, then copies the newest
// version back from a device if one holds it, then invalidates the
// devices' copies, so that RAM holds the only valid one: what the
// program writes into the data (through what Data returns or the
// registered slice itself) until it submits the next task on h is what
// that task sees, on any worker; a task on a device copies the data in
// again. To only read the data, use Fetch, which leaves the devices'
// copies valid.
//
// Call Data before writing the registered memory on the host, also
// after WaitAll: WaitAll brings the results back to RAM but leaves the
// devices' copies valid, and a later task on a device would compute
// from its copy, not from a write made without Data. (Or write in a
// task, which the scheduler orders and tracks.)
//
// Tasks submitted on h after Data returns use the data as the host
// does: reading or writing it then is a data race, so submit them once
// the host is done with it. Data does not return before the tasks it
// waits for end and the copy, if any, ends; use Fetch to bound the wait.
// It waits for ever for a task that cannot run: one waiting for a tag
// never declared, or one only a driven worker can run while the
// goroutine that drives it calls Data (call Fetch with a deadline, or
// RunOnce until the task is done, there). From a task's code, a team
// task's or a task's callback (which must not wait for tasks, see
// ErrInTask) Data does not wait. A copy that fails (the device was closed,
// or failed) leaves RAM as it was and the devices' copies valid, and Data
// returns the data without saying so: Fetch reports the failure. Without
// devices, Data only returns the data.
//
// On a partitioned handle, Data and Fetch act on its tiles (whose memory
// is the handle's): the newest version of every tile comes back to RAM,
// and Data invalidates the tiles' copies on the devices, so that a write
// through the whole is what the next task on a tile sees.
func (h *Handle) Data() any {
	// From a task's code the wait would be a task's (ErrInTask): Data
	// then returns at once, as it did before it waited.
	_ = h.awaitTasks(context.Background(), true, "Data")
	h.hostOwn.Add(1)
	for p := h; p != nil; p = p.parent {
		p.hostWrites.Add(1)
	}
	if d := h.s.data; d != nil {
		// Without a context, a failed copy leaves RAM as it was (and the
		// devices' copies valid); Fetch reports it.
		for _, x := range h.leaves() {
			_ = d.own(context.Background(), x)
		}
	}
	return h.ram.data
}

// HostWrites grows each time the host takes write access to h's data
// (Data) on h, on a handle h is a tile of, or on one of h's tiles, and
// not for a sibling tile's. A layer that keeps copies of h's data elsewhere (scheduler/dist's
// master/worker mode) drops them when it changes.
func (h *Handle) HostWrites() uint64 {
	n := h.hostWrites.Load()
	for p := h.parent; p != nil; p = p.parent {
		n += p.hostOwn.Load()
	}
	return n
}

// awaitTasks waits, as StarPU's starpu_data_acquire does, for the tasks
// submitted on h (or its tiles) before the call whose accesses conflict
// with the host's: those that write h for a read (write false), every
// one for a write. A pending reduction is combined first. Tasks
// submitted after the call are not waited for. The tasks' own errors are
// WaitAll's to report; awaitTasks returns ctx's error, or ErrInTask when
// a task's code calls it and it would block.
//
// A read (write false) also reports a failed writer: when a task that
// wrote the version of h's data it would return failed (or was
// canceled), the data are not that task's result, and it returns an
// error naming the task and wrapping its error, as a task that reads h
// after it is canceled (until a task that only writes h starts a new
// version).
func (h *Handle) awaitTasks(ctx context.Context, write bool, what string) error {
	var held, writers []*Task
	leaves := h.leaves()
	h.s.handleMu.Lock()
	for _, x := range leaves {
		if x.status.Load() != handleUnregistered {
			x.flushReduxLocked()
			if write || x.curCat != catRead {
				held = holdPending(held, x.cur)
			}
			held = holdPending(held, x.prev)
			if !write && x.implicit {
				writers = holdAll(writers, x.writersLocked())
			}
		}
	}
	h.s.handleMu.Unlock()
	var err error
	if len(held) > 0 {
		err = h.s.checkNotInTask(fmt.Sprintf("%s of %v", what, h))
	}
	for _, t := range held {
		if err == nil {
			if werr := t.Wait(ctx); werr != nil && ctx.Err() != nil {
				err = fmt.Errorf("scheduler: %s of %v: waiting for the tasks submitted on it: %w", what, h, ctxErr(ctx))
			}
		}
		h.s.release(t)
	}
	for _, t := range writers {
		if err == nil && t.state.Load() == stateFailed {
			err = fmt.Errorf("scheduler: %s of %v: task %q, which wrote the data last, did not complete, so they are not its result (submit a task that only writes %v to start anew): %w",
				what, h, t.Codelet.name(), h, t.err)
		}
		h.s.release(t)
	}
	return err
}

// writersLocked returns the group of accesses that made the current
// version of h's data: the readers' predecessors after a group of
// reads, else the last group. h.s.handleMu is held.
func (h *Handle) writersLocked() []*Task {
	switch h.curCat {
	case catRead:
		return h.prev[min(int(h.nread), len(h.prev)):]
	case catSync:
		return h.cur[min(int(h.nread), len(h.cur)):]
	}
	return h.cur
}

// holdAll appends ts to held, with a reference each.
func holdAll(held, ts []*Task) []*Task {
	for _, t := range ts {
		t.hold()
		held = append(held, t)
	}
	return held
}

// holdPending appends to held, with a reference each, the tasks of ts
// that have not completed.
func holdPending(held, ts []*Task) []*Task {
	for _, t := range ts {
		if t.state.Load() < stateDone {
			t.hold()
			held = append(held, t)
		}
	}
	return held
}

// leaves returns h and, when it is partitioned, its tiles' leaves: the
// handles whose replicas hold h's data.
func (h *Handle) leaves() []*Handle {
	h.s.handleMu.Lock()
	defer h.s.handleMu.Unlock()
	return h.leavesLocked(nil)
}

// leavesLocked appends h's leaves (see leaves) to out. h.s.handleMu is
// held.
func (h *Handle) leavesLocked(out []*Handle) []*Handle {
	out = append(out, h)
	if h.status.Load() == handlePartitioned {
		for _, row := range h.children {
			for _, t := range row {
				out = t.leavesLocked(out)
			}
		}
	}
	return out
}

// Fetch waits for the tasks submitted on h before it that write h
// (readers may go on), copies the newest version of h's data back to
// RAM if a device holds it, and returns the data as Data does. It is the
// host's read access (StarPU's starpu_data_acquire in STARPU_R mode):
// the devices' copies stay valid, and tasks on a device go on computing
// from them, so writes into what Fetch returns are not seen by the tasks
// that run on a device: call Data to write. Tasks submitted after it
// that write h race with the host's reading: submit them once it is
// done. From a task's code, a Fetch that would wait returns ErrInTask.
//
// It fails with ErrUnregistered for a handle unregistered, or a tile of
// a handle unpartitioned, before the call. It returns ctx's error if ctx
// ends first (the tasks it waits for go on); a copy to RAM already under way is let end before it returns,
// since it writes the registered memory: nothing writes it after Fetch
// returns, and its cost is one copy of h over the device's link.
func (h *Handle) Fetch(ctx context.Context) (any, error) {
	if h == nil {
		return nil, nilHandleError("Fetch")
	}
	if h.status.Load() == handleUnregistered {
		// As for Submit: an unregistered handle, or a tile of an
		// unpartitioned one, is no access to anything any more.
		h.s.handleMu.Lock()
		err := h.usableLocked()
		h.s.handleMu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("scheduler: Fetch: %w", err)
		}
	}
	if err := h.awaitTasks(ctx, false, "Fetch"); err != nil {
		return nil, err
	}
	if d := h.s.data; d != nil {
		for _, x := range h.leaves() {
			if err := d.fetch(ctx, x); err != nil {
				return nil, err
			}
		}
	}
	return h.ram.data, nil
}

// SetReduction sets the codelets used by Redux accesses: init (one W
// access) initializes a private copy to the neutral element, combine
// (RW destination, R source) accumulates one copy into another. Both
// run their CPU functions: a device worker's copy (in the device's
// memory) is initialized on the host, and combined in RAM by the
// reduction task on a CPU worker. Tiles take their parent's reduction
// when Partition makes them, so SetReduction on a partitioned handle
// fails with ErrPartitioned.
func (h *Handle) SetReduction(init, combine *Codelet) error {
	if h == nil {
		return nilHandleError("SetReduction")
	}
	if init == nil || combine == nil || init.CPU == nil || combine.CPU == nil {
		return fmt.Errorf("%w: SetReduction on %v needs init and combine codelets with CPU implementations", ErrNoImplementation, h)
	}
	h.s.handleMu.Lock()
	defer h.s.handleMu.Unlock()
	if h.status.Load() == handleUnregistered {
		return fmt.Errorf("setting the reduction: %w", h.usableLocked())
	}
	if h.status.Load() == handlePartitioned {
		// The tiles took h's reduction, if any, when they were made:
		// accepting it now would leave them without it.
		return fmt.Errorf("%w: SetReduction on %v, which is partitioned into tiles; call it before Partition, or on the tiles", ErrPartitioned, h)
	}
	h.rinit, h.rcombine = init, combine
	if h.rcopies == nil {
		h.rcopies = make([]*reduxCopy, len(h.s.workers))
	}
	return nil
}

// A Blocking says how Partition cuts a matrix: into tiles of Rows x Cols
// elements (the last row and column of tiles may be smaller).
type Blocking struct{ Rows, Cols int }

// Blocks returns a Blocking into tiles of rows x cols elements. For a
// vector use Blocks(n, 1): chunks of n elements.
func Blocks(rows, cols int) Blocking { return Blocking{rows, cols} }

// Partition cuts a vector or matrix handle into tiles: tiles[i][j] is
// the tile at tile-row i and tile-column j, a handle on the same memory.
// Tasks submitted afterwards on a tile depend on the tasks submitted
// before on h; h itself cannot be accessed until Unpartition. Partition
// does not block.
func (h *Handle) Partition(b Blocking) ([][]*Handle, error) {
	if h == nil {
		return nil, nilHandleError("Partition")
	}
	if h.kind == kindValue {
		return nil, fmt.Errorf("%w: cannot Partition %v (only vectors and matrices)", ErrBadData, h)
	}
	if b.Rows < 1 || b.Cols < 1 {
		return nil, fmt.Errorf("%w: Partition of %v into tiles of %d x %d elements: a tile has at least 1 row and 1 column (Blocks(rows, cols) gives a tile's size, not the number of tiles)", ErrBadData, h, b.Rows, b.Cols)
	}
	if h.s.closed.Load() {
		return nil, fmt.Errorf("partitioning %v: %w", h, ErrClosed)
	}
	h.s.handleMu.Lock()
	defer h.s.handleMu.Unlock()
	if err := h.usableLocked(); err != nil {
		return nil, fmt.Errorf("partitioning: %w", err)
	}
	h.flushReduxLocked()
	rv := reflect.ValueOf(h.ram.data)
	nr := (h.ram.rows + b.Rows - 1) / b.Rows
	nc := (h.ram.cols + b.Cols - 1) / b.Cols
	tiles := make([][]*Handle, nr)
	for i := range tiles {
		tiles[i] = make([]*Handle, nc)
		for j := range tiles[i] {
			r := min(b.Rows, h.ram.rows-i*b.Rows)
			c := min(b.Cols, h.ram.cols-j*b.Cols)
			off := i*b.Rows*h.ram.ld + j*b.Cols
			n := (r-1)*h.ram.ld + c
			cfg := handleConfig{noImplicit: !h.implicit}
			if h.name != "" {
				cfg.name = fmt.Sprintf("%s[%d][%d]", h.name, i, j)
			}
			t := h.s.newHandle(cfg, h.kind)
			t.parent = h
			t.ram = buffer{data: rv.Slice(off, off+n).Interface(), rows: r, cols: c, ld: h.ram.ld, elemSize: h.ram.elemSize, typ: h.ram.typ}
			t.dev = h.dev
			if h.rcombine != nil {
				t.rinit, t.rcombine = h.rinit, h.rcombine
				t.rcopies = make([]*reduxCopy, len(h.s.workers))
			}
			// Every first access of a tile waits for the last group of
			// accesses of the whole and, after readers, for the
			// writers they read; for readers, as for readers of the
			// whole (see nread).
			t.cur = append([]*Task(nil), h.cur...)
			t.curCat, t.nread = catSync, 0
			switch h.curCat {
			case catRead:
				t.cur = append(t.cur, h.prev...)
				t.nread = int32(len(h.cur)) + h.nread
			case catSync:
				t.nread = h.nread
			}
			for _, x := range t.cur {
				x.hold() // each tile's list holds its own reference
			}
			tiles[i][j] = t
		}
	}
	h.children = tiles
	h.status.Store(handlePartitioned)
	return tiles, nil
}

// Unpartition gathers h's tiles back: tasks submitted afterwards on h
// depend on the tasks submitted before on any tile, and the tiles become
// unusable (ErrUnregistered). Tiles that are themselves partitioned must
// be unpartitioned first. Unpartition does not block.
func (h *Handle) Unpartition() error {
	if h == nil {
		return nilHandleError("Unpartition")
	}
	h.s.handleMu.Lock()
	defer h.s.handleMu.Unlock()
	if h.status.Load() == handleUnregistered {
		return fmt.Errorf("unpartitioning: %w", h.usableLocked())
	}
	if h.status.Load() != handlePartitioned {
		return fmt.Errorf("%w: Unpartition of %v, which is not partitioned", ErrBadData, h)
	}
	for _, row := range h.children {
		for _, c := range row {
			if c.status.Load() == handlePartitioned {
				return fmt.Errorf("%w: Unpartition of %v: tile %v is partitioned; Unpartition it first", ErrPartitioned, h, c)
			}
		}
	}
	// The tiles' last readers become h's group of readers, whose
	// failure cancels nothing (a reader changed nothing), after the
	// writers they read and the tiles' last writers, whose failure
	// does: h's next accesses wait for them as after readers of h. With
	// no reader, h's next accesses wait for the tiles' last writers.
	var readers, writers []*Task
	for _, row := range h.children {
		for _, c := range row {
			c.flushReduxLocked()
			// The tile's references move to h's lists, or go.
			switch c.curCat {
			case catRead:
				nr := min(int(c.nread), len(c.prev))
				readers = append(append(readers, c.cur...), c.prev[:nr]...)
				writers = append(writers, c.prev[nr:]...)
			case catSync:
				nr := min(int(c.nread), len(c.cur))
				readers = append(readers, c.cur[:nr]...)
				writers = append(append(writers, c.cur[nr:]...), c.prev...)
			default:
				writers = append(writers, c.cur...)
				h.s.dropAll(c.prev)
			}
			c.cur, c.prev, c.nread = nil, nil, 0
			c.status.Store(handleUnregistered)
		}
	}
	h.s.dropAll(h.prev)
	h.s.dropAll(h.cur)
	if len(readers) > 0 {
		h.cur, h.prev, h.curCat = readers, writers, catRead
	} else {
		h.cur, h.prev, h.curCat = writers, nil, catSync
	}
	h.nread = 0
	if h.s.data != nil {
		h.gatherLocked(h.children)
	}
	h.children = nil
	h.status.Store(handleLive)
	return nil
}

// Unregister waits until the tasks submitted on h have completed, then
// unregisters h and returns its data (see Data). Tasks submitted on h
// afterwards fail with ErrUnregistered. A partitioned handle must be
// unpartitioned first; tiles are released by unpartitioning their
// parent. On ctx's end it returns ctx's error and h stays registered;
// a copy back to RAM that it started is let end first (see Fetch), so
// that nothing it started writes the data after it returns.
func (h *Handle) Unregister(ctx context.Context) (any, error) {
	if h == nil {
		return nil, nilHandleError("Unregister")
	}
	if h.parent != nil {
		if h.status.Load() == handleUnregistered {
			return nil, fmt.Errorf("%w: Unregister of tile %v, whose parent was unpartitioned: the tile is gone already, nothing to unregister (unregister the parent)", ErrUnregistered, h)
		}
		return nil, fmt.Errorf("%w: Unregister of tile %v; Unpartition its parent instead", ErrBadData, h)
	}
	for {
		h.s.handleMu.Lock()
		if err := h.usableLocked(); err != nil {
			h.s.handleMu.Unlock()
			return nil, fmt.Errorf("unregistering: %w", err)
		}
		h.flushReduxLocked()
		tasks := append(append([]*Task(nil), h.cur...), h.prev...)
		pending := false
		for _, t := range tasks {
			if t.state.Load() < stateDone {
				pending = true
				break
			}
		}
		if !pending {
			if d := h.s.data; d != nil {
				// Never a copy with the lock held that every submission
				// takes: one in flight is waited for without it, and
				// then everything is checked again.
				w, err := d.unregisterStep(h)
				if err != nil {
					h.s.handleMu.Unlock()
					return nil, fmt.Errorf("unregistering: %w", err)
				}
				if w != nil {
					h.s.handleMu.Unlock()
					if err := awaitCopy(ctx, h, w); err != nil {
						return nil, fmt.Errorf("unregistering: %w", err)
					}
					continue
				}
			}
			h.status.Store(handleUnregistered)
			h.s.dropAll(h.cur)
			h.s.dropAll(h.prev)
			h.cur, h.prev, h.nread = nil, nil, 0
			h.s.handleMu.Unlock()
			h.s.removeSpan(h)
			return h.ram.data, nil
		}
		if err := h.s.checkNotInTask(fmt.Sprintf("Unregister of %v", h)); err != nil {
			h.s.handleMu.Unlock()
			return nil, err
		}
		for _, t := range tasks {
			t.hold() // kept while waiting, outside the lock
		}
		h.s.handleMu.Unlock()
		var err error
		for _, t := range tasks {
			if err == nil {
				if werr := t.Wait(ctx); werr != nil && ctx.Err() != nil {
					err = fmt.Errorf("unregistering %v: %w", h, ctx.Err())
				}
			}
			h.s.release(t)
		}
		if err != nil {
			return nil, err
		}
	}
}

// nilHandleError is the error of a method called on a nil *Handle, as
// Submit's for a nil handle in an access: most often the handle of a
// Register call whose error was dropped.
func nilHandleError(what string) error {
	return fmt.Errorf("%w: %s of a nil handle (did the Register call that should have made it fail?)", ErrBadData, what)
}

// usableLocked reports why h cannot be accessed, or nil.
func (h *Handle) usableLocked() error {
	switch h.status.Load() {
	case handlePartitioned:
		return fmt.Errorf("%w: %v is partitioned into tiles; access the tiles, or Unpartition it first", ErrPartitioned, h)
	case handleUnregistered:
		if h.parent != nil {
			return fmt.Errorf("%w: %v is a tile of an unpartitioned handle; Partition the parent again", ErrUnregistered, h)
		}
		return fmt.Errorf("%w: %v was unregistered; register the data again", ErrUnregistered, h)
	}
	return nil
}
