package scheduler

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/pzgo/pz/hardware/cuda"
)

// A pinner is a device that can page-lock host memory for its copies
// (cuda.Accel): copies from and to such memory are asynchronous.
type pinner interface {
	Pin(b []byte) (unpin func() error, err error)
}

// PinHost page-locks the memory of x for the scheduler's GPUs, as
// StarPU's starpu_memory_pin does: the copies of data registered on x
// between RAM and a GPU then run asynchronously at the bus's full speed,
// one after another without the host in between, instead of being staged
// by the driver through pinned buffers of its own (typically half the
// bandwidth, each copy waited for). The registration is portable: one
// PinHost serves every GPU of the scheduler. It stays until UnpinHost or
// Close, and the scheduler keeps x reachable meanwhile.
//
// Pin the large arrays the GPUs read and write (a matrix whose tiles are
// registered), once: page-locked memory is taken from what the operating
// system can page, and pinning costs about as much as touching the
// memory once. Without GPUs (or with simulated devices only) PinHost does
// nothing and returns nil. Pinning memory already pinned is an error.
func PinHost[T cuda.Number](s *Scheduler, x []T) error {
	if len(x) == 0 {
		return fmt.Errorf("%w: PinHost of an empty slice", ErrBadData)
	}
	p := s.pinner()
	if p == nil {
		return nil
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x)*int(unsafe.Sizeof(x[0])))
	key := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	s.pinMu.Lock()
	defer s.pinMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if _, dup := s.pins[key]; dup {
		return fmt.Errorf("%w: PinHost: %d bytes at %#x are pinned already", ErrBadData, len(b), key)
	}
	unpin, err := p.Pin(b)
	if err != nil {
		return fmt.Errorf("scheduler: PinHost: %w", err)
	}
	if s.pins == nil {
		s.pins = map[uintptr]pinned{}
	}
	s.pins[key] = pinned{b: b, unpin: unpin}
	return nil
}

// pinner returns the first of the scheduler's devices that pins host
// memory (the registration is portable: one serves every GPU), or nil.
func (s *Scheduler) pinner() pinner {
	if s.data == nil {
		return nil
	}
	for _, nd := range s.data.nodes[1:] {
		if p, ok := nd.dev.dev.(pinner); ok {
			return p
		}
	}
	return nil
}

// UnpinHost undoes PinHost once the copies already queued from and to x
// have ended. Memory PinHost did not pin (or pinned through a scheduler
// without GPUs) is left as it is, without an error.
func UnpinHost[T cuda.Number](s *Scheduler, x []T) error {
	if len(x) == 0 {
		return nil
	}
	key := uintptr(unsafe.Pointer(unsafe.SliceData(x)))
	s.pinMu.Lock()
	p, ok := s.pins[key]
	delete(s.pins, key)
	s.pinMu.Unlock()
	if !ok {
		return nil
	}
	return p.unpin()
}

// A pinned is memory PinHost pinned.
type pinned struct {
	b     []byte // keeps it reachable
	unpin func() error
}

// unpinAll undoes every PinHost left (Close).
func (s *Scheduler) unpinAll() error {
	s.pinMu.Lock()
	pins := s.pins
	s.pins = nil
	s.pinMu.Unlock()
	var errs []error
	for _, p := range pins {
		errs = append(errs, p.unpin())
	}
	return errors.Join(errs...)
}
