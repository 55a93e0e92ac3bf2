package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/procs"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// EnvDistTimeout names the environment variable that sets how long a
// rank's distributed scheduler waits in WaitAll with nothing completing
// before it gives up (dist.WithStallTimeout): a Go duration, 0 for never.
const EnvDistTimeout = "PZ_DIST_TIMEOUT"

// DefaultDistTimeout is the stall timeout without PZ_DIST_TIMEOUT: far
// longer than any tile task, short enough that a job with an unreachable
// rank ends.
const DefaultDistTimeout = 10 * time.Minute

// Scheduler returns this rank's part of the task-graph scheduler that spans
// every rank (package scheduler/dist): a node-local scheduler whose CPU
// workers are this rank's share of its node's cores, joined to the other
// ranks' through a private duplicate of the communicator. The first call
// makes it and is collective: every rank calls it at the same point. Later
// calls without options return the same scheduler, so that several
// libraries share it (each in scheduling contexts of its own, say); a later
// call with options returns it too when they agree with the first
// call's (the same options, some of them, in any order: each setting a
// later option makes is the first call's), so that helpers that each ask
// for the program's options share one scheduler; an option that
// disagrees (another policy or worker count, an option the first call
// did not give) gets an error wrapping ErrOption that names that option
// and the call that made the scheduler (its file and line), rather than
// be dropped: give every option to the first call. Options are compared
// by what they set (scheduler.ConflictingOption, whose error the error
// wraps too): an option that holds a function (WithGetenv,
// WithPolicyFunc, WithWatchdog with a report) cannot be compared, and
// on a later call it is an error; pointers (WithLogger, WithCUDADriver)
// agree when they are the same. Close
// closes it (through the finalizer stack), after the callbacks stacked
// later: a library whose finalizer uses the scheduler stacks it after its
// first call to Scheduler.
//
// Devices: the rank's devices (WithSimDevices, PZ_NSIM) are memory nodes
// of its scheduler too, each with a worker, shared with the resource set's
// device components (scheduler.WithDevices).
//
// Workers: on in-process ranks each gets its share of GOMAXPROCS (the
// first GOMAXPROCS mod Size ranks one more, so that every P has a worker;
// at least one), so N ranks on one machine do not oversubscribe it -
// unless GOMAXPROCS is set in the environment, of GOMAXPROCS lowered to
// the cores the process may use (its resource set's CPU().Usable(), the
// cgroup CPU quota rounded up: the Go runtime gives a quota of one core
// 2 Ps, mpi.Init gives such a rank 1) - and unless GOMAXPROCS is set
// the process gets one more P while the schedulers are open (Close gives
// it back; not when the quota left Ps free already): the goroutines that
// complete transfers need one while every worker is inside a kernel, or a
// received tile waits for a kernel to end before its reader may start
// (fp64 Cholesky on 2 ranks of 2 cores: 63 -> 69 GFLOP/s); under MPI each rank
// gets its GOMAXPROCS, which mpi.Init set to the rank's share of the cores
// it may use, and unless GOMAXPROCS is set in the environment the
// runtime gets one more P for the goroutines that drive MPI's progress
// (MPI moves data only inside MPI calls; without it a transfer waits for a
// worker's task to end). Each of the rank's devices' workers takes one
// core from that share (at least one CPU worker is left), as
// scheduler.New does. "Set" means a value the Go runtime takes, a
// positive integer: GOMAXPROCS=0, -1 or abc the runtime ignores, and so
// does pz. PZ_NCPU, or scheduler.WithWorkers among opts, overrides the
// worker count. A rank that sees nothing complete in WaitAll
// for a minute logs what it waits for; after PZ_DIST_TIMEOUT (default
// DefaultDistTimeout) WaitAll gives up with that explanation.
//
// Logging: the local scheduler's Info lines (each context resize) print
// where Logger's do, on the root rank by default; its warnings print on
// every rank (MyResourceSet().Logger()).
//
// Traces: PZ_TRACE=file (read through WithGetenv's function) on several
// ranks makes Close write one trace of every rank's tasks and transfers
// on rank 0 (dist.Scheduler.WriteTraceFiles: file and its Gantt chart,
// .svg, beside it) instead of each rank's local scheduler writing its
// own to the same file: the local schedulers do not see PZ_TRACE and
// record their tasks (as PZ_STATS=1), and the scheduler's Close merges
// (dist.WithCloseTrace). When the graph did not complete on every rank,
// the job is being aborted, or the merge cannot complete, each rank
// writes its own trace, file with ".rankR" before the extension, and
// says so on stderr. A scheduler.WithTrace or scheduler.WithGetenv
// among opts leaves the local scheduler's trace to them. On one rank
// PZ_TRACE is the local scheduler's.
func (rt *RuntimeView) Scheduler(ctx context.Context, opts ...scheduler.Option) (*dist.Scheduler, error) {
	rt.schedMu.Lock()
	defer rt.schedMu.Unlock()
	if rt.sched != nil {
		if err := scheduler.ConflictingOption(rt.schedOpts, opts); err != nil {
			return nil, fmt.Errorf("runtimeview: rank %d: Scheduler: %w: this rank's scheduler was made by an earlier call (%s) and is shared, so the options of this call (the later options) must agree with that call's (the first options): %w; give a later call the same options as that one (or some of them), or none", rt.Rank(), ErrOption, rt.schedAt, err)
		}
		return rt.sched, nil
	}
	nprocs := runtime.GOMAXPROCS(0) // read by every in-process rank before dist.New returns on any
	// Each device's worker takes a core from the CPU workers, as in
	// scheduler.New.
	workers, all := rt.workerOptions(nprocs, len(rt.devs))
	if len(rt.devs) > 0 {
		// The rank's devices, shared with its resource set.
		all = append(all, scheduler.WithDevices(rt.devs...))
	}
	// PZ_TRACE, read through WithGetenv's function: on several ranks the
	// local schedulers do not see it (each would write its own trace to
	// the same file); Close merges the ranks' traces instead.
	tracePath := rt.getenv("PZ_TRACE")
	merge := rt.Size() > 1 && tracePath != ""
	var traceAsked atomic.Bool // the local scheduler read PZ_TRACE: no WithTrace or WithGetenv among opts
	all = append([]scheduler.Option{scheduler.WithGetenv(func(k string) string {
		switch {
		case k == "PZ_TRACE" && merge:
			traceAsked.Store(true)
			return ""
		case k == "PZ_TRACE":
			return tracePath
		case k == "PZ_STATS" && merge:
			return "1" // the merge needs the tasks recorded, as PZ_TRACE would have them
		}
		return os.Getenv(k)
	})}, all...)
	all = append(all, opts...)
	if rt.backend != Local {
		// MPI progresses only inside MPI calls: the goroutines that make
		// them (comm/mpi's progress engine, dist's progress loop) need a P
		// while every worker computes, or transfers wait for a task's end.
		rt.spare = procs.RaiseSpare(workers+len(rt.devs), os.Getenv("GOMAXPROCS"))
	}
	ls, err := scheduler.New(ctx, all...)
	if err != nil {
		return nil, fmt.Errorf("runtimeview: rank %d: Scheduler: %w", rt.Rank(), err)
	}
	timeout := DefaultDistTimeout
	if v := os.Getenv(EnvDistTimeout); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil || timeout < 0 {
			_ = ls.Close()
			return nil, fmt.Errorf("runtimeview: rank %d: Scheduler: %w: %s=%q: want a duration such as 5m, or 0 for none", rt.Rank(), ErrOption, EnvDistTimeout, v)
		}
	}
	logger := rt.MyResourceSet().Logger()
	dopts := []dist.Option{dist.WithStallTimeout(timeout), dist.WithStallReport(time.Minute, func(s string) { logger.Warn(s) })}
	if merge && traceAsked.Load() {
		// Checked now, as the local scheduler checks PZ_TRACE, rather
		// than at Close after the whole run.
		if err := scheduler.CheckTraceFile(tracePath); err != nil {
			_ = ls.Close()
			return nil, fmt.Errorf("runtimeview: rank %d: Scheduler: %w: PZ_TRACE=%q: %w", rt.Rank(), scheduler.ErrBadOption, tracePath, err)
		}
		dopts = append(dopts, dist.WithCloseTrace(dist.CloseTrace{
			Path: tracePath,
			Root: 0,
			// A job being aborted (MPI_Abort after a failure or a
			// signal): the other ranks may never come to Close.
			Alone: func() bool { return rt.aborting != nil && rt.aborting.Load() },
			Note:  func(s string) { fmt.Fprintf(rt.stderr, "pz: %s\n", s) },
		}))
	}
	d, err := dist.New(ctx, rt.c, ls, dopts...)
	if err != nil {
		_ = ls.Close() // its workers' goroutines; the error that matters is New's
		if errors.Is(err, comm.ErrFreed) && rt.stack.Closed() {
			return nil, rt.callError("Scheduler", err)
		}
		return nil, fmt.Errorf("runtimeview: rank %d: Scheduler: %w", rt.Rank(), err)
	}
	// Under a CPU quota below GOMAXPROCS (localPool) the workers leave Ps
	// free already.
	var spare procs.Spare
	if rt.backend == Local && rt.Rank() == 0 && rt.localPool(nprocs) >= nprocs {
		// The in-process ranks' workers take every P; the goroutines that
		// complete transfers (dist's progress loop) get one more, or a
		// received tile waits for a worker's kernel to end before the task
		// that reads it may start. dist.New is collective: every rank has
		// sized its workers from nprocs.
		spare = procs.RaiseSpare(nprocs, os.Getenv("GOMAXPROCS"))
	}
	if err := rt.stack.PushNamed("scheduler", func() error {
		spare.Restore()
		derr := d.Close()
		lerr := ls.Close()
		if derr != nil {
			return derr
		}
		return lerr
	}); err != nil {
		_ = d.Close()
		_ = ls.Close()
		return nil, fmt.Errorf("runtimeview: rank %d: Scheduler: %w", rt.Rank(), err)
	}
	rt.sched = d
	rt.schedOpts = slices.Clone(opts)
	rt.schedAt = "at an unknown place"
	if _, file, line, ok := runtime.Caller(1); ok {
		rt.schedAt = fmt.Sprintf("at %s:%d", filepath.Base(file), line)
	}
	return d, nil
}

// abandonGraph tells the distributed scheduler, if the rank's function
// made one, that the rank gives up on its graph (cause: the function's
// error, or its panic), before Close would otherwise wait for the graph
// together with the other ranks: they learn at once that this rank
// failed and why (dist.Scheduler.Abandon), instead of waiting for it or
// finding that the ranks submitted different graphs.
func (rt *RuntimeView) abandonGraph(cause error) {
	rt.schedMu.Lock()
	d := rt.sched
	rt.schedMu.Unlock()
	if d != nil {
		d.Abandon(cause)
	}
}

// workerOptions returns the options that give this rank's scheduler its
// logger and its share of nprocs Ps as workers, less one for each of the
// rank's devices whose worker takes a core (at least one; unless PZ_NCPU
// sets the count), as Scheduler and RunMaster size them, and that count.
func (rt *RuntimeView) workerOptions(nprocs, devices int) (workers int, opts []scheduler.Option) {
	workers = nprocs
	if rt.backend == Local {
		workers = localShare(rt.localPool(nprocs), rt.Size(), rt.Rank())
	}
	workers = max(workers-devices, 1)
	opts = []scheduler.Option{scheduler.WithLogger(rt.schedulerLogger())}
	if os.Getenv("PZ_NCPU") == "" {
		opts = append(opts, scheduler.WithWorkers(workers))
	}
	return workers, opts
}

// localPool is how many of nprocs Ps the in-process ranks share as
// workers: nprocs, lowered to the cores the process may use (its
// resource set's CPU().Usable(): affinity mask and cgroup CPU quota,
// rounded up) unless the user set GOMAXPROCS. The Go runtime sizes
// GOMAXPROCS to a quota but to no fewer than 2 Ps (a quota of one core
// gives 2), where mpi.Init gives a rank of such a node one.
func (rt *RuntimeView) localPool(nprocs int) int {
	if userGOMAXPROCS() {
		return nprocs
	}
	u := rt.MyResourceSet().Machine().CPU.Usable()
	if u <= 0 {
		return nprocs // nothing known
	}
	return min(nprocs, max(int(math.Ceil(u-1e-9)), 1))
}

// userGOMAXPROCS reports whether the GOMAXPROCS environment variable holds
// a value the Go runtime takes: the user's choice, which pz leaves alone.
// Other values (0, -1, abc) the runtime ignores, and so does pz.
func userGOMAXPROCS() bool { return procs.UserSet(os.Getenv("GOMAXPROCS")) }

// localShare is in-process rank r's share of procs Ps among n ranks: procs/n,
// and one more for the first procs mod n ranks; at least one.
func localShare(procs, n, r int) int {
	share := procs / n
	if r < procs%n {
		share++
	}
	return max(share, 1)
}

// schedulerLogger is the logger of the rank's scheduler: its Info lines
// (every context resize) print where the runtime's own do, on the root
// rank only by default, so that N ranks do not print N copies of a
// program's resizes; its warnings and errors (a worker lent at Close, a
// failure) print on every rank, since they are about that rank.
func (rt *RuntimeView) schedulerLogger() *zap.Logger {
	mine := rt.MyResourceSet().Logger()
	if rt.log.Zap().Core().Enabled(zapcore.InfoLevel) {
		return mine // a rank whose Info lines print
	}
	return mine.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
}

// RunMaster runs a master/worker task graph (dist.RunMaster): fn runs on
// rank root, which submits every task; the other ranks' workers serve as
// its workers until fn returns. Every rank calls it at the same point,
// with the same root and a registry of the same codelets. Each rank
// offers its share of the cores as Scheduler's workers are (on
// in-process ranks a share of GOMAXPROCS, under MPI the rank's
// GOMAXPROCS; PZ_NCPU, or scheduler.WithWorkers among opts, overrides
// it), so that a program offers the same workers on both backends. Its
// scheduler's logger is Scheduler's. The rank's devices are not offered:
// tasks sent to other ranks run their CPU implementations. After
// Scheduler raised GOMAXPROCS by one for MPI's progress, the share is
// the rank's GOMAXPROCS before that raise, as Scheduler's workers are.
func (rt *RuntimeView) RunMaster(ctx context.Context, root int, reg *dist.Registry, fn func(ctx context.Context, m *dist.Master) error, opts ...scheduler.Option) error {
	nprocs := runtime.GOMAXPROCS(0)
	rt.schedMu.Lock()
	if rt.spare.To != 0 && nprocs == rt.spare.To {
		nprocs = rt.spare.From
	}
	rt.schedMu.Unlock()
	_, all := rt.workerOptions(nprocs, 0)
	if err := dist.RunMaster(ctx, rt.c, root, reg, append(all, opts...), fn); err != nil {
		return fmt.Errorf("runtimeview: rank %d: RunMaster: %w", rt.Rank(), err)
	}
	return nil
}
