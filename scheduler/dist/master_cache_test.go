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

// The cache tests' shape: cacheTasks tasks read one handle of cacheElems
// float64s (8 MiB) and each writes its own output of outElems.
const (
	cacheElems = 1 << 20
	cacheTasks = 20
	outElems   = 8
)

// cacheSum writes, into its output (argument 1), the sum of its input
// (argument 0) and the input's first element.
var cacheSum = &scheduler.Codelet{Name: "cache-sum", CPU: func(c *scheduler.Call) error {
	in := scheduler.VectorOf[float64](c, 0)
	out := scheduler.VectorOf[float64](c, 1)
	var s float64
	for _, x := range in {
		s += x
	}
	out[0], out[1] = s, in[0]
	return nil
}}

// cacheAdd adds 1 to every element of its vector.
var cacheAdd = &scheduler.Codelet{Name: "cache-add", CPU: func(c *scheduler.Call) error {
	for i, x := range scheduler.VectorOf[float64](c, 0) {
		scheduler.VectorOf[float64](c, 0)[i] = x + 1
	}
	return nil
}}

// cacheRanks runs fn as the master of RunMaster on c's ranks, each of
// workers cores, with eager and stats; the registry holds cacheSum and
// cacheAdd.
func cacheRanks(ctx context.Context, c comm.Comm, workers int, fn func(ctx context.Context, m *dist.Master) error) error {
	reg, err := dist.NewRegistry(cacheSum, cacheAdd)
	if err != nil {
		return err
	}
	opts := []scheduler.Option{scheduler.WithWorkers(workers), scheduler.WithPolicy("eager"), scheduler.WithStats(true),
		scheduler.WithGetenv(func(string) string { return "" })}
	return dist.RunMaster(ctx, c, 0, reg, opts, fn)
}

// remoteContext returns a context of the workers of every rank but the
// master's: its tasks all travel.
func remoteContext(m *dist.Master, name string, ranks ...int) (*scheduler.Context, error) {
	var ws []int
	for w := range m.Workers() {
		if r := m.RankOf(w); r != m.RankOf(0) && (len(ranks) == 0 || r == ranks[0]) {
			ws = append(ws, w)
		}
	}
	return m.Local().NewContext(name, scheduler.ContextWorkers(ws...))
}

// tasksPerRank returns the tasks each rank has run so far.
func tasksPerRank(m *dist.Master, size int) []int64 {
	per := make([]int64, size)
	for _, w := range m.Local().Stats() {
		per[m.RankOf(w.Worker)] += w.Tasks
	}
	return per
}

// readRound submits cacheTasks tasks of cacheSum reading in, in ctxt,
// waits for them, and checks every output: the sum of in, whose element
// i is base+i, and its first element.
func readRound(ctx context.Context, m *dist.Master, ctxt *scheduler.Context, in *scheduler.Handle, base float64) error {
	outs := make([][]float64, cacheTasks)
	hs := make([]*scheduler.Handle, cacheTasks)
	for k := range outs {
		outs[k] = make([]float64, outElems)
		var err error
		if hs[k], err = m.Local().RegisterVector(outs[k]); err != nil {
			return err
		}
		if err := m.Submit(ctx, cacheSum, scheduler.R(in), scheduler.W(hs[k]), scheduler.InContext(ctxt)); err != nil {
			return err
		}
	}
	if err := m.WaitAll(ctx); err != nil {
		return err
	}
	want := float64(cacheElems)*base + float64(cacheElems)*float64(cacheElems-1)/2
	for k, h := range hs {
		if _, err := h.Unregister(ctx); err != nil {
			return err
		}
		if outs[k][0] != want || outs[k][1] != base {
			return fmt.Errorf("task %d read sum %v, first %v; want %v, %v", k, outs[k][0], outs[k][1], want, base)
		}
	}
	return nil
}

// sentSince checks the bytes the master sent each worker rank between
// before and now: the input (inBytes) once to each rank that ran a task
// since (tasks between tasksBefore and now), and outElems float64s per
// task.
func sentSince(m *dist.Master, size int, before []dist.Stats, tasksBefore []int64, inBytes int64, travels func(r int, tasks int64) int64) error {
	now := m.PeerStats()
	tasks := tasksPerRank(m, size)
	for r := 1; r < size; r++ {
		n := tasks[r] - tasksBefore[r]
		want := travels(r, n)*inBytes + n*outElems*8
		if got := now[r].BytesSent - before[r].BytesSent; got != want {
			return fmt.Errorf("rank %d ran %d tasks and was sent %d bytes; want %d (the %d-byte input %d times)", r, n, got, want, inBytes, travels(r, n))
		}
	}
	return nil
}

// once is sentSince's travels when a rank keeps the input: once to each
// rank that ran a task.
func once(_ int, tasks int64) int64 { return min(tasks, 1) }

// cacheScenario is the cache's test on c's ranks: 20 tasks read one 8
// MiB handle and write their own outputs, in a context of the worker
// ranks' cores: the handle travels once to each rank that ran one.
// Then a task writes the handle on a worker rank, and the next 20 reads
// see its values, sent once more to each rank; then the host writes it
// (Handle.Data), and the next reads see that too. Every output is
// checked.
func cacheScenario(ctx context.Context, c comm.Comm) error {
	return cacheRanks(ctx, c, 2, func(ctx context.Context, m *dist.Master) error {
		size := c.Size()
		data := make([]float64, cacheElems)
		for i := range data {
			data[i] = float64(i)
		}
		in, err := m.Local().RegisterVector(data, scheduler.Named("model"))
		if err != nil {
			return err
		}
		remote, err := remoteContext(m, "remote")
		if err != nil {
			return err
		}
		inBytes := int64(cacheElems * 8)
		st, tasks := m.PeerStats(), tasksPerRank(m, size)
		if err := readRound(ctx, m, remote, in, 0); err != nil {
			return fmt.Errorf("first reads: %w", err)
		}
		if err := sentSince(m, size, st, tasks, inBytes, once); err != nil {
			return fmt.Errorf("first reads: %w", err)
		}
		// A second round reads copies the ranks hold: nothing travels
		// but the outputs.
		st, tasks = m.PeerStats(), tasksPerRank(m, size)
		if err := readRound(ctx, m, remote, in, 0); err != nil {
			return fmt.Errorf("second reads: %w", err)
		}
		if err := sentSince(m, size, st, tasks, inBytes, func(int, int64) int64 { return 0 }); err != nil {
			return fmt.Errorf("second reads (held): %w", err)
		}
		// A task on a worker rank writes the handle: every copy is stale.
		if err := m.Submit(ctx, cacheAdd, scheduler.RW(in), scheduler.InContext(remote)); err != nil {
			return err
		}
		if err := m.WaitAll(ctx); err != nil {
			return err
		}
		st, tasks = m.PeerStats(), tasksPerRank(m, size)
		if err := readRound(ctx, m, remote, in, 1); err != nil {
			return fmt.Errorf("reads after a task wrote: %w", err)
		}
		if err := sentSince(m, size, st, tasks, inBytes, once); err != nil {
			return fmt.Errorf("reads after a task wrote: %w", err)
		}
		// The host writes it.
		for i, x := range in.Data().([]float64) {
			data[i] = x + 1
		}
		st, tasks = m.PeerStats(), tasksPerRank(m, size)
		if err := readRound(ctx, m, remote, in, 2); err != nil {
			return fmt.Errorf("reads after the host wrote: %w", err)
		}
		if err := sentSince(m, size, st, tasks, inBytes, once); err != nil {
			return fmt.Errorf("reads after the host wrote: %w", err)
		}
		// A task on the master's own core writes it.
		mine, err := m.Local().NewContext("master", scheduler.ContextWorkers(0))
		if err != nil {
			return err
		}
		if err := m.Submit(ctx, cacheAdd, scheduler.RW(in), scheduler.InContext(mine)); err != nil {
			return err
		}
		st, tasks = m.PeerStats(), tasksPerRank(m, size)
		if err := readRound(ctx, m, remote, in, 3); err != nil {
			return fmt.Errorf("reads after the master wrote: %w", err)
		}
		return sentSince(m, size, st, tasks, inBytes, once)
	})
}

// TestMasterCacheReadOnce: in master/worker mode a worker rank keeps the
// data it received for reading: 20 tasks that read one 8 MiB handle send
// it once to each worker rank that runs one (two slots each, sharing the
// rank's copy), not once per task (before: 8 MiB with every task); a
// write, by a task on a worker rank, by the host (Handle.Data) or by a
// task on the master's core, makes the next reads travel again and see
// the new values. On 2 and 3 in-process ranks.
func TestMasterCacheReadOnce(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			require.NoError(t, local.Run(ctx, n, cacheScenario))
		})
	}
}

// cacheLimitScenario: two 8 MiB handles read alternately on rank 1 (one
// core): under a limit of 12 MiB only one fits, so each read evicts the
// other and travels; under 16 MiB both stay after their first read;
// under 0 nothing is kept. The results are checked every time.
// (16 MiB: each travels once; 12 MiB: the lower limit evicts the older,
// then every read; 16 MiB: the one evicted travels again; 0: every read;
// 16 MiB: both again.)
func cacheLimitScenario(ctx context.Context, c comm.Comm) error {
	return cacheRanks(ctx, c, 1, func(ctx context.Context, m *dist.Master) error {
		rank1, err := remoteContext(m, "rank 1", 1)
		if err != nil {
			return err
		}
		var hs [2]*scheduler.Handle
		for j := range hs {
			data := make([]float64, cacheElems)
			for i := range data {
				data[i] = float64(i + j)
			}
			if hs[j], err = m.Local().RegisterVector(data); err != nil {
				return err
			}
		}
		inBytes := int64(cacheElems * 8)
		for _, tc := range []struct {
			limit   int64
			travels int64 // of the 6 reads
		}{{16 << 20, 2}, {12 << 20, 6}, {16 << 20, 1}, {0, 6}, {16 << 20, 2}} {
			m.SetCacheLimit(tc.limit)
			before := m.PeerStats()[1].BytesSent
			for k := range 6 {
				out := make([]float64, outElems)
				ho, err := m.Local().RegisterVector(out)
				if err != nil {
					return err
				}
				if err := m.Submit(ctx, cacheSum, scheduler.R(hs[k%2]), scheduler.W(ho), scheduler.InContext(rank1)); err != nil {
					return err
				}
				if _, err := ho.Unregister(ctx); err != nil {
					return err
				}
				if want := float64(k % 2); out[1] != want {
					return fmt.Errorf("limit %d, read %d: first element %v, want %v", tc.limit, k, out[1], want)
				}
			}
			if got, want := m.PeerStats()[1].BytesSent-before, tc.travels*inBytes+6*outElems*8; got != want {
				return fmt.Errorf("limit %d: rank 1 was sent %d bytes for 6 reads, want %d (the input %d times)", tc.limit, got, want, tc.travels)
			}
		}
		return nil
	})
}

// TestMasterCacheLimit: the byte limit (Master.SetCacheLimit) evicts the
// least recently used copy, decided by the master, and the results stay
// right; 0 keeps nothing.
func TestMasterCacheLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	require.NoError(t, local.Run(ctx, 2, cacheLimitScenario))
}
