package static

import (
	"context"
	"fmt"
	"sync"

	"github.com/pzgo/pz/hardware/cuda"
)

// A CUDAStream is a Stream over a CUDA stream: Mark records one of a ring
// of events (cuEventRecord) and WaitMark waits for it. A stream runs in
// order, so an event recorded again later still covers the work before
// an older mark. Make it before the loop: Mark and WaitMark do not
// allocate.
type CUDAStream struct {
	c      *cuda.Context
	s      *cuda.Stream
	mu     sync.Mutex
	events []*cuda.Event
	marks  uint64
}

// NewCUDAStream prepares depth events (at least 2) on stream s of
// context c.
func NewCUDAStream(ctx context.Context, c *cuda.Context, s *cuda.Stream, depth int) (*CUDAStream, error) {
	if depth < 2 {
		return nil, fmt.Errorf("static: a CUDAStream needs a depth of at least 2 events, got %d", depth)
	}
	x := &CUDAStream{c: c, s: s}
	for range depth {
		ev, err := c.NewEvent(ctx, false)
		if err != nil {
			x.Close(ctx)
			return nil, fmt.Errorf("static: CUDAStream: %w", err)
		}
		x.events = append(x.events, ev)
	}
	return x, nil
}

// Mark records an event after the work queued so far; the ticket is the
// number of marks made.
func (x *CUDAStream) Mark(ctx context.Context) (uint64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ev := x.events[x.marks%uint64(len(x.events))]
	if err := ev.Record(ctx, x.s); err != nil {
		return 0, err
	}
	x.marks++
	return x.marks, nil
}

// WaitMark waits until the work before mark t has finished.
func (x *CUDAStream) WaitMark(ctx context.Context, t uint64) error {
	if t == 0 {
		return nil
	}
	x.mu.Lock()
	ev := x.events[(t-1)%uint64(len(x.events))]
	x.mu.Unlock()
	return ev.Synchronize(ctx)
}

// Close destroys the events; the stream stays the caller's.
func (x *CUDAStream) Close(ctx context.Context) error {
	var first error
	for _, ev := range x.events {
		if err := ev.Destroy(ctx); err != nil && first == nil {
			first = err
		}
	}
	x.events = nil
	return first
}

var _ Stream = (*CUDAStream)(nil)
