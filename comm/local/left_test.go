package local_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// runBounded runs local.Run, failing the test if it has not returned
// after testTimeout (a rank hangs).
func runBounded(t *testing.T, n int, fn func(ctx context.Context, c comm.Comm) error) error {
	t.Helper()
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		err = local.Run(context.Background(), n, fn)
	}()
	select {
	case <-done:
		return err
	case <-time.After(testTimeout):
		t.Fatal("Run did not return: a rank waits for one that left")
		return nil
	}
}

// pollUntil polls cond, yielding, for at most testTimeout, and reports
// whether it held.
func pollUntil(cond func() bool) bool {
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
	return true
}

// A point-to-point call that only rank 1 could complete, on rank 0, while
// rank 1 returns from its function: it fails with ErrBroken naming rank 1
// instead of waiting for ever (no context deadline), whether rank 0 was
// already waiting when rank 1 left or called after; on the world and on a
// duplicate of it.
func TestPointToPointWithALeftRank(t *testing.T) {
	bg := context.Background()     // no deadline: only the departure can end the wait
	large := make([]float64, 1024) // 8 KiB: handed over by reference, the sender waits
	cases := []struct {
		name string
		send bool // rank 0 sends to rank 1 (else receives from it)
		call func(c comm.Comm) error
	}{
		{"Recv", false, func(c comm.Comm) error { _, _, err := comm.RecvNew[float64](bg, c, 1, 0); return err }},
		{"RecvBuf", false, func(c comm.Comm) error { _, err := comm.Recv(bg, c, make([]float64, 1), 1, 0); return err }},
		{"RecvAnySource", false, func(c comm.Comm) error {
			_, _, err := comm.RecvNew[float64](bg, c, comm.AnySource, comm.AnyTag)
			return err
		}},
		{"Probe", false, func(c comm.Comm) error { _, err := c.Probe(bg, comm.Float64, 1, comm.AnyTag); return err }},
		{"Mprobe", false, func(c comm.Comm) error { _, err := c.Mprobe(bg, comm.Float64, 1, 0); return err }},
		{"Irecv", false, func(c comm.Comm) error {
			q, err := comm.Irecv(c, make([]float64, 1), 1, 0)
			if err != nil {
				return err
			}
			_, err = q.Wait(bg)
			return err
		}},
		{"IrecvWaitAll", false, func(c comm.Comm) error {
			q, err := comm.Irecv(c, make([]float64, 1), 1, 0)
			if err != nil {
				return err
			}
			_, err = comm.WaitAll(bg, []comm.Request{q})
			return err
		}},
		{"RecvInit", false, func(c comm.Comm) error {
			p, err := comm.RecvInit(c, make([]float64, 1), 1, 0)
			if err != nil {
				return err
			}
			if err := p.Start(); err != nil {
				return err
			}
			_, err = p.Wait(bg)
			return err
		}},
		{"Sendrecv", false, func(c comm.Comm) error {
			_, err := comm.Sendrecv(bg, c, []float64{1}, 1, 0, make([]float64, 1), 1, 0)
			return err
		}},
		{"Ssend", true, func(c comm.Comm) error { return comm.Ssend(bg, c, []float64{1}, 1, 0) }},
		{"SendLarge", true, func(c comm.Comm) error { return comm.Send(bg, c, large, 1, 0) }},
		{"IsendLarge", true, func(c comm.Comm) error {
			q, err := comm.Isend(c, large, 1, 0)
			if err != nil {
				return err
			}
			_, err = q.Wait(bg)
			return err
		}},
	}
	for _, tc := range cases {
		for _, order := range []string{"waiting", "after"} {
			for _, dup := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/dup=%v", tc.name, order, dup), func(t *testing.T) {
					err := runBounded(t, 2, func(ctx context.Context, c comm.Comm) error {
						if dup {
							d, err := c.Dup(ctx)
							if err != nil {
								return err
							}
							c = d
						}
						if c.Rank() == 1 {
							if order == "waiting" && !pollUntil(func() bool {
								if tc.send {
									return local.Queued(c, 1) == 1
								}
								return local.Waiting(c, 0) == 1
							}) {
								return errors.New("rank 0 never waited")
							}
							return nil
						}
						if order == "after" && !pollUntil(func() bool { return local.Left(c, 1) }) {
							return errors.New("rank 1 never left")
						}
						err := tc.call(c)
						if !errors.Is(err, comm.ErrBroken) {
							return fmt.Errorf("got %v, want an error wrapping ErrBroken", err)
						}
						want := "rank 1 returned from its function"
						if tc.name == "RecvAnySource" {
							want = "every other rank has left"
						}
						if !assert.Contains(t, err.Error(), want) {
							return err
						}
						return nil
					})
					require.NoError(t, err)
				})
			}
		}
	}
}

// What a rank sent before it left is still received, large messages
// (by reference) too; only then do receives from it fail. A small send to
// it is buffered and succeeds, as documented.
func TestMessagesFromALeftRankArrive(t *testing.T) {
	bg := context.Background()
	large := make([]int64, 2048) // 16 KiB, by reference
	for i := range large {
		large[i] = int64(i)
	}
	err := runBounded(t, 2, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 1 {
			if err := comm.Send(ctx, c, []int64{10}, 0, 0); err != nil {
				return err
			}
			if err := comm.Send(ctx, c, []int64{11}, 0, 1); err != nil {
				return err
			}
			_, err := comm.Isend(c, large, 0, 2) // never waited for: rank 0 reads it after rank 1 left
			return err
		}
		if !pollUntil(func() bool { return local.Left(c, 1) }) {
			return errors.New("rank 1 never left")
		}
		for _, tag := range []int{1, 0} {
			got, _, err := comm.RecvNew[int64](bg, c, 1, tag)
			if err != nil || len(got) != 1 || got[0] != int64(10+tag) {
				return fmt.Errorf("message %d: %v, %v", tag, got, err)
			}
		}
		if ok, st, err := c.Iprobe(comm.Int64, comm.AnySource, comm.AnyTag); !ok || err != nil || st.Tag != 2 {
			return fmt.Errorf("Iprobe for the large message: %v %+v %v", ok, st, err)
		}
		got, _, err := comm.RecvNew[int64](bg, c, comm.AnySource, comm.AnyTag)
		if err != nil || !assert.Equal(t, large, got) {
			return fmt.Errorf("large message: %v", err)
		}
		if _, _, err := comm.RecvNew[int64](bg, c, 1, comm.AnyTag); !errors.Is(err, comm.ErrBroken) {
			return fmt.Errorf("Recv once all was received: %v, want ErrBroken", err)
		}
		if ok, _, err := c.Iprobe(comm.Int64, 1, comm.AnyTag); ok || err != nil {
			return fmt.Errorf("Iprobe from the left rank: %v, %v; want false, nil", ok, err)
		}
		if err := comm.Send(bg, c, []int64{1}, 1, 0); err != nil {
			return fmt.Errorf("small Send to the left rank: %v, want it buffered", err)
		}
		return nil
	})
	require.NoError(t, err)
}

// An any-source receive goes on waiting while some rank may still send,
// and fails once every other rank has left; a rank's receives from
// itself never fail that way.
func TestAnySourceWithLeftRanks(t *testing.T) {
	bg := context.Background()
	err := runBounded(t, 3, func(ctx context.Context, c comm.Comm) error {
		switch c.Rank() {
		case 1:
			return nil
		case 2:
			if !pollUntil(func() bool { return local.Left(c, 1) && local.Waiting(c, 0) == 1 }) {
				return errors.New("rank 0 never waited")
			}
			return comm.Send(ctx, c, []int32{7}, 0, 5)
		}
		got, st, err := comm.RecvNew[int32](bg, c, comm.AnySource, comm.AnyTag)
		if err != nil || len(got) != 1 || got[0] != 7 || st.Source != 2 {
			return fmt.Errorf("any-source receive with rank 2 still there: %v %+v %v", got, st, err)
		}
		if !pollUntil(func() bool { return local.Left(c, 2) }) {
			return errors.New("rank 2 never left")
		}
		if _, err := c.Probe(bg, comm.Int32, comm.AnySource, comm.AnyTag); !errors.Is(err, comm.ErrBroken) {
			return fmt.Errorf("any-source Probe with every other rank gone: %v, want ErrBroken", err)
		}
		// Its own messages still reach it.
		if err := comm.Send(bg, c, []int32{3}, 0, 0); err != nil {
			return err
		}
		if got, _, err := comm.RecvNew[int32](bg, c, comm.AnySource, 0); err != nil || got[0] != 3 {
			return fmt.Errorf("a message to itself: %v, %v", got, err)
		}
		return nil
	})
	require.NoError(t, err)
}

// With many ranks, a departure sweeps only the mailboxes that may hold a
// call it strands (those counted as waiting for the departing rank, or
// every one once all ranks but one have left): a call on rank 0 that only
// rank 1 can complete goes on waiting while ranks 3.. leave, fails with
// ErrBroken naming rank 1 once rank 1 leaves (rank 2 still there), and an
// any-source one fails only when rank 2, the last other rank, leaves too.
// Rank 0 makes the call while the others are still there, or after they
// left; on the world and on a duplicate of it.
func TestPointToPointWithManyLeftRanks(t *testing.T) {
	const n = 64
	bg := context.Background() // no deadline: only the departure can end the wait
	large := make([]float64, 1024)
	recvCall := func(source int) func(c comm.Comm) error {
		return func(c comm.Comm) error { _, _, err := comm.RecvNew[float64](bg, c, source, 0); return err }
	}
	cases := []struct {
		name string
		any  bool // fails only when every other rank has left
		send bool // rank 0 sends to rank 1
		call func(c comm.Comm) error
	}{
		{"Recv", false, false, recvCall(1)},
		{"RecvAnySource", true, false, recvCall(comm.AnySource)},
		{"Probe", false, false, func(c comm.Comm) error { _, err := c.Probe(bg, comm.Float64, 1, comm.AnyTag); return err }},
		{"ProbeAnySource", true, false, func(c comm.Comm) error {
			_, err := c.Probe(bg, comm.Float64, comm.AnySource, comm.AnyTag)
			return err
		}},
		{"Irecv", false, false, func(c comm.Comm) error {
			q, err := comm.Irecv(c, make([]float64, 1), 1, 0)
			if err != nil {
				return err
			}
			_, err = q.Wait(bg)
			return err
		}},
		{"IrecvAnySource", true, false, func(c comm.Comm) error {
			q, err := comm.Irecv(c, make([]float64, 1), comm.AnySource, 0)
			if err != nil {
				return err
			}
			_, err = q.Wait(bg)
			return err
		}},
		{"SendLarge", false, true, func(c comm.Comm) error { return comm.Send(bg, c, large, 1, 0) }},
	}
	for _, tc := range cases {
		for _, order := range []string{"waiting", "after"} {
			for _, dup := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/dup=%v", tc.name, order, dup), func(t *testing.T) {
					err := runBounded(t, n, func(ctx context.Context, c comm.Comm) error {
						if dup {
							d, err := c.Dup(ctx)
							if err != nil {
								return err
							}
							c = d
						}
						waiting := func() bool {
							if tc.send {
								return local.Queued(c, 1) == 1
							}
							return local.Waiting(c, 0) == 1
						}
						leftFrom := func(lo int) bool {
							for r := lo; r < n; r++ {
								if !local.Left(c, r) {
									return false
								}
							}
							return true
						}
						// The rank whose departure fails rank 0's call.
						last := 1
						if tc.any {
							last = 2
						}
						switch r := c.Rank(); {
						case r == 0:
							if order == "after" && !pollUntil(func() bool { return leftFrom(3) && local.Left(c, 1) && (!tc.any || local.Left(c, 2)) }) {
								return errors.New("the others never left")
							}
							err := tc.call(c)
							if !errors.Is(err, comm.ErrBroken) {
								return fmt.Errorf("got %v, want an error wrapping ErrBroken", err)
							}
							want := "rank 1 returned from its function"
							if tc.any {
								want = "every other rank has left"
							}
							if !assert.Contains(t, err.Error(), want) {
								return err
							}
							if !tc.any {
								// Rank 2 is still there and still reachable.
								return comm.Send(bg, c, []int32{1}, 2, 9)
							}
							return nil
						case r == 2 && !tc.any:
							_, _, err := comm.RecvNew[int32](bg, c, 0, 9)
							return err
						case r >= 3 && order == "after":
							return nil
						case r >= 3:
							if !pollUntil(waiting) {
								return errors.New("rank 0 never waited")
							}
							return nil
						}
						// Ranks 1 (and 2 for any-source) leave once 3.. did, and
						// the one before them: rank 0 must still be waiting then.
						before := func() bool { return leftFrom(3) && (c.Rank() == 1 || local.Left(c, 1)) }
						if !pollUntil(before) {
							return errors.New("the others never left")
						}
						if order == "waiting" && c.Rank() == last && !waiting() {
							return fmt.Errorf("rank 0 stopped waiting before rank %d left", last)
						}
						return nil
					})
					require.NoError(t, err)
				})
			}
		}
	}
}

// Ranks waiting in a collective of a counted group fail with ErrBroken
// naming a rank that returned, whether they were parked before it left,
// arrived while it was leaving, or arrived after; and a collective made
// of the ranks that stay still completes.
func TestCollectiveWithManyLeftRanks(t *testing.T) {
	const n = 64
	for _, leaveAt := range []string{"parked", "racing", "before"} {
		t.Run(leaveAt, func(t *testing.T) {
			rounds := 1
			if leaveAt == "racing" {
				rounds = 20 // the departures and arrivals interleave differently each time
			}
			for range rounds {
				err := runBounded(t, n, func(ctx context.Context, c comm.Comm) error {
					bg := context.Background()
					stay := c.Rank() < n/2
					color := comm.Undefined
					if stay {
						color = 0
					}
					sub, err := c.Split(bg, color, c.Rank())
					if err != nil {
						return err
					}
					if !local.Counted(c) {
						return errors.New("the world group should be counted")
					}
					if !stay {
						switch leaveAt {
						case "parked":
							if !pollUntil(func() bool {
								for r := range n / 2 {
									if !local.ArrivedAt(c, r, 2) { // the Split was 1
										return false
									}
								}
								return true
							}) {
								return errors.New("the others never arrived")
							}
						}
						return nil
					}
					if leaveAt == "before" && !pollUntil(func() bool { return local.Left(c, n-1) }) {
						return errors.New("rank never left")
					}
					err = c.Barrier(bg)
					if !errors.Is(err, comm.ErrBroken) || !strings.Contains(err.Error(), "returned from its function; it will never reach this Barrier") {
						return fmt.Errorf("Barrier with ranks gone: %v", err)
					}
					got, err := comm.AllReduce(bg, sub, []int64{1}, comm.Sum)
					if err != nil || got[0] != n/2 {
						return fmt.Errorf("AllReduce among the ranks that stay: %v, %v", got, err)
					}
					return nil
				})
				require.NoError(t, err)
			}
		})
	}
}

// A non-blocking collective started after a rank left fails with
// ErrBroken naming it, although its group (made by the first such call)
// did not exist when the rank left.
func TestNonblockingCollectiveAfterALeftRank(t *testing.T) {
	for _, n := range []int{2, 64} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			err := runBounded(t, n, func(ctx context.Context, c comm.Comm) error {
				if c.Rank() != 0 {
					return nil
				}
				if !pollUntil(func() bool { return local.Left(c, n-1) }) {
					return errors.New("rank never left")
				}
				q, err := c.Ibarrier()
				if err != nil {
					return err
				}
				_, err = q.Wait(context.Background())
				if !errors.Is(err, comm.ErrBroken) || !strings.Contains(err.Error(), "returned from its function") {
					return fmt.Errorf("Ibarrier with ranks gone: %v", err)
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// Every way a receive or probe from a rank stops waiting (matched by a
// send, canceled, withdrawn when its context ends, woken by a message)
// uncounts it: with none waiting, a departure of that rank sweeps its own
// mailbox only.
func TestAwaitedCountsBalance(t *testing.T) {
	err := runBounded(t, 40, func(ctx context.Context, c comm.Comm) error { // enough ranks to count
		if c.Rank() > 1 {
			return nil
		}
		if c.Rank() == 1 {
			for tag := range 4 {
				if !pollUntil(func() bool { return local.Waiting(c, 0) == 1 }) {
					return errors.New("rank 0 never waited")
				}
				if err := comm.Send(ctx, c, []int8{int8(tag)}, 0, tag); err != nil {
					return err
				}
			}
			// Stay until rank 0 is done: it waits for nothing from a rank
			// that left.
			_, err := comm.Recv(ctx, c, make([]int8, 1), 0, 99)
			return err
		}
		buf := make([]int8, 1)
		// Matched while posted: a blocking receive, a probe and an Irecv.
		if _, err := comm.Recv(ctx, c, buf, 1, 0); err != nil {
			return err
		}
		if _, err := c.Probe(ctx, comm.Int8, 1, 1); err != nil {
			return err
		}
		if _, err := comm.Recv(ctx, c, buf, 1, 1); err != nil {
			return err
		}
		q, err := comm.Irecv(c, buf, 1, 2)
		if err != nil {
			return err
		}
		if _, err := q.Wait(ctx); err != nil {
			return err
		}
		// Canceled, and withdrawn at a deadline.
		q, err = comm.Irecv(c, buf, 1, 9)
		if err != nil {
			return err
		}
		if err := q.(comm.Canceler).Cancel(); err != nil {
			return err
		}
		short, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		if _, err := comm.Recv(short, c, buf, 1, 9); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("Recv at a deadline: %v", err)
		}
		short2, cancel2 := context.WithTimeout(ctx, time.Millisecond)
		defer cancel2()
		if _, err := c.Probe(short2, comm.Int8, 1, 9); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("Probe at a deadline: %v", err)
		}
		if _, err := comm.Recv(ctx, c, buf, 1, 3); err != nil {
			return err
		}
		if local.Awaited(c, 1) {
			return errors.New("a receive from rank 1 still counted with none waiting")
		}
		return comm.Send(ctx, c, []int8{0}, 1, 99)
	})
	require.NoError(t, err)
}

// A blocking receive whose source leaves while the receive still yields
// before parking (on one P, the source runs in those yields), with a rank
// left behind so that the departure is not the last: it fails with
// ErrBroken naming the source instead of parking for ever.
func TestRecvFromRankThatLeavesWhileItYields(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for range 10 {
		err := runBounded(t, 40, func(ctx context.Context, c comm.Comm) error { // enough ranks to count
			bg := context.Background()
			switch c.Rank() {
			case 0:
			case 1:
				for local.Waiting(c, 0) == 0 {
					runtime.Gosched()
				}
				return nil
			case 2: // stays until rank 0 is done, so that rank 1's departure is not the last
				_, err := comm.Recv(bg, c, make([]int8, 1), 0, 9)
				return err
			default:
				return nil
			}
			_, err := comm.Recv(bg, c, make([]int8, 1), 1, 0)
			if !errors.Is(err, comm.ErrBroken) || !strings.Contains(err.Error(), "rank 1 returned from its function") {
				return fmt.Errorf("Recv from rank 1: %v, want ErrBroken naming it", err)
			}
			return comm.Send(bg, c, []int8{1}, 2, 9)
		})
		require.NoError(t, err)
	}
}
