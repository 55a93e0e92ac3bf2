package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

	mu     sync.Mutex
	closed bool
	counts [3]int64 // copies in, out, within
}

var (
	_ accel.Device = (*Accel)(nil)
	_ accel.Sharer = (*Accel)(nil)
)

// Instance names this Accel object: in-process ranks that share it see
// the same name, and copy between their buffers within the GPU.
func (a *Accel) Instance() string { return fmt.Sprintf("%s@%p", a.Name(), a) }

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

// Alloc allocates n bytes of device memory; when the GPU is full the
// error wraps both accel.ErrOutOfMemory and ErrOutOfMemory.
func (a *Accel) Alloc(n int) (accel.Mem, error) {
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
	a.submit(a.in, 0, err, done, func(c *Context, s *Stream) error {
		return c.CopyHtoD2DAsync(context.Background(), Copy2D{Host: src, Pitch: pitch, Device: b.ptr + DevicePtr(off), Rows: rows, Width: width}, s)
	})
}

// CopyOut copies rows contiguous in src from offset off to host rows
// pitch bytes apart.
func (a *Accel) CopyOut(dst []byte, rows, width, pitch int, src accel.Mem, off int, done accel.Done) {
	b, err := buffer(src, off, rows*width)
	a.submit(a.out, 1, err, done, func(c *Context, s *Stream) error {
		return c.CopyDtoH2DAsync(context.Background(), Copy2D{Host: dst, Pitch: pitch, Device: b.ptr + DevicePtr(off), Rows: rows, Width: width}, s)
	})
}

// CopyWithin copies n bytes between two allocations of the GPU, on the
// host-to-device engine.
func (a *Accel) CopyWithin(dst accel.Mem, doff int, src accel.Mem, soff int, n int, done accel.Done) {
	db, err := buffer(dst, doff, n)
	sb, err2 := buffer(src, soff, n)
	a.submit(a.in, 2, errors.Join(err, err2), done, func(c *Context, s *Stream) error {
		return c.CopyDtoDAsync(context.Background(), db.ptr+DevicePtr(doff), sb.ptr+DevicePtr(soff), n, s)
	})
}

// submit queues a copy on engine e, or reports err (a bad argument) or
// ErrClosed through done at once.
func (a *Accel) submit(e *copyEngine, kind int, err error, done accel.Done, issue func(*Context, *Stream) error) {
	a.mu.Lock()
	if err == nil && a.closed {
		err = accel.ErrClosed
	}
	if err == nil {
		a.counts[kind]++
		err = e.push(copyJob{issue: issue, done: done})
	}
	a.mu.Unlock()
	if err != nil {
		done(time.Now(), fmt.Errorf("cuda: %s: %w", a.Name(), err))
	}
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
	var errs []error
	for _, e := range []*copyEngine{a.in, a.out} {
		if e != nil {
			errs = append(errs, e.close())
		}
	}
	if a.main != nil {
		errs = append(errs, a.main.Close())
	}
	return errors.Join(errs...)
}

// A copyJob is one copy: issue queues it on the engine's stream.
type copyJob struct {
	issue func(*Context, *Stream) error
	done  accel.Done
}

// A copyEngine runs copies one after another, each issued on its stream
// and waited for there, on a goroutine of its own: the waits block only
// the engine's own Context thread.
type copyEngine struct {
	c *Context
	s *Stream

	mu      sync.Mutex
	queue   []copyJob
	wake    chan struct{}
	stopped bool
	exited  chan struct{}
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

// run takes the queued jobs in order until stopped with nothing queued.
func (e *copyEngine) run() {
	defer close(e.exited)
	for {
		e.mu.Lock()
		jobs := e.queue
		e.queue = nil
		stopped := e.stopped
		e.mu.Unlock()
		if len(jobs) == 0 {
			if stopped {
				return
			}
			<-e.wake
			continue
		}
		for i, j := range jobs {
			start := time.Now()
			err := e.c.Do(context.Background(), func() error {
				if err := j.issue(e.c, e.s); err != nil {
					return err
				}
				return e.s.Synchronize(context.Background())
			})
			j.done(start, err)
			jobs[i] = copyJob{}
		}
	}
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
