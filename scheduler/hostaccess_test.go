package scheduler_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/scheduler"
)

// incCl adds 1 to every element of its one float64 vector.
var incCl = &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
	v := scheduler.VectorOf[float64](c, 0)
	for i := range v {
		v[i]++
	}
	return nil
}}

// copiesIn counts the copies from RAM to device node n so far.
func copiesIn(s *scheduler.Scheduler, n scheduler.MemoryNode) int64 {
	for _, st := range s.Transfers() {
		if st.From == scheduler.RAM && st.To == n {
			return st.Count
		}
	}
	return 0
}

// TestHostWriteThroughData: Data is the host's read-write access - what
// the program writes through it after WaitAll reaches the device's next
// task, which copies the data in again - while Fetch is a read access
// that leaves the device's copy valid (a device task after it copies
// nothing).
func TestHostWriteThroughData(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 1 << 20, Bandwidth: -1}))
	dev := simOnly(t, s)
	v := make([]float64, 4)
	h, err := s.RegisterVector(v, scheduler.Named("v"))
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, incCl, scheduler.RW(h), scheduler.InContext(dev)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, []float64{1, 1, 1, 1}, v)

	// Fetch reads: the device's copy stays valid, no copy in.
	in := copiesIn(s, 1)
	got, err := h.Fetch(ctx)
	require.NoError(t, err)
	require.Equal(t, []float64{1, 1, 1, 1}, got)
	require.NoError(t, s.Submit(ctx, incCl, scheduler.RW(h), scheduler.InContext(dev)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, []float64{2, 2, 2, 2}, v)
	require.Equal(t, in, copiesIn(s, 1), "a device task after Fetch copied the data in again")

	// Data is a write: the device task after it sees the host's values.
	d := h.Data().([]float64)
	for i := range d {
		d[i] = 100
	}
	require.NoError(t, s.Submit(ctx, incCl, scheduler.RW(h), scheduler.InContext(dev)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, []float64{101, 101, 101, 101}, v, "the device task did not see the host's write through Data")
	require.Equal(t, in+1, copiesIn(s, 1))

	// The registered slice itself, written after Data, and a reader on
	// the device.
	h.Data()
	for i := range v {
		v[i] = 7
	}
	seen := make(chan []float64, 1)
	rd := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error {
		seen <- append([]float64(nil), scheduler.VectorOf[float64](c, 0)...)
		return nil
	}}
	require.NoError(t, s.Submit(ctx, rd, scheduler.R(h), scheduler.InContext(dev)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, []float64{7, 7, 7, 7}, <-seen)
}

// TestHostWriteThroughDataTile: Data on a tile is the tile's write too.
func TestHostWriteThroughDataTile(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 1 << 20, Bandwidth: -1}))
	dev := simOnly(t, s)
	v := make([]float64, 8)
	h, err := s.RegisterVector(v)
	require.NoError(t, err)
	tiles, err := h.Partition(scheduler.Blocks(4, 1))
	require.NoError(t, err)
	tile := tiles[1][0]
	require.NoError(t, s.Submit(ctx, incCl, scheduler.RW(tile), scheduler.InContext(dev)))
	require.NoError(t, s.WaitAll(ctx))
	d := tile.Data().([]float64)
	for i := range d {
		d[i] = 10
	}
	require.NoError(t, s.Submit(ctx, incCl, scheduler.RW(tile), scheduler.InContext(dev)))
	require.NoError(t, s.WaitAll(ctx))
	require.NoError(t, h.Unpartition())
	require.Equal(t, []float64{0, 0, 0, 0, 11, 11, 11, 11}, h.Data())
}

// slowCopy sets up a device whose copies of v (8 MiB at 100 MB/s) take
// about 84 ms, and leaves v's newest version on it.
func slowCopy(t *testing.T) (*scheduler.Scheduler, *scheduler.Handle, []float64) {
	t.Helper()
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 64 << 20, Bandwidth: 100e6}))
	dev := simOnly(t, s)
	v := make([]float64, 1<<20)
	h, err := s.RegisterVector(v, scheduler.Named("v"))
	require.NoError(t, err)
	tk := scheduler.NewTask(incCl, scheduler.RW(h), scheduler.InContext(dev))
	require.NoError(t, s.SubmitTask(ctx, tk))
	require.NoError(t, tk.Wait(ctx))
	return s, h, v
}

// slowCopyTime is a little less than slowCopy's copy time (8 MiB at
// 100 MB/s: 84 ms).
const slowCopyTime = 70 * time.Millisecond

// TestCanceledFetchLetsItsCopyEnd: a Fetch, WaitAll or Unregister whose
// context ends while its copy to RAM is in flight returns the context's
// error only once that copy has ended: nothing writes the registered
// memory after the call returns (the race detector checks the reads).
func TestCanceledFetchLetsItsCopyEnd(t *testing.T) {
	calls := map[string]func(context.Context, *scheduler.Scheduler, *scheduler.Handle) error{
		"Fetch": func(ctx context.Context, _ *scheduler.Scheduler, h *scheduler.Handle) error {
			_, err := h.Fetch(ctx)
			return err
		},
		"WaitAll": func(ctx context.Context, s *scheduler.Scheduler, _ *scheduler.Handle) error {
			return s.WaitAll(ctx)
		},
		"Unregister": func(ctx context.Context, _ *scheduler.Scheduler, h *scheduler.Handle) error {
			_, err := h.Unregister(ctx)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			s, h, v := slowCopy(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			t0 := time.Now()
			err := call(ctx, s, h)
			took := time.Since(t0)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.GreaterOrEqual(t, took, slowCopyTime, "returned while its copy was in flight")
			// Read what the copy wrote: a race with a copy still in
			// flight if the call returned too early.
			require.Equal(t, 1.0, v[0])
			require.Equal(t, 1.0, v[len(v)-1])
			got, err := h.Fetch(testCtx(t))
			if name == "Unregister" {
				require.NoError(t, err, "h stays registered")
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, 1.0, got.([]float64)[0])
		})
	}
}

// TestNewHonorsContextWhileMeasuringTheLink: New's context bounds the
// measurement of a device's link (here a copy takes 30 s): New returns
// soon after it ends, with an error naming the device, and leaves no
// goroutine behind (the device's copy engines stopped).
func TestNewHonorsContextWhileMeasuringTheLink(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(t.TempDir()),
		scheduler.WithGetenv(func(string) string { return "" }),
		scheduler.WithSimDevices(scheduler.SimDevice{Latency: 30 * time.Second}))
	if s != nil {
		s.Close()
	}
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "measuring the link between RAM and sim0")
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines left behind:\n%s", n-before, buf[:runtime.Stack(buf, true)])
	}
}

// TestLinkMeasurementBounded: on a slow link (1 MB/s) the measurement
// moves what the link copies in a bounded time - a probe, then about
// linkTarget's worth, each way, a few times - and still finds the link's
// bandwidth. Before, it copied 4 MiB each way three times whatever the
// link: 24 MiB, 25 s at 1 MB/s.
func TestLinkMeasurementBounded(t *testing.T) {
	dev, err := accel.NewSim(0, accel.SimConfig{Memory: 64 << 20, Bandwidth: 1e6})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithDevices(dev))
	for _, l := range s.Bus() {
		require.InDelta(t, 1e6, l.Bandwidth, 0.2e6, "%+v", l)
	}
	in, out, _ := dev.Moved()
	assert.Less(t, in+out, int64(1<<20), "bytes the measurement copied in and out")
	assert.Positive(t, in)
	assert.Positive(t, out)
}
