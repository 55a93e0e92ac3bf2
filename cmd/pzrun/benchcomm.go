package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pzgo/pz/comm/commbench"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/c2c"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/internal/peerdir"
	"github.com/pzgo/pz/runtimeview"
)

type benchCommFlags struct {
	backend, ops, sizes, peer, peerThread string
	ranks, rounds                         int
	scale                                 float64
	check                                 bool
	blocking                              bool // -blocking: the MPI collectives' form, when blockingGiven
	blockingGiven                         bool // -blocking was on the command line
	noPeerDir                             bool // ../shared/peers/mpi was not found: -peer defaults to none
	peerGiven                             bool // -peer was on the command line
}

func benchCommApp() app {
	return app{
		name:    "bench comm",
		summary: fmt.Sprintf("latency of %d operations (-ops: collectives, halo and sendrecv exchanges; default allreduce, allgather, bcast) at 8 B..16 MiB vs C MPI in the same invocation; JSON lines", len(commbench.Ops())),
		setup: func(fs *flag.FlagSet, e *env) func(context.Context, *runtimeview.RuntimeView) error {
			var f benchCommFlags
			fs.StringVar(&f.backend, "backend", "local", "`BACKEND`: local, this job's ranks (pzrun -n N); mpi, start mpirun -n RANKS of this binary (built with -tags mpi)")
			fs.IntVar(&f.ranks, "ranks", 2, "ranks for -backend mpi")
			fs.StringVar(&f.ops, "ops", "allreduce,allgather,bcast", "operations, comma-separated: "+strings.Join(commbench.Ops(), ", "))
			fs.StringVar(&f.sizes, "sizes", "8,1024,65536,1048576,16777216", "message sizes in bytes (multiples of 8)")
			fs.Float64Var(&f.scale, "scale", 1, "iteration count multiplier")
			dir := peerdir.Find("mpi")
			f.noPeerDir = dir == ""
			fs.StringVar(&f.peer, "peer", dir, "folder of the C peer collbench.c (default ../shared/peers/mpi beside the checkout); empty skips the peer")
			fs.StringVar(&f.peerThread, "peer-thread", "single", "MPI thread level of the C peer: single or multiple")
			fs.IntVar(&f.rounds, "rounds", 1, "measure `N` times, the C peer beside each round (before pz's in odd rounds); prints the medians over the rounds and paired_ratio, the median of the rounds' own ratios")
			fs.BoolVar(&f.check, "check", true, "MPI backend: run the cross-rank agreement step before each collective")
			fs.BoolVar(&f.blocking, "blocking", false, "MPI backend: every rank's collectives call MPI's blocking functions (MPI_Allreduce; comm/mpi.WithBlocking(true)); -blocking=false, the non-blocking ones waited for (MPI_Iallreduce, MPI_Wait); not given, what a program gets: non-blocking unless PZ_COMM_BLOCKING=1. Each line's collective_form says which ran")
			asJSON := fs.Bool("json", true, "print JSON lines: always so (accepted as every app's -json is)")
			underMPI := launch.Detect(e.getenv).Launched()
			given := func(name string) (on bool) {
				fs.Visit(func(fl *flag.Flag) { on = on || fl.Name == name })
				return on
			}
			// Under an MPI launcher, -blocking is the form of the World
			// that pzrun starts (every rank has the same flags); the
			// spawned job of -backend mpi gets it so.
			e.mpiOptions = func() []mpi.Option {
				if !given("blocking") {
					return nil
				}
				return []mpi.Option{mpi.WithBlocking(f.blocking)}
			}
			// Before any rank starts (env.validate).
			e.validate = func(ranks int, _ io.Writer) error {
				if !*asJSON {
					return fmt.Errorf("%w: -json=false: bench comm prints JSON lines only", errUsage)
				}
				if _, err := f.config(); err != nil {
					return err
				}
				if underMPI {
					return nil // -backend does not apply: this job's ranks measure
				}
				switch f.backend {
				case "local":
					if given("blocking") {
						return fmt.Errorf("%w: -blocking chooses the MPI backend's form of the collectives (blocking or non-blocking MPI functions); the in-process ranks of -backend local have one form: drop -blocking, or measure -backend mpi", errUsage)
					}
				case "mpi":
					if ranks > 1 {
						return fmt.Errorf("%w: -backend mpi starts mpirun itself: use --ranks, not pzrun -n", errUsage)
					}
				default:
					return fmt.Errorf("%w: unknown -backend %q (local or mpi)", errUsage, f.backend)
				}
				return nil
			}
			return func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				f := f // this rank's: the ranks run this body at once
				f.peerGiven, f.blockingGiven = given("peer"), given("blocking")
				if err := e.validate(rt.Size(), io.Discard); err != nil {
					return err
				}
				cfg, err := f.config()
				if err != nil {
					return err
				}
				if underMPI || f.backend == "local" {
					if err := checkBenchMemory(cfg, rt); err != nil {
						return err
					}
				}
				// The collectives run with a context that cannot be
				// canceled, as a program without deadlines runs them (on
				// the MPI backend: the blocking functions with -blocking,
				// otherwise the non-blocking ones waited for in MPI_Wait);
				// a signal stops the run between sizes (Config.Stop), and
				// what was measured is printed.
				cfg.Stop = ctx
				// Progress on rank 0's stderr: a bar on a terminal, a
				// line every 10 s otherwise (mpirun's pipes). The results
				// are printed at the end, with the peer's ratios.
				if rt.Rank() == 0 && (underMPI || f.backend == "local") {
					bar := newBar(e.progress, "bench comm sizes", len(cfg.Ops)*len(cfg.Sizes)*f.rounds)
					defer bar.Done()
					cfg.Progress = func() { bar.Add(1) }
				}
				switch {
				case underMPI:
					if w := rt.MPIWorld(); w != nil {
						w.SetCheck(f.check)
						cfg.CollectiveForm = commbench.FormNonblocking
						if w.Blocking() {
							cfg.CollectiveForm = commbench.FormBlocking
						}
					}
					cfg.Backend = string(rt.Backend())
					rs, err := measureRounds(ctx, e, f, 0, nil, func() ([]commbench.Result, error) {
						return commbench.Measure(context.WithoutCancel(ctx), rt.Comm(), cfg)
					})
					if rt.Rank() != 0 {
						return err
					}
					return errors.Join(err, commbench.WriteJSON(e.stdout, rs))
				case f.backend == "local":
					cfg.Backend = "local"
					peerRanks := 0
					if rt.Rank() == 0 {
						peerRanks = rt.Size()
					}
					// No core-to-core sample: every rank runs
					// measureRounds, and the others would spin in
					// their first collective beside it.
					rs, err := measureRounds(ctx, e, f, peerRanks, nil, func() ([]commbench.Result, error) {
						return commbench.Measure(context.WithoutCancel(ctx), rt.Comm(), cfg)
					})
					if rt.Rank() != 0 {
						return err
					}
					return errors.Join(err, commbench.WriteJSON(e.stdout, rs))
				case f.backend == "mpi":
					// This process waits while mpirun runs each
					// round: it samples the cores before each.
					rs, err := measureRounds(ctx, e, f, f.ranks, c2c.Sample, func() ([]commbench.Result, error) { return spawnMPI(ctx, f) })
					if len(rs) == 0 && err != nil {
						return err
					}
					return errors.Join(err, commbench.WriteJSON(e.stdout, rs))
				default:
					return fmt.Errorf("%w: unknown -backend %q (local or mpi)", errUsage, f.backend) // validate refused it
				}
			}
		},
	}
}

// checkBenchMemory refuses sizes whose buffers would not fit in the
// memory of this rank's host, which the ranks here share: every rank
// receives the largest size from every rank (an AllGather), n² of them
// between in-process ranks (pzrun -n 64 bench comm ran out of memory
// at once with the default 16 MiB).
func checkBenchMemory(cfg commbench.Config, rt *runtimeview.RuntimeView) error {
	here, _ := tiled.RanksHere(rt)
	need := float64(here) * commbench.RankBytes(cfg, rt.Size())
	avail := float64(rt.MyResourceSet().RAM().AvailableBytes())
	if avail == 0 || need <= avail {
		return nil
	}
	return fmt.Errorf("%w: -sizes up to %s on %d ranks need about %s of buffers (%d rank(s) here, each receiving every rank's largest message), more than the %s available; use smaller -sizes or fewer ranks",
		errUsage, tiled.FormatBytes(float64(slices.Max(cfg.Sizes))), rt.Size(), tiled.FormatBytes(need), here, tiled.FormatBytes(avail))
}

func (f *benchCommFlags) config() (commbench.Config, error) {
	cfg := commbench.Config{Scale: f.scale, Ops: strings.Split(f.ops, ",")}
	for _, op := range cfg.Ops {
		if !slices.Contains(commbench.Ops(), op) {
			return cfg, fmt.Errorf("%w: unknown collective %q (%s)", errUsage, op, strings.Join(commbench.Ops(), ", "))
		}
	}
	for _, s := range strings.Split(f.sizes, ",") {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 || v%8 != 0 {
			return cfg, fmt.Errorf("%w: -sizes: %q is not a positive multiple of 8", errUsage, s)
		}
		cfg.Sizes = append(cfg.Sizes, v)
	}
	if f.rounds < 1 {
		return cfg, fmt.Errorf("%w: -rounds must be at least 1", errUsage)
	}
	if f.ranks < 1 {
		return cfg, fmt.Errorf("%w: -ranks must be at least 1", errUsage)
	}
	if !(f.scale > 0) || math.IsInf(f.scale, 0) {
		return cfg, fmt.Errorf("%w: -scale %g: want a positive iteration multiplier", errUsage, f.scale)
	}
	if f.peerThread != "single" && f.peerThread != "multiple" {
		return cfg, fmt.Errorf("%w: -peer-thread %q: single or multiple", errUsage, f.peerThread)
	}
	return cfg, nil
}

// measureRounds runs measure f.rounds times and, with peerRanks > 0 (rank
// 0 of a measurement that has a peer), the C peer on that many ranks
// beside each round: after pz's round in even rounds, before it in odd
// ones. It combines them (commbench.Combine). A failed round ends the run
// with what the rounds before it measured, or with the first round's own
// results when it is the first (a run stopped by a signal prints those).
// With sample, the machine's core-to-core round trip is sampled before
// each round and recorded in its results (c2c_ns; a failed sample
// leaves it out).
func measureRounds(ctx context.Context, e *env, f benchCommFlags, peerRanks int, sample func() (time.Duration, error), measure func() ([]commbench.Result, error)) ([]commbench.Result, error) {
	var (
		rounds [][]commbench.Result
		peers  []map[commbench.PeerKey]float64
		noPeer = peerRanks <= 0
	)
	runPeer := func() map[commbench.PeerKey]float64 {
		if noPeer {
			return nil
		}
		peer, ok := peerFigures(ctx, e, f, peerRanks)
		noPeer = !ok // said once on stderr; not tried again
		return peer
	}
	for i := range f.rounds {
		var peer map[commbench.PeerKey]float64
		if i%2 == 1 {
			peer = runPeer()
		}
		var trip time.Duration
		if sample != nil {
			trip, _ = sample() // 0 on error: not recorded
		}
		rs, err := measure()
		if err != nil {
			if len(rounds) == 0 {
				return rs, err
			}
			return commbench.Combine(rounds, peers), err
		}
		for j := range rs {
			rs[j].C2CNs = float64(trip.Nanoseconds())
		}
		if i%2 == 0 {
			peer = runPeer()
		}
		rounds = append(rounds, rs)
		peers = append(peers, peer)
	}
	return commbench.Combine(rounds, peers), nil
}

// peerFigures runs the C peer on ranks ranks and returns its medians. A
// peer that cannot run is reported on stderr, not fatal (ok false).
func peerFigures(ctx context.Context, e *env, f benchCommFlags, ranks int) (peer map[commbench.PeerKey]float64, ok bool) {
	if f.peer == "" {
		if f.noPeerDir && !f.peerGiven { // -peer '' skips it without a word
			fmt.Fprintln(e.stderr, "pzrun bench comm: peer skipped: ../shared/peers/mpi (collbench.c) not found beside the checkout (above the working directory, the pzrun binary or the source it was built from); pass -peer DIR")
		}
		return nil, false
	}
	peer, err := commbench.RunPeer(ctx, peerLauncher(), f.peer, ranks, f.scale, f.peerThread)
	if err != nil {
		fmt.Fprintf(e.stderr, "pzrun bench comm: peer skipped: %v\n", err)
		return nil, false
	}
	return peer, true
}

// peerLauncher is the MPI library of the C peer: the one this binary is
// built against (its MPI backend's), Open MPI in a build without MPI.
func peerLauncher() launch.Launcher {
	lib := mpi.Library()
	if lib == "" {
		lib = launch.OpenMPI
	}
	lau, _ := launch.For(lib) // both names are known
	return lau
}

// spawnMPI runs this binary under its MPI library's launcher (mpirun, or
// mpiexec.mpich for a -tags mpi,mpich build) and reads rank 0's JSON lines.
func spawnMPI(ctx context.Context, f benchCommFlags) ([]commbench.Result, error) {
	if !mpi.Available() {
		return nil, fmt.Errorf("%w: -backend mpi: %v", errUsage, mpi.ErrNotBuilt)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := []string{self, "bench", "comm", "-peer=",
		"-ops=" + f.ops, "-sizes=" + f.sizes, "-scale=" + strconv.FormatFloat(f.scale, 'g', -1, 64),
		"-check=" + strconv.FormatBool(f.check)}
	if f.blockingGiven {
		// Not given, the ranks take PZ_COMM_BLOCKING from this
		// environment, as a program would.
		argv = append(argv, "-blocking="+strconv.FormatBool(f.blocking))
	}
	cmd, err := peerLauncher().Command(ctx, f.ranks, argv...)
	if err != nil {
		return nil, err
	}
	args := cmd.Args[1:]
	cmd.Env = append(os.Environ(), commbench.PeerEnv()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// Stopped by a signal (ctx), the ranks print what they measured
	// before they end: that is read too. (Open MPI's mpirun, sent
	// SIGTERM, sends the ranks SIGCONT, SIGTERM a second later, and
	// SIGKILL a second after that: a rank in the middle of a long size
	// at a large -scale may end before it prints.)
	var rs []commbench.Result
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r commbench.Result
		if jerr := json.Unmarshal(sc.Bytes(), &r); jerr != nil {
			if err == nil {
				return nil, fmt.Errorf("reading rank 0's line %q: %w", sc.Text(), jerr)
			}
			break // a line cut short by the job's end
		}
		rs = append(rs, r)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// mpirun was sent SIGTERM (launch.Launcher.Command): its
		// complaints about the ranks' ends are not news.
		return rs, fmt.Errorf("the MPI job was stopped: %w", context.Cause(ctx))
	case err != nil:
		return nil, fmt.Errorf("mpirun %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return rs, nil
}
