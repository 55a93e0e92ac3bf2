// Package accel is the runtime's view of an accelerator's memory:
// allocations, and asynchronous copies between them and host memory on
// the device's copy engines, behind one interface that the simulated
// device here and the CUDA GPUs (hardware/cuda) implement. The scheduler
// builds its memory nodes on it, and resource sets their device
// components. A device that both share is a Reclaimer: the scheduler
// registers as a Holder of its memory, and an allocation that does not
// fit first asks it for what it keeps without needing it.
//
// The simulated device (NewSim) has what a GPU has for the data - its
// own allocations, a memory limit, one copy engine per direction
// throttled to a bandwidth and a latency - and host-addressable memory
// (HostView), so that code meant for a GPU runs, and is tested, on a
// machine without one.
package accel

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"
)

// Mem is an allocation in a device's memory.
type Mem interface {
	// Bytes is the allocation's size.
	Bytes() int
}

// Done is called once when an asynchronous copy has ended, from any
// goroutine, with the time its copy engine started it (copies queue
// behind each other on an engine) and its error.
type Done func(start time.Time, err error)

// A Device is an accelerator's memory and copy engines. Its methods are
// safe for concurrent use. Copies are asynchronous and run in the order
// they were issued on each engine (one per direction); the buffers they
// read or write must not be touched until done is called.
type Device interface {
	// Name is how messages and traces call the device ("sim0").
	Name() string
	// Key identifies the device and its link across runs, for saved
	// calibrations.
	Key() string
	// Capacity is the device's memory in bytes.
	Capacity() int64
	// Alloc allocates n bytes; an error wrapping ErrOutOfMemory when they
	// do not fit now.
	Alloc(n int) (Mem, error)
	// Free releases an allocation.
	Free(m Mem)
	// CopyIn copies rows rows of width bytes from host memory src, the
	// starts of two rows pitch bytes apart, into dst from offset off,
	// rows contiguous (a tile of a wider matrix becomes dense).
	CopyIn(dst Mem, off int, src []byte, rows, width, pitch int, done Done)
	// CopyOut is the reverse: rows contiguous in src from offset off to
	// host rows pitch bytes apart.
	CopyOut(dst []byte, rows, width, pitch int, src Mem, off int, done Done)
	// CopyWithin copies n bytes between two allocations of the device.
	CopyWithin(dst Mem, doff int, src Mem, soff int, n int, done Done)
	// Close waits for the copies issued and releases the device.
	Close() error
}

// A HostView is a device whose memory the host can address (the
// simulated device): code that runs on the host can compute on its
// allocations directly.
type HostView interface {
	// Host returns the allocation's bytes, 8-byte aligned.
	Host(m Mem) []byte
}

// A Stager is a device that lends page-locked host buffers for staging
// its data through host memory (a CUDA GPU): copies between it and them
// are asynchronous and run at the bus's full speed, where copies from
// ordinary memory are staged by the driver, one at a time.
type Stager interface {
	// Staging returns a host buffer of n bytes and the function that
	// gives it back; the buffer must not be used after that.
	Staging(n int) (b []byte, release func(), err error)
}

// A ReduceOp is the element-wise combination of a device collective.
type ReduceOp uint8

// The reductions device collectives run.
const (
	OpSum ReduceOp = iota
	OpProd
	OpMax
	OpMin
)

// A Collectives device runs collectives between ranks directly on its
// memory (NCCL on CUDA GPUs), each rank with a device of its own: no
// staging through host memory.
//
// Forming a communicator takes two steps on every rank, so that a
// failure on one rank cannot leave the others waiting for it: the local
// PrepareCollective (everything that can fail on this rank alone), then,
// once every rank has learnt that every rank prepared, one rank's
// NewCollectiveID, sent to the others, and every rank's
// CollectiveJoin.Join, which waits for all of them.
type Collectives interface {
	// PrepareCollective does this rank's part of joining a communicator
	// of n ranks as rank that does not involve the other ranks (NCCL:
	// loading the library, creating the context and stream the
	// communicator runs on) and returns the join; it never waits for
	// another rank. Close the join when it will not be used. An error
	// wrapping ErrNoCollectives says that this rank has none.
	PrepareCollective(ctx context.Context, n, rank int) (CollectiveJoin, error)
	// NewCollectiveID returns the id of a new communicator, made on one
	// rank and sent to the others over another channel. Make it only
	// once every rank has prepared: what it sets up (NCCL's bootstrap
	// root, a thread that waits for every rank) is released only when
	// every rank joins.
	NewCollectiveID() ([]byte, error)
}

// ErrNoCollectives is wrapped by PrepareCollective when the device cannot
// run collectives on this rank at all (NCCL is not installed there): not
// a failure, but the same as a device without Collectives, so that
// callers take another route on every rank.
var ErrNoCollectives = errors.New("accel: no device collectives here")

// A CollectiveJoin is one rank's prepared join of a communicator
// (Collectives.PrepareCollective).
type CollectiveJoin interface {
	// Join joins the communicator of id as the prepared rank: it
	// returns when every rank has joined, so every rank calls it at
	// once, after every rank prepared. Before it waits, it fails only for
	// an id that is not one of its kind (of another length), which every
	// rank, given the same id, finds alike. The join is used up: what it
	// prepared belongs to the communicator, or is released if Join
	// fails. The device leaves the communicators it joined when it
	// closes.
	Join(ctx context.Context, id []byte) (CollectiveComm, error)
	// Close releases what PrepareCollective set up for a join that will
	// not happen; after Join it does nothing.
	Close() error
}

// A CollectiveComm is one rank's part of a communicator of Collectives
// devices. Every rank calls its methods in the same order, with the
// same counts, kind, op and root. Each method returns when this rank's
// part is done; it reports false, and does nothing, for a kind or op the
// communicator cannot do (the same on every rank).
type CollectiveComm interface {
	// AllReduce combines count elements of kind (reflect.Float64, ...)
	// at send+soff bytes of every rank with op into recv+roff of every
	// rank; send and recv may be the same (in place). It reports false,
	// and does nothing, for a kind or op the communicator cannot do.
	AllReduce(send Mem, soff int, recv Mem, roff int, count int, kind reflect.Kind, op ReduceOp) (bool, error)
	// Broadcast copies count elements of kind at send+soff on rank root
	// into recv+roff of every rank; send is read on the root only, and
	// may be recv (in place).
	Broadcast(send Mem, soff int, recv Mem, roff int, count int, kind reflect.Kind, root int) (bool, error)
	// Reduce combines count elements of kind at send+soff of every rank
	// with op into recv+roff of rank root; recv is written on the root
	// only (nil elsewhere) and may be send there (in place).
	Reduce(send Mem, soff int, recv Mem, roff int, count int, kind reflect.Kind, op ReduceOp, root int) (bool, error)
	// AllGather collects counts[r] elements of kind at send+soff of every
	// rank r into recv+roff of every rank, one after the other in rank
	// order; every rank passes the same counts.
	AllGather(send Mem, soff int, recv Mem, roff int, counts []int, kind reflect.Kind) (bool, error)
	// Gather collects counts[r] elements of kind at send+soff of every
	// rank r into recv+roff of rank root, one after the other in rank
	// order; recv is written on the root only (nil elsewhere).
	Gather(send Mem, soff int, recv Mem, roff int, counts []int, kind reflect.Kind, root int) (bool, error)
	// Scatter sends consecutive parts of send+soff on rank root, counts[r]
	// elements of kind for rank r in rank order, into recv+roff of every
	// rank r; send is read on the root only (nil elsewhere).
	Scatter(send Mem, soff int, recv Mem, roff int, counts []int, kind reflect.Kind, root int) (bool, error)
	// Close leaves the communicator.
	Close() error
}

// An Addresser is a device whose allocations have addresses that a
// communication library reaches itself: a CUDA GPU's under a CUDA-aware
// MPI (comm.DeviceComm), so collectives run on them without staging
// through host memory. Go code never reads or writes memory by those
// addresses.
type Addresser interface {
	// Space names the memory the addresses are in: "cuda" for a CUDA
	// GPU's, "host" for host memory outside Go's heap.
	Space() string
	// Address returns the address of byte off of m; off may be m's size.
	Address(m Mem, off int) (uintptr, error)
}

// A Sharer is a device that several in-process ranks use together (a
// node's GPU seen by every rank of the process): an allocation one rank
// exports can be imported by another, so data move between the ranks'
// buffers by device-to-device copies instead of through host memory.
type Sharer interface {
	// Instance names the device object; ranks that share it see the
	// same name, and no other device object, in this process or any
	// other, has it: ranks in other processes (under MPI) compare it
	// with theirs, so it cannot be made of the object's address alone,
	// which repeats across processes (Exports.InstanceName draws one).
	Instance() string
	// Export names m for other ranks until Unexport.
	Export(m Mem) uint64
	// Import returns the allocation exported under name.
	Import(name uint64) (Mem, bool)
	// Unexport withdraws a name.
	Unexport(name uint64)
}

// Exports is the name table of a Sharer's Export, Import and Unexport,
// for a device to embed. The zero value is ready; it is safe for
// concurrent use.
type Exports struct {
	mu       sync.Mutex
	exported map[uint64]Mem
	next     uint64
	token    string // InstanceName's, drawn on first use
}

// InstanceName returns a name for the device object that embeds e, for
// its Sharer.Instance: the device's name dev, "@" and 128 random bits
// drawn on the first call, so the same every time for this object and
// no other's, in this process or another.
func (e *Exports) InstanceName(dev string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.token == "" {
		e.token = rand.Text()
	}
	return dev + "@" + e.token
}

// Export names m for other in-process ranks until Unexport.
func (e *Exports) Export(m Mem) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.exported == nil {
		e.exported = make(map[uint64]Mem)
	}
	e.next++
	e.exported[e.next] = m
	return e.next
}

// Import returns the allocation exported under name.
func (e *Exports) Import(name uint64) (Mem, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m, ok := e.exported[name]
	return m, ok
}

// Unexport withdraws name.
func (e *Exports) Unexport(name uint64) {
	e.mu.Lock()
	delete(e.exported, name)
	e.mu.Unlock()
}

// ErrOutOfMemory is wrapped by Alloc when the allocation does not fit.
var ErrOutOfMemory = errors.New("accel: out of device memory")

// ErrClosed is returned for copies issued after Close.
var ErrClosed = errors.New("accel: device closed")

// ErrBadCopy is given to a copy's Done, and nothing is copied, when its
// range does not fit its buffers or its allocation is not one of the
// device's (nil, or freed).
var ErrBadCopy = errors.New("accel: copy outside its buffers")

// CheckCopy checks a copy of rows rows of width bytes between host
// memory of hostLen bytes, rows pitch bytes apart, and an allocation of
// memLen bytes from offset off, rows contiguous: the checks a Device
// makes before issuing one.
func CheckCopy(memLen, off, hostLen, rows, width, pitch int) error {
	switch {
	case rows < 0 || width < 0 || off < 0:
		return fmt.Errorf("%w: %d rows of %d bytes at offset %d", ErrBadCopy, rows, width, off)
	case rows == 0 || width == 0:
		return nil
	case pitch < width:
		return fmt.Errorf("%w: host rows %d bytes apart, narrower than a row's %d bytes", ErrBadCopy, pitch, width)
	case off > memLen || rows*width > memLen-off:
		return fmt.Errorf("%w: %d bytes at offset %d of an allocation of %d bytes", ErrBadCopy, rows*width, off, memLen)
	case (rows-1)*pitch+width > hostLen:
		return fmt.Errorf("%w: %d rows of %d bytes, %d apart, from host memory of %d bytes", ErrBadCopy, rows, width, pitch, hostLen)
	}
	return nil
}

// Wait issues a copy through issue and waits for it: a synchronous copy
// for setup code and tests.
func Wait(issue func(done Done)) error {
	ch := make(chan error, 1)
	issue(func(_ time.Time, err error) { ch <- err })
	return <-ch
}
