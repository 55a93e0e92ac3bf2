//go:build mpi

package mpi

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
		progressed := false
		for _, r := range batch {
			if p.stopping() {
				break
			}
			if !r.mu.TryLock() { // a Wait or Test is testing it
				continue
			}
			if done, _ := r.test(); done {
				progressed = true
			}
			r.mu.Unlock()
		}
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
