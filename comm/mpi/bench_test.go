//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/commbench"
)

// The benchmarks run on every rank of the world. Every rank must run the
// same number of iterations, so under mpirun they need a fixed
// -test.benchtime=Nx (mpitest.sh bench passes one): with a time-based
// benchtime each rank would pick its own b.N and the collectives would not
// match.

var benchSizes = []int{8, 1 << 10, 64 << 10, 1 << 20, 16 << 20}

func fixedBenchtime() bool {
	v := flagValue("test.benchtime")
	return strings.HasSuffix(v, "x")
}

// benchColl runs op for every size, with and without the agreement step.
func benchColl(b *testing.B, setup func(c comm.Comm, bytes int) func(ctx context.Context) error) {
	if world.Size() > 1 && !fixedBenchtime() {
		b.Skip("under mpirun pass -test.benchtime=Nx so that every rank runs the same iterations")
	}
	for _, check := range []bool{true, false} {
		for _, bytes := range benchSizes {
			b.Run(fmt.Sprintf("check=%v/bytes=%d", check, bytes), func(b *testing.B) {
				ctx := context.Background()
				world.SetCheck(check)
				defer world.SetCheck(true)
				op := setup(world, bytes)
				b.SetBytes(int64(bytes))
				b.ResetTimer()
				for range b.N {
					if err := op(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func floats(bytes, rank int) []float64 {
	s := make([]float64, bytes/8)
	for i := range s {
		s[i] = float64(rank + i)
	}
	return s
}

func BenchmarkAllReduce(b *testing.B) {
	benchColl(b, func(c comm.Comm, bytes int) func(context.Context) error {
		send, recv := comm.BufOf(floats(bytes, c.Rank())), comm.BufOf(make([]float64, bytes/8))
		return func(ctx context.Context) error { return c.AllReduce(ctx, send, recv, comm.Sum) }
	})
}

func BenchmarkReduce(b *testing.B) {
	benchColl(b, func(c comm.Comm, bytes int) func(context.Context) error {
		send, recv := comm.BufOf(floats(bytes, c.Rank())), comm.BufOf(make([]float64, bytes/8))
		return func(ctx context.Context) error { return c.Reduce(ctx, send, recv, comm.Sum, 0) }
	})
}

func BenchmarkBcast(b *testing.B) {
	benchColl(b, func(c comm.Comm, bytes int) func(context.Context) error {
		buf := comm.BufOf(floats(bytes, c.Rank()))
		return func(ctx context.Context) error { return c.Bcast(ctx, buf, 0) }
	})
}

func BenchmarkAllGather(b *testing.B) {
	benchColl(b, func(c comm.Comm, bytes int) func(context.Context) error {
		send, recv := comm.BufOf(floats(bytes, c.Rank())), make([]byte, bytes*c.Size())
		alloc := func(k int) []byte { return recv[:8*k] }
		return func(ctx context.Context) error {
			_, err := c.AllGather(ctx, send, alloc)
			return err
		}
	})
}

// BenchmarkAllGatherTo is AllGather of equal blocks (MPI_Allgather, no
// exchange of counts).
func BenchmarkAllGatherTo(b *testing.B) {
	benchColl(b, func(c comm.Comm, bytes int) func(context.Context) error {
		send, recv := floats(bytes, c.Rank()), make([]float64, bytes/8*c.Size())
		return func(ctx context.Context) error { return comm.AllGatherTo(ctx, c, recv, send) }
	})
}

func BenchmarkGather(b *testing.B) {
	benchColl(b, func(c comm.Comm, bytes int) func(context.Context) error {
		send, recv := comm.BufOf(floats(bytes, c.Rank())), make([]byte, bytes*c.Size())
		alloc := func(k int) []byte { return recv[:8*k] }
		return func(ctx context.Context) error {
			_, err := c.Gather(ctx, send, 0, alloc)
			return err
		}
	})
}

func BenchmarkScatter(b *testing.B) {
	benchColl(b, func(c comm.Comm, bytes int) func(context.Context) error {
		n := c.Size()
		send, recv := comm.BufOf(floats(bytes*n, c.Rank())), make([]byte, bytes)
		counts := make([]int, n)
		for i := range counts {
			counts[i] = bytes / 8
		}
		alloc := func(k int) []byte { return recv[:8*k] }
		return func(ctx context.Context) error { return c.Scatter(ctx, send, counts, 0, alloc) }
	})
}

func BenchmarkAlltoall(b *testing.B) {
	benchColl(b, func(c comm.Comm, bytes int) func(context.Context) error {
		n := c.Size()
		send, recv := comm.BufOf(floats(bytes*n, c.Rank())), make([]byte, bytes*n)
		counts := make([]int, n)
		for i := range counts {
			counts[i] = bytes / 8
		}
		alloc := func(k int) []byte { return recv[:8*k] }
		return func(ctx context.Context) error {
			_, err := c.Alltoall(ctx, send, counts, alloc)
			return err
		}
	})
}

func BenchmarkBarrier(b *testing.B) {
	if world.Size() > 1 && !fixedBenchtime() {
		b.Skip("under mpirun pass -test.benchtime=Nx")
	}
	for _, check := range []bool{true, false} {
		b.Run(fmt.Sprintf("check=%v", check), func(b *testing.B) {
			world.SetCheck(check)
			defer world.SetCheck(true)
			for range b.N {
				if err := world.Barrier(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkP2P times the point-to-point steps of pzrun bench comm on a
// ring of the world's ranks, 8 B and 1 KiB each way: halo (Irecv, Isend,
// WaitAll), halo_persistent (StartAll, WaitAll) and sendrecv; and a
// ping-pong (Send, then Recv of the reply) between ranks 2k and 2k+1.
// Each runs with context.Background (the blocking MPI calls) and, as
// "-polled", with a context that can be canceled, as runtimeview.Run's
// (the non-blocking calls, tested until done).
func BenchmarkP2P(b *testing.B) {
	if world.Size() > 1 && !fixedBenchtime() {
		b.Skip("under mpirun pass -test.benchtime=Nx")
	}
	cancelable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, bytes := range []int{8, 1 << 10} {
		b.Run(fmt.Sprintf("pingpong/bytes=%d", bytes), func(b *testing.B) {
			pingPong(b, context.Background(), bytes)
		})
		// runtimeview.Run's context can be canceled: Send and Recv poll.
		b.Run(fmt.Sprintf("pingpong-polled/bytes=%d", bytes), func(b *testing.B) {
			pingPong(b, cancelable, bytes)
		})
	}
	for _, op := range []string{commbench.OpHalo, commbench.OpHaloPersistent, commbench.OpSendrecv} {
		for _, bytes := range []int{8, 1 << 10} {
			b.Run(fmt.Sprintf("%s/bytes=%d", op, bytes), func(b *testing.B) {
				p2pStep(b, context.Background(), op, bytes)
			})
			b.Run(fmt.Sprintf("%s-polled/bytes=%d", op, bytes), func(b *testing.B) {
				p2pStep(b, cancelable, op, bytes)
			})
		}
	}
}

// p2pStep times one of pzrun bench comm's point-to-point steps with ctx.
func p2pStep(b *testing.B, ctx context.Context, op string, bytes int) {
	run, done, err := commbench.Step(world, op, floats(bytes, world.Rank()), make([]float64, bytes/8))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(bytes))
	b.ResetTimer()
	for range b.N {
		if err := run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := done(); err != nil {
		b.Fatal(err)
	}
}

// pingPong times a round trip of bytes between ranks 2k and 2k+1 with ctx.
func pingPong(b *testing.B, ctx context.Context, bytes int) {
	me := world.Rank()
	peer := me ^ 1
	if peer >= world.Size() {
		b.Skip("no partner rank")
	}
	data := floats(bytes, me)
	b.SetBytes(int64(2 * bytes))
	b.ResetTimer()
	for range b.N {
		if me%2 == 0 {
			if err := comm.Send(ctx, world, data, peer, 1); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := comm.Recv(ctx, world, data, peer, 1); err != nil {
			b.Fatal(err)
		}
		if me%2 == 1 {
			if err := comm.Send(ctx, world, data, peer, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCommMake times Dup and Split (each followed by Free) with and
// without the agreement step, with context.Background and, as "-polled",
// with a context that can be canceled: the barrier or agreement step
// and the vote that run before MPI_Comm_dup and MPI_Comm_split.
func BenchmarkCommMake(b *testing.B) {
	if world.Size() > 1 && !fixedBenchtime() {
		b.Skip("under mpirun pass -test.benchtime=Nx")
	}
	ops := []struct {
		name string
		make func(ctx context.Context) (comm.Comm, error)
	}{
		{"Dup", func(ctx context.Context) (comm.Comm, error) { return world.Dup(ctx) }},
		{"Split", func(ctx context.Context) (comm.Comm, error) { return world.Split(ctx, 0, world.Rank()) }},
	}
	for _, op := range ops {
		for _, check := range []bool{true, false} {
			for _, polled := range []bool{false, true} {
				name := fmt.Sprintf("%s/check=%v", op.name, check)
				if polled {
					name += "-polled"
				}
				b.Run(name, func(b *testing.B) {
					ctx := context.Background()
					if polled {
						var cancel context.CancelFunc
						ctx, cancel = context.WithCancel(ctx)
						defer cancel()
					}
					world.SetCheck(check)
					defer world.SetCheck(true)
					for range b.N {
						c, err := op.make(ctx)
						if err != nil {
							b.Fatal(err)
						}
						if err := c.Free(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
