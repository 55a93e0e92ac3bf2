package fakecuda_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// The environment of a rank process of the tests below, which runs
// TestNCCLRankProcess.
const (
	// envRankLib is the path of the library instance the rank loads.
	envRankLib = "PZ_FAKECUDA_TEST_LIB"
	// envRank is "scenario rank nranks id...", the ids in hex.
	envRank = "PZ_FAKECUDA_TEST_NCCL_RANK"
)

// TestNCCLProcesses runs communicators of 2 and 3 ranks, each rank a
// process of its own on the device of its rank (EnvNCCLProcesses): the
// collectives, a gather by sends and receives in a group, and ranks that
// disagree (see ranksCollectives).
func TestNCCLProcesses(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			lib, ids := rankIDs(t, 2)
			ranks := make([]*rankProc, n)
			for r := range n {
				ranks[r] = startRank(t, lib, "collectives", r, n, ids, 20*time.Second)
			}
			for _, p := range ranks {
				p.wait(t)
			}
			noSegments(t, ids)
		})
	}
}

// TestNCCLProcessesTimeout: a rank that never comes makes the others
// fail within the timeout instead of hanging, whether it never joins or
// never reaches a collective; in the second case its own communicator
// gets the timeout too, through the shared memory.
func TestNCCLProcessesTimeout(t *testing.T) {
	t.Run("never joins", func(t *testing.T) {
		lib, ids := rankIDs(t, 1)
		ranks := []*rankProc{
			startRank(t, lib, "init-timeout", 0, 3, ids, time.Second),
			startRank(t, lib, "init-timeout", 1, 3, ids, time.Second),
		}
		for _, p := range ranks {
			p.wait(t)
		}
		noSegments(t, ids)
	})
	t.Run("never reaches the collective", func(t *testing.T) {
		lib, ids := rankIDs(t, 1)
		ranks := make([]*rankProc, 3)
		for r := range 3 {
			// 4 s for the three processes to join: a loaded machine may
			// start one of them a second or two after the others.
			ranks[r] = startRank(t, lib, "straggler", r, 3, ids, 4*time.Second)
		}
		ranks[0].wait(t)
		ranks[1].wait(t)
		// The others have timed out: now rank 2 looks at its communicator.
		require.NoError(t, ranks[2].stdin.Close())
		ranks[2].wait(t)
		noSegments(t, ids)
	})
}

// TestNCCLProcessesInOneProcess runs the tests of ranks in one process
// with EnvNCCLProcesses set: their communicators then meet in shared
// memory, one mapping each, with the same results and errors.
func TestNCCLProcessesInOneProcess(t *testing.T) {
	t.Setenv(fakecuda.EnvNCCLProcesses, "1")
	for name, test := range map[string]func(*testing.T){
		"UniqueIDByValue":         TestNCCLUniqueIDByValue,
		"OneThreadGroup":          TestNCCLOneThreadGroup,
		"EntryPointErrors":        TestNCCLEntryPointErrors,
		"HalfPrecision":           TestNCCLHalfPrecision,
		"FailedStreamTellsPeers":  TestNCCLFailedStreamTellsPeers,
		"BufferFreedBeforeRun":    TestNCCLBufferFreedBeforeRun,
		"OneThreadP2P":            TestNCCLOneThreadP2P,
		"P2PBufferFreedBeforeRun": TestNCCLP2PBufferFreedBeforeRun,
	} {
		t.Run(name, test)
	}
}

func TestNCCLProcessesConfiguration(t *testing.T) {
	fakecuda.Setenv(t, 1, 1<<20)
	t.Setenv(fakecuda.EnvNCCLProcesses, "2")
	_, err := cuda.OpenLibrary(fakecuda.Instance(t))
	require.ErrorIs(t, err, cuda.ErrInvalidValue)
}

// rankIDs makes a library instance and n ids with its ncclGetUniqueId.
func rankIDs(t *testing.T, n int) (string, []cuda.NCCLID) {
	t.Helper()
	lib := fakecuda.Instance(t)
	nc, err := cuda.OpenNCCL(lib)
	require.NoError(t, err)
	ids := make([]cuda.NCCLID, n)
	for i := range ids {
		ids[i], err = nc.UniqueID()
		require.NoError(t, err)
	}
	return lib, ids
}

// noSegments checks that the shared memory of ids is gone from /dev/shm.
func noSegments(t *testing.T, ids []cuda.NCCLID) {
	t.Helper()
	if _, err := os.Stat("/dev/shm"); err != nil {
		return
	}
	for _, id := range ids {
		name := "/dev/shm/pzfake-nccl-" + hex.EncodeToString(id[16:32])
		_, err := os.Stat(name)
		require.True(t, errors.Is(err, os.ErrNotExist), "%s is left: %v", name, err)
	}
}

// A rankProc is a rank's process: this test binary running
// TestNCCLRankProcess.
type rankProc struct {
	rank  int
	cmd   *exec.Cmd
	out   bytes.Buffer
	stdin io.WriteCloser // closing it lets the "straggler" rank 2 go on
}

// startRank starts rank of nranks running scenario with ids and the
// NCCL timeout, with as many devices as ranks; the process is killed if
// it is still running after a minute.
func startRank(t *testing.T, lib, scenario string, rank, nranks int, ids []cuda.NCCLID, timeout time.Duration) *rankProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	spec := []string{scenario, strconv.Itoa(rank), strconv.Itoa(nranks)}
	for _, id := range ids {
		spec = append(spec, hex.EncodeToString(id[:]))
	}
	p := &rankProc{rank: rank}
	p.cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNCCLRankProcess$", "-test.count=1", "-test.v",
		"-test.timeout=1m")
	p.cmd.Env = append(os.Environ(),
		envRankLib+"="+lib,
		envRank+"="+strings.Join(spec, " "),
		fakecuda.EnvNCCLProcesses+"=1",
		fakecuda.EnvDevices+"="+strconv.Itoa(nranks),
		fakecuda.EnvMemory+"="+strconv.Itoa(16<<20),
		fakecuda.EnvNCCLTimeout+"="+strconv.FormatInt(timeout.Milliseconds(), 10),
		// With -race, exit at once instead of after a second.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"),
	)
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = &p.out
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() { _ = p.stdin.Close() })
	return p
}

// wait waits for the rank's process, which must pass.
func (p *rankProc) wait(t *testing.T) {
	t.Helper()
	err := p.cmd.Wait()
	t.Logf("rank %d:\n%s", p.rank, p.out.String())
	require.NoError(t, err, "rank %d", p.rank)
	require.Contains(t, p.out.String(), "--- PASS: TestNCCLRankProcess", "rank %d", p.rank)
}

// rankEnv is what a rank process is told.
type rankEnv struct {
	scenario     string
	rank, nranks int
	ids          []cuda.NCCLID
	ctx          context.Context
	c            *cuda.Context
	s            *cuda.Stream
	nc           *cuda.NCCL
}

// TestNCCLRankProcess is a rank of TestNCCLProcesses or
// TestNCCLProcessesTimeout, in a process of its own; it skips unless
// envRank says which.
func TestNCCLRankProcess(t *testing.T) {
	spec := strings.Fields(os.Getenv(envRank))
	if len(spec) == 0 {
		t.Skip("the rank process of TestNCCLProcesses and TestNCCLProcessesTimeout")
	}
	require.GreaterOrEqual(t, len(spec), 4, "%s=%q", envRank, os.Getenv(envRank))
	e := &rankEnv{scenario: spec[0]}
	var err error
	e.rank, err = strconv.Atoi(spec[1])
	require.NoError(t, err)
	e.nranks, err = strconv.Atoi(spec[2])
	require.NoError(t, err)
	for _, h := range spec[3:] {
		b, err := hex.DecodeString(h)
		require.NoError(t, err)
		require.Len(t, b, 128)
		e.ids = append(e.ids, cuda.NCCLID(b))
	}
	lib := os.Getenv(envRankLib)
	d, err := cuda.OpenLibrary(lib)
	require.NoError(t, err)
	e.ctx, e.c = newContext(t, d, e.rank)
	e.s, err = e.c.NewStream(e.ctx)
	require.NoError(t, err)
	e.nc, err = cuda.OpenNCCL(lib)
	require.NoError(t, err)
	switch e.scenario {
	case "collectives":
		ranksCollectives(t, e)
	case "init-timeout":
		start := time.Now()
		_, err := e.nc.NewComm(e.ctx, e.c, e.nranks, e.rank, e.ids[0])
		require.ErrorIs(t, err, cuda.ErrNCCLSystem)
		// Both ranks, unless the other came too late for this one.
		require.Regexp(t, `ncclCommInitRank: timed out after 1000 ms with [12] of 3 ranks joined`, err.Error())
		require.Less(t, time.Since(start), 20*time.Second)
	case "straggler":
		comm := e.comm(t, e.ids[0])
		if e.rank == 2 {
			// Wait until the parent says that the others have timed out.
			_, err := io.Copy(io.Discard, os.Stdin)
			require.NoError(t, err)
			err = comm.Err(e.ctx)
			require.ErrorIs(t, err, cuda.ErrNCCLSystem, "the others' timeout reaches this rank's communicator")
			require.Regexp(t, `ncclAllReduce #0: timed out after 4000 ms with [12] of 3 ranks there`, err.Error())
		} else {
			p := e.put(t, []float64{1})
			require.NoError(t, comm.AllReduce(e.ctx, p, p, 1, cuda.NCCLFloat64, cuda.NCCLSum, e.s))
			err := comm.Synchronize(e.ctx, e.s)
			require.ErrorIs(t, err, cuda.ErrNCCLSystem)
			// Both ranks, unless one came too late for the other.
			require.Regexp(t, `ncclAllReduce #0: timed out after 4000 ms with [12] of 3 ranks there`, err.Error())
			require.Equal(t, []float64{1}, e.get(t, p, 1), "not written")
		}
		require.NoError(t, comm.Abort())
	default:
		t.Fatalf("unknown scenario %q", e.scenario)
	}
}

// comm joins the communicator of id.
func (e *rankEnv) comm(t *testing.T, id cuda.NCCLID) *cuda.NCCLComm {
	t.Helper()
	comm, err := e.nc.NewComm(e.ctx, e.c, e.nranks, e.rank, id)
	require.NoError(t, err)
	require.Equal(t, e.rank, comm.Rank())
	require.Equal(t, e.nranks, comm.Size())
	return comm
}

// put copies x to new device memory.
func (e *rankEnv) put(t *testing.T, x []float64) cuda.DevicePtr {
	t.Helper()
	p, err := e.c.Alloc(e.ctx, 8*len(x))
	require.NoError(t, err)
	require.NoError(t, e.c.CopyHtoD(e.ctx, p, cuda.Bytes(x)))
	return p
}

// get copies n float64 from device memory.
func (e *rankEnv) get(t *testing.T, p cuda.DevicePtr, n int) []float64 {
	t.Helper()
	x := make([]float64, n)
	require.NoError(t, e.c.CopyDtoH(e.ctx, cuda.Bytes(x), p))
	return x
}

// fill returns n values f(i).
func fill(n int, f func(i int) float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = f(i)
	}
	return x
}

// ranksCollectives is a rank of TestNCCLProcesses: AllReduce (in place,
// large enough to grow the shared data area; then many queued without
// waiting), Broadcast from the last
// rank, Reduce to rank 1, AllGather, ReduceScatter and a gather to rank
// 0 by sends and receives in a group, each checked; then, on a second
// communicator, an AllReduce whose count the last rank gets wrong, which
// fails every rank with ncclInvalidUsage.
func ranksCollectives(t *testing.T, e *rankEnv) {
	ctx, r, n, s := e.ctx, e.rank, e.nranks, e.s
	nf := float64(n)
	tri := nf * (nf - 1) / 2 // 0 + 1 + ... + n-1
	comm := e.comm(t, e.ids[0])
	sync := func(what string) {
		t.Helper()
		require.NoError(t, comm.Synchronize(ctx, s), what)
	}

	const big = 20000
	p := e.put(t, fill(big, func(i int) float64 { return float64(100*r + i) }))
	require.NoError(t, comm.AllReduce(ctx, p, p, big, cuda.NCCLFloat64, cuda.NCCLSum, s))
	sync("AllReduce")
	require.Equal(t, fill(big, func(i int) float64 { return 100*tri + nf*float64(i) }), e.get(t, p, big), "AllReduce")

	// Many queued back to back, the stream running ahead of its peers'.
	const many = 100
	p = e.put(t, fill(many, func(k int) float64 { return float64(r + k) }))
	for k := range many {
		require.NoError(t, comm.AllReduce(ctx, p+cuda.DevicePtr(8*k), p+cuda.DevicePtr(8*k), 1, cuda.NCCLFloat64, cuda.NCCLSum, s))
	}
	sync("AllReduce queued back to back")
	require.Equal(t, fill(many, func(k int) float64 { return tri + nf*float64(k) }), e.get(t, p, many), "AllReduce queued back to back")

	const bc = 7
	root := n - 1
	recv := e.put(t, fill(bc, func(int) float64 { return -1 }))
	send := recv
	if r == root {
		send = e.put(t, fill(bc, func(i int) float64 { return float64(1000 + i) }))
	}
	require.NoError(t, comm.Broadcast(ctx, send, recv, bc, cuda.NCCLFloat64, root, s))
	sync("Broadcast")
	require.Equal(t, fill(bc, func(i int) float64 { return float64(1000 + i) }), e.get(t, recv, bc), "Broadcast")

	const rc = 9
	send = e.put(t, fill(rc, func(i int) float64 { return float64(10*r + i) }))
	recv = e.put(t, fill(rc, func(int) float64 { return -1 }))
	require.NoError(t, comm.Reduce(ctx, send, recv, rc, cuda.NCCLFloat64, cuda.NCCLSum, 1, s))
	sync("Reduce")
	want := fill(rc, func(int) float64 { return -1 }) // only the root's is written
	if r == 1 {
		want = fill(rc, func(i int) float64 { return 10*tri + nf*float64(i) })
	}
	require.Equal(t, want, e.get(t, recv, rc), "Reduce")

	const gc = 5
	send = e.put(t, fill(gc, func(i int) float64 { return float64(1000*r + i) }))
	recv = e.put(t, fill(gc*n, func(int) float64 { return -1 }))
	require.NoError(t, comm.AllGather(ctx, send, recv, gc, cuda.NCCLFloat64, s))
	sync("AllGather")
	require.Equal(t, fill(gc*n, func(i int) float64 { return float64(1000*(i/gc) + i%gc) }), e.get(t, recv, gc*n), "AllGather")

	const sc = 4
	send = e.put(t, fill(sc*n, func(j int) float64 { return float64(r + j) }))
	recv = e.put(t, fill(sc, func(int) float64 { return -1 }))
	require.NoError(t, comm.ReduceScatter(ctx, send, recv, sc, cuda.NCCLFloat64, cuda.NCCLSum, s))
	sync("ReduceScatter")
	require.Equal(t, fill(sc, func(i int) float64 { return tri + nf*float64(sc*r+i) }), e.get(t, recv, sc), "ReduceScatter")

	// A gather to rank 0, which receives from every rank, itself included.
	const mc = 6
	send = e.put(t, fill(mc, func(i int) float64 { return float64(7*r + i) }))
	recv = e.put(t, fill(mc*n, func(int) float64 { return -1 }))
	require.NoError(t, e.nc.Group(ctx, e.c, func() error {
		if r == 0 {
			for peer := range n {
				if err := comm.Recv(ctx, recv+cuda.DevicePtr(8*mc*peer), mc, cuda.NCCLFloat64, peer, s); err != nil {
					return err
				}
			}
		}
		return comm.Send(ctx, send, mc, cuda.NCCLFloat64, 0, s)
	}))
	sync("gather")
	want = fill(mc*n, func(int) float64 { return -1 })
	if r == 0 {
		want = fill(mc*n, func(i int) float64 { return float64(7*(i/mc) + i%mc) })
	}
	require.Equal(t, want, e.get(t, recv, mc*n), "gather")
	require.NoError(t, comm.Close())

	// Ranks that disagree: every rank's communicator gets ncclInvalidUsage.
	bad := e.comm(t, e.ids[1])
	count := 4
	if r == n-1 {
		count = 3
	}
	p = e.put(t, fill(4, func(i int) float64 { return float64(i) }))
	require.NoError(t, bad.AllReduce(ctx, p, p, count, cuda.NCCLFloat64, cuda.NCCLSum, s))
	err := bad.Synchronize(ctx, s)
	require.ErrorIs(t, err, cuda.ErrNCCLInvalidUsage)
	require.Contains(t, err.Error(), fmt.Sprintf("ncclAllReduce #0: rank %d passed count 3, rank 0 4", n-1))
	require.Equal(t, fill(4, func(i int) float64 { return float64(i) }), e.get(t, p, 4), "not written")
	require.NoError(t, bad.Abort())
}
