// Package comm is pz's communication layer: the Comm interface that every
// backend implements, and generic helpers that move typed data over it.
//
// # Backends
//
// comm/local runs N ranks as goroutines in one process and moves data
// through shared memory (the embedded default). comm/mpi, built with
// -tags mpi, binds the system MPI. comm/commtest is the conformance suite
// both pass.
//
// # Numeric data: raw memory
//
// Methods cannot take type parameters, so typed collectives are
// package-level functions over a Comm. Any slice of a Go numeric type
// (int8 ... uint64, int, uint, float32/64, complex64/128, and named types
// over them) travels as raw memory, without encoding:
//
//	sum, err := comm.AllReduce(ctx, c, []float64{x, y}, comm.Sum)
//	err = comm.AllReduceTo(ctx, c, buf, buf, comm.Max)   // in place, no allocation
//	parts, err := comm.AllGather(ctx, c, mine)           // lengths may differ
//	err = comm.Bcast(ctx, c, table, 0)
//
// The predefined reductions are Sum, Prod, Min, Max, LAnd, LOr, LXor,
// BAnd, BOr and BXor; Op.Supports tells which apply to a datatype. ReduceInto is the
// reference element-wise implementation shared by the backends; see it for
// wrapping, NaN and logical-op semantics. A reduction of your own on typed
// slices is a UserOp, combined where the data is like the predefined ones
// (ReduceUser, AllReduceUser).
//
// The v-variants place parts of given counts at given displacements of a
// buffer the caller owns (Gatherv, Allgatherv, Scatterv, Alltoallv, like
// MPI's); Gather, AllGather, Scatter and Alltoall lay them back to back.
// Buffers of any length go on every backend, past MPI's 2^31-1 counts too.
//
// # Point to point
//
// Send, Recv, Ssend, Isend, Irecv and Sendrecv move typed slices between
// two ranks; ProcNull is a peer that makes a domain's edges no special
// case. Requests complete through Wait and Test, or in sets (WaitAll,
// WaitAny, WaitSome, TestAll, TestAny, TestSome). A message exchanged every
// iteration is set up once with SendInit or RecvInit and run with Start
// (or StartAll) and a wait: a Persistent, MPI's persistent request.
//
// A receive no longer wanted is canceled, as with MPI_Cancel: the
// requests of Irecv and of a Persistent's rounds are Cancelers. The
// request still completes, reporting ErrCanceled (nothing was received,
// the buffer is untouched, and the message goes to a later receive) or,
// when the receive had matched its message already, that message whole:
//
//	r, _ := comm.Irecv(c, buf, src, tag)
//	...
//	_ = r.(comm.Canceler).Cancel()
//	if _, err := r.Wait(ctx); errors.Is(err, comm.ErrCanceled) {
//		// buf was not written; it is the caller's again
//	}
//
// Sends cannot be canceled.
//
// # Other values: one codec
//
// Structs, strings, maps and anything else go through CBOR (RFC 8949,
// github.com/fxamacker/cbor/v2): BcastValue, SendValue/RecvValue,
// GatherValues, AllGatherValues, ScatterValues, and the user-defined
// reductions ReduceValue and AllReduceValue, which apply a func(a, b T) T in
// rank order. CBOR was measured against encoding/gob in BenchmarkCodec
// (go test -run '^$' -bench Codec ./comm/), one value per message encoded
// and decoded, as a collective sends it (2-core AMD EPYC VM, Go 1.26):
//
//	payload                         CBOR            gob
//	struct (map, slice, pointer)    10 µs, 203 B    94 µs, 243 B
//	map[string]string, 3 entries    5.5 µs, 35 B    127 µs, 73 B
//	64-byte string                  0.55 µs, 64 B   7.9 µs, 66 B
//
// gob is 9-23x slower here because it sends and parses the type
// description with every new Encoder, and a collective cannot keep one
// Encoder per peer; CBOR is self-describing and has no per-stream state.
//
// # Errors
//
// A collective called with disagreeing arguments (datatype, count, op,
// root) returns a *MismatchError wrapping ErrMismatch on every rank; an
// invalid argument on any rank returns an *ArgError wrapping ErrInvalidArg
// on every rank. Backends build these from a Fingerprint of each call and
// the Check functions.
//
// The v-variants (Gatherv, Allgatherv, Scatterv, Alltoallv) are the
// exception: their counts and displacements describe the caller's own
// buffer, which no other rank sees, so they are checked where they are
// used. A bad layout is an *ArgError on the rank that passed it only (on
// Gatherv and Scatterv, root); that rank still takes part, sending
// nothing, so that no rank hangs. A part of another size than the
// receiving rank's counts say (or, for Scatterv, than its len(recv)) is a
// *MismatchError naming the sender on that rank only. The other ranks
// return nil.
//
// A receive or probe for another datatype than the message was sent with
// returns an error wrapping ErrMismatch that names both (comm/local; MPI
// moves bytes and notices only a length that is not a whole number of
// elements). A context canceled in the middle of a collective returns
// its error on that rank and breaks the communicator there (its later
// calls on it return ErrBroken). On comm/local the others' calls on it
// fail with ErrBroken at once. MPI has no way to tell them: the
// abandoned collective may still complete on the others, and their next
// collective waits for a rank that will not come, until their context
// ends, or the stall report names the rank and the timeout ends the job
// (PZ_COMM_REPORT, PZ_COMM_TIMEOUT; docs/backends.md).
package comm
