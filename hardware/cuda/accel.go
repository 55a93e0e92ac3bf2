package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/hardware/accel"
)

// An Accel is one GPU as an accel.Device: the memory node the scheduler
// and resource sets build on. Allocations are device memory
// (cuMemAlloc_v2); copies run on two copy engines, one per direction,
// each a goroutine with a Context (its own OS thread) and a non-blocking
// stream of its own, so a copy in each direction and the kernels of the
// GPU's workers overlap. A copy's done function is called from its
// engine's goroutine once the stream has finished it.
//
// The host cannot address an Accel's memory: its allocations are
// *Buffer values whose Ptr kernels take.
type Accel struct {
	d    *Driver
	info DeviceInfo
	main *Context // allocations, frees
	in   *copyEngine
	out  *copyEngine

	accel.Exports // accel.Sharer's names: in-process ranks sharing the GPU

	holders accel.Holders // accel.Reclaimer's: a scheduler's cache and replicas

	mu     sync.Mutex
	closed bool
	counts [3]int64 // copies in, out, within
	pins   map[*pin]struct{}
	spare  [][]byte  // staging buffers given back, page-locked (AllocHost)
	coll   ncclState // accel_nccl.go
}

// spareStaging is how many staging buffers an Accel keeps for reuse;
// more are freed when given back.
const spareStaging = 4

// Staging lends a page-locked host buffer of n bytes (accel.Stager):
// from the Accel's spares when one is large enough, else a new one
// (cuMemAllocHost). release gives it back; Close frees the spares. Use
// it for staging through host memory, not to hold data: it is the
// Accel's memory.
func (a *Accel) Staging(n int) (b []byte, release func(), err error) {
	if n <= 0 {
		return nil, nil, fmt.Errorf("%w: Staging of %d bytes", ErrBadArgument, n)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, nil, fmt.Errorf("cuda: %s: %w", a.Name(), accel.ErrClosed)
	}
	for i, sp := range a.spare {
		if len(sp) >= n {
			a.spare = append(a.spare[:i], a.spare[i+1:]...)
			b = sp
			break
		}
	}
	a.mu.Unlock()
	if b == nil {
		if b, err = a.main.AllocHost(context.Background(), n); err != nil {
			return nil, nil, fmt.Errorf("cuda: %s: a staging buffer of %d bytes: %w", a.Name(), n, err)
		}
	}
	var once sync.Once
	return b[:n], func() { once.Do(func() { a.giveBack(b) }) }, nil
}

// giveBack keeps a staging buffer for reuse, or frees it.
func (a *Accel) giveBack(b []byte) {
	a.mu.Lock()
	if !a.closed && len(a.spare) < spareStaging {
		a.spare = append(a.spare, b[:cap(b)])
		a.mu.Unlock()
		return
	}
	closed := a.closed
	a.mu.Unlock()
	if !closed { // after Close the context is gone, and the memory with it
		_ = a.main.FreeHost(context.Background(), b[:cap(b)])
	}
}

var (
	_ accel.Device    = (*Accel)(nil)
	_ accel.Sharer    = (*Accel)(nil)
	_ accel.Stager    = (*Accel)(nil)
	_ accel.Reclaimer = (*Accel)(nil)
)

// Instance names this Accel object: in-process ranks that share it see
// the same name, and copy between their buffers within the GPU; no
// other Accel, in this process or another, has it (see
// accel.Exports.InstanceName).
func (a *Accel) Instance() string { return a.InstanceName(a.Name()) }

// A Buffer is an allocation of an Accel's memory.
type Buffer struct {
	ptr DevicePtr
	n   int
}

// Bytes returns the allocation's size.
func (b *Buffer) Bytes() int { return b.n }

// Ptr returns the allocation's device address (0 for an empty one).
func (b *Buffer) Ptr() DevicePtr { return b.ptr }

// NewAccel opens GPU ordinal as an accel.Device: it retains the device's
// primary context three times (allocations and the two copy engines).
// Close it to stop the engines and release the contexts.
func (d *Driver) NewAccel(ctx context.Context, ordinal int) (*Accel, error) {
	info, err := d.Device(ordinal)
	if err != nil {
		return nil, err
	}
	a := &Accel{d: d, info: info}
	if a.main, err = d.NewContext(ctx, ordinal); err != nil {
		return nil, err
	}
	if a.in, err = newCopyEngine(ctx, d, ordinal); err == nil {
		a.out, err = newCopyEngine(ctx, d, ordinal)
	}
	if err != nil {
		return nil, errors.Join(err, a.Close())
	}
	return a, nil
}

// Info describes the GPU.
func (a *Accel) Info() DeviceInfo { return a.info }

// Driver returns the driver the GPU belongs to.
func (a *Accel) Driver() *Driver { return a.d }

// Ordinal returns the GPU's device ordinal.
func (a *Accel) Ordinal() int { return a.info.Ordinal }

// Name returns "cuda<ordinal>".
func (a *Accel) Name() string { return fmt.Sprintf("cuda%d", a.info.Ordinal) }

// Key identifies the GPU across runs: its UUID (or name and PCI
// location when the driver gives no UUID).
func (a *Accel) Key() string {
	if a.info.UUID != "" {
		return "cuda-" + a.info.UUID
	}
	return fmt.Sprintf("cuda-%s-%s", a.info.Name, a.info.PCIBusID)
}

// Capacity returns the GPU's total memory.
func (a *Accel) Capacity() int64 { return int64(a.info.TotalMemoryBytes) }

// Copies returns how many copies the engines ran into the GPU, out of it
// and within it.
func (a *Accel) Copies() (in, out, within int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[0], a.counts[1], a.counts[2]
}

// Alloc allocates n bytes of device memory; when the GPU is full it
// first asks the holders of its memory (Hold: a scheduler's cached
// allocations and replicas no task uses, the modified ones written back
// to host memory first) to give back what they do not need, waiting for
// them, and then the error wraps both accel.ErrOutOfMemory and
// ErrOutOfMemory.
func (a *Accel) Alloc(n int) (accel.Mem, error) { return a.holders.Alloc(n, a.alloc) }

// Hold registers a holder of the GPU's memory (accel.Reclaimer).
func (a *Accel) Hold(h accel.Holder) (alloc func(n int) (accel.Mem, error), drop func()) {
	return a.holders.Hold(h, a.alloc)
}

// alloc allocates n bytes without asking the holders.
func (a *Accel) alloc(n int) (accel.Mem, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: %s: allocating %d bytes", a.Name(), n)
	}
	if n == 0 {
		return &Buffer{}, nil
	}
	p, err := a.main.Alloc(context.Background(), n)
	if err != nil {
		if errors.Is(err, ErrOutOfMemory) {
			return nil, fmt.Errorf("%w: %s: %d bytes: %w", accel.ErrOutOfMemory, a.Name(), n, err)
		}
		return nil, fmt.Errorf("cuda: %s: allocating %d bytes: %w", a.Name(), n, err)
	}
	return &Buffer{ptr: p, n: n}, nil
}

// Free releases an allocation of this GPU. Errors (a GPU in a failed
// state) are dropped: there is nothing the caller could do.
func (a *Accel) Free(m accel.Mem) {
	b := m.(*Buffer)
	if b.ptr == 0 {
		return
	}
	_ = a.main.Free(context.Background(), b.ptr)
	b.ptr = 0
}

// buffer returns m as this package's allocation, checking the range
// [off, off+n).
func buffer(m accel.Mem, off, n int) (*Buffer, error) {
	b, ok := m.(*Buffer)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not a CUDA allocation", ErrBadArgument, m)
	}
	if off < 0 || n < 0 || off+n > b.n {
		return nil, fmt.Errorf("%w: bytes [%d, %d) of an allocation of %d", ErrBadArgument, off, off+n, b.n)
	}
	return b, nil
}

// CopyIn copies rows rows of width bytes from host memory, pitch bytes
// apart, into dst from offset off, rows contiguous.
func (a *Accel) CopyIn(dst accel.Mem, off int, src []byte, rows, width, pitch int, done accel.Done) {
	b, err := buffer(dst, off, rows*width)
	a.submit(a.in, 0, err, hostSpan(src, rows, width, pitch), done, func(c *Context, s *Stream) error {
		return c.CopyHtoD2DAsync(context.Background(), Copy2D{Host: src, Pitch: pitch, Device: b.ptr + DevicePtr(off), Rows: rows, Width: width}, s)
	})
}

// CopyOut copies rows contiguous in src from offset off to host rows
// pitch bytes apart.
func (a *Accel) CopyOut(dst []byte, rows, width, pitch int, src accel.Mem, off int, done accel.Done) {
	b, err := buffer(src, off, rows*width)
	a.submit(a.out, 1, err, hostSpan(dst, rows, width, pitch), done, func(c *Context, s *Stream) error {
		return c.CopyDtoH2DAsync(context.Background(), Copy2D{Host: dst, Pitch: pitch, Device: b.ptr + DevicePtr(off), Rows: rows, Width: width}, s)
	})
}

// CopyWithin copies n bytes between two allocations of the GPU, on the
// host-to-device engine.
func (a *Accel) CopyWithin(dst accel.Mem, doff int, src accel.Mem, soff int, n int, done accel.Done) {
	db, err := buffer(dst, doff, n)
	sb, err2 := buffer(src, soff, n)
	a.submit(a.in, 2, errors.Join(err, err2), nil, done, func(c *Context, s *Stream) error {
		return c.CopyDtoDAsync(context.Background(), db.ptr+DevicePtr(doff), sb.ptr+DevicePtr(soff), n, s)
	})
}

// hostSpan is the host bytes a 2-D copy touches (nil if the shape does
// not fit in b: the copy itself reports that).
func hostSpan(b []byte, rows, width, pitch int) []byte {
	if rows <= 0 || width <= 0 {
		return nil
	}
	n := (rows-1)*pitch + width
	if pitch < width || n > len(b) {
		return nil
	}
	return b[:n]
}

// submit queues a copy on engine e, or reports err (a bad argument) or
// ErrClosed through done at once. host is the host memory the copy
// reads or writes (nil within the GPU).
func (a *Accel) submit(e *copyEngine, kind int, err error, host []byte, done accel.Done, issue func(*Context, *Stream) error) {
	a.mu.Lock()
	if err == nil && a.closed {
		err = accel.ErrClosed
	}
	if err == nil {
		a.counts[kind]++
		err = e.push(copyJob{issue: issue, host: host, done: done})
	}
	a.mu.Unlock()
	if err != nil {
		done(time.Now(), fmt.Errorf("cuda: %s: %w", a.Name(), err))
	}
}

// PinnedCopies returns how many copies in and out of the GPU ran
// asynchronously because their host memory was page-locked (see Pin).
func (a *Accel) PinnedCopies() int64 {
	return a.in.pinned.Load() + a.out.pinned.Load()
}

// Pin page-locks b for every context (cuMemHostRegister with
// CU_MEMHOSTREGISTER_PORTABLE), so that the copies between b and this or
// any other GPU run asynchronously at the bus's full speed instead of
// being staged by the driver through its own pinned buffers. b must not
// be registered already (an error wrapping
// ErrHostMemoryAlreadyRegistered). unpin waits for the copies queued so
// far on both engines, then undoes the registration; Close undoes the
// registrations still in place. The Go heap does not move objects, so b
// stays where the driver saw it; the Accel keeps it reachable until
// unpin.
func (a *Accel) Pin(b []byte) (unpin func() error, err error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: Pin of an empty slice", ErrBadArgument)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, fmt.Errorf("cuda: %s: %w", a.Name(), accel.ErrClosed)
	}
	if err := a.main.HostRegisterFlags(context.Background(), b, HostRegisterPortable); err != nil {
		return nil, fmt.Errorf("cuda: %s: pinning %d bytes of host memory: %w", a.Name(), len(b), err)
	}
	p := &pin{b: b}
	if a.pins == nil {
		a.pins = map[*pin]struct{}{}
	}
	a.pins[p] = struct{}{}
	return func() error { return a.unpin(p) }, nil
}

// A pin is host memory an Accel registered.
type pin struct{ b []byte }

// unpin waits for the copies queued so far, then unregisters p unless
// Close already did.
func (a *Accel) unpin(p *pin) error {
	a.mu.Lock()
	if _, ok := a.pins[p]; !ok || a.closed {
		a.mu.Unlock()
		return nil
	}
	delete(a.pins, p)
	in, out := a.in.flushed(), a.out.flushed()
	a.mu.Unlock()
	<-in
	<-out
	if err := a.main.HostUnregister(context.Background(), p.b); err != nil {
		return fmt.Errorf("cuda: %s: unpinning %d bytes of host memory: %w", a.Name(), len(p.b), err)
	}
	return nil
}

// Close waits for the copies issued, stops the engines and releases the
// contexts. Allocations still live are reclaimed when the last holder of
// the primary context releases it.
func (a *Accel) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	errs := []error{a.closeComms()}
	for _, e := range []*copyEngine{a.in, a.out} {
		if e != nil {
			errs = append(errs, e.close())
		}
	}
	for p := range a.pins { // the engines are done with them
		if err := a.main.HostUnregister(context.Background(), p.b); err != nil {
			errs = append(errs, fmt.Errorf("cuda: %s: unpinning %d bytes of host memory: %w", a.Name(), len(p.b), err))
		}
	}
	a.pins = nil
	for _, b := range a.spare {
		errs = append(errs, a.main.FreeHost(context.Background(), b))
	}
	a.spare = nil
	if a.main != nil {
		errs = append(errs, a.main.Close())
	}
	return errors.Join(errs...)
}

// A copyJob is one copy: issue queues it on the engine's stream.
type copyJob struct {
	issue func(*Context, *Stream) error
	host  []byte // the host memory it touches; nil within the GPU
	done  accel.Done
}

// A copyEngine runs copies in order on its stream, from a goroutine of
// its own with a Context (its own OS thread), so that its waits block no
// other calls. A copy from or to pageable host memory - an ordinary Go
// slice, which the driver stages through pinned buffers of its own and
// completes before the call returns - is waited for at once. A copy from
// or to page-locked memory (Pin, AllocHost) is truly asynchronous: the
// engine records an event after it and queues the next copies at once,
// and a copy is done when its event has completed, so the bus never
// waits for the host between two copies.
type copyEngine struct {
	c *Context
	s *Stream

	mu      sync.Mutex
	queue   []copyJob
	wake    chan struct{}
	stopped bool
	exited  chan struct{}

	// Used by the engine's goroutine only.
	flights []flight // asynchronous copies issued, oldest first
	events  []*Event // spare events
	errs    []error  // land's, kept between calls
	pinned  atomic.Int64
}

// A flight is an asynchronous copy issued, with the event after it.
type flight struct {
	j     copyJob
	ev    *Event
	start time.Time
}

func newCopyEngine(ctx context.Context, d *Driver, ordinal int) (*copyEngine, error) {
	c, err := d.NewContext(ctx, ordinal)
	if err != nil {
		return nil, err
	}
	s, err := c.NewStream(ctx)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	e := &copyEngine{c: c, s: s, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	go e.run()
	return e, nil
}

// push queues a job.
func (e *copyEngine) push(j copyJob) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return accel.ErrClosed
	}
	e.queue = append(e.queue, j)
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return nil
}

// run takes the queued jobs in order until stopped with nothing queued
// or in flight.
func (e *copyEngine) run() {
	defer close(e.exited)
	for {
		e.mu.Lock()
		jobs := e.queue
		e.queue = nil
		stopped := e.stopped
		e.mu.Unlock()
		if len(jobs) == 0 {
			switch {
			case len(e.flights) > 0:
				e.land(true) // nothing new to issue: wait for the oldest copy
			case stopped:
				e.destroyEvents()
				return
			default:
				<-e.wake
			}
			continue
		}
		for i, j := range jobs {
			e.issue(j)
			jobs[i] = copyJob{}
		}
		e.land(false)
	}
}

// issue queues one copy: a pageable one is waited for (with the copies
// in flight before it), a pinned one joins the flights.
func (e *copyEngine) issue(j copyJob) {
	start := time.Now()
	var ev *Event
	err := e.c.Do(context.Background(), func() error {
		pinned := false
		if j.host != nil {
			// An error (a driver without cuPointerGetAttribute) means
			// pageable: the copy is still right, only synchronous.
			pinned, _ = e.c.IsPinned(context.Background(), j.host)
		}
		if err := j.issue(e.c, e.s); err != nil {
			return err
		}
		if pinned {
			var err error
			if ev, err = e.event(); err == nil {
				if err = ev.Record(context.Background(), e.s); err == nil {
					return nil
				}
				e.events = append(e.events, ev)
			}
			ev = nil // no event: wait for the stream instead
		}
		return e.s.Synchronize(context.Background())
	})
	if ev != nil && err == nil {
		e.pinned.Add(1)
		e.flights = append(e.flights, flight{j: j, ev: ev, start: start})
		return
	}
	// Waited for the stream: the copies in flight before it are done too.
	e.landAll(err)
	j.done(start, err)
}

// event returns a spare event, or a new one (without timing).
func (e *copyEngine) event() (*Event, error) {
	if n := len(e.events); n > 0 {
		ev := e.events[n-1]
		e.events = e.events[:n-1]
		return ev, nil
	}
	return e.c.NewEvent(context.Background(), false)
}

// land completes the copies in flight whose events have completed, in
// order; with block it first waits for the oldest.
func (e *copyEngine) land(block bool) {
	errs := e.errs[:0]
	derr := e.c.Do(context.Background(), func() error {
		for i, f := range e.flights {
			var err error
			if i == 0 && block {
				err = f.ev.Synchronize(context.Background())
			} else {
				done, qerr := f.ev.Done(context.Background())
				if !done && qerr == nil {
					break
				}
				err = qerr
			}
			errs = append(errs, err)
		}
		return nil
	})
	if derr != nil { // the Context is gone: nothing will complete
		e.landAll(derr)
		return
	}
	n := len(errs)
	for i, f := range e.flights[:n] {
		e.events = append(e.events, f.ev)
		f.j.done(f.start, errs[i])
	}
	rest := copy(e.flights, e.flights[n:])
	clear(e.flights[rest:])
	e.flights = e.flights[:rest]
	clear(errs)
	e.errs = errs[:0]
}

// landAll completes every copy in flight once the stream has finished
// (err: what waiting for it reported).
func (e *copyEngine) landAll(err error) {
	for _, f := range e.flights {
		e.events = append(e.events, f.ev)
		f.j.done(f.start, err)
	}
	clear(e.flights)
	e.flights = e.flights[:0]
}

// destroyEvents destroys the spare events when the engine stops.
func (e *copyEngine) destroyEvents() {
	for _, ev := range e.events {
		_ = ev.Destroy(context.Background())
	}
	e.events = nil
}

// flushed returns a channel closed once every copy queued before the
// call has completed: a job that copies nothing, waited for on the
// stream like a pageable copy, after which the engine lands every copy
// in flight. The engine must not be stopped.
func (e *copyEngine) flushed() <-chan struct{} {
	ch := make(chan struct{})
	err := e.push(copyJob{
		issue: func(*Context, *Stream) error { return nil },
		done:  func(time.Time, error) { close(ch) },
	})
	if err != nil {
		close(ch)
	}
	return ch
}

// close lets the queued copies finish, then destroys the stream and
// releases the context.
func (e *copyEngine) close() error {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	<-e.exited
	return errors.Join(e.s.Destroy(context.Background()), e.c.Close())
}

var _ accel.Addresser = (*Accel)(nil)

// Space returns "cuda": the GPU's memory, which a CUDA-aware MPI reaches
// by address (comm.DeviceComm).
func (a *Accel) Space() string { return "cuda" }

// Address returns the device address of byte off of m, an allocation
// of this GPU.
func (a *Accel) Address(m accel.Mem, off int) (uintptr, error) {
	b, err := buffer(m, off, 0)
	if err != nil {
		return 0, err
	}
	return uintptr(b.ptr) + uintptr(off), nil
}
