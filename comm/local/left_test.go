package local_test

import (
	"context"
	"errors"
	"fmt"
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
