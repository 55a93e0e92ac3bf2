package commtest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pzgo/pz/comm"
)

// valueTypesCase: BcastValue where root's value has another type than the
// other ranks' (a string against an int, a large numeric slice against a
// scalar, a scalar against a slice): root gets its value, every other
// rank an *ArgError of BcastValue saying what root broadcasts, and all of
// them stay in step for the next collective.
func valueTypesCase(ctx context.Context, c comm.Comm) error {
	me, n := c.Rank(), c.Size()
	big := make([]float64, 100_000) // past any eager limit
	for i := range big {
		big[i] = float64(i)
	}
	type step struct {
		name string
		root int
		run  func(isRoot bool) error
		want string
	}
	steps := []step{
		{"string on root, int elsewhere", 0, func(isRoot bool) error {
			if isRoot {
				_, err := comm.BcastValue(ctx, c, "ranks!!", 0)
				return err
			}
			v, err := comm.BcastValue(ctx, c, 0, 0)
			if err == nil {
				return fmt.Errorf("BcastValue gave %d and no error", v)
			}
			return err
		}, "broadcasts an encoded value"},
		{"a large slice on root, a scalar elsewhere", n - 1, func(isRoot bool) error {
			if isRoot {
				_, err := comm.BcastValue(ctx, c, big, n-1)
				return err
			}
			_, err := comm.BcastValue(ctx, c, int64(0), n-1)
			return err
		}, "broadcasts a slice of float64"},
		{"a scalar on root, a slice elsewhere", 0, func(isRoot bool) error {
			if isRoot {
				_, err := comm.BcastValue(ctx, c, 2.5, 0)
				return err
			}
			_, err := comm.BcastValue(ctx, c, []int32(nil), 0)
			return err
		}, "broadcasts a float64"},
	}
	for _, s := range steps {
		err := s.run(me == s.root)
		switch {
		case me == s.root && err != nil:
			return fmt.Errorf("%s: root: %w", s.name, err)
		case me != s.root:
			var ae *comm.ArgError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), "BcastValue") || !strings.Contains(err.Error(), s.want) {
				return fmt.Errorf("%s: got %v, want an *ArgError of BcastValue saying it %s", s.name, err, s.want)
			}
		}
		// In step: the next collective works everywhere.
		sum := []int64{0}
		if err := c.AllReduce(ctx, comm.BufOf([]int64{int64(me)}), comm.BufOf(sum), comm.Sum); err != nil {
			return fmt.Errorf("%s: the next collective: %w", s.name, err)
		}
		if want := int64(n * (n - 1) / 2); sum[0] != want {
			return fmt.Errorf("%s: the next collective gave %d, want %d", s.name, sum[0], want)
		}
	}
	return nil
}
