package commtest

import (
	"context"
	"fmt"
	"slices"

	"github.com/pzgo/pz/comm"
)

// reduceCounts are the lengths the reduction cases use: empty, one element,
// the edges of comm/local's contributions kept beside the arrival (32
// bytes: 4 int64s, 8 int32s) and of its 64-byte eager copies (8 int64s),
// an odd small length, and one above its 4 KiB eager limit for every type
// (its parallel path).
var reduceCounts = []int{0, 1, 4, 7, 8, 5000}

// roots returns the distinct roots to try: first, last and middle rank.
func roots(n int) []int {
	out := []int{0}
	for _, r := range []int{n - 1, n / 2} {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// expectReduce returns the element-wise reduction over all n ranks'
// inputs, folded in rank order with the spec's reference op.
func expectReduce[T comm.Number](s spec[T], op comm.Op, n, count int) []T {
	want := make([]T, count)
	for i := range want {
		acc := s.val(0, i)
		for r := 1; r < n; r++ {
			acc = s.ref(op, acc, s.val(r, i))
		}
		want[i] = acc
	}
	return want
}

// sameSlice reports the first difference between got and want.
func sameSlice[T comparable](what string, got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: got %d elements, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}

func inputs[T comm.Number](s spec[T], r, count int) []T {
	out := make([]T, count)
	for i := range out {
		out[i] = s.val(r, i)
	}
	return out
}

func ids[T comm.Number](s spec[T], base, count int) []T {
	out := make([]T, count)
	for i := range out {
		out[i] = s.id(base + i)
	}
	return out
}

func allReduceCase[T comm.Number](ctx context.Context, c comm.Comm, s spec[T]) error {
	n, me := c.Size(), c.Rank()
	for _, op := range s.ops {
		for _, count := range reduceCounts {
			what := fmt.Sprintf("AllReduce %v of %d %s", op, count, s.name)
			send := inputs(s, me, count)
			want := expectReduce(s, op, n, count)
			got, err := comm.AllReduce(ctx, c, send, op)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := sameSlice(what, got, want); err != nil {
				return err
			}
			if err := sameSlice(what+": send buffer modified", send, inputs(s, me, count)); err != nil {
				return err
			}
			// In place.
			if err := comm.AllReduceTo(ctx, c, send, send, op); err != nil {
				return fmt.Errorf("%s in place: %w", what, err)
			}
			if err := sameSlice(what+" in place", send, want); err != nil {
				return err
			}
		}
	}
	return nil
}

func reduceCase[T comm.Number](ctx context.Context, c comm.Comm, s spec[T]) error {
	n, me := c.Size(), c.Rank()
	for _, op := range s.ops {
		for _, root := range roots(n) {
			for _, count := range []int{0, 3, 5000} {
				what := fmt.Sprintf("Reduce %v of %d %s to root %d", op, count, s.name, root)
				got, err := comm.Reduce(ctx, c, inputs(s, me, count), op, root)
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				if me != root {
					if got != nil {
						return fmt.Errorf("%s: non-root got %d elements, want nil", what, len(got))
					}
					continue
				}
				if err := sameSlice(what, got, expectReduce(s, op, n, count)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// moveCase checks the collectives that move data without combining it.
func moveCase[T comm.Number](ctx context.Context, c comm.Comm, s spec[T]) error {
	n, me := c.Size(), c.Rank()
	for _, root := range roots(n) {
		// BcastSlice: every rank knows the length.
		for _, count := range []int{0, 1, 100, 5000} {
			what := fmt.Sprintf("BcastSlice of %d %s from %d", count, s.name, root)
			buf := make([]T, count)
			if me == root {
				buf = ids(s, root*1000, count)
			}
			if err := comm.Bcast(ctx, c, buf, root); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := sameSlice(what, buf, ids(s, root*1000, count)); err != nil {
				return err
			}
		}
		// Bcast of a slice: only root knows the length.
		var v []T
		if me == root {
			v = ids(s, 7, 33+root)
		}
		got, err := comm.BcastValue(ctx, c, v, root)
		if err != nil {
			return fmt.Errorf("Bcast of []%s from %d: %w", s.name, root, err)
		}
		if err := sameSlice(fmt.Sprintf("Bcast of []%s from %d", s.name, root), got, ids(s, 7, 33+root)); err != nil {
			return err
		}
		// Bcast of a scalar.
		x, err := comm.BcastValue(ctx, c, s.id(root+3), root)
		if err != nil {
			return fmt.Errorf("Bcast of %s from %d: %w", s.name, root, err)
		}
		if x != s.id(root+3) {
			return fmt.Errorf("Bcast of %s from %d: got %v, want %v", s.name, root, x, s.id(root+3))
		}

		// Gather with variable lengths, small and above the eager limit.
		for _, lenOf := range lengthFns {
			what := fmt.Sprintf("Gather of []%s to %d", s.name, root)
			parts, err := comm.Gather(ctx, c, ids(s, me*1000, lenOf(me)), root)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := checkParts(what, parts, me == root, n, func(r int) []T { return ids(s, r*1000, lenOf(r)) }); err != nil {
				return err
			}
		}

		// Scatter: part j has a length and content depending on j.
		for _, lenOf := range lengthFns {
			what := fmt.Sprintf("Scatter of []%s from %d", s.name, root)
			var parts [][]T
			if me == root {
				for j := range n {
					parts = append(parts, ids(s, j*1000+root, lenOf(j)))
				}
			}
			mine, err := comm.Scatter(ctx, c, parts, root)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := sameSlice(what, mine, ids(s, me*1000+root, lenOf(me))); err != nil {
				return err
			}
		}
	}

	for _, lenOf := range lengthFns {
		what := fmt.Sprintf("AllGather of []%s", s.name)
		parts, err := comm.AllGather(ctx, c, ids(s, me*1000, lenOf(me)))
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := checkParts(what, parts, true, n, func(r int) []T { return ids(s, r*1000, lenOf(r)) }); err != nil {
			return err
		}
	}

	// Alltoall: rank r sends rank j a part whose length and content depend
	// on both.
	for _, big := range []int{0, 1500} {
		what := fmt.Sprintf("Alltoall of []%s (+%d)", s.name, big)
		part := func(from, to int) []T { return ids(s, from*100+to*10, (from+2*to)%3+big) }
		send := make([][]T, n)
		for j := range n {
			send[j] = part(me, j)
		}
		got, err := comm.Alltoall(ctx, c, send)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := checkParts(what, got, true, n, func(r int) []T { return part(r, me) }); err != nil {
			return err
		}
	}
	return nil
}

// lengthFns give each rank's contribution length: small with an empty
// rank 0, and above comm/local's eager limit for every type.
var lengthFns = []func(r int) int{
	func(r int) int { return (r * 5) % 7 },
	func(r int) int { return 4500 + r },
}

// checkParts checks a Gather-like result: one part per rank equal to
// want(r) where has, nil otherwise.
func checkParts[T comparable](what string, parts [][]T, has bool, n int, want func(r int) []T) error {
	if !has {
		if parts != nil {
			return fmt.Errorf("%s: non-root got %d parts, want nil", what, len(parts))
		}
		return nil
	}
	if len(parts) != n {
		return fmt.Errorf("%s: got %d parts, want %d", what, len(parts), n)
	}
	for r := range n {
		if err := sameSlice(fmt.Sprintf("%s: part of rank %d", what, r), parts[r], want(r)); err != nil {
			return err
		}
	}
	return nil
}
