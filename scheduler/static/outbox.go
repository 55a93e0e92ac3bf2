package static

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// An outbox holds the master's messages to one client, which a writer
// goroutine of that client's (outbox.run) writes in order: the master
// puts a message and goes on, under its lock or not, and never waits for
// a client's socket. Each write has a deadline (the master's sendWait);
// a message not taken by then ends the outbox, and the writer reports it.
type outbox struct {
	mu     sync.Mutex
	queue  []*message
	closed bool          // no more messages: the writer drains and returns
	wake   chan struct{} // 1-buffered: the queue changed
	done   chan struct{} // closed when the writer returns
}

func newOutbox() *outbox {
	return &outbox{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// put queues m; false (m dropped) once the outbox is closed. It never
// blocks.
func (o *outbox) put(m *message) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.queue = append(o.queue, m)
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return true
}

// close ends the outbox: the writer writes what is queued, then returns.
// Idempotent.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// run writes the queued messages to l, each within wait, until the
// outbox is closed and empty. A message l does not take (its deadline
// passed, or the link failed) makes run call failed with it and return,
// dropping the rest: the caller closes the link. run closes o.done.
func (o *outbox) run(l link, wait time.Duration, failed func(m *message, err error)) {
	defer close(o.done)
	for {
		o.mu.Lock()
		q, closed := o.queue, o.closed
		o.queue = nil
		o.mu.Unlock()
		if len(q) == 0 {
			if closed {
				return
			}
			<-o.wake
			continue
		}
		for _, m := range q {
			if err := l.sendBy(m, time.Now().Add(wait)); err != nil {
				o.mu.Lock()
				o.closed, o.queue = true, nil
				o.mu.Unlock()
				failed(m, err)
				return
			}
		}
	}
}

// sendWait bounds how long a write of the master to a client's socket
// may wait for the client to read: the liveness bound, after which a
// client that runs no runnable is declared dead too (Master.behind).
// A client that reads takes a message at once: the socket's buffer
// (about 200 KiB) holds it.
func (m *Master) sendWait() time.Duration { return m.opts.liveness }

// sendFailed handles a message that the client name (process pid) did
// not take within sendWait, or whose link failed: after the start, a
// client that cannot take its messages fails the run as a client that
// stops answering does (ErrAborted, naming it); before, the run is
// ending already (the message was a refusal or an abort). The caller
// closes the link, so that the client's serve loop ends too.
func (m *Master) sendFailed(name string, pid int, msg *message, err error) {
	m.mu.Lock()
	started, closed := m.started && m.b != nil, m.closed
	m.mu.Unlock()
	if closed {
		return
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return // the client closed its end (after its result, or dead): its serve loop says so
	}
	why := fmt.Sprintf("client %s (pid %d) did not take the master's %s message within %v (the liveness bound): %s; the master writes to no client for longer", name, pid, msg.Type, m.sendWait(), clientStuck(pid))
	if !started {
		m.logf("master: %s", why)
		return
	}
	m.fail(why)
}

// clientStuck says what keeps the client process pid from reading its
// socket.
func clientStuck(pid int) string {
	switch st := procState(pid); st {
	case 'T', 't':
		return fmt.Sprintf("its process is stopped (state %c: SIGSTOP, Ctrl-Z or a debugger)", st)
	case 'Z', 'X':
		return "its process has exited"
	case 0:
		return "it does not read its socket (stopped, stuck or starved)"
	default:
		return fmt.Sprintf("its process is there (state %c) but does not read its socket", st)
	}
}
