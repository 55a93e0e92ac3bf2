package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/hardware/cuda"
)

// A CUDAFunc is a codelet's implementation for CUDA GPU workers. It runs
// on the worker's OS thread with the GPU's context current, so it may
// call the driver (through c.Context) and libraries bound to the same
// context directly. It queues the task's work - kernels, copies within
// the device, library calls - on c.Stream and returns; the task
// completes once that work has (an event recorded after it), and the
// worker meanwhile takes its next task (WithCUDAPipeline), whose work
// goes on another of the worker's streams. State an implementation
// keeps between tasks - library handles bound to a stream, workspaces -
// therefore belongs to c.Stream, not to c.Worker: two tasks of one
// worker may be in flight at once. It must not synchronize the device or
// the context (cuCtxSynchronize, Context.Synchronize): other tasks'
// copies and kernels run on the same GPU meanwhile. An error returned,
// or one the stream reports (a kernel that failed), fails the task with
// the driver's message.
type CUDAFunc func(c *CUDACall) error

// A CUDACall is what a CUDA implementation receives: the Call (the
// task, its buffers as seen on the GPU, where Data(i) is a
// *cuda.Buffer), the GPU's context and the worker's stream.
type CUDACall struct {
	*Call
	// Context is the GPU's primary context; its methods run inline on
	// the calling thread.
	Context *cuda.Context
	// Stream is the task's stream, one of the worker's (one per task it
	// may have in flight): queue the task's work on it.
	Stream *cuda.Stream
}

// Ptr returns the device address of buffer i (its element (0,0);
// matrices are dense on the GPU: their leading dimension, Dims, is
// their number of columns); a Scratch access's buffer is GPU memory of
// the worker's, uninitialized. It panics, failing the task, if buffer i
// is not in GPU memory (a value handle).
func (c *CUDACall) Ptr(i int) cuda.DevicePtr { return c.Buffer(i).Ptr() }

// Buffer returns buffer i as GPU memory (see Ptr).
func (c *CUDACall) Buffer(i int) *cuda.Buffer {
	b, ok := c.bufs[i].data.(*cuda.Buffer)
	if !ok {
		panic(fmt.Sprintf("scheduler: buffer %d holds %T, not GPU memory", i, c.bufs[i].data))
	}
	return b
}

// WithCUDA gives the scheduler up to n of this machine's CUDA GPUs (all
// of them when n < 0), each a memory node with one worker of kind
// CUDAWorker that takes a core from the CPU workers, as a simulated
// device does. Without a CUDA driver (or with no GPU) the scheduler has
// no GPU workers, and no error. Environment, when WithCUDA is not given:
// PZ_NCUDA=n (-1: all); PZ_CUDA_LIBRARY names the driver library to load
// instead of libcuda.so.1.
func WithCUDA(n int) Option {
	return func(c *config) { c.cuda.n, c.cuda.set = n, true }
}

// WithCUDAWorkers gives each GPU, WithCUDA's and WithDevices' (the
// RuntimeView's), k workers (default 1), each
// with a stream of its own, so that k tasks run on the GPU at once
// (StarPU's STARPU_NWORKER_PER_CUDA). They share the GPU's memory node,
// and like a simulated device's workers they can be split between
// scheduling contexts. Environment: PZ_NWORKER_PER_CUDA.
func WithCUDAWorkers(k int) Option {
	return func(c *config) { c.cuda.perGPU = k }
}

// WithCUDAPipeline lets each GPU worker have up to k tasks in flight
// (default 2; StarPU's STARPU_CUDA_PIPELINE), each on a stream of its
// own: once a task's implementation has queued its work the worker
// makes the next task's data valid on the GPU and queues its work too,
// and a task completes when an event recorded after its work has. With
// k = 1 the worker waits for each task's work before the next task.
// Environment: PZ_CUDA_PIPELINE.
func WithCUDAPipeline(k int) Option {
	return func(c *config) { c.cuda.pipeline, c.cuda.pipelineSet = k, true }
}

// WithCUDAPartitions gives each of a GPU's WithCUDAWorkers(k) workers
// (WithCUDA's GPUs and WithDevices')
// its own 1/k of the GPU's streaming multiprocessors, a CUDA green
// context (driver 12.4 and later), so that a scheduling context holding
// some of the workers holds that part of the GPU, as StarPU's CUDA
// sub-contexts do. The driver rounds each part down to its SM
// granularity (8 SMs on Hopper); WorkerInfo.SMs says what each worker
// got. With a driver without green contexts the workers share all the
// SMs, each with its own stream, as without this option, and SMs is 0.
// Too many workers for the SMs is an error. A green context is a
// context of its own: load modules (Context.LoadPTX) in the context the
// implementation gets, CUDACall.Context, once per context, not in the
// GPU's primary context. Environment: PZ_CUDA_PARTITIONS=1.
func WithCUDAPartitions() Option {
	return func(c *config) { c.cuda.partitions, c.cuda.partitionsSet = true, true }
}

// WithCUDAMemoryLimit caps the data each device's memory node holds at
// bytes (StarPU's STARPU_LIMIT_CUDA_MEM): every device's, WithCUDA's
// GPUs, WithDevices' devices (the RuntimeView's GPUs or simulated
// devices) and WithSimDevices' devices alike. The data layer evicts
// replicas to stay under it as it does at the device's own size, so a
// matrix larger than the limit runs out of core, and data larger than
// it fail with ErrDeviceMemory (or go to a CPU worker). It leaves the
// rest of the device's memory to other users and makes out-of-core runs
// measurable on a device of any size.
// Environment: PZ_LIMIT_CUDA_MEM, a size as ParseBytes reads it (8GiB).
func WithCUDAMemoryLimit(bytes int64) Option {
	return func(c *config) { c.cuda.memLimit, c.cuda.memLimitSet = bytes, true }
}

// WithCUDADriver makes WithCUDA use d (another driver library, opened
// with cuda.OpenLibrary, or one already open) instead of the system's.
func WithCUDADriver(d *cuda.Driver) Option {
	return func(c *config) { c.cuda.driver = d }
}

// cudaConfig is which GPUs a scheduler opens.
type cudaConfig struct {
	n        int
	set      bool
	perGPU   int // workers per GPU; 0: PZ_NWORKER_PER_CUDA, else 1
	pipeline int // tasks in flight per worker (WithCUDAPipeline)
	// pipelineSet: WithCUDAPipeline was given; else PZ_CUDA_PIPELINE,
	// else 2.
	pipelineSet bool
	// partitions: WithCUDAPartitions or PZ_CUDA_PARTITIONS.
	partitions, partitionsSet bool
	// memLimit caps each device's memory node (WithCUDAMemoryLimit, else
	// PZ_LIMIT_CUDA_MEM); 0: the device's size.
	memLimit    int64
	memLimitSet bool
	driver      *cuda.Driver
	ordinals    []int  // resolved: the GPUs to open
	absent      string // why GPUs asked for (WithCUDA, PZ_NCUDA) are not there; "" when none were asked for or some are
}

// resolve reads PZ_NWORKER_PER_CUDA, PZ_CUDA_PIPELINE, PZ_CUDA_PARTITIONS,
// PZ_LIMIT_CUDA_MEM, and PZ_NCUDA when WithCUDA was not
// given, and picks the GPUs (cuda.Select: no context is created).
func (c *cudaConfig) resolve(env func(string) string) error {
	if c.perGPU == 0 {
		c.perGPU = 1
		if v := env("PZ_NWORKER_PER_CUDA"); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil || k < 1 {
				return fmt.Errorf("%w: PZ_NWORKER_PER_CUDA=%q is not a positive number of workers", ErrBadOption, v)
			}
			c.perGPU = k
		}
	}
	if !c.pipelineSet {
		c.pipeline = 2
		if v := env("PZ_CUDA_PIPELINE"); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil || k < 1 {
				return fmt.Errorf("%w: PZ_CUDA_PIPELINE=%q is not a positive number of tasks", ErrBadOption, v)
			}
			c.pipeline = k
		}
	}
	if c.pipeline < 1 {
		return fmt.Errorf("%w: WithCUDAPipeline(%d): need at least one task in flight", ErrBadOption, c.pipeline)
	}
	if !c.partitionsSet {
		switch v := env("PZ_CUDA_PARTITIONS"); v {
		case "", "0":
		case "1":
			c.partitions = true
		default:
			return fmt.Errorf("%w: PZ_CUDA_PARTITIONS=%q: want 1 or 0", ErrBadOption, v)
		}
	}
	if c.perGPU < 1 {
		return fmt.Errorf("%w: WithCUDAWorkers(%d): need at least one worker per GPU", ErrBadOption, c.perGPU)
	}
	if !c.memLimitSet {
		if v := env("PZ_LIMIT_CUDA_MEM"); v != "" {
			m, err := ParseBytes(v)
			if err != nil || m <= 0 {
				return fmt.Errorf("%w: PZ_LIMIT_CUDA_MEM=%q is not a size such as 8GiB", ErrBadOption, v)
			}
			c.memLimit = m
		}
	} else if c.memLimit <= 0 {
		return fmt.Errorf("%w: WithCUDAMemoryLimit(%d): want a positive number of bytes", ErrBadOption, c.memLimit)
	}
	d, ords, err := cuda.Select(env, c.n, c.set, c.driver)
	if errors.Is(err, cuda.ErrBadArgument) {
		return fmt.Errorf("%w: %w", ErrBadOption, err)
	}
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	c.driver = d
	c.ordinals = ords
	if asked := c.n != 0 && c.set || !c.set && env("PZ_NCUDA") != "" && env("PZ_NCUDA") != "0"; asked && len(ords) == 0 {
		c.absent = "no CUDA driver was found (libcuda.so.1, or the library PZ_CUDA_LIBRARY names)"
		if d != nil {
			c.absent = "the CUDA driver reports no GPU"
		}
	}
	return nil
}

// skipGiven drops the GPUs that devices (WithDevices: the RuntimeView's)
// already holds: one GPU is one memory node.
func (c *cudaConfig) skipGiven(devices []accel.Device) {
	kept := c.ordinals[:0]
	for _, o := range c.ordinals {
		given := false
		for _, d := range devices {
			if a, ok := d.(*cuda.Accel); ok && a.Ordinal() == o && a.Driver().Library() == c.driver.Library() {
				given = true
			}
		}
		if !given {
			kept = append(kept, o)
		}
	}
	c.ordinals = kept
}

// partitionSMs splits GPU a's SMs into k equal parts for its workers
// (WithCUDAPartitions); nil, and no error, when the driver has no green
// contexts.
func partitionSMs(a *cuda.Accel, k int) ([]cuda.SMResource, error) {
	d := a.Driver()
	all, err := d.SMs(a.Ordinal())
	if errors.Is(err, cuda.ErrNotSupported) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	parts, _, err := d.SplitSMs(all, k, max(1, all.Count()/k))
	if errors.Is(err, cuda.ErrNotSupported) {
		return nil, nil
	}
	if errors.Is(err, cuda.ErrTooFewSMs) {
		return nil, fmt.Errorf("%w: WithCUDAPartitions: %s has %d SMs, too few for %d partitions: %w", ErrBadOption, a.Name(), all.Count(), k, err)
	}
	if err != nil {
		return nil, fmt.Errorf("scheduler: partitioning the SMs of %s: %w", a.Name(), err)
	}
	return parts, nil
}

// openGPUs opens the configured GPUs as devices the scheduler owns.
func openGPUs(ctx context.Context, c cudaConfig) ([]*device, error) {
	var out []*device
	for _, o := range c.ordinals {
		a, err := c.driver.NewAccel(ctx, o)
		if err != nil {
			for _, d := range out {
				d.close()
			}
			return nil, fmt.Errorf("scheduler: opening CUDA GPU %d: %w", o, err)
		}
		out = append(out, newDevice(a))
	}
	return out, nil
}

// cudaDriver drives a CUDA worker. Its goroutine runs the worker's
// cycles; each task's CUDA implementation runs on a Context of the
// worker's own (an OS thread with the GPU's context current) and queues
// its work on one of the worker's streams, and the worker goes on to the
// next task - making its data valid on the GPU while the first runs -
// until depth tasks are in flight. A task completes when the event
// recorded after its work has: completion by events, as StarPU's
// STARPU_CUDA_PIPELINE does.
type cudaDriver struct {
	gpu   *cuda.Accel
	depth int             // tasks in flight at most (WithCUDAPipeline)
	sms   cuda.SMResource // the worker's partition (WithCUDAPartitions); none: the whole GPU
	c     *cuda.Context

	slots    []*cudaSlot // every slot
	free     []*cudaSlot
	inflight []*cudaSlot // launched, in launch order
	cur      *cudaSlot   // the slot being launched (scratch)
	// idle counts the cycles in a row that launched and completed
	// nothing: after the scheduler's spin count the worker sleeps until
	// its oldest task ends or a push wakes it (sleep).
	idle  int
	timer *time.Timer // sleep's
}

// A cudaSlot is one task in flight on a GPU worker: its stream, the
// events around its work, and the Call its implementation received.
type cudaSlot struct {
	s          *cuda.Stream
	start, end *cuda.Event
	t          *Task
	call       Call
	cc         CUDACall
	bufs       [8]*buffer
	launched   time.Time
	t0         int64 // monitor time at pop
	err        error // from the launch: the implementation's, a panic
	done       bool  // the end event completed (set by poll)
	qerr       error // what the stream reported (set by poll)
	// ended receives once the stream has passed the end event (a host
	// function queued after it); nil when the driver cannot say.
	ended <-chan error
	// scratch holds the Scratch buffers in GPU memory of the slot's
	// task, by handle: two tasks in flight never share one. They are
	// allocated, counted in the node's use and given back to the node's
	// cache when the task ends as a simulated device worker's are
	// (worker.scratchBuf).
	scratch scratchSet
}

func (d *cudaDriver) init(w *worker) error {
	var c *cuda.Context
	var err error
	if d.sms.Count() > 0 {
		c, err = d.gpu.Driver().NewGreenContext(context.Background(), d.gpu.Ordinal(), d.sms)
	} else {
		c, err = d.gpu.Driver().NewContext(context.Background(), d.gpu.Ordinal())
	}
	if err != nil {
		return err
	}
	d.c = c
	if d.depth < 1 {
		d.depth = 1
	}
	for range d.depth {
		sl := &cudaSlot{}
		sl.s, err = c.NewStream(context.Background())
		if err == nil {
			sl.start, err = c.NewEvent(context.Background(), true)
		}
		if err == nil {
			sl.end, err = c.NewEvent(context.Background(), true)
		}
		d.slots = append(d.slots, sl)
		if err != nil {
			return errors.Join(err, d.deinit(w))
		}
		d.free = append(d.free, sl)
	}
	w.drain = func() bool { return d.drain(w) }
	return nil
}

// runOnce completes the tasks whose work has finished, then launches the
// next task if a slot is free. With tasks in flight and nothing else to
// do it reports progress, so that the worker never sleeps holding tasks;
// after a spin it blocks on the oldest task's event.
func (d *cudaDriver) runOnce(w *worker) bool {
	if w.s.wd != nil {
		defer d.watch(w)
	}
	did := d.reap(w, false)
	if len(d.inflight) > 0 && w.cx.moveReq.Load() {
		// A context change waits for a safe point, a worker holding no
		// task (pop applies it).
		d.drain(w)
		did = true
	}
	if len(d.free) > 0 {
		if t := w.pop(); t != nil {
			d.launch(w, t)
			d.idle = 0
			return true
		}
	}
	if len(d.inflight) == 0 {
		return did
	}
	if did {
		d.idle = 0
		return true
	}
	if d.idle++; d.idle > w.s.cfg.spin || len(d.free) == 0 {
		d.idle = 0
		if len(d.free) == 0 || !d.sleep(w) {
			d.reap(w, true)
		}
	} else {
		runtime.Gosched()
	}
	return true
}

// watch names for the watchdog the oldest task in flight on the
// worker's streams.
func (d *cudaDriver) watch(w *worker) {
	if len(d.inflight) == 0 {
		if w.wdCl.Load() != nil {
			w.wdStart(nil, 0)
		}
		return
	}
	sl := d.inflight[0]
	if since := int64(sl.launched.Sub(w.s.epoch)); w.wdCl.Load() != sl.t.Codelet || w.wdSince.Load() != since {
		w.wdStart(sl.t.Codelet, since)
	}
}

// sleep waits, with a slot free, until the oldest task in flight ends or
// a push wakes the worker (a task for it: it launches that one first),
// as a CPU worker sleeps (worker.idle); it reports false when the oldest
// task cannot say when it ends (no host function: the driver lacks
// cuLaunchHostFunc), and the worker then blocks on its event instead.
// The host function does not run after a fault on the stream, so the
// wait also ends after a while to look at the event.
func (d *cudaDriver) sleep(w *worker) bool {
	ended := d.inflight[0].ended
	if ended == nil {
		return false
	}
	s := w.s
	w.sleeping.Store(true)
	s.nsleep.Add(1)
	// Look once more after announcing sleep: a pusher either sees the
	// flag (and wakes us) or pushed before this look.
	if t := w.pop(); t != nil {
		if w.sleeping.CompareAndSwap(true, false) {
			s.nsleep.Add(-1)
		}
		d.launch(w, t)
		return true
	}
	if d.timer == nil {
		d.timer = time.NewTimer(faultCheck)
	} else {
		d.timer.Reset(faultCheck)
	}
	select {
	case <-ended:
	case <-w.wake:
	case <-s.stop:
	case <-d.timer.C:
	}
	d.timer.Stop()
	if w.sleeping.CompareAndSwap(true, false) {
		s.nsleep.Add(-1)
	}
	return true
}

// faultCheck is how long a sleeping GPU worker waits for its oldest
// task's host function before it looks at the task's event (a stream
// that faulted runs no more host functions).
const faultCheck = 50 * time.Millisecond

// launch makes t's data valid on the GPU and runs its implementation,
// which queues the task's work on a free slot's stream between the
// slot's two events. A task whose data cannot be made ready completes at
// once with the error (or goes to a CPU worker). A task with a Redux
// access waits for the worker's tasks in flight first.
func (d *cudaDriver) launch(w *worker, t *Task) {
	s := w.s
	if t.redux && len(d.inflight) > 0 {
		// The worker's private Redux copies are one per worker: tasks in
		// flight on other streams may be adding to them.
		d.drain(w)
	}
	sl := d.free[len(d.free)-1]
	d.free = d.free[:len(d.free)-1]
	if mb := s.cx.mon.Load(); mb != nil {
		sl.t0 = s.now()
	}
	c := &sl.call
	*c = Call{Task: t, Worker: w.info.ID, Size: 1, Arg: t.Arg}
	var err error
	d.cur = sl
	c.bufs, err = w.prepare(t, sl.bufs[:0])
	d.cur = nil
	if err != nil {
		d.free = append(d.free, sl)
		if errors.Is(err, ErrDeviceMemory) && s.redirectToCPU(t) {
			w.redirected.Add(1)
			*c = Call{}
			return
		}
		*c = Call{}
		d.end(w, t, err, sl.t0)
		return
	}
	sl.t, sl.err, sl.done, sl.qerr, sl.ended = t, nil, false, nil, nil
	sl.cc = CUDACall{Call: c, Context: d.c, Stream: sl.s}
	sl.launched = time.Now()
	derr := d.c.Do(context.Background(), func() error {
		if err := sl.start.Record(context.Background(), sl.s); err != nil {
			sl.err = d.taskError(t, c, fmt.Errorf("on the GPU: %w", err))
			return nil
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					sl.err = panicError(t, c.Worker, r, "")
				}
			}()
			if e := t.Codelet.CUDA(&sl.cc); e != nil {
				sl.err = d.taskError(t, c, e)
			}
		}()
		// Recorded also after an error: the task ends once whatever it
		// queued has, so that no work of it touches its buffers later.
		if err := sl.end.Record(context.Background(), sl.s); err != nil {
			if sl.err == nil {
				sl.err = d.taskError(t, c, fmt.Errorf("on the GPU: %w", err))
			}
			_ = sl.s.Synchronize(context.Background()) // the stream is failing: its error is the task's already
			sl.done = true
			return nil
		}
		// Tells a sleeping worker (sleep) that the task ended; without
		// cuLaunchHostFunc the worker blocks on the event instead.
		sl.ended, _ = d.c.LaunchHostFunc(context.Background(), func() error { return nil }, sl.s)
		return nil
	})
	if derr != nil {
		if sl.err == nil {
			sl.err = d.taskError(t, c, derr)
		}
		sl.done = true
	}
	d.inflight = append(d.inflight, sl)
}

func (d *cudaDriver) taskError(t *Task, c *Call, err error) error {
	return &TaskError{Codelet: t.Codelet.name(), Task: t.id, Tag: t.Tag, Context: t.contextName(), Worker: c.Worker, Err: err}
}

// poll asks each task in flight whether its end event has completed, in
// one visit to the worker's Context thread; with block it first waits
// for the oldest one.
func (d *cudaDriver) poll(block bool) {
	_ = d.c.Do(context.Background(), func() error {
		for i, sl := range d.inflight {
			if sl.done {
				continue
			}
			if i == 0 && block {
				sl.qerr = sl.end.Synchronize(context.Background())
				sl.done = true
				continue
			}
			done, err := sl.end.Done(context.Background())
			sl.done, sl.qerr = done || err != nil, err
		}
		return nil
	})
}

// reap completes the tasks in flight whose work has finished (with
// block, waiting for the oldest first) and reports whether it completed
// any.
func (d *cudaDriver) reap(w *worker, block bool) bool {
	if len(d.inflight) == 0 {
		return false
	}
	d.poll(block)
	kept := d.inflight[:0]
	var ended []*cudaSlot
	for _, sl := range d.inflight {
		if sl.done {
			ended = append(ended, sl)
		} else {
			kept = append(kept, sl)
		}
	}
	if len(ended) == 0 {
		return false
	}
	clear(d.inflight[len(kept):])
	d.inflight = kept
	for _, sl := range ended {
		d.finish(w, sl)
	}
	return true
}

// drain completes every task in flight; it reports whether there were
// any. A worker drains before it waits for room on its GPU (the room may
// be its own tasks' data) and before a context change.
func (d *cudaDriver) drain(w *worker) bool {
	had := len(d.inflight) > 0
	for len(d.inflight) > 0 {
		d.reap(w, true)
	}
	return had
}

// finish completes the task of a slot whose work has ended: its data are
// released, its time recorded (the device's, between the slot's events),
// and its dependents released.
func (d *cudaDriver) finish(w *worker, sl *cudaSlot) {
	s := w.s
	t, c := sl.t, &sl.call
	err := sl.err
	if err == nil && sl.qerr != nil {
		err = d.taskError(t, c, fmt.Errorf("on the GPU: %w", sl.qerr))
	}
	end := time.Now()
	var dev time.Duration
	if sl.qerr == nil && (s.cfg.stats || t.Codelet.Model != nil) {
		var e error
		if dev, e = d.c.ElapsedTime(context.Background(), sl.start, sl.end); e != nil {
			dev = end.Sub(sl.launched)
		}
	}
	if err == nil && t.Codelet.Model != nil {
		s.models.record(t.Codelet.Model, t, w.info.Kind, float64(dev))
	}
	if s.cfg.stats {
		// The task ran on the GPU for dev, ending when its completion
		// was seen (or launched, if that is later).
		start := end.Add(-dev)
		if start.Before(sl.launched) {
			start = sl.launched
		}
		w.busyNs.Add(int64(dev))
		ev := traceEvent{
			id: t.id, name: t.Codelet.name(), start: start.Sub(s.epoch), end: end.Sub(s.epoch),
			deps: t.preds, rank: 0, size: 1,
		}
		if err != nil {
			ev.err = err.Error()
			if te, ok := err.(*TaskError); ok && te.Stack != "" {
				ev.err += "\n" + te.Stack
			}
		}
		w.events = append(w.events, ev)
	}
	if dl := s.data; dl != nil {
		dl.releaseTask(t, w.info.Node, err != nil)
	}
	w.releaseScratch(&sl.scratch) // the stream is past the task's work
	sl.t, sl.cc, sl.err, sl.qerr, sl.ended = nil, CUDACall{}, nil, nil, nil
	*c = Call{}
	clear(sl.bufs[:])
	d.free = append(d.free, sl)
	d.end(w, t, err, sl.t0)
}

// end completes t (releasing its dependents), tells the monitor how long
// it took since t0 (its pop), and recycles it.
func (d *cudaDriver) end(w *worker, t *Task, err error, t0 int64) {
	s := w.s
	// The monitor is loaded before the task completes, as execute1
	// does: one that saw it popped sees it executed even when removed
	// meanwhile (the hypervisor's Close waits for the hooks of tasks
	// that completed before it).
	mb := s.cx.mon.Load()
	w.complete(t, err, false)
	if mb != nil {
		mb.m.TaskExecuted(s.contextOf(t), t, w.info.ID, time.Duration(s.now()-t0))
	}
	w.release(t)
}

func (d *cudaDriver) deinit(w *worker) error {
	d.drain(w)
	var errs []error
	for _, sl := range d.slots {
		for _, e := range []*cuda.Event{sl.start, sl.end} {
			if e != nil {
				errs = append(errs, e.Destroy(context.Background()))
			}
		}
		if sl.s != nil {
			errs = append(errs, sl.s.Destroy(context.Background()))
		}
	}
	d.slots, d.free = nil, nil
	return errors.Join(append(errs, d.c.Close())...)
}

var _ driver = (*cudaDriver)(nil)
