package comm

import "context"

// Device memory. An MPI library built CUDA-aware reads and writes a CUDA
// GPU's memory itself (Open MPI reports it through
// MPIX_Query_cuda_support): collectives on device buffers then need no
// staging through host memory. A DeviceComm offers that to the layers
// above (resourceset's device collectives take that route when every
// rank's comm reaches its device's memory).

// A DeviceComm runs collectives on memory given by address, outside Go's
// heap: a device's memory that the communication library reaches itself.
// Go code never reads or writes such memory; the library does. Each
// address is of count elements of dt (bytes: count × dt.Size()), and the
// semantics are those of the Buf forms: every rank calls with the same
// counts, dt, op and root, and a mismatch is an error on every rank where
// the backend checks agreement (comm/mpi with its check on). As with the
// other collectives, one runs at a time on a communicator.
type DeviceComm interface {
	// Reaches reports whether the collectives below take memory of space:
	// "cuda" for a CUDA GPU's (a CUDA-aware MPI), "host" for host memory
	// outside Go's heap (always). Every rank of a job built the same way
	// gets the same answer for the same library.
	Reaches(space string) bool
	// BcastAt copies count elements at addr on root to addr on every rank.
	BcastAt(ctx context.Context, addr uintptr, count int, dt Datatype, root int) error
	// ReduceAt combines count elements at send of every rank with op
	// into recv on root (recv is ignored elsewhere); send == recv on the
	// root reduces in place.
	ReduceAt(ctx context.Context, send, recv uintptr, count int, dt Datatype, op Op, root int) error
	// AllReduceAt combines count elements at send of every rank with op
	// into recv of every rank; send == recv reduces in place.
	AllReduceAt(ctx context.Context, send, recv uintptr, count int, dt Datatype, op Op) error
	// GatherAt collects counts[r] elements at send of every rank r into
	// recv on root, one after the other in rank order (recv is ignored
	// elsewhere); every rank passes the same counts.
	GatherAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt Datatype, root int) error
	// ScatterAt sends counts[r] elements of send on root, consecutive
	// parts in rank order, to recv of every rank r (send is ignored
	// elsewhere); every rank passes the same counts.
	ScatterAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt Datatype, root int) error
	// AllGatherAt collects counts[r] elements at send of every rank r into
	// recv of every rank, one after the other in rank order; every rank
	// passes the same counts.
	AllGatherAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt Datatype) error
}
