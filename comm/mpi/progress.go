//go:build mpi

package mpi

/*
#include "pz_mpi.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"time"
)

// progress is the process's one progress engine for requests that someone
// waits on through their Done channel (comm.WaitAny, WaitSome and other
// waits on many requests): a goroutine that tests every such request in
// turn, and exists while any is pending. MPI makes progress only inside
// MPI calls, so without it a set of requests would need a poller each.
type progress struct {
	mu      sync.Mutex
	pending []*request
	running bool
	stopped bool          // shutdown: no more MPI calls
	idle    sync.Cond     // signaled when running turns false
	kick    chan struct{} // capacity 1: a request was added
}

// shutdown stops the engine before MPI_Finalize: it waits for the loop
// to leave its MPI calls and keeps it from starting again. Requests still
// pending never complete.
func (p *progress) shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.idle.L == nil {
		p.idle.L = &p.mu
	}
	for p.running {
		p.idle.Wait()
	}
}

// Spinning and backoff of the engine: it yields while requests complete,
// and sleeps up to progressMaxSleep after progressSpins rounds without one.
// A Go timer on an otherwise idle P fires about 1 ms late (the runtime's
// netpoll waits whole milliseconds), so while the rank's workers are in
// kernels these sleeps last about 1 ms. Shorter naps on the thread
// (nanosleep, about 70-90 µs) made a 2-rank MPI Cholesky slower, 68 -> 48
// GFLOP/s: on a core shared with a worker, the wake-ups cost more than
// the later sight of a completed transfer.
const (
	progressSpins    = 128
	progressMaxSleep = 20 * time.Microsecond
)

// watch adds r to the engine's set and starts the engine if it is idle.
func (p *progress) watch(r *request) {
	p.mu.Lock()
	if p.kick == nil {
		p.kick = make(chan struct{}, 1)
	}
	if p.idle.L == nil {
		p.idle.L = &p.mu
	}
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.pending = append(p.pending, r)
	if !p.running {
		p.running = true
		go p.loop()
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *progress) loop() {
	idle := 0
	sleep := time.Microsecond
	var batch []*request
	var scratch testScratch
	for {
		p.mu.Lock()
		// Drop the requests that completed, through the engine or not, and
		// every request once MPI is finalized.
		live := p.pending[:0]
		for _, r := range p.pending {
			if !r.completed() && !r.c.st.finalized.Load() {
				live = append(live, r)
			}
		}
		clear(p.pending[len(live):])
		p.pending = live
		if len(live) == 0 || p.stopped {
			p.running = false
			p.idle.Broadcast()
			p.mu.Unlock()
			return
		}
		batch = append(batch[:0], live...)
		p.mu.Unlock()
		progressed := !p.stopping() && scratch.testAll(batch)
		clear(batch)
		if progressed {
			idle, sleep = 0, time.Microsecond
			continue
		}
		idle++
		if idle < progressSpins {
			runtime.Gosched()
			continue
		}
		select {
		case <-p.kick:
			idle, sleep = 0, time.Microsecond
		case <-time.After(sleep):
			sleep = min(2*sleep, progressMaxSleep)
		}
	}
}

// stopping reports whether shutdown has begun.
func (p *progress) stopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// testScratch is the memory of testAll's MPI_Testsome, kept between
// passes: the handles, the indices and statuses MPI writes, and what
// pz_testsome reports (Go memory: none of it holds a Go pointer, and MPI
// keeps none of it past the call).
type testScratch struct {
	reqs []C.MPI_Request
	idx  []C.int
	sts  []C.MPI_Status
	done []C.int
	out  []C.pz_status
}

func (s *testScratch) grow(n int) {
	if n <= len(s.reqs) {
		return
	}
	n = max(n, 2*len(s.reqs), 16)
	*s = testScratch{make([]C.MPI_Request, n), make([]C.int, n), make([]C.MPI_Status, n), make([]C.int, n), make([]C.pz_status, n)}
}

// testAll tests the requests of batch that no Wait or Test holds, with one
// MPI_Testsome, and completes those that finished; it reports whether any
// did. Testing each with MPI_Test would run MPI's progress once per
// request, which with many receives posted ahead (scheduler/dist) keeps a
// core busy.
func (s *testScratch) testAll(batch []*request) bool {
	locked := batch[:0] // batch is the caller's scratch
	for _, r := range batch {
		if !r.mu.TryLock() { // a Wait or Test is testing it
			continue
		}
		if r.completed() {
			r.mu.Unlock()
			continue
		}
		locked = append(locked, r)
	}
	if len(locked) == 0 {
		return false
	}
	defer func() {
		for _, r := range locked {
			r.mu.Unlock()
		}
	}()
	s.grow(len(locked))
	reqs, done, out := s.reqs[:len(locked)], s.done[:len(locked)], s.out[:len(locked)]
	for i, r := range locked {
		if r.recv && r.ending() { // its communicator freed, or MPI finalizing: cancel it (end.go)
			r.askEnd()
		}
		_ = r.cancelIfAsked() // a failure is complete's to report
		reqs[i] = *r.req
		done[i] = 0
	}
	st := locked[0].c.st
	st.lock()
	rc := C.pz_testsome(C.int(len(locked)), &reqs[0], &s.idx[0], &s.sts[0], &done[0], &out[0])
	st.unlock()
	if rc != 0 {
		// Nothing is known of the requests: test each on its own.
		progressed := false
		for _, r := range locked {
			if ok, _ := r.test(); ok {
				progressed = true
			}
		}
		return progressed
	}
	progressed := false
	for i, r := range locked {
		*r.req = reqs[i]
		switch {
		case done[i] != 0:
			r.complete(0, &out[i])
			progressed = true
		case !r.recv && r.ending(): // a send MPI cannot cancel (end.go)
			r.orphan()
			progressed = true
		}
	}
	return progressed
}
