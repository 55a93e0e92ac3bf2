// Command commbench compares pz's collectives with C MPI on this machine and
// prints one JSON object per line (see package commbench).
//
//	go run ./comm/commbench/cmd/commbench -n 4                       # embedded backend, 4 in-process ranks
//	go run -tags mpi ./comm/commbench/cmd/commbench -backend mpi -n 2 # MPI backend; launches mpirun itself
//
// With -backend mpi it runs the C peer, then itself under mpirun -n N with
// -worker, and merges the results. Flags -check=false and -procs=false turn
// off the MPI backend's agreement step and its GOMAXPROCS sizing.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/commbench"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/launch"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "commbench:", err)
		os.Exit(1)
	}
}

type options struct {
	backend, peer, ops, sizes string
	peerThread                string
	n                         int
	scale                     float64
	check, procs, worker      bool
}

func run() error {
	var o options
	flag.StringVar(&o.backend, "backend", "local", "local (in-process ranks) or mpi (needs -tags mpi)")
	flag.IntVar(&o.n, "n", 2, "number of ranks")
	flag.StringVar(&o.peer, "peer", defaultPeer(), "folder of the C peer collbench.c; empty to skip it")
	flag.StringVar(&o.peerThread, "peer-thread", "single", "MPI thread level of the C peer: single or multiple")
	flag.StringVar(&o.ops, "ops", "allreduce,allgather,bcast", "collectives")
	flag.StringVar(&o.sizes, "sizes", "8,1024,65536,1048576,16777216", "message sizes in bytes")
	flag.Float64Var(&o.scale, "scale", 1, "iteration count multiplier")
	flag.BoolVar(&o.check, "check", true, "MPI backend: run the cross-rank agreement step")
	flag.BoolVar(&o.procs, "procs", true, "MPI backend: size GOMAXPROCS to the rank's share of the node")
	flag.BoolVar(&o.worker, "worker", false, "internal: measure as one MPI rank and print rank 0's results")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg := commbench.Config{Backend: o.backend, Scale: o.scale, Ops: strings.Split(o.ops, ",")}
	for _, s := range strings.Split(o.sizes, ",") {
		v, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("-sizes: %w", err)
		}
		cfg.Sizes = append(cfg.Sizes, v)
	}
	if o.worker || (o.backend == "mpi" && launch.Detect(os.Getenv).Launched()) {
		return worker(cfg, o)
	}
	var rs []commbench.Result
	var err error
	switch o.backend {
	case "local":
		err = local.Run(ctx, o.n, func(ctx context.Context, c comm.Comm) error {
			// Background inside: the blocking fast path, as a program
			// without deadlines would run.
			r, err := commbench.Measure(context.WithoutCancel(ctx), c, cfg)
			if c.Rank() == 0 {
				rs = r
			}
			return err
		})
	case "mpi":
		rs, err = spawn(ctx, o)
	default:
		return fmt.Errorf("unknown -backend %q (local or mpi)", o.backend)
	}
	if err != nil {
		return err
	}
	if o.peer != "" {
		peer, err := commbench.RunPeer(ctx, o.peer, o.n, o.scale, o.peerThread)
		if err != nil {
			fmt.Fprintln(os.Stderr, "commbench: peer skipped:", err)
		} else {
			commbench.Attach(rs, peer)
		}
	}
	return commbench.WriteJSON(os.Stdout, rs)
}

// worker measures as one rank of an MPI job; rank 0 prints JSON lines.
func worker(cfg commbench.Config, o options) error {
	ctx := context.Background() // blocking MPI calls, as in C
	w, err := mpi.Init(ctx, mpi.WithCheck(o.check), mpi.WithGOMAXPROCS(o.procs))
	if err != nil {
		return err
	}
	defer w.Finalize()
	if o.check {
		cfg.Backend = "mpi"
	} else {
		cfg.Backend = "mpi-nocheck"
	}
	if !o.procs {
		cfg.Backend += "-noprocs"
	}
	rs, err := commbench.Measure(ctx, w, cfg)
	if err != nil {
		return err
	}
	if w.Rank() == 0 {
		fmt.Fprintf(os.Stderr, "# rank 0: %v\n", w.Procs())
		return commbench.WriteJSON(os.Stdout, rs)
	}
	return nil
}

// spawn runs this program under mpirun with -worker and reads rank 0's
// results.
func spawn(ctx context.Context, o options) ([]commbench.Result, error) {
	if !mpi.Available() {
		return nil, mpi.ErrNotBuilt
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := append(commbench.MpirunArgs(o.n), self, "-worker", "-backend=mpi",
		"-ops="+o.ops, "-sizes="+o.sizes, "-scale="+strconv.FormatFloat(o.scale, 'g', -1, 64),
		"-check="+strconv.FormatBool(o.check), "-procs="+strconv.FormatBool(o.procs))
	cmd := exec.CommandContext(ctx, "mpirun", args...)
	cmd.Env = append(os.Environ(), commbench.PeerEnv()...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("mpirun %s: %w", strings.Join(args, " "), err)
	}
	var rs []commbench.Result
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r commbench.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("reading the worker's line %q: %w", sc.Text(), err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// defaultPeer is ../shared/peers/mpi relative to the module root (the
// folder holding go.mod, searched upward from the working directory).
func defaultPeer() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "peers", "mpi")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
