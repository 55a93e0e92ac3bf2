package cuda_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// These tests run NCCL's stand-in (internal/fakecuda), one rank per
// device of the instance, each rank a goroutine with a Context of its
// own, as ranks of one process use NCCL.

// ncclTestTimeout bounds the stand-in's waits for other ranks, so that a
// bug fails a test instead of hanging it for NCCL's minute.
const ncclTestTimeout = 20 * time.Second

// ncclWorld is an instance with one rank per device: a Context, a
// non-blocking stream and the rank's part of one communicator.
type ncclWorld struct {
	ctx   context.Context
	lib   string
	d     *cuda.Driver
	nccl  *cuda.NCCL
	ranks []*ncclRank
}

type ncclRank struct {
	rank int
	c    *cuda.Context
	s    *cuda.Stream
	comm *cuda.NCCLComm
}

// newNCCLWorld opens an instance of n devices and the Contexts and
// streams of its ranks, without a communicator.
func newNCCLWorld(t *testing.T, n int) *ncclWorld {
	t.Helper()
	if _, set := os.LookupEnv(fakecuda.EnvNCCLTimeout); !set {
		fakecuda.SetNCCLTimeout(t, ncclTestTimeout)
	}
	d, lib := fakecuda.Open(t, n, 16<<20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	nc, err := cuda.OpenNCCL(lib)
	require.NoError(t, err)
	w := &ncclWorld{ctx: ctx, lib: lib, d: d, nccl: nc}
	for r := range n {
		c, err := d.NewContext(ctx, r)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, c.Close()) })
		s, err := c.NewStream(ctx)
		require.NoError(t, err)
		w.ranks = append(w.ranks, &ncclRank{rank: r, c: c, s: s})
	}
	return w
}

// join forms one communicator of all ranks, closed at the end of the test.
func (w *ncclWorld) join(t *testing.T) {
	t.Helper()
	id, err := w.nccl.UniqueID()
	require.NoError(t, err)
	requireRanks(t, w.each(func(rk *ncclRank) error {
		var err error
		rk.comm, err = w.nccl.NewComm(w.ctx, rk.c, len(w.ranks), rk.rank, id)
		return err
	}))
	t.Cleanup(func() {
		for _, rk := range w.ranks {
			assert.NoError(t, rk.comm.Close())
		}
	})
	for _, rk := range w.ranks {
		require.Equal(t, rk.rank, rk.comm.Rank())
		require.Equal(t, len(w.ranks), rk.comm.Size())
		require.Same(t, rk.c, rk.comm.Context())
	}
}

// newNCCLRanks is an instance of n devices whose ranks form a communicator.
func newNCCLRanks(t *testing.T, n int) *ncclWorld {
	t.Helper()
	w := newNCCLWorld(t, n)
	w.join(t)
	return w
}

// each runs fn for every rank at once, as the ranks' goroutines, and
// returns their errors by rank.
func (w *ncclWorld) each(fn func(rk *ncclRank) error) []error {
	errs := make([]error, len(w.ranks))
	var wg sync.WaitGroup
	for i, rk := range w.ranks {
		wg.Go(func() { errs[i] = fn(rk) })
	}
	wg.Wait()
	return errs
}

func requireRanks(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// put copies x into a fresh allocation of rk's device.
func put[T cuda.Number](ctx context.Context, rk *ncclRank, x []T) (cuda.DevicePtr, error) {
	p, err := rk.c.Alloc(ctx, max(len(x), 1)*int(unsafe.Sizeof(x[0])))
	if err != nil {
		return 0, err
	}
	return p, rk.c.CopyHtoD(ctx, p, cuda.Bytes(x))
}

// get copies n elements at p back, once rk's stream is done.
func get[T cuda.Number](ctx context.Context, rk *ncclRank, p cuda.DevicePtr, n int) ([]T, error) {
	if err := rk.comm.Synchronize(ctx, rk.s); err != nil {
		return nil, err
	}
	x := make([]T, n)
	return x, rk.c.CopyDtoH(ctx, cuda.Bytes(x), p)
}

// same compares got with want element by element.
func same[T comparable](what string, got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}

// checkAllReduce runs AllReduce of n elements, rank r's i-th being
// value(r, i), and checks every rank's result against want of the
// ranks' values, element by element.
func checkAllReduce[T cuda.Number](t *testing.T, w *ncclWorld, op cuda.NCCLOp, inPlace bool, value func(r, i int) T, want func(x []T) T) {
	t.Helper()
	const n = 1000
	dt, ok := cuda.NCCLTypeOf[T]()
	require.True(t, ok)
	expected := make([]T, n)
	for i := range expected {
		x := make([]T, len(w.ranks))
		for r := range x {
			x[r] = value(r, i)
		}
		expected[i] = want(x)
	}
	requireRanks(t, w.each(func(rk *ncclRank) error {
		x := make([]T, n)
		for i := range x {
			x[i] = value(rk.rank, i)
		}
		send, err := put(w.ctx, rk, x)
		if err != nil {
			return err
		}
		recv := send
		if !inPlace {
			if recv, err = rk.c.Alloc(w.ctx, n*int(unsafe.Sizeof(x[0]))); err != nil {
				return err
			}
		}
		if err := rk.comm.AllReduce(w.ctx, send, recv, n, dt, op, rk.s); err != nil {
			return err
		}
		got, err := get[T](w.ctx, rk, recv, n)
		if err != nil {
			return err
		}
		return same("recv", got, expected)
	}))
}

func sum[T cuda.Number](x []T) T {
	var s T
	for _, v := range x {
		s += v
	}
	return s
}

func TestNCCLAllReduce(t *testing.T) {
	w := newNCCLRanks(t, 3)
	require.Equal(t, 22304, w.nccl.Version(), "the stand-in is NCCL 2.23.4")
	require.Equal(t, w.lib, w.nccl.Library())
	t.Run("sum float64", func(t *testing.T) {
		checkAllReduce(t, w, cuda.NCCLSum, false, func(r, i int) float64 { return float64(r*1000+i) * 0.5 }, sum[float64])
	})
	t.Run("max int32 in place", func(t *testing.T) {
		checkAllReduce(t, w, cuda.NCCLMax, true, func(r, i int) int32 { return int32((i*7919+r*104729)%2001 - 1000) },
			func(x []int32) int32 { return max(x[0], x[1], x[2]) })
	})
	t.Run("min uint8", func(t *testing.T) {
		checkAllReduce(t, w, cuda.NCCLMin, false, func(r, i int) uint8 { return uint8(i*31 + r*17) },
			func(x []uint8) uint8 { return min(x[0], x[1], x[2]) })
	})
	t.Run("prod int64 in place", func(t *testing.T) {
		checkAllReduce(t, w, cuda.NCCLProd, true, func(r, i int) int64 { return int64((i+r)%7 - 3) },
			func(x []int64) int64 { return x[0] * x[1] * x[2] })
	})
	t.Run("sum uint64 wraps", func(t *testing.T) {
		checkAllReduce(t, w, cuda.NCCLSum, false, func(r, i int) uint64 { return math.MaxUint64 - uint64(i+r) }, sum[uint64])
	})
	t.Run("sum float32", func(t *testing.T) {
		checkAllReduce(t, w, cuda.NCCLSum, false, func(r, i int) float32 { return float32(i - r) }, sum[float32])
	})
	t.Run("avg float64", func(t *testing.T) {
		// Multiples of 3 over 3 ranks: the average is exact.
		checkAllReduce(t, w, cuda.NCCLAvg, false, func(r, i int) float64 { return float64(3 * (r + 1) * i) },
			func(x []float64) float64 { return sum(x) / 3 })
	})
	t.Run("avg int32", func(t *testing.T) {
		checkAllReduce(t, w, cuda.NCCLAvg, true, func(r, i int) int32 { return int32(i*(r+1) - 500) },
			func(x []int32) int32 { return sum(x) / 3 }) // truncating, as C's division
	})
	st, err := fakecuda.Stats(w.lib)
	require.NoError(t, err)
	require.EqualValues(t, 8*3, st.NCCL, "8 collectives of 3 ranks")
}

func TestNCCLBroadcast(t *testing.T) {
	w := newNCCLRanks(t, 3)
	const n, root = 257, 1
	data := make([]float64, n)
	for i := range data {
		data[i] = float64(i) * 1.25
	}
	for _, inPlace := range []bool{false, true} {
		t.Run(fmt.Sprintf("in place %v", inPlace), func(t *testing.T) {
			requireRanks(t, w.each(func(rk *ncclRank) error {
				x := make([]float64, n)
				if rk.rank == root {
					copy(x, data)
				} else {
					for i := range x {
						x[i] = -1 // not read on other ranks
					}
				}
				send, err := put(w.ctx, rk, x)
				if err != nil {
					return err
				}
				recv := send
				if !inPlace {
					if recv, err = rk.c.Alloc(w.ctx, 8*n); err != nil {
						return err
					}
				}
				if err := rk.comm.Broadcast(w.ctx, send, recv, n, cuda.NCCLFloat64, root, rk.s); err != nil {
					return err
				}
				got, err := get[float64](w.ctx, rk, recv, n)
				if err != nil {
					return err
				}
				return same("recv", got, data)
			}))
		})
	}
}

func TestNCCLReduce(t *testing.T) {
	w := newNCCLRanks(t, 3)
	const n, root = 100, 2
	value := func(r, i int) int64 { return int64(i*i - r*1000) }
	want := make([]int64, n)
	for i := range want {
		want[i] = value(0, i) + value(1, i) + value(2, i)
	}
	untouched := make([]byte, 8*n)
	for i := range untouched {
		untouched[i] = 0xa5 // what the stand-in's fresh memory holds
	}
	requireRanks(t, w.each(func(rk *ncclRank) error {
		x := make([]int64, n)
		for i := range x {
			x[i] = value(rk.rank, i)
		}
		send, err := put(w.ctx, rk, x)
		if err != nil {
			return err
		}
		recv, err := rk.c.Alloc(w.ctx, 8*n)
		if err != nil {
			return err
		}
		if err := rk.comm.Reduce(w.ctx, send, recv, n, cuda.NCCLInt64, cuda.NCCLSum, root, rk.s); err != nil {
			return err
		}
		got, err := get[byte](w.ctx, rk, recv, 8*n)
		if err != nil {
			return err
		}
		if rk.rank != root {
			return same("recv off the root", got, untouched)
		}
		return same("the root's recv", cuda.Slice[int64](got), want)
	}))
}

func TestNCCLAllGather(t *testing.T) {
	w := newNCCLRanks(t, 3)
	const n = 5
	value := func(r, i int) int32 { return int32(100*r + i) }
	want := make([]int32, 3*n)
	for r := range 3 {
		for i := range n {
			want[r*n+i] = value(r, i)
		}
	}
	for _, inPlace := range []bool{false, true} {
		t.Run(fmt.Sprintf("in place %v", inPlace), func(t *testing.T) {
			requireRanks(t, w.each(func(rk *ncclRank) error {
				x := make([]int32, n)
				for i := range x {
					x[i] = value(rk.rank, i)
				}
				var send, recv cuda.DevicePtr
				var err error
				if inPlace {
					// The rank's block of recv is its send buffer.
					all := make([]int32, 3*n)
					copy(all[rk.rank*n:], x)
					if recv, err = put(w.ctx, rk, all); err != nil {
						return err
					}
					send = recv + cuda.DevicePtr(4*n*rk.rank)
				} else {
					if send, err = put(w.ctx, rk, x); err != nil {
						return err
					}
					if recv, err = rk.c.Alloc(w.ctx, 4*3*n); err != nil {
						return err
					}
				}
				if err := rk.comm.AllGather(w.ctx, send, recv, n, cuda.NCCLInt32, rk.s); err != nil {
					return err
				}
				got, err := get[int32](w.ctx, rk, recv, 3*n)
				if err != nil {
					return err
				}
				return same("recv", got, want)
			}))
		})
	}
}

func TestNCCLReduceScatter(t *testing.T) {
	w := newNCCLRanks(t, 2)
	const n = 4 // elements each rank receives
	value := func(r, i int) float32 { return float32(i) + float32(r)/4 }
	requireRanks(t, w.each(func(rk *ncclRank) error {
		x := make([]float32, 2*n)
		for i := range x {
			x[i] = value(rk.rank, i)
		}
		send, err := put(w.ctx, rk, x)
		if err != nil {
			return err
		}
		recv, err := rk.c.Alloc(w.ctx, 4*n)
		if err != nil {
			return err
		}
		if err := rk.comm.ReduceScatter(w.ctx, send, recv, n, cuda.NCCLFloat32, cuda.NCCLSum, rk.s); err != nil {
			return err
		}
		got, err := get[float32](w.ctx, rk, recv, n)
		if err != nil {
			return err
		}
		want := make([]float32, n)
		for i := range want {
			j := rk.rank*n + i
			want[i] = value(0, j) + value(1, j)
		}
		return same("recv", got, want)
	}))
}

// TestNCCLGroup issues two collectives on the default stream in one
// group: the stand-in runs them at ncclGroupEnd, each on a thread.
func TestNCCLGroup(t *testing.T) {
	w := newNCCLRanks(t, 2)
	const n = 64
	requireRanks(t, w.each(func(rk *ncclRank) error {
		a := make([]float64, n)
		b := make([]uint32, n)
		for i := range a {
			a[i] = float64(i + rk.rank)
			b[i] = uint32(i * (rk.rank + 1))
		}
		pa, err := put(w.ctx, rk, a)
		if err != nil {
			return err
		}
		pb, err := put(w.ctx, rk, b)
		if err != nil {
			return err
		}
		err = w.nccl.Group(w.ctx, rk.c, func() error {
			return errors.Join(
				rk.comm.AllReduce(w.ctx, pa, pa, n, cuda.NCCLFloat64, cuda.NCCLSum, nil),
				rk.comm.AllReduce(w.ctx, pb, pb, n, cuda.NCCLUint32, cuda.NCCLMax, nil))
		})
		if err != nil {
			return err
		}
		if err := rk.comm.Synchronize(w.ctx, nil); err != nil {
			return err
		}
		gotA := make([]float64, n)
		gotB := make([]uint32, n)
		if err := errors.Join(rk.c.CopyDtoH(w.ctx, cuda.Bytes(gotA), pa), rk.c.CopyDtoH(w.ctx, cuda.Bytes(gotB), pb)); err != nil {
			return err
		}
		wantA := make([]float64, n)
		wantB := make([]uint32, n)
		for i := range wantA {
			wantA[i] = float64(2*i + 1)
			wantB[i] = uint32(2 * i)
		}
		return errors.Join(same("a", gotA, wantA), same("b", gotB, wantB))
	}))
}

// TestNCCLMismatchedCounts: ranks that disagree get ncclInvalidUsage,
// every one of them, from Synchronize, instead of a hang; the
// communicators then refuse further collectives.
func TestNCCLMismatchedCounts(t *testing.T) {
	w := newNCCLRanks(t, 2)
	errs := w.each(func(rk *ncclRank) error {
		p, err := put(w.ctx, rk, make([]float64, 4))
		if err != nil {
			return err
		}
		if err := rk.comm.AllReduce(w.ctx, p, p, 4-rk.rank, cuda.NCCLFloat64, cuda.NCCLSum, rk.s); err != nil {
			return fmt.Errorf("queueing: %w", err)
		}
		return rk.comm.Synchronize(w.ctx, rk.s)
	})
	for r, err := range errs {
		require.ErrorIs(t, err, cuda.ErrNCCLInvalidUsage, "rank %d", r)
		var ne *cuda.NCCLError
		require.ErrorAs(t, err, &ne)
		assert.Equal(t, "ncclCommGetAsyncError", ne.Call)
		assert.Contains(t, ne.Detail, "count")
		assert.Contains(t, err.Error(), "ncclInvalidUsage (5)")
	}
	for _, rk := range w.ranks {
		require.ErrorIs(t, rk.comm.Err(w.ctx), cuda.ErrNCCLInvalidUsage)
		p, err := rk.c.Alloc(w.ctx, 8)
		require.NoError(t, err)
		err = rk.comm.AllReduce(w.ctx, p, p, 1, cuda.NCCLFloat64, cuda.NCCLSum, rk.s)
		require.ErrorIs(t, err, cuda.ErrNCCLInvalidUsage, "a failed communicator refuses collectives")
		var ne *cuda.NCCLError
		require.ErrorAs(t, err, &ne)
		require.Equal(t, "ncclAllReduce", ne.Call)
	}
}

// TestNCCLBadArguments: arguments NCCL refuses at the call fail there,
// on the calling rank only, and queue nothing: the communicator goes on.
func TestNCCLBadArguments(t *testing.T) {
	w := newNCCLRanks(t, 2)
	r0, r1 := w.ranks[0], w.ranks[1]
	p0, err := r0.c.Alloc(w.ctx, 64)
	require.NoError(t, err)
	p1, err := r1.c.Alloc(w.ctx, 64)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		err  error
		is   error
		call string
	}{
		{"root out of range", r0.comm.Broadcast(w.ctx, p0, p0, 8, cuda.NCCLFloat64, 2, r0.s), cuda.ErrNCCLInvalidArgument, "ncclBroadcast"},
		{"negative root", r0.comm.Reduce(w.ctx, p0, p0, 8, cuda.NCCLFloat64, cuda.NCCLSum, -1, r0.s), cuda.ErrNCCLInvalidArgument, "ncclReduce"},
		{"unknown type", r0.comm.AllReduce(w.ctx, p0, p0, 8, cuda.NCCLType(42), cuda.NCCLSum, r0.s), cuda.ErrNCCLInvalidArgument, "ncclAllReduce"},
		{"unknown op", r0.comm.AllReduce(w.ctx, p0, p0, 8, cuda.NCCLFloat64, cuda.NCCLOp(9), r0.s), cuda.ErrNCCLInvalidArgument, "ncclAllReduce"},
		{"another device's memory", r0.comm.AllReduce(w.ctx, p1, p0, 8, cuda.NCCLFloat64, cuda.NCCLSum, r0.s), cuda.ErrNCCLInvalidArgument, "ncclAllReduce"},
		{"too small a buffer", r0.comm.AllGather(w.ctx, p0, p0, 8, cuda.NCCLFloat64, r0.s), cuda.ErrNCCLInvalidArgument, "ncclAllGather"},
		{"negative count", r0.comm.AllReduce(w.ctx, p0, p0, -1, cuda.NCCLFloat64, cuda.NCCLSum, r0.s), cuda.ErrBadArgument, ""},
		{"another device's stream", r0.comm.AllReduce(w.ctx, p0, p0, 8, cuda.NCCLFloat64, cuda.NCCLSum, r1.s), cuda.ErrBadArgument, ""},
	} {
		require.ErrorIs(t, c.err, c.is, c.name)
		if c.call != "" {
			var ne *cuda.NCCLError
			require.ErrorAs(t, c.err, &ne, c.name)
			assert.Equal(t, c.call, ne.Call, c.name)
			assert.NotEmpty(t, ne.Description, c.name)
			assert.NotEmpty(t, ne.Detail, c.name)
		}
	}
	require.NoError(t, r0.comm.Err(w.ctx), "the refusals were not asynchronous errors")
	// Nothing was queued: the ranks' next collective is their first.
	checkAllReduce(t, w, cuda.NCCLSum, true, func(r, i int) float64 { return float64(r + i) }, sum[float64])
}

// TestNCCLNewCommErrors: arguments ncclCommInitRank refuses, an id that
// is not one, and two ranks on one device.
func TestNCCLNewCommErrors(t *testing.T) {
	w := newNCCLWorld(t, 2)
	id, err := w.nccl.UniqueID()
	require.NoError(t, err)
	c := w.ranks[0].c
	for _, bad := range [][2]int{{2, 2}, {2, -1}, {0, 0}} {
		_, err := w.nccl.NewComm(w.ctx, c, bad[0], bad[1], id)
		require.ErrorIs(t, err, cuda.ErrNCCLInvalidArgument, "rank %d of %d", bad[1], bad[0])
		var ne *cuda.NCCLError
		require.ErrorAs(t, err, &ne)
		assert.Equal(t, "ncclCommInitRank", ne.Call)
	}
	_, err = w.nccl.NewComm(w.ctx, c, 1<<40, 0, id)
	require.ErrorIs(t, err, cuda.ErrBadArgument)
	_, err = w.nccl.NewComm(w.ctx, nil, 1, 0, id)
	require.ErrorIs(t, err, cuda.ErrBadArgument)

	// An id that ncclGetUniqueId did not make (the stand-in checks a
	// checksum over the 128 bytes it reads from the by-value argument).
	damaged := id
	damaged[100] ^= 1
	for _, bad := range []cuda.NCCLID{{}, damaged} {
		_, err = w.nccl.NewComm(w.ctx, c, 1, 0, bad)
		require.ErrorIs(t, err, cuda.ErrNCCLInvalidArgument)
	}

	// A communicator of one rank needs nobody else.
	m, err := w.nccl.NewComm(w.ctx, c, 1, 0, id)
	require.NoError(t, err)
	require.Equal(t, 1, m.Size())
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")
	require.ErrorIs(t, m.Err(w.ctx), cuda.ErrNCCLClosed)
	require.ErrorIs(t, m.AllReduce(w.ctx, 0, 0, 0, cuda.NCCLFloat64, cuda.NCCLSum, nil), cuda.ErrNCCLClosed)

	// Two ranks on one device: every rank gets ncclInvalidUsage.
	c2, err := w.d.NewContext(w.ctx, 0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, c2.Close()) }()
	id, err = w.nccl.UniqueID()
	require.NoError(t, err)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, cr := range []*cuda.Context{c, c2} {
		wg.Go(func() { _, errs[r] = w.nccl.NewComm(w.ctx, cr, 2, r, id) })
	}
	wg.Wait()
	for r, err := range errs {
		require.ErrorIs(t, err, cuda.ErrNCCLInvalidUsage, "rank %d", r)
	}
}

// TestNCCLTimeouts: a rank that never comes makes the others' waits end
// with ncclSystemError, on the stand-in after EnvNCCLTimeout.
func TestNCCLTimeouts(t *testing.T) {
	fakecuda.SetNCCLTimeout(t, time.Second)
	w := newNCCLWorld(t, 2)
	id, err := w.nccl.UniqueID()
	require.NoError(t, err)
	_, err = w.nccl.NewComm(w.ctx, w.ranks[0].c, 2, 0, id)
	require.ErrorIs(t, err, cuda.ErrNCCLSystem, "rank 1 never joined")

	w.join(t)
	rk := w.ranks[0]
	p, err := rk.c.Alloc(w.ctx, 8)
	require.NoError(t, err)
	require.NoError(t, rk.comm.AllReduce(w.ctx, p, p, 1, cuda.NCCLFloat64, cuda.NCCLSum, rk.s))
	require.ErrorIs(t, rk.comm.Synchronize(w.ctx, rk.s), cuda.ErrNCCLSystem, "rank 1 never called AllReduce")
	require.ErrorIs(t, w.ranks[1].comm.Err(w.ctx), cuda.ErrNCCLSystem, "the error reaches the rank that did not come")
}

// TestNCCLAbort: a rank that aborts releases the others' collectives
// with ncclRemoteError.
func TestNCCLAbort(t *testing.T) {
	w := newNCCLRanks(t, 2)
	r0, r1 := w.ranks[0], w.ranks[1]
	p, err := r0.c.Alloc(w.ctx, 8)
	require.NoError(t, err)
	require.NoError(t, r0.comm.AllReduce(w.ctx, p, p, 1, cuda.NCCLFloat64, cuda.NCCLSum, r0.s))
	require.NoError(t, r1.comm.Abort())
	require.NoError(t, r1.comm.Abort(), "Abort is idempotent")
	require.ErrorIs(t, r0.comm.Synchronize(w.ctx, r0.s), cuda.ErrNCCLRemote)
	require.ErrorIs(t, r1.comm.AllReduce(w.ctx, p, p, 1, cuda.NCCLFloat64, cuda.NCCLSum, nil), cuda.ErrNCCLClosed)
	require.ErrorIs(t, r1.comm.Synchronize(w.ctx, r1.s), cuda.ErrNCCLClosed)
}

func TestOpenNCCLMissing(t *testing.T) {
	_, err := cuda.OpenNCCL("/nonexistent/libnccl.so.2")
	require.ErrorIs(t, err, cuda.ErrNoNCCL)
	require.ErrorIs(t, err, cuda.ErrNoLibrary)
	t.Setenv(cuda.EnvNCCLLibrary, "/nonexistent/from-the-environment.so")
	_, err = cuda.OpenNCCL("")
	require.ErrorIs(t, err, cuda.ErrNoNCCL)
	require.Contains(t, err.Error(), "from-the-environment")
	// Another library is not NCCL: the missing symbol is named.
	_, err = cuda.OpenNCCL("libc.so.6")
	require.ErrorIs(t, err, cuda.ErrNoNCCL)
	require.Contains(t, err.Error(), "ncclGetVersion")
}

// TestOpenNCCLFromEnvironment: fakecuda.SetLibraries points
// PZ_NCCL_LIBRARY at the instance.
func TestOpenNCCLFromEnvironment(t *testing.T) {
	_, lib := fakecuda.Open(t, 1, 1<<20)
	fakecuda.SetLibraries(t, lib)
	n, err := cuda.OpenNCCL("")
	require.NoError(t, err)
	require.Equal(t, lib, n.Library())
	id, err := n.UniqueID()
	require.NoError(t, err)
	id2, err := n.UniqueID()
	require.NoError(t, err)
	require.NotEqual(t, id, id2, "fresh ids")
}

type celsius float64

func TestNCCLTypes(t *testing.T) {
	for _, c := range []struct {
		got  func() (cuda.NCCLType, bool)
		want cuda.NCCLType
		ok   bool
	}{
		{cuda.NCCLTypeOf[int8], cuda.NCCLInt8, true},
		{cuda.NCCLTypeOf[uint8], cuda.NCCLUint8, true},
		{cuda.NCCLTypeOf[int16], 0, false},
		{cuda.NCCLTypeOf[uint16], 0, false},
		{cuda.NCCLTypeOf[int32], cuda.NCCLInt32, true},
		{cuda.NCCLTypeOf[uint32], cuda.NCCLUint32, true},
		{cuda.NCCLTypeOf[int64], cuda.NCCLInt64, true},
		{cuda.NCCLTypeOf[uint64], cuda.NCCLUint64, true},
		{cuda.NCCLTypeOf[float32], cuda.NCCLFloat32, true},
		{cuda.NCCLTypeOf[float64], cuda.NCCLFloat64, true},
		{cuda.NCCLTypeOf[celsius], cuda.NCCLFloat64, true},
	} {
		got, ok := c.got()
		assert.Equal(t, c.ok, ok, "%v", c.want)
		assert.Equal(t, c.want, got)
	}
	assert.Equal(t, 8, cuda.NCCLFloat64.Size())
	assert.Equal(t, 2, cuda.NCCLBfloat16.Size())
	assert.Equal(t, 0, cuda.NCCLType(42).Size())
	assert.Equal(t, "ncclFloat16", cuda.NCCLFloat16.String())
	assert.Equal(t, "ncclDataType(42)", cuda.NCCLType(42).String())
	assert.Equal(t, "ncclAvg", cuda.NCCLAvg.String())
	assert.Equal(t, "ncclRedOp(9)", cuda.NCCLOp(9).String())
	assert.Equal(t, "ncclRemoteError", cuda.ErrNCCLRemote.Name())
	assert.Equal(t, "nccl: ncclInvalidUsage", cuda.ErrNCCLInvalidUsage.Error())
	e := &cuda.NCCLError{Call: "ncclAllReduce", Code: cuda.ErrNCCLInvalidArgument, Description: "invalid argument", Detail: "invalid root 5"}
	assert.Equal(t, "nccl: ncclAllReduce: ncclInvalidArgument (4): invalid argument: invalid root 5", e.Error())
	assert.ErrorIs(t, fmt.Errorf("wrapped: %w", e), cuda.ErrNCCLInvalidArgument)
}

// checkGather gathers n elements of every rank, rank r's i-th being
// value(r, i), into consecutive parts of a buffer of root with Send and
// Recv in one group per rank (the root also sends to itself), and checks
// the root's buffer.
func checkGather[T cuda.Number](t *testing.T, w *ncclWorld, root, n int, value func(r, i int) T) {
	t.Helper()
	dt, ok := cuda.NCCLTypeOf[T]()
	require.True(t, ok)
	nranks := len(w.ranks)
	want := rankValues(nranks, n, value)
	esz := int(unsafe.Sizeof(want[0]))
	requireRanks(t, w.each(func(rk *ncclRank) error {
		x := make([]T, n)
		for i := range x {
			x[i] = value(rk.rank, i)
		}
		send, err := put(w.ctx, rk, x)
		if err != nil {
			return err
		}
		var recv cuda.DevicePtr
		if rk.rank == root {
			if recv, err = rk.c.Alloc(w.ctx, nranks*n*esz); err != nil {
				return err
			}
		}
		err = w.nccl.Group(w.ctx, rk.c, func() error {
			if rk.rank == root {
				// The receives first, its own included: the group makes the
				// order of issue irrelevant.
				for r := range nranks {
					if err := rk.comm.Recv(w.ctx, recv+cuda.DevicePtr(r*n*esz), n, dt, r, rk.s); err != nil {
						return err
					}
				}
			}
			return rk.comm.Send(w.ctx, send, n, dt, root, rk.s)
		})
		if err != nil {
			return err
		}
		if rk.rank != root {
			return rk.comm.Synchronize(w.ctx, rk.s)
		}
		got, err := get[T](w.ctx, rk, recv, nranks*n)
		if err != nil {
			return err
		}
		return same("the root's recv", got, want)
	}))
}

// rankValues is every rank's n values, value(r, i), one rank after the
// other.
func rankValues[T any](nranks, n int, value func(r, i int) T) []T {
	all := make([]T, 0, nranks*n)
	for r := range nranks {
		for i := range n {
			all = append(all, value(r, i))
		}
	}
	return all
}

// checkScatter is checkGather's reverse: root sends part r of its
// buffer to rank r, itself included, and every rank receives its part.
func checkScatter[T cuda.Number](t *testing.T, w *ncclWorld, root, n int, value func(r, i int) T) {
	t.Helper()
	dt, ok := cuda.NCCLTypeOf[T]()
	require.True(t, ok)
	nranks := len(w.ranks)
	all := rankValues(nranks, n, value)
	esz := int(unsafe.Sizeof(all[0]))
	requireRanks(t, w.each(func(rk *ncclRank) error {
		var send cuda.DevicePtr
		var err error
		if rk.rank == root {
			if send, err = put(w.ctx, rk, all); err != nil {
				return err
			}
		}
		recv, err := rk.c.Alloc(w.ctx, n*esz)
		if err != nil {
			return err
		}
		err = w.nccl.Group(w.ctx, rk.c, func() error {
			// The receive first, on the root too.
			if err := rk.comm.Recv(w.ctx, recv, n, dt, root, rk.s); err != nil {
				return err
			}
			if rk.rank == root {
				for r := range nranks {
					if err := rk.comm.Send(w.ctx, send+cuda.DevicePtr(r*n*esz), n, dt, r, rk.s); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		got, err := get[T](w.ctx, rk, recv, n)
		if err != nil {
			return err
		}
		return same("recv", got, all[rk.rank*n:(rk.rank+1)*n])
	}))
}

// TestNCCLGather gathers to a root with Send and Recv in groups, for
// several types and numbers of ranks.
func TestNCCLGather(t *testing.T) {
	for nranks := 2; nranks <= 4; nranks++ {
		t.Run(fmt.Sprintf("%d ranks", nranks), func(t *testing.T) {
			w := newNCCLRanks(t, nranks)
			root := nranks / 2
			checkGather(t, w, root, 100, func(r, i int) float64 { return float64(r*1000+i) * 0.25 })
			checkGather(t, w, 0, 7, func(r, i int) int32 { return int32(-r*100 - i) })
			checkGather(t, w, nranks-1, 33, func(r, i int) uint8 { return uint8(r*50 + i) })
			checkGather(t, w, root, 1, func(r, i int) uint64 { return math.MaxUint64 - uint64(r) })
			st, err := fakecuda.Stats(w.lib)
			require.NoError(t, err)
			require.EqualValues(t, 4*2*nranks, st.NCCLP2P, "4 gathers: a send of every rank, a receive of the root's from each")
			require.Equal(t, st.NCCLP2P, st.NCCL, "no collectives")
		})
	}
}

// TestNCCLScatter scatters from a root with Send and Recv in groups.
func TestNCCLScatter(t *testing.T) {
	for nranks := 2; nranks <= 4; nranks++ {
		t.Run(fmt.Sprintf("%d ranks", nranks), func(t *testing.T) {
			w := newNCCLRanks(t, nranks)
			checkScatter(t, w, 0, 64, func(r, i int) float32 { return float32(r) + float32(i)/8 })
			checkScatter(t, w, nranks-1, 5, func(r, i int) int64 { return int64(r)<<40 | int64(i) })
			checkScatter(t, w, 1, 3, func(r, i int) int8 { return int8(-r*10 - i) })
		})
	}
}

// TestNCCLSendRecvExchange: every rank sends two messages to and
// receives two from every other rank, in one group each, the receives
// issued first; the messages between two ranks match in issue order.
func TestNCCLSendRecvExchange(t *testing.T) {
	w := newNCCLRanks(t, 3)
	const n = 50
	// value is the i-th element of the k-th message from rank from to rank to.
	value := func(from, to, k, i int) float64 { return float64(from*10000 + to*1000 + k*100 + i) }
	requireRanks(t, w.each(func(rk *ncclRank) error {
		me := rk.rank
		out := make([]float64, 0, 3*2*n)
		for to := range 3 {
			for k := range 2 {
				for i := range n {
					out = append(out, value(me, to, k, i))
				}
			}
		}
		send, err := put(w.ctx, rk, out)
		if err != nil {
			return err
		}
		recv, err := put(w.ctx, rk, make([]float64, 3*2*n))
		if err != nil {
			return err
		}
		part := func(p cuda.DevicePtr, peer, k int) cuda.DevicePtr { return p + cuda.DevicePtr(8*n*(2*peer+k)) }
		err = w.nccl.Group(w.ctx, rk.c, func() error {
			for peer := range 3 {
				for k := range 2 {
					if peer != me {
						if err := rk.comm.Recv(w.ctx, part(recv, peer, k), n, cuda.NCCLFloat64, peer, rk.s); err != nil {
							return err
						}
					}
				}
			}
			for peer := range 3 {
				for k := range 2 {
					if peer != me {
						if err := rk.comm.Send(w.ctx, part(send, peer, k), n, cuda.NCCLFloat64, peer, rk.s); err != nil {
							return err
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		got, err := get[float64](w.ctx, rk, recv, 3*2*n)
		if err != nil {
			return err
		}
		want := make([]float64, 0, 3*2*n)
		for from := range 3 {
			for k := range 2 {
				for i := range n {
					if from == me {
						want = append(want, 0) // not received
					} else {
						want = append(want, value(from, me, k, i))
					}
				}
			}
		}
		return same("recv", got, want)
	}))
	require.NoError(t, w.ranks[0].comm.Err(w.ctx))
}

// TestNCCLSendRecvMismatch: a send and its receive that disagree on the
// count or the type give both communicators ncclInvalidUsage, and the
// receive buffer is not written.
func TestNCCLSendRecvMismatch(t *testing.T) {
	for _, c := range []struct {
		name   string
		count  int
		dt     cuda.NCCLType
		detail string
	}{
		{"count", 3, cuda.NCCLFloat64, "count 4"},
		{"type", 4, cuda.NCCLInt64, "datatype 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newNCCLRanks(t, 2)
			marks := []float64{-1, -2, -3, -4}
			errs := w.each(func(rk *ncclRank) error {
				p, err := put(w.ctx, rk, marks)
				if err != nil {
					return err
				}
				if rk.rank == 0 {
					err = rk.comm.Send(w.ctx, p, 4, cuda.NCCLFloat64, 1, rk.s)
				} else {
					err = rk.comm.Recv(w.ctx, p, c.count, c.dt, 0, rk.s)
				}
				if err != nil {
					return fmt.Errorf("queueing: %w", err)
				}
				syncErr := rk.comm.Synchronize(w.ctx, rk.s)
				// The stream itself goes on; then the buffer can be read.
				if err := rk.s.Synchronize(w.ctx); err != nil {
					return err
				}
				got := make([]float64, 4)
				if err := rk.c.CopyDtoH(w.ctx, cuda.Bytes(got), p); err != nil {
					return err
				}
				return errors.Join(syncErr, same("buffer", got, marks))
			})
			for r, err := range errs {
				require.ErrorIs(t, err, cuda.ErrNCCLInvalidUsage, "rank %d", r)
				var ne *cuda.NCCLError
				require.ErrorAs(t, err, &ne)
				assert.Equal(t, "ncclCommGetAsyncError", ne.Call)
				assert.Contains(t, ne.Detail, c.detail)
				assert.NotContains(t, err.Error(), "buffer:", "nothing written")
			}
			for _, rk := range w.ranks {
				require.ErrorIs(t, rk.comm.Err(w.ctx), cuda.ErrNCCLInvalidUsage)
			}
			p, err := w.ranks[0].c.Alloc(w.ctx, 8)
			require.NoError(t, err)
			err = w.ranks[0].comm.Send(w.ctx, p, 1, cuda.NCCLFloat64, 1, w.ranks[0].s)
			require.ErrorIs(t, err, cuda.ErrNCCLInvalidUsage, "a failed communicator refuses sends")
		})
	}
}

// TestNCCLSendRecvBadArguments: arguments NCCL refuses at the call fail
// there and queue nothing: the next send and receive are the pair's first.
func TestNCCLSendRecvBadArguments(t *testing.T) {
	w := newNCCLRanks(t, 2)
	r0, r1 := w.ranks[0], w.ranks[1]
	p0, err := r0.c.Alloc(w.ctx, 64)
	require.NoError(t, err)
	p1, err := r1.c.Alloc(w.ctx, 64)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		err  error
		is   error
		call string
	}{
		{"peer out of range", r0.comm.Send(w.ctx, p0, 8, cuda.NCCLFloat64, 2, r0.s), cuda.ErrNCCLInvalidArgument, "ncclSend"},
		{"negative peer", r0.comm.Recv(w.ctx, p0, 8, cuda.NCCLFloat64, -1, r0.s), cuda.ErrNCCLInvalidArgument, "ncclRecv"},
		{"unknown type", r0.comm.Send(w.ctx, p0, 8, cuda.NCCLType(42), 1, r0.s), cuda.ErrNCCLInvalidArgument, "ncclSend"},
		{"too small a send buffer", r0.comm.Send(w.ctx, p0, 9, cuda.NCCLFloat64, 1, r0.s), cuda.ErrNCCLInvalidArgument, "ncclSend"},
		{"too small a receive buffer", r0.comm.Recv(w.ctx, p0, 65, cuda.NCCLUint8, 1, r0.s), cuda.ErrNCCLInvalidArgument, "ncclRecv"},
		{"another device's memory", r0.comm.Recv(w.ctx, p1, 8, cuda.NCCLFloat64, 1, r0.s), cuda.ErrNCCLInvalidArgument, "ncclRecv"},
		{"negative count", r0.comm.Send(w.ctx, p0, -1, cuda.NCCLFloat64, 1, r0.s), cuda.ErrBadArgument, ""},
		{"peer beyond int32", r0.comm.Send(w.ctx, p0, 8, cuda.NCCLFloat64, 1<<40, r0.s), cuda.ErrBadArgument, ""},
		{"another device's stream", r0.comm.Recv(w.ctx, p0, 8, cuda.NCCLFloat64, 1, r1.s), cuda.ErrBadArgument, ""},
	} {
		require.ErrorIs(t, c.err, c.is, c.name)
		if c.call != "" {
			var ne *cuda.NCCLError
			require.ErrorAs(t, c.err, &ne, c.name)
			assert.Equal(t, c.call, ne.Call, c.name)
			assert.NotEmpty(t, ne.Description, c.name)
			assert.NotEmpty(t, ne.Detail, c.name)
		}
	}
	require.NoError(t, r0.comm.Err(w.ctx), "the refusals were not asynchronous errors")
	st, err := fakecuda.Stats(w.lib)
	require.NoError(t, err)
	require.Zero(t, st.NCCL, "nothing queued")
	// Nothing was queued: one message from rank 0 to rank 1 is the pair's first.
	requireRanks(t, w.each(func(rk *ncclRank) error {
		if rk.rank == 0 {
			p, err := put(w.ctx, rk, []int32{7, 8, 9})
			if err != nil {
				return err
			}
			if err := rk.comm.Send(w.ctx, p, 3, cuda.NCCLInt32, 1, rk.s); err != nil {
				return err
			}
			return rk.comm.Synchronize(w.ctx, rk.s)
		}
		p, err := rk.c.Alloc(w.ctx, 12)
		if err != nil {
			return err
		}
		if err := rk.comm.Recv(w.ctx, p, 3, cuda.NCCLInt32, 0, rk.s); err != nil {
			return err
		}
		got, err := get[int32](w.ctx, rk, p, 3)
		if err != nil {
			return err
		}
		return same("recv", got, []int32{7, 8, 9})
	}))
}

// TestNCCLSendRecvTimeouts: a send whose receive never comes, and a
// receive whose send never comes, end with ncclSystemError for both
// ranks after the stand-in's timeout.
func TestNCCLSendRecvTimeouts(t *testing.T) {
	fakecuda.SetNCCLTimeout(t, time.Second)
	for _, recv := range []bool{false, true} {
		t.Run(fmt.Sprintf("recv %v", recv), func(t *testing.T) {
			w := newNCCLRanks(t, 2)
			rk, peer := w.ranks[0], w.ranks[1]
			p, err := rk.c.Alloc(w.ctx, 8)
			require.NoError(t, err)
			if recv {
				require.NoError(t, rk.comm.Recv(w.ctx, p, 1, cuda.NCCLFloat64, 1, rk.s))
			} else {
				require.NoError(t, rk.comm.Send(w.ctx, p, 1, cuda.NCCLFloat64, 1, rk.s))
			}
			err = rk.comm.Synchronize(w.ctx, rk.s)
			require.ErrorIs(t, err, cuda.ErrNCCLSystem, "rank 1 never answered")
			require.Contains(t, err.Error(), "timed out")
			require.ErrorIs(t, peer.comm.Err(w.ctx), cuda.ErrNCCLSystem, "the error reaches the peer that did not come")
		})
	}
}

// TestNCCLWithoutSendRecv: a NCCL before 2.7 lacks ncclSend and
// ncclRecv; Send and Recv say so, and the rest works.
func TestNCCLWithoutSendRecv(t *testing.T) {
	lib := fakecuda.InstanceWithout(t, "ncclSend", "ncclRecv")
	fakecuda.Setenv(t, 1, 1<<20)
	d, err := cuda.OpenLibrary(lib)
	require.NoError(t, err)
	nc, err := cuda.OpenNCCL(lib)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, c.Close()) }()
	id, err := nc.UniqueID()
	require.NoError(t, err)
	m, err := nc.NewComm(ctx, c, 1, 0, id)
	require.NoError(t, err)
	defer func() { assert.NoError(t, m.Close()) }()
	p, err := c.Alloc(ctx, 8)
	require.NoError(t, err)
	err = m.Send(ctx, p, 1, cuda.NCCLFloat64, 0, nil)
	require.ErrorIs(t, err, cuda.ErrNotSupported)
	require.Contains(t, err.Error(), "ncclSend")
	err = m.Recv(ctx, p, 1, cuda.NCCLFloat64, 0, nil)
	require.ErrorIs(t, err, cuda.ErrNotSupported)
	require.Contains(t, err.Error(), "ncclRecv")
	require.NoError(t, m.AllReduce(ctx, p, p, 1, cuda.NCCLFloat64, cuda.NCCLSum, nil), "collectives still work")
}
