package local_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// TestForeignRankCollective: in-process rank 1 calls a collective on rank
// 0's communicator (handed over as a package-level variable would be),
// while rank 0 is in a collective on it, or before rank 0 gets there.
// Rank 1's call fails at once with an error wrapping comm.ErrInvalidArg
// that names the misuse, rank 0 then ends with comm.ErrBroken, and Run
// returns well before the test's deadline (it hung for ever, or both
// ranks waited for the deadline and rank 0 blamed a freed communicator).
func TestForeignRankCollective(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dup    bool // share a Dup of rank 0's world communicator
		before bool // rank 1 calls before rank 0 enters its collective
	}{
		{"InCollective", false, false},
		{"BeforeCollective", false, true},
		{"Dup", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The deadline only turns a regression into a failure
			// instead of a hang; the test waits for Run's return.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			shared := make(chan comm.Comm, 1)
			misuse := make(chan error, 1)
			err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
				if tc.dup {
					d, err := c.Dup(ctx)
					if err != nil {
						return err
					}
					defer d.Free()
					c = d
				}
				if c.Rank() == 0 {
					shared <- c
					if tc.before {
						// Rank 1's call has returned before this
						// one starts.
						if err := <-misuse; err == nil {
							return errors.New("rank 1's collective on rank 0's communicator succeeded")
						}
					}
					_, err := comm.AllReduce(ctx, c, []int64{1}, comm.Sum)
					return err
				}
				c0 := <-shared
				if !tc.before {
					// Rank 0's AllReduce is the first collective
					// on c0 (a Dup counts its own).
					for !local.ArrivedAt(c0, 0, 1) {
						runtime.Gosched()
					}
				}
				_, err := comm.AllReduce(ctx, c0, []int64{1}, comm.Sum)
				misuse <- err
				return err
			})
			if ctx.Err() != nil {
				t.Fatalf("Run returned only at the test's deadline: %v", err)
			}
			var re comm.RankErrors
			if !errors.As(err, &re) || len(re) == 0 {
				t.Fatalf("Run: %v; want comm.RankErrors", err)
			}
			if re[0].Rank != 1 || !errors.Is(re[0].Err, comm.ErrInvalidArg) {
				t.Fatalf("Run: %v; want rank 1's error, wrapping ErrInvalidArg, first", err)
			}
			msg := re[0].Err.Error()
			for _, want := range []string{"belongs to world rank 0", "world rank 1's goroutine", "share values"} {
				if !strings.Contains(msg, want) {
					t.Errorf("rank 1's error %q does not say %q", msg, want)
				}
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Run: %v; nothing should have waited for the deadline", err)
			}
			if len(re) == 2 && (re[1].Rank != 0 || !errors.Is(re[1].Err, comm.ErrBroken)) {
				t.Errorf("rank 0's error: %v; want one wrapping ErrBroken", re[1])
			}
		})
	}
}
