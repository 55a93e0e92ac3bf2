package scheduler

import (
	"errors"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"github.com/pzgo/pz/hardware/accel"
)

// A device is an accelerator behind a memory node, as the data layer
// uses it: typed replicas of handles' buffers over an accel.Device's
// byte allocations and asynchronous copies. The simulated device
// (accel.Sim) is the first accel.Device; CUDA GPUs are the second.
type device struct {
	dev      accel.Device
	host     accel.HostView // non-nil when the host can address the memory
	borrowed bool           // the caller's (WithDevices): not closed here
	// own allocates for the scheduler when the device is an
	// accel.Reclaimer it holds memory of (newDataLayer): it asks the
	// device's other holders, never the scheduler itself, for room.
	own func(n int) (accel.Mem, error)
}

func newDevice(d accel.Device) *device {
	hv, _ := d.(accel.HostView)
	return &device{dev: d, host: hv}
}

// name is how traces and errors call the device ("sim0").
func (d *device) name() string { return d.dev.Name() }

// key identifies the device and its link across runs (bus.go).
func (d *device) key() string { return d.dev.Key() }

// alloc allocates a contiguous replica of a RAM buffer's shape; the
// error wraps accel.ErrOutOfMemory when the device is full.
func (d *device) alloc(like *buffer) (accel.Mem, error) {
	n := like.rows * like.cols * int(like.elemSize)
	if d.own != nil {
		return d.own(n)
	}
	return d.dev.Alloc(n)
}

func (d *device) free(m accel.Mem) { d.dev.Free(m) }

// view returns the buffer tasks on the device see for an allocation:
// a slice of the handle's element type over the device's memory (the
// simulated device's kernels run on the host).
func (d *device) view(m accel.Mem, like *buffer) *buffer {
	n := like.rows * like.cols
	b := &buffer{rows: like.rows, cols: like.cols, ld: like.cols, elemSize: like.elemSize, typ: like.typ}
	if like.cols == 1 && like.ld == 1 {
		b.ld = 1 // a vector
	}
	if d.host != nil {
		if raw := d.host.Host(m); n > 0 && len(raw) > 0 {
			b.data = reflect.SliceAt(like.typ.Elem(), unsafe.Pointer(&raw[0]), n).Interface()
		} else {
			b.data = reflect.MakeSlice(like.typ, 0, 0).Interface()
		}
	} else {
		b.data = m // device memory the host cannot address
	}
	return b
}

// hostBytes returns the bytes of a RAM buffer, from its first element
// to the end of its last row.
func hostBytes(b *buffer) []byte {
	v := reflect.ValueOf(b.data)
	if v.Len() == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(v.UnsafePointer()), v.Len()*int(b.elemSize))
}

// copyIn copies a RAM buffer (with its leading dimension) into m.
func (d *device) copyIn(m accel.Mem, src *buffer, done accel.Done) {
	es := int(src.elemSize)
	if src.rows == 0 || src.cols == 0 {
		done(time.Now(), nil)
		return
	}
	d.dev.CopyIn(m, 0, hostBytes(src), src.rows, src.cols*es, src.ld*es, done)
}

// copyOut copies m into a RAM buffer.
func (d *device) copyOut(dst *buffer, m accel.Mem, done accel.Done) {
	es := int(dst.elemSize)
	if dst.rows == 0 || dst.cols == 0 {
		done(time.Now(), nil)
		return
	}
	d.dev.CopyOut(hostBytes(dst), dst.rows, dst.cols*es, dst.ld*es, m, 0, done)
}

func (d *device) close() error {
	if d.borrowed {
		return nil
	}
	return d.dev.Close()
}

// bufBytes is the size of a buffer's elements (without the gaps of its
// leading dimension).
func bufBytes(b *buffer) int64 { return int64(b.rows) * int64(b.cols) * int64(b.elemSize) }

func isOutOfMemory(err error) bool { return errors.Is(err, accel.ErrOutOfMemory) }

// SimDevice describes a simulated accelerator (WithSimDevices): a memory
// node of its own, separate from RAM, with a copy engine per direction
// throttled to Bandwidth and Latency (accel.Sim), and workers that run
// codelets' CPU implementations on the device's copies of the data. It
// exercises everything a GPU does to the data - transfers, coherence,
// prefetch, eviction, write-back - on a machine without one.
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
	c := accel.SimConfig{Memory: d.Memory, Bandwidth: d.Bandwidth, Latency: d.Latency}.WithDefaults()
	d.Memory, d.Bandwidth, d.Latency = c.Memory, c.Bandwidth, c.Latency
	if d.Workers == 0 {
		d.Workers = 1
	}
	return d
}

// WithSimDevices adds a simulated accelerator per argument, each a
// memory node with its workers of kind SimWorker (see SimDevice). Like
// a GPU's, each device takes a core: unless WithWorkers or PZ_NCPU sets
// it, the number of CPU workers is reduced by one per device (keeping at
// least one). Environment: PZ_NSIM=n adds n devices with the defaults,
// PZ_SIM_MEMORY their memory (bytes, or with a suffix: 64MiB, 2GiB).
func WithSimDevices(devs ...SimDevice) Option {
	return func(c *config) { c.sims = append(c.sims, devs...) }
}

// WithDevices makes memory nodes of devices the caller opened and closes
// (the RuntimeView's, which its resource set shares): the scheduler
// allocates on them beside other users, making room by eviction when a
// device reports it is full; on a device that is an accel.Reclaimer it
// registers as a holder, and gives its cached allocations and the
// replicas no task uses back to another user that runs short: clean ones
// at once, modified ones after a write-back to RAM when that user may
// wait for it (the device's Alloc, as resourceset.Alloc calls it; not
// another holder's allocation). Devices whose memory the host can address
// (accel.HostView: the simulated device) get one SimWorker worker each;
// CUDA GPUs (cuda.Accel) get CUDAWorker workers as WithCUDA's do
// (WithCUDAWorkers, WithCUDAPipeline, WithCUDAPartitions and their
// environment variables apply). It replaces PZ_NSIM.
func WithDevices(devs ...accel.Device) Option {
	return func(c *config) { c.devices = append(c.devices, devs...) }
}

// newSimDevices starts the configured simulated devices.
func newSimDevices(sims []SimDevice) ([]*device, error) {
	var out []*device
	for i, sd := range sims {
		d, err := accel.NewSim(i, accel.SimConfig{Memory: sd.Memory, Bandwidth: sd.Bandwidth, Latency: sd.Latency})
		if err != nil {
			for _, o := range out {
				o.close()
			}
			return nil, fmt.Errorf("scheduler: %w", err)
		}
		out = append(out, newDevice(d))
	}
	return out, nil
}
