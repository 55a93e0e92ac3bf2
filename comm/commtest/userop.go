package commtest

import (
	"context"
	"fmt"
	"slices"

	"github.com/pzgo/pz/comm"
)

// userOps are the user reductions of the conformance cases: "grow" is
// a ⊕ b = a + b + ab (associative and commutative: the result is
// Π(1+v) − 1), "first" and "last" keep the left or the right operand
// (associative, not commutative: the results are rank 0's and the last
// rank's values, so a backend that combines out of rank order fails).
var (
	growOp = comm.UserOp("grow", func(in, inout []int64) {
		for i, a := range in {
			inout[i] = a + inout[i] + a*inout[i]
		}
	}, true)
	firstOp = comm.UserOp("first", func(in, inout []float64) { copy(inout, in) }, false)
	lastOp  = comm.UserOp("last", func(in, inout []float64) {}, false)
)

// userValue is rank r's element i in the user-op cases.
func userValue(r, i int) int64 { return int64(r%3 + i%5) }

func userOpCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	for _, count := range []int{1, 1000, 1 << 17} { // the last one past comm/local's eager size
		send := make([]int64, count)
		want := make([]int64, count)
		for i := range send {
			send[i] = userValue(me, i)
			p := int64(1)
			for r := range n {
				p *= 1 + userValue(r, i)
			}
			want[i] = p - 1
		}
		got, err := comm.AllReduceUser(ctx, c, send, growOp)
		if err != nil {
			return fmt.Errorf("AllReduceUser of %d: %w", count, err)
		}
		if err := sameSlice(fmt.Sprintf("AllReduceUser of %d", count), got, want); err != nil {
			return err
		}
		for _, root := range roots(n) {
			got, err := comm.ReduceUser(ctx, c, send, growOp, root)
			if err != nil {
				return fmt.Errorf("ReduceUser of %d to %d: %w", count, root, err)
			}
			if me == root {
				if err := sameSlice(fmt.Sprintf("ReduceUser of %d to %d", count, root), got, want); err != nil {
					return err
				}
			} else if got != nil {
				return fmt.Errorf("ReduceUser to %d: rank %d got %d elements, want none", root, me, len(got))
			}
		}
		// In place.
		buf := slices.Clone(send)
		if err := c.AllReduceUser(ctx, comm.BufOf(buf), comm.BufOf(buf), growOp); err != nil {
			return fmt.Errorf("AllReduceUser of %d in place: %w", count, err)
		}
		if err := sameSlice(fmt.Sprintf("AllReduceUser of %d in place", count), buf, want); err != nil {
			return err
		}

		// Rank order: "first" gives rank 0's values, "last" the last rank's.
		mine := make([]float64, count)
		for i := range mine {
			mine[i] = float64(100*me + i)
		}
		for _, tc := range []struct {
			op   *comm.UserFunc
			rank int
		}{{firstOp, 0}, {lastOp, n - 1}} {
			got, err := comm.AllReduceUser(ctx, c, mine, tc.op)
			if err != nil {
				return fmt.Errorf("AllReduceUser %s of %d: %w", tc.op.Name, count, err)
			}
			for i, g := range got {
				if want := float64(100*tc.rank + i); g != want {
					return fmt.Errorf("AllReduceUser %s of %d: element %d is %v, want %v (rank %d's): combined out of rank order", tc.op.Name, count, i, g, want, tc.rank)
				}
			}
		}
	}
	return nil
}

// misuseUserOpCase: a nil op is refused on every rank; ranks that mix a
// user op with a predefined one disagree.
func misuseUserOpCase(ctx context.Context, c comm.Comm) error {
	return misuse(ctx, c, func(d comm.Comm) error {
		buf := []int64{1, 2}
		op := growOp
		if d.Rank() == 0 {
			op = nil
		}
		err := d.AllReduceUser(ctx, comm.BufOf(buf), comm.BufOf(make([]int64, 2)), op)
		if err := expect("AllReduceUser with a nil op on rank 0", err, comm.ErrInvalidArg); err != nil {
			return err
		}
		if d.Size() == 1 {
			return nil
		}
		// Rank 0 reduces with Sum, the others with their own op.
		if d.Rank() == 0 {
			err = d.AllReduce(ctx, comm.BufOf(buf), comm.BufOf(make([]int64, 2)), comm.Sum)
		} else {
			err = d.AllReduceUser(ctx, comm.BufOf(buf), comm.BufOf(make([]int64, 2)), growOp)
		}
		return expect("AllReduce with Sum on rank 0 and a user op elsewhere", err, comm.ErrMismatch)
	})
}
