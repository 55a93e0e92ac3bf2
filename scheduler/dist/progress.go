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
	quit    chan struct{}
	exited  chan struct{}
}

type pendingReq struct {
	req  comm.Request
	done func(comm.Status, error)
}

func newProgress() *progress {
	p := &progress{wake: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
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

		cases = append(cases[:0],
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.quit)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.wake)})
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
			cases = append(cases[:2], reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(time.After(20 * time.Microsecond))})
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			return
		}
	}
}
