package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/pzgo/pz/hardware/accel"
)

// The bus model: each device's copy time in each direction as latency +
// bytes × time per byte, measured once (a few copies of a small and a
// large buffer when the scheduler starts, within New's context and a
// bounded time on a slow link) and saved in the performance
// model directory, as StarPU calibrates its bus. dmda's transfer costs
// come from it. A device that lends page-locked host buffers (a CUDA
// GPU, accel.Stager) is measured from them, as StarPU measures pinned
// transfers: the data the GPUs use should be pinned (PinHost).

// A busLink is one direction of a device's link.
type busLink struct {
	LatencyNs float64 `json:"latency_ns"`
	NsPerByte float64 `json:"ns_per_byte"`
}

func (l busLink) cost(n int64) float64 { return l.LatencyNs + float64(n)*l.NsPerByte }

// busFile is the saved form of one device's links.
type busFile struct {
	Device string  `json:"device"`
	Host   string  `json:"host"`
	In     busLink `json:"in"`  // RAM to device
	Out    busLink `json:"out"` // device to RAM
	// Pinned: measured from page-locked host memory.
	Pinned bool `json:"pinned,omitempty"`
}

// BusLink describes the measured link between RAM and a device in one
// direction.
type BusLink struct {
	From, To MemoryNode
	// Latency is the fixed cost of one copy.
	Latency time.Duration
	// Bandwidth is in bytes per second.
	Bandwidth float64
}

// Bus returns the measured links between RAM and each device, both
// directions; empty without devices.
func (s *Scheduler) Bus() []BusLink {
	if s.data == nil {
		return nil
	}
	var out []BusLink
	for _, nd := range s.data.nodes[1:] {
		for _, l := range []struct {
			from, to MemoryNode
			m        busLink
		}{{RAM, nd.id, nd.in}, {nd.id, RAM, nd.out}} {
			bw := 0.0
			if l.m.NsPerByte > 0 {
				bw = 1e9 / l.m.NsPerByte
			}
			out = append(out, BusLink{From: l.from, To: l.to, Latency: time.Duration(l.m.LatencyNs), Bandwidth: bw})
		}
	}
	return out
}

// calibrateBus loads each device's links from dir, or measures and
// saves them. It fails if a measurement fails, or ctx ends during one
// (measureLink); an error saving the links, which does not change them,
// is returned as saveErr for Close to report with the performance
// models' (modelStore.save).
func (d *dataLayer) calibrateBus(ctx context.Context, dir, host string) (saveErr, err error) {
	var saveErrs []error
	for _, nd := range d.nodes[1:] {
		path := ""
		if dir != "" {
			path = filepath.Join(dir, "bus."+fileSafe(nd.dev.key())+"."+host+".json")
			if b, err := os.ReadFile(path); err == nil {
				var f busFile
				if json.Unmarshal(b, &f) == nil && f.Device == nd.dev.key() && f.In.NsPerByte > 0 && f.Out.NsPerByte > 0 && f.Pinned == pinnedBus(nd.dev) {
					nd.in, nd.out = f.In, f.Out
					continue
				}
			}
		}
		in, out, err := measureLink(ctx, nd.dev)
		if err != nil {
			return nil, fmt.Errorf("scheduler: calibrating the bus: measuring the link between RAM and %s: %w", nd.dev.name(), err)
		}
		nd.in, nd.out = in, out
		if path != "" {
			if err := writeFileAtomic(path, busFile{Device: nd.dev.key(), Host: host, In: in, Out: out, Pinned: pinnedBus(nd.dev)}); err != nil {
				saveErrs = append(saveErrs, fmt.Errorf("scheduler: saving the bus model of %s to %s: %w", nd.dev.name(), path, err))
			}
		}
	}
	return errors.Join(saveErrs...), nil
}

// The link measurement's sizes and time budget. A fast link (a GPU's)
// is measured with linkLarge bytes; a slow one with what a probe of
// linkProbe bytes says it copies in about linkTarget, and its repeats
// stop once a direction has taken linkBudget, so that calibrating a
// slow link costs a fraction of a second, not many seconds (a 4 MiB copy
// at 1 MB/s takes 4 s). The link's latency and the probe are not
// bounded (a 64 KiB probe takes 65 ms at 1 MB/s, an hour at 16 B/s: pzrun
// refuses simulated links below 1 MB/s); ctx is.
const (
	linkSmall  = 8        // bytes: one float64, the latency
	linkProbe  = 64 << 10 // bytes
	linkLarge  = 4 << 20  // bytes, at most
	linkTarget = 20 * time.Millisecond
	linkBudget = 100 * time.Millisecond
	linkRepeat = 3 // copies of each size, the best taken
)

// measureLink times copies of 8 bytes and of a large buffer (4 MiB on a
// fast link, less on a slow one, at most half the device) each way, the
// best of three (fewer on a slow link), and fits latency + size /
// bandwidth.
//
// When ctx ends it returns ctx's error at once; the copy then in flight,
// which no device can cancel, frees its buffers when it ends, and a
// device that the scheduler closes next ends it then (accel.Sim's Close
// cuts its simulated time short).
func measureLink(ctx context.Context, dev *device) (in, out busLink, err error) {
	maxLarge := int(min(linkLarge/8, dev.dev.Capacity()/16)) // float64s
	maxLarge = max(maxLarge, linkSmall/8+1)
	fit := func(toDevice bool) (busLink, error) {
		t0 := time.Now()
		ts, err := timeCopies(ctx, dev, linkSmall/8, toDevice, t0)
		if err != nil {
			return busLink{}, err
		}
		// The large size: what the link copies in about linkTarget,
		// from a probe, between the probe's size and maxLarge.
		large := min(linkProbe/8, maxLarge)
		tp, err := timeCopy(ctx, dev, large, toDevice)
		if err != nil {
			return busLink{}, err
		}
		tl := tp
		if per := float64(tp-ts) / float64((large-linkSmall/8)*8); per > 0 {
			if n := int(float64(linkTarget) / per / 8); n > large {
				large = min(n, maxLarge)
				if tl, err = timeCopies(ctx, dev, large, toDevice, t0); err != nil {
					return busLink{}, err
				}
			}
		} else {
			large = min(linkLarge/8, maxLarge) // faster than the clock sees
			if tl, err = timeCopies(ctx, dev, large, toDevice, t0); err != nil {
				return busLink{}, err
			}
		}
		per := float64(tl-ts) / float64((large-linkSmall/8)*8)
		if per <= 0 {
			per = float64(tl) / float64(large*8)
		}
		return busLink{LatencyNs: float64(ts), NsPerByte: per}, nil
	}
	if in, err = fit(true); err != nil {
		return
	}
	out, err = fit(false)
	return
}

// timeCopies returns the fastest of up to linkRepeat copies of n
// float64s, fewer once linkBudget has passed since t0.
func timeCopies(ctx context.Context, dev *device, n int, toDevice bool, t0 time.Time) (time.Duration, error) {
	var fastest time.Duration
	for i := 0; i < linkRepeat && (i == 0 || time.Since(t0) < linkBudget); i++ {
		d, err := timeCopy(ctx, dev, n, toDevice)
		if err != nil {
			return 0, err
		}
		if fastest == 0 || d < fastest {
			fastest = d
		}
	}
	return fastest, nil
}

// timeCopy times one copy of n float64s between host memory (the
// device's page-locked staging memory if it lends some) and a fresh
// allocation on the device. If ctx ends first it returns ctx's error at
// once and leaves the allocation and the staging buffer to the copy's
// end to give back.
func timeCopy(ctx context.Context, dev *device, n int, toDevice bool) (time.Duration, error) {
	dir := "to"
	if !toDevice {
		dir = "from"
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("copying %d bytes %s the device: %w", 8*n, dir, err)
	}
	data := make([]float64, n)
	release := func() {}
	if st, ok := dev.dev.(accel.Stager); ok {
		b, rel, err := st.Staging(8 * n)
		if err != nil {
			return 0, err
		}
		release = rel
		data = unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(b))), n)
	}
	host := &buffer{data: data, rows: n, cols: 1, ld: 1, elemSize: 8, typ: reflect.TypeOf([]float64(nil))}
	mem, err := dev.alloc(host)
	if err != nil {
		release()
		return 0, err
	}
	cleanup := func() {
		dev.free(mem)
		release()
	}
	// The copy's end hands its result over, or, once the measurement
	// gave up on it (abandoned), cleans up after it.
	var (
		mu        sync.Mutex
		abandoned bool
		ended     = make(chan error, 1)
	)
	done := func(_ time.Time, err error) {
		mu.Lock()
		if abandoned {
			mu.Unlock()
			cleanup()
			return
		}
		ended <- err
		mu.Unlock()
	}
	t0 := time.Now()
	if toDevice {
		dev.copyIn(mem, host, done)
	} else {
		dev.copyOut(host, mem, done)
	}
	select {
	case err := <-ended:
		d := time.Since(t0)
		cleanup()
		if err != nil {
			return 0, fmt.Errorf("copying %d bytes %s the device: %w", 8*n, dir, err)
		}
		return d, nil
	case <-ctx.Done():
		mu.Lock()
		select {
		case <-ended:
			cleanup() // it ended meanwhile
		default:
			abandoned = true
		}
		mu.Unlock()
		return 0, fmt.Errorf("copying %d bytes %s the device: %w", 8*n, dir, ctx.Err())
	}
}

// pinnedBus reports whether the device's link is measured from
// page-locked host memory.
func pinnedBus(dev *device) bool {
	_, ok := dev.dev.(accel.Stager)
	return ok
}

// fileSafe returns s as part of a file name (the performance models'
// and the bus model's): ASCII letters, digits, '.', '-' and '_' stay,
// every other byte becomes %XX, its value in hex ('/' is %2F, '%' itself
// %25). Two strings never give one name, and a name of those characters
// only is its own file name, as before the escaping.
func fileSafe(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// legacyFileSafe is the file name an earlier pz gave s, every byte but
// those fileSafe keeps replaced by '_': several names shared a file.
// Only load's error message uses it, to recognize such a file.
func legacyFileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}
