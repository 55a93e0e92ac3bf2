package runtimeview_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
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
