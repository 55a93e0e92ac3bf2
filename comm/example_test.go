package comm_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// Four in-process ranks sum a vector, gather slices of different lengths
// and broadcast a struct.
func Example() {
	type config struct {
		Name  string
		Steps int
	}
	err := local.Run(context.Background(), 4, func(ctx context.Context, c comm.Comm) error {
		r := c.Rank()
		sum, err := comm.AllReduce(ctx, c, []float64{float64(r), 1}, comm.Sum)
		if err != nil {
			return err
		}
		parts, err := comm.AllGather(ctx, c, make([]int32, r)) // rank r sends r elements
		if err != nil {
			return err
		}
		var cfg config
		if r == 0 {
			cfg = config{Name: "demo", Steps: 10}
		}
		cfg, err = comm.BcastValue(ctx, c, cfg, 0)
		if err != nil {
			return err
		}
		if r == 3 {
			fmt.Println("sum:", sum)
			fmt.Println("gathered lengths:", len(parts[0]), len(parts[1]), len(parts[2]), len(parts[3]))
			fmt.Printf("config: %+v\n", cfg)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// sum: [6 4]
	// gathered lengths: 0 1 2 3
	// config: {Name:demo Steps:10}
}

// A user-defined reduction on encoded values, applied in rank order.
func ExampleAllReduceValue() {
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		path, err := comm.AllReduceValue(ctx, c, fmt.Sprintf("r%d", c.Rank()),
			func(a, b string) string { return a + "->" + b })
		if err == nil && c.Rank() == 0 {
			fmt.Println(path)
		}
		return err
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: r0->r1->r2
}

// Mismatched arguments give an error on every rank instead of a hang:
// here rank 1 passes one element more than rank 0. Each rank gets a
// *MismatchError naming the collective and what differs, and the world
// stays usable: the Barrier after it succeeds.
func ExampleMismatchError() {
	var got [2]string // each rank's error, printed in rank order after Run
	err := local.Run(context.Background(), 2, func(ctx context.Context, c comm.Comm) error {
		_, err := comm.AllReduce(ctx, c, make([]float64, c.Rank()+1), comm.Sum)
		var me *comm.MismatchError
		if !errors.As(err, &me) {
			return fmt.Errorf("rank %d: %v, want a *comm.MismatchError", c.Rank(), err)
		}
		got[c.Rank()] = fmt.Sprintf("rank %d: Op %s, Detail %q, errors.Is ErrMismatch: %v", c.Rank(), me.Op, me.Detail, errors.Is(err, comm.ErrMismatch))
		return c.Barrier(ctx)
	})
	if err != nil {
		fmt.Println(err)
	}
	for _, line := range got {
		fmt.Println(line)
	}
	// Output:
	// rank 0: Op AllReduce, Detail "count: rank 0 has 1, rank 1 has 2", errors.Is ErrMismatch: true
	// rank 1: Op AllReduce, Detail "count: rank 0 has 1, rank 1 has 2", errors.Is ErrMismatch: true
}

// A non-blocking AllReduce overlaps a computation: the sum arrives while
// each rank works on something else, and WaitAny drains messages from every
// peer in whatever order they arrive.
func ExampleComm_Iallreduce() {
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		local, global := []float64{float64(c.Rank() + 1)}, make([]float64, 1)
		req, err := c.Iallreduce(comm.BufOf(local), comm.BufOf(global), comm.Sum)
		if err != nil {
			return err
		}
		work := 0 // meanwhile, this rank's own work
		for i := range 1000 {
			work += i
		}
		if _, err := req.Wait(ctx); err != nil {
			return err
		}

		// Every rank sends its rank to every other one.
		var reqs []comm.Request
		got := make([][]int64, c.Size())
		for j := range c.Size() {
			got[j] = make([]int64, 1)
			r, err := comm.Irecv(c, got[j], j, 7)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		for j := range c.Size() {
			if err := comm.Send(ctx, c, []int64{int64(c.Rank())}, j, 7); err != nil {
				return err
			}
		}
		from := 0
		for {
			cp, err := comm.WaitAny(ctx, reqs)
			if err != nil {
				return err
			}
			if cp.Index < 0 {
				break // every request handled
			}
			if cp.Err != nil {
				return cp.Err
			}
			from += int(got[cp.Index][0])
		}
		if c.Rank() == 0 {
			fmt.Println("sum:", global[0], "work:", work, "sum of senders:", from)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// sum: 6 work: 499500 sum of senders: 3
}

// A halo exchange on a line of ranks: each sends its last cell right and
// receives its left neighbour's; the ends talk to ProcNull, so no rank
// needs a special case. Scan then numbers the cells globally.
func ExampleSendrecv() {
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		left, right := c.Rank()-1, c.Rank()+1
		if left < 0 {
			left = comm.ProcNull
		}
		if right == c.Size() {
			right = comm.ProcNull
		}
		cells := []float64{float64(10 * c.Rank()), float64(10*c.Rank() + 1)}
		ghost := []float64{-1}
		if _, err := comm.Sendrecv(ctx, c, cells[len(cells)-1:], right, 0, ghost, left, 0); err != nil {
			return err
		}
		first, err := comm.Exscan(ctx, c, []int64{int64(len(cells))}, comm.Sum)
		if err != nil {
			return err
		}
		offset := int64(0)
		if first != nil {
			offset = first[0]
		}
		all, err := comm.GatherValues(ctx, c, fmt.Sprintf("rank %d: ghost %v, first cell #%d", c.Rank(), ghost[0], offset), 0)
		if err == nil && c.Rank() == 0 {
			for _, line := range all {
				fmt.Println(line)
			}
		}
		return err
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// rank 0: ghost -1, first cell #0
	// rank 1: ghost 1, first cell #2
	// rank 2: ghost 11, first cell #4
}

// A 1D heat-diffusion loop whose halo exchange is set up once: each rank
// owns four cells, and every step sends its edge cells to its neighbours
// and receives theirs into its ghost cells with persistent requests
// (started, then waited on, every step). The ends talk to ProcNull and
// keep ghosts of 0. The result is the sequential computation's over the
// 12 cells (heat leaks out at the ends: 356.8 of 400 after 20 steps).
func ExampleSendInit() {
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		left, right := c.Rank()-1, c.Rank()+1
		if left < 0 {
			left = comm.ProcNull
		}
		if right == c.Size() {
			right = comm.ProcNull
		}
		// u[0] and u[5] are ghosts; u[1:5] are this rank's cells.
		u := make([]float64, 6)
		if c.Rank() == 1 {
			u[1], u[2], u[3], u[4] = 100, 100, 100, 100
		}
		ps := make([]comm.Persistent, 0, 4)
		for _, op := range []func() (comm.Persistent, error){
			func() (comm.Persistent, error) { return comm.SendInit(c, u[1:2], left, 0) },
			func() (comm.Persistent, error) { return comm.SendInit(c, u[4:5], right, 1) },
			func() (comm.Persistent, error) { return comm.RecvInit(c, u[0:1], left, 1) },
			func() (comm.Persistent, error) { return comm.RecvInit(c, u[5:6], right, 0) },
		} {
			p, err := op()
			if err != nil {
				return err
			}
			defer p.Free()
			ps = append(ps, p)
		}
		next := make([]float64, 6)
		for step := range 20 {
			if err := comm.StartAll(ps...); err != nil {
				return err
			}
			if _, err := comm.WaitAll(ctx, []comm.Request{ps[0], ps[1], ps[2], ps[3]}); err != nil {
				return err
			}
			for i := 1; i <= 4; i++ {
				next[i] = u[i] + 0.25*(u[i-1]-2*u[i]+u[i+1])
			}
			copy(u[1:5], next[1:5])
			if step == 0 || step == 19 {
				heat, err := comm.AllReduce(ctx, c, []float64{u[1] + u[2] + u[3] + u[4]}, comm.Sum)
				if err != nil {
					return err
				}
				if c.Rank() == 0 {
					fmt.Printf("step %d: total heat %.1f, rank 0's cells %.1f\n", step+1, heat[0], u[1:5])
				}
			}
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// step 1: total heat 400.0, rank 0's cells [0.0 0.0 0.0 25.0]
	// step 20: total heat 356.8, rank 0's cells [8.7 17.7 26.9 35.7]
}

// Each rank sends a greeting to every rank and receives one from each.
func ExampleAlltoallValues() {
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		out := make([]string, c.Size())
		for to := range out {
			out[to] = fmt.Sprintf("%d->%d", c.Rank(), to)
		}
		in, err := comm.AlltoallValues(ctx, c, out)
		if err != nil {
			return err
		}
		if c.Rank() == 1 {
			fmt.Println(in)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [0->1 1->1 2->1]
}

// Each of three ranks owns two entries of a shared vector and gathers the
// whole vector in place (MPI_Allgather with MPI_IN_PLACE): its own block
// is already in the vector, and the call fills in the others'.
func ExampleAllGatherTo() {
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		const k = 2
		vec := make([]float64, c.Size()*k)
		mine := vec[c.Rank()*k : (c.Rank()+1)*k]
		for i := range mine {
			mine[i] = float64(10*c.Rank() + i)
		}
		if err := comm.AllGatherTo(ctx, c, vec, mine); err != nil {
			return err
		}
		if c.Rank() == 2 {
			fmt.Println(vec)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [0 1 10 11 20 21]
}

// Three ranks gather parts of different sizes into root's buffer in
// reverse rank order, leaving a gap before each part (MPI_Gatherv).
func ExampleGatherv() {
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		r := c.Rank()
		mine := make([]int32, r+1) // rank r sends r+1 copies of r+1
		for i := range mine {
			mine[i] = int32(r + 1)
		}
		var recv []int32
		counts, displs := []int{1, 2, 3}, []int{8, 5, 1} // gaps at 0, 4 and 7
		if r == 0 {
			recv = make([]int32, 9)
		}
		if err := comm.Gatherv(ctx, c, mine, recv, counts, displs, 0); err != nil {
			return err
		}
		if r == 0 {
			fmt.Println(recv)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [0 3 3 3 0 2 2 0 1]
}

// A reduction the caller defines: each rank marks the cells it owns and
// the highest rank that marked a cell wins. The op keeps the right operand
// unless it is zero: associative, not commutative, so the ranks are
// combined in order.
func ExampleUserOp() {
	lastMark := comm.UserOp("last mark", func(in, inout []int32) {
		for i, v := range inout {
			if v == 0 {
				inout[i] = in[i]
			}
		}
	}, false)
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		cells := make([]int32, 6)
		for i := c.Rank(); i < 6; i += c.Rank() + 1 { // rank r marks every (r+1)-th cell from r
			cells[i] = int32(c.Rank() + 1)
		}
		owner, err := comm.AllReduceUser(ctx, c, cells, lastMark)
		if err == nil && c.Rank() == 0 {
			fmt.Println(owner)
		}
		return err
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [1 2 3 2 1 3]
}

// Each rank measured a residual on its part of a domain; every rank
// learns the largest and the smallest, and which rank has each (ranks 1
// and 3 tie for the smallest: the lower index wins).
func ExampleAllReduceMaxLoc() {
	residuals := []float64{0.25, 0.125, 0.5, 0.125}
	err := local.Run(context.Background(), 4, func(ctx context.Context, c comm.Comm) error {
		mine := []comm.Loc[float64]{{Value: residuals[c.Rank()], Index: c.Rank()}}
		worst, err := comm.AllReduceMaxLoc(ctx, c, mine)
		if err != nil {
			return err
		}
		best, err := comm.AllReduceMinLoc(ctx, c, mine)
		if err == nil && c.Rank() == 0 {
			fmt.Printf("largest %v on rank %d, smallest %v on rank %d\n", worst[0].Value, worst[0].Index, best[0].Value, best[0].Index)
		}
		return err
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: largest 0.5 on rank 2, smallest 0.125 on rank 1
}

// A worker rank's wait for its next task is idle by design: made with
// comm.Idle, it is neither reported nor timed out by the MPI backend's
// stall watch, and a context derived from it stays idle.
func ExampleIdle() {
	ctx, cancel := context.WithCancel(comm.Idle(context.Background()))
	defer cancel()
	fmt.Println(comm.IsIdle(ctx), comm.IsIdle(context.Background()))
	// Output: true false
}

// One of eight in-process ranks fails while the others wait in a barrier:
// Run's error names the cause, then the ranks it broke, once; each rank's
// error is still there in full.
func ExampleRankErrors() {
	err := local.Run(context.Background(), 8, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 3 {
			return errors.New("input file missing")
		}
		return c.Barrier(ctx)
	})
	fmt.Println(err)
	var res comm.RankErrors
	if errors.As(err, &res) {
		fmt.Println(len(res), "ranks failed; the first:", res[0].Rank)
	}
	// Output:
	// rank 3: input file missing
	// ranks R = 0-2, 4-7 (7 ranks): local: Barrier on rank R: comm: communicator broken: rank 3 failed: input file missing
	// 8 ranks failed; the first: 3
}
