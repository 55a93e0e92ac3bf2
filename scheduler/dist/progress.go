package dist

import (
	"reflect"
	"sync"
	"time"

	"github.com/pzgo/pz/comm"
)

// progress drives the scheduler's transfers: one goroutine that waits for
// any of the pending requests and runs each one's completion, so that no
// worker ever waits on the network.
type progress struct {
	mu      sync.Mutex
	pending []pendingReq  // guarded by mu; taken by the loop
	wake    chan struct{} // capacity 1: pending grew
	syncs   chan chan struct{}
	quit    chan struct{}
	exited  chan struct{}
}

type pendingReq struct {
	req  comm.Request
	done func(comm.Status, error)
}

func newProgress() *progress {
	p := &progress{wake: make(chan struct{}, 1), syncs: make(chan chan struct{}), quit: make(chan struct{}), exited: make(chan struct{})}
	go p.loop()
	return p
}

// add hands a request to the loop; done runs on the loop's goroutine when
// it completes, and must not block.
func (p *progress) add(req comm.Request, done func(comm.Status, error)) {
	p.mu.Lock()
	p.pending = append(p.pending, pendingReq{req, done})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// sync returns once the loop has run the completions of every request
// complete when it was called (or the loop has stopped): a caller that
// sees an error may first hear the control message that explains it.
func (p *progress) sync() {
	r := make(chan struct{})
	select {
	case p.syncs <- r:
	case <-p.exited:
		return
	}
	select {
	case <-r:
	case <-p.exited:
	}
}

// stop ends the loop; requests still pending are dropped.
func (p *progress) stop() {
	close(p.quit)
	<-p.exited
}

func (p *progress) loop() {
	defer close(p.exited)
	var reqs []comm.Request
	var dones []func(comm.Status, error)
	var cases []reflect.SelectCase
	var synced []chan struct{} // sync calls to answer after the next pass
	for {
		p.mu.Lock()
		for _, pr := range p.pending {
			reqs = append(reqs, pr.req)
			dones = append(dones, pr.done)
		}
		clear(p.pending)
		p.pending = p.pending[:0]
		p.mu.Unlock()

		// Complete what is done, compacting the set.
		n := 0
		for i, r := range reqs {
			if done, st, err := r.Test(); done {
				dones[i](st, err)
				continue
			}
			reqs[n], dones[n] = r, dones[i]
			n++
		}
		clear(reqs[n:])
		clear(dones[n:])
		reqs, dones = reqs[:n], dones[:n]
		for _, r := range synced {
			close(r)
		}
		synced = synced[:0]

		cases = append(cases[:0],
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.quit)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.wake)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.syncs)})
		notify := true
		for _, r := range reqs {
			nr, ok := r.(comm.Notifier)
			if !ok {
				notify = false
				break
			}
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(nr.Done())})
		}
		if !notify {
			// A backend whose requests cannot announce completion: poll.
			cases = append(cases[:3], reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(time.After(20 * time.Microsecond))})
		}
		switch i, v, _ := reflect.Select(cases); i {
		case 0:
			return
		case 2:
			synced = append(synced, v.Interface().(chan struct{}))
		}
	}
}
