package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/scheduler"
)

// closeWithin closes s and fails the test if Close has not returned
// within d (it would block for ever on a task no worker completes).
func closeWithin(t *testing.T, s *scheduler.Scheduler, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Close still blocked after %v", d)
		return nil
	}
}

// newSchedBounded is newSched whose cleanup gives up on a Close that
// blocks, so that a test of a hang fails with its message and the
// package's other tests go on.
func newSchedBounded(t *testing.T, opts ...scheduler.Option) *scheduler.Scheduler {
	t.Helper()
	opts = append([]scheduler.Option{scheduler.WithPerfModelDir(t.TempDir()), scheduler.WithGetenv(func(string) string { return "" })}, opts...)
	s, err := scheduler.New(testCtx(t), opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { _ = s.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("cleanup: Close still blocked after 10s")
		}
	})
	return s
}

// devOnly returns a context of the scheduler's device workers.
func devOnly(t *testing.T, s *scheduler.Scheduler) *scheduler.Context {
	t.Helper()
	var ids []int
	for _, w := range s.Workers() {
		if w.Kind != scheduler.CPUWorker {
			ids = append(ids, w.ID)
		}
	}
	c, err := s.NewContext("dev", scheduler.ContextWorkers(ids...))
	require.NoError(t, err)
	return c
}

var incFirst = &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
	scheduler.VectorOf[float64](c, 0)[0]++
	return nil
}}

// TestWithDevicesNil: a nil device is an ErrBadOption naming the
// argument, not a panic.
func TestWithDevicesNil(t *testing.T) {
	dev, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
	require.NoError(t, err)
	defer dev.Close()
	s, err := scheduler.New(testCtx(t), scheduler.WithPerfModelDir(t.TempDir()), scheduler.WithGetenv(func(string) string { return "" }),
		scheduler.WithDevices(dev, nil))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	require.Nil(t, s)
	require.Contains(t, err.Error(), "WithDevices: device 1 of 2 is nil")
}

// TestClosedDevice: copies to a device closed before New (whose bus
// model was saved, so New issues no copy) or while tasks wait fail the
// tasks with an error naming the device and wrapping accel.ErrClosed;
// WaitAll reports them and Close returns. Without a saved bus model, New
// refuses the closed device.
func TestClosedDevice(t *testing.T) {
	cfg := accel.SimConfig{Memory: 1 << 20, Bandwidth: -1}
	t.Run("before New, not calibrated", func(t *testing.T) {
		dev, err := accel.NewSim(0, cfg)
		require.NoError(t, err)
		require.NoError(t, dev.Close())
		_, err = scheduler.New(testCtx(t), scheduler.WithPerfModelDir(t.TempDir()), scheduler.WithGetenv(func(string) string { return "" }),
			scheduler.WithDevices(dev))
		require.ErrorIs(t, err, accel.ErrClosed)
		require.Contains(t, err.Error(), "sim0")
	})
	t.Run("before New", func(t *testing.T) {
		dir := t.TempDir()
		open, err := accel.NewSim(0, cfg) // saves the bus model of cfg's devices
		require.NoError(t, err)
		s := newSchedBounded(t, scheduler.WithPerfModelDir(dir), scheduler.WithWorkers(1), scheduler.WithDevices(open))
		require.NoError(t, s.Close())
		require.NoError(t, open.Close())

		dev, err := accel.NewSim(0, cfg)
		require.NoError(t, err)
		require.NoError(t, dev.Close())
		s = newSchedBounded(t, scheduler.WithPerfModelDir(dir), scheduler.WithWorkers(1), scheduler.WithDevices(dev))
		x := make([]float64, 8)
		h, err := s.RegisterVector(x, scheduler.Named("x"))
		require.NoError(t, err)
		require.NoError(t, s.Submit(testCtx(t), incFirst, scheduler.RW(h), scheduler.InContext(devOnly(t, s))))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = s.WaitAll(ctx)
		require.ErrorIs(t, err, accel.ErrClosed)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "the task never completed")
		require.Contains(t, err.Error(), `copying handle "x" from ram to sim0`)
		require.NoError(t, closeWithin(t, s, 10*time.Second))
		require.Equal(t, 0.0, x[0])
	})
	t.Run("while tasks wait", func(t *testing.T) {
		dev, err := accel.NewSim(0, cfg)
		require.NoError(t, err)
		s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithDevices(dev))
		dc := devOnly(t, s)
		started, gate := make(chan struct{}), make(chan struct{})
		block := &scheduler.Codelet{Name: "block", CPU: func(c *scheduler.Call) error {
			close(started)
			<-gate
			return nil
		}}
		hs := make([]*scheduler.Handle, 20)
		for i := range hs {
			hs[i], err = s.RegisterVector(make([]float64, 64), scheduler.Named(fmt.Sprintf("v%d", i)))
			require.NoError(t, err)
		}
		ctx := testCtx(t)
		// The device's only worker holds the first task while the device
		// closes: the others' copies are issued after Close.
		require.NoError(t, s.Submit(ctx, block, scheduler.RW(hs[0]), scheduler.InContext(dc)))
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the first task did not start")
		}
		for _, h := range hs[1:] {
			for range 5 {
				require.NoError(t, s.Submit(ctx, incFirst, scheduler.RW(h), scheduler.InContext(dc)))
			}
		}
		require.NoError(t, dev.Close())
		close(gate)
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = s.WaitAll(wctx)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "tasks never completed: %v", err)
		require.ErrorIs(t, err, accel.ErrClosed)
		require.ErrorIs(t, err, scheduler.ErrCanceled, "the tasks after a failed one are canceled")
		require.Contains(t, err.Error(), "to sim0: accel: device closed")
		_ = closeWithin(t, s, 10*time.Second) // the write-back of v0 fails too
	})
}

// TestUnrunnableInContext: a task that no worker of its context can run
// is refused at Submit, naming the task, the handle, the context and the
// fix, and changes nothing.
func TestUnrunnableInContext(t *testing.T) {
	s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{}))
	dc := devOnly(t, s)
	ctx := testCtx(t)
	v := 41
	hv, err := s.RegisterValue(&v, scheduler.Named("v"))
	require.NoError(t, err)
	strs := []string{"a", "b"}
	hs, err := s.RegisterVector(strs, scheduler.Named("strs"))
	require.NoError(t, err)
	x := make([]float64, 4)
	hx, err := s.RegisterVector(x, scheduler.Named("x"))
	require.NoError(t, err)
	incv := &scheduler.Codelet{Name: "incv", CPU: func(c *scheduler.Call) error { *scheduler.ValueOf[*int](c, 0)++; return nil }}
	up := &scheduler.Codelet{Name: "up", CPU: func(c *scheduler.Call) error { scheduler.VectorOf[string](c, 0)[0] = "A"; return nil }}
	for i, tc := range []struct {
		cl   *scheduler.Codelet
		args []scheduler.Arg
		want []string
	}{
		{incv, []scheduler.Arg{scheduler.RW(hv)}, []string{`task "incv"`, `handle "v" is a value handle`, `context "dev"`, "(1 sim)", `add a CPU worker to "dev"`}},
		{up, []scheduler.Arg{scheduler.RW(hs)}, []string{`task "up"`, `handle "strs" holds []string`, `context "dev"`, "vectors and matrices of numbers", `add a CPU worker to "dev"`}},
		{incFirst, []scheduler.Arg{scheduler.R(hx), scheduler.RW(hv)}, []string{`task "inc"`, `handle "v"`}},
	} {
		err := s.Submit(ctx, tc.cl, append(tc.args, scheduler.InContext(dc))...)
		require.ErrorIs(t, err, scheduler.ErrNoImplementation, "case %d", i)
		for _, w := range tc.want {
			require.Contains(t, err.Error(), w, "case %d", i)
		}
	}
	// Vectors of numbers go to the device; the global context's CPU
	// worker runs the others.
	require.NoError(t, s.Submit(ctx, incFirst, scheduler.RW(hx), scheduler.InContext(dc)))
	require.NoError(t, s.Submit(ctx, incv, scheduler.RW(hv)))
	require.NoError(t, s.WaitAll(ctx))
	require.NoError(t, closeWithin(t, s, 10*time.Second))
	require.Equal(t, 42, v)
	require.Equal(t, 1.0, x[0])
	require.Equal(t, []string{"a", "b"}, strs)
}

// TestCloseLendsWorkerOfMissingKind: a task queued in a context whose
// workers then change so that none can run it (its CPU worker removed)
// does not block Close: Close lends the context a worker of the kind it
// lacks, as it lends one to a context without workers.
func TestCloseLendsWorkerOfMissingKind(t *testing.T) {
	s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{}))
	var cpu, sim int
	for _, w := range s.Workers() {
		if w.Kind == scheduler.CPUWorker {
			cpu = w.ID
		} else {
			sim = w.ID
		}
	}
	mix, err := s.NewContext("mix", scheduler.ContextWorkers(cpu, sim))
	require.NoError(t, err)
	ctx := testCtx(t)
	a, b := 0, 0
	ha, err := s.RegisterValue(&a, scheduler.Named("a"))
	require.NoError(t, err)
	hb, err := s.RegisterValue(&b, scheduler.Named("b"))
	require.NoError(t, err)
	started, gate := make(chan struct{}), make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(c *scheduler.Call) error {
		close(started)
		<-gate
		*scheduler.ValueOf[*int](c, 0)++
		return nil
	}}
	incv := &scheduler.Codelet{Name: "incv", CPU: func(c *scheduler.Call) error { *scheduler.ValueOf[*int](c, 0)++; return nil }}
	require.NoError(t, s.Submit(ctx, block, scheduler.RW(ha), scheduler.InContext(mix)))
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking task did not start")
	}
	// The CPU worker is busy: the value task waits in "mix", then its
	// only worker that could run it leaves.
	require.NoError(t, s.Submit(ctx, incv, scheduler.RW(hb), scheduler.InContext(mix)))
	require.NoError(t, mix.RemoveWorkers(cpu))
	close(gate)
	require.NoError(t, closeWithin(t, s, 10*time.Second))
	require.Equal(t, 1, a)
	require.Equal(t, 1, b)
	var lent bool
	for _, r := range s.Resizes() {
		lent = lent || r.Reason == "close" && r.Worker == cpu && r.To == "mix"
	}
	require.True(t, lent, "Close lent the CPU worker to mix: %v", s.Resizes())
}

// TestMemoryLimitOnEveryDevice: WithCUDAMemoryLimit caps simulated
// devices too, given by WithDevices or WithSimDevices.
func TestMemoryLimitOnEveryDevice(t *testing.T) {
	const limit = 16 << 10
	dev, err := accel.NewSim(0, accel.SimConfig{Memory: 64 << 20})
	require.NoError(t, err)
	defer dev.Close()
	for _, tc := range []struct {
		name string
		opt  scheduler.Option
	}{
		{"WithDevices", scheduler.WithDevices(dev)},
		{"WithSimDevices", scheduler.WithSimDevices(scheduler.SimDevice{Memory: 64 << 20})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSchedBounded(t, scheduler.WithWorkers(1), tc.opt, scheduler.WithCUDAMemoryLimit(limit))
			dc := devOnly(t, s)
			ctx := testCtx(t)
			small, big := make([]float64, 1024), make([]float64, 32<<10) // 8 KiB fits, 256 KiB does not
			hs, err := s.RegisterVector(small, scheduler.Named("small"))
			require.NoError(t, err)
			hb, err := s.RegisterVector(big, scheduler.Named("big"))
			require.NoError(t, err)
			require.NoError(t, s.Submit(ctx, incFirst, scheduler.RW(hs), scheduler.InContext(dc)))
			require.NoError(t, s.WaitAll(ctx))
			require.NoError(t, s.Submit(ctx, incFirst, scheduler.RW(hb), scheduler.InContext(dc)))
			err = s.WaitAll(ctx)
			require.ErrorIs(t, err, scheduler.ErrDeviceMemory)
			require.Contains(t, err.Error(), fmt.Sprintf("which has %d", limit))
			require.NoError(t, closeWithin(t, s, 10*time.Second))
			require.Equal(t, 1.0, small[0])
			require.Equal(t, 0.0, big[0])
			require.Zero(t, dev.InUse(), "the scheduler freed what it allocated")
		})
	}
}

// TestDeviceErrorMessages: a codelet that no worker can run counts the
// device workers and gives the fix that applies; a device others fill
// says how much they hold and what to do.
func TestDeviceErrorMessages(t *testing.T) {
	t.Run("CUDA-only codelet", func(t *testing.T) {
		s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{}))
		h, err := s.RegisterVector(make([]float64, 4))
		require.NoError(t, err)
		gpuOnly := &scheduler.Codelet{Name: "gpuonly", CUDA: func(*scheduler.CUDACall) error { return nil }}
		err = s.Submit(testCtx(t), gpuOnly, scheduler.RW(h))
		require.ErrorIs(t, err, scheduler.ErrNoImplementation)
		require.Contains(t, err.Error(), `codelet "gpuonly" has only a CUDA implementation and there is no CUDA worker here (1 cpu, 1 sim, 0 cuda workers); give it a CPU function (CPU and sim workers run it)`)
		none := &scheduler.Codelet{Name: "none"}
		err = s.Submit(testCtx(t), none, scheduler.RW(h))
		require.ErrorIs(t, err, scheduler.ErrNoImplementation)
		require.Contains(t, err.Error(), `codelet "none" has no implementation here (1 cpu, 1 sim, 0 cuda workers); give it a CPU function`)
	})
	t.Run("device held by others", func(t *testing.T) {
		dev, err := accel.NewSim(0, accel.SimConfig{Memory: 4 << 20, Bandwidth: -1})
		require.NoError(t, err)
		defer dev.Close()
		s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithDevices(dev))
		held, err := dev.Alloc(3 << 20) // a resource set's buffer, say
		require.NoError(t, err)
		defer dev.Free(held)
		h, err := s.RegisterVector(make([]float64, 2<<20/8), scheduler.Named("x2MiB"))
		require.NoError(t, err)
		ctx := testCtx(t)
		require.NoError(t, s.Submit(ctx, incFirst, scheduler.RW(h), scheduler.InContext(devOnly(t, s))))
		err = s.WaitAll(ctx)
		require.ErrorIs(t, err, scheduler.ErrDeviceMemory)
		for _, w := range []string{`handle "x2MiB" needs 2097152 bytes on sim0`, "which has 4194304 bytes", "hold 3145728 bytes", "this scheduler 0", "use smaller tiles or a larger device"} {
			require.Contains(t, err.Error(), w)
		}
		require.NoError(t, closeWithin(t, s, 10*time.Second))
	})
}
