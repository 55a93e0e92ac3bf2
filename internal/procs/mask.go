package procs

import "math/bits"

// MaskWords is the length of a CPUMask: 1024 CPUs, as sched_getaffinity's
// fixed-size set holds.
const MaskWords = 16

// CPUMask is an affinity mask, bit c of word c/64 for CPU c.
type CPUMask [MaskWords]uint64

// Count is the number of CPUs in m.
func (m CPUMask) Count() int {
	n := 0
	for _, w := range m {
		n += bits.OnesCount64(w)
	}
	return n
}

// MaskShare is how many CPUs the rank whose mask is mine owns when the
// ranks of a node have masks all (mine among them): each of its CPUs
// counts 1/k when k of the masks hold it. Bound ranks own their cores
// (share = their count), unbound ones split the node evenly, and
// overlapping bindings get what they overlap in proportion.
func MaskShare(mine CPUMask, all []CPUMask) float64 {
	share := 0.0
	for c := range MaskWords * 64 {
		if mine[c/64]&(1<<(c%64)) == 0 {
			continue
		}
		k := 0
		for _, m := range all {
			if m[c/64]&(1<<(c%64)) != 0 {
				k++
			}
		}
		share += 1 / float64(max(k, 1))
	}
	return share
}
