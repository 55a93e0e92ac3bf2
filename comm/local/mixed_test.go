package local_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// TestMixedSequence runs a long seeded random sequence of collectives of
// every kind, with sizes on both sides of the eager and block limits and
// in-place and separate buffers, and checks every result against values
// computed from rank numbers. It exercises the alternation of one-phase
// and two-phase collectives over the double-buffered slots.
func TestMixedSequence(t *testing.T) {
	sizes := []int{0, 1, 7, 8, 9, 511, 512, 513, 1024, 1025, 2047, 3000, 4095}
	for _, n := range []int{2, 3, 4, 8, 40} {
		steps := 300
		if n > 4 {
			steps = 100 // more ranks than cores: slower, same coverage
		}
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			err := local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
				// Same seed on every rank: the ranks agree on the sequence.
				rng := rand.New(rand.NewPCG(uint64(n), 99))
				me := c.Rank()
				for step := range steps {
					count := sizes[rng.IntN(len(sizes))]
					root := rng.IntN(n)
					val := func(r, i int) float64 { return float64((r+1)*(i%13) + step) }
					switch kind := rng.IntN(6); kind {
					case 0, 1: // AllReduce, in place or not
						send := make([]float64, count)
						for i := range send {
							send[i] = val(me, i)
						}
						recv := send
						if kind == 1 {
							recv = make([]float64, count)
						}
						if err := comm.AllReduceTo(ctx, c, recv, send, comm.Sum); err != nil {
							return fmt.Errorf("step %d: %w", step, err)
						}
						for i, g := range recv {
							want := float64(n*(n+1)/2*(i%13) + n*step)
							if g != want {
								return fmt.Errorf("step %d AllReduce of %d: element %d is %v, want %v", step, count, i, g, want)
							}
						}
					case 2: // Bcast
						b := make([]float64, count)
						if me == root {
							for i := range b {
								b[i] = val(root, i)
							}
						}
						if err := comm.Bcast(ctx, c, b, root); err != nil {
							return fmt.Errorf("step %d: %w", step, err)
						}
						for i, g := range b {
							if g != val(root, i) {
								return fmt.Errorf("step %d Bcast of %d from %d: element %d is %v", step, count, root, i, g)
							}
						}
					case 3: // Reduce with Max
						send := make([]float64, count)
						for i := range send {
							send[i] = val(me, i)
						}
						got, err := comm.Reduce(ctx, c, send, comm.Max, root)
						if err != nil {
							return fmt.Errorf("step %d: %w", step, err)
						}
						for i, g := range got {
							if g != val(n-1, i) {
								return fmt.Errorf("step %d Reduce of %d to %d: element %d is %v", step, count, root, i, g)
							}
						}
					case 4: // AllGather with lengths depending on rank
						mine := make([]float64, (count+me)%4096)
						for i := range mine {
							mine[i] = val(me, i)
						}
						parts, err := comm.AllGather(ctx, c, mine)
						if err != nil {
							return fmt.Errorf("step %d: %w", step, err)
						}
						for r, p := range parts {
							if len(p) != (count+r)%4096 {
								return fmt.Errorf("step %d AllGather: part %d has %d elements", step, r, len(p))
							}
							for i, g := range p {
								if g != val(r, i) {
									return fmt.Errorf("step %d AllGather: part %d element %d is %v", step, r, i, g)
								}
							}
						}
					case 5:
						if err := c.Barrier(ctx); err != nil {
							return fmt.Errorf("step %d: %w", step, err)
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestConcurrentP2PAndCollectives has every rank run collectives on one
// goroutine while another goroutine of the same rank exchanges messages
// on the same communicator, as comm.Comm allows.
func TestConcurrentP2PAndCollectives(t *testing.T) {
	const n, rounds = 4, 200
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
		me := c.Rank()
		// Both goroutines honour ctx, so Wait is bounded by the test's
		// deadline.
		var g errgroup.Group
		g.Go(func() error {
			next, prev := (me+1)%n, (me+n-1)%n
			buf := make([]int64, 600) // above the 4 KiB eager limit
			for i := range rounds {
				msg := make([]int64, 600)
				for j := range msg {
					msg[j] = int64(me*100000 + i*600 + j)
				}
				req, err := comm.Isend(c, msg, next, 3)
				if err != nil {
					return err
				}
				if _, err := comm.Recv(ctx, c, buf, prev, 3); err != nil {
					return err
				}
				for j, v := range buf {
					if v != int64(prev*100000+i*600+j) {
						return fmt.Errorf("round %d: element %d is %d", i, j, v)
					}
				}
				if _, err := req.Wait(ctx); err != nil {
					return err
				}
			}
			return nil
		})
		g.Go(func() error {
			for i := range rounds {
				got, err := comm.AllReduce(ctx, c, []int64{int64(me), int64(i)}, comm.Sum)
				if err != nil {
					return err
				}
				if got[0] != n*(n-1)/2 || got[1] != int64(n*i) {
					return fmt.Errorf("round %d: AllReduce gave %v", i, got)
				}
			}
			return nil
		})
		return g.Wait()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDirectFromOneRank has one rank at a time contribute its caller's
// memory (above the eager limit) while the others' contributions are
// eager copies, alternating with collectives where every contribution is
// eager: whether any rank's is direct must be seen by every rank, for
// each collective of the double-buffered slots.
func TestDirectFromOneRank(t *testing.T) {
	const big = 1024 // float64s: 8 KiB, above eagerMax
	inModes(t, func(t *testing.T, _ bool) {
		for _, n := range []int{3, 40} {
			t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				err := local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
					me := c.Rank()
					for step := range 4 * n {
						large := step%2 == 0 // every other collective has one direct contribution
						who := step / 2 % n  // the rank that contributes it
						length := func(r int) int {
							if large && r == who {
								return big
							}
							return 1 + r%3
						}
						val := func(r, i int) float64 { return float64(r*1000 + i + step) }
						mine := make([]float64, length(me))
						for i := range mine {
							mine[i] = val(me, i)
						}
						check := func(call string, parts [][]float64) error {
							for r, p := range parts {
								if len(p) != length(r) {
									return fmt.Errorf("step %d %s: part %d has %d elements, want %d", step, call, r, len(p), length(r))
								}
								for i, g := range p {
									if g != val(r, i) {
										return fmt.Errorf("step %d %s: part %d element %d is %v", step, call, r, i, g)
									}
								}
							}
							return nil
						}
						err := func() error {
							switch step / 2 % 2 {
							case 0:
								parts, err := comm.AllGather(ctx, c, mine)
								if err != nil {
									return fmt.Errorf("step %d: %w", step, err)
								}
								return check("AllGather", parts)
							default:
								root := (who + 1) % n // the direct contribution is not root's
								parts, err := comm.Gather(ctx, c, mine, root)
								if err != nil {
									return fmt.Errorf("step %d: %w", step, err)
								}
								if me != root {
									if parts != nil {
										return fmt.Errorf("step %d Gather: rank %d got a result", step, me)
									}
									return nil
								}
								return check("Gather", parts)
							}
						}()
						// The caller owns mine again once the call returned: a
						// peer still reading it would see this (and -race tell).
						clear(mine)
						if err != nil {
							return err
						}
					}
					return nil
				})
				require.NoError(t, err)
			})
		}
	})
}
