package commtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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

// vvariantsAliasCase: a v-variant's send and receive buffers may share
// memory only in the in-place form (like MPI_IN_PLACE): on Gatherv's root
// and in Allgatherv send is this rank's own part of recv, on Scatterv's
// root recv is root's own part of send, and in Alltoallv send and recv
// are one slice with one layout. Those give the usual results. Any other
// overlap is an *ArgError on the rank that passed it, which writes
// nothing into its buffers but still sends, so that the others get their
// parts and return nil. Before this was checked the collectives read a
// send buffer that the peers' parts were overwriting: wrong data, without
// an error, and different on each backend (a user's trial of the
// v-variants found it).
func vvariantsAliasCase(ctx context.Context, c comm.Comm) error {
	n, me, last := c.Size(), c.Rank(), c.Size()-1
	const filler = -7
	const big = 3000 // a part of some size, past the eager copies
	isArgErr := func(what string, err error) error {
		var ae *comm.ArgError
		if !errors.As(err, &ae) || ae.Rank != me || ae.Op != what || !strings.Contains(ae.Detail, "in-place") {
			return fmt.Errorf("%s with overlapping buffers on rank %d: got %v, want an *ArgError of %s naming rank %d and the in-place form", what, me, err, what, me)
		}
		return nil
	}
	for _, layout := range []string{"gaps", "packed", "ordered"} {
		counts, d, size := vLayout(n)
		for i := range counts {
			counts[i] += big
		}
		switch layout {
		case "packed":
			d, size = packedLayout(counts), sum(counts)
		case "gaps":
			d, size = make([]int, n), 0
			for i := n - 1; i >= 0; i-- {
				size += 2
				d[i] = size
				size += counts[i]
			}
		case "ordered":
			d, size = make([]int, n), 0
			for i := range n {
				size++
				d[i] = size
				size += counts[i]
			}
		}
		// shifted is a slice of buf of counts[i] elements one past part i:
		// it overlaps the parts without being one (buf has a spare
		// element at the end).
		shifted := func(buf []int32, i int) []int32 { return buf[d[i]+1 : d[i]+1+counts[i]] }
		part := func(from, to int) []int32 { return vPart(from, to, counts[from]) }

		// Allgatherv in place, then with the last rank's send shifted.
		all := slices.Repeat([]int32{filler}, size+1)
		copy(all[d[me]:], part(me, 0))
		if err := comm.Allgatherv(ctx, c, all[d[me]:d[me]+counts[me]], all, counts, d); err != nil {
			return fmt.Errorf("Allgatherv in place (%s): %w", layout, err)
		}
		if err := expectLaidOut("Allgatherv in place ("+layout+")", all[:size], counts, d, func(i int) []int32 { return part(i, 0) }, filler); err != nil {
			return err
		}
		all = slices.Repeat([]int32{filler}, size+1)
		send := part(me, 0)
		if me == last {
			send = shifted(all, me)
			copy(send, part(me, 0))
		}
		before := slices.Clone(all)
		err := comm.Allgatherv(ctx, c, send, all, counts, d)
		if me == last {
			if err := isArgErr("Allgatherv", err); err != nil {
				return err
			}
			if !slices.Equal(all, before) {
				return fmt.Errorf("Allgatherv with overlapping buffers (%s): rank %d's buffer was written", layout, me)
			}
		} else {
			if err != nil {
				return fmt.Errorf("Allgatherv (%s) beside rank %d's overlapping buffers: %w", layout, last, err)
			}
			if err := expectLaidOut("Allgatherv ("+layout+") beside overlapping buffers", all[:size], counts, d, func(i int) []int32 { return part(i, 0) }, filler); err != nil {
				return err
			}
		}

		for _, root := range roots(n) {
			// Gatherv: root's send in place, then shifted.
			for _, form := range []string{"in place", "overlapping"} {
				var recv []int32
				send := part(me, root)
				if me == root {
					recv = slices.Repeat([]int32{filler}, size+1)
					send = recv[d[me] : d[me]+counts[me]]
					if form == "overlapping" {
						send = shifted(recv, me)
					}
					copy(send, part(me, root))
				}
				before := slices.Clone(recv)
				err := comm.Gatherv(ctx, c, send, recv, counts, d, root)
				switch {
				case me != root && err != nil:
					return fmt.Errorf("Gatherv %s (%s, root %d) on a non-root: %w", form, layout, root, err)
				case me == root && form == "in place":
					if err != nil {
						return fmt.Errorf("Gatherv in place (%s, root %d): %w", layout, root, err)
					}
					if err := expectLaidOut(fmt.Sprintf("Gatherv in place (%s, root %d)", layout, root), recv[:size], counts, d, func(i int) []int32 { return part(i, root) }, filler); err != nil {
						return err
					}
				case me == root:
					if err := isArgErr("Gatherv", err); err != nil {
						return err
					}
					if !slices.Equal(recv, before) {
						return fmt.Errorf("Gatherv with overlapping buffers (%s, root %d): root's buffer was written", layout, root)
					}
				}
			}

			// Scatterv: root's recv in place, then shifted.
			for _, form := range []string{"in place", "overlapping"} {
				var send []int32
				recv := make([]int32, counts[me])
				if me == root {
					send = slices.Repeat([]int32{filler}, size+1)
					for i := range n {
						copy(send[d[i]:], vPart(root, i, counts[i]))
					}
					recv = send[d[me] : d[me]+counts[me]]
					if form == "overlapping" {
						recv = shifted(send, me)
					}
				}
				before := slices.Clone(send)
				err := comm.Scatterv(ctx, c, send, counts, d, recv, root)
				switch {
				case me != root:
					if err != nil {
						return fmt.Errorf("Scatterv %s (%s, root %d) on a non-root: %w", form, layout, root, err)
					}
					if want := vPart(root, me, counts[me]); !slices.Equal(recv, want) {
						return fmt.Errorf("Scatterv %s (%s, root %d): got %v, want %v", form, layout, root, recv, want)
					}
				case form == "in place":
					if err != nil {
						return fmt.Errorf("Scatterv in place (%s, root %d): %w", layout, root, err)
					}
					if !slices.Equal(send, before) {
						return fmt.Errorf("Scatterv in place (%s, root %d): root's buffer changed", layout, root)
					}
				default:
					if err := isArgErr("Scatterv", err); err != nil {
						return err
					}
					if !slices.Equal(send, before) {
						return fmt.Errorf("Scatterv with overlapping buffers (%s, root %d): root's buffer was written", layout, root)
					}
				}
			}
		}

		// Alltoallv in place: rank i sends counts[i]+counts[j] elements
		// to rank j (as many as it receives from j), at the same place.
		ac, ad, aLen := make([]int, n), make([]int, n), 0
		for j := range n {
			ac[j] = counts[me] + counts[j]
		}
		switch layout {
		case "packed":
			ad, aLen = packedLayout(ac), sum(ac)
		case "gaps":
			for j := n - 1; j >= 0; j-- {
				aLen += 2
				ad[j] = aLen
				aLen += ac[j]
			}
		case "ordered":
			for j := range n {
				aLen++
				ad[j] = aLen
				aLen += ac[j]
			}
		}
		buf := slices.Repeat([]int32{filler}, aLen+1)
		for j := range n {
			copy(buf[ad[j]:], vPart(me, j, ac[j]))
		}
		if err := comm.Alltoallv(ctx, c, buf, ac, ad, buf, ac, ad); err != nil {
			return fmt.Errorf("Alltoallv in place (%s): %w", layout, err)
		}
		if err := expectLaidOut("Alltoallv in place ("+layout+")", buf[:aLen], ac, ad, func(i int) []int32 { return vPart(i, me, ac[i]) }, filler); err != nil {
			return err
		}
		// The last rank receives one element further on than it sends
		// from, in the same memory.
		buf = slices.Repeat([]int32{filler}, aLen+1)
		for j := range n {
			copy(buf[ad[j]:], vPart(me, j, ac[j]))
		}
		sendBuf, recvBuf := buf[:aLen], make([]int32, aLen)
		if me == last {
			recvBuf = buf[1:]
		}
		before = slices.Clone(buf)
		err = comm.Alltoallv(ctx, c, sendBuf, ac, ad, recvBuf, ac, ad)
		if me == last {
			if err := isArgErr("Alltoallv", err); err != nil {
				return err
			}
			if !slices.Equal(buf, before) {
				return fmt.Errorf("Alltoallv with overlapping buffers (%s): rank %d's buffer was written", layout, me)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("Alltoallv (%s) beside rank %d's overlapping buffers: %w", layout, last, err)
		}
		if err := expectLaidOut("Alltoallv ("+layout+") beside overlapping buffers", recvBuf, ac, ad, func(i int) []int32 { return vPart(i, me, ac[i]) }, 0); err != nil {
			return err
		}
	}
	return nil
}
