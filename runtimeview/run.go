package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/pzgo/pz/internal/launch"
)

// EnvRanks names the environment variable Run reads for the number of
// in-process ranks when its n is 0.
const EnvRanks = "PZ_RANKS"

// ErrLaunch is wrapped by the errors Run returns when the requested ranks
// cannot be had: a rank count given under an MPI launcher, or an invalid
// count.
var ErrLaunch = errors.New("runtimeview: invalid launch")

// Run runs fn once per rank of the job this process belongs to and returns
// when every local rank has returned. It is the main function of a pz
// program that should run both ways:
//
//   - started by an MPI launcher (mpirun, srun): one rank per process on
//     the MPI world, through New (the binary must be built with -tags mpi;
//     without it New refuses to run N copies of rank 0). n must be 0: the
//     launcher chooses the ranks.
//   - otherwise n in-process ranks on the embedded backend through
//     RunLocal; n == 0 reads PZ_RANKS (default 1).
//
// Each rank's RuntimeView is closed when fn returns. The error joins what
// fn and Close returned; with in-process ranks each rank's error is a
// *comm.RankError.
func Run(ctx context.Context, n int, fn func(ctx context.Context, rt *RuntimeView) error, opts ...Option) error {
	cfg := newConfig(opts)
	info := launch.Detect(cfg.getenv)
	if n < 0 {
		return fmt.Errorf("%w: rank count must be at least 1, got %d", ErrLaunch, n)
	}
	if info.Launched() {
		if n > 0 {
			return fmt.Errorf("%w: %d ranks asked for under an MPI launcher (%s); let the launcher choose them (mpirun -n %d ...)", ErrLaunch, n, info.Launcher, n)
		}
		rt, err := New(ctx, opts...)
		if err != nil {
			return err
		}
		return errors.Join(fn(ctx, rt), rt.Close())
	}
	if n == 0 {
		n = 1
		if v := cfg.getenv(EnvRanks); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil || k < 1 {
				return fmt.Errorf("%w: %s=%q: want a positive number of ranks", ErrLaunch, EnvRanks, v)
			}
			n = k
		}
	}
	return RunLocal(ctx, n, fn, opts...)
}
