package dist_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestPeerStatsAgree: after random graphs on 3 and 4 ranks, what each
// rank counts as sent to a peer is what that peer counts as received from
// it, messages and bytes; a rank's own entry is zero, and Stats is the
// sum of PeerStats.
func TestPeerStatsAgree(t *testing.T) {
	for _, n := range []int{3, 4} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("ranks=%d/seed=%d", n, seed), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				err := local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
					ls, err := scheduler.New(ctx, scheduler.WithWorkers(2))
					if err != nil {
						return err
					}
					defer ls.Close()
					d, err := dist.New(ctx, c, ls)
					if err != nil {
						return err
					}
					defer d.Close()
					if err := checkRandomGraphIn(ctx, d, seed, nil); err != nil {
						return err
					}
					peers := d.PeerStats()
					if len(peers) != n {
						return fmt.Errorf("rank %d: %d PeerStats for %d ranks", c.Rank(), len(peers), n)
					}
					var sum dist.Stats
					mine := make([]int64, 0, 4*n)
					for r, st := range peers {
						if r == c.Rank() && st != (dist.Stats{}) {
							return fmt.Errorf("rank %d counts transfers with itself: %+v", r, st)
						}
						sum.MessagesSent += st.MessagesSent
						sum.BytesSent += st.BytesSent
						sum.MessagesReceived += st.MessagesReceived
						sum.BytesReceived += st.BytesReceived
						mine = append(mine, st.MessagesSent, st.BytesSent, st.MessagesReceived, st.BytesReceived)
					}
					if got := d.Stats(); got != sum {
						return fmt.Errorf("rank %d: Stats %+v, PeerStats add up to %+v", c.Rank(), got, sum)
					}
					all, err := comm.AllGatherValues(ctx, c, mine)
					if err != nil {
						return err
					}
					var moved int64
					for i := range n {
						for j := range n {
							sent, recv := all[i][4*j:4*j+2], all[j][4*i+2:4*i+4]
							if sent[0] != recv[0] || sent[1] != recv[1] {
								return fmt.Errorf("rank %d sent rank %d %v (messages, bytes), rank %d received %v", i, j, sent, j, recv)
							}
							moved += sent[0]
						}
					}
					if moved == 0 {
						return fmt.Errorf("no transfer in the graph: the check checks nothing")
					}
					return nil
				})
				require.NoError(t, err)
			})
		}
	}
}
