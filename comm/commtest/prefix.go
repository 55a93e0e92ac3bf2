package commtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pzgo/pz/comm"
)

// prefixCases are the cases of Scan, Exscan, the reduce-scatters and
// Sendrecv with null peers.
func prefixCases() []Case {
	return []Case{
		{"Scan", scanCase},
		{"ReduceScatter", reduceScatterCase},
		{"Misuse/ReduceScatter", misuseReduceScatterCase},
		{"AllGatherTo", allGatherToCase},
		{"MinLocMaxLoc", locCase},
		{"P2P/Sendrecv", sendrecvCase},
		{"P2P/SendrecvRing", sendrecvRingCase},
	}
}

func scanCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	send := []int64{int64(me + 1), int64(10 * me), 1}
	got, err := comm.Scan(ctx, c, send, comm.Sum)
	if err != nil {
		return fmt.Errorf("Scan: %w", err)
	}
	// Ranks 0..me: sum of r+1, of 10r, of 1.
	want := []int64{int64((me + 1) * (me + 2) / 2), int64(10 * me * (me + 1) / 2), int64(me + 1)}
	if err := sameSlice("Scan sum", got, want); err != nil {
		return err
	}
	mx, err := comm.Scan(ctx, c, []float64{float64((me * 7) % n)}, comm.Max)
	if err != nil {
		return fmt.Errorf("Scan max: %w", err)
	}
	best := 0.0
	for r := 0; r <= me; r++ {
		best = max(best, float64((r*7)%n))
	}
	if mx[0] != best {
		return fmt.Errorf("Scan max: %v, want %v", mx[0], best)
	}
	ex, err := comm.Exscan(ctx, c, send, comm.Sum)
	if err != nil {
		return fmt.Errorf("Exscan: %w", err)
	}
	if me == 0 {
		if ex != nil {
			return fmt.Errorf("Exscan on rank 0: %v, want nil", ex)
		}
	} else if err := sameSlice("Exscan", ex, []int64{int64(me * (me + 1) / 2), int64(10 * (me - 1) * me / 2), int64(me)}); err != nil {
		return err
	}
	return scanFoldCase(ctx, c)
}

// scanFoldCase checks that Scan and Exscan fold from the left in rank
// order, bit for bit ((s0 + s1) + s2 ..., with values whose float sums
// depend on the order), below and above comm/local's eager limit, and in
// place through a backend's native ScanBuf.
func scanFoldCase(ctx context.Context, c comm.Comm) error {
	me := c.Rank()
	for _, count := range []int{5, 1000} {
		vals := func(r int) []float64 {
			v := make([]float64, count)
			for i := range v {
				v[i] = 0.1*float64(r+1) + 1e-9*float64(i) + float64(i%3)*1e7
			}
			return v
		}
		prefix := func(last int) []float64 {
			out := append([]float64(nil), vals(0)...)
			for r := 1; r <= last; r++ {
				for i, x := range vals(r) {
					out[i] += x
				}
			}
			return out
		}
		got, err := comm.Scan(ctx, c, vals(me), comm.Sum)
		if err != nil {
			return fmt.Errorf("Scan of %d: %w", count, err)
		}
		if err := sameSlice(fmt.Sprintf("Scan of %d", count), got, prefix(me)); err != nil {
			return err
		}
		ex, err := comm.Exscan(ctx, c, vals(me), comm.Sum)
		if err != nil {
			return fmt.Errorf("Exscan of %d: %w", count, err)
		}
		if me > 0 {
			if err := sameSlice(fmt.Sprintf("Exscan of %d", count), ex, prefix(me-1)); err != nil {
				return err
			}
		}
		if sc, ok := c.(comm.ScanComm); ok {
			// In place; a backend may leave float sums to the fallback.
			buf := vals(me)
			err := sc.ScanBuf(ctx, comm.BufOf(buf), comm.BufOf(buf), comm.Sum, false)
			if err == nil {
				err = sameSlice(fmt.Sprintf("ScanBuf of %d float64 in place", count), buf, prefix(me))
			} else if errors.Is(err, errors.ErrUnsupported) {
				err = nil
			}
			if err != nil {
				return err
			}
			buf = vals(me)
			err = sc.ScanBuf(ctx, comm.BufOf(buf), comm.BufOf(buf), comm.Sum, true)
			if err == nil && me > 0 {
				err = sameSlice(fmt.Sprintf("ScanBuf of %d float64, exclusive, in place", count), buf, prefix(me-1))
			} else if errors.Is(err, errors.ErrUnsupported) {
				err = nil
			}
			if err != nil {
				return err
			}
			ints := make([]int64, count)
			for i := range ints {
				ints[i] = int64(i*(me+1) - 7)
			}
			if err := sc.ScanBuf(ctx, comm.BufOf(ints), comm.BufOf(ints), comm.Sum, true); err != nil {
				return fmt.Errorf("ScanBuf of %d int64, exclusive, in place: %w", count, err)
			}
			if me > 0 {
				for i, got := range ints {
					if want := int64(i*me*(me+1)/2 - 7*me); got != want {
						return fmt.Errorf("ScanBuf of %d int64, exclusive, in place: element %d is %d, want %d", count, i, got, want)
					}
				}
			}
		}
	}
	return nil
}

func reduceScatterCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	const k = 3
	send := make([]float64, n*k)
	for i := range send {
		send[i] = float64(i + me)
	}
	got, err := comm.ReduceScatterBlock(ctx, c, send, comm.Sum)
	if err != nil {
		return fmt.Errorf("ReduceScatterBlock: %w", err)
	}
	want := make([]float64, k)
	for j := range k {
		i := me*k + j
		want[j] = float64(n*i + n*(n-1)/2)
	}
	if err := sameSlice("ReduceScatterBlock", got, want); err != nil {
		return err
	}
	// Rank r gets r+1 elements.
	counts := make([]int, n)
	total := 0
	for r := range counts {
		counts[r] = r + 1
		total += r + 1
	}
	vec := make([]int64, total)
	for i := range vec {
		vec[i] = int64(i * (me + 1))
	}
	part, err := comm.ReduceScatter(ctx, c, vec, counts, comm.Sum)
	if err != nil {
		return fmt.Errorf("ReduceScatter: %w", err)
	}
	off := me * (me + 1) / 2
	wantPart := make([]int64, me+1)
	for j := range wantPart {
		wantPart[j] = int64((off + j) * n * (n + 1) / 2)
	}
	if err := sameSlice("ReduceScatter", part, wantPart); err != nil {
		return err
	}
	if n > 1 {
		if _, err := comm.ReduceScatterBlock(ctx, c, make([]float64, n+1), comm.Sum); !errors.Is(err, comm.ErrInvalidArg) {
			return fmt.Errorf("ReduceScatterBlock of %d elements on %d ranks: %v, want ErrInvalidArg", n+1, n, err)
		}
		// Counts that differ across ranks with the same sum (the last
		// rank swaps its first two): the blocks would overlap, silently.
		mine := slices.Clone(counts)
		if me == n-1 {
			mine[0], mine[1] = mine[1], mine[0]
		}
		_, err := comm.ReduceScatter(ctx, c, vec, mine, comm.Sum)
		var me2 *comm.MismatchError
		if !errors.As(err, &me2) || !strings.Contains(err.Error(), fmt.Sprintf("rank %d passed %v", n-1, countsOf(n, true))) {
			return fmt.Errorf("ReduceScatter with rank %d's counts swapped: %v, want a *comm.MismatchError naming its counts", n-1, err)
		}
	}
	return nil
}

// countsOf is reduceScatterCase's counts (rank r gets r+1), with the
// first two swapped if swap.
func countsOf(n int, swap bool) []int {
	out := make([]int, n)
	for r := range out {
		out[r] = r + 1
	}
	if swap {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

// allGatherToCase: equal blocks in rank order, at lengths that ride in
// comm/mpi's agreement step and past comm/local's eager limit, in place
// (send is this rank's block of dst), and a dst of the wrong length on
// every rank.
func allGatherToCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	for _, k := range []int{0, 1, 3, 1000} {
		send := make([]int64, k)
		for i := range send {
			send[i] = int64(me*100000 + i)
		}
		want := make([]int64, n*k)
		for r := range n {
			for i := range k {
				want[r*k+i] = int64(r*100000 + i)
			}
		}
		dst := make([]int64, n*k)
		if err := comm.AllGatherTo(ctx, c, dst, send); err != nil {
			return fmt.Errorf("AllGatherTo of %d int64: %w", k, err)
		}
		if err := sameSlice(fmt.Sprintf("AllGatherTo of %d int64", k), dst, want); err != nil {
			return err
		}
		inplace := make([]int64, n*k)
		copy(inplace[me*k:], send)
		if err := comm.AllGatherTo(ctx, c, inplace, inplace[me*k:(me+1)*k]); err != nil {
			return fmt.Errorf("AllGatherTo of %d int64 in place: %w", k, err)
		}
		if err := sameSlice(fmt.Sprintf("AllGatherTo of %d int64 in place", k), inplace, want); err != nil {
			return err
		}
	}
	if err := comm.AllGatherTo(ctx, c, make([]float32, n*2+1), make([]float32, 2)); !errors.Is(err, comm.ErrInvalidArg) {
		return fmt.Errorf("AllGatherTo into %d elements of 2 per rank on %d ranks: %v, want ErrInvalidArg", n*2+1, n, err)
	}
	return nil
}

// lineNeighbours returns this rank's neighbours on a line of ranks (not a
// ring): ProcNull beyond the ends.
func lineNeighbours(c comm.Comm) (left, right int) {
	left, right = c.Rank()-1, c.Rank()+1
	if left < 0 {
		left = comm.ProcNull
	}
	if right >= c.Size() {
		right = comm.ProcNull
	}
	return left, right
}

// sendrecvCase is a halo exchange on a line of ranks (not a ring): the
// ends talk to ProcNull.
func sendrecvCase(ctx context.Context, c comm.Comm) error {
	me := c.Rank()
	left, right := lineNeighbours(c)
	for _, count := range []int{4, 1000} { // below and above comm/local's eager limit
		mine := make([]float64, count)
		for i := range mine {
			mine[i] = float64(me*10000 + i)
		}
		fromLeft := make([]float64, count)
		st, err := comm.Sendrecv(ctx, c, mine, right, 5, fromLeft, left, 5)
		if err != nil {
			return fmt.Errorf("Sendrecv: %w", err)
		}
		if left == comm.ProcNull {
			if st.Source != comm.ProcNull || st.Count != 0 {
				return fmt.Errorf("Sendrecv from ProcNull: status %+v", st)
			}
		} else if st.Source != left || st.Count != count || fromLeft[count-1] != float64(left*10000+count-1) {
			return fmt.Errorf("Sendrecv from rank %d: status %+v, last %v", left, st, fromLeft[count-1])
		}
		// And back, in place.
		buf := append([]float64(nil), mine...)
		st, err = comm.SendrecvReplace(ctx, c, buf, left, 6, right, 6)
		if err != nil {
			return fmt.Errorf("SendrecvReplace: %w", err)
		}
		if right != comm.ProcNull && (st.Source != right || buf[0] != float64(right*10000)) {
			return fmt.Errorf("SendrecvReplace from rank %d: status %+v, first %v", right, st, buf[0])
		}
		if right == comm.ProcNull && buf[0] != mine[0] {
			return fmt.Errorf("SendrecvReplace from ProcNull changed the buffer")
		}
	}
	return c.Barrier(ctx)
}

// sendrecvRingCase exchanges around a ring, every peer a real rank (on one
// rank, the rank itself), so that a backend's native Sendrecv runs:
// messages of 0, 4 and 1000 elements into a buffer with room to spare;
// then a message longer than the receive buffer, which fails with
// ErrTruncated on every rank and is consumed (the next exchange on the
// same tag gets the next message); then send and receive buffers that
// overlap, refused with an ArgError before anything is sent.
func sendrecvRingCase(ctx context.Context, c comm.Comm) error {
	// Twice: with ctx, and with a context that cannot be canceled (comm/mpi
	// blocks in MPI_Sendrecv then; with ctx it polls).
	for _, cx := range []context.Context{ctx, context.WithoutCancel(ctx)} {
		if err := sendrecvRing(cx, c); err != nil {
			return err
		}
	}
	return c.Barrier(ctx)
}

func sendrecvRing(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	for _, count := range []int{0, 4, 1000} {
		mine := make([]int64, count)
		for i := range mine {
			mine[i] = int64(me*100000 + i)
		}
		got := make([]int64, count+3)
		st, err := comm.Sendrecv(ctx, c, mine, right, 7, got, left, 7)
		if err != nil {
			return fmt.Errorf("Sendrecv of %d: %w", count, err)
		}
		if st.Source != left || st.Tag != 7 || st.Count != count {
			return fmt.Errorf("Sendrecv of %d from rank %d: status %+v", count, left, st)
		}
		for i := range count {
			if got[i] != int64(left*100000+i) {
				return fmt.Errorf("Sendrecv of %d from rank %d: element %d is %d", count, left, i, got[i])
			}
		}
	}
	_, err := comm.Sendrecv(ctx, c, []int64{1, 2, 3, 4, 5, 6, 7, 8}, right, 8, make([]int64, 4), left, 8)
	if !errors.Is(err, comm.ErrTruncated) {
		return fmt.Errorf("Sendrecv of 8 elements into 4: got %v, want ErrTruncated", err)
	}
	got := make([]int64, 1)
	st, err := comm.Sendrecv(ctx, c, []int64{int64(me)}, right, 8, got, left, 8)
	if err != nil || st.Count != 1 || got[0] != int64(left) {
		return fmt.Errorf("Sendrecv after a truncated one: status %+v, got %v, err %v (want rank %d's message)", st, got, err, left)
	}
	buf := make([]int64, 6)
	_, err = comm.Sendrecv(ctx, c, buf[:4], right, 9, buf[2:], left, 9)
	var ae *comm.ArgError
	if !errors.As(err, &ae) {
		return fmt.Errorf("Sendrecv with overlapping buffers: got %v, want an ArgError", err)
	}
	// SendrecvReplace's errors name it, not the Sendrecv it shares its
	// path with: the backend's native exchange (to the right) and, with
	// ProcNull as the destination, an Isend and a Recv. The message that
	// does not fit was sent ahead by an Isend; the one SendrecvReplace
	// sends (to the right) is received by an Irecv posted before it: a
	// send may wait for its receive (MPICH's to the rank itself does), so
	// a Recv after SendrecvReplace returned could never be reached.
	for _, dest := range []int{right, comm.ProcNull} {
		ahead, err := comm.Isend(c, []int64{1, 2, 3, 4, 5, 6, 7, 8}, right, 10)
		if err != nil {
			return fmt.Errorf("Isend ahead of SendrecvReplace: %w", err)
		}
		var its comm.Request
		if dest != comm.ProcNull {
			if its, err = comm.Irecv(c, make([]int64, 4), left, 11); err != nil {
				return fmt.Errorf("Irecv of SendrecvReplace's message: %w", err)
			}
		}
		_, err = comm.SendrecvReplace(ctx, c, []int64{1, 2, 3, 4}, dest, 11, left, 10)
		if !errors.Is(err, comm.ErrTruncated) || !strings.Contains(err.Error(), "SendrecvReplace") || strings.Contains(err.Error(), "Sendrecv ") {
			return fmt.Errorf("SendrecvReplace of 8 elements into 4 (to %d): got %v, want ErrTruncated naming SendrecvReplace", dest, err)
		}
		if its != nil {
			if _, err := its.Wait(ctx); err != nil {
				return fmt.Errorf("Irecv of SendrecvReplace's message: %w", err)
			}
		}
		if _, err := ahead.Wait(ctx); err != nil {
			return fmt.Errorf("Isend ahead of SendrecvReplace: %w", err)
		}
	}
	return nil
}

// valueCases are the cases of the codec's limits and of values that cannot
// be encoded.
func valueCases() []Case {
	return []Case{
		{"Values/Large", largeValuesCase},
		{"Values/SendUnencodable", sendUnencodableCase},
		{"Values/Complex", complexValuesCase},
		{"Values/Alltoall", alltoallValuesCase},
	}
}

// alltoallValuesCase: AlltoallValues delivers vals[i] of every rank to
// rank i, in rank order, with values of different sizes; a rank passing
// the wrong number of values makes every rank fail instead of hang.
func alltoallValuesCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	vals := make([]point, n)
	for to := range vals {
		vals[to] = point{X: int32(me), Y: int32(to), Tag: strings.Repeat("x", me*to)}
	}
	got, err := comm.AlltoallValues(ctx, c, vals)
	if err != nil {
		return err
	}
	for from, p := range got {
		if want := (point{X: int32(from), Y: int32(me), Tag: strings.Repeat("x", from*me)}); p != want {
			return fmt.Errorf("from rank %d: got %+v, want %+v", from, p, want)
		}
	}
	// The wrong number of values on the last rank.
	return misuse(ctx, c, func(d comm.Comm) error {
		vals := make([]point, d.Size())
		if d.Rank() == d.Size()-1 {
			vals = append(vals, point{})
		}
		if _, err := comm.AlltoallValues(ctx, d, vals); err == nil {
			return fmt.Errorf("AlltoallValues with %d values on rank %d: no error", d.Size()+1, d.Size()-1)
		}
		return nil
	})
}

// point is an element of the large values.
type point struct {
	X, Y int32
	Tag  string
}

// largeValuesCase gathers 200,000 structs from every rank and a value
// nested 200 levels deep: beyond the codec's default limits for untrusted
// input, within what ranks of one job must exchange.
func largeValuesCase(ctx context.Context, c comm.Comm) error {
	me := c.Rank()
	const n = 200_000
	pts := make([]point, n)
	for i := range pts {
		pts[i] = point{X: int32(i), Y: int32(me), Tag: "p"}
	}
	all, err := comm.AllGatherValues(ctx, c, pts)
	if err != nil {
		return fmt.Errorf("AllGatherValues of %d structs: %w", n, err)
	}
	for r, got := range all {
		if len(got) != n || got[n-1] != (point{X: n - 1, Y: int32(r), Tag: "p"}) {
			return fmt.Errorf("rank %d's %d structs: got %d, last %+v", r, n, len(got), got[len(got)-1])
		}
	}
	var deep any = "leaf"
	for range 200 {
		deep = []any{deep}
	}
	got, err := comm.BcastValue(ctx, c, deep, 0)
	if err != nil {
		return fmt.Errorf("Bcast of a value nested 200 deep: %w", err)
	}
	depth := 0
	for {
		s, ok := got.([]any)
		if !ok {
			break
		}
		depth++
		got = s[0]
	}
	if depth != 200 || got != "leaf" {
		return fmt.Errorf("value nested 200 deep came back %d deep with %v", depth, got)
	}
	m := make(map[int32]int32, n)
	for i := range int32(n) {
		m[i] = i * 2
	}
	gm, err := comm.BcastValue(ctx, c, m, 0)
	if err != nil || len(gm) != n || gm[n-1] != 2*(n-1) {
		return fmt.Errorf("Bcast of a map of %d pairs: %d pairs, %v", n, len(gm), err)
	}
	return nil
}

// sendUnencodableCase: the sender of a value that cannot be encoded gets
// the error, and the receiver is told instead of waiting.
func sendUnencodableCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	done := make(chan error, 1)
	go func() {
		_, _, err := comm.RecvValue[any](ctx, c, prev, 31)
		done <- err
	}()
	if err := comm.SendValue[any](ctx, c, make(chan int), next, 31); !errors.Is(err, comm.ErrInvalidArg) {
		return fmt.Errorf("SendValue of a channel: %v, want ErrInvalidArg", err)
	}
	if err := <-done; !errors.Is(err, comm.ErrInvalidArg) || !strings.Contains(err.Error(), "cannot encode") {
		return fmt.Errorf("RecvValue of a channel: %v, want ErrInvalidArg saying it cannot be encoded", err)
	}
	return c.Barrier(ctx)
}

// complexValue is a value helper payload with complex numbers inside.
type complexValue struct {
	Z     complex128
	Zs    []complex64
	Any   any
	ByKey map[string]complex128
}

// complexValuesCase sends complex numbers through the value helpers,
// nested in a struct, a slice, a map and an interface.
func complexValuesCase(ctx context.Context, c comm.Comm) error {
	me := c.Rank()
	v := complexValue{Z: complex(float64(me), -1), Zs: []complex64{complex64(complex(0, float32(me)))},
		Any: []any{complex128(complex(1, float64(me)))}, ByKey: map[string]complex128{"r": complex(float64(me), 0)}}
	all, err := comm.AllGatherValues(ctx, c, v)
	if err != nil {
		return fmt.Errorf("AllGatherValues with complex numbers: %w", err)
	}
	for r, got := range all {
		items, ok := got.Any.([]any)
		if got.Z != complex(float64(r), -1) || len(got.Zs) != 1 || got.Zs[0] != complex64(complex(0, float32(r))) ||
			!ok || len(items) != 1 || items[0] != complex128(complex(1, float64(r))) || got.ByKey["r"] != complex(float64(r), 0) {
			return fmt.Errorf("rank %d's value came back as %+v", r, got)
		}
	}
	sum, err := comm.AllReduceValue(ctx, c, v.Z, func(a, b complex128) complex128 { return a + b })
	n := c.Size()
	if err != nil || sum != complex(float64(n*(n-1)/2), -float64(n)) {
		return fmt.Errorf("AllReduceValue of complex128: %v, %v", sum, err)
	}
	return nil
}

// locCase finds each position's smallest and largest value over the
// ranks, and where; ties go to the smallest index.
func locCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	send := []comm.Loc[float64]{
		{Value: float64((me * 5) % n), Index: me}, // distinct values
		{Value: 1, Index: me},                     // a tie everywhere
		{Value: float64(-me), Index: 10 + me},
	}
	lo, err := comm.AllReduceMinLoc(ctx, c, send)
	if err != nil {
		return fmt.Errorf("AllReduceMinLoc: %w", err)
	}
	hi, err := comm.AllReduceMaxLoc(ctx, c, send)
	if err != nil {
		return fmt.Errorf("AllReduceMaxLoc: %w", err)
	}
	wantLo, wantHi := send[0], send[0]
	for r := range n {
		v := comm.Loc[float64]{Value: float64((r * 5) % n), Index: r}
		if v.Value < wantLo.Value || (v.Value == wantLo.Value && v.Index < wantLo.Index) {
			wantLo = v
		}
		if v.Value > wantHi.Value || (v.Value == wantHi.Value && v.Index < wantHi.Index) {
			wantHi = v
		}
	}
	if lo[0] != wantLo || hi[0] != wantHi {
		return fmt.Errorf("MinLoc/MaxLoc of distinct values: %+v %+v, want %+v %+v", lo[0], hi[0], wantLo, wantHi)
	}
	if lo[1] != (comm.Loc[float64]{Value: 1, Index: 0}) || hi[1] != (comm.Loc[float64]{Value: 1, Index: 0}) {
		return fmt.Errorf("a tie: %+v %+v, want index 0", lo[1], hi[1])
	}
	if lo[2] != (comm.Loc[float64]{Value: float64(-(n - 1)), Index: 10 + n - 1}) || hi[2] != (comm.Loc[float64]{Value: 0, Index: 10}) {
		return fmt.Errorf("MinLoc/MaxLoc of -rank: %+v %+v", lo[2], hi[2])
	}
	if err := locTyped[int32](ctx, c, func(r, i int) int32 { return int32((r*7+i)%5) - 2 }); err != nil {
		return err
	}
	if err := locTyped[uint8](ctx, c, func(r, i int) uint8 { return uint8((r*3 + i*11) % 256) }); err != nil {
		return err
	}
	return locTyped[float32](ctx, c, func(r, i int) float32 { return float32((r+i)%4) * -0.5 })
}

// locTyped checks MinLoc and MaxLoc over 600 positions (past comm/local's
// eager limit) of values val(rank, position), indexed by rank*1000 +
// position, against the rank-order fold.
func locTyped[T comm.Real](ctx context.Context, c comm.Comm, val func(r, i int) T) error {
	const m = 600
	n, me := c.Size(), c.Rank()
	send := make([]comm.Loc[T], m)
	for i := range send {
		send[i] = comm.Loc[T]{Value: val(me, i), Index: me*1000 + i}
	}
	lo, err := comm.AllReduceMinLoc(ctx, c, send)
	if err != nil {
		return fmt.Errorf("AllReduceMinLoc of %T: %w", *new(T), err)
	}
	hi, err := comm.AllReduceMaxLoc(ctx, c, send)
	if err != nil {
		return fmt.Errorf("AllReduceMaxLoc of %T: %w", *new(T), err)
	}
	for i := range m {
		wantLo := comm.Loc[T]{Value: val(0, i), Index: i}
		wantHi := wantLo
		for r := 1; r < n; r++ {
			v := comm.Loc[T]{Value: val(r, i), Index: r*1000 + i}
			if v.Value < wantLo.Value {
				wantLo = v
			}
			if v.Value > wantHi.Value {
				wantHi = v
			}
		}
		if lo[i] != wantLo || hi[i] != wantHi {
			return fmt.Errorf("MinLoc/MaxLoc of %T at %d: %+v %+v, want %+v %+v", *new(T), i, lo[i], hi[i], wantLo, wantHi)
		}
	}
	return nil
}

// misuseReduceScatterCase: ReduceScatter and ReduceScatterBlock report
// their errors as their own on both backends (comm/mpi runs
// ReduceScatterBlock natively, comm/local on an AllReduce, whose *ArgError
// and *MismatchError said "AllReduce" there); nil counts are "0 counts",
// not a ReduceScatterBlock's uneven split (which 3 elements on 3 ranks are
// not); and a rank's empty block is an empty slice on both, never nil (a
// user's trial found all three).
func misuseReduceScatterCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	argErr := func(what, call string, err error, detail string) error {
		var ae *comm.ArgError
		if !errors.As(err, &ae) || ae.Op != call || !strings.Contains(ae.Detail, detail) {
			return fmt.Errorf("%s: got %v, want an *ArgError of %s saying %q", what, err, call, detail)
		}
		return nil
	}
	_, err := comm.ReduceScatter(ctx, c, make([]int32, n), nil, comm.Sum)
	if err := argErr("ReduceScatter with nil counts", "ReduceScatter", err, fmt.Sprintf("0 counts for %d ranks", n)); err != nil {
		return err
	}
	_, err = comm.ReduceScatter(ctx, c, make([]float32, n), slices.Repeat([]int{1}, n), comm.BXor)
	if err := argErr("ReduceScatter of float32 with bxor", "ReduceScatter", err, "bxor is not defined on float32"); err != nil {
		return err
	}
	_, err = comm.ReduceScatterBlock(ctx, c, make([]float32, n), comm.BXor)
	if err := argErr("ReduceScatterBlock of float32 with bxor", "ReduceScatterBlock", err, "bxor is not defined on float32"); err != nil {
		return err
	}
	if n > 1 {
		_, err = comm.ReduceScatterBlock(ctx, c, make([]int64, n*(me+1)), comm.Sum)
		var mm *comm.MismatchError
		if !errors.As(err, &mm) || mm.Op != "ReduceScatterBlock" || !strings.Contains(mm.Detail, "count") {
			return fmt.Errorf("ReduceScatterBlock with lengths that differ: got %v, want a *MismatchError of ReduceScatterBlock naming the counts", err)
		}
	}
	// Empty blocks: not nil, on every backend.
	blk, err := comm.ReduceScatterBlock(ctx, c, []int64{}, comm.Sum)
	if err != nil || blk == nil || len(blk) != 0 {
		return fmt.Errorf("ReduceScatterBlock of no elements: %#v, %v; want an empty, non-nil slice", blk, err)
	}
	counts := make([]int, n)
	counts[n-1] = 2 // the last rank gets everything
	part, err := comm.ReduceScatter(ctx, c, []int64{1, 2}, counts, comm.Sum)
	want := []int64{}
	if me == n-1 {
		want = []int64{int64(n), int64(2 * n)}
	}
	if err != nil || part == nil || !slices.Equal(part, want) {
		return fmt.Errorf("ReduceScatter with counts %v: %#v, %v; want %v", counts, part, err, want)
	}
	return nil
}
