package mpi

import (
	"errors"

	"github.com/pzgo/pz/comm"
)

// call identifies a collective in the agreement step: the comm package's
// Call, so that both backends name calls and report mismatches alike.
type call = comm.Call

const (
	callBarrier   = comm.CallBarrier
	callBcast     = comm.CallBcast
	callReduce    = comm.CallReduce
	callAllReduce = comm.CallAllReduce
	callGather    = comm.CallGather
	callAllGather = comm.CallAllGather
	callScatter   = comm.CallScatter
	callAlltoall  = comm.CallAlltoall
	callSplit     = comm.CallSplit
	// SplitShared is a call of its own: it makes another MPI call
	// (MPI_Comm_split_type) than Split, which it must not pass for.
	callSplitShared = comm.CallSplitShared
	callFree        = comm.CallFree
	callDup         = comm.CallDup
)

// noCount and noRoot mark descriptor fields that need not agree.
const (
	noCount = -1
	noRoot  = -1
)

// desc is what must agree across ranks for one collective call.
type desc struct {
	call  call
	dt    comm.Datatype
	op    comm.Op
	count int64 // elements, or noCount where counts may differ
	root  int64 // or noRoot
}

// name is the call as the user made it: ReduceUser and AllReduceUser are
// Reduce and AllReduce with comm.User (as comm/local names them).
func (d desc) name() string {
	if d.op == comm.User {
		return d.call.String() + "User"
	}
	return d.call.String()
}

// fingerprint returns d as the comm package's Fingerprint, which
// comm.CheckFingerprints compares (as comm/local does).
func (d desc) fingerprint() comm.Fingerprint {
	return comm.Fingerprint{Call: d.call, Type: d.dt, Op: d.op, Root: int32(d.root), Count: d.count}
}

// descWords is the number of 64-bit words of a desc on the wire
// (Fingerprint.Pack).
const descWords = 2

func (d desc) words() [descWords]uint64 { return d.fingerprint().Pack() }

// hash hashes d into a non-negative int63, so that the agreement step can
// compare it with one MPI_MAX reduction over {h, -h}: all ranks agree
// exactly when max(h) == -max(-h). The mixer is SplitMix64's finalizer
// (Steele, Lea, Flood 2014); two different descriptors collide with
// probability about 2^-63.
//
// It packs the words as words does (Fingerprint.Pack), from d's fields in
// registers: building the Fingerprint and its array on the stack cost
// store-forwarding stalls (byte stores read back as 16-byte loads), about
// 15% of an 8-byte AllReduce's time on one rank.
func (d desc) hash() int64 {
	w0 := uint64(d.call) | uint64(d.dt)<<8 | uint64(d.op)<<16 | uint64(uint32(int32(d.root)))<<32
	h := mix(uint64(0x9e3779b97f4a7c15), w0)
	return int64(mix(h, uint64(d.count)) >> 1)
}

// mix folds w into h (one round of hash).
func mix(h, w uint64) uint64 {
	h ^= w
	h += 0x9e3779b97f4a7c15
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
	h = (h ^ (h >> 27)) * 0x94d049bb133111eb
	return h ^ h>>31
}

// agreement is the vector the agreement step reduces with MPI_MAX:
// {hash, -hash, failure code, volume}. The failure code of a rank whose
// arguments are invalid is size-rank (0 otherwise), so the maximum names
// the lowest failing rank. The volume is what this rank sends (Gather,
// Alltoall; 0 elsewhere): its maximum tells every rank, at no extra cost,
// that the counts surely fit MPI's ints (large.go).
const agreeWords = 4

func agreeVector(d desc, rank, size int, localErr error, volume int64) [agreeWords]int64 {
	fp := d.hash()
	var fail int64
	if localErr != nil {
		fail = int64(size - rank)
	}
	return [agreeWords]int64{fp, -fp, fail, volume}
}

// agreed interprets a reduced agreement vector: the lowest failing rank (or
// -1) and whether every rank's descriptor was the same.
func agreed(v [agreeWords]int64, size int) (failRank int, same bool) {
	failRank = -1
	if v[2] > 0 {
		failRank = size - int(v[2])
	}
	return failRank, v[0] == -v[1]
}

// mismatch turns every rank's descriptor words into the error both
// backends return for the same disagreement. It names the call this rank
// made (d's), as comm/local's does: comm.CheckFingerprints names rank 0's,
// which on a rank that called another collective (Dup where rank 0 called
// Split) misled; the detail lists what every rank called.
func mismatch(d desc, all [][descWords]uint64) error {
	fps := make([]comm.Fingerprint, len(all))
	for r, w := range all {
		fps[r] = comm.UnpackFingerprint(w)
	}
	if err := comm.CheckFingerprints(fps); err != nil {
		if me := (*comm.MismatchError)(nil); errors.As(err, &me) && me.Op != d.call.String() {
			return &comm.MismatchError{Op: d.call.String(), Detail: me.Detail}
		}
		return err
	}
	// The hashes differed but the descriptors do not: a collision.
	return &comm.MismatchError{Op: d.call.String(), Detail: "the ranks disagree (details unavailable)"}
}
