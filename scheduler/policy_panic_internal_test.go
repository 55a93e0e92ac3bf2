package scheduler

import (
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// callRecovering runs f and reports whether it panicked.
func callRecovering(f func()) (panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	f()
	return false
}

// returnsWithin reports whether f returns within d (it leaks f's
// goroutine otherwise: the lock it waits on is held for good).
func returnsWithin(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestDMDAPanicReleasesLocks: a panic inside dmda while it holds its
// lock of the loads (Push, Pop) or the shared FIFO's lock (popFallback)
// left the lock held; a Push that panics on a program's goroutine can be
// recovered - by callCPU for a Submit inside a task, by the testing
// package, which then runs the test's Cleanup and so the scheduler's
// Close - and every worker then blocked on the lock for ever, as did
// Close (the CI hang of TestDMDAPushWhileAddingWorkers' defect). The
// locks are released by defers: after the panic, the policy goes on.
func TestDMDAPanicReleasesLocks(t *testing.T) {
	var boom atomic.Bool
	calibrated := true
	// A fresh policy per case: before the fix, a case that fails leaves
	// its policy's lock held.
	newPolicy := func() *dmda {
		p := newDMDA(PolicyConfig{
			Estimate: func(*Task, WorkerKind) (float64, bool) {
				if boom.Load() && !calibrated {
					panic("estimate")
				}
				return 1000, calibrated
			},
			Now: func() int64 {
				if boom.Load() {
					panic("now")
				}
				return 0
			},
		})
		p.AddWorkers(workers(0, 1)...)
		return p
	}

	t.Run("Push", func(t *testing.T) {
		p := newPolicy()
		boom.Store(true)
		if !callRecovering(func() { p.Push(cpuTask(0), -1) }) {
			t.Fatal("Push did not panic")
		}
		boom.Store(false)
		if !returnsWithin(5*time.Second, func() { p.Push(cpuTask(0), -1) }) {
			t.Fatal("Push blocked after a panic inside Push: the lock of the loads was left held")
		}
	})
	t.Run("Pop", func(t *testing.T) {
		p := newPolicy()
		p.Push(cpuTask(0), -1)
		p.Push(cpuTask(0), -1)
		boom.Store(true)
		if !callRecovering(func() { p.Pop(0) }) && !callRecovering(func() { p.Pop(1) }) {
			t.Fatal("Pop did not panic")
		}
		boom.Store(false)
		if !returnsWithin(5*time.Second, func() { p.Push(cpuTask(0), -1) }) {
			t.Fatal("Push blocked after a panic inside Pop: the lock of the loads was left held")
		}
	})
	t.Run("popFallback", func(t *testing.T) {
		calibrated = false
		defer func() { calibrated = true }()
		p := newPolicy()
		p.Push(cpuTask(0), -1) // to the shared FIFO
		boom.Store(true)
		if !callRecovering(func() { p.Pop(0) }) {
			t.Fatal("Pop did not panic")
		}
		boom.Store(false)
		if !returnsWithin(5*time.Second, func() { p.Push(cpuTask(0), -1); p.Pop(1) }) {
			t.Fatal("Push or Pop blocked after a panic in popFallback: the shared FIFO's lock was left held")
		}
	})
}

// TestDMDAFailedPushKeepsLoadNonNegative: a Push that counted a task in
// a worker's load and then found the worker's queue closed (the worker
// left meanwhile, and RemoveWorkers reset its load) took the task's time
// back off the reset load, which went negative: the worker, once back,
// looked busy for less than nothing and dmda piled tasks on it.
func TestDMDAFailedPushKeepsLoadNonNegative(t *testing.T) {
	var p *dmda
	removed := false
	p = newDMDA(PolicyConfig{
		Estimate: func(*Task, WorkerKind) (float64, bool) { return 1000, true },
		Now:      func() int64 { return 0 },
		Prefetch: func(_ *Task, w int) {
			// Between the placement and the queuing: the worker
			// leaves, as it may at its safe point.
			if !removed {
				removed = true
				p.RemoveWorkers(w)
			}
		},
	})
	p.AddWorkers(workers(0, 1)...)
	p.Push(cpuTask(0), -1)
	if !removed {
		t.Fatal("the hook did not run")
	}
	p.AddWorkers(workers(0, 1)...)
	for id, l := range p.load {
		if l.queued < 0 || math.IsNaN(l.queued) {
			t.Errorf("worker %d: queued load %v after a push that found its queue closed", id, l.queued)
		}
	}
}
