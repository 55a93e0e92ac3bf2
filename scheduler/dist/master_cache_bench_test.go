package dist_test

import (
	"context"
	"testing"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// BenchmarkMasterCachedRead is a task that reads (R) one block of the
// size named and writes 64 bytes of its own, run on rank 1's proxy of
// two in-process ranks of one worker each, as a parameter sweep reads
// one input: "sent" with the worker rank's cache off
// (Master.SetCacheLimit(0)), so that the block travels with every task
// as it did before the cache; "held" with the default limit, so that it
// travels once. The codelet reads one element of the block.
//
//	go test -run '^$' -bench 'MasterCachedRead' -benchmem ./scheduler/dist/
//
// BenchmarkMPIMasterCachedRead (master_cache_mpi_test.go) is the same
// under mpirun.
func BenchmarkMasterCachedRead(b *testing.B) {
	err := local.Run(context.Background(), 2, func(ctx context.Context, c comm.Comm) error {
		return benchCachedRanks(ctx, b, c)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// benchFirst copies its input's first element into its output.
var benchFirst = &scheduler.Codelet{Name: "first", CPU: func(c *scheduler.Call) error {
	scheduler.VectorOf[float64](c, 1)[0] = scheduler.VectorOf[float64](c, 0)[0]
	return nil
}}

// benchCachedRanks runs BenchmarkMasterCachedRead's sub-benchmarks on
// c's ranks 0 (the master) and 1.
func benchCachedRanks(ctx context.Context, b *testing.B, c comm.Comm) error {
	reg, err := dist.NewRegistry(benchFirst)
	if err != nil {
		return err
	}
	sizes := masterBenchSizes(b)
	return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
		remote, err := m.Local().NewContext("rank 1", scheduler.ContextWorkers(1))
		if err != nil {
			return err
		}
		out, err := m.Local().RegisterVector(make([]float64, 8))
		if err != nil {
			return err
		}
		for _, s := range sizes {
			h, err := m.Local().RegisterVector(make([]float64, s.bytes/8))
			if err != nil {
				return err
			}
			for _, mode := range []string{"sent", "held"} {
				limit := int64(0) // nothing kept: the block goes with every task
				if mode == "held" {
					limit = max(dist.DefaultMasterCacheBytes, int64(s.bytes)) // the block fits
				}
				m.SetCacheLimit(limit)
				b.Run(mode+"/"+s.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if err := m.Submit(ctx, benchFirst, scheduler.R(h), scheduler.W(out), scheduler.InContext(remote)); err != nil {
							b.Fatal(err)
						}
						if err := m.WaitAll(ctx); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			if _, err := h.Unregister(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}
