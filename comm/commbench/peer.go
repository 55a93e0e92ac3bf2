package commbench

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pzgo/pz/internal/launch"
)

// ErrNoPeer is wrapped by RunPeer's error when the library's mpicc or
// launcher is missing.
var ErrNoPeer = errors.New("commbench: the C MPI peer cannot run")

// PeerKey identifies one peer measurement.
type PeerKey struct {
	Op    string
	Bytes int
}

// PeerEnv is the Open MPI configuration used for the peer and for pz's MPI
// backend alike: shared memory through ob1/vader without single-copy (as
// ../shared/peers/mpi/run.sh sets it) and op/avx excluded (pz's MPI backend
// excludes it because it saturates 8- and 16-bit integer sums). Variables
// already set in the environment win.
func PeerEnv() []string {
	defaults := [][2]string{
		{"OMPI_MCA_pml", "ob1"},
		{"OMPI_MCA_btl", "self,vader"},
		{"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
		{"OMPI_MCA_op", "^avx"},
	}
	var env []string
	for _, d := range defaults {
		if _, ok := os.LookupEnv(d[0]); !ok {
			env = append(env, d[0]+"="+d[1])
		}
	}
	return env
}

// RunPeer compiles dir/collbench.c and pz's own collbench_more.c (user
// reduction, Gatherv, Alltoallv, the ring halo exchange one-shot and
// persistent) with the library's mpicc into a temporary folder, runs them
// with its launcher on n ranks and the given iteration scale, and returns
// their medians in microseconds: the peer of a pz built against MPICH is
// C on MPICH. thread is collbench's MPI thread level: "single" (its
// default) or "multiple" (what pz's MPI backend asks for; Open MPI 4.1's
// small-message latency is higher there).
func RunPeer(ctx context.Context, lau launch.Launcher, dir string, n int, scale float64, thread string) (map[PeerKey]float64, error) {
	mpicc, err := lau.Cc()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoPeer, err)
	}
	if _, err := lau.Run(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoPeer, err)
	}
	src := filepath.Join(dir, "collbench.c")
	if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("commbench: C peer source: %w (set the peer folder, e.g. -peer ../shared/peers/mpi)", err)
	}
	tmp, err := os.MkdirTemp("", "pz-collbench-")
	if err != nil {
		return nil, fmt.Errorf("commbench: %w", err)
	}
	defer os.RemoveAll(tmp)
	more := filepath.Join(tmp, "collbench_more.c")
	if err := os.WriteFile(more, collbenchMore, 0o644); err != nil {
		return nil, fmt.Errorf("commbench: %w", err)
	}
	if thread == "" {
		thread = "single"
	}
	res := map[PeerKey]float64{}
	for _, source := range []string{src, more} {
		bin := strings.TrimSuffix(filepath.Join(tmp, filepath.Base(source)), ".c")
		if out, err := exec.CommandContext(ctx, mpicc, "-O2", "-o", bin, source).CombinedOutput(); err != nil {
			if ctx.Err() != nil {
				// Killed by ctx: say why, not "signal: killed".
				return nil, fmt.Errorf("commbench: the C peer was stopped while mpicc compiled it: %w", context.Cause(ctx))
			}
			return nil, fmt.Errorf("commbench: mpicc %s: %w\n%s", source, err, out)
		}
		// When ctx ends, the launcher is sent SIGTERM and cleans up
		// after the job (launch.Launcher.Command).
		cmd, err := lau.Command(ctx, n, bin, strconv.FormatFloat(scale, 'g', -1, 64), thread)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoPeer, err)
		}
		cmd.Env = append(os.Environ(), PeerEnv()...)
		out, err := cmd.Output()
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("commbench: the C peer was stopped: %w", context.Cause(ctx))
			}
			return nil, fmt.Errorf("commbench: mpirun %s: %w", strings.Join(cmd.Args[1:], " "), err)
		}
		got, err := ParsePeer(string(out))
		if err != nil {
			return nil, err
		}
		maps.Copy(res, got)
	}
	return res, nil
}

// collbenchMore is the peer of the collectives collbench.c does not
// measure (cpeer/collbench_more.c): a user-defined reduction, Gatherv,
// Alltoallv and a ring halo exchange with one-shot and persistent
// requests. It is part of pz, compiled beside the shared peer.
//
//go:embed cpeer/collbench_more.c
var collbenchMore []byte

// ParsePeer reads collbench's lines "collective size ranks median_us ...",
// skipping comments.
func ParsePeer(out string) (map[PeerKey]float64, error) {
	res := map[PeerKey]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return nil, fmt.Errorf("commbench: unexpected peer line %q", line)
		}
		bytes, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("commbench: peer line %q: %w", line, err)
		}
		med, err := strconv.ParseFloat(f[3], 64)
		if err != nil {
			return nil, fmt.Errorf("commbench: peer line %q: %w", line, err)
		}
		res[PeerKey{f[0], bytes}] = med
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("commbench: the peer printed no results")
	}
	return res, nil
}

// Combine merges rounds of Measure (the same ops and sizes each time) and
// the peer's figures beside each round (peers[i] for rounds[i], nil where
// the peer did not run): a case's MedianUS and PeerMedianUS are the
// medians over the rounds, Ratio their quotient and, with more than one
// round, PairedRatio the median of the rounds' own ratios. On a machine
// whose speed changes between runs a peer run beside each round sees the
// same state of it, and PairedRatio is the steadier figure. A case missing
// from a later round counts with the rounds that have it.
func Combine(rounds [][]Result, peers []map[PeerKey]float64) []Result {
	if len(rounds) == 0 {
		return nil
	}
	out := slices.Clone(rounds[0])
	for i := range out {
		key := PeerKey{out[i].Op, out[i].Bytes}
		var pz, peer, paired, trips []float64
		for k, rs := range rounds {
			j := slices.IndexFunc(rs, func(r Result) bool { return r.Op == key.Op && r.Bytes == key.Bytes })
			if j < 0 {
				continue
			}
			pz = append(pz, rs[j].MedianUS)
			if rs[j].C2CNs > 0 {
				trips = append(trips, rs[j].C2CNs)
			}
			if k < len(peers) && peers[k][key] > 0 {
				p := peers[k][key]
				peer = append(peer, p)
				paired = append(paired, rs[j].MedianUS/p)
			}
		}
		out[i].MedianUS = round3(median(pz))
		out[i].C2CNs = 0
		if len(trips) > 0 {
			out[i].C2CNs = math.Round(median(trips))
		}
		out[i].PeerMedianUS, out[i].Ratio, out[i].PairedRatio = 0, 0, 0
		if len(peer) > 0 {
			out[i].PeerMedianUS = round3(median(peer))
			out[i].Ratio = round3(out[i].MedianUS / out[i].PeerMedianUS)
		}
		if len(rounds) > 1 {
			out[i].Rounds = len(pz)
			if len(paired) > 0 {
				out[i].PairedRatio = round3(median(paired))
			}
		}
	}
	return out
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
