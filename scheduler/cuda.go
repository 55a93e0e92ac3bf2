package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/hardware/cuda"
)

// A CUDAFunc is a codelet's implementation for CUDA GPU workers. It runs
// on the worker's OS thread with the GPU's context current, so it may
// call the driver (through c.Context) and libraries bound to the same
// context directly. It queues the task's work - kernels, copies within
// the device, library calls - on c.Stream and returns; the worker waits
// for the stream before the task completes. It must not synchronize the
// device or the context (cuCtxSynchronize, Context.Synchronize): other
// workers' copies and kernels run on the same GPU meanwhile. An error
// returned, or one the stream reports (a kernel that failed), fails the
// task with the driver's message.
type CUDAFunc func(c *CUDACall) error

// A CUDACall is what a CUDA implementation receives: the Call (the
// task, its buffers as seen on the GPU, where Data(i) is a
// *cuda.Buffer), the GPU's context and the worker's stream.
type CUDACall struct {
	*Call
	// Context is the GPU's primary context; its methods run inline on
	// the calling thread.
	Context *cuda.Context
	// Stream is the worker's stream: queue the task's work on it.
	Stream *cuda.Stream
}

// Ptr returns the device address of buffer i (its element (0,0);
// matrices are dense on the GPU: their leading dimension, Dims, is
// their number of columns). It panics, failing the task, if buffer i
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

// WithCUDAWorkers gives each GPU of WithCUDA k workers (default 1), each
// with a stream of its own, so that k tasks run on the GPU at once
// (StarPU's STARPU_NWORKER_PER_CUDA). They share the GPU's memory node,
// and like a simulated device's workers they can be split between
// scheduling contexts. Environment: PZ_NWORKER_PER_CUDA.
func WithCUDAWorkers(k int) Option {
	return func(c *config) { c.cuda.perGPU = k }
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
	driver   *cuda.Driver
	ordinals []int // resolved: the GPUs to open
}

// resolve reads PZ_NWORKER_PER_CUDA, and PZ_NCUDA when WithCUDA was not
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
	if c.perGPU < 1 {
		return fmt.Errorf("%w: WithCUDAWorkers(%d): need at least one worker per GPU", ErrBadOption, c.perGPU)
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

// cudaDriver drives a CUDA worker: its goroutine runs the worker's
// cycles, and each task's CUDA implementation runs on a Context of the
// worker's own (an OS thread with the GPU's context current), queueing
// work on the worker's stream, which the worker then waits for.
type cudaDriver struct {
	gpu *cuda.Accel
	c   *cuda.Context
	s   *cuda.Stream
}

func (d *cudaDriver) init(w *worker) error {
	c, err := d.gpu.Driver().NewContext(context.Background(), d.gpu.Ordinal())
	if err != nil {
		return err
	}
	s, err := c.NewStream(context.Background())
	if err != nil {
		return errors.Join(err, c.Close())
	}
	d.c, d.s = c, s
	return nil
}

func (d *cudaDriver) runOnce(w *worker) bool { return cpuDriver{}.runOnce(w) }

func (d *cudaDriver) deinit(w *worker) error {
	return errors.Join(d.s.Destroy(context.Background()), d.c.Close())
}

// call runs t's CUDA implementation on the worker's thread and waits for
// its stream; a returned error, a panic or a failure the stream reports
// becomes a *TaskError.
func (d *cudaDriver) call(t *Task, c *Call) error {
	cc := CUDACall{Call: c, Context: d.c, Stream: d.s}
	var err error
	derr := d.c.Do(context.Background(), func() error {
		defer func() {
			if r := recover(); r != nil {
				err = panicError(t, c.Worker, r, "")
			}
		}()
		if e := t.Codelet.CUDA(&cc); e != nil {
			err = &TaskError{Codelet: t.Codelet.name(), Task: t.id, Tag: t.Tag, Worker: c.Worker, Err: e}
		}
		// Wait for whatever was queued, also after an error, so that no
		// work of this task touches its buffers once it has ended.
		if e := d.s.Synchronize(context.Background()); e != nil && err == nil {
			err = &TaskError{Codelet: t.Codelet.name(), Task: t.id, Tag: t.Tag, Worker: c.Worker, Err: fmt.Errorf("on the GPU: %w", e)}
		}
		return nil
	})
	if err == nil && derr != nil {
		err = &TaskError{Codelet: t.Codelet.name(), Task: t.id, Tag: t.Tag, Worker: c.Worker, Err: derr}
	}
	return err
}

var _ driver = (*cudaDriver)(nil)
