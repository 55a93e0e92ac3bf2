package scheduler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDMDACalibratesEveryKind is the regression test for a worker kind
// that never calibrated: dmda queues a task that is not calibrated for
// every kind that may run it in a shared FIFO, which every worker popped
// from its head, so that a program submitting a small and a large task
// at a time (a WaitAll after each pair) had its simulated device's
// worker take the small one nearly every time: after 40 pairs it had run
// the large task once, the model of the large task was never calibrated
// for the device, and dmda never placed it by the model (helper trial of
// dmda with WithSimDevices). A worker takes from the FIFO the first task
// that its kind has not calibrated, as StarPU's dmda gives an
// uncalibrated task to a worker whose kind it must calibrate, and the
// head otherwise.
func TestDMDACalibratesEveryKind(t *testing.T) {
	// Footprint 1 is calibrated on the device, 2 on the CPU.
	calibrated := map[uint64]WorkerKind{1: SimWorker, 2: CPUWorker}
	p := newDMDA(PolicyConfig{
		Estimate: func(t *Task, k WorkerKind) (float64, bool) { return 1000, calibrated[t.footprint] == k },
		Now:      func() int64 { return 0 },
	})
	p.AddWorkers(WorkerInfo{ID: 0, Kind: CPUWorker}, WorkerInfo{ID: 1, Kind: SimWorker})
	cl := &Codelet{Name: "k", CPU: func(*Call) error { return nil }, Model: &PerfModel{Name: "k"}}
	small, large := &Task{Codelet: cl, footprint: 1}, &Task{Codelet: cl, footprint: 2}
	p.Push(small, -1)
	p.Push(large, -1)
	assert.Equal(t, large.footprint, p.Pop(1).footprint, "the device's worker takes the task it has not calibrated")
	assert.Equal(t, small.footprint, p.Pop(0).footprint)

	// Calibrated for both kinds, or for neither: the head, as before.
	calibrated = map[uint64]WorkerKind{}
	a, b := &Task{Codelet: cl, footprint: 3}, &Task{Codelet: cl, footprint: 4}
	p.Push(a, -1)
	p.Push(b, -1)
	assert.Equal(t, a.footprint, p.Pop(1).footprint)
	assert.Equal(t, b.footprint, p.Pop(0).footprint)

	// A task of higher priority is not passed over. (A task one kind has
	// calibrated goes to the queue of a worker of the other kind while
	// that queue has fewer than calibQueued tasks: the first two fill
	// them, and the next two go to the FIFO.)
	calibrated = map[uint64]WorkerKind{1: SimWorker, 2: CPUWorker}
	toCPU, toSim := &Task{Codelet: cl, footprint: 1}, &Task{Codelet: cl, footprint: 2}
	require.Equal(t, 0, p.Push(toCPU, -1))
	require.Equal(t, 1, p.Push(toSim, -1))
	urgent, later := &Task{Codelet: cl, footprint: 1, Priority: 5}, &Task{Codelet: cl, footprint: 2}
	p.Push(urgent, -1)
	p.Push(later, -1)
	require.Same(t, toSim, p.Pop(1))
	require.Same(t, toCPU, p.Pop(0))
	require.Equal(t, urgent.Priority, p.Pop(1).Priority)
	require.Equal(t, later.Priority, p.Pop(0).Priority)
	assert.Nil(t, p.Pop(0))
}

// TestDMDAUnmodeledSkipsTheModel: a task whose codelet has no model is
// never calibrated, so dmda gives it to the shared FIFO, and a worker
// pops it, without asking Estimate and without reading the workers'
// queues (lines the workers write: a third of the per-task cost of
// independent tasks under dmda, BenchmarkTasks/indep/dmda).
func TestDMDAUnmodeledSkipsTheModel(t *testing.T) {
	asked := 0
	p := newDMDA(PolicyConfig{
		Estimate: func(*Task, WorkerKind) (float64, bool) { asked++; return 1000, true },
		Now:      func() int64 { return 0 },
	})
	p.AddWorkers(WorkerInfo{ID: 0, Kind: CPUWorker}, WorkerInfo{ID: 1, Kind: CPUWorker})
	plain := &Task{Codelet: &Codelet{Name: "plain", CPU: func(*Call) error { return nil }}}
	require.Equal(t, AnyWorker, p.Push(plain, 0))
	require.Same(t, plain, p.Pop(1))
	assert.Zero(t, asked, "Estimate asked for a task without a model")

	modeled := &Task{Codelet: &Codelet{Name: "m", CPU: func(*Call) error { return nil }, Model: &PerfModel{Name: "m"}}}
	w := p.Push(modeled, -1)
	require.True(t, w == 0 || w == 1, "a calibrated task goes to a worker's queue, got %d", w)
	assert.NotZero(t, asked)
	require.Same(t, modeled, p.Pop(w))
}
