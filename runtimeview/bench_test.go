package runtimeview_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
)

// BenchmarkRunLocal measures starting and closing n in-process ranks: the
// logger, the hardware exchange (with a given machine) and the teardown.
func BenchmarkRunLocal(b *testing.B) {
	m, err := machine()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			for b.Loop() {
				err := runtimeview.RunLocal(context.Background(), n, func(context.Context, *runtimeview.RuntimeView) error { return nil },
					runtimeview.WithMachine(m), quietLogs)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDiscover is the part of New that WithMachine skips.
func BenchmarkDiscover(b *testing.B) {
	for b.Loop() {
		if _, err := hardware.Discover(context.Background(), hardware.WithoutGPUs()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllReduce compares runtimeview.AllReduce with comm.AllReduce on
// the same communicator: the view adds a function call and nothing else.
func BenchmarkAllReduce(b *testing.B) {
	m, err := machine()
	if err != nil {
		b.Fatal(err)
	}
	for _, elems := range []int{1, 8192} { // 8 B and 64 KiB of float64
		for _, via := range []string{"runtimeview", "comm"} {
			b.Run(fmt.Sprintf("bytes=%d/%s", 8*elems, via), func(b *testing.B) {
				b.SetBytes(int64(8 * elems))
				err := runtimeview.RunLocal(context.Background(), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
					send := make([]float64, elems)
					dst := make([]float64, elems)
					if err := rt.Barrier(ctx); err != nil {
						return err
					}
					if rt.Rank() == 0 {
						b.ResetTimer()
					}
					for range b.N {
						var err error
						if via == "comm" {
							err = comm.AllReduceTo(ctx, rt.Comm(), dst, send, comm.Sum)
						} else {
							err = runtimeview.AllReduceTo(ctx, rt, dst, send, comm.Sum)
						}
						if err != nil {
							return err
						}
					}
					if rt.Rank() == 0 {
						b.StopTimer()
					}
					return nil
				}, runtimeview.WithMachine(m), quietLogs)
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkStagingBcastDevice broadcasts 64 MiB between device buffers
// of two in-process ranks, each with a simulated device on a 4 GB/s link,
// on the staging path. It reports the rate (GB/s) and its ratio to one
// device-to-host copy of the same 64 MiB measured in the same run
// (vs_copy; target >= 0.8: the chunks' copies overlap the transfer).
func BenchmarkStagingBcastDevice(b *testing.B) {
	const n = 64 << 20 / 8
	dev := accel.SimConfig{Memory: 256 << 20, Bandwidth: 4e9, Latency: 10 * time.Microsecond}
	m, err := machine()
	if err != nil {
		b.Fatal(err)
	}
	// The link's own rate, measured the same way the broadcast is.
	d, err := accel.NewSim(0, dev)
	if err != nil {
		b.Fatal(err)
	}
	mem, err := d.Alloc(n * 8)
	if err != nil {
		b.Fatal(err)
	}
	host := make([]byte, n*8)
	t0 := time.Now()
	if err := accel.Wait(func(done accel.Done) { d.CopyOut(host, 1, n*8, n*8, mem, 0, done) }); err != nil {
		b.Fatal(err)
	}
	copyRate := float64(n*8) / time.Since(t0).Seconds()
	d.Close()

	var elapsed time.Duration
	b.ResetTimer()
	err = runtimeview.RunLocal(context.Background(), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		buf, err := resourceset.Alloc[float64](rt.MyResourceSet().Devices()[0], n)
		if err != nil {
			return err
		}
		defer buf.Free()
		return timeBcasts(ctx, b, rt, buf, &elapsed)
	}, runtimeview.WithMachine(m), quietLogs, runtimeview.WithSimDevices(dev))
	if err != nil {
		b.Fatal(err)
	}
	reportRate(b, n*8, elapsed, copyRate)
}

// timeBcasts broadcasts buf from rank 0's first device b.N times, between
// barriers, adding rank 0's time in BcastDevice to elapsed.
func timeBcasts(ctx context.Context, b *testing.B, rt *runtimeview.RuntimeView, buf *resourceset.DeviceSlice[float64], elapsed *time.Duration) error {
	root := rt.ResourceSet(0).Devices()[0]
	for i := 0; i < b.N; i++ {
		if err := rt.Barrier(ctx); err != nil {
			return err
		}
		t := time.Now()
		if err := resourceset.BcastDevice(ctx, root, buf); err != nil {
			return err
		}
		if err := rt.Barrier(ctx); err != nil {
			return err
		}
		if rt.Rank() == 0 {
			*elapsed += time.Since(t)
		}
	}
	return nil
}

// reportRate reports b.N broadcasts of bytes in elapsed as GB/s and as a
// ratio to copyRate (bytes per second).
func reportRate(b *testing.B, bytes int, elapsed time.Duration, copyRate float64) {
	rate := float64(bytes) * float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate/1e9, "GB/s")
	b.ReportMetric(rate/copyRate, "vs_copy")
}

// BenchmarkSharedBcastDevice broadcasts 64 MiB between device buffers of
// two in-process ranks sharing one simulated device (copies within it at
// 50 GB/s). It reports GB/s and the ratio to one 64 MiB copy within the
// same device measured in the same run (vs_copy; target >= 0.8).
func BenchmarkSharedBcastDevice(b *testing.B) {
	const n = 64 << 20 / 8
	dev := accel.SimConfig{Memory: 256 << 20, DeviceBandwidth: 50e9}
	m, err := machine()
	if err != nil {
		b.Fatal(err)
	}
	var elapsed time.Duration
	var copyRate float64
	b.ResetTimer()
	err = runtimeview.RunLocal(context.Background(), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		d := rt.MyResourceSet().Devices()[0]
		buf, err := resourceset.Alloc[float64](d, n)
		if err != nil {
			return err
		}
		defer buf.Free()
		if rt.Rank() == 0 {
			// The device's own rate, measured the same way.
			tmp, err := resourceset.Alloc[float64](d, n)
			if err != nil {
				return err
			}
			mem := d.Accel()
			var t0 time.Time
			for range 2 { // the second: the first also faults the pages in
				t0 = time.Now()
				if err = accel.Wait(func(done accel.Done) { mem.CopyWithin(tmp.Mem(), 0, buf.Mem(), 0, n*8, done) }); err != nil {
					break
				}
			}
			copyRate = float64(n*8) / time.Since(t0).Seconds()
			tmp.Free()
			if err != nil {
				return err
			}
		}
		return timeBcasts(ctx, b, rt, buf, &elapsed)
	}, runtimeview.WithMachine(m), quietLogs, runtimeview.WithSharedSimDevices(dev))
	if err != nil {
		b.Fatal(err)
	}
	reportRate(b, n*8, elapsed, copyRate)
}
