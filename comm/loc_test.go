package comm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/commtest"
	"github.com/pzgo/pz/comm/local"
)

// plain hides a backend's optional interfaces (LocComm, ScanComm,
// SendrecvComm, ...), so that the helpers take their generic fallbacks.
type plain struct{ comm.Comm }

// The fallbacks pass the conformance cases of their helpers.
func TestFallbacksConform(t *testing.T) {
	for _, cs := range commtest.Cases() {
		switch cs.Name {
		case "MinLocMaxLoc", "P2P/Sendrecv", "Scan", "AllGatherTo":
		default:
			continue
		}
		for n := 1; n <= 3; n++ {
			t.Run(fmt.Sprintf("%s/ranks=%d", cs.Name, n), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
					return cs.Run(ctx, plain{c})
				}))
			})
		}
	}
}

// On a Comm without AllGatherBlockComm, ranks that pass different block
// lengths to AllGatherTo get the same *MismatchError, on every rank.
func TestAllGatherToFallbackAgrees(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		k := 2 + c.Rank()%2
		err := comm.AllGatherTo(ctx, plain{c}, make([]float64, 3*k), make([]float64, k))
		var mm *comm.MismatchError
		if !errors.As(err, &mm) || mm.Detail != "AllGatherTo's block length: rank 0 has 2, rank 1 has 3" {
			return fmt.Errorf("rank %d: got %v, want the MismatchError of rank 1's length", c.Rank(), err)
		}
		return nil
	})
	require.NoError(t, err)
}

// On a Comm without LocComm, ranks that disagree on MinLoc or MaxLoc, the
// value type or the length get the *MismatchError a LocComm returns, on
// every rank, instead of a wrong result.
func TestLocFallbackAgrees(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		p := plain{c}
		me := c.Rank()
		for _, tc := range []struct {
			what, detail string
			run          func() error
		}{
			{"MaxLoc on rank 0, MinLoc elsewhere", "op: rank 0 has max, rank 1 has min, rank 2 has min", func() error {
				var err error
				if me == 0 {
					_, err = comm.AllReduceMaxLoc(ctx, p, []comm.Loc[float64]{{Value: 1}})
				} else {
					_, err = comm.AllReduceMinLoc(ctx, p, []comm.Loc[float64]{{Value: 1}})
				}
				return err
			}},
			{"float64 on rank 1, int64 elsewhere", "datatype: rank 0 has int64, rank 1 has float64", func() error {
				var err error
				if me == 1 {
					_, err = comm.AllReduceMaxLoc(ctx, p, []comm.Loc[float64]{{Value: 1}})
				} else {
					_, err = comm.AllReduceMaxLoc(ctx, p, []comm.Loc[int64]{{Value: 1}})
				}
				return err
			}},
			{"lengths rank+1", "count: rank 0 has 1, rank 1 has 2, rank 2 has 3", func() error {
				_, err := comm.AllReduceMinLoc(ctx, p, make([]comm.Loc[int32], me+1))
				return err
			}},
		} {
			err := tc.run()
			var mm *comm.MismatchError
			if !errors.As(err, &mm) || mm.Op != "AllReduceLoc" || !strings.HasPrefix(mm.Detail, tc.detail) {
				return fmt.Errorf("%s: got %v, want a *comm.MismatchError of AllReduceLoc saying %q", tc.what, err, tc.detail)
			}
		}
		got, err := comm.AllReduceMaxLoc(ctx, p, []comm.Loc[int64]{{Value: int64(me % 2), Index: me}})
		if err != nil || got[0] != (comm.Loc[int64]{Value: 1, Index: 1}) {
			return fmt.Errorf("AllReduceMaxLoc after the mismatches: %v, %v", got, err)
		}
		return nil
	})
	require.NoError(t, err)
}
