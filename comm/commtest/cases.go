package commtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/pzgo/pz/comm"
)

func barrierCase(ctx context.Context, c comm.Comm) error {
	for i := range 3 {
		if err := c.Barrier(ctx); err != nil {
			return fmt.Errorf("Barrier %d: %w", i, err)
		}
	}
	return nil
}

// emptyCase runs every collective with empty buffers on every rank.
func emptyCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	if got, err := comm.AllReduce(ctx, c, []float64{}, comm.Sum); err != nil || len(got) != 0 {
		return fmt.Errorf("AllReduce of nothing: %v, %d elements", err, len(got))
	}
	if got, err := comm.Reduce(ctx, c, []int32(nil), comm.Max, n-1); err != nil || len(got) != 0 || (me == n-1) != (got != nil) {
		return fmt.Errorf("Reduce of nothing: %v, %v", err, got)
	}
	if err := comm.Bcast(ctx, c, []uint8(nil), 0); err != nil {
		return fmt.Errorf("BcastSlice of nothing: %w", err)
	}
	if got, err := comm.BcastValue(ctx, c, []int(nil), 0); err != nil || len(got) != 0 {
		return fmt.Errorf("Bcast of an empty slice: %v, %v", err, got)
	}
	parts, err := comm.Gather(ctx, c, []complex64{}, 0)
	if err := checkParts("Gather of nothing", parts, me == 0, n, func(int) []complex64 { return []complex64{} }); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("Gather of nothing: %w", err)
	}
	parts2, err := comm.AllGather(ctx, c, []uint16{})
	if err != nil {
		return fmt.Errorf("AllGather of nothing: %w", err)
	}
	if err := checkParts("AllGather of nothing", parts2, true, n, func(int) []uint16 { return []uint16{} }); err != nil {
		return err
	}
	var sparts [][]int8
	if me == 0 {
		sparts = make([][]int8, n)
	}
	mine, err := comm.Scatter(ctx, c, sparts, 0)
	if err != nil || len(mine) != 0 {
		return fmt.Errorf("Scatter of nothing: %v, %v", err, mine)
	}
	a2a, err := comm.Alltoall(ctx, c, make([][]float32, n))
	if err != nil {
		return fmt.Errorf("Alltoall of nothing: %w", err)
	}
	return checkParts("Alltoall of nothing", a2a, true, n, func(int) []float32 { return []float32{} })
}

// largeSize is the size of the large-buffer cases: 16 MiB.
const largeSize = 16 << 20

func largeCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	// AllReduce: rank r contributes r+1 + i%1024 at i, so the sum is
	// n(n+1)/2 + n*(i%1024), exact in float64.
	send := make([]float64, largeSize/8)
	for i := range send {
		send[i] = float64(me+1) + float64(i%1024)
	}
	got, err := comm.AllReduce(ctx, c, send, comm.Sum)
	if err != nil {
		return fmt.Errorf("AllReduce of 16 MiB: %w", err)
	}
	for i, g := range got {
		if want := float64(n*(n+1)/2 + n*(i%1024)); g != want {
			return fmt.Errorf("AllReduce of 16 MiB: element %d is %v, want %v", i, g, want)
		}
	}
	send, got = nil, nil

	// Bcast from the last rank.
	root := n - 1
	buf := make([]uint8, largeSize)
	if me == root {
		for i := range buf {
			buf[i] = uint8(i*7 + root)
		}
	}
	if err := comm.Bcast(ctx, c, buf, root); err != nil {
		return fmt.Errorf("Bcast of 16 MiB: %w", err)
	}
	for i, b := range buf {
		if b != uint8(i*7+root) {
			return fmt.Errorf("Bcast of 16 MiB: byte %d is %d, want %d", i, b, uint8(i*7+root))
		}
	}
	buf = nil

	// AllGather of 16 MiB in all.
	per := (largeSize + n - 1) / n / 4
	mine := make([]int32, per)
	for i := range mine {
		mine[i] = int32(me<<24 + i)
	}
	parts, err := comm.AllGather(ctx, c, mine)
	if err != nil {
		return fmt.Errorf("AllGather of 16 MiB: %w", err)
	}
	if len(parts) != n {
		return fmt.Errorf("AllGather of 16 MiB: %d parts", len(parts))
	}
	for r, p := range parts {
		if len(p) != per {
			return fmt.Errorf("AllGather of 16 MiB: part %d has %d elements, want %d", r, len(p), per)
		}
		for i, v := range p {
			if v != int32(r<<24+i) {
				return fmt.Errorf("AllGather of 16 MiB: part %d element %d is %d", r, i, v)
			}
		}
	}
	return nil
}

func splitCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	// Split by parity, ordered by descending world rank (key = -rank).
	sub, err := c.Split(ctx, me%2, -me)
	if err != nil {
		return fmt.Errorf("Split: %w", err)
	}
	var members []int
	for r := n - 1; r >= 0; r-- {
		if r%2 == me%2 {
			members = append(members, r)
		}
	}
	if sub.Size() != len(members) || sub.Rank() != slices.Index(members, me) {
		return fmt.Errorf("Split by parity: rank %d of %d, want %d of %d", sub.Rank(), sub.Size(), slices.Index(members, me), len(members))
	}
	sum, err := comm.AllReduce(ctx, sub, []int64{int64(me), 1}, comm.Sum)
	if err != nil {
		return fmt.Errorf("AllReduce on a Split communicator: %w", err)
	}
	wantSum := int64(0)
	for _, r := range members {
		wantSum += int64(r)
	}
	if sum[0] != wantSum || sum[1] != int64(len(members)) {
		return fmt.Errorf("AllReduce on a Split communicator: got %v, want [%d %d]", sum, wantSum, len(members))
	}
	top, err := comm.BcastValue(ctx, sub, int64(me), 0)
	if err != nil || top != int64(members[0]) {
		return fmt.Errorf("Bcast on a Split communicator: %d, %v; want %d", top, err, members[0])
	}
	order, err := comm.AllGather(ctx, sub, []int{me})
	if err != nil {
		return fmt.Errorf("AllGather on a Split communicator: %w", err)
	}
	for i, p := range order {
		if len(p) != 1 || p[0] != members[i] {
			return fmt.Errorf("AllGather on a Split communicator: part %d is %v, want [%d]", i, p, members[i])
		}
	}

	// A split of the split: the same members in reverse order.
	sub2, err := sub.Split(ctx, 7, -sub.Rank())
	if err != nil {
		return fmt.Errorf("nested Split: %w", err)
	}
	if sub2.Size() != sub.Size() || sub2.Rank() != sub.Size()-1-sub.Rank() {
		return fmt.Errorf("nested Split: rank %d of %d", sub2.Rank(), sub2.Size())
	}
	got, err := comm.Reduce(ctx, sub2, []int32{int32(me)}, comm.Max, sub2.Size()-1)
	if err != nil {
		return fmt.Errorf("Reduce on a nested Split: %w", err)
	}
	if sub2.Rank() == sub2.Size()-1 && got[0] != int32(members[0]) {
		return fmt.Errorf("Reduce on a nested Split: got %d, want %d", got[0], members[0])
	}

	// Rank 0 joins nothing; the others keep world order (equal keys).
	color := 3
	if me == 0 {
		color = comm.Undefined
	}
	rest, err := c.Split(ctx, color, 0)
	if err != nil {
		return fmt.Errorf("Split with Undefined: %w", err)
	}
	if me == 0 {
		if rest != nil {
			return errors.New("Split with Undefined: rank 0 got a communicator")
		}
	} else {
		if rest == nil || rest.Size() != n-1 || rest.Rank() != me-1 {
			return fmt.Errorf("Split with Undefined: got %v", rest)
		}
		if err := rest.Barrier(ctx); err != nil {
			return fmt.Errorf("Barrier after Split with Undefined: %w", err)
		}
		if err := rest.Free(); err != nil {
			return fmt.Errorf("Free: %w", err)
		}
	}

	// Collectives on the sub-communicators interleave with the world's.
	if err := c.Barrier(ctx); err != nil {
		return fmt.Errorf("world Barrier after Split: %w", err)
	}
	if _, err := comm.AllReduce(ctx, sub, []float64{1}, comm.Sum); err != nil {
		return fmt.Errorf("AllReduce on a Split communicator after a world Barrier: %w", err)
	}
	if err := sub2.Free(); err != nil {
		return fmt.Errorf("Free: %w", err)
	}
	if err := sub.Free(); err != nil {
		return fmt.Errorf("Free: %w", err)
	}
	if err := sub.Barrier(ctx); !errors.Is(err, comm.ErrFreed) {
		return fmt.Errorf("Barrier on a freed communicator: got %v, want ErrFreed", err)
	}
	return nil
}

// waitAll waits for every request and returns the first error.
func waitAll(ctx context.Context, reqs ...comm.Request) error {
	for i, r := range reqs {
		if _, err := r.Wait(ctx); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
	}
	return nil
}

// p2pCounts are message lengths (float64s): empty, tiny, and one above
// 4 KiB, where comm/local hands messages over by reference.
var p2pCounts = []int{0, 1, 1000, 20000}

func ringCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	s := floatSpec[float64]("float64")
	for _, count := range p2pCounts {
		// Non-blocking send, blocking receive: works for any size.
		req, err := comm.Isend(c, ids(s, me*10000, count), next, 5)
		if err != nil {
			return fmt.Errorf("Isend of %d: %w", count, err)
		}
		got, st, err := comm.RecvNew[float64](ctx, c, prev, 5)
		if err != nil {
			return fmt.Errorf("Recv of %d: %w", count, err)
		}
		if st.Source != prev || st.Tag != 5 || st.Count != count {
			return fmt.Errorf("Recv of %d: status %+v", count, st)
		}
		if err := sameSlice(fmt.Sprintf("ring message of %d", count), got, ids(s, prev*10000, count)); err != nil {
			return err
		}
		if err := waitAll(ctx, req); err != nil {
			return fmt.Errorf("Isend of %d: %w", count, err)
		}
		if n == 1 {
			continue
		}
		// Blocking both ways: even ranks send first, odd ranks receive
		// first, which cannot deadlock even if Send waits for the receiver.
		buf := make([]float64, count)
		sendThenRecv := func() error {
			if err := comm.Send(ctx, c, ids(s, me*7, count), next, 6); err != nil {
				return err
			}
			_, err := comm.Recv(ctx, c, buf, prev, 6)
			return err
		}
		recvThenSend := func() error {
			if _, err := comm.Recv(ctx, c, buf, prev, 6); err != nil {
				return err
			}
			return comm.Send(ctx, c, ids(s, me*7, count), next, 6)
		}
		f := sendThenRecv
		if me%2 == 1 {
			f = recvThenSend
		}
		if err := f(); err != nil {
			return fmt.Errorf("blocking ring of %d: %w", count, err)
		}
		if err := sameSlice(fmt.Sprintf("blocking ring message of %d", count), buf, ids(s, prev*7, count)); err != nil {
			return err
		}
	}
	return nil
}

// tagOrderCase checks that messages with one (source, tag) arrive in send
// order even when the receiver takes the tags in a different order.
func tagOrderCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	src, dst := 0, n-1
	const msgs = 10
	var reqs []comm.Request
	if me == src {
		for i := range msgs {
			r1, err := comm.Isend(c, []int32{int32(i)}, dst, 1)
			if err != nil {
				return err
			}
			r2, err := comm.Isend(c, []int32{int32(100 + i)}, dst, 2)
			if err != nil {
				return err
			}
			reqs = append(reqs, r1, r2)
		}
	}
	if me == dst {
		buf := make([]int32, 1)
		for _, tag := range []int{2, 1} {
			for i := range msgs {
				st, err := comm.Recv(ctx, c, buf, src, tag)
				if err != nil {
					return fmt.Errorf("Recv tag %d #%d: %w", tag, i, err)
				}
				want := int32(i)
				if tag == 2 {
					want += 100
				}
				if buf[0] != want || st.Tag != tag || st.Source != src || st.Count != 1 {
					return fmt.Errorf("tag %d message #%d: got %d (status %+v), want %d", tag, i, buf[0], st, want)
				}
			}
		}
	}
	return waitAll(ctx, reqs...)
}

func anySourceCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	// Every rank, rank 0 included, sends rank 0 two messages: tag 1 then
	// tag 2. Rank 0 takes all tag-2 messages first with AnySource, then
	// the rest with AnySource and AnyTag.
	r1, err := comm.Isend(c, []int64{int64(me * 10)}, 0, 1)
	if err != nil {
		return err
	}
	r2, err := comm.Isend(c, []int64{int64(me*10 + 1)}, 0, 2)
	if err != nil {
		return err
	}
	if me == 0 {
		buf := make([]int64, 4)
		seen := make([]int, n)
		for range n {
			st, err := comm.Recv(ctx, c, buf, comm.AnySource, 2)
			if err != nil {
				return fmt.Errorf("Recv AnySource tag 2: %w", err)
			}
			if st.Tag != 2 || st.Count != 1 || buf[0] != int64(st.Source*10+1) {
				return fmt.Errorf("Recv AnySource tag 2: got %d with status %+v", buf[0], st)
			}
			seen[st.Source]++
		}
		for range n {
			st, err := comm.Recv(ctx, c, buf, comm.AnySource, comm.AnyTag)
			if err != nil {
				return fmt.Errorf("Recv AnySource AnyTag: %w", err)
			}
			if st.Tag != 1 || st.Count != 1 || buf[0] != int64(st.Source*10) {
				return fmt.Errorf("Recv AnySource AnyTag: got %d with status %+v", buf[0], st)
			}
			seen[st.Source]++
		}
		for r, k := range seen {
			if k != 2 {
				return fmt.Errorf("AnySource: %d messages from rank %d, want 2", k, r)
			}
		}
	}
	return waitAll(ctx, r1, r2)
}

// nonblockingCase posts receives from every rank, then sends to every
// rank, works while they are in flight, and waits.
func nonblockingCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	s := floatSpec[float64]("float64")
	for _, count := range []int{3, 20000} {
		bufs := make([][]float64, n)
		var recvs, sends []comm.Request
		for j := range n {
			bufs[j] = make([]float64, count+1) // one spare: Count must say count
			r, err := comm.Irecv(c, bufs[j], j, 9)
			if err != nil {
				return fmt.Errorf("Irecv: %w", err)
			}
			recvs = append(recvs, r)
		}
		for j := range n {
			r, err := comm.Isend(c, ids(s, me*100+j, count), j, 9)
			if err != nil {
				return fmt.Errorf("Isend: %w", err)
			}
			sends = append(sends, r)
		}
		// Overlap: compute something while messages move, polling.
		acc := 0.0
		for i := range 1000 {
			acc += float64(i)
			if i%100 == 0 {
				for _, r := range recvs {
					if _, _, err := r.Test(); err != nil {
						return fmt.Errorf("Test: %w", err)
					}
				}
			}
		}
		if acc != 999*1000/2 {
			return fmt.Errorf("overlapped computation: %v", acc)
		}
		for j, r := range recvs {
			st, err := r.Wait(ctx)
			if err != nil {
				return fmt.Errorf("Irecv from %d: %w", j, err)
			}
			if st.Source != j || st.Tag != 9 || st.Count != count {
				return fmt.Errorf("Irecv from %d: status %+v, want count %d", j, st, count)
			}
			if err := sameSlice(fmt.Sprintf("Irecv of %d from %d", count, j), bufs[j][:count], ids(s, j*100+me, count)); err != nil {
				return err
			}
			if done, _, err := r.Test(); !done || err != nil {
				return fmt.Errorf("Test after Wait: %v, %v", done, err)
			}
		}
		if err := waitAll(ctx, sends...); err != nil {
			return fmt.Errorf("Isend: %w", err)
		}
	}
	return nil
}

// truncatedCase receives messages into buffers that are too small, then
// checks that messaging still works.
func truncatedCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	src, dst := 0, n-1
	var reqs []comm.Request
	if me == src {
		for _, m := range []struct {
			n, tag int
		}{{8, 3}, {6, 4}, {2, 5}} {
			data := make([]int32, m.n)
			for i := range data {
				data[i] = int32(m.tag*10 + i)
			}
			r, err := comm.Isend(c, data, dst, m.tag)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	if me == dst {
		buf := make([]int32, 4)
		// The error names the message: its sender and its tag (and
		// both sizes where the library says the message's: MPICH's
		// blocking receive does not). Every message is received
		// whatever goes wrong, so that none is left for a later case.
		named := func(err error, tag int) bool {
			return errors.Is(err, comm.ErrTruncated) && strings.Contains(err.Error(), fmt.Sprintf("from rank %d tag %d", src, tag))
		}
		var errs []error
		if _, err := comm.Recv(ctx, c, buf, src, 3); !named(err, 3) {
			errs = append(errs, fmt.Errorf("Recv of 8 into 4: got %v, want ErrTruncated naming rank %d and tag 3", err, src))
		}
		r, err := comm.Irecv(c, buf[:2], src, 4)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if _, err := r.Wait(ctx); !named(err, 4) {
			errs = append(errs, fmt.Errorf("Irecv of 6 into 2: got %v, want ErrTruncated naming rank %d and tag 4", err, src))
		}
		st, err := comm.Recv(ctx, c, buf, src, 5)
		if err != nil {
			errs = append(errs, fmt.Errorf("Recv after truncation: %w", err))
		} else if st.Count != 2 || buf[0] != 50 || buf[1] != 51 {
			errs = append(errs, fmt.Errorf("Recv after truncation: %v, status %+v", buf, st))
		}
		if len(errs) > 0 {
			return errors.Join(append(errs, waitAll(ctx, reqs...))...)
		}
	}
	return waitAll(ctx, reqs...)
}

// Inner and Payload are the encoded values of the Values case.
type Inner struct {
	A []float64
	B string
}

// Payload is a struct with the kinds of fields the codec must carry.
type Payload struct {
	Name  string
	Rank  int
	Tags  map[string]int
	Inner *Inner
	Temp  Celsius
}

func payloadOf(r int) Payload {
	return Payload{
		Name:  fmt.Sprintf("rank-%d", r),
		Rank:  r,
		Tags:  map[string]int{"r": r, "sq": r * r},
		Inner: &Inner{A: []float64{float64(r), 0.5, -1}, B: "ü" + fmt.Sprint(r)},
		Temp:  Celsius(r) + 0.25,
	}
}

func valuesCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	for _, root := range roots(n) {
		var v Payload
		if me == root {
			v = payloadOf(root)
		}
		got, err := comm.BcastValue(ctx, c, v, root)
		if err != nil {
			return fmt.Errorf("Bcast of a struct from %d: %w", root, err)
		}
		if !reflect.DeepEqual(got, payloadOf(root)) {
			return fmt.Errorf("Bcast of a struct from %d: got %+v", root, got)
		}
		m, err := comm.BcastValue(ctx, c, map[string][]int{"a": {root}, "b": nil}, root)
		if err != nil || len(m) != 2 || len(m["a"]) != 1 || m["a"][0] != root {
			return fmt.Errorf("Bcast of a map from %d: %v, %v", root, m, err)
		}
		str, err := comm.BcastValue(ctx, c, fmt.Sprintf("from %d", me), root)
		if err != nil || str != fmt.Sprintf("from %d", root) {
			return fmt.Errorf("Bcast of a string from %d: %q, %v", root, str, err)
		}

		all, err := comm.GatherValues(ctx, c, payloadOf(me), root)
		if err != nil {
			return fmt.Errorf("GatherValues to %d: %w", root, err)
		}
		if me != root && all != nil {
			return fmt.Errorf("GatherValues: non-root got %d values", len(all))
		}
		if me == root {
			for r := range n {
				if len(all) != n || !reflect.DeepEqual(all[r], payloadOf(r)) {
					return fmt.Errorf("GatherValues to %d: value %d is wrong: %+v", root, r, all)
				}
			}
		}

		var vals []string
		if me == root {
			for j := range n {
				vals = append(vals, fmt.Sprintf("for %d from %d", j, root))
			}
		}
		mine, err := comm.ScatterValues(ctx, c, vals, root)
		if err != nil || mine != fmt.Sprintf("for %d from %d", me, root) {
			return fmt.Errorf("ScatterValues from %d: %q, %v", root, mine, err)
		}

		// Concatenation is not commutative: the result shows rank order.
		joined, err := comm.ReduceValue(ctx, c, fmt.Sprint(me), func(a, b string) string { return a + "," + b }, root)
		if err != nil {
			return fmt.Errorf("ReduceValue to %d: %w", root, err)
		}
		want := ""
		if me == root {
			for r := range n {
				if r > 0 {
					want += ","
				}
				want += fmt.Sprint(r)
			}
		}
		if joined != want {
			return fmt.Errorf("ReduceValue to %d: got %q, want %q", root, joined, want)
		}
	}

	all, err := comm.AllGatherValues(ctx, c, payloadOf(me))
	if err != nil {
		return fmt.Errorf("AllGatherValues: %w", err)
	}
	for r := range n {
		if len(all) != n || !reflect.DeepEqual(all[r], payloadOf(r)) {
			return fmt.Errorf("AllGatherValues: value %d is wrong", r)
		}
	}
	merged, err := comm.AllReduceValue(ctx, c, payloadOf(me), func(a, b Payload) Payload {
		a.Rank += b.Rank
		a.Name += "+" + b.Name
		return a
	})
	if err != nil {
		return fmt.Errorf("AllReduceValue: %w", err)
	}
	wantName := "rank-0"
	for r := 1; r < n; r++ {
		wantName += fmt.Sprintf("+rank-%d", r)
	}
	if merged.Rank != n*(n-1)/2 || merged.Name != wantName {
		return fmt.Errorf("AllReduceValue: got %d %q, want %d %q", merged.Rank, merged.Name, n*(n-1)/2, wantName)
	}

	// Point to point, even ranks sending first.
	next, prev := (me+1)%n, (me+n-1)%n
	send := func() error { return comm.SendValue(ctx, c, payloadOf(me), next, 11) }
	var got Payload
	var st comm.Status
	recv := func() error {
		var err error
		got, st, err = comm.RecvValue[Payload](ctx, c, prev, 11)
		return err
	}
	steps := []func() error{send, recv}
	if me%2 == 1 {
		steps = []func() error{recv, send}
	}
	if n == 1 {
		// To itself: MPI need not buffer the send (MPICH does not), so
		// the receive runs beside it.
		sent := make(chan error, 1)
		go func() { sent <- send() }()
		steps = []func() error{recv, func() error { return <-sent }}
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return fmt.Errorf("SendValue/RecvValue: %w", err)
		}
	}
	if st.Source != prev || !reflect.DeepEqual(got, payloadOf(prev)) {
		return fmt.Errorf("RecvValue: got %+v from %d", got, st.Source)
	}
	return nil
}
