package cuda_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// accelRank is one rank of TestAccelCollectives: a GPU of its own and
// its part of the GPUs' communicator.
type accelRank struct {
	a  *cuda.Accel
	cc accel.CollectiveComm
}

// f64s returns x's bytes.
func f64s(x []float64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 8*len(x))
}

// upload returns an allocation of a holding x.
func upload(t *testing.T, a *cuda.Accel, x []float64) accel.Mem {
	t.Helper()
	m, err := a.Alloc(max(8, 8*len(x)))
	require.NoError(t, err)
	t.Cleanup(func() { a.Free(m) })
	if len(x) > 0 {
		done := make(chan error, 1)
		a.CopyIn(m, 0, f64s(x), 1, 8*len(x), 8*len(x), func(_ time.Time, err error) { done <- err })
		require.NoError(t, <-done)
	}
	return m
}

// download returns n float64 of m.
func download(t *testing.T, a *cuda.Accel, m accel.Mem, n int) []float64 {
	t.Helper()
	x := make([]float64, n)
	done := make(chan error, 1)
	a.CopyOut(f64s(x), 1, 8*n, 8*n, m, 0, func(_ time.Time, err error) { done <- err })
	require.NoError(t, <-done)
	return x
}

// TestAccelCollectives runs each collective of cuda.Accel's NCCL
// communicator (accel.CollectiveComm) on three GPUs of the stand-in, from
// several roots and with counts that differ across ranks; a kind NCCL
// lacks reports false on every rank, and bad counts or a bad root are an
// error before anything is queued.
func TestAccelCollectives(t *testing.T) {
	fakecuda.SetDelay(t, 0)
	d, lib := fakecuda.Open(t, 3, 16<<20)
	fakecuda.SetLibraries(t, lib)
	fakecuda.SetNCCLTimeout(t, 10*time.Second)
	ctx := context.Background()
	const n = 3
	ranks := make([]*accelRank, n)
	for r := range ranks {
		a, err := d.NewAccel(ctx, r)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, a.Close()) })
		ranks[r] = &accelRank{a: a}
	}
	id, err := ranks[0].a.NewCollectiveID()
	require.NoError(t, err)
	each := func(fn func(r int, rk *accelRank) error) {
		t.Helper()
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r, rk := range ranks {
			wg.Go(func() { errs[r] = fn(r, rk) })
		}
		wg.Wait()
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}
	}
	each(func(r int, rk *accelRank) (err error) {
		j, err := rk.a.PrepareCollective(ctx, n, r)
		if err != nil {
			return err
		}
		rk.cc, err = j.Join(ctx, id)
		return err
	})
	vals := func(base, k int) []float64 {
		x := make([]float64, k)
		for i := range x {
			x[i] = float64(base + i)
		}
		return x
	}
	okAll := func(what string, ok []bool) {
		t.Helper()
		require.Equal(t, []bool{true, true, true}, ok, what)
	}

	// AllReduce in place: the sum of the ranks' values.
	bufs := make([]accel.Mem, n)
	for r, rk := range ranks {
		bufs[r] = upload(t, rk.a, vals(10*r, 4))
	}
	ok := make([]bool, n)
	each(func(r int, rk *accelRank) (err error) {
		ok[r], err = rk.cc.AllReduce(bufs[r], 0, bufs[r], 0, 4, reflect.Float64, accel.OpSum)
		return err
	})
	okAll("AllReduce", ok)
	for r, rk := range ranks {
		require.Equal(t, []float64{30, 33, 36, 39}, download(t, rk.a, bufs[r], 4), "AllReduce on rank %d", r)
	}

	for root := range n {
		// Broadcast from root, in place.
		for r, rk := range ranks {
			bufs[r] = upload(t, rk.a, vals(100*r, 5))
		}
		each(func(r int, rk *accelRank) (err error) {
			ok[r], err = rk.cc.Broadcast(bufs[r], 0, bufs[r], 0, 5, reflect.Float64, root)
			return err
		})
		okAll("Broadcast", ok)
		for r, rk := range ranks {
			require.Equal(t, vals(100*root, 5), download(t, rk.a, bufs[r], 5), "Broadcast from %d on rank %d", root, r)
		}

		// Reduce with Max into the root's own buffer.
		recv := upload(t, ranks[root].a, make([]float64, 5))
		for r, rk := range ranks {
			bufs[r] = upload(t, rk.a, vals(r, 5))
		}
		each(func(r int, rk *accelRank) (err error) {
			var dst accel.Mem
			if r == root {
				dst = recv
			}
			ok[r], err = rk.cc.Reduce(bufs[r], 0, dst, 0, 5, reflect.Float64, accel.OpMax, root)
			return err
		})
		okAll("Reduce", ok)
		require.Equal(t, vals(n-1, 5), download(t, ranks[root].a, recv, 5), "Reduce to %d", root)

		// Gather and Scatter, rank r's part r+1 elements (6 in all).
		counts := []int{1, 2, 3}
		all := upload(t, ranks[root].a, make([]float64, 6))
		for r, rk := range ranks {
			bufs[r] = upload(t, rk.a, vals(10*r, r+1))
		}
		each(func(r int, rk *accelRank) (err error) {
			var dst accel.Mem
			if r == root {
				dst = all
			}
			ok[r], err = rk.cc.Gather(bufs[r], 0, dst, 0, counts, reflect.Float64, root)
			return err
		})
		okAll("Gather", ok)
		require.Equal(t, []float64{0, 10, 11, 20, 21, 22}, download(t, ranks[root].a, all, 6), "Gather to %d", root)

		from := upload(t, ranks[root].a, vals(1000, 6))
		parts := make([]accel.Mem, n)
		for r, rk := range ranks {
			parts[r] = upload(t, rk.a, make([]float64, r+1))
		}
		each(func(r int, rk *accelRank) (err error) {
			var src accel.Mem
			if r == root {
				src = from
			}
			ok[r], err = rk.cc.Scatter(src, 0, parts[r], 0, counts, reflect.Float64, root)
			return err
		})
		okAll("Scatter", ok)
		for r, rk := range ranks {
			start := []int{0, 1, 3}[r]
			require.Equal(t, vals(1000+start, r+1), download(t, rk.a, parts[r], r+1), "Scatter from %d to rank %d", root, r)
		}
	}

	// AllGather, equal counts (ncclAllGather) and not (a broadcast each).
	for _, counts := range [][]int{{2, 2, 2}, {3, 0, 1}} {
		dst := make([]accel.Mem, n)
		for r, rk := range ranks {
			dst[r] = upload(t, rk.a, make([]float64, 6))
			bufs[r] = upload(t, rk.a, vals(10*r, counts[r]))
		}
		each(func(r int, rk *accelRank) (err error) {
			ok[r], err = rk.cc.AllGather(bufs[r], 0, dst[r], 0, counts, reflect.Float64)
			return err
		})
		okAll("AllGather", ok)
		var want []float64
		for r, c := range counts {
			want = append(want, vals(10*r, c)...)
		}
		want = append(want, make([]float64, 6-len(want))...)
		for r, rk := range ranks {
			require.Equal(t, want, download(t, rk.a, dst[r], 6), "AllGather %v on rank %d", counts, r)
		}
	}

	// A kind NCCL has no type for: false everywhere, nothing done.
	for r, rk := range ranks {
		bufs[r] = upload(t, rk.a, vals(r, 4))
	}
	each(func(r int, rk *accelRank) (err error) {
		ok[r], err = rk.cc.Broadcast(bufs[r], 0, bufs[r], 0, 2, reflect.Complex128, 0)
		return err
	})
	require.Equal(t, []bool{false, false, false}, ok)
	require.Equal(t, vals(2, 4), download(t, ranks[2].a, bufs[2], 4), "untouched")

	// Bad counts and roots fail at the call, on every rank alike.
	for r, rk := range ranks {
		_, err := rk.cc.Gather(bufs[r], 0, bufs[r], 0, []int{1, 1}, reflect.Float64, 0)
		require.ErrorIs(t, err, cuda.ErrBadArgument, "two counts for three ranks")
		_, err = rk.cc.AllGather(bufs[r], 0, bufs[r], 0, []int{1, -1, 1}, reflect.Float64)
		require.ErrorIs(t, err, cuda.ErrBadArgument, "a negative count")
		_, err = rk.cc.Scatter(bufs[r], 0, bufs[r], 0, []int{1, 1, 1}, reflect.Float64, 3)
		require.ErrorIs(t, err, cuda.ErrBadArgument, "root 3 of 3 ranks")
	}
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.Positive(t, st.NCCLP2P, "Gather and Scatter sent and received")
	require.Zero(t, st.InvalidContext)
}

// TestAccelPrepareCollective: what PrepareCollective and its join refuse
// before ncclCommInitRank (a rank outside the ranks, an id of another
// length: an error, nothing waits), a join used once (Join or Close),
// and a one-rank communicator formed by preparing, making the id and
// joining, in that order.
func TestAccelPrepareCollective(t *testing.T) {
	fakecuda.SetDelay(t, 0)
	d, lib := fakecuda.Open(t, 1, 16<<20)
	fakecuda.SetLibraries(t, lib)
	fakecuda.SetNCCLTimeout(t, 10*time.Second)
	ctx := context.Background()
	a, err := d.NewAccel(ctx, 0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })

	for _, bad := range [][2]int{{0, 0}, {2, 2}, {2, -1}} {
		_, err := a.PrepareCollective(ctx, bad[0], bad[1])
		require.ErrorIs(t, err, cuda.ErrBadArgument, "rank %d of %d", bad[1], bad[0])
	}

	j, err := a.PrepareCollective(ctx, 1, 0)
	require.NoError(t, err)
	_, err = j.Join(ctx, []byte("short"))
	require.ErrorIs(t, err, cuda.ErrBadArgument)
	_, err = j.Join(ctx, make([]byte, 128))
	require.ErrorIs(t, err, cuda.ErrBadArgument, "a join is used once")
	require.NoError(t, j.Close())

	j, err = a.PrepareCollective(ctx, 1, 0)
	require.NoError(t, err)
	require.NoError(t, j.Close())
	require.NoError(t, j.Close())
	_, err = j.Join(ctx, make([]byte, 128))
	require.ErrorIs(t, err, cuda.ErrBadArgument, "a closed join")

	j, err = a.PrepareCollective(ctx, 1, 0)
	require.NoError(t, err)
	id, err := a.NewCollectiveID()
	require.NoError(t, err)
	cc, err := j.Join(ctx, id)
	require.NoError(t, err)
	require.NoError(t, j.Close(), "after Join, Close does nothing")
	m := upload(t, a, []float64{1, 2})
	ok, err := cc.AllReduce(m, 0, m, 0, 2, reflect.Float64, accel.OpSum)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []float64{1, 2}, download(t, a, m, 2))
	require.NoError(t, cc.Close())
}
