package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// A driver runs one worker's cycles, after StarPU's driver interface:
// init once on the goroutine that will drive the worker (a CUDA driver
// locks the OS thread and makes its context current there), then
// runOnce until the scheduler stops, then deinit. runOnce does one step
// of work - take a task and run it - and reports whether it found any.
// The CPU worker is the first driver; the GPU worker will be the second.
type driver interface {
	init(w *worker) error
	runOnce(w *worker) bool
	deinit(w *worker) error
}

// cpuDriver runs codelets' CPU implementations on the driving goroutine.
type cpuDriver struct{}

func (cpuDriver) init(*worker) error { return nil }

func (cpuDriver) deinit(*worker) error { return nil }

func (cpuDriver) runOnce(w *worker) bool {
	t := w.pop()
	if t == nil {
		return false
	}
	w.execute(t)
	return true
}

var _ driver = cpuDriver{}

// runWorker drives a worker the scheduler launched, on its own goroutine.
func (s *Scheduler) runWorker(w *worker, inits chan<- error) {
	defer s.wg.Done()
	if err := w.drv.init(w); err != nil {
		inits <- fmt.Errorf("scheduler: initializing worker %d (%v): %w", w.info.ID, w.info.Kind, err)
		return
	}
	inits <- nil
	w.loop()
	if err := w.drv.deinit(w); err != nil {
		s.recordDeinit(fmt.Errorf("scheduler: deinitializing worker %d (%v): %w", w.info.ID, w.info.Kind, err))
	}
}

// loop runs the worker's cycles until the scheduler stops (or w.quit
// is closed), sleeping when it finds no work.
func (w *worker) loop() {
	s := w.s
	for !s.stopping.Load() {
		if w.drv.runOnce(w) {
			continue
		}
		select {
		case <-w.quit:
			w.flushDone()
			return
		default:
		}
		w.idle()
	}
	w.flushDone()
}

// ErrDriver is returned by Scheduler.Driver for a worker the application
// cannot drive (one the scheduler runs, or one already being driven),
// and by Driver methods called out of order.
var ErrDriver = errors.New("scheduler: invalid driver use")

// A Driver runs the cycles of one worker on its caller's goroutine
// instead of one the scheduler starts - StarPU's not-launched drivers -
// for code that must stay on one OS thread, such as a graphics or CUDA
// context bound to the program's main thread. Create the scheduler with
// WithDrivenWorkers, take each driven worker's Driver, lock the calling
// goroutine to its thread (runtime.LockOSThread) if the tasks need it,
// and either call Run, which returns at Close, or call Init, RunOnce as
// often as the program's own loop allows, and Deinit.
//
// The policy gives tasks to a driven worker like to any other, so a
// driven worker must be driven until Close for every task to run. A
// Driver is used by one goroutine at a time.
type Driver struct {
	w     *worker
	state atomic.Int32 // driverNew, driverInit, driverDone
}

const (
	driverNew int32 = iota
	driverInit
	driverDone
)

// Driver returns the driver of worker id, one of the workers
// WithDrivenWorkers left to the application (the last CPU workers). It fails
// with ErrDriver for a worker the scheduler runs itself, or one whose
// Driver was already taken.
func (s *Scheduler) Driver(id int) (*Driver, error) {
	if id < 0 || id >= len(s.workers) {
		return nil, fmt.Errorf("%w: worker %d does not exist (ids are 0..%d)", ErrBadWorker, id, len(s.workers)-1)
	}
	w := s.workers[id]
	if !w.driven {
		return nil, fmt.Errorf("%w: worker %d is run by the scheduler; WithDrivenWorkers(n) leaves the last n CPU workers to the application", ErrDriver, id)
	}
	if !w.taken.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%w: the driver of worker %d was already taken", ErrDriver, id)
	}
	return &Driver{w: w}, nil
}

// Worker returns the id of the driven worker.
func (d *Driver) Worker() int { return d.w.info.ID }

// Init initializes the worker on the calling goroutine. Call it once,
// before RunOnce, on the goroutine that will drive the worker.
func (d *Driver) Init() error {
	if !d.state.CompareAndSwap(driverNew, driverInit) {
		return fmt.Errorf("%w: Init of worker %d called twice", ErrDriver, d.w.info.ID)
	}
	if err := d.w.drv.init(d.w); err != nil {
		return fmt.Errorf("scheduler: initializing worker %d (%v): %w", d.w.info.ID, d.w.info.Kind, err)
	}
	return nil
}

// RunOnce does one cycle of the worker without blocking: it takes a task
// the policy gives this worker (or joins a forming team) and runs it,
// with the dependents it releases when they would come back to it
// anyway. It reports whether it ran anything; false also once the
// scheduler is closed.
func (d *Driver) RunOnce() bool {
	w := d.w
	if d.state.Load() != driverInit || w.s.stopping.Load() {
		w.flushDone()
		return false
	}
	ran := w.drv.runOnce(w)
	// Publish the completions at once (the scheduler's own workers do it
	// in batches, and when they go idle): the application may not call
	// RunOnce again before it waits for them.
	w.flushDone()
	return ran
}

// Deinit releases the worker's resources after its last RunOnce.
func (d *Driver) Deinit() error {
	if !d.state.CompareAndSwap(driverInit, driverDone) {
		return fmt.Errorf("%w: Deinit of worker %d without Init, or twice", ErrDriver, d.w.info.ID)
	}
	d.w.flushDone()
	if err := d.w.drv.deinit(d.w); err != nil {
		return fmt.Errorf("scheduler: deinitializing worker %d (%v): %w", d.w.info.ID, d.w.info.Kind, err)
	}
	return nil
}

// Run drives the worker until the scheduler is closed or ctx ends: Init,
// cycles (sleeping, like the scheduler's own workers, while there is no
// task for it), Deinit. It returns nil at Close, ctx's error when ctx
// ended first. Call it from the goroutine (locked to the OS thread if
// need be) that must run the worker's tasks.
func (d *Driver) Run(ctx context.Context) error {
	if err := d.Init(); err != nil {
		return err
	}
	d.w.quit = ctx.Done()
	d.w.loop()
	d.w.quit = nil
	err := d.Deinit()
	if ctx.Err() != nil && !d.w.s.stopping.Load() {
		return errors.Join(fmt.Errorf("scheduler: driving worker %d: %w", d.w.info.ID, ctx.Err()), err)
	}
	return err
}
