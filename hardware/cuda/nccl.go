package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"strconv"
)

// NCCL, loaded at run time like cuBLAS: collectives between ranks that
// each have a GPU of their own, run by the GPUs on device memory. The
// build does not need it; a machine without it gets an error wrapping
// ErrNoNCCL from OpenNCCL, and callers fall back to other transports.

// DefaultNCCLLibrary is the soname OpenNCCL loads when neither its
// argument nor the environment (EnvNCCLLibrary) names a library.
const DefaultNCCLLibrary = "libnccl.so.2"

// EnvNCCLLibrary is the environment variable that names the NCCL
// library for OpenNCCL(""), as PZ_CUDA_LIBRARY does the driver's.
const EnvNCCLLibrary = "PZ_NCCL_LIBRARY"

// ErrNoNCCL is wrapped by OpenNCCL when NCCL cannot be used: the library
// cannot be loaded, it lacks an entry point this package needs, or
// purego cannot pass its id by value on this architecture. It wraps
// ErrNoLibrary too where the library is the cause. Callers treat it as
// "no device collectives", not as a failure.
var ErrNoNCCL = errors.New("cuda: NCCL not available")

// ErrNCCLClosed is returned by the methods of an NCCLComm after Close or
// Abort.
var ErrNCCLClosed = errors.New("cuda: NCCL communicator closed")

// An NCCLID identifies a communicator while its ranks form it: one rank
// makes it (NCCL.UniqueID) and sends it to the others over a transport
// of its own; every rank passes it to NewComm. It is nccl.h's
// ncclUniqueId (NCCL_UNIQUE_ID_BYTES, 128 bytes).
type NCCLID [128]byte

// ncclUniqueID is the C struct { char internal[128]; }, which
// ncclCommInitRank takes by value: purego copies a struct argument into
// the argument area (on the stack, for 128 bytes on amd64) where an
// array argument is not supported.
type ncclUniqueID struct{ internal NCCLID }

// An NCCLType is an element type of a collective (ncclDataType_t).
type NCCLType int32

// ncclDataType_t values, from nccl.h.
const (
	NCCLInt8     NCCLType = 0
	NCCLUint8    NCCLType = 1
	NCCLInt32    NCCLType = 2
	NCCLUint32   NCCLType = 3
	NCCLInt64    NCCLType = 4
	NCCLUint64   NCCLType = 5
	NCCLFloat16  NCCLType = 6
	NCCLFloat32  NCCLType = 7
	NCCLFloat64  NCCLType = 8
	NCCLBfloat16 NCCLType = 9 // NCCL 2.10 and later, CUDA 11
)

var ncclTypes = [...]struct {
	name string
	size int
}{
	NCCLInt8: {"ncclInt8", 1}, NCCLUint8: {"ncclUint8", 1}, NCCLInt32: {"ncclInt32", 4}, NCCLUint32: {"ncclUint32", 4},
	NCCLInt64: {"ncclInt64", 8}, NCCLUint64: {"ncclUint64", 8}, NCCLFloat16: {"ncclFloat16", 2},
	NCCLFloat32: {"ncclFloat32", 4}, NCCLFloat64: {"ncclFloat64", 8}, NCCLBfloat16: {"ncclBfloat16", 2},
}

// Size returns the size of an element in bytes; 0 for a type this
// package does not know.
func (t NCCLType) Size() int {
	if t < 0 || int(t) >= len(ncclTypes) {
		return 0
	}
	return ncclTypes[t].size
}

// String returns nccl.h's name of t, e.g. "ncclFloat64".
func (t NCCLType) String() string {
	if t < 0 || int(t) >= len(ncclTypes) {
		return "ncclDataType(" + strconv.Itoa(int(t)) + ")"
	}
	return ncclTypes[t].name
}

// NCCLTypeOf returns the NCCL type of the Go number type T (by its
// kind, so named types count as their underlying type), and false for
// the types NCCL has none for (int16, uint16).
func NCCLTypeOf[T Number]() (NCCLType, bool) {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Int8:
		return NCCLInt8, true
	case reflect.Uint8:
		return NCCLUint8, true
	case reflect.Int32:
		return NCCLInt32, true
	case reflect.Uint32:
		return NCCLUint32, true
	case reflect.Int64:
		return NCCLInt64, true
	case reflect.Uint64:
		return NCCLUint64, true
	case reflect.Float32:
		return NCCLFloat32, true
	case reflect.Float64:
		return NCCLFloat64, true
	}
	return 0, false
}

// An NCCLOp is the reduction of a collective (ncclRedOp_t).
type NCCLOp int32

// ncclRedOp_t values, from nccl.h.
const (
	NCCLSum  NCCLOp = 0
	NCCLProd NCCLOp = 1
	NCCLMax  NCCLOp = 2
	NCCLMin  NCCLOp = 3
	NCCLAvg  NCCLOp = 4 // NCCL 2.10 and later: the sum divided by the number of ranks
)

// String returns nccl.h's name of o, e.g. "ncclSum".
func (o NCCLOp) String() string {
	names := [...]string{"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"}
	if o < 0 || int(o) >= len(names) {
		return "ncclRedOp(" + strconv.Itoa(int(o)) + ")"
	}
	return names[o]
}

// An NCCLResult is an ncclResult_t other than ncclSuccess: the code of a
// failed NCCL call. An *NCCLError unwraps to it, so
// errors.Is(err, cuda.ErrNCCLInvalidUsage) works.
type NCCLResult int32

// ncclResult_t values, from nccl.h.
const (
	ErrNCCLUnhandledCuda   NCCLResult = 1 // a call to CUDA failed
	ErrNCCLSystem          NCCLResult = 2 // a call to the system failed (or, on the stand-in, a wait timed out)
	ErrNCCLInternal        NCCLResult = 3 // an internal check failed
	ErrNCCLInvalidArgument NCCLResult = 4 // an argument has an invalid value
	ErrNCCLInvalidUsage    NCCLResult = 5 // the calls are wrong: a programming error (ranks that disagree)
	ErrNCCLRemote          NCCLResult = 6 // a peer failed, or the network did (NCCL 2.13)
	ErrNCCLInProgress      NCCLResult = 7 // a non-blocking operation is still running (NCCL 2.14)
)

// Name returns nccl.h's name of r, e.g. "ncclInvalidUsage".
func (r NCCLResult) Name() string {
	names := [...]string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
		"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"}
	if r < 0 || int(r) >= len(names) {
		return "ncclResult(" + strconv.Itoa(int(r)) + ")"
	}
	return names[r]
}

// Error implements error.
func (r NCCLResult) Error() string { return "nccl: " + r.Name() }

// An NCCLError is a failed NCCL call. It unwraps to its NCCLResult.
type NCCLError struct {
	// Call is the NCCL function that failed, e.g. "ncclAllReduce"; for
	// an error of a collective reported later, "ncclCommGetAsyncError".
	Call string
	// Code is what it returned (or reported).
	Code NCCLResult
	// Description is NCCL's ncclGetErrorString for Code.
	Description string
	// Detail is NCCL's last error message (ncclGetLastError, NCCL 2.13
	// and later; "" without it). Real NCCL keeps one per process, so with
	// ranks failing at once it may describe another rank's failure.
	Detail string
}

// Error implements error.
func (e *NCCLError) Error() string {
	s := fmt.Sprintf("nccl: %s: %s (%d)", e.Call, e.Code.Name(), int32(e.Code))
	if e.Description != "" {
		s += ": " + e.Description
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the NCCLResult.
func (e *NCCLError) Unwrap() error { return e.Code }

// NCCL is the loaded NCCL library. It is immutable after OpenNCCL and
// safe for concurrent use; the library stays loaded for the life of the
// process.
type NCCL struct {
	path    string
	version int
	api     ncclAPI
}

// ncclAPI holds NCCL's entry points, bound with purego, with the C types
// mapped as for the driver: ncclResult_t, ncclDataType_t and ncclRedOp_t
// are enums (int32); ncclComm_t and cudaStream_t are handles (uintptr);
// buffers are device pointers (DevicePtr); size_t is uintptr.
type ncclAPI struct {
	// ncclResult_t ncclGetVersion(int *version)
	getVersion func(version *int32) int32
	// ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
	getUniqueID func(id *ncclUniqueID) int32
	// ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
	// commId by value.
	commInitRank func(comm *uintptr, nranks int32, id ncclUniqueID, rank int32) int32
	// ncclResult_t ncclCommDestroy(ncclComm_t comm)
	commDestroy func(comm uintptr) int32
	// ncclResult_t ncclCommAbort(ncclComm_t comm)
	commAbort func(comm uintptr) int32
	// ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
	commCount func(comm uintptr, count *int32) int32
	// ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
	commUserRank func(comm uintptr, rank *int32) int32
	// ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
	commGetAsyncError func(comm uintptr, result *int32) int32
	// const char *ncclGetErrorString(ncclResult_t result)
	getErrorString func(result int32) *byte
	// ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
	// ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
	allReduce func(send, recv DevicePtr, count uintptr, dt, op int32, comm, stream uintptr) int32
	// ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
	// ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
	broadcast func(send, recv DevicePtr, count uintptr, dt, root int32, comm, stream uintptr) int32
	// ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
	// ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
	reduce func(send, recv DevicePtr, count uintptr, dt, op, root int32, comm, stream uintptr) int32
	// ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
	// ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
	allGather func(send, recv DevicePtr, sendcount uintptr, dt int32, comm, stream uintptr) int32
	// ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
	// ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
	reduceScatter func(send, recv DevicePtr, recvcount uintptr, dt, op int32, comm, stream uintptr) int32
	// ncclResult_t ncclGroupStart(void)
	groupStart func() int32
	// ncclResult_t ncclGroupEnd(void)
	groupEnd func() int32

	// Optional.

	// const char *ncclGetLastError(ncclComm_t comm); NCCL 2.13
	getLastError func(comm uintptr) *byte
	// ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
	// int peer, ncclComm_t comm, cudaStream_t stream); NCCL 2.7
	send func(send DevicePtr, count uintptr, dt, peer int32, comm, stream uintptr) int32
	// ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
	// int peer, ncclComm_t comm, cudaStream_t stream); NCCL 2.7
	recv func(recv DevicePtr, count uintptr, dt, peer int32, comm, stream uintptr) int32
}

func (a *ncclAPI) symbols() []symbol {
	return []symbol{
		{&a.getVersion, []string{"ncclGetVersion"}, false},
		{&a.getUniqueID, []string{"ncclGetUniqueId"}, false},
		{&a.commInitRank, []string{"ncclCommInitRank"}, false},
		{&a.commDestroy, []string{"ncclCommDestroy"}, false},
		{&a.commAbort, []string{"ncclCommAbort"}, false},
		{&a.commCount, []string{"ncclCommCount"}, false},
		{&a.commUserRank, []string{"ncclCommUserRank"}, false},
		{&a.commGetAsyncError, []string{"ncclCommGetAsyncError"}, false},
		{&a.getErrorString, []string{"ncclGetErrorString"}, false},
		{&a.allReduce, []string{"ncclAllReduce"}, false},
		{&a.broadcast, []string{"ncclBroadcast"}, false},
		{&a.reduce, []string{"ncclReduce"}, false},
		{&a.allGather, []string{"ncclAllGather"}, false},
		{&a.reduceScatter, []string{"ncclReduceScatter"}, false},
		{&a.groupStart, []string{"ncclGroupStart"}, false},
		{&a.groupEnd, []string{"ncclGroupEnd"}, false},
		{&a.getLastError, []string{"ncclGetLastError"}, true},
		{&a.send, []string{"ncclSend"}, true},
		{&a.recv, []string{"ncclRecv"}, true},
	}
}

// OpenNCCL loads NCCL from path; from the library EnvNCCLLibrary names
// when path is "", and from DefaultNCCLLibrary when that is unset too.
// Without a usable library it returns an error wrapping ErrNoNCCL.
func OpenNCCL(path string) (*NCCL, error) {
	if path == "" {
		path = os.Getenv(EnvNCCLLibrary)
	}
	if path == "" {
		path = DefaultNCCLLibrary
	}
	switch runtime.GOARCH {
	case "amd64", "arm64", "loong64", "ppc64le": // where purego passes structs by value
	default:
		return nil, fmt.Errorf("%w: cannot pass ncclUniqueId by value on %s", ErrNoNCCL, runtime.GOARCH)
	}
	n := &NCCL{path: path}
	if _, err := openLib(path, nil, n.api.symbols()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoNCCL, err)
	}
	var v int32
	if err := n.check("ncclGetVersion", n.api.getVersion(&v), 0); err != nil {
		return nil, err
	}
	n.version = int(v)
	return n, nil
}

// Library returns the name NCCL was loaded from.
func (n *NCCL) Library() string { return n.path }

// Version returns NCCL's version as ncclGetVersion gives it: since 2.9,
// 10000*major + 100*minor + patch, e.g. 22304 for 2.23.4.
func (n *NCCL) Version() int { return n.version }

// check turns a result other than ncclSuccess into an *NCCLError. It
// must run on the thread that made the call, which the last error
// message of the stand-in (and of some NCCL versions) belongs to.
func (n *NCCL) check(call string, r int32, comm uintptr) error {
	if r == 0 {
		return nil
	}
	e := &NCCLError{Call: call, Code: NCCLResult(r), Description: cString(n.api.getErrorString(r))}
	if n.api.getLastError != nil {
		e.Detail = cString(n.api.getLastError(comm))
	}
	return e
}

// unsupported is the error of a method whose entry point, named call,
// the loaded NCCL lacks (its api field is nil: openLib skips missing
// optional symbols). It wraps ErrNotSupported.
func (n *NCCL) unsupported(call string) error {
	return fmt.Errorf("%w: %s lacks %s (NCCL version %d)", ErrNotSupported, n.path, call, n.version)
}

// UniqueID makes the id of a new communicator (ncclGetUniqueId). Call it
// on one rank and send the id to the others; with NCCL it also starts
// the listener the ranks meet at, so the rank that made it must take
// part. It needs no Context.
func (n *NCCL) UniqueID() (NCCLID, error) {
	// The error message, if any, belongs to the thread that made the call.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var id ncclUniqueID
	if err := n.check("ncclGetUniqueId", n.api.getUniqueID(&id), 0); err != nil {
		return NCCLID{}, err
	}
	return id.internal, nil
}

// NewComm joins c's device as rank of nranks to the communicator of id
// (ncclCommInitRank, on c's thread) and returns the rank's part of it.
//
// It blocks until every rank has joined, so all nranks ranks must call it
// concurrently, each with a Context of its own device (two ranks on one
// Context would wait for each other forever; NCCL refuses two ranks on
// one device). The call cannot be interrupted: ctx is honoured only
// until it starts, and it holds c's thread until it returns (NCCL
// gives up after a time of its own if a rank never comes). A rank out of
// range is an error wrapping ErrNCCLInvalidArgument.
func (n *NCCL) NewComm(ctx context.Context, c *Context, nranks, rank int, id NCCLID) (*NCCLComm, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: NewComm without a Context", ErrBadArgument)
	}
	if nranks > math.MaxInt32 || rank > math.MaxInt32 || rank < math.MinInt32 {
		return nil, fmt.Errorf("%w: rank %d of %d ranks", ErrBadArgument, rank, nranks)
	}
	m := &NCCLComm{n: n, c: c}
	err := c.Do(ctx, func() error {
		if err := n.check("ncclCommInitRank", n.api.commInitRank(&m.h, int32(nranks), ncclUniqueID{id}, int32(rank)), 0); err != nil {
			return err
		}
		// Rank and Size are what NCCL made, not what was asked for.
		var count, user int32
		err := errors.Join(n.check("ncclCommCount", n.api.commCount(m.h, &count), m.h),
			n.check("ncclCommUserRank", n.api.commUserRank(m.h, &user), m.h))
		if err != nil {
			_ = n.api.commAbort(m.h)
			return err
		}
		m.nranks, m.rank = int(count), int(user)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Group runs fn between ncclGroupStart and ncclGroupEnd on c's thread,
// so that the collectives, sends and receives fn issues through
// communicators of c (whose methods run inline there) are launched
// together, as one operation, at ncclGroupEnd. Sends and receives that
// involve several peers, or that a rank both sends and receives, must be
// issued in one Group: only then do they progress together instead of
// waiting for each other. fn must not use communicators of other
// Contexts. Group returns fn's error joined with ncclGroupEnd's.
func (n *NCCL) Group(ctx context.Context, c *Context, fn func() error) error {
	return c.Do(ctx, func() (err error) {
		if err := n.check("ncclGroupStart", n.api.groupStart(), 0); err != nil {
			return err
		}
		// NCCL's group state is the thread's: end the group even if fn panics.
		defer func() { err = errors.Join(err, n.check("ncclGroupEnd", n.api.groupEnd(), 0)) }()
		return fn()
	})
}

// commState is the lifecycle of an NCCLComm: open until Close or Abort.
type commState uint8

const (
	commOpen commState = iota
	commDestroyed
	commAborted
)

// An NCCLComm is one rank's part of an NCCL communicator, bound to the
// Context it was made in: every call runs on that Context's thread.
// Collectives are queued on a stream of the Context's device and return
// before they run; every rank must issue the same collectives, with the
// same counts, types, ops and roots, in the same order. Sends and
// receives (Send, Recv) pair up between two ranks instead. Its methods are
// safe for concurrent use, but collectives issued concurrently reach
// NCCL in an order of the executor's choosing.
type NCCLComm struct {
	n      *NCCL
	c      *Context
	h      uintptr // the ncclComm_t
	nranks int
	rank   int
	state  commState // read and written only on c's thread
}

// Rank returns the rank of this part of the communicator.
func (m *NCCLComm) Rank() int { return m.rank }

// Size returns the number of ranks of the communicator.
func (m *NCCLComm) Size() int { return m.nranks }

// Context returns the Context the communicator runs its calls on.
func (m *NCCLComm) Context() *Context { return m.c }

// call runs one NCCL call of the communicator on its thread.
func (m *NCCLComm) call(ctx context.Context, name string, f func() int32) error {
	return m.c.Do(ctx, func() error {
		if m.state != commOpen {
			return fmt.Errorf("%w: %s", ErrNCCLClosed, name)
		}
		return m.n.check(name, f(), m.h)
	})
}

// stream returns the handle of s, which must be a stream of the
// communicator's device (nil: its default stream).
func (m *NCCLComm) stream(s *Stream) (uintptr, error) {
	if s == nil {
		return 0, nil
	}
	if s.c == nil || s.c.d != m.c.d || s.c.ordinal != m.c.ordinal {
		return 0, fmt.Errorf("%w: a stream of another device than the communicator's (%d)", ErrBadArgument, m.c.ordinal)
	}
	return s.handle, nil
}

// collective checks the counts and root of a collective and issues it on s.
func (m *NCCLComm) collective(ctx context.Context, name string, count, root int, s *Stream, f func(n uintptr, root int32, h uintptr) int32) error {
	if count < 0 {
		return fmt.Errorf("%w: %s of %d elements", ErrBadArgument, name, count)
	}
	if root > math.MaxInt32 || root < math.MinInt32 {
		return fmt.Errorf("%w: %s with root %d", ErrBadArgument, name, root)
	}
	h, err := m.stream(s)
	if err != nil {
		return err
	}
	return m.call(ctx, name, func() int32 { return f(uintptr(count), int32(root), h) })
}

// AllReduce queues on s the reduction with op of count elements of type
// dt at send on every rank, leaving the result at recv on every rank
// (ncclAllReduce). send == recv reduces in place. Floating-point results
// depend on the order NCCL combines the ranks in, which its algorithms
// choose: they may differ in the last bits between runs and machines
// (the stand-in combines in rank order).
func (m *NCCLComm) AllReduce(ctx context.Context, send, recv DevicePtr, count int, dt NCCLType, op NCCLOp, s *Stream) error {
	return m.collective(ctx, "ncclAllReduce", count, 0, s, func(n uintptr, _ int32, h uintptr) int32 {
		return m.n.api.allReduce(send, recv, n, int32(dt), int32(op), m.h, h)
	})
}

// Broadcast queues on s the copy of count elements at send on rank root
// to recv on every rank (ncclBroadcast); send is read on the root only.
// send == recv broadcasts in place.
func (m *NCCLComm) Broadcast(ctx context.Context, send, recv DevicePtr, count int, dt NCCLType, root int, s *Stream) error {
	return m.collective(ctx, "ncclBroadcast", count, root, s, func(n uintptr, root int32, h uintptr) int32 {
		return m.n.api.broadcast(send, recv, n, int32(dt), root, m.h, h)
	})
}

// Reduce queues on s the reduction with op of count elements at send on
// every rank into recv on rank root (ncclReduce); recv is written on the
// root only.
func (m *NCCLComm) Reduce(ctx context.Context, send, recv DevicePtr, count int, dt NCCLType, op NCCLOp, root int, s *Stream) error {
	return m.collective(ctx, "ncclReduce", count, root, s, func(n uintptr, root int32, h uintptr) int32 {
		return m.n.api.reduce(send, recv, n, int32(dt), int32(op), root, m.h, h)
	})
}

// AllGather queues on s the gathering of sendcount elements at send on
// every rank into recv on every rank, rank r's at element r*sendcount
// of recv, which holds Size()*sendcount elements (ncclAllGather). It is
// in place when send is recv + Rank()*sendcount elements.
func (m *NCCLComm) AllGather(ctx context.Context, send, recv DevicePtr, sendcount int, dt NCCLType, s *Stream) error {
	return m.collective(ctx, "ncclAllGather", sendcount, 0, s, func(n uintptr, _ int32, h uintptr) int32 {
		return m.n.api.allGather(send, recv, n, int32(dt), m.h, h)
	})
}

// ReduceScatter queues on s the reduction with op of Size()*recvcount
// elements at send on every rank, leaving block r of recvcount elements
// of the result at recv on rank r (ncclReduceScatter).
func (m *NCCLComm) ReduceScatter(ctx context.Context, send, recv DevicePtr, recvcount int, dt NCCLType, op NCCLOp, s *Stream) error {
	return m.collective(ctx, "ncclReduceScatter", recvcount, 0, s, func(n uintptr, _ int32, h uintptr) int32 {
		return m.n.api.reduceScatter(send, recv, n, int32(dt), int32(op), m.h, h)
	})
}

// p2p checks the count and peer of a send or receive, f (nil when the
// library lacks it), and issues it on s.
func (m *NCCLComm) p2p(ctx context.Context, name string, count, peer int, s *Stream, f func(count uintptr, peer int32, stream uintptr) int32) error {
	if f == nil {
		return m.n.unsupported(name)
	}
	if count < 0 {
		return fmt.Errorf("%w: %s of %d elements", ErrBadArgument, name, count)
	}
	if peer > math.MaxInt32 || peer < math.MinInt32 {
		return fmt.Errorf("%w: %s with peer %d", ErrBadArgument, name, peer)
	}
	h, err := m.stream(s)
	if err != nil {
		return err
	}
	return m.call(ctx, name, func() int32 { return f(uintptr(count), int32(peer), h) })
}

// Send queues on s the sending of count elements of type dt at send to
// rank peer (ncclSend, NCCL 2.7 and later), which must queue the
// matching Recv from this rank with the same count and type; a peer may
// be this rank itself. The messages from one rank to another match in
// the order they were issued: the k-th Send to a peer is the peer's
// k-th Recv from this rank. A send completes only with its receive, so
// a rank that sends to and receives from several peers (or gathers,
// scatters, or sends to itself) must issue them all in one NCCL.Group,
// which makes them progress together; outside a group they may wait for
// each other forever. send is read when the stream reaches the send. A
// NCCL without it (before 2.7) gives an error wrapping ErrNotSupported.
func (m *NCCLComm) Send(ctx context.Context, send DevicePtr, count int, dt NCCLType, peer int, s *Stream) error {
	var f func(uintptr, int32, uintptr) int32
	if m.n.api.send != nil {
		f = func(n uintptr, peer int32, h uintptr) int32 { return m.n.api.send(send, n, int32(dt), peer, m.h, h) }
	}
	return m.p2p(ctx, "ncclSend", count, peer, s, f)
}

// Recv queues on s the receiving of count elements of type dt from rank
// peer into recv (ncclRecv, NCCL 2.7 and later): the message of peer's
// matching Send to this rank, which must have the same count and type
// (else both ranks' communicators get an asynchronous error). Messages
// between two ranks match in issue order, and receives from several
// peers belong in one NCCL.Group with the rank's sends, as Send says. A
// NCCL without it gives an error wrapping ErrNotSupported.
func (m *NCCLComm) Recv(ctx context.Context, recv DevicePtr, count int, dt NCCLType, peer int, s *Stream) error {
	var f func(uintptr, int32, uintptr) int32
	if m.n.api.recv != nil {
		f = func(n uintptr, peer int32, h uintptr) int32 { return m.n.api.recv(recv, n, int32(dt), peer, m.h, h) }
	}
	return m.p2p(ctx, "ncclRecv", count, peer, s, f)
}

// asyncErr returns the communicator's asynchronous error; on its thread.
func (m *NCCLComm) asyncErr() error {
	if m.state != commOpen {
		return fmt.Errorf("%w: ncclCommGetAsyncError", ErrNCCLClosed)
	}
	var r int32
	if err := m.n.check("ncclCommGetAsyncError", m.n.api.commGetAsyncError(m.h, &r), m.h); err != nil {
		return err
	}
	return m.n.check("ncclCommGetAsyncError", r, m.h)
}

// Err returns the communicator's asynchronous error
// (ncclCommGetAsyncError): nil while its collectives are fine, else an
// *NCCLError with Call "ncclCommGetAsyncError" describing a collective
// that failed after it was queued (a peer that failed, or on the
// stand-in, ranks that disagree). After an error the communicator is
// unusable: Abort it.
func (m *NCCLComm) Err(ctx context.Context) error {
	return m.c.Do(ctx, m.asyncErr)
}

// Synchronize waits until the work queued on s (nil: the default
// stream) has finished and returns the communicator's asynchronous error
// as soon as there is one, as NCCL's documentation asks: a collective
// whose peers fail may never finish, and only the error says so. It
// polls cuStreamQuery and ncclCommGetAsyncError, backing off from 5 µs to
// 1 ms, leaving c's thread free between polls, and returns ctx.Err() when
// ctx is done (the work goes on).
func (m *NCCLComm) Synchronize(ctx context.Context, s *Stream) error {
	h, err := m.stream(s)
	if err != nil {
		return err
	}
	var async error
	err = poll(ctx, m.c, "cuStreamQuery", func() Result {
		if async = m.asyncErr(); async != nil {
			return Success
		}
		return m.c.d.api.streamQuery(h)
	})
	if async != nil {
		return async
	}
	if err != nil {
		return err
	}
	// The last collective may have failed just before the stream finished.
	return m.c.Do(ctx, m.asyncErr)
}

// Close destroys the communicator (ncclCommDestroy, on its Context's
// thread), which waits for its queued collectives, and so for its peers'
// parts of them; close every rank's part once all are done. Close it
// before its Context. Close is idempotent, and returns nil after Close
// or Abort.
func (m *NCCLComm) Close() error {
	return m.end("ncclCommDestroy", commDestroyed, m.n.api.commDestroy)
}

// Abort destroys the communicator without waiting (ncclCommAbort): its
// collectives in flight are abandoned, and those of its peers that need
// this rank end with errors. Use it after an asynchronous error, or to
// stop waiting for a peer that will not come. It runs on the Context's
// thread, so it waits for a call running there (NewComm, a collective on
// the default stream) to return first. It is idempotent, and returns nil
// after Close or Abort.
func (m *NCCLComm) Abort() error {
	return m.end("ncclCommAbort", commAborted, m.n.api.commAbort)
}

func (m *NCCLComm) end(name string, to commState, f func(comm uintptr) int32) error {
	return m.c.Do(context.Background(), func() error {
		if m.state != commOpen {
			return nil
		}
		m.state = to
		return m.n.check(name, f(m.h), m.h)
	})
}
