package accel

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SimConfig describes a simulated device.
type SimConfig struct {
	// Memory is the device's memory in bytes (default 1 GiB).
	Memory int64
	// Bandwidth is each copy engine's rate in bytes per second (default
	// 16e9, a PCIe 4 x16 link); negative copies at memory speed.
	Bandwidth float64
	// Latency is the fixed cost of one copy (default 10µs).
	Latency time.Duration
	// DeviceBandwidth is the rate of copies within the device in bytes
	// per second (default 200e9); negative copies at memory speed.
	DeviceBandwidth float64
	// Addressable makes the device an accel.Addresser of space "host":
	// its allocations are mapped outside Go's heap and a communication
	// library reaches them by address (comm.DeviceComm), as a CUDA-aware
	// MPI reaches a CUDA GPU's memory. It stands in for that route.
	Addressable bool
}

// WithDefaults fills the zero fields with the defaults.
func (c SimConfig) WithDefaults() SimConfig {
	if c.Memory == 0 {
		c.Memory = 1 << 30
	}
	if c.Bandwidth == 0 {
		c.Bandwidth = 16e9
	}
	if c.Latency == 0 {
		c.Latency = 10 * time.Microsecond
	}
	if c.DeviceBandwidth == 0 {
		c.DeviceBandwidth = 200e9
	}
	return c
}

// Sim is a simulated accelerator: allocations are host memory of its
// own, copies memmoves that take the time the configured link would.
type Sim struct {
	id  int
	cfg SimConfig
	in  *engine // host to device, and within the device
	out *engine // device to host

	Exports // accel.Sharer's names

	holders Holders // accel.Reclaimer's

	mu     sync.Mutex
	used   int64
	counts [3]int64 // copies in, out, within
	bytes  [3]int64 // their bytes
}

// Copies returns how many copies the device ran into it, out of it and
// within it.
func (d *Sim) Copies() (in, out, within int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[0], d.counts[1], d.counts[2]
}

// Moved returns how many bytes the device's copies moved into it, out of
// it and within it: the traffic its link would carry.
func (d *Sim) Moved() (in, out, within int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bytes[0], d.bytes[1], d.bytes[2]
}

// count counts a copy of n bytes: into the device (i 0), out of it (1)
// or within it (2).
func (d *Sim) count(i, n int) {
	d.mu.Lock()
	d.counts[i]++
	d.bytes[i] += int64(n)
	d.mu.Unlock()
}

var (
	_ Device    = (*Sim)(nil)
	_ HostView  = (*Sim)(nil)
	_ Sharer    = (*Sim)(nil)
	_ Addresser = (*Sim)(nil)
	_ Reclaimer = (*Sim)(nil)
)

// NewSim starts simulated device number id (named "sim<id>"). Close it
// to stop its copy engines.
func NewSim(id int, cfg SimConfig) (*Sim, error) {
	cfg = cfg.WithDefaults()
	if cfg.Memory < 0 || cfg.Latency < 0 {
		return nil, fmt.Errorf("accel: simulated device with %d bytes and latency %v (need >= 0)", cfg.Memory, cfg.Latency)
	}
	if math.IsNaN(cfg.Bandwidth) || math.IsNaN(cfg.DeviceBandwidth) {
		return nil, fmt.Errorf("accel: simulated device with bandwidth %g and device bandwidth %g bytes/s (need a number: > 0, or negative for memory speed)", cfg.Bandwidth, cfg.DeviceBandwidth)
	}
	d := &Sim{id: id, cfg: cfg, in: newEngine(), out: newEngine()}
	d.holders.Short = func(n int) int64 { return d.InUse() + int64(n) - d.cfg.Memory }
	return d, nil
}

type simMem struct {
	b      []byte
	mapped bool // b is mapped outside Go's heap (SimConfig.Addressable)
}

func (m *simMem) Bytes() int { return len(m.b) }

// Name returns "sim<id>".
func (d *Sim) Name() string { return fmt.Sprintf("sim%d", d.id) }

// Key identifies the configuration.
func (d *Sim) Key() string {
	return fmt.Sprintf("sim-%d-%g-%v", d.cfg.Memory, d.cfg.Bandwidth, d.cfg.Latency)
}

// Capacity returns the configured memory.
func (d *Sim) Capacity() int64 { return d.cfg.Memory }

// Config returns the device's configuration, defaults filled in.
func (d *Sim) Config() SimConfig { return d.cfg }

// Alloc allocates n bytes, 8-byte aligned. When they do not fit, it
// first asks the holders of the device's memory (Hold) to give back
// what they keep but do not need, waiting for them (a scheduler writes
// modified data back to host memory first), and retries.
func (d *Sim) Alloc(n int) (Mem, error) { return d.holders.Alloc(n, d.alloc) }

// Hold registers a holder of the device's memory (accel.Reclaimer).
func (d *Sim) Hold(h Holder) (alloc func(n int) (Mem, error), drop func()) {
	return d.holders.Hold(h, d.alloc)
}

// alloc allocates n bytes without asking the holders.
func (d *Sim) alloc(n int) (Mem, error) {
	if n < 0 {
		return nil, fmt.Errorf("accel: %s: allocating %d bytes", d.Name(), n)
	}
	d.mu.Lock()
	if d.used+int64(n) > d.cfg.Memory {
		used := d.used
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: %s: %d bytes asked, %d of %d in use", ErrOutOfMemory, d.Name(), n, used, d.cfg.Memory)
	}
	d.used += int64(n)
	d.mu.Unlock()
	if d.cfg.Addressable && n > 0 {
		b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			d.mu.Lock()
			d.used -= int64(n)
			d.mu.Unlock()
			return nil, fmt.Errorf("%w: %s: mapping %d bytes: %w", ErrOutOfMemory, d.Name(), n, err)
		}
		return &simMem{b: b, mapped: true}, nil
	}
	words := make([]uint64, (n+7)/8)
	var b []byte
	if n > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
	}
	return &simMem{b: b}, nil
}

// Free releases m.
func (d *Sim) Free(m Mem) {
	d.mu.Lock()
	d.used -= int64(m.Bytes())
	d.mu.Unlock()
	if sm := m.(*simMem); sm.mapped {
		_ = unix.Munmap(sm.b)
		sm.b, sm.mapped = nil, false
	}
}

// Space returns "host" for an Addressable device, else "": its memory
// is reached by address only when it was configured so.
func (d *Sim) Space() string {
	if d.cfg.Addressable {
		return "host"
	}
	return ""
}

// Address returns the address of byte off of m, which is host memory.
func (d *Sim) Address(m Mem, off int) (uintptr, error) {
	sm, ok := m.(*simMem)
	if !ok || off < 0 || off > len(sm.b) {
		return 0, fmt.Errorf("accel: %s: address of byte %d of %T", d.Name(), off, m)
	}
	if len(sm.b) == 0 {
		return 0, nil
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(sm.b))) + uintptr(off), nil
}

// InUse returns the bytes allocated now.
func (d *Sim) InUse() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// Instance names this device object ("sim0@" and a random token; see
// Exports.InstanceName).
func (d *Sim) Instance() string { return d.InstanceName(d.Name()) }

// Host returns m's bytes.
func (d *Sim) Host(m Mem) []byte { return m.(*simMem).b }

// cost is the link's time for n bytes.
func (d *Sim) cost(n int) time.Duration {
	return d.cfg.Latency + linkTime(n, d.cfg.Bandwidth, d.cfg.Latency)
}

// linkTime is the time n bytes take at bw bytes per second (0 for bw <=
// 0, memory speed), at most what can be added to base (>= 0) without
// overflow: a time.Duration converted from a float64 past its range is
// the most negative one, which made a copy on a link of 1e-300 bytes/s
// instant.
func linkTime(n int, bw float64, base time.Duration) time.Duration {
	if bw <= 0 {
		return 0
	}
	t := float64(n) / bw * 1e9
	if rest := math.MaxInt64 - base; t >= float64(rest) {
		return rest
	}
	return time.Duration(t)
}

// simBytes returns m's bytes, or nil and false for a Mem that is not a
// live allocation of a Sim.
func simBytes(m Mem) ([]byte, bool) {
	sm, ok := m.(*simMem)
	if !ok || sm == nil || sm.b == nil {
		return nil, false
	}
	return sm.b, true
}

// refuse ends a copy that cannot be made (ErrBadCopy), on a goroutine of
// its own as copies end.
func refuse(done Done, err error) {
	go done(time.Now(), err)
}

// CopyIn copies host rows into dst.
func (d *Sim) CopyIn(dst Mem, off int, src []byte, rows, width, pitch int, done Done) {
	b, ok := simBytes(dst)
	if !ok {
		refuse(done, fmt.Errorf("%w: copy into %T, not a live allocation of %s", ErrBadCopy, dst, d.Name()))
		return
	}
	if err := CheckCopy(len(b), off, len(src), rows, width, pitch); err != nil {
		refuse(done, fmt.Errorf("%s: copy in: %w", d.Name(), err))
		return
	}
	d.count(0, rows*width)
	d.in.submit(func() { copy2D(b[off:], width, src, pitch, rows, width) }, d.cost(rows*width), done)
}

// CopyOut copies rows of src to host memory.
func (d *Sim) CopyOut(dst []byte, rows, width, pitch int, src Mem, off int, done Done) {
	b, ok := simBytes(src)
	if !ok {
		refuse(done, fmt.Errorf("%w: copy from %T, not a live allocation of %s", ErrBadCopy, src, d.Name()))
		return
	}
	if err := CheckCopy(len(b), off, len(dst), rows, width, pitch); err != nil {
		refuse(done, fmt.Errorf("%s: copy out: %w", d.Name(), err))
		return
	}
	d.count(1, rows*width)
	d.out.submit(func() { copy2D(dst, pitch, b[off:], width, rows, width) }, d.cost(rows*width), done)
}

// CopyWithin copies n bytes inside the device at DeviceBandwidth.
func (d *Sim) CopyWithin(dst Mem, doff int, src Mem, soff int, n int, done Done) {
	db, dok := simBytes(dst)
	sb, sok := simBytes(src)
	switch {
	case !dok || !sok:
		refuse(done, fmt.Errorf("%w: copy within %s between %T and %T, not both live allocations", ErrBadCopy, d.Name(), dst, src))
		return
	case n < 0 || doff < 0 || soff < 0 || doff > len(db) || n > len(db)-doff || soff > len(sb) || n > len(sb)-soff:
		refuse(done, fmt.Errorf("%w: %s: %d bytes from offset %d of %d to offset %d of %d", ErrBadCopy, d.Name(), n, soff, len(sb), doff, len(db)))
		return
	}
	t := linkTime(n, d.cfg.DeviceBandwidth, 0)
	d.count(2, n)
	d.in.submit(func() { copy(db[doff:doff+n], sb[soff:soff+n]) }, t, done)
}

// Close waits for the issued copies and stops the engines. The copies
// still queued or running end at once, without the rest of their
// simulated link time: their data move as always, and whoever waits for
// them (a scheduler that gave up measuring a slow link) is not kept
// waiting for a link that no longer exists.
func (d *Sim) Close() error {
	d.in.close()
	d.out.close()
	return nil
}

// copy2D copies rows rows of width bytes between buffers whose rows
// start dpitch and spitch bytes apart.
func copy2D(dst []byte, dpitch int, src []byte, spitch, rows, width int) {
	if dpitch == width && spitch == width {
		copy(dst[:rows*width], src[:rows*width])
		return
	}
	for i := 0; i < rows; i++ {
		copy(dst[i*dpitch:i*dpitch+width], src[i*spitch:i*spitch+width])
	}
}

// An engine runs copies one at a time, in order, each taking at least
// its link time: a DMA engine of a simulated link.
type engine struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []job
	closing bool
	quit    chan struct{} // closed by close: the link times end
	done    chan struct{}
}

type job struct {
	run  func()
	d    time.Duration
	done Done
}

func newEngine() *engine {
	e := &engine{quit: make(chan struct{}), done: make(chan struct{})}
	e.cond = sync.NewCond(&e.mu)
	go e.loop()
	return e
}

func (e *engine) submit(run func(), d time.Duration, done Done) {
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		done(time.Now(), ErrClosed)
		return
	}
	e.queue = append(e.queue, job{run, d, done})
	e.cond.Signal()
	e.mu.Unlock()
}

func (e *engine) loop() {
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
		e.queue[0] = job{}
		e.queue = e.queue[1:]
		e.mu.Unlock()
		start := time.Now()
		j.run()
		waitUntil(start.Add(j.d), e.quit)
		j.done(start, nil)
	}
}

// close lets the queued copies end, without the rest of their link
// time, then stops the engine.
func (e *engine) close() {
	e.mu.Lock()
	if !e.closing {
		e.closing = true
		close(e.quit)
	}
	e.cond.Signal()
	e.mu.Unlock()
	<-e.done
}

// sleepSlack is how late time.Sleep may wake (timer slack and tick
// granularity reach a millisecond on some virtual machines).
const sleepSlack = 1500 * time.Microsecond

// waitUntil returns at t, or once quit is closed: it sleeps while the
// rest is long, then yields the processor until t, so that short
// simulated copies take their time and not the timer's.
func waitUntil(t time.Time, quit <-chan struct{}) {
	if rest := time.Until(t); rest > 2*sleepSlack {
		timer := time.NewTimer(rest - sleepSlack)
		select {
		case <-timer.C:
		case <-quit:
			timer.Stop()
			return
		}
	}
	for time.Now().Before(t) {
		select {
		case <-quit:
			return
		default:
		}
		runtime.Gosched()
	}
}
