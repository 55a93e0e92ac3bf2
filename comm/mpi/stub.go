//go:build !mpi

package mpi

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/procs"
)

// This file is the !mpi twin of mpi.go and comm.go: the same API, with Init
// returning ErrNotBuilt. No value of these types is ever created.

// Available reports whether this binary was built with MPI support (the mpi
// build tag). It is false in this build.
func Available() bool { return false }

// Initialized reports whether MPI is initialized; always false without MPI.
func Initialized() bool { return false }

// Init returns ErrNotBuilt: rebuild with `go build -tags mpi`.
func Init(ctx context.Context, opts ...Option) (*World, error) {
	_ = newConfig(opts)
	return nil, fmt.Errorf("mpi: Init: %w", ErrNotBuilt)
}

// World is the MPI world communicator; see the mpi build.
type World struct{ *Comm }

// Finalize does nothing without MPI.
func (w *World) Finalize() error { return nil }

// Started reports whether Init started MPI; always false without MPI.
func (w *World) Started() bool { return false }

// ThreadLevel is MPI's thread support; 0 without MPI.
func (w *World) ThreadLevel() int { return 0 }

// LocalSize is the number of ranks on this node; 0 without MPI.
func (w *World) LocalSize() int { return 0 }

// Procs reports how Init sized GOMAXPROCS; zero without MPI.
func (w *World) Procs() procs.Report { return procs.Report{} }

// SetCheck does nothing without MPI.
func (c *Comm) SetCheck(on bool) {}

// Check reports whether collectives run the agreement step; false without
// MPI.
func (c *Comm) Check() bool { return false }

// Blocking reports whether collectives call MPI's blocking functions;
// false without MPI.
func (c *Comm) Blocking() bool { return false }

// Comm is an MPI communicator; see the mpi build. Without MPI every method
// returns ErrNotBuilt.
type Comm struct{}

var _ comm.Comm = (*Comm)(nil)

// Rank is always 0 without MPI.
func (c *Comm) Rank() int { return 0 }

// Size is always 0 without MPI.
func (c *Comm) Size() int { return 0 }

// TagUB is the largest tag the MPI library takes; 0 without MPI.
func (c *Comm) TagUB() int { return 0 }

// Barrier returns ErrNotBuilt.
func (c *Comm) Barrier(ctx context.Context) error { return ErrNotBuilt }

// Bcast returns ErrNotBuilt.
func (c *Comm) Bcast(ctx context.Context, buf comm.Buf, root int) error { return ErrNotBuilt }

// Reduce returns ErrNotBuilt.
func (c *Comm) Reduce(ctx context.Context, send, recv comm.Buf, op comm.Op, root int) error {
	return ErrNotBuilt
}

// AllReduce returns ErrNotBuilt.
func (c *Comm) AllReduce(ctx context.Context, send, recv comm.Buf, op comm.Op) error {
	return ErrNotBuilt
}

// Gather returns ErrNotBuilt.
func (c *Comm) Gather(ctx context.Context, send comm.Buf, root int, alloc comm.Alloc) ([]int, error) {
	return nil, ErrNotBuilt
}

// AllGather returns ErrNotBuilt.
func (c *Comm) AllGather(ctx context.Context, send comm.Buf, alloc comm.Alloc) ([]int, error) {
	return nil, ErrNotBuilt
}

// Scatter returns ErrNotBuilt.
func (c *Comm) Scatter(ctx context.Context, send comm.Buf, counts []int, root int, alloc comm.Alloc) error {
	return ErrNotBuilt
}

// Alltoall returns ErrNotBuilt.
func (c *Comm) Alltoall(ctx context.Context, send comm.Buf, sendCounts []int, alloc comm.Alloc) ([]int, error) {
	return nil, ErrNotBuilt
}

// Send returns ErrNotBuilt.
func (c *Comm) Send(ctx context.Context, buf comm.Buf, dest, tag int) error { return ErrNotBuilt }

// Recv returns ErrNotBuilt.
func (c *Comm) Recv(ctx context.Context, dt comm.Datatype, source, tag int, into comm.Into) (comm.Status, error) {
	return comm.Status{}, ErrNotBuilt
}

// Isend returns ErrNotBuilt.
func (c *Comm) Isend(buf comm.Buf, dest, tag int) (comm.Request, error) { return nil, ErrNotBuilt }

// Irecv returns ErrNotBuilt.
func (c *Comm) Irecv(buf comm.Buf, source, tag int) (comm.Request, error) { return nil, ErrNotBuilt }

// Split returns ErrNotBuilt.
func (c *Comm) Split(ctx context.Context, color, key int) (comm.Comm, error) {
	return nil, ErrNotBuilt
}

// Abort returns ErrNotBuilt.
func (c *Comm) Abort(code int) error { return ErrNotBuilt }

// Free returns ErrNotBuilt.
func (c *Comm) Free() error { return ErrNotBuilt }

// Iprobe returns ErrNotBuilt.
func (c *Comm) Iprobe(dt comm.Datatype, source, tag int) (bool, comm.Status, error) {
	return false, comm.Status{}, ErrNotBuilt
}

// Probe returns ErrNotBuilt.
func (c *Comm) Probe(ctx context.Context, dt comm.Datatype, source, tag int) (comm.Status, error) {
	return comm.Status{}, ErrNotBuilt
}

// Improbe returns ErrNotBuilt.
func (c *Comm) Improbe(dt comm.Datatype, source, tag int) (comm.Message, error) {
	return nil, ErrNotBuilt
}

// Mprobe returns ErrNotBuilt.
func (c *Comm) Mprobe(ctx context.Context, dt comm.Datatype, source, tag int) (comm.Message, error) {
	return nil, ErrNotBuilt
}

// Ibarrier returns ErrNotBuilt.
func (c *Comm) Ibarrier() (comm.Request, error) { return nil, ErrNotBuilt }

// Ibcast returns ErrNotBuilt.
func (c *Comm) Ibcast(buf comm.Buf, root int) (comm.Request, error) { return nil, ErrNotBuilt }

// Ireduce returns ErrNotBuilt.
func (c *Comm) Ireduce(send, recv comm.Buf, op comm.Op, root int) (comm.Request, error) {
	return nil, ErrNotBuilt
}

// Iallreduce returns ErrNotBuilt.
func (c *Comm) Iallreduce(send, recv comm.Buf, op comm.Op) (comm.Request, error) {
	return nil, ErrNotBuilt
}

// Igather returns ErrNotBuilt.
func (c *Comm) Igather(send comm.Buf, root int, alloc comm.Alloc, counts []int) (comm.Request, error) {
	return nil, ErrNotBuilt
}

// Iallgather returns ErrNotBuilt.
func (c *Comm) Iallgather(send comm.Buf, alloc comm.Alloc, counts []int) (comm.Request, error) {
	return nil, ErrNotBuilt
}

// Iscatter returns ErrNotBuilt.
func (c *Comm) Iscatter(send comm.Buf, counts []int, root int, alloc comm.Alloc) (comm.Request, error) {
	return nil, ErrNotBuilt
}

// Ialltoall returns ErrNotBuilt.
func (c *Comm) Ialltoall(send comm.Buf, sendCounts []int, alloc comm.Alloc, recvCounts []int) (comm.Request, error) {
	return nil, ErrNotBuilt
}

// Dup returns ErrNotBuilt.
func (c *Comm) Dup(ctx context.Context) (comm.Comm, error) { return nil, ErrNotBuilt }

// Import returns ErrNotBuilt.
func (w *World) Import(ctx context.Context, handle uintptr) (*Comm, error) {
	return nil, fmt.Errorf("mpi: Import: %w", ErrNotBuilt)
}

// ImportFortran returns ErrNotBuilt.
func (w *World) ImportFortran(ctx context.Context, f int) (*Comm, error) {
	return nil, fmt.Errorf("mpi: ImportFortran: %w", ErrNotBuilt)
}

// Handle is 0 without MPI.
func (c *Comm) Handle() uintptr { return 0 }

// Fortran is 0 without MPI.
func (c *Comm) Fortran() int { return 0 }

// HandleOf returns ErrNotBuilt.
func HandleOf(c comm.Comm) (uintptr, error) {
	return 0, fmt.Errorf("mpi: HandleOf: %w", ErrNotBuilt)
}

// FortranOf returns ErrNotBuilt.
func FortranOf(c comm.Comm) (int, error) {
	return 0, fmt.Errorf("mpi: FortranOf: %w", ErrNotBuilt)
}

// ReduceUser returns ErrNotBuilt.
func (c *Comm) ReduceUser(ctx context.Context, send, recv comm.Buf, op *comm.UserFunc, root int) error {
	return ErrNotBuilt
}

// AllReduceUser returns ErrNotBuilt.
func (c *Comm) AllReduceUser(ctx context.Context, send, recv comm.Buf, op *comm.UserFunc) error {
	return ErrNotBuilt
}

// Library names the MPI library this binary is built against: "" in a
// build without MPI.
func Library() string { return "" }

var _ comm.DeviceComm = (*Comm)(nil)

// Reaches reports whether the collectives on memory given by address take
// memory of space; always false without MPI.
func (c *Comm) Reaches(space string) bool { return false }

// BcastAt returns ErrNotBuilt.
func (c *Comm) BcastAt(ctx context.Context, addr uintptr, count int, dt comm.Datatype, root int) error {
	return ErrNotBuilt
}

// ReduceAt returns ErrNotBuilt.
func (c *Comm) ReduceAt(ctx context.Context, send, recv uintptr, count int, dt comm.Datatype, op comm.Op, root int) error {
	return ErrNotBuilt
}

// AllReduceAt returns ErrNotBuilt.
func (c *Comm) AllReduceAt(ctx context.Context, send, recv uintptr, count int, dt comm.Datatype, op comm.Op) error {
	return ErrNotBuilt
}

// GatherAt returns ErrNotBuilt.
func (c *Comm) GatherAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype, root int) error {
	return ErrNotBuilt
}

// ScatterAt returns ErrNotBuilt.
func (c *Comm) ScatterAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype, root int) error {
	return ErrNotBuilt
}

// AllGatherAt returns ErrNotBuilt.
func (c *Comm) AllGatherAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype) error {
	return ErrNotBuilt
}
