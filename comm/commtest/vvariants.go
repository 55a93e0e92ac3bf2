package commtest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/pzgo/pz/comm"
)

// vLayout is the layout the v-variant cases use on n ranks: rank i's part
// has i+1 elements, the parts lie in reverse rank order with a gap of
// two elements before each, so neither the order nor the offsets are the
// back-to-back ones. It returns the counts, the displacements and the
// buffer length.
func vLayout(n int) (counts, displs []int, length int) {
	counts, displs = make([]int, n), make([]int, n)
	at := 0
	for i := n - 1; i >= 0; i-- {
		at += 2
		counts[i], displs[i] = i+1, at
		at += i + 1
	}
	return counts, displs, at
}

// packedLayout lays the same counts back to back.
func packedLayout(counts []int) []int {
	displs, at := make([]int, len(counts)), 0
	for i, n := range counts {
		displs[i] = at
		at += n
	}
	return displs
}

// vPart is what rank from sends to rank to in the v-variant cases.
func vPart(from, to, n int) []int32 {
	p := make([]int32, n)
	for k := range p {
		p[k] = int32(1000*from + 100*to + k)
	}
	return p
}

// expectLaidOut checks that buf holds part(i) at displs[i] for every i and
// the filler everywhere else.
func expectLaidOut(what string, buf []int32, counts, displs []int, part func(i int) []int32, filler int32) error {
	want := slices.Repeat([]int32{filler}, len(buf))
	for i := range counts {
		copy(want[displs[i]:], part(i))
	}
	if !slices.Equal(buf, want) {
		return fmt.Errorf("%s: got %v, want %v", what, buf, want)
	}
	return nil
}

func vvariantsCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	const filler = -7
	// "gaps": reverse rank order with gaps (through scratch); "packed":
	// back to back; "ordered": rank order with a one-element gap before
	// each part (received in place, then spread).
	for _, layout := range []string{"gaps", "packed", "ordered"} {
		counts, d, size := vLayout(n)
		switch layout {
		case "packed":
			d, size = packedLayout(counts), sum(counts)
		case "ordered":
			size = 0
			for i := range n {
				counts[i] = i + 8
				size++
				d[i] = size
				size += counts[i]
			}
		}
		for _, root := range roots(n) {
			// Gatherv: rank i sends i+1 elements.
			var recv []int32
			if me == root {
				recv = slices.Repeat([]int32{filler}, size)
			}
			if err := comm.Gatherv(ctx, c, vPart(me, root, counts[me]), recv, counts, d, root); err != nil {
				return fmt.Errorf("Gatherv (%s, root %d): %w", layout, root, err)
			}
			if me == root {
				if err := expectLaidOut(fmt.Sprintf("Gatherv (%s, root %d)", layout, root), recv, counts, d, func(i int) []int32 { return vPart(i, root, counts[i]) }, filler); err != nil {
					return err
				}
			}

			// Scatterv: root's parts, overlapping in the packed layout's
			// buffer shifted by one (parts may overlap on the send side).
			var send []int32
			if me == root {
				send = make([]int32, size)
				for i := range n {
					copy(send[d[i]:], vPart(root, i, counts[i]))
				}
			}
			mine := make([]int32, counts[me])
			if err := comm.Scatterv(ctx, c, send, counts, d, mine, root); err != nil {
				return fmt.Errorf("Scatterv (%s, root %d): %w", layout, root, err)
			}
			if want := vPart(root, me, counts[me]); !slices.Equal(mine, want) {
				return fmt.Errorf("Scatterv (%s, root %d): got %v, want %v", layout, root, mine, want)
			}
		}

		// Allgatherv.
		all := slices.Repeat([]int32{filler}, size)
		if err := comm.Allgatherv(ctx, c, vPart(me, 0, counts[me]), all, counts, d); err != nil {
			return fmt.Errorf("Allgatherv (%s): %w", layout, err)
		}
		if err := expectLaidOut("Allgatherv ("+layout+")", all, counts, d, func(i int) []int32 { return vPart(i, 0, counts[i]) }, filler); err != nil {
			return err
		}

		// Alltoallv: rank i sends i+j+1 elements to rank j; send parts in
		// this rank's layout of its own counts.
		sc, rc := make([]int, n), make([]int, n)
		for j := range n {
			sc[j], rc[j] = me+j+1, j+me+1
			if layout == "ordered" {
				sc[j], rc[j] = sc[j]+8, rc[j]+8 // gaps few enough to receive in place
			}
		}
		sd, sLen := packedLayout(sc), sum(sc)
		rd, rLen := packedLayout(rc), sum(rc)
		switch layout {
		case "ordered":
			// Rank order, one element before each part.
			sd, rd = make([]int, n), make([]int, n)
			sLen, rLen = 0, 0
			for j := range n {
				sLen++
				sd[j] = sLen
				sLen += sc[j]
				rLen++
				rd[j] = rLen
				rLen += rc[j]
			}
		case "gaps":
			// Reverse order with gaps on both sides.
			sd, rd = make([]int, n), make([]int, n)
			sLen, rLen = 0, 0
			for j := n - 1; j >= 0; j-- {
				sLen++
				sd[j] = sLen
				sLen += sc[j]
				rLen += 3
				rd[j] = rLen
				rLen += rc[j]
			}
		}
		send := make([]int32, sLen)
		for j := range n {
			copy(send[sd[j]:], vPart(me, j, sc[j]))
		}
		recv := slices.Repeat([]int32{filler}, rLen)
		if err := comm.Alltoallv(ctx, c, send, sc, sd, recv, rc, rd); err != nil {
			return fmt.Errorf("Alltoallv (%s): %w", layout, err)
		}
		if err := expectLaidOut("Alltoallv ("+layout+")", recv, rc, rd, func(i int) []int32 { return vPart(i, me, rc[i]) }, filler); err != nil {
			return err
		}
	}
	return nil
}

func sum(counts []int) int {
	s := 0
	for _, n := range counts {
		s += n
	}
	return s
}

// misuseVvariantsCase feeds the v-variants bad layouts and counts that do
// not match what is sent: the rank at fault gets an ArgError, the ranks
// that expected data a MismatchError, the others nil, and the
// communicator stays usable.
func misuseVvariantsCase(ctx context.Context, c comm.Comm) error {
	n, me, last := c.Size(), c.Rank(), c.Size()-1
	counts, displs, length := vLayout(n)
	want := func(what string, err error, fault bool, target error) error {
		switch {
		case fault && !errors.Is(err, target):
			return fmt.Errorf("%s: got %v, want an error wrapping %v", what, err, target)
		case !fault && err != nil:
			return fmt.Errorf("%s: unexpected error %v", what, err)
		}
		return nil
	}

	// Gatherv: root's parts overlap.
	bad := slices.Clone(displs)
	bad[0] = displs[last] // rank 0's part starts where the last rank's does
	var recv []int32
	if me == last {
		recv = make([]int32, length)
	}
	err := comm.Gatherv(ctx, c, vPart(me, last, me+1), recv, counts, bad, last)
	if err := want("Gatherv with overlapping parts", err, me == last && n > 1, comm.ErrInvalidArg); err != nil {
		return err
	}

	// Gatherv: rank 0 sends one element more than root expects.
	extra := 0
	if me == 0 {
		extra = 1
	}
	err = comm.Gatherv(ctx, c, vPart(me, last, me+1+extra), recv, counts, displs, last)
	if err := want("Gatherv with a part too long", err, me == last, comm.ErrMismatch); err != nil {
		return err
	}

	// Scatterv: root's last part lies past its buffer; every rank that
	// expected data gets nothing and says so.
	var send []int32
	if me == 0 {
		send = make([]int32, length-1)
	}
	err = comm.Scatterv(ctx, c, send, counts, displs, make([]int32, me+1), 0)
	target := comm.ErrMismatch
	if me == 0 {
		target = comm.ErrInvalidArg
	}
	if err := want("Scatterv with a part outside the buffer", err, true, target); err != nil {
		return err
	}

	// Allgatherv: the last rank passes one count too few.
	ac := counts
	if me == last {
		ac = counts[:n-1]
	}
	err = comm.Allgatherv(ctx, c, vPart(me, 0, me+1), make([]int32, length), ac, displs)
	if err := want("Allgatherv with too few counts", err, me == last, comm.ErrInvalidArg); err != nil {
		return err
	}

	// Alltoallv: rank 0 expects one element too many from every rank.
	sc, rc := make([]int, n), make([]int, n)
	for j := range n {
		sc[j], rc[j] = 2, 2
		if me == 0 {
			rc[j] = 3
		}
	}
	err = comm.Alltoallv(ctx, c, make([]int32, 2*n), sc, packedLayout(sc), make([]int32, sum(rc)), rc, packedLayout(rc))
	if err := want("Alltoallv expecting too much", err, me == 0, comm.ErrMismatch); err != nil {
		return err
	}

	// Still usable.
	got, err := comm.AllReduce(ctx, c, []int32{1}, comm.Sum)
	if err != nil || got[0] != int32(n) {
		return fmt.Errorf("AllReduce after the misuse: %v, %v", got, err)
	}
	return nil
}
