package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pzgo/pz/internal/launch"
)

// EnvRanks names the environment variable Run reads for the number of
// in-process ranks when its n is 0.
const EnvRanks = "PZ_RANKS"

// ErrLaunch is wrapped by the errors Run returns when the requested ranks
// cannot be had: a rank count given under an MPI launcher, an invalid
// count, or more in-process ranks than the machine's memory holds (see
// RunLocal).
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
//
// SIGINT and SIGTERM (unless WithSignals(false)) cancel fn's context, wait
// for fn to return, run every rank's Close and exit the process with
// status 128+signo, on either path (see WithSignals for MPI with several
// ranks).
//
// Under MPI with several ranks, a rank whose fn returns an error or panics
// ends the whole job, as a failed in-process rank ends the others: the
// other ranks may be waiting for it in a collective, and MPI_Finalize
// would wait for them. It prints "pz: rank R of N failed: ERROR" on
// stderr, runs its finalizer stack (without MPI_Finalize) for at most 10
// seconds, and calls MPI_Abort; Run does not return there.
//
// MPI can be initialized once per process: under a launcher, Run (like
// New) can run once, and a second Run returns an error wrapping
// mpi.ErrFinalized. In-process ranks may be run any number of times.
// PZ_RANKS is for in-process ranks: set under a launcher to a count other
// than the launcher's, it is refused (ErrLaunch).
func Run(ctx context.Context, n int, fn func(ctx context.Context, rt *RuntimeView) error, opts ...Option) error {
	if fn == nil {
		// Before New: under a launcher every rank would start MPI, then
		// fail in fn and end the job.
		return fmt.Errorf("%w: Run with a nil function (pass the function each rank runs)", ErrOption)
	}
	cfg := newConfig(opts)
	info := launch.Detect(cfg.getenv)
	if n < 0 {
		return fmt.Errorf("%w: rank count %d is negative (pass 0 to take %s, or 1 rank; or a positive count)", ErrLaunch, n, EnvRanks)
	}
	if info.Launched() {
		if n > 0 {
			return fmt.Errorf("%w: Run was given %d ranks, but the %s launcher already chose them (%d); pass 0 as the rank count when a program may run under mpirun", ErrLaunch, n, info.Launcher, info.Size)
		}
		if v := cfg.getenv(EnvRanks); v != "" && v != strconv.Itoa(info.Size) {
			return fmt.Errorf("%w: %s=%s asks for in-process ranks, but the %s launcher already chose %d ranks; unset %s under mpirun", ErrLaunch, EnvRanks, v, info.Launcher, info.Size, EnvRanks)
		}
		rt, err := New(ctx, opts...)
		if err != nil {
			return err
		}
		// A signal ends fn's context and waits for fn before the
		// finalizers run (onSignal): they must not close what fn uses.
		fctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		fnDone := make(chan struct{})
		rt.runMu.Lock()
		rt.runCancel, rt.runDone = cancel, fnDone
		rt.runMu.Unlock()
		ferr := callRank(fctx, rt, fn)
		close(fnDone)
		if ferr != nil && !rt.signaled() {
			rt.abandonGraph(ferr)
			if rt.world != nil && rt.Size() > 1 {
				// Returns only where exit does not end the process
				// (tests), or when a signal's handler claimed the
				// ending first.
				rt.abortJob(ferr, cfg.exit)
			}
		}
		if rt.signaled() {
			// The handler runs the stack and ends the process; what fn
			// returned is the signal's consequence, not a failure of the
			// rank. Wait for it (it returns only where exit does not end
			// the process: tests).
			if rt.sig != nil {
				<-rt.sig.done
			}
		}
		return joinClose(ferr, rt.Close())
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
	// Run is a program's main: SIGINT and SIGTERM end it gracefully
	// unless the options say otherwise (RunLocal alone leaves them off).
	return RunLocal(ctx, n, fn, append([]Option{WithSignals(true)}, opts...)...)
}

// joinClose joins a rank's error and its Close's, naming Close's once: a
// function that returned rt.Close()'s error (as in "return rt.Close()")
// would otherwise have it twice, as Close says its first result again.
func joinClose(err, cerr error) error {
	if err != nil && cerr != nil && strings.Contains(err.Error(), cerr.Error()) {
		return err
	}
	return errors.Join(err, cerr)
}

// callRank runs fn and turns a panic into an error with its stack.
func callRank(ctx context.Context, rt *RuntimeView, fn func(ctx context.Context, rt *RuntimeView) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx, rt)
}

// abortGrace bounds the finalizer stack of a rank that aborts the job.
const abortGrace = 10 * time.Second

// abortJob ends an MPI job whose rank failed: the other ranks may be
// waiting for this one in a collective, and MPI_Finalize would wait for
// them in turn. It names the rank and its error on stderr, runs the
// finalizer stack (without MPI_Finalize) for at most abortGrace, and calls
// MPI_Abort, which ends every process of the job. exit is called if
// MPI_Abort returns. It does nothing when a signal's handler (onSignal)
// is already ending the process, which then says why.
func (rt *RuntimeView) abortJob(cause error, exit func(int)) {
	if !rt.claimEnd(endFailure) {
		return
	}
	fmt.Fprintf(os.Stderr, "pz: rank %d of %d failed: %v\npz: aborting the job (MPI_Abort)\n", rt.Rank(), rt.Size(), cause)
	rt.aborting.Store(true)
	done := make(chan error, 1)
	go func() { done <- rt.closeStack() }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(os.Stderr, "pz: rank %d: finalizers: %v\n", rt.Rank(), err)
		}
	case <-time.After(abortGrace):
		fmt.Fprintf(os.Stderr, "pz: rank %d: the finalizer stack did not finish within %v\n", rt.Rank(), abortGrace)
	}
	err := rt.abortMPI(1)
	fmt.Fprintf(os.Stderr, "pz: rank %d: %v\n", rt.Rank(), err)
	exit(1)
}

// setAbort makes abort (the world's MPI_Abort) the way this process ends
// its MPI job, called at most once whatever the path (onceAbort).
func (rt *RuntimeView) setAbort(abort func(code int) error) {
	rt.abortMPI = onceAbort(abort)
}

// onceAbort returns abort called at most once: the first call runs it, and
// a later or concurrent one waits for the first to return and returns its
// error. Two paths may end an MPI job from one process at once: a rank
// whose function failed is inside MPI_Abort (abortJob) when Open MPI,
// ending the job, sends SIGTERM to its processes, this one included, and
// the signal's handler (onSignal) would call MPI_Abort a second time,
// concurrently, which crashed inside Open MPI (SIGSEGV, a goroutine dump
// after the rank's message).
func onceAbort(abort func(code int) error) func(code int) error {
	var (
		once sync.Once // a concurrent Do waits for the first to return
		err  error
	)
	return func(code int) error {
		once.Do(func() { err = abort(code) })
		return err
	}
}
