//go:build mpi

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// The collectives on memory given by address (comm.DeviceComm), on host
// memory outside Go's heap: anonymous mappings, which the tests read to
// check the results (MPI wrote them; pz did not touch them). Where a
// collective must fail before moving data, the buffers are mapped with no
// access at all, so that any read of them, by Go or by MPI, ends the test
// with a fault.

// hostMem maps bytes of read-write memory outside Go's heap (nil, 0 for
// none), unmapped when the test ends.
func hostMem(t *testing.T, bytes int, prot int) ([]byte, uintptr) {
	t.Helper()
	if bytes == 0 {
		return nil, 0
	}
	b, err := syscall.Mmap(-1, 0, bytes, prot, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, syscall.Munmap(b)) })
	return b, uintptr(unsafe.Pointer(&b[0]))
}

// memOf returns n elements of T outside Go's heap and their address.
func memOf[T comm.Number](t *testing.T, n int) ([]T, uintptr) {
	t.Helper()
	var z T
	b, addr := hostMem(t, n*int(unsafe.Sizeof(z)), syscall.PROT_READ|syscall.PROT_WRITE)
	if n == 0 {
		return nil, 0
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), addr
}

// untouchable returns the address of bytes that nobody may read or write.
func untouchable(t *testing.T, bytes int) uintptr {
	t.Helper()
	_, addr := hostMem(t, bytes, syscall.PROT_NONE)
	return addr
}

// eachMode runs f on a copy of the world with the check on and off, with a
// ctx that takes the blocking MPI calls and one that polls.
func eachMode(t *testing.T, f func(t *testing.T, c *mpi.Comm, ctx context.Context)) {
	c := splitAll(t)
	for _, check := range []bool{true, false} {
		for _, polled := range []bool{false, true} {
			name := map[bool]string{true: "check", false: "nocheck"}[check] + "/" + map[bool]string{true: "polled", false: "blocking"}[polled]
			t.Run(name, func(t *testing.T) {
				c.SetCheck(check)
				ctx := context.Background()
				if polled {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Minute)
					defer cancel()
				}
				f(t, c, ctx)
				require.NoError(t, c.Barrier(ctx), "rank %d", c.Rank())
			})
		}
	}
}

// roots are the roots to try: 0 and the last rank.
func roots(n int) []int {
	if n == 1 {
		return []int{0}
	}
	return []int{0, n - 1}
}

// unevenCounts gives rank r (r+1)%3 elements: uneven, some zero on 3 ranks
// and more.
func unevenCounts(n int) []int {
	counts := make([]int, n)
	for r := range counts {
		counts[r] = (r + 1) % 3
	}
	return counts
}

func offsetsOf(counts []int) ([]int, int) {
	off, total := make([]int, len(counts)), 0
	for r, n := range counts {
		off[r] = total
		total += n
	}
	return off, total
}

// The element values: rank r's i-th element.
func f64(r, i int) float64          { return float64(100*r+i) + 0.5 }
func i32(r, i int) int32            { return int32(1000*r - i) }
func c128(r, i int) complex128      { return complex(float64(r), float64(i)+0.25) }
func sumOf[T comm.Number](a, b T) T { return a + b }
func maxI32(a, b int32) int32       { return max(a, b) }

func TestDeviceReaches(t *testing.T) {
	assert.True(t, world.Reaches("host"))
	assert.False(t, world.Reaches("bogus"))
	assert.False(t, world.Reaches(""))
	cuda := world.Reaches("cuda")
	assert.Equal(t, cuda, world.Reaches("cuda"), "asked twice")
	t.Logf("rank %d: %s reaches cuda memory: %v", world.Rank(), mpi.Library(), cuda)
	// Every rank gets the same answer.
	v := []int32{0}
	if cuda {
		v[0] = 1
	}
	lo, err := comm.AllReduce(context.Background(), comm.Comm(world), v, comm.Min)
	require.NoError(t, err)
	hi, err := comm.AllReduce(context.Background(), comm.Comm(world), v, comm.Max)
	require.NoError(t, err)
	assert.Equal(t, lo, hi, "ranks disagree on Reaches(\"cuda\")")
	sub := splitAll(t)
	assert.Equal(t, cuda, sub.Reaches("cuda"), "a split communicator")
	var dc comm.DeviceComm = sub
	assert.True(t, dc.Reaches("host"))
}

func bcastAt[T comm.Number](t *testing.T, c *mpi.Comm, ctx context.Context, count, root int, val func(r, i int) T) {
	buf, addr := memOf[T](t, count)
	for i := range buf {
		buf[i] = val(c.Rank()+7, i) // what only root must overwrite
		if c.Rank() == root {
			buf[i] = val(root, i)
		}
	}
	require.NoError(t, c.BcastAt(ctx, addr, count, comm.DatatypeOf[T](), root), "rank %d", c.Rank())
	for i := range buf {
		require.Equal(t, val(root, i), buf[i], "rank %d, element %d", c.Rank(), i)
	}
}

func TestDeviceBcastAt(t *testing.T) {
	eachMode(t, func(t *testing.T, c *mpi.Comm, ctx context.Context) {
		for _, root := range roots(c.Size()) {
			for _, n := range []int{0, 1, 5, 1000} {
				t.Run(fmt.Sprintf("root=%d/n=%d", root, n), func(t *testing.T) {
					bcastAt(t, c, ctx, n, root, f64)
					bcastAt(t, c, ctx, n, root, i32)
					bcastAt(t, c, ctx, n, root, c128)
				})
			}
		}
	})
}

// reduceAt runs ReduceAt (all false) or AllReduceAt (all true) of count
// elements, in place or not, and checks the result against fold.
func reduceAt[T comm.Number](t *testing.T, c *mpi.Comm, ctx context.Context, all, inPlace bool, count, root int, op comm.Op, fold func(a, b T) T, val func(r, i int) T) {
	me, n := c.Rank(), c.Size()
	send, sa := memOf[T](t, count)
	recv, ra := memOf[T](t, count)
	for i := range send {
		send[i] = val(me, i)
		recv[i] = val(me+13, i)
	}
	gets := all || me == root
	switch {
	case inPlace && gets:
		ra, recv = sa, send
	case !gets:
		ra = 0 // ignored off root
	}
	var err error
	if all {
		err = c.AllReduceAt(ctx, sa, ra, count, comm.DatatypeOf[T](), op)
	} else {
		err = c.ReduceAt(ctx, sa, ra, count, comm.DatatypeOf[T](), op, root)
	}
	require.NoError(t, err, "rank %d", me)
	if !gets {
		for i := range send {
			require.Equal(t, val(me, i), send[i], "rank %d: send changed", me)
		}
		return
	}
	for i := range recv {
		want := val(0, i)
		for r := 1; r < n; r++ {
			want = fold(want, val(r, i))
		}
		require.Equal(t, want, recv[i], "rank %d, element %d", me, i)
	}
}

func testReduceAt(t *testing.T, all bool) {
	eachMode(t, func(t *testing.T, c *mpi.Comm, ctx context.Context) {
		rs := roots(c.Size())
		if all {
			rs = []int{-1}
		}
		for _, root := range rs {
			for _, inPlace := range []bool{false, true} {
				for _, n := range []int{0, 1, 9, 1000} {
					t.Run(fmt.Sprintf("root=%d/inplace=%v/n=%d", root, inPlace, n), func(t *testing.T) {
						reduceAt(t, c, ctx, all, inPlace, n, root, comm.Sum, sumOf[float64], f64)
						reduceAt(t, c, ctx, all, inPlace, n, root, comm.Max, maxI32, i32)
						reduceAt(t, c, ctx, all, inPlace, n, root, comm.Sum, sumOf[complex128], c128)
					})
				}
			}
		}
	})
}

func TestDeviceReduceAt(t *testing.T)    { testReduceAt(t, false) }
func TestDeviceAllReduceAt(t *testing.T) { testReduceAt(t, true) }

// vAt runs GatherAt, ScatterAt or AllGatherAt with counts and checks the
// result.
func vAt[T comm.Number](t *testing.T, c *mpi.Comm, ctx context.Context, kind string, counts []int, root int, val func(r, i int) T) {
	me := c.Rank()
	off, total := offsetsOf(counts)
	dt := comm.DatatypeOf[T]()
	switch kind {
	case "Gather", "AllGather":
		send, sa := memOf[T](t, counts[me])
		for i := range send {
			send[i] = val(me, i)
		}
		gets := kind == "AllGather" || me == root
		var recv []T
		ra := uintptr(0)
		if gets {
			recv, ra = memOf[T](t, total)
		}
		var err error
		if kind == "Gather" {
			err = c.GatherAt(ctx, sa, counts, ra, dt, root)
		} else {
			err = c.AllGatherAt(ctx, sa, counts, ra, dt)
		}
		require.NoError(t, err, "rank %d", me)
		if !gets {
			return
		}
		for r, n := range counts {
			for i := range n {
				require.Equal(t, val(r, i), recv[off[r]+i], "rank %d: rank %d's element %d", me, r, i)
			}
		}
	case "Scatter":
		var send []T
		sa := uintptr(0)
		if me == root {
			send, sa = memOf[T](t, total)
			for r, n := range counts {
				for i := range n {
					send[off[r]+i] = val(r, i)
				}
			}
		}
		recv, ra := memOf[T](t, counts[me])
		require.NoError(t, c.ScatterAt(ctx, sa, counts, ra, dt, root), "rank %d", me)
		for i := range recv {
			require.Equal(t, val(me, i), recv[i], "rank %d, element %d", me, i)
		}
	}
}

func testVAt(t *testing.T, kind string) {
	eachMode(t, func(t *testing.T, c *mpi.Comm, ctx context.Context) {
		n := c.Size()
		rs := roots(n)
		if kind == "AllGather" {
			rs = []int{-1}
		}
		equal := make([]int, n)
		for r := range equal {
			equal[r] = 4
		}
		for _, root := range rs {
			for _, cs := range []struct {
				name   string
				counts []int
			}{{"uneven", unevenCounts(n)}, {"zero", make([]int, n)}, {"equal", equal}} {
				counts := cs.counts
				t.Run(fmt.Sprintf("root=%d/%s", root, cs.name), func(t *testing.T) {
					vAt(t, c, ctx, kind, counts, root, f64)
					vAt(t, c, ctx, kind, counts, root, i32)
					vAt(t, c, ctx, kind, counts, root, c128)
				})
			}
		}
	})
}

func TestDeviceGatherAt(t *testing.T)    { testVAt(t, "Gather") }
func TestDeviceScatterAt(t *testing.T)   { testVAt(t, "Scatter") }
func TestDeviceAllGatherAt(t *testing.T) { testVAt(t, "AllGather") }

// healthy checks that c still computes an AllReduce.
func healthy(t *testing.T, c *mpi.Comm, ctx context.Context) {
	t.Helper()
	n := c.Size()
	sum, err := comm.AllReduce(ctx, comm.Comm(c), []int64{int64(c.Rank())}, comm.Sum)
	require.NoError(t, err, "rank %d", c.Rank())
	require.Equal(t, int64(n*(n-1)/2), sum[0])
}

// badCalls are calls with one invalid argument where bad is true; valid
// ones pass addresses of untouchable memory, which the failing collective
// must not read.
func badCalls(t *testing.T, c *mpi.Comm) map[string]func(ctx context.Context, bad bool) error {
	n := c.Size()
	buf := untouchable(t, 1<<16)
	even := make([]int, n)
	for r := range even {
		even[r] = 2
	}
	return map[string]func(ctx context.Context, bad bool) error{
		"negative count": func(ctx context.Context, bad bool) error {
			count := 3
			if bad {
				count = -1
			}
			return c.BcastAt(ctx, buf, count, comm.Float64, 0)
		},
		"root out of range": func(ctx context.Context, bad bool) error {
			root := 0
			if bad {
				root = n + 5
			}
			return c.ReduceAt(ctx, buf, buf+4096, 8, comm.Int32, comm.Sum, root)
		},
		"negative root": func(ctx context.Context, bad bool) error {
			root := n - 1
			if bad {
				root = -1
			}
			return c.ScatterAt(ctx, buf, even, buf+4096, comm.Int32, root)
		},
		"wrong number of counts": func(ctx context.Context, bad bool) error {
			counts := even
			if bad {
				counts = append(counts[:n:n], 2)
			}
			return c.GatherAt(ctx, buf, counts, buf+4096, comm.Complex128, 0)
		},
		"negative count in counts": func(ctx context.Context, bad bool) error {
			counts := even
			if bad {
				counts = append([]int(nil), even...)
				counts[0] = -2
			}
			return c.AllGatherAt(ctx, buf, counts, buf+4096, comm.Float64)
		},
		"user op": func(ctx context.Context, bad bool) error {
			op := comm.Sum
			if bad {
				op = comm.User
			}
			return c.AllReduceAt(ctx, buf, buf+4096, 4, comm.Float64, op)
		},
		"op undefined on the datatype": func(ctx context.Context, bad bool) error {
			op := comm.Sum
			if bad {
				op = comm.BXor
			}
			return c.AllReduceAt(ctx, buf, buf+4096, 4, comm.Float64, op)
		},
		"invalid datatype": func(ctx context.Context, bad bool) error {
			dt := comm.Int32
			if bad {
				dt = comm.Datatype(99)
			}
			return c.ScatterAt(ctx, buf, even, buf+4096, dt, 0)
		},
		"address 0": func(ctx context.Context, bad bool) error {
			send := buf
			if bad {
				send = 0
			}
			return c.AllGatherAt(ctx, send, even, buf+4096, comm.Int32)
		},
		"overlapping send and recv": func(ctx context.Context, bad bool) error {
			recv := buf + 4096
			if bad {
				recv = buf + 8
			}
			return c.AllReduceAt(ctx, buf, recv, 4, comm.Float64, comm.Sum)
		},
		"recv 0 on root": func(ctx context.Context, bad bool) error {
			recv := buf + 4096
			if bad {
				recv = 0
			}
			return c.GatherAt(ctx, buf, even, recv, comm.Float64, 0)
		},
	}
}

// TestDeviceBadInputs: an invalid argument on one rank (the last; root
// for a recv only root uses) is an ArgError naming it on every rank with
// the check on: never a hang, and no buffer read. With the check off only
// the rank itself can know, so every rank passes it and gets its own
// ArgError (a recv only root uses is left out: the others would wait in
// MPI for the root that refused).
func TestDeviceBadInputs(t *testing.T) {
	c := splitAll(t)
	n, me := c.Size(), c.Rank()
	calls := badCalls(t, c)
	for _, what := range sortedNames(calls) {
		call := calls[what]
		badRank := n - 1
		if what == "recv 0 on root" {
			badRank = 0
		}
		for _, polled := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/polled=%v", what, polled), func(t *testing.T) {
				ctx := context.Background()
				if polled {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Minute)
					defer cancel()
				}
				c.SetCheck(true)
				err := call(ctx, me == badRank)
				var ae *comm.ArgError
				require.ErrorAs(t, err, &ae, "rank %d", me)
				require.ErrorIs(t, err, comm.ErrInvalidArg)
				assert.Equal(t, badRank, ae.Rank, "rank %d: %v", me, err)
				healthy(t, c, ctx)

				if what != "recv 0 on root" {
					c.SetCheck(false)
					err = call(ctx, true)
					c.SetCheck(true)
					require.ErrorAs(t, err, &ae, "rank %d, check off", me)
					assert.Equal(t, me, ae.Rank)
					healthy(t, c, ctx)
				}
			})
		}
	}
}

func sortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// TestDeviceMismatch: arguments that differ across ranks are the same
// MismatchError on every rank with the check on, and no buffer is read.
func TestDeviceMismatch(t *testing.T) {
	c := splitAll(t)
	n, me := c.Size(), c.Rank()
	if n == 1 {
		t.Skip("needs 2 ranks")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	buf := untouchable(t, 1<<16)
	var mm *comm.MismatchError

	err := c.AllReduceAt(ctx, buf, buf+4096, me+1, comm.Float64, comm.Sum)
	require.ErrorAs(t, err, &mm, "rank %d", me)
	assert.Contains(t, mm.Detail, "count: rank 0 has 1, rank 1 has 2")
	healthy(t, c, ctx)

	err = c.BcastAt(ctx, buf, 2, comm.Int32, me%2)
	require.ErrorAs(t, err, &mm, "rank %d", me)
	assert.Contains(t, mm.Detail, "root")
	healthy(t, c, ctx)

	// BcastAt on rank 0, a Bcast of a Go slice elsewhere.
	if me == 0 {
		err = c.BcastAt(ctx, buf, 2, comm.Int32, 0)
	} else {
		err = c.ReduceAt(ctx, buf, buf+4096, 2, comm.Int32, comm.Sum, 0)
	}
	require.ErrorAs(t, err, &mm, "rank %d", me)
	assert.Contains(t, mm.Detail, "call: rank 0 has Bcast")
	healthy(t, c, ctx)

	// Counts that add up alike but differ: the last rank swaps two.
	counts := make([]int, n)
	for r := range counts {
		counts[r] = r + 1
	}
	if me == n-1 {
		counts[0], counts[1] = counts[1], counts[0]
	}
	for _, call := range []func() error{
		func() error { return c.GatherAt(ctx, buf, counts, buf+4096, comm.Int32, 0) },
		func() error { return c.ScatterAt(ctx, buf+4096, counts, buf, comm.Int32, n-1) },
		func() error { return c.AllGatherAt(ctx, buf, counts, buf+4096, comm.Int32) },
	} {
		err := call()
		require.ErrorAs(t, err, &mm, "rank %d", me)
		assert.Contains(t, mm.Detail, fmt.Sprintf("counts: rank 0 has %v", append([]int{1, 2}, counts[2:]...)))
		assert.Contains(t, mm.Detail, fmt.Sprintf("rank %d has", n-1))
		healthy(t, c, ctx)
	}

	// Totals differ: rank 0 passes one more element for itself.
	if me == 0 {
		counts = append([]int(nil), counts...)
		counts[0]++
	}
	err = c.AllGatherAt(ctx, buf, counts, buf+4096, comm.Int32)
	require.ErrorAs(t, err, &mm, "rank %d", me)
	assert.Contains(t, mm.Detail, "count")
	healthy(t, c, ctx)
}

// TestDeviceLargeCounts: the v-variants refuse counts past MPI's ints on
// every rank (errors.ErrUnsupported), before any memory is read, with the
// check on and off.
func TestDeviceLargeCounts(t *testing.T) {
	c := splitAll(t)
	n := c.Size()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	counts := make([]int, n)
	for r := range counts {
		counts[r] = 1 << 31
	}
	// Addresses never read: far apart, past anything mapped.
	send, recv := uintptr(1)<<40, uintptr(1)<<44
	for _, check := range []bool{true, false} {
		c.SetCheck(check)
		for i, call := range []func() error{
			func() error { return c.GatherAt(ctx, send, counts, recv, comm.Float64, 0) },
			func() error { return c.ScatterAt(ctx, recv, counts, send, comm.Float64, 0) },
			func() error { return c.AllGatherAt(ctx, send, counts, recv, comm.Float64) },
		} {
			err := call()
			require.ErrorIs(t, err, errors.ErrUnsupported, "call %d, check %v, rank %d", i, check, c.Rank())
			require.NoError(t, c.Barrier(ctx))
		}
	}
	c.SetCheck(true)
	healthy(t, c, ctx)
}

// TestDeviceCanceled: a collective with a canceled ctx returns an error
// wrapping context.Canceled and comm.ErrBroken on every rank, before MPI
// starts anything, and the communicator stays broken.
func TestDeviceCanceled(t *testing.T) {
	for _, check := range []bool{true, false} {
		t.Run(fmt.Sprintf("check=%v", check), func(t *testing.T) {
			c := splitAll(t)
			c.SetCheck(check)
			buf, addr := memOf[float64](t, 4)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := c.AllReduceAt(ctx, addr, addr, len(buf), comm.Float64, comm.Sum)
			require.ErrorIs(t, err, context.Canceled, "rank %d", c.Rank())
			require.ErrorIs(t, err, comm.ErrBroken)
			err = c.GatherAt(context.Background(), addr, make([]int, c.Size()), addr, comm.Float64, 0)
			require.ErrorIs(t, err, comm.ErrBroken)
			require.NoError(t, world.Barrier(context.Background()))
		})
	}
}

// A device collective called with a context that has ended returns the
// context's error, in words that name the call and the rank, as the
// collectives on Go memory do (comm/commtest's Cancel/Collectives), with
// the check on and off; each call breaks its own communicator.
func TestDeviceCollectivesCanceled(t *testing.T) {
	n, r := world.Size(), world.Rank()
	counts := make([]int, n)
	for i := range counts {
		counts[i] = 2
	}
	_, src := memOf[float64](t, 2*n)
	_, dst := memOf[float64](t, 2*n)
	calls := []struct {
		name string
		call func(c *mpi.Comm, ctx context.Context) error
	}{
		{"BcastAt", func(c *mpi.Comm, ctx context.Context) error { return c.BcastAt(ctx, src, 2, comm.Float64, 0) }},
		{"ReduceAt", func(c *mpi.Comm, ctx context.Context) error {
			return c.ReduceAt(ctx, src, dst, 2, comm.Float64, comm.Sum, 0)
		}},
		{"AllReduceAt", func(c *mpi.Comm, ctx context.Context) error {
			return c.AllReduceAt(ctx, src, dst, 2, comm.Float64, comm.Sum)
		}},
		{"GatherAt", func(c *mpi.Comm, ctx context.Context) error {
			return c.GatherAt(ctx, src, counts, dst, comm.Float64, 0)
		}},
		{"ScatterAt", func(c *mpi.Comm, ctx context.Context) error {
			return c.ScatterAt(ctx, src, counts, dst, comm.Float64, 0)
		}},
		{"AllGatherAt", func(c *mpi.Comm, ctx context.Context) error {
			return c.AllGatherAt(ctx, src, counts, dst, comm.Float64)
		}},
	}
	for _, check := range []bool{true, false} {
		for _, k := range calls {
			t.Run(fmt.Sprintf("%s/check=%v", k.name, check), func(t *testing.T) {
				c := splitAll(t)
				c.SetCheck(check)
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				err := k.call(c, ctx)
				require.ErrorIs(t, err, context.Canceled, "rank %d", r)
				assert.Contains(t, err.Error(), fmt.Sprintf("%s on rank %d: ", k.name, r))
			})
		}
	}
}
