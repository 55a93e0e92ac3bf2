package scheduler

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"time"
)

// A device is an accelerator behind a memory node: it allocates the
// node's replicas and moves data between them and RAM on its copy
// engines. Copies are asynchronous: done is called once, from any
// goroutine, when the copy has ended, with the time the copy engine
// started it (copies queue behind each other on an engine). The simulated device is the first
// implementation; the CUDA one is the second.
type device interface {
	// name is how traces and errors call the device ("sim0").
	name() string
	// alloc allocates a contiguous replica of a RAM buffer's shape.
	alloc(like *buffer) (any, error)
	// free releases an allocation.
	free(mem any)
	// view returns the buffer tasks on the device see for an allocation.
	view(mem any, like *buffer) *buffer
	// copyIn copies a RAM buffer (with its leading dimension) into mem.
	copyIn(mem any, src *buffer, done func(start time.Time, err error))
	// copyOut copies mem into a RAM buffer.
	copyOut(dst *buffer, mem any, done func(start time.Time, err error))
	// key identifies the device and its link across runs, for the saved
	// bus model ("sim-1073741824-16e9-10µs"; a GPU's UUID).
	key() string
	// close stops the copy engines once every copy has ended.
	close()
}

// SimDevice describes a simulated accelerator (WithSimDevices): a memory
// node of its own, separate from RAM, with a copy engine per direction
// throttled to Bandwidth and Latency, and one worker that runs codelets'
// CPU implementations on the device's copies of the data. It exercises
// everything a GPU does to the data - transfers, coherence, prefetch,
// eviction, write-back - on a machine without one.
type SimDevice struct {
	// Memory is the device's memory in bytes (default 1 GiB).
	Memory int64
	// Bandwidth is each copy engine's rate in bytes per second (default
	// 16e9, a PCIe 4 x16 link); negative copies at memory speed.
	Bandwidth float64
	// Latency is the fixed cost of one copy (default 10µs).
	Latency time.Duration
	// Workers is the number of workers computing from the device's
	// memory (default 1), as a GPU runs tasks on several streams at
	// once (StarPU's STARPU_NWORKER_PER_CUDA). Each is a worker of its
	// own, so scheduling contexts can split a device between them.
	Workers int
}

func (d SimDevice) withDefaults() SimDevice {
	if d.Memory == 0 {
		d.Memory = 1 << 30
	}
	if d.Bandwidth == 0 {
		d.Bandwidth = 16e9
	}
	if d.Latency == 0 {
		d.Latency = 10 * time.Microsecond
	}
	if d.Workers == 0 {
		d.Workers = 1
	}
	return d
}

// WithSimDevices adds a simulated accelerator per argument, each a
// memory node and a worker of kind SimWorker (see SimDevice). Like a
// GPU's, each device's worker takes a core: unless WithWorkers or
// PZ_NCPU sets it, the number of CPU workers is reduced by one per
// device (keeping at least one). Environment: PZ_NSIM=n adds n devices
// with the defaults, PZ_SIM_MEMORY their memory (bytes, or with a
// suffix: 64MiB, 2GiB).
func WithSimDevices(devs ...SimDevice) Option {
	return func(c *config) { c.sims = append(c.sims, devs...) }
}

// simDevice is the simulated accelerator: allocations are Go slices of
// the data's element type, copies are memmoves that take the time the
// configured link would.
type simDevice struct {
	id  int
	cfg SimDevice
	in  *copyEngine // RAM to device
	out *copyEngine // device to RAM
}

func newSimDevice(id int, cfg SimDevice) *simDevice {
	return &simDevice{id: id, cfg: cfg, in: newCopyEngine(), out: newCopyEngine()}
}

func (d *simDevice) name() string { return fmt.Sprintf("sim%d", d.id) }

func (d *simDevice) alloc(like *buffer) (any, error) {
	n := like.rows * like.cols
	return reflect.MakeSlice(like.typ, n, n).Interface(), nil
}

func (d *simDevice) free(any) {}

func (d *simDevice) view(mem any, like *buffer) *buffer {
	b := &buffer{data: mem, rows: like.rows, cols: like.cols, ld: like.cols, elemSize: like.elemSize, typ: like.typ}
	if like.cols == 1 && like.ld == 1 {
		b.ld = 1 // a vector
	}
	return b
}

func (d *simDevice) copyIn(mem any, src *buffer, done func(start time.Time, err error)) {
	d.in.submit(func() {
		copyStrided(reflect.ValueOf(mem), src.cols, reflect.ValueOf(src.data), src.ld, src.rows, src.cols)
	},
		d.cost(bufBytes(src)), done)
}

func (d *simDevice) copyOut(dst *buffer, mem any, done func(start time.Time, err error)) {
	d.out.submit(func() {
		copyStrided(reflect.ValueOf(dst.data), dst.ld, reflect.ValueOf(mem), dst.cols, dst.rows, dst.cols)
	},
		d.cost(bufBytes(dst)), done)
}

func (d *simDevice) key() string {
	return fmt.Sprintf("sim-%d-%g-%v", d.cfg.Memory, d.cfg.Bandwidth, d.cfg.Latency)
}

// cost is the time the link takes for n bytes, in nanoseconds.
func (d *simDevice) cost(n int64) float64 {
	c := float64(d.cfg.Latency)
	if d.cfg.Bandwidth > 0 {
		c += float64(n) / d.cfg.Bandwidth * 1e9
	}
	return c
}

func (d *simDevice) close() {
	d.in.close()
	d.out.close()
}

// copyStrided copies rows x cols elements between two row-major slices
// with leading dimensions dld and sld.
func copyStrided(dst reflect.Value, dld int, src reflect.Value, sld, rows, cols int) {
	if dld == cols && sld == cols {
		reflect.Copy(dst, src.Slice(0, rows*cols))
		return
	}
	for i := 0; i < rows; i++ {
		reflect.Copy(dst.Slice(i*dld, i*dld+cols), src.Slice(i*sld, i*sld+cols))
	}
}

// bufBytes is the size of a buffer's elements (without the gaps of its
// leading dimension).
func bufBytes(b *buffer) int64 { return int64(b.rows) * int64(b.cols) * int64(b.elemSize) }

// A copyEngine runs copies one at a time, in order, each taking at
// least its predicted time: a DMA engine of a simulated link.
type copyEngine struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []copyJob
	closing bool
	done    chan struct{}
}

type copyJob struct {
	run  func()
	ns   float64
	done func(start time.Time, err error)
}

func newCopyEngine() *copyEngine {
	e := &copyEngine{done: make(chan struct{})}
	e.cond = sync.NewCond(&e.mu)
	go e.loop()
	return e
}

func (e *copyEngine) submit(run func(), ns float64, done func(start time.Time, err error)) {
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		done(time.Now(), fmt.Errorf("scheduler: copy engine closed"))
		return
	}
	e.queue = append(e.queue, copyJob{run, ns, done})
	e.cond.Signal()
	e.mu.Unlock()
}

func (e *copyEngine) loop() {
	defer close(e.done)
	for {
		e.mu.Lock()
		for len(e.queue) == 0 && !e.closing {
			e.cond.Wait()
		}
		if len(e.queue) == 0 {
			e.mu.Unlock()
			return
		}
		j := e.queue[0]
		e.queue[0] = copyJob{}
		e.queue = e.queue[1:]
		e.mu.Unlock()
		start := time.Now()
		j.run()
		// The link's time: the copy ends when a real one would.
		waitUntil(start.Add(time.Duration(j.ns)))
		j.done(start, nil)
	}
}

// sleepSlack is how late time.Sleep may wake (timer slack and tick
// granularity reach a millisecond on some virtual machines).
const sleepSlack = 1500 * time.Microsecond

// waitUntil returns at t: it sleeps while the rest is long, then yields
// the processor until t, so that short simulated copies take their time
// and not the timer's.
func waitUntil(t time.Time) {
	if rest := time.Until(t); rest > 2*sleepSlack {
		time.Sleep(rest - sleepSlack)
	}
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}

// close lets the queued copies end, then stops the engine.
func (e *copyEngine) close() {
	e.mu.Lock()
	e.closing = true
	e.cond.Signal()
	e.mu.Unlock()
	<-e.done
}
