package commbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pzgo/pz/comm"
)

// The collectives Measure knows, by the names the C peer prints.
const (
	OpAllReduce = "allreduce"
	// OpAllGather is comm.AllGatherTo, equal blocks as the peer's
	// MPI_Allgather (comm.AllGather, whose lengths may differ, also
	// exchanges the counts).
	OpAllGather = "allgather"
	OpBcast     = "bcast"
	// OpAllReduceUser is AllReduceUser with a sum written in Go (the peer:
	// MPI_Allreduce with an MPI_Op_create'd sum in C).
	OpAllReduceUser = "allreduce_user"
	// OpGatherv is comm.Gatherv to rank 0, the parts in rank order with a
	// gap of one element before each (a padded layout).
	OpGatherv = "gatherv"
	// OpAlltoallv is comm.Alltoallv of size/ranks bytes (whole float64s)
	// to every rank, parts back to back.
	OpAlltoallv = "alltoallv"
	// OpHalo sends size bytes to the next rank of a ring and receives as
	// many from the previous one: comm.Irecv, comm.Isend, comm.WaitAll.
	OpHalo = "halo"
	// OpHaloPersistent is OpHalo with persistent requests made once per
	// size (comm.RecvInit, comm.SendInit): each iteration comm.StartAll
	// and comm.WaitAll.
	OpHaloPersistent = "halo_persistent"
	// OpScan is comm.Scan of float64s, sum.
	OpScan = "scan"
	// OpReduceScatterBlock is comm.ReduceScatterBlock of float64s, sum:
	// size bytes in (at least one element per rank), size/ranks out.
	OpReduceScatterBlock = "reduce_scatter_block"
	// OpAllReduceMaxLoc is comm.AllReduceMaxLoc of size/16 (at least one)
	// comm.Loc[float64] (the peer: MPI_DOUBLE_INT with MPI_MAXLOC).
	OpAllReduceMaxLoc = "allreduce_maxloc"
	// OpSendrecv is comm.Sendrecv of size bytes to the next rank of a ring
	// and from the previous one.
	OpSendrecv = "sendrecv"
	// OpIallreduce is Iallreduce of float64s, sum, then Wait.
	OpIallreduce = "iallreduce"
)

// The forms of an MPI backend's collectives (Config.CollectiveForm).
const (
	// FormBlocking: MPI's blocking functions (MPI_Allreduce).
	FormBlocking = "blocking"
	// FormNonblocking: the non-blocking ones waited for (MPI_Iallreduce
	// and MPI_Wait), the default.
	FormNonblocking = "nonblocking"
)

// Ops returns the names of every op Measure runs.
func Ops() []string {
	return []string{OpAllReduce, OpAllGather, OpBcast, OpAllReduceUser, OpGatherv, OpAlltoallv, OpHalo, OpHaloPersistent,
		OpScan, OpReduceScatterBlock, OpAllReduceMaxLoc, OpSendrecv, OpIallreduce}
}

// Config selects what Measure runs. Zero fields take the defaults.
type Config struct {
	// Ops are the collectives (default: allreduce, allgather, bcast).
	Ops []string
	// Sizes are the per-rank message sizes in bytes, multiples of 8
	// (default: 8, 1 KiB, 64 KiB, 1 MiB, 16 MiB).
	Sizes []int
	// Scale multiplies the iteration counts (default 1), as collbench's
	// iter_scale does.
	Scale float64
	// Backend names the communicator in the results (e.g. "local", "mpi").
	Backend string
	// CollectiveForm names, in the results, the MPI functions the
	// collectives took: FormBlocking or FormNonblocking (comm/mpi's
	// WithBlocking); empty for a backend that has one form.
	CollectiveForm string
	// Stop, when not nil, ends the measurement early once it is done (a
	// signal): the ranks agree before each operation and size whether
	// any saw it done, so they all stop at the same point, and Measure
	// returns the results so far with an error wrapping its cause. The
	// collectives themselves run with Measure's ctx.
	Stop context.Context
	// Progress, when not nil, is called on every rank after each
	// operation and size is measured (len(Ops)*len(Sizes) calls in all),
	// for a progress bar on long runs.
	Progress func()
}

func (c Config) withDefaults() Config {
	if len(c.Ops) == 0 {
		c.Ops = []string{OpAllReduce, OpAllGather, OpBcast}
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int{8, 1 << 10, 64 << 10, 1 << 20, 16 << 20}
	}
	if c.Scale <= 0 {
		c.Scale = 1
	}
	return c
}

// Iters is the number of timed iterations for a message of the given size:
// collbench.c's schedule (2000 up to 1 KiB, 500 up to 64 KiB, 100 up to
// 1 MiB, 20 above) times scale, at least 5.
func Iters(bytes int, scale float64) int {
	it := 20
	switch {
	case bytes <= 1<<10:
		it = 2000
	case bytes <= 64<<10:
		it = 500
	case bytes <= 1<<20:
		it = 100
	}
	return max(int(float64(it)*scale), 5)
}

// Result is one line of output.
type Result struct {
	Op      string `json:"op"`
	Bytes   int    `json:"bytes"`
	Ranks   int    `json:"ranks"`
	Backend string `json:"backend"`
	// CollectiveForm is Config.CollectiveForm: "blocking" or
	// "nonblocking" on the MPI backend, absent otherwise.
	CollectiveForm string  `json:"collective_form,omitempty"`
	MedianUS       float64 `json:"median_us"`
	PeerMedianUS   float64 `json:"peer_median_us,omitempty"`
	Ratio          float64 `json:"ratio,omitempty"`
	// With several rounds (Combine): how many, and the median of the
	// rounds' own ratios, each of pz's round against the peer's run
	// beside it.
	Rounds      int     `json:"rounds,omitempty"`
	PairedRatio float64 `json:"paired_ratio,omitempty"`
	// C2CNs is the machine's core-to-core round trip of a cache line in
	// ns, sampled before the run that measured this (internal/c2c), the
	// median over the rounds with several; 0 (absent) when not sampled.
	// A small message between ranks on one host is a few such crossings.
	C2CNs float64 `json:"c2c_ns,omitempty"`
}

// RankBytes is the memory Measure allocates on each of n ranks for cfg:
// a send buffer of the largest size and a receive buffer of n of them
// (an AllGather's result).
func RankBytes(cfg Config, n int) float64 {
	cfg = cfg.withDefaults()
	largest := float64(slices.Max(cfg.Sizes))
	return largest + (largest+8)*float64(n)
}

// Measure runs the benchmark on c. Every rank of c must call it with the
// same cfg; rank 0 gets the results, the others nil. It fails on the first
// error of a collective (wrapped with the op and size).
func Measure(ctx context.Context, c comm.Comm, cfg Config) ([]Result, error) {
	cfg = cfg.withDefaults()
	for _, op := range cfg.Ops {
		if !slices.Contains(Ops(), op) {
			return nil, fmt.Errorf("commbench: unknown op %q (want one of %s)", op, strings.Join(Ops(), ", "))
		}
	}
	maxBytes := slices.Max(cfg.Sizes)
	n := c.Size()
	send := make([]float64, maxBytes/8)
	for i := range send {
		send[i] = float64(c.Rank() + 1)
	}
	recv := make([]float64, max((maxBytes/8+1)*n, 1))
	var out []Result
	for _, op := range cfg.Ops {
		for _, bytes := range cfg.Sizes {
			if bytes%8 != 0 || bytes <= 0 {
				return nil, fmt.Errorf("commbench: size %d is not a positive multiple of 8", bytes)
			}
			if cfg.Stop != nil {
				var flag int32
				if cfg.Stop.Err() != nil {
					flag = 1
				}
				seen, err := comm.AllReduce(ctx, c, []int32{flag}, comm.Max)
				if err != nil {
					return out, fmt.Errorf("commbench: agreeing to go on: %w", err)
				}
				if seen[0] != 0 {
					cause := context.Cause(cfg.Stop)
					if cause == nil {
						cause = context.Canceled // another rank saw it first
					}
					return out, fmt.Errorf("commbench: stopped before %s %d B: %w", op, bytes, cause)
				}
			}
			count := bytes / 8
			run, done, err := Step(c, op, send[:count], recv[:count*n])
			if err != nil {
				return nil, fmt.Errorf("commbench: %s %d B: %w", op, bytes, err)
			}
			iters := Iters(bytes, cfg.Scale)
			warm := max(iters/10, 3)
			for range warm {
				if err := run(ctx); err != nil {
					return nil, fmt.Errorf("commbench: %s %d B warm-up: %w", op, bytes, err)
				}
			}
			times := make([]float64, iters)
			// Each iteration reads the monotonic clock twice, as the C
			// peer's two MPI_Wtime calls do: time.Since(base) reads only
			// that clock, where time.Now reads the wall clock too (~25 ns
			// more on a VM, a tenth of an 8-byte collective).
			base := time.Now()
			for i := range times {
				if err := c.Barrier(ctx); err != nil {
					return nil, fmt.Errorf("commbench: barrier: %w", err)
				}
				t0 := time.Since(base)
				if err := run(ctx); err != nil {
					return nil, fmt.Errorf("commbench: %s %d B: %w", op, bytes, err)
				}
				times[i] = float64((time.Since(base) - t0).Nanoseconds()) / 1e3
			}
			if err := done(); err != nil {
				return nil, fmt.Errorf("commbench: %s %d B: %w", op, bytes, err)
			}
			// The slowest rank finishes the collective.
			worst, err := comm.Reduce(ctx, c, times, comm.Max, 0)
			if err != nil {
				return nil, fmt.Errorf("commbench: collecting times: %w", err)
			}
			if c.Rank() == 0 {
				out = append(out, Result{Op: op, Bytes: bytes, Ranks: n, Backend: cfg.Backend, CollectiveForm: cfg.CollectiveForm, MedianUS: math.Round(median(worst)*1000) / 1000})
			}
			if cfg.Progress != nil {
				cfg.Progress()
			}
		}
	}
	return out, nil
}

// Step returns one iteration of op (one of Ops) on rank c, sending send
// and receiving into recv (at least Size times send's length), and what
// to call once the iterations are done (freeing what the op set up, such
// as persistent requests). Measure times it; Go benchmarks of a backend
// run it to measure the same operation.
func Step(c comm.Comm, op string, send, recv []float64) (run func(context.Context) error, done func() error, err error) {
	done = func() error { return nil }
	run, err = stepRun(c, op, send, recv, &done)
	return run, done, err
}

func stepRun(c comm.Comm, op string, send, recv []float64, done *func() error) (func(context.Context) error, error) {
	sb, rb := comm.BufOf(send), comm.BufOf(recv)
	switch op {
	case OpAllReduce:
		rb = comm.BufOf(recv[:len(send)])
		return func(ctx context.Context) error { return c.AllReduce(ctx, sb, rb, comm.Sum) }, nil
	case OpAllGather:
		dst := recv[:len(send)*c.Size()]
		return func(ctx context.Context) error { return comm.AllGatherTo(ctx, c, dst, send) }, nil
	case OpAllReduceUser:
		rb = comm.BufOf(recv[:len(send)])
		sum := comm.UserOp("sum", func(in, inout []float64) {
			for i, a := range in {
				inout[i] += a
			}
		}, true)
		return func(ctx context.Context) error { return c.AllReduceUser(ctx, sb, rb, sum) }, nil
	case OpGatherv:
		n, count := c.Size(), len(send)
		counts, displs := make([]int, n), make([]int, n)
		at := 0
		for r := range n {
			at++
			counts[r], displs[r] = count, at
			at += count
		}
		into := recv[:at]
		return func(ctx context.Context) error { return comm.Gatherv(ctx, c, send, into, counts, displs, 0) }, nil
	case OpAlltoallv:
		n := c.Size()
		per := len(send) / n
		counts, displs := make([]int, n), make([]int, n)
		for r := range n {
			counts[r], displs[r] = per, r*per
		}
		return func(ctx context.Context) error {
			return comm.Alltoallv(ctx, c, send, counts, displs, recv, counts, displs)
		}, nil
	case OpHalo, OpHaloPersistent:
		n, me := c.Size(), c.Rank()
		right, left := (me+1)%n, (me+n-1)%n
		into := recv[:len(send)]
		if op == OpHalo {
			return func(ctx context.Context) error {
				r, err := comm.Irecv(c, into, left, 7)
				if err != nil {
					return err
				}
				s, err := comm.Isend(c, send, right, 7)
				if err != nil {
					return err
				}
				_, err = comm.WaitAll(ctx, []comm.Request{r, s})
				return err
			}, nil
		}
		r, err := comm.RecvInit(c, into, left, 7)
		if err != nil {
			return nil, err
		}
		s, err := comm.SendInit(c, send, right, 7)
		if err != nil {
			return nil, errors.Join(err, r.Free())
		}
		*done = func() error { return errors.Join(r.Free(), s.Free()) }
		reqs := make([]comm.Request, 2)
		return func(ctx context.Context) error {
			if err := comm.StartAll(r, s); err != nil {
				return err
			}
			reqs[0], reqs[1] = r, s
			return comm.WaitAllInto(ctx, reqs, nil)
		}, nil
	case OpScan:
		return func(ctx context.Context) error {
			_, err := comm.Scan(ctx, c, send, comm.Sum)
			return err
		}, nil
	case OpReduceScatterBlock:
		n := c.Size()
		in := make([]float64, max(len(send)/n, 1)*n)
		copy(in, send)
		return func(ctx context.Context) error {
			_, err := comm.ReduceScatterBlock(ctx, c, in, comm.Sum)
			return err
		}, nil
	case OpAllReduceMaxLoc:
		locs := make([]comm.Loc[float64], max(len(send)/2, 1))
		for i := range locs {
			locs[i] = comm.Loc[float64]{Value: float64((c.Rank()*7 + i) % 5), Index: c.Rank()}
		}
		return func(ctx context.Context) error {
			_, err := comm.AllReduceMaxLoc(ctx, c, locs)
			return err
		}, nil
	case OpSendrecv:
		n, me := c.Size(), c.Rank()
		into := recv[:len(send)]
		return func(ctx context.Context) error {
			_, err := comm.Sendrecv(ctx, c, send, (me+1)%n, 5, into, (me+n-1)%n, 5)
			return err
		}, nil
	case OpIallreduce:
		rb = comm.BufOf(recv[:len(send)])
		return func(ctx context.Context) error {
			r, err := c.Iallreduce(sb, rb, comm.Sum)
			if err != nil {
				return err
			}
			_, err = r.Wait(ctx)
			return err
		}, nil
	default:
		return func(ctx context.Context) error { return c.Bcast(ctx, sb, 0) }, nil
	}
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	k := len(s)
	if k == 0 {
		return 0
	}
	if k%2 == 1 {
		return s[k/2]
	}
	return (s[k/2-1] + s[k/2]) / 2
}

// WriteJSON writes one JSON object per result and line.
func WriteJSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("commbench: %w", err)
		}
	}
	return nil
}
