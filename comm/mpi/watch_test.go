//go:build mpi

package mpi

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/lockedbuf"
)

// A collective in progress in its communicator's slot is timed from the
// first check that sees it, reported once per report interval with its
// call and number, forgotten when it ends, and ends the process past the
// timeout.
func TestWatchCollSlot(t *testing.T) {
	var out bytes.Buffer
	exited := -1
	w := &watch{report: time.Second, timeout: 5 * time.Second, rank: 1, size: 2, out: &out, exit: func(code int) { exited = code }}
	s := w.collSlot(2)
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	s.begin("MPI_Allreduce", 7)
	w.check(at(0))
	w.check(at(500 * time.Millisecond))
	assert.Empty(t, out.String(), "half a report interval")
	w.check(at(1500 * time.Millisecond))
	assert.Contains(t, out.String(), "pz mpi: rank 1 of 2: waiting 1.5s in MPI_Allreduce (collective #7 on a communicator of 2 ranks)")
	out.Reset()
	w.check(at(2 * time.Second))
	assert.Empty(t, out.String(), "reported once per interval")

	s.end()
	s.begin("MPI_Bcast", 8) // the next collective starts its own clock
	w.check(at(3 * time.Second))
	w.check(at(3500 * time.Millisecond))
	assert.Empty(t, out.String())
	w.check(at(8 * time.Second))
	assert.Contains(t, out.String(), "waiting 5s in MPI_Bcast (collective #8")
	assert.Contains(t, out.String(), "ending the job (PZ_COMM_TIMEOUT=5s)")
	assert.Equal(t, TimeoutExit, exited)

	s.end()
	out.Reset()
	w.dropSlot(s)
	s.begin("MPI_Barrier", 9) // a freed communicator's slot is no longer read
	w.check(at(time.Hour))
	assert.Empty(t, out.String())

	// With reports and the timeout off there is no slot to fill.
	assert.Nil(t, (&watch{}).collSlot(2))
}

// A watch that first looks at a wait after the timeout (its ticks came
// late on a loaded machine: CI saw 'waiting 10.897s' with a 3 s timeout
// and no report before) still says why the rank may be waiting when it
// ends the process; one that reported before does not say it again.
func TestWatchTimeoutSaysWhyOnce(t *testing.T) {
	var out bytes.Buffer
	exited := -1
	w := &watch{report: time.Second, timeout: 3 * time.Second, rank: 0, size: 2, out: &out, exit: func(code int) { exited = code }}
	s := w.collSlot(2)
	t0 := time.Unix(1000, 0)
	s.begin("MPI_Allreduce", 1)
	w.check(t0)
	w.check(t0.Add(11 * time.Second))
	assert.Equal(t, TimeoutExit, exited)
	assert.Contains(t, out.String(), "waiting 11s in MPI_Allreduce (collective #1 on a communicator of 2 ranks); ending the job (PZ_COMM_TIMEOUT=3s)\n")
	assert.Contains(t, out.String(), "a rank that returned early, failed or called another collective leaves the others waiting")

	out.Reset()
	s.end()
	s.begin("MPI_Bcast", 2)
	w.check(t0.Add(20 * time.Second))
	w.check(t0.Add(21500 * time.Millisecond))
	require.Equal(t, 1, strings.Count(out.String(), "a rank that returned early"), "the report: %s", out.String())
	w.check(t0.Add(23 * time.Second))
	assert.Equal(t, 1, strings.Count(out.String(), "a rank that returned early"), "said once, by the report: %s", out.String())
	assert.Contains(t, out.String(), "waiting 3s in MPI_Bcast (collective #2 on a communicator of 2 ranks); ending the job (PZ_COMM_TIMEOUT=3s)\n")
}

// A point-to-point wait is timed the same way, from the first check that
// sees it, and reported with its kind, peer and tag; a slot freed by
// endP2P is reused with a clock of its own.
func TestWatchP2P(t *testing.T) {
	var out bytes.Buffer
	exited := -1
	w := &watch{report: time.Second, timeout: 4 * time.Second, rank: 0, size: 3, out: &out, exit: func(code int) { exited = code }}
	t0 := time.Unix(2000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	id := w.beginP2P(p2p(p2pRecv, 2, 7))
	w.check(at(10 * time.Second)) // the first check that sees it starts its clock
	assert.Empty(t, out.String())
	w.check(at(10*time.Second + 500*time.Millisecond))
	assert.Empty(t, out.String(), "half a report interval")
	w.check(at(11*time.Second + 200*time.Millisecond))
	assert.Contains(t, out.String(), "pz mpi: rank 0 of 3: waiting 1.2s in Recv from rank 2, tag 7; a peer that returned early, failed or never makes the matching call leaves this rank waiting")
	w.endP2P(id)
	out.Reset()

	assert.Equal(t, id, w.beginP2P(p2p(p2pRecv, 2, 7)), "the same wait again takes the same slot")
	w.endP2P(id)
	w.check(at(12 * time.Second))
	w.check(at(19 * time.Second))
	assert.Empty(t, out.String(), "a wait that ended is forgotten")

	w.beginP2P(p2p(p2pWaitIsend, 1, 0))
	w.check(at(20 * time.Second))
	w.check(at(23 * time.Second))
	assert.Equal(t, -1, exited, "3s of 4")
	w.check(at(24 * time.Second))
	assert.Contains(t, out.String(), "waiting 4s in Wait for an Isend to rank 1, tag 0; ending the job (PZ_COMM_TIMEOUT=4s)")
	assert.Equal(t, TimeoutExit, exited)

	// With reports and the timeout off nothing is recorded.
	assert.Equal(t, -1, (&watch{}).beginP2P(p2p(p2pSend, 0, 0)))
	assert.Equal(t, -1, (*watch)(nil).beginP2P(p2p(p2pSend, 0, 0)))
}

// More point-to-point waits at once than there are lock-free slots go to
// the locked list, and are watched as well.
func TestWatchP2POverflow(t *testing.T) {
	var out bytes.Buffer
	w := &watch{report: time.Second, rank: 1, size: 2, out: &out, exit: func(int) { t.Fatal("no timeout set") }}
	ids := make([]int, p2pSlots+2)
	for i := range ids {
		ids[i] = w.beginP2P(p2p(p2pProbe, comm.AnySource, comm.AnyTag))
	}
	assert.Equal(t, p2pSlots, ids[p2pSlots], "the first past the slots")
	assert.Equal(t, p2pSlots+1, ids[p2pSlots+1])
	for _, id := range ids[:len(ids)-1] {
		w.endP2P(id)
	}
	t0 := time.Unix(3000, 0)
	w.check(t0)
	w.check(t0.Add(2 * time.Second))
	assert.Equal(t, 1, strings.Count(out.String(), "\n"), "only the wait still in progress: %s", out.String())
	assert.Contains(t, out.String(), "waiting 2s in Probe from any rank, any tag")
	w.endP2P(ids[len(ids)-1])
	out.Reset()
	w.check(t0.Add(time.Hour))
	assert.Empty(t, out.String())
	assert.Less(t, w.beginP2P(p2p(p2pSend, 0, 1)), p2pSlots, "a free slot before the list")
}

// p2pWhat keeps the peer and the tag, and says so when a rank does not
// fit its bits.
func TestP2PWhat(t *testing.T) {
	for _, c := range []struct {
		what p2pWhat
		want string
	}{
		{p2p(p2pSend, 0, 0), "Send to rank 0, tag 0"},
		{p2p(p2pSsend, 3, 1<<31-1), "Ssend to rank 3, tag 2147483647"},
		{p2p(p2pRecv, comm.AnySource, comm.AnyTag), "Recv from any rank, any tag"},
		{p2p(p2pSendrecv, 1<<28-3, 5), "Sendrecv receiving from rank 268435453, tag 5"},
		{p2p(p2pMprobe, 1<<28-1, 5), "Mprobe from a rank past 2^28, tag 5"},
		{p2p(p2pWaitRecvInit, 2, 9), "Wait for a persistent receive from rank 2, tag 9"},
		{p2p(p2pWaitSendInit, 2, 9), "Wait for a persistent send to rank 2, tag 9"},
		{p2p(p2pWaitSendrecv, 1, 4), "Sendrecv sending to rank 1, tag 4"},
		{p2p(p2pWaitSendrecvReplace, 0, 3), "SendrecvReplace sending to rank 0, tag 3"},
	} {
		assert.Equal(t, c.want, c.what.String())
	}
	// Every kind fits the word's 4 bits and comes back with its peer.
	require.LessOrEqual(t, int(p2pKinds), 16)
	for k := p2pSend; k < p2pKinds; k++ {
		w := p2p(k, 5, 6)
		assert.Equal(t, k, w.kind())
		assert.NotEmpty(t, p2pNames[k], "kind %d has a name", k)
		p := w.peers()
		if k.sends() {
			assert.Equal(t, sendTo(5, 6), p, p2pNames[k])
		} else {
			assert.Equal(t, recvFrom(5, 6), p, p2pNames[k])
		}
	}
}

// The watch's loop reads the slots while goroutines claim and free them
// (run with -race): a wait that lasts is reported, the short ones around
// it do not disturb it.
func TestWatchP2PConcurrent(t *testing.T) {
	out := &lockedbuf.Buffer{}
	w := &watch{report: 2 * time.Millisecond, rank: 0, size: 4, out: out, exit: func(int) { t.Error("no timeout set") },
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	defer w.close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				w.endP2P(w.beginP2P(p2p(p2pRecv, g, 1)))
			}
		})
	}
	id := w.beginP2P(p2p(p2pProbe, 9, 9))
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "in Probe from rank 9, tag 9;") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w.endP2P(id)
	close(stop)
	wg.Wait()
	assert.Contains(t, out.String(), "in Probe from rank 9, tag 9;")
}

// BenchmarkWatchP2P times a point-to-point wait's record: beginP2P and
// endP2P with the watch on, from one goroutine and from every P at once
// (the mutex-guarded list they replaced took ~29 ns for either).
func BenchmarkWatchP2P(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		w := &watch{report: time.Minute}
		for range b.N {
			w.endP2P(w.beginP2P(p2p(p2pRecv, 1, 0)))
		}
	})
	b.Run("parallel", func(b *testing.B) {
		w := &watch{report: time.Minute}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.endP2P(w.beginP2P(p2p(p2pRecv, 1, 0)))
			}
		})
	})
}
