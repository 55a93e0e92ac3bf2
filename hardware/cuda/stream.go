package cuda

import (
	"context"
	"fmt"
	"time"
)

// Stream creation flags (CUstream_flags).
const (
	// streamNonBlocking is CU_STREAM_NON_BLOCKING: work in the stream does
	// not synchronize with the legacy default stream.
	streamNonBlocking uint32 = 0x1
)

// Event creation flags (CUevent_flags).
const (
	eventDefault        uint32 = 0x0
	eventDisableTiming  uint32 = 0x2
	pollInitialInterval        = 5 * time.Microsecond
	pollMaxInterval            = time.Millisecond
)

// A Stream is a CUDA stream: a queue of device work that runs in order,
// concurrently with other streams. Streams from NewStream are
// non-blocking (CU_STREAM_NON_BLOCKING). A nil *Stream stands for the
// legacy default stream wherever a stream is accepted.
type Stream struct {
	c      *Context
	handle uintptr
}

// h returns the CUstream handle; 0 (the default stream) for nil.
func (s *Stream) h() uintptr {
	if s == nil {
		return 0
	}
	return s.handle
}

// NewStream creates a non-blocking stream (cuStreamCreate with
// CU_STREAM_NON_BLOCKING). Destroy it with Destroy.
func (c *Context) NewStream(ctx context.Context) (*Stream, error) {
	s := &Stream{c: c}
	err := c.call(ctx, "cuStreamCreate", func() Result { return c.d.api.streamCreate(&s.handle, streamNonBlocking) })
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Synchronize waits until all work queued on the stream has finished.
//
// When ctx can be cancelled it polls cuStreamQuery, backing off from 5 µs
// to 1 ms between polls, so that the wait honours ctx and leaves the
// Context's thread free for other calls; it returns ctx.Err() on
// cancellation (the work itself continues). With a context that can never
// be cancelled (context.Background) it calls cuStreamSynchronize, which
// has the lowest latency but occupies the Context's thread until done.
func (s *Stream) Synchronize(ctx context.Context) error {
	if s == nil {
		return fmt.Errorf("%w: Synchronize of a nil Stream; use Context.Synchronize for the default stream", ErrBadArgument)
	}
	if ctx.Done() == nil {
		return s.c.call(ctx, "cuStreamSynchronize", func() Result { return s.c.d.api.streamSynchronize(s.handle) })
	}
	return poll(ctx, s.c, "cuStreamQuery", func() Result { return s.c.d.api.streamQuery(s.handle) })
}

// Destroy destroys the stream (cuStreamDestroy_v2). Work already queued
// still completes.
func (s *Stream) Destroy(ctx context.Context) error {
	if s == nil {
		return fmt.Errorf("%w: Destroy of a nil Stream", ErrBadArgument)
	}
	return s.c.call(ctx, "cuStreamDestroy_v2", func() Result { return s.c.d.api.streamDestroy(s.handle) })
}

// poll calls query on the executor until it stops returning
// CUDA_ERROR_NOT_READY.
func poll(ctx context.Context, c *Context, name string, query func() Result) error {
	wait := pollInitialInterval
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var r Result
		if err := c.Do(ctx, func() error { r = query(); return nil }); err != nil {
			return err
		}
		if r != ErrNotReady {
			return c.d.check(name, r)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		wait = min(2*wait, pollMaxInterval)
	}
}

// An Event marks a point in a stream; it can be waited for and timed.
type Event struct {
	c      *Context
	handle uintptr
}

// NewEvent creates an event (cuEventCreate). With timing false the event
// is created with CU_EVENT_DISABLE_TIMING, which makes recording and
// waiting cheaper but ElapsedTime unavailable.
func (c *Context) NewEvent(ctx context.Context, timing bool) (*Event, error) {
	flags := eventDefault
	if !timing {
		flags = eventDisableTiming
	}
	e := &Event{c: c}
	err := c.call(ctx, "cuEventCreate", func() Result { return c.d.api.eventCreate(&e.handle, flags) })
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Record captures the work queued on stream s so far (cuEventRecord); a
// nil s means the default stream. The event completes when that work has.
func (e *Event) Record(ctx context.Context, s *Stream) error {
	return e.c.call(ctx, "cuEventRecord", func() Result { return e.c.d.api.eventRecord(e.handle, s.h()) })
}

// Synchronize waits until the event has completed. Like
// Stream.Synchronize it polls (cuEventQuery) when ctx can be cancelled and
// blocks in cuEventSynchronize otherwise.
func (e *Event) Synchronize(ctx context.Context) error {
	if ctx.Done() == nil {
		return e.c.call(ctx, "cuEventSynchronize", func() Result { return e.c.d.api.eventSynchronize(e.handle) })
	}
	return poll(ctx, e.c, "cuEventQuery", func() Result { return e.c.d.api.eventQuery(e.handle) })
}

// Done reports whether the event has completed, without waiting
// (cuEventQuery).
func (e *Event) Done(ctx context.Context) (bool, error) {
	var r Result
	if err := e.c.Do(ctx, func() error { r = e.c.d.api.eventQuery(e.handle); return nil }); err != nil {
		return false, err
	}
	if r == ErrNotReady {
		return false, nil
	}
	return r == Success, e.c.d.check("cuEventQuery", r)
}

// Destroy destroys the event (cuEventDestroy_v2).
func (e *Event) Destroy(ctx context.Context) error {
	return e.c.call(ctx, "cuEventDestroy_v2", func() Result { return e.c.d.api.eventDestroy(e.handle) })
}

// ElapsedTime returns the device time between two completed events that
// were created with timing (cuEventElapsedTime; resolution about 0.5 µs).
// It returns an error wrapping ErrNotReady if either has not completed.
func (c *Context) ElapsedTime(ctx context.Context, start, end *Event) (time.Duration, error) {
	if start == nil || end == nil {
		return 0, fmt.Errorf("%w: ElapsedTime of a nil Event", ErrBadArgument)
	}
	var ms float32
	err := c.call(ctx, "cuEventElapsedTime", func() Result { return c.d.api.eventElapsedTime(&ms, start.handle, end.handle) })
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}
