package static

import (
	"context"
	"sync"
	"time"
)

// A Stream is a queue of device work that runs in order, such as a CUDA
// stream, as a client gives it for a GPU resource (Client.Resource). A
// submittee's function enqueues its work on the stream without waiting;
// the client then marks the stream, and a thread of the client waits for
// the mark before the runnables that depend on the submittee may start.
type Stream interface {
	// Mark returns a ticket for all the work enqueued so far. It must not
	// block on that work.
	Mark(ctx context.Context) (uint64, error)
	// WaitMark blocks until the work before ticket t has finished, or ctx
	// is done.
	WaitMark(ctx context.Context, t uint64) error
}

// A HostStream is a Stream whose work runs on one goroutine of the host,
// in order: the simulated device of tests and of machines without a GPU.
// Close it when done.
type HostStream struct {
	mu   sync.Mutex
	cond *sync.Cond
	// queue holds the work not yet run from head on; its array is reused
	// once drained, so that a steady stream does not allocate.
	queue    []func()
	head     int
	enqueued uint64
	finished uint64
	closed   bool
	done     chan struct{}
}

// NewHostStream starts a HostStream's goroutine.
func NewHostStream() *HostStream {
	s := &HostStream{done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	go s.loop()
	return s
}

// Enqueue adds fn to the stream's work; it returns at once.
func (s *HostStream) Enqueue(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		panic("static: Enqueue on a closed HostStream")
	}
	s.queue = append(s.queue, fn)
	s.enqueued++
	s.cond.Broadcast()
}

func (s *HostStream) loop() {
	defer close(s.done)
	s.mu.Lock()
	for {
		for s.head == len(s.queue) && !s.closed {
			s.cond.Wait()
		}
		if s.head == len(s.queue) {
			s.mu.Unlock()
			return
		}
		fn := s.queue[s.head]
		s.queue[s.head] = nil
		s.head++
		if s.head == len(s.queue) {
			s.queue, s.head = s.queue[:0], 0
		}
		s.mu.Unlock()
		fn()
		s.mu.Lock()
		s.finished++
		s.cond.Broadcast()
	}
}

// Mark returns a ticket for the work enqueued so far.
func (s *HostStream) Mark(context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enqueued, nil
}

// WaitMark waits until the work before t has run, or ctx ends. It polls,
// from 5 µs to 200 µs apart, so that it allocates nothing.
func (s *HostStream) WaitMark(ctx context.Context, t uint64) error {
	wait := 5 * time.Microsecond
	for {
		s.mu.Lock()
		done := s.finished >= t
		s.mu.Unlock()
		if done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 200*time.Microsecond)
	}
}

// Close lets the queued work finish and stops the goroutine.
func (s *HostStream) Close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.done
}

var _ Stream = (*HostStream)(nil)
