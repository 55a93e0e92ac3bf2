package comm

import (
	"context"
	"errors"
	"fmt"
)

// Comm is a communicator: a fixed group of ranks that take part in
// collectives together and exchange point-to-point messages. Backends
// (comm/local, comm/mpi) implement it; users normally call the generic
// package-level helpers (AllReduce, AllGather, Bcast, ...) which move typed
// slices as raw memory and arbitrary values through the codec.
//
// Buffers are raw bytes with a Datatype describing the elements. A backend
// never keeps a reference to a caller's buffer after the call returns
// (non-blocking calls: after the Request completes).
//
// Every blocking method takes a context. Cancellation or a deadline returns
// an error wrapping ctx.Err(); after a collective was abandoned that way the
// communicator is broken (ErrBroken) because ranks disagree about which
// collective comes next.
//
// Consistency: a collective called with arguments that disagree across ranks
// (datatype, element count where counts must agree, op, root) or that are
// invalid on some rank (root out of range, a counts slice of the wrong
// length) returns an error on every rank, never hangs and never writes past a
// buffer. Local validation failures are folded into the collective's
// agreement step rather than returned early, so the other ranks learn of
// them too. A *MismatchError or *ArgError is returned; every rank's has the
// same Detail, and a MismatchError's Op is the call that rank made
// ("comm: Dup: arguments differ across ranks: call: rank 0 has Split,
// rank 1 has Dup" on rank 1).
//
// Concurrency: methods of one Comm may be called from several goroutines
// at once. Each collective method call runs whole, one after another on
// that rank (both backends order them with a lock), and collectives on one
// communicator must be called in the same order on every rank, as in MPI:
// goroutines that call different collectives at once make that order
// depend on timing, which ends in a *MismatchError or a hang. Calls of the
// same shape (two goroutines each calling AllReduce of one int64) pair up
// across ranks in whatever order they take the lock, which no check can
// see: their results are right only if the calls are interchangeable
// (the same data, or a combination that does not depend on the pairing).
// Give goroutines whose data differ their own communicator (Dup). Helpers made
// of several collectives (the Value functions, Scan, ReduceScatter, ...)
// are not atomic: call them from one goroutine at a time, or give each
// goroutine its own communicator (Dup). Point-to-point calls and
// non-blocking collectives may run beside anything.
type Comm interface {
	// Rank is this process's (or in-process rank's) index in [0, Size).
	Rank() int
	// Size is the number of ranks in the communicator.
	Size() int

	// Barrier returns once every rank has entered it.
	Barrier(ctx context.Context) error

	// Bcast copies root's buf into every other rank's buf. Every rank passes
	// the same datatype and element count.
	Bcast(ctx context.Context, buf Buf, root int) error

	// Reduce combines send element-wise across ranks with op into recv on
	// root. recv is ignored on non-roots (pass a zero Buf). Every rank passes
	// the same datatype, count and op; recv on root has the same count.
	Reduce(ctx context.Context, send, recv Buf, op Op, root int) error

	// AllReduce is Reduce with the result in every rank's recv. send and recv
	// may be the same buffer (in place).
	AllReduce(ctx context.Context, send, recv Buf, op Op) error

	// ReduceUser is Reduce with a user reduction (see UserFunc), combined
	// where the data is rather than gathered to root.
	ReduceUser(ctx context.Context, send, recv Buf, op *UserFunc, root int) error

	// AllReduceUser is AllReduce with a user reduction.
	AllReduceUser(ctx context.Context, send, recv Buf, op *UserFunc) error

	// Gather collects every rank's send (lengths may differ) on root. On root
	// it calls alloc once with the total element count, fills the returned
	// buffer in rank order and returns the per-rank element counts; on other
	// ranks alloc is not called and counts is nil.
	Gather(ctx context.Context, send Buf, root int, alloc Alloc) (counts []int, err error)

	// AllGather is Gather with the result on every rank.
	AllGather(ctx context.Context, send Buf, alloc Alloc) (counts []int, err error)

	// Scatter splits root's send into consecutive parts of counts[i]
	// elements for rank i (len(counts) == Size, sum == send.Len()). Every rank
	// calls alloc once with its own count and receives its part there.
	// send.Bytes and counts are ignored on non-roots, but send.Type must be
	// set on every rank: it is part of the agreement and gives non-roots the
	// element size (comm.Scatter passes Buf{Type: DatatypeOf[T]()}).
	Scatter(ctx context.Context, send Buf, counts []int, root int, alloc Alloc) error

	// Alltoall sends sendCounts[i] consecutive elements of send to rank i and
	// receives every rank's part for this rank, in rank order, into the buffer
	// returned by alloc (called once with the total). It returns how many
	// elements came from each rank.
	Alltoall(ctx context.Context, send Buf, sendCounts []int, alloc Alloc) (recvCounts []int, err error)

	// Send sends buf to rank dest with a tag >= 0. It returns when buf may be
	// reused (it may or may not wait for the matching receive: a program
	// meant for every backend does not count on it being buffered; under
	// MPICH a Send to the rank itself waits for its receive whatever its
	// size, so post that receive first with Irecv, or use Sendrecv, as
	// docs/backends.md, "Sends that wait for their receive", says). When ctx
	// ends first, Send returns ctx's error and the backends differ: comm/local
	// withdraws the message (no receive matches it); MPI cannot withdraw a
	// send, so under comm/mpi the message stays posted and is delivered when
	// a receive matches it, read from buf then: after a canceled Send under
	// MPI, leave buf unchanged, or treat the peer's next message on that tag
	// as lost (docs/backends.md, "Canceled sends").
	Send(ctx context.Context, buf Buf, dest, tag int) error

	// Recv receives one message from source (or AnySource) with tag (or
	// AnyTag). Messages from one source with one tag arrive in the order they
	// were sent. Once the message's element count n is known Recv calls
	// into(n) for the destination buffer; if into returns an error the
	// message is consumed and discarded and that error returned. The
	// datatype must match the sender's.
	Recv(ctx context.Context, dt Datatype, source, tag int, into Into) (Status, error)

	// Isend starts a Send and returns at once. buf must not be modified
	// until the Request completes.
	Isend(buf Buf, dest, tag int) (Request, error)

	// Irecv starts a receive into buf (which must be large enough: a larger
	// message completes with ErrTruncated) and returns at once.
	Irecv(buf Buf, source, tag int) (Request, error)

	// Iprobe reports whether a message from source (or AnySource) with tag
	// (or AnyTag) can be received now, without receiving it. A source of
	// ProcNull reports one at once, with NullStatus (and Probe returns at
	// once, Improbe and Mprobe NullMessage). st.Count is in
	// elements of dt, which must be the sender's datatype. A later Recv
	// with the same source and tag receives that message unless another
	// receive, on any goroutine, matches it first: Improbe avoids the race.
	Iprobe(dt Datatype, source, tag int) (ok bool, st Status, err error)

	// Probe blocks until Iprobe would report a message, or ctx is done.
	Probe(ctx context.Context, dt Datatype, source, tag int) (Status, error)

	// Improbe is a matched probe (MPI_Improbe): a waiting message from
	// source with tag is taken out of matching, so that only the returned
	// Message's Recv receives it, whatever other goroutines receive
	// meanwhile. It returns a nil Message if none is waiting.
	Improbe(dt Datatype, source, tag int) (Message, error)

	// Mprobe is Improbe that waits for a message until ctx is done.
	Mprobe(ctx context.Context, dt Datatype, source, tag int) (Message, error)

	// The non-blocking collectives start the collective of the same name
	// and return at once; the Request completes when it is done on this
	// rank (for Ibarrier: once every rank has started it). They are
	// matched across ranks in the order each rank starts them, like MPI's:
	// every rank starts the same non-blocking collectives in the same
	// order. They never match the blocking collectives, so the two kinds
	// may interleave differently on different ranks. The buffers belong to
	// the operation until its Request completes; alloc is called from
	// another goroutine, and counts (Igather on root, Iallgather) and
	// recvCounts (Ialltoall), when not nil, must have Size elements and are
	// filled in before the Request completes (another length is an
	// *ArgError of that rank's Request; the collective itself completes,
	// for the other ranks too). Argument checks and the
	// agreement across ranks are those of the blocking call; their errors
	// come from the Request.
	Ibarrier() (Request, error)
	// Ibcast is the non-blocking Bcast.
	Ibcast(buf Buf, root int) (Request, error)
	// Ireduce is the non-blocking Reduce.
	Ireduce(send, recv Buf, op Op, root int) (Request, error)
	// Iallreduce is the non-blocking AllReduce.
	Iallreduce(send, recv Buf, op Op) (Request, error)
	// Igather is the non-blocking Gather.
	Igather(send Buf, root int, alloc Alloc, counts []int) (Request, error)
	// Iallgather is the non-blocking AllGather.
	Iallgather(send Buf, alloc Alloc, counts []int) (Request, error)
	// Iscatter is the non-blocking Scatter.
	Iscatter(send Buf, counts []int, root int, alloc Alloc) (Request, error)
	// Ialltoall is the non-blocking Alltoall.
	Ialltoall(send Buf, sendCounts []int, alloc Alloc, recvCounts []int) (Request, error)

	// Dup returns a communicator with the same ranks in the same order
	// whose messages and collectives never match this one's (MPI_Comm_dup):
	// a library gives itself one so that its traffic cannot mix with the
	// application's. It is a collective. Free it when done.
	Dup(ctx context.Context) (Comm, error)

	// Split partitions the ranks by color into new communicators, ordered
	// by key then by old rank (MPI_Comm_split). A rank passing Undefined as
	// color gets a nil Comm and no error.
	Split(ctx context.Context, color, key int) (Comm, error)

	// Abort tears down every rank of the communicator (and, on MPI, of the
	// job) as fast as possible with the given exit code. In-process backends
	// make every blocked or future call fail instead of exiting the process.
	Abort(code int) error

	// Free releases the communicator. Using it afterwards returns ErrFreed.
	Free() error
}

// AnySource and AnyTag are wildcards for Recv and Irecv.
const (
	AnySource = -1
	AnyTag    = -1
)

// Undefined is the color for Split of a rank that joins no new communicator.
const Undefined = -32766

// Status describes a received message.
type Status struct {
	Source int // the sender's rank
	Tag    int // the message's tag
	Count  int // elements received
}

// Alloc returns a buffer of count elements for a collective's result. It is
// called at most once per call, on the ranks that receive data.
type Alloc func(count int) []byte

// Into returns the destination for a received message of count elements, or
// an error (typically wrapping ErrTruncated) if there is none.
type Into func(count int) ([]byte, error)

// Message is a message taken out of matching by a matched probe
// (Improbe, Mprobe). Receive it exactly once with Recv.
type Message interface {
	// Status is the message's source, tag and element count.
	Status() Status
	// Recv receives the message: into(count) gives the destination, as
	// for Comm.Recv. It does not block beyond copying the data.
	Recv(into Into) (Status, error)
}

// Request is a pending non-blocking operation.
type Request interface {
	// Wait blocks until the operation completes or ctx is done. After a
	// ctx error the operation may still complete later; Wait may be called
	// again. A request already complete when Wait is called reports its
	// result, whatever ctx: Wait with an ended ctx collects a completed
	// operation (as Recv, Probe and Mprobe return a message that is
	// already there) and reports ctx's error only for one still pending.
	Wait(ctx context.Context) (Status, error)
	// Test reports whether the operation has completed, without blocking.
	Test() (done bool, st Status, err error)
}

// Errors returned by every backend. Use errors.Is.
var (
	// ErrMismatch: ranks called a collective with disagreeing arguments
	// (a *MismatchError), or a message was received or probed for as
	// another datatype than it was sent with (the error names both).
	ErrMismatch = errors.New("comm: arguments do not match")
	// ErrInvalidArg: an argument is invalid on some rank.
	ErrInvalidArg = errors.New("comm: invalid argument")
	// ErrTruncated: a receive buffer is smaller than the message.
	ErrTruncated = errors.New("comm: message larger than receive buffer")
	// ErrBroken: the communicator is unusable after an abandoned collective,
	// a failed rank or Abort.
	ErrBroken = errors.New("comm: communicator broken")
	// ErrFreed: the communicator was freed.
	ErrFreed = errors.New("comm: communicator freed")
	// ErrAborted: a rank called Abort.
	ErrAborted = errors.New("comm: aborted")
	// ErrCanceled: the operation of a request was canceled (Canceler)
	// before it took effect; Wait and Test of the request report it
	// (MPI_Test_cancelled).
	ErrCanceled = errors.New("comm: request canceled")
)

// MismatchError reports a collective whose arguments differ across ranks.
// It wraps ErrMismatch.
type MismatchError struct {
	Op     string // the collective this rank called, e.g. "AllReduce"
	Detail string // what differs, e.g. "count: rank 0 has 4, rank 2 has 3"
}

// Error describes the collective and the disagreement.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("comm: %s: arguments differ across ranks: %s", e.Op, e.Detail)
}

// Unwrap returns ErrMismatch.
func (e *MismatchError) Unwrap() error { return ErrMismatch }

// ArgError reports an invalid argument on some rank (possibly another one).
// It wraps ErrInvalidArg.
type ArgError struct {
	Op     string // the call
	Rank   int    // the rank whose argument is invalid
	Detail string // what is wrong and how to fix it
}

// Error names the call, the rank and what is wrong.
func (e *ArgError) Error() string {
	return fmt.Sprintf("comm: %s: invalid argument on rank %d: %s", e.Op, e.Rank, e.Detail)
}

// Unwrap returns ErrInvalidArg.
func (e *ArgError) Unwrap() error { return ErrInvalidArg }

// RankError is the failure of one rank, as returned by in-process launchers
// that run several ranks; it wraps the rank's error.
type RankError struct {
	Rank int
	Err  error
}

// Error prefixes the rank's error with its rank.
func (e *RankError) Error() string { return fmt.Sprintf("rank %d: %v", e.Rank, e.Err) }

// Unwrap returns the rank's error.
func (e *RankError) Unwrap() error { return e.Err }
