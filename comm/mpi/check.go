package mpi

import (
	"fmt"
	"strings"

	"github.com/pzgo/pz/comm"
)

// call identifies a collective in the agreement step.
type call uint8

const (
	callBarrier call = iota + 1
	callBcast
	callReduce
	callAllReduce
	callGather
	callAllGather
	callScatter
	callAlltoall
	callSplit
	callFree
	callDup
)

func (k call) String() string {
	switch k {
	case callBarrier:
		return "Barrier"
	case callBcast:
		return "Bcast"
	case callReduce:
		return "Reduce"
	case callAllReduce:
		return "AllReduce"
	case callGather:
		return "Gather"
	case callAllGather:
		return "AllGather"
	case callScatter:
		return "Scatter"
	case callAlltoall:
		return "Alltoall"
	case callSplit:
		return "Split"
	case callFree:
		return "Free"
	case callDup:
		return "Dup"
	}
	return fmt.Sprintf("call(%d)", uint8(k))
}

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

// descWords is the number of int64 words of a desc on the wire.
const descWords = 5

func (d desc) words() [descWords]int64 {
	return [descWords]int64{int64(d.call), int64(d.dt), int64(d.op), d.count, d.root}
}

// fingerprint hashes d into a non-negative int63, so that the agreement step
// can compare it with one MPI_MAX reduction over {fp, -fp}: all ranks agree
// exactly when max(fp) == -max(-fp). The mixer is SplitMix64's finalizer
// (Steele, Lea, Flood 2014); two different descriptors collide with
// probability about 2^-63.
func (d desc) fingerprint() int64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, w := range d.words() {
		h ^= uint64(w)
		h += 0x9e3779b97f4a7c15
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
		h = (h ^ (h >> 27)) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return int64(h >> 1)
}

// agreement is the vector the agreement step reduces with MPI_MAX:
// {fingerprint, -fingerprint, failure code}. The failure code of a rank
// whose arguments are invalid is size-rank (0 otherwise), so the maximum
// names the lowest failing rank.
const agreeWords = 3

func agreeVector(d desc, rank, size int, localErr error) [agreeWords]int64 {
	fp := d.fingerprint()
	var fail int64
	if localErr != nil {
		fail = int64(size - rank)
	}
	return [agreeWords]int64{fp, -fp, fail}
}

// agreed interprets a reduced agreement vector: the lowest failing rank (or
// -1) and whether every rank's fingerprint was the same.
func agreed(v [agreeWords]int64, size int) (failRank int, same bool) {
	failRank = -1
	if v[2] > 0 {
		failRank = size - int(v[2])
	}
	return failRank, v[0] == -v[1]
}

// mismatchDetail describes how the descriptors of all ranks differ, e.g.
// "count: rank 0 has 4, rank 2 has 3".
func mismatchDetail(all [][descWords]int64) string {
	names := [descWords]string{"call", "datatype", "op", "count", "root"}
	var parts []string
	for f := range descWords {
		for r := 1; r < len(all); r++ {
			if all[r][f] != all[0][f] {
				parts = append(parts, fmt.Sprintf("%s: rank 0 has %s, rank %d has %s",
					names[f], fieldString(f, all[0][f]), r, fieldString(f, all[r][f])))
				break
			}
		}
	}
	if len(parts) == 0 {
		return "the ranks disagree (details unavailable)"
	}
	return strings.Join(parts, "; ")
}

func fieldString(f int, v int64) string {
	switch f {
	case 0:
		return call(v).String()
	case 1:
		return comm.Datatype(v).String()
	case 2:
		return comm.Op(v).String()
	}
	if v < 0 {
		return "(any)"
	}
	return fmt.Sprint(v)
}
