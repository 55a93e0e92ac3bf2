// Package mpi is pz's own thin cgo binding to the system MPI (Open MPI,
// found with pkg-config ompi), implementing comm.Comm. It is compiled only
// with the build tag mpi; without it the same API exists, Available reports
// false and Init returns ErrNotBuilt, which says how to rebuild:
//
//	go build -tags mpi ./myprog && mpirun -n 4 ./myprog
//
// # Starting and stopping
//
// Init calls MPI_Init_thread asking for MPI_THREAD_MULTIPLE, or adopts an
// MPI that the embedding program already initialized (and then Finalize
// leaves it running). MPI can be initialized once per process: after
// MPI_Finalize, Init returns ErrFinalized. Init also counts the ranks on this
// node (World.LocalSize, from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)) and
// sizes GOMAXPROCS to this rank's share of the node (internal/procs), unless
// the GOMAXPROCS environment variable is set or WithGOMAXPROCS(false) is
// given: N ranks on one node must not each spin on every core.
//
// World.Finalize first stops the engines of non-blocking collectives and
// waits, up to 10 seconds, for a collective that one of them is running:
// MPI cannot cancel it, and it ends when the other ranks take part. If one
// is still inside MPI then (another rank never started it), Finalize
// leaves MPI initialized and returns an error wrapping ErrUnfinalized that
// names it ("Ibarrier #1 on rank 0"): finalizing MPI while a thread is
// inside it is undefined, and Open MPI then crashes or hangs in
// MPI_Finalize. The rank can still exit; mpirun reports that it exited
// without calling MPI_Finalize and ends the job.
//
// On an adopted MPI, Finalize ends pz's use of MPI and leaves MPI to its
// owner: it stops the engines and ends the pending requests as above,
// then frees what pz made in MPI (the communicators Dup, Split,
// SplitShared, Import and the engines made and nobody freed, the
// persistent requests, its datatypes and ops) and restores
// MPI_COMM_WORLD's error handler (the last of several Worlds on one MPI
// to finalize does, whatever their order). Once it returns nil pz makes no more
// MPI calls, and the owner may call MPI_Finalize at once; every later
// call of pz returns ErrFinalized. The owner's communicators (given to
// Import) stay the owner's. If a collective is still inside MPI after
// the wait, Finalize returns an error wrapping ErrUnfinalized and frees
// nothing: the owner must not call MPI_Finalize then (a thread of pz is
// inside MPI); it may exit without it, or end the job with MPI_Abort.
//
// # Calls into MPI
//
// Every operation crosses into C once, through static wrappers that take the
// MPI handles Init cached (in Open MPI MPI_COMM_WORLD, MPI_DOUBLE, MPI_SUM
// are addresses of globals and each use from Go would be a separate cgo
// call). Buffers are passed with unsafe.SliceData, so empty slices work.
// Non-blocking operations pin their buffers with runtime.Pinner until MPI
// completes them. Communicators use MPI_ERRORS_RETURN; an error code becomes
// an *Error carrying MPI_Error_string. Arguments are validated in Go before
// MPI sees them.
//
// # Threads and latency
//
// With MPI_THREAD_MULTIPLE any goroutine may call MPI on whatever OS thread
// it runs on. Point-to-point calls go straight to MPI; the collectives of one
// communicator are ordered by a mutex that the calling goroutine holds for
// the call, so concurrent collectives on one communicator never interleave
// inside MPI. A dedicated goroutine per communicator would cost two
// goroutine hand-offs per call, several times MPI's own 8-byte latency. If
// an adopted MPI provides only MPI_THREAD_SERIALIZED (a C or Fortran
// program that called MPI_Init_thread so before handing over to Go),
// every call is made under one lock (the process's, shared by every World
// on that MPI) and blocking operations are polled,
// even with context.Background: a blocking call would hold the lock while
// it waits, and keep out the other goroutines' calls that the peers may be
// waiting for. The lock is taken per MPI call (each MPI_Test of a poll),
// never across a wait. MPI_Comm_split and MPI_Comm_dup, which have no
// polled form, follow a polled step (the agreement step, or an
// MPI_Ibarrier with the check off or on the communicator Import
// duplicates) and a vote that every rank is still there (an
// MPI_Iallreduce), so that they wait only for ranks already making them:
// after the vote, when one rank's context ended first, no rank makes them
// and the others' call fails (ErrAbandoned, ErrImportAbandoned). The cost: each operation takes the non-blocking
// form and MPI_Test, plus a lock, where MULTIPLE makes one blocking call;
// on 2 oversubscribed ranks under load an 8-byte AllReduce took 8-9 µs
// against 0.6-6 µs at MULTIPLE (BenchmarkAllReduce, SERIALIZED=1
// mpitest.sh bench). Below MPI_THREAD_SERIALIZED Init fails with
// ErrThreadLevel. The package's tests run in this mode too
// (PZ_MPI_TEST_SERIALIZED=1: TestMain initializes MPI at
// MPI_THREAD_SERIALIZED itself and finalizes it after World.Finalize left
// it running), under mpirun -n 2 and 4 in scripts/test.sh.
//
// # Context
//
// MPI does not match a blocking collective with a non-blocking one
// (MPI_Allreduce on one rank and MPI_Iallreduce on another wait for good),
// so the MPI function behind a collective (AllReduce, Barrier, Split, ...:
// every one returns when it is done, as mpi4py's comm.Allreduce) is the
// communicator's choice, the same on every rank whatever kind of ctx each
// passes (WithBlocking, PZ_COMM_BLOCKING, which every rank must set
// alike; inherited by Dup, Split, SplitShared and Import; Comm.Blocking
// says which). By default it is the non-blocking form: MPI_Iallreduce
// and the like, waited for in MPI_Wait when ctx cannot end
// (context.Background), polled otherwise, so that a ctx that ends ends
// the wait. With WithBlocking(true) every collective calls the blocking
// function, ctx being looked at before each MPI call only: a ctx that
// ends while the rank is inside MPI ends nothing, and a rank that never
// arrives (or gives up before its call) keeps the others inside MPI
// until WithTimeout ends the job. Split, SplitShared and Dup then run no
// barrier and no vote before MPI_Comm_split (dup, split_type): a rank
// whose ctx has ended makes no MPI call, and the others wait in theirs.
// The non-blocking collectives (Ibarrier, Iallreduce, ...) are the same
// in both forms (below). Before, the form was chosen
// per call from ctx, and a rank passing context.Background and one passing
// a ctx with a deadline hung in their first collective (already in the
// agreement step; with the check off, Split's MPI_Comm_split on one rank
// against the MPI_Ibarrier before it on the other).
//
// The price of the default is latency on small collectives: 8-byte
// allreduces on 2 ranks in C against this Open MPI (4.1), median of 60
// rounds of 2,000: MPI_Allreduce 0.49 µs, MPI_Iallreduce and MPI_Wait
// 1.07 µs, MPI_Iallreduce and MPI_Test polling 1.04 µs. The blocking form
// keeps the first figure for programs that can give up cancellation inside
// MPI (benchmarks: PZ_COMM_BLOCKING=1). Point-to-point calls still choose per call
// (a blocking send matches a non-blocking receive): blocking with a ctx
// whose Done channel is nil, otherwise the non-blocking form and MPI_Test.
//
// In the non-blocking form, polling (a ctx that can end) tests MPI_Test
// until completion or ctx is done: spinning for the first 20 ms
// (a Gosched every few tests, and a sched_yield now and then for other
// processes on the core), as a blocking MPI_Wait would, then with sleeps
// (a Go sleep lasts about a millisecond, whatever is asked). MPI cannot
// cancel a started collective: on cancellation the collective returns an
// error wrapping ctx.Err() and comm.ErrBroken, and the communicator stays
// broken. A rank that never arrives therefore makes the others fail at their
// deadline; MPI cannot tell which ranks are missing. Abort ends the job.
//
// The non-blocking collectives (Ibarrier, Iallreduce, ...) run, in the
// order this rank started them, on a goroutine that calls MPI's blocking
// functions on a private duplicate of the communicator, in either form.
// A Wait whose ctx ends returns an error wrapping ctx's and leaves the
// collective running. When the communicator breaks on this rank (a
// collective on it abandoned), its pending requests end with an error
// wrapping comm.ErrBroken (Wait, Test, Done, comm.WaitAny alike; but a
// Wait with context.Background that was already waiting for the next
// collective to run, which it may run on its own goroutine, returns when
// that collective does, as a blocking one), and starting another fails;
// the collectives already started stay with MPI, their buffers too,
// until the other ranks take part in them (Finalize reports one that
// never ends, ErrUnfinalized). The other ranks learn
// nothing of the break: MPI cannot tell them, and their requests wait
// for this rank's part like any collective, until their ctx ends (Wait)
// or WithTimeout ends the job.
//
// # Consistency check
//
// Before each collective the ranks agree on its arguments with one small
// MPI_Allreduce of a 112-byte element (pz_agree.h) whose header combines
// as MPI_MAX would: {fingerprint, -fingerprint, lowest failing rank,
// largest volume}. It is the same MPI call before every collective, so
// that ranks that reached different collectives still meet in matching
// MPI calls and learn of it. Disagreeing datatypes, counts, ops or roots,
// and arguments invalid on any rank, give every rank a *comm.MismatchError
// (the same detail; its Op the call that rank made) or the same
// *comm.ArgError, never a hang or a write past a buffer.
//
// An AllReduce or Reduce of at most 64 bytes (integers and floats, a
// predefined op) and a Bcast of at most 64 bytes ride in that element's
// payload: the step's op folds the payloads (in C, with comm.ReduceInto's
// results: wrapping integers, Go's float Min and Max) or keeps root's
// bytes, where both operands describe the same call. Small collectives
// then cost one MPI call with the check on, as with it off (8 bytes on 2
// ranks in the blocking form, WithBlocking: ~0.49 µs against ~0.43 µs
// off, where check-then-operate took ~0.95 µs; docs/performance.md has
// the commands).
// Turn the check off with WithCheck(false), Comm.SetCheck or
// PZ_COMM_CHECK=0 to save one small collective per larger call.
//
// # Variable lengths
//
// Gather, AllGather, Scatter and Alltoall exchange element counts first and
// then call the v-variants (MPI_Gatherv, ...); AllGather uses MPI_Allgather
// when all counts are equal. Recv of a message of unknown length matches it
// with MPI_Mprobe (MPI_Improbe when polling) and receives it with MPI_Mrecv,
// which no other thread can steal; a message too large for the buffer is
// consumed and comm.ErrTruncated returned. comm.Recv into a typed slice is
// one MPI_Recv, and comm.Sendrecv one MPI_Sendrecv, when the context
// cannot be canceled and the message cannot come from the rank itself
// (Open MPI 4.1 truncates a message to a receive posted on the same rank
// silently); otherwise they take the matched probe too. Point-to-point
// messages travel as MPI_BYTE, so the receiver checks the size against
// its element type: a message of another datatype whose size is a whole
// number of the receiver's elements is taken as it is (comm/local
// reports every datatype mismatch; see Comm.Recv). Tags go up to the
// library's MPI_TAG_UB (Comm.TagUB: 2^31-1 under Open MPI, 2^28-1 under
// MPICH 4); a larger one is a *comm.ArgError.
//
// # Stalls
//
// Every process watches the MPI operations it waits in - collectives,
// and the sends, receives, probes and request waits that block or poll,
// comm.WaitAny and comm.WaitSome included (comm.WaitWatcher) - and says on stderr which ones have waited a report interval
// (WithStallReport, PZ_COMM_REPORT); past WithTimeout (PZ_COMM_TIMEOUT)
// it ends the job. A collective records itself in its communicator's
// slot with atomic stores, a point-to-point wait in one of a fixed set
// of slots claimed with a compare-and-swap: no lock and no clock read.
//
// # User reductions
//
// ReduceUser and AllReduceUser run the caller's function inside MPI's
// reduction. If it panics on a rank, MPI still finishes the reduction
// there without it; the ranks then agree (one more 8-byte MPI_Allreduce
// per user reduction) on whether it panicked anywhere, so that the
// panicking rank panics with its value and every other rank returns an
// error wrapping ErrUserOpPanicked and a *comm.RankError naming it,
// instead of a wrong result.
//
// # Counts past 2^31-1
//
// MPI-3 counts and displacements are C ints; pz buffers are not limited
// (comm/local takes any length), and a program runs the same on both
// backends. A message past 2^31-1 bytes travels as one element of a derived
// datatype (blocks of 2^30 elements and a remainder); Bcast and the
// reductions run in pieces of 2^30 elements (MPI's predefined ops take
// predefined types only); Gather, AllGather, Scatter and Alltoall whose
// counts or displacements do not fit take MPI_Alltoallw with one derived
// type per peer. Every rank knows which path a collective takes, at no
// extra message: Scatter's root sends the choice with the counts;
// Alltoall's count exchange carries each sender's total, whose sum every
// rank sees; Gather's agreement step carries the largest count, and only
// when size times it passes 2^31-1 (or with the check off, which costs a
// small Gather about 0.4 µs) are its counts exchanged with MPI_Allgather
// instead of MPI_Gather. Status.Count and probes count
// past 2^31 (MPI_Get_elements_x). Buffers within the limits take the usual
// calls. The tests send 3 GiB (TestLargeCounts; skipped where the machine
// lacks the memory, and in -short mode).
//
// # Polling large transfers
//
// With a ctx that can be canceled an operation is started non-blocking and
// tested until done, sleeping between tests after a few hundred; MPI moves a
// large message only inside those tests, so an operation is tested without
// sleeping for as long as its bytes could still be moving at 128 MiB/s.
//
// # Testing
//
//	go test -tags mpi ./comm/mpi       # 1 rank, then re-runs itself under mpirun -n 2 and -n 4
//	SERIALIZED=1 RANKS="2 4" comm/mpi/mpitest.sh # on an adopted MPI at MPI_THREAD_SERIALIZED
//	go test -tags mpi -c -o /tmp/mpi.test ./comm/mpi &&
//	    mpirun -n 4 --oversubscribe --allow-run-as-root /tmp/mpi.test -test.v
package mpi
