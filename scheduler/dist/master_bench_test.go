package dist_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// benchSize is a block size of BenchmarkMaster and BenchmarkMPIMaster.
type benchSize struct {
	name  string
	bytes int
}

// masterBenchSizes returns the block sizes of BenchmarkMaster and
// BenchmarkMPIMaster: 8 KiB, 1 MiB and 64 MiB, or the sizes in MiB that
// PZ_BENCH_MASTER_MIB lists ("256,2100": blocks past 2 GiB take MPI's
// large-count path).
func masterBenchSizes(b *testing.B) []benchSize {
	env := os.Getenv("PZ_BENCH_MASTER_MIB")
	if env == "" {
		return []benchSize{{"8KiB", 8 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}}
	}
	var out []benchSize
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("PZ_BENCH_MASTER_MIB=%q: %q is not a positive count of MiB", env, f)
		}
		out = append(out, benchSize{fmt.Sprintf("%dMiB", n), n << 20})
	}
	return out
}

// BenchmarkMaster is the round trip of one block in master/worker mode on
// two in-process ranks of one worker each: every task, kept on rank 1's
// proxy by a context of that worker, reads and writes one block of the
// size named (RW), so that the block goes to rank 1 and comes back; the
// codelet adds 1 to its first element. Beside each size, pingpong is a
// plain comm Send and Recv of the same block from rank 0 to rank 1 and
// back, the peer of the master's round trip on the same backend. SetBytes
// counts both directions.
//
//	go test -run '^$' -bench 'Master$' -benchmem ./scheduler/dist/
//
// BenchmarkMPIMaster (mpi_master_bench_test.go) is the same under mpirun.
func BenchmarkMaster(b *testing.B) {
	err := local.Run(context.Background(), 2, func(ctx context.Context, c comm.Comm) error {
		return benchMasterRanks(ctx, b, c)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// pingTagBench is the tag of benchMasterRanks's ping-pong.
const pingTagBench = 7

// benchMasterRanks runs the sub-benchmarks of BenchmarkMaster on c's
// ranks 0 and 1: rank 0 runs them, rank 1 answers its ping-pongs, then
// serves the master.
func benchMasterRanks(ctx context.Context, b *testing.B, c comm.Comm) error {
	if c.Rank() == 1 {
		if err := echoBench(ctx, c); err != nil {
			return err
		}
	}
	reg, err := dist.NewRegistry(benchAdd1)
	if err != nil {
		return err
	}
	sizes := masterBenchSizes(b)
	if c.Rank() == 0 {
		for _, s := range sizes {
			b.Run("pingpong/"+s.name, func(b *testing.B) { benchPingPong(ctx, b, c, s.bytes) })
		}
		// The end of the ping-pongs: rank 1 goes on to RunMaster.
		if err := comm.SendValue(ctx, c, [2]int{-1, 0}, 1, pingTagBench); err != nil {
			return err
		}
	}
	return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
		remote, err := m.Local().NewContext("rank 1", scheduler.ContextWorkers(1))
		if err != nil {
			return err
		}
		for _, s := range sizes {
			data := make([]float64, s.bytes/8)
			h, err := m.Local().RegisterVector(data)
			if err != nil {
				return err
			}
			b.Run("master/"+s.name, func(b *testing.B) {
				b.SetBytes(2 * int64(s.bytes))
				b.ReportAllocs()
				for b.Loop() {
					if err := m.Submit(ctx, benchAdd1, scheduler.RW(h), scheduler.InContext(remote)); err != nil {
						b.Fatal(err)
					}
					if err := m.WaitAll(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
			if _, err := h.Unregister(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

// benchAdd1 adds 1 to its vector's first element.
var benchAdd1 = &scheduler.Codelet{Name: "add1", CPU: func(c *scheduler.Call) error {
	scheduler.VectorOf[float64](c, 0)[0]++
	return nil
}}

// benchPingPong sends a block of n bytes to rank 1 and receives it back,
// b.N times; rank 1 answers in echoBench.
func benchPingPong(ctx context.Context, b *testing.B, c comm.Comm, n int) {
	buf := comm.Buf{Bytes: make([]byte, n), Type: comm.Uint8}
	if err := comm.SendValue(ctx, c, [2]int{b.N, n}, 1, pingTagBench); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(2 * int64(n))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := c.Send(ctx, buf, 1, pingTagBench); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Recv(ctx, buf.Type, 1, pingTagBench, func(int) ([]byte, error) { return buf.Bytes, nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// echoBench answers rank 0's ping-pongs (benchPingPong) until it sends a
// negative count.
func echoBench(ctx context.Context, c comm.Comm) error {
	for {
		req, _, err := comm.RecvValue[[2]int](ctx, c, 0, pingTagBench)
		if err != nil {
			return fmt.Errorf("echo: %w", err)
		}
		if req[0] < 0 {
			return nil
		}
		buf := comm.Buf{Bytes: make([]byte, req[1]), Type: comm.Uint8}
		for range req[0] {
			if _, err := c.Recv(ctx, buf.Type, 0, pingTagBench, func(int) ([]byte, error) { return buf.Bytes, nil }); err != nil {
				return fmt.Errorf("echo: %w", err)
			}
			if err := c.Send(ctx, buf, 0, pingTagBench); err != nil {
				return fmt.Errorf("echo: %w", err)
			}
		}
	}
}
