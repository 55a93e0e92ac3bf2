package commbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pzgo/pz/internal/launch"
)

// ErrNoPeer is returned by RunPeer when mpicc or mpirun is missing.
var ErrNoPeer = errors.New("commbench: the C MPI peer cannot run: mpicc or mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)")

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

// RunPeer compiles dir/collbench.c with mpicc into a temporary folder, runs
// it under mpirun with n ranks and the given iteration scale, and returns
// its medians in microseconds. thread is collbench's MPI thread level:
// "single" (its default) or "multiple" (what pz's MPI backend asks for; Open
// MPI 4.1's small-message latency is higher there).
func RunPeer(ctx context.Context, dir string, n int, scale float64, thread string) (map[PeerKey]float64, error) {
	mpicc, err1 := exec.LookPath("mpicc")
	mpirun, err2 := exec.LookPath("mpirun")
	if err1 != nil || err2 != nil {
		return nil, ErrNoPeer
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
	bin := filepath.Join(tmp, "collbench")
	if out, err := exec.CommandContext(ctx, mpicc, "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("commbench: mpicc %s: %w\n%s", src, err, out)
	}
	if thread == "" {
		thread = "single"
	}
	args := append(launch.MpirunArgs(n), bin, strconv.FormatFloat(scale, 'g', -1, 64), thread)
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(os.Environ(), PeerEnv()...)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("commbench: mpirun %s: %w", strings.Join(args, " "), err)
	}
	return ParsePeer(string(out))
}

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

// Attach fills PeerMedianUS and Ratio (pz / peer) of each result the peer
// measured.
func Attach(rs []Result, peer map[PeerKey]float64) {
	for i := range rs {
		p, ok := peer[PeerKey{rs[i].Op, rs[i].Bytes}]
		if !ok || p <= 0 {
			continue
		}
		rs[i].PeerMedianUS = p
		rs[i].Ratio = math.Round(rs[i].MedianUS/p*1000) / 1000
	}
}
