package commbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/internal/launch"
)

func TestIters(t *testing.T) {
	assert.Equal(t, 2000, Iters(8, 1))
	assert.Equal(t, 500, Iters(64<<10, 1))
	assert.Equal(t, 100, Iters(1<<20, 1))
	assert.Equal(t, 20, Iters(16<<20, 1))
	assert.Equal(t, 5, Iters(16<<20, 0.01))
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	assert.Equal(t, 0.0, median(nil))
}

func TestMeasureLocal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{Sizes: []int{8, 4096}, Scale: 0.005, Backend: "local"}
	var got []Result
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		cfg := cfg
		steps := 0 // Progress: once per op and size, on every rank
		cfg.Progress = func() { steps++ }
		rs, err := Measure(ctx, c, cfg)
		if c.Rank() == 0 {
			got = rs
		} else if rs != nil {
			t.Errorf("rank %d got results", c.Rank())
		}
		if err == nil && steps != 6 {
			t.Errorf("rank %d: Progress called %d times, want 6", c.Rank(), steps)
		}
		return err
	})
	require.NoError(t, err)
	require.Len(t, got, 6)
	i := 0
	for _, op := range []string{OpAllReduce, OpAllGather, OpBcast} {
		for _, b := range cfg.Sizes {
			assert.Equal(t, op, got[i].Op)
			assert.Equal(t, b, got[i].Bytes)
			assert.Equal(t, 3, got[i].Ranks)
			assert.Greater(t, got[i].MedianUS, 0.0)
			i++
		}
	}
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, got[:1]))
	var back map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	for _, k := range []string{"op", "bytes", "ranks", "backend", "median_us"} {
		assert.Contains(t, back, k)
	}

	err = local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		_, err := Measure(ctx, c, Config{Ops: []string{"gossip"}})
		return err
	})
	assert.ErrorContains(t, err, "unknown op")
}

func TestParsePeerAndCombine(t *testing.T) {
	out := "# Open MPI v4.1.4, ranks=2\n# collective size ranks median_us algbw_GBps busbw_GBps iters\n" +
		"allreduce 8 2 0.20 0.040 0.040 2000\nbcast 1024 2 0.50 2.0 2.0 2000\n"
	peer, err := ParsePeer(out)
	require.NoError(t, err)
	assert.Equal(t, map[PeerKey]float64{{"allreduce", 8}: 0.20, {"bcast", 1024}: 0.50}, peer)
	rs := Combine([][]Result{{{Op: "allreduce", Bytes: 8, MedianUS: 0.25}, {Op: "allgather", Bytes: 8, MedianUS: 1}}},
		[]map[PeerKey]float64{peer})
	assert.InDelta(t, 1.25, rs[0].Ratio, 1e-9)
	assert.Equal(t, 0.20, rs[0].PeerMedianUS)
	assert.Zero(t, rs[1].Ratio)
	assert.Zero(t, rs[0].Rounds, "one round: no rounds or paired_ratio fields")
	assert.Zero(t, rs[0].PairedRatio)
	_, err = ParsePeer("# nothing\n")
	assert.Error(t, err)
	_, err = ParsePeer("allreduce x 2 0.1\n")
	assert.Error(t, err)
}

// Rounds combine into medians, and the paired ratio is the median of each
// round's own ratio: the machine's speed changes from round to round, for
// pz and the peer alike, so every round's ratio is 1.5, while the ratio
// of the medians (1.05 / 0.8) is not, because a round without the peer
// still counts for pz's median.
func TestCombineRounds(t *testing.T) {
	r := func(us float64) []Result {
		return []Result{{Op: "allreduce", Bytes: 8, MedianUS: us}, {Op: "bcast", Bytes: 8, MedianUS: us * 2}}
	}
	p := func(us float64) map[PeerKey]float64 { return map[PeerKey]float64{{"allreduce", 8}: us} }
	rs := Combine([][]Result{r(0.6), r(1.2), r(2.4), r(0.9)}, []map[PeerKey]float64{p(0.4), p(0.8), p(1.6), nil})
	require.Len(t, rs, 2)
	assert.InDelta(t, 1.05, rs[0].MedianUS, 1e-9) // median of 0.6, 0.9, 1.2, 2.4
	assert.InDelta(t, 0.8, rs[0].PeerMedianUS, 1e-9)
	assert.InDelta(t, 1.313, rs[0].Ratio, 1e-9)
	assert.InDelta(t, 1.5, rs[0].PairedRatio, 1e-9)
	assert.Equal(t, 4, rs[0].Rounds)
	assert.Zero(t, rs[1].PeerMedianUS, "the peer did not measure bcast")
	assert.Zero(t, rs[1].PairedRatio)
	assert.InDelta(t, 2.1, rs[1].MedianUS, 1e-9)

	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, rs[:1]))
	assert.Contains(t, buf.String(), `"rounds":4`)
	assert.Contains(t, buf.String(), `"paired_ratio":1.5`)
	assert.Nil(t, Combine(nil, nil))
	assert.NotContains(t, buf.String(), "c2c_ns", "not sampled")

	// The core-to-core samples of the rounds that took one: their median.
	rounds := [][]Result{r(1), r(1), r(1)}
	for k, ns := range []float64{300, 0, 100} {
		for j := range rounds[k] {
			rounds[k][j].C2CNs = ns
		}
	}
	rs = Combine(rounds, nil)
	assert.Equal(t, 200.0, rs[0].C2CNs)
	buf.Reset()
	require.NoError(t, WriteJSON(&buf, rs[:1]))
	assert.Contains(t, buf.String(), `"c2c_ns":200`)
}

func TestRunPeer(t *testing.T) {
	lau, err := launch.For(launch.OpenMPI)
	require.NoError(t, err)
	if _, err := lau.Cc(); err != nil {
		t.Skip(err)
	}
	dir := filepath.Join("..", "..", "..", "shared", "peers", "mpi")
	if _, err := os.Stat(filepath.Join(dir, "collbench.c")); err != nil {
		t.Skipf("C peer not found at %s", dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	peer, err := RunPeer(ctx, lau, dir, 2, 0.01, "single")
	require.NoError(t, err)
	for _, op := range []string{OpAllReduce, OpAllGather, OpBcast} {
		assert.Greater(t, peer[PeerKey{op, 8}], 0.0, op)
		assert.Greater(t, peer[PeerKey{op, 16 << 20}], peer[PeerKey{op, 8}], op)
	}
	_, err = RunPeer(ctx, lau, t.TempDir(), 2, 0.01, "single")
	assert.Error(t, err)
	// A library whose tools are not installed: ErrNoPeer, naming them.
	if _, err := exec.LookPath("mpicc.mpich"); err != nil {
		mpich, _ := launch.For(launch.MPICH)
		_, err = RunPeer(ctx, mpich, dir, 2, 0.01, "single")
		assert.ErrorIs(t, err, ErrNoPeer)
	}
}

// The ops beyond the three of the shared peer run on in-process ranks
// (the MPI backend runs them in pzrun bench comm -backend mpi).
func TestMeasureMoreOps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ops := []string{OpAllReduceUser, OpGatherv, OpAlltoallv, OpHalo, OpHaloPersistent,
		OpScan, OpReduceScatterBlock, OpAllReduceMaxLoc, OpSendrecv, OpIallreduce}
	cfg := Config{Ops: ops, Sizes: []int{8, 24, 4096}, Scale: 0.005, Backend: "local"}
	var got []Result
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		rs, err := Measure(ctx, c, cfg)
		if c.Rank() == 0 {
			got = rs
		}
		return err
	})
	require.NoError(t, err)
	require.Len(t, got, len(ops)*len(cfg.Sizes))
	for i, r := range got {
		assert.Equal(t, ops[i/len(cfg.Sizes)], r.Op)
		assert.Greater(t, r.MedianUS, 0.0)
	}
}

// TestMeasureStops: a Stop that one rank sees done (a signal reaching
// it first) stops every rank at the same point, after the measurements
// already made, whose results rank 0 still gets; the error names the
// cause on that rank.
func TestMeasureStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errStop := errors.New("interrupt received")
	var got []Result
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		stop, quit := context.WithCancelCause(context.Background())
		defer quit(nil)
		cfg := Config{Ops: []string{OpAllReduce, OpBcast}, Sizes: []int{8, 64}, Scale: 0.005, Stop: stop}
		// The last rank is told after the first operation's sizes: the
		// step that agrees before the next one sees it there.
		var rs []Result
		var err error
		if c.Rank() == 2 {
			first := cfg
			first.Ops = first.Ops[:1]
			if _, err = Measure(ctx, c, first); err != nil {
				return err
			}
			quit(errStop)
			rest := cfg
			rest.Ops = rest.Ops[1:]
			_, err = Measure(ctx, c, rest)
			if !errors.Is(err, errStop) {
				return fmt.Errorf("rank 2: %v, want the stop's cause", err)
			}
			return nil
		}
		first := cfg
		first.Ops = first.Ops[:1]
		if rs, err = Measure(ctx, c, first); err != nil {
			return err
		}
		rest := cfg
		rest.Ops = rest.Ops[1:]
		more, err := Measure(ctx, c, rest)
		if !errors.Is(err, context.Canceled) || len(more) != 0 {
			return fmt.Errorf("rank %d: %v (%d results), want a stop before any", c.Rank(), err, len(more))
		}
		if c.Rank() == 0 {
			got = rs
		}
		return nil
	})
	require.NoError(t, err)
	assert.Len(t, got, 2, "the first operation's sizes")
}

// TestRunPeerStoppedWhileCompiling: a run stopped while mpicc compiles the
// peer says so, with the cause, instead of mpicc's "signal: killed".
func TestRunPeerStoppedWhileCompiling(t *testing.T) {
	bin := t.TempDir()
	fifo := filepath.Join(bin, "started")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	// A compiler that says it started, then compiles for ever.
	script := "#!/bin/sh\necho started > " + fifo + "\nexec sleep 600\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "mpicc.openmpi"), []byte(script), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "mpirun.openmpi"), []byte("#!/bin/sh\nexit 1\n"), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	peers := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(peers, "collbench.c"), []byte("int main(void) { return 0; }\n"), 0o644))
	lau, err := launch.For(launch.OpenMPI)
	require.NoError(t, err)

	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("interrupted")
	done := make(chan error, 1)
	go func() {
		_, err := RunPeer(ctx, lau, peers, 2, 0.01, "single")
		done <- err
	}()
	started, err := os.ReadFile(fifo) // returns once the compiler has written and closed it
	require.NoError(t, err)
	require.Equal(t, "started\n", string(started))
	cancel(stop)
	err = <-done
	require.ErrorIs(t, err, stop)
	assert.ErrorContains(t, err, "the C peer was stopped while mpicc compiled it")
}
