package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/pzgo/pz/hardware/accel"
)

// The bus model: each device's copy time in each direction as latency +
// bytes × time per byte, measured once (a few copies of a small and a
// large buffer when the scheduler starts) and saved in the performance
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
// saves them. It fails if a measurement fails; an error saving the
// links, which does not change them, is returned as saveErr for Close
// to report with the performance models' (modelStore.save).
func (d *dataLayer) calibrateBus(dir, host string) (saveErr, err error) {
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
		in, out, err := measureLink(nd.dev)
		if err != nil {
			return nil, fmt.Errorf("scheduler: calibrating the bus of %s: %w", nd.dev.name(), err)
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

// measureLink times copies of 8 bytes and of 4 MiB (at most half the
// device) each way, the best of three, and fits latency + size /
// bandwidth.
func measureLink(dev *device) (in, out busLink, err error) {
	const small = 1 // float64s
	large := int(min(512<<10, dev.dev.Capacity()/16))
	if large <= small {
		large = small + 1
	}
	best := func(n int, toDevice bool) (time.Duration, error) {
		data := make([]float64, n)
		if st, ok := dev.dev.(accel.Stager); ok {
			b, release, err := st.Staging(8 * n)
			if err != nil {
				return 0, err
			}
			defer release() // after the copies, waited for below
			data = unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(b))), n)
		}
		host := &buffer{data: data, rows: n, cols: 1, ld: 1, elemSize: 8, typ: reflect.TypeOf([]float64(nil))}
		mem, err := dev.alloc(host)
		if err != nil {
			return 0, err
		}
		defer dev.free(mem)
		var fastest time.Duration
		for range 3 {
			done := make(chan error, 1)
			t0 := time.Now()
			if toDevice {
				dev.copyIn(mem, host, func(_ time.Time, err error) { done <- err })
			} else {
				dev.copyOut(host, mem, func(_ time.Time, err error) { done <- err })
			}
			if err := <-done; err != nil {
				return 0, err
			}
			if d := time.Since(t0); fastest == 0 || d < fastest {
				fastest = d
			}
		}
		return fastest, nil
	}
	fit := func(toDevice bool) (busLink, error) {
		ts, err := best(small, toDevice)
		if err != nil {
			return busLink{}, err
		}
		tl, err := best(large, toDevice)
		if err != nil {
			return busLink{}, err
		}
		per := float64(tl-ts) / float64((large-small)*8)
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
