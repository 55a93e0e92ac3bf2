package local_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/commbench"
	"github.com/pzgo/pz/comm/local"
)

var benchSizes = []int{8, 1 << 10, 64 << 10, 1 << 20, 16 << 20}

// benchRanks runs op b.N times on each of n ranks; rank 0 runs on the
// benchmark goroutine. setup builds each rank's buffers outside the timer
// and returns the operation.
func benchRanks(b *testing.B, n int, setup func(c comm.Comm) func(ctx context.Context) error) {
	comms, err := local.New(n)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ops := make([]func(context.Context) error, n)
	for r := range n {
		ops[r] = setup(comms[r])
	}
	iters := b.N
	errs := make([]error, n)
	var wg sync.WaitGroup
	b.ResetTimer()
	for r := 1; r < n; r++ {
		wg.Go(func() {
			for range iters {
				if err := ops[r](ctx); err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	for range iters {
		if err := ops[0](ctx); err != nil {
			errs[0] = err
			break
		}
	}
	wg.Wait()
	b.StopTimer()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// forSizes runs body for ranks 2 and 4 and every size in bytes.
func forSizes(b *testing.B, body func(b *testing.B, n, size int)) {
	for _, n := range []int{2, 4} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("ranks=%d/%s", n, sizeName(size)), func(b *testing.B) {
				b.SetBytes(int64(size))
				body(b, n, size)
			})
		}
	}
}

func fixed(size int) func(int) []byte {
	return func(int) []byte { return make([]byte, size) }
}

// buf returns n bytes, written once so that page faults happen before the
// timer starts.
func buf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// floats returns n float64s, written once (see buf).
func floats(n int) []float64 {
	f := make([]float64, n)
	for i := range f {
		f[i] = float64(i % 7)
	}
	return f
}

func BenchmarkAllReduce(b *testing.B) {
	forSizes(b, func(b *testing.B, n, size int) {
		benchRanks(b, n, func(c comm.Comm) func(context.Context) error {
			send, recv := floats(size/8), floats(size/8)
			return func(ctx context.Context) error { return comm.AllReduceTo(ctx, c, recv, send, comm.Sum) }
		})
	})
}

func BenchmarkReduce(b *testing.B) {
	forSizes(b, func(b *testing.B, n, size int) {
		benchRanks(b, n, func(c comm.Comm) func(context.Context) error {
			send, recv := comm.BufOf(floats(size/8)), comm.BufOf(floats(size/8))
			return func(ctx context.Context) error { return c.Reduce(ctx, send, recv, comm.Sum, 0) }
		})
	})
}

func BenchmarkBcast(b *testing.B) {
	forSizes(b, func(b *testing.B, n, size int) {
		benchRanks(b, n, func(c comm.Comm) func(context.Context) error {
			data := buf(size)
			return func(ctx context.Context) error { return comm.Bcast(ctx, c, data, 0) }
		})
	})
}

// size is each rank's contribution.
func BenchmarkAllGather(b *testing.B) {
	forSizes(b, func(b *testing.B, n, size int) {
		benchRanks(b, n, func(c comm.Comm) func(context.Context) error {
			send := comm.Buf{Bytes: buf(size), Type: comm.Uint8}
			out := buf(size * n)
			alloc := func(int) []byte { return out }
			return func(ctx context.Context) error { _, err := c.AllGather(ctx, send, alloc); return err }
		})
	})
}

// size is each rank's contribution.
func BenchmarkGather(b *testing.B) {
	forSizes(b, func(b *testing.B, n, size int) {
		benchRanks(b, n, func(c comm.Comm) func(context.Context) error {
			send := comm.Buf{Bytes: buf(size), Type: comm.Uint8}
			alloc := fixed(0)
			if c.Rank() == 0 {
				out := buf(size * n)
				alloc = func(int) []byte { return out }
			}
			return func(ctx context.Context) error { _, err := c.Gather(ctx, send, 0, alloc); return err }
		})
	})
}

// size is each rank's part.
func BenchmarkScatter(b *testing.B) {
	forSizes(b, func(b *testing.B, n, size int) {
		benchRanks(b, n, func(c comm.Comm) func(context.Context) error {
			send := comm.Buf{Type: comm.Uint8}
			var counts []int
			if c.Rank() == 0 {
				send.Bytes = buf(size * n)
				for range n {
					counts = append(counts, size)
				}
			}
			out := buf(size)
			alloc := func(int) []byte { return out }
			return func(ctx context.Context) error { return c.Scatter(ctx, send, counts, 0, alloc) }
		})
	})
}

// size is what each rank sends in all (size/n to each peer).
func BenchmarkAlltoall(b *testing.B) {
	forSizes(b, func(b *testing.B, n, size int) {
		benchRanks(b, n, func(c comm.Comm) func(context.Context) error {
			per := size / n
			send := comm.Buf{Bytes: buf(per * n), Type: comm.Uint8}
			counts := make([]int, n)
			for i := range counts {
				counts[i] = per
			}
			out := buf(per * n)
			alloc := func(int) []byte { return out }
			return func(ctx context.Context) error { _, err := c.Alltoall(ctx, send, counts, alloc); return err }
		})
	})
}

func BenchmarkBarrier(b *testing.B) {
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			benchRanks(b, n, func(c comm.Comm) func(context.Context) error { return c.Barrier })
		})
	}
}

// BenchmarkPingPong is one round trip between ranks 0 and 1 (others idle);
// ns/op is the round trip.
func BenchmarkPingPong(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			b.SetBytes(int64(2 * size))
			benchRanks(b, 2, func(c comm.Comm) func(context.Context) error {
				data := buf(size)
				peer := 1 - c.Rank()
				return func(ctx context.Context) error {
					if c.Rank() == 0 {
						if err := comm.Send(ctx, c, data, peer, 0); err != nil {
							return err
						}
						_, err := comm.Recv(ctx, c, data, peer, 0)
						return err
					}
					if _, err := comm.Recv(ctx, c, data, peer, 0); err != nil {
						return err
					}
					return comm.Send(ctx, c, data, peer, 0)
				}
			})
		})
	}
}

// BenchmarkIallreduceOverlap times one step of "reduce a vector, and do
// independent work" on 2 ranks: blocking (AllReduce, then the work) against
// overlapped (Iallreduce, the work, Wait). In-process ranks reduce with
// their cores, so the reduction can hide behind the work only where cores
// are left over (GOMAXPROCS above the rank count): there overlapped
// approaches the larger of the two instead of their sum. The reported
// overlap-% is the share of the reduction hidden behind the work.
func BenchmarkIallreduceOverlap(b *testing.B) {
	const n = 2
	const count = 1 << 17 // 1 MiB of float64
	// About as long as the reduction on this machine.
	work := func(v []float64) float64 {
		s := 0.0
		for i, x := range v[:count/4] {
			s += x * float64(i&7)
		}
		return s
	}
	var results [3]float64 // reduce only, work only, sequential: ns/op
	for k, mode := range []string{"reduce", "work", "blocking", "overlapped"} {
		b.Run(mode, func(b *testing.B) {
			benchRanks(b, n, func(c comm.Comm) func(ctx context.Context) error {
				send, recv := make([]float64, count), make([]float64, count)
				scratch := make([]float64, count)
				for i := range send {
					send[i], scratch[i] = float64(i), float64(i%13)
				}
				sink := 0.0
				return func(ctx context.Context) error {
					switch mode {
					case "reduce":
						return c.AllReduce(ctx, comm.BufOf(send), comm.BufOf(recv), comm.Sum)
					case "work":
						sink += work(scratch)
						return nil
					case "blocking":
						if err := c.AllReduce(ctx, comm.BufOf(send), comm.BufOf(recv), comm.Sum); err != nil {
							return err
						}
						sink += work(scratch)
						return nil
					}
					req, err := c.Iallreduce(comm.BufOf(send), comm.BufOf(recv), comm.Sum)
					if err != nil {
						return err
					}
					sink += work(scratch)
					_, err = req.Wait(ctx)
					return err
				}
			})
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if k < 3 {
				results[k] = ns
				return
			}
			// Hidden share of the reduction: (reduce+work - overlapped) / reduce.
			if results[0] > 0 {
				b.ReportMetric(100*(results[0]+results[1]-ns)/results[0], "overlap-%")
			}
		})
	}
}

// BenchmarkRankScaling is an 8-byte AllReduce, Bcast and Barrier over 2 to
// 1,024 in-process ranks. ns/rank is the time of one collective divided by
// the rank count: with more ranks than cores it is what each rank costs,
// and it should stay flat as the rank count grows.
func BenchmarkRankScaling(b *testing.B) {
	for _, op := range []string{"allreduce", "bcast", "barrier"} {
		for _, n := range []int{2, 4, 8, 16, 64, 256, 1024} {
			b.Run(fmt.Sprintf("%s/ranks=%d", op, n), func(b *testing.B) {
				benchRanks(b, n, func(c comm.Comm) func(context.Context) error {
					send, recv := floats(1), floats(1)
					switch op {
					case "allreduce":
						return func(ctx context.Context) error { return comm.AllReduceTo(ctx, c, recv, send, comm.Sum) }
					case "bcast":
						return func(ctx context.Context) error { return comm.Bcast(ctx, c, recv, 0) }
					}
					return c.Barrier
				})
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/rank")
			})
		}
	}
}

// BenchmarkHalo is a ring exchange of 8 bytes each way per iteration on 2
// ranks, as pzrun bench comm's halo and halo_persistent (commbench.Step):
// Irecv, Isend and WaitAll, or the same with persistent requests set up
// once.
func BenchmarkHalo(b *testing.B) {
	for _, op := range []string{commbench.OpHalo, commbench.OpHaloPersistent} {
		b.Run(op, func(b *testing.B) {
			dones := make([]func() error, 2)
			benchRanks(b, 2, func(c comm.Comm) func(context.Context) error {
				run, done, err := commbench.Step(c, op, floats(1), floats(2))
				if err != nil {
					b.Fatal(err)
				}
				dones[c.Rank()] = done
				return run
			})
			for _, done := range dones {
				if err := done(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLineExchange is the floor of any in-process collective on two
// ranks: two goroutines each publish a sequence number in a cache line of
// their own and wait until the other's reaches it, nothing else: one line
// moves each way per round. The small collectives' figures
// (BenchmarkAllReduce/ranks=2/8B) are measured against it.
func BenchmarkLineExchange(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("two goroutines that poll each other need two Ps")
	}
	type line struct {
		seq atomic.Uint64
		_   [56]byte
	}
	var l [2]line
	var wg sync.WaitGroup
	n := uint64(b.N)
	b.ResetTimer()
	for r := range 2 {
		wg.Go(func() {
			me, peer := &l[r], &l[1-r]
			for k := uint64(1); k <= n; k++ {
				me.seq.Store(k)
				for peer.seq.Load() < k {
				}
			}
		})
	}
	wg.Wait()
}
