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
//	err = comm.BcastSlice(ctx, c, table, 0)
//
// The predefined reductions are Sum, Prod, Min, Max, LAnd, LOr, BAnd, BOr
// and BXor; Op.Supports tells which apply to a datatype. ReduceInto is the
// reference element-wise implementation shared by the backends; see it for
// wrapping, NaN and logical-op semantics.
//
// # Other values: one codec
//
// Structs, strings, maps and anything else go through CBOR (RFC 8949,
// github.com/fxamacker/cbor/v2): Bcast[T any], SendValue/RecvValue,
// GatherValues, AllGatherValues, ScatterValues, and the user-defined
// reductions ReduceValue and AllReduceValue, which apply a func(a, b T) T in
// rank order. CBOR was measured against encoding/gob in BenchmarkCodec
// (go test -bench Codec ./comm/): on a small struct with a map and strings,
// one value per message as a collective sends it, CBOR encodes and decodes
// several times faster than gob, because gob resends the type description
// with every new Encoder and a collective cannot keep one Encoder per peer.
//
// # Errors
//
// A collective called with disagreeing arguments (datatype, count, op,
// root) returns a *MismatchError wrapping ErrMismatch on every rank; an
// invalid argument on any rank returns an *ArgError wrapping ErrInvalidArg
// on every rank. Backends build these from a Fingerprint of each call and
// the Check functions. A context canceled in the middle of a collective
// returns its error on that rank and breaks the communicator (ErrBroken)
// for the others.
package comm
