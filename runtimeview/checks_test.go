package runtimeview_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
)

// checkView exercises every API of rt on whatever backend it runs, with
// expected values computed here from the rank and size alone. It is called
// on every rank; the returned function checks, after rt.Close, that the
// callbacks it stacked ran once each, last first.
func checkView(t *testing.T, ctx context.Context, rt *runtimeview.RuntimeView) (afterClose func()) {
	t.Helper()
	size, rank := rt.Size(), rt.Rank()
	require.GreaterOrEqual(t, size, 1)
	require.True(t, rank >= 0 && rank < size, "rank %d of %d", rank, size)
	require.Equal(t, size, rt.Comm().Size())
	require.Equal(t, rank, rt.Comm().Rank())

	// Resource sets: one per rank, available everywhere without further
	// communication. Each rank's host name is compared with the name that
	// rank reads itself and sends through a separate collective.
	hostname, err := os.Hostname()
	require.NoError(t, err)
	hosts, err := runtimeview.AllGatherValues(ctx, rt, hostname)
	require.NoError(t, err)
	for i := range size {
		rs := rt.ResourceSet(i)
		assert.Equal(t, i, rs.Rank(), "rank %d: ResourceSet(%d)", rank, i)
		assert.Equal(t, i == rank, rs.IsMine(), "rank %d: ResourceSet(%d).IsMine", rank, i)
		assert.Equal(t, i, rs.RAM().Rank())
		assert.Same(t, rs, rt.ResourceSet(i), "built once")
		assert.Equal(t, hosts[i], rs.Host().Hostname, "rank %d: host of rank %d", rank, i)
		assert.NotZero(t, rs.RAM().TotalBytes(), "rank %d: RAM of rank %d", rank, i)
		assert.LessOrEqual(t, rs.RAM().AvailableBytes(), rs.RAM().TotalBytes())
		assert.NotZero(t, rs.CPU().LogicalCores)
		assert.NotNil(t, rs.GPUs())
	}
	assert.Same(t, rt.ResourceSet(rank), rt.MyResourceSet())
	assert.Panics(t, func() { rt.ResourceSet(size) })
	assert.Panics(t, func() { rt.ResourceSet(-1) })

	// AllGather with a different length on every rank: rank r sends r+1
	// elements r*100, r*100+1, ...
	mine := make([]int32, rank+1)
	for k := range mine {
		mine[k] = int32(rank*100 + k)
	}
	parts, err := runtimeview.AllGather(ctx, rt, mine)
	require.NoError(t, err)
	require.Len(t, parts, size)
	for r, p := range parts {
		require.Len(t, p, r+1, "part of rank %d", r)
		for k, v := range p {
			assert.Equal(t, int32(r*100+k), v, "part %d element %d", r, k)
		}
	}

	// AllReduce: element k of rank r is r+k (and r*0.5 in float64).
	ints := []int64{int64(rank), int64(rank + 1), int64(rank + 2)}
	sum, err := runtimeview.AllReduce(ctx, rt, ints, comm.Sum)
	require.NoError(t, err)
	mx, err := runtimeview.AllReduce(ctx, rt, ints, comm.Max)
	require.NoError(t, err)
	tri := int64(size * (size - 1) / 2)
	assert.Equal(t, []int64{tri, tri + int64(size), tri + 2*int64(size)}, sum)
	assert.Equal(t, []int64{int64(size - 1), int64(size), int64(size + 1)}, mx)
	fl := []float64{float64(rank) * 0.5}
	require.NoError(t, runtimeview.AllReduceTo(ctx, rt, fl, fl, comm.Sum))
	assert.InDelta(t, float64(tri)*0.5, fl[0], 1e-12)

	// Encoded values.
	type info struct {
		Rank int
		Name string
	}
	infos, err := runtimeview.AllGatherValues(ctx, rt, info{rank, fmt.Sprintf("r%d", rank)})
	require.NoError(t, err)
	for r, in := range infos {
		assert.Equal(t, info{r, fmt.Sprintf("r%d", r)}, in)
	}
	concat, err := runtimeview.AllReduceValue(ctx, rt, fmt.Sprint(rank), func(a, b string) string { return a + "," + b })
	require.NoError(t, err)
	want := make([]string, size)
	for r := range want {
		want[r] = fmt.Sprint(r)
	}
	assert.Equal(t, strings.Join(want, ","), concat, "folded in rank order")

	// Rooted collectives through each rank's resource set.
	for root := range size {
		ram := rt.ResourceSet(root).RAM()
		g, ok, err := resourceset.Gather(ctx, ram, []int64{int64(rank), int64(rank * rank)})
		require.NoError(t, err)
		assert.Equal(t, rank == root, ok)
		if rank == root {
			require.Len(t, g, size)
			for r := range size {
				assert.Equal(t, []int64{int64(r), int64(r * r)}, g[r])
			}
		} else {
			assert.Nil(t, g)
		}
		red, ok, err := resourceset.Reduce(ctx, ram, []float64{1, float64(rank)}, comm.Sum)
		require.NoError(t, err)
		assert.Equal(t, rank == root, ok)
		if ok {
			assert.Equal(t, []float64{float64(size), float64(tri)}, red)
		} else {
			assert.Nil(t, red)
		}
		b, err := resourceset.BcastValue(ctx, ram, []uint16{uint16(rank), 7})
		require.NoError(t, err)
		assert.Equal(t, []uint16{uint16(root), 7}, b)
		var send [][]float32
		if rank == root {
			for r := range size {
				send = append(send, slices.Repeat([]float32{float32(root*10 + r)}, r))
			}
		}
		part, err := resourceset.Scatter(ctx, ram, send)
		require.NoError(t, err)
		assert.Len(t, part, rank)
		for _, v := range part {
			assert.Equal(t, float32(root*10+rank), v)
		}
	}

	// Barrier completes on every rank (TestBarrierOrders checks with shared
	// memory that nobody leaves early).
	require.NoError(t, rt.Barrier(ctx))

	// Callbacks run at Close, last first, exactly once.
	var mu sync.Mutex
	var order []string
	for _, name := range []string{"first", "second", "third"} {
		require.NoError(t, rt.StackCallback(func() error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name)
			return nil
		}))
	}
	mu.Lock()
	assert.Empty(t, order, "nothing runs before Close")
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"third", "second", "first"}, order, "rank %d", rank)
		assert.ErrorContains(t, rt.StackCallback(func() error { return nil }), "stack closed")
	}
}
