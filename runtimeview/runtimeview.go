package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pzgo/pz/callbacks"
	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/procs"
	"github.com/pzgo/pz/logger"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// Backend names the communication backend a RuntimeView runs on.
type Backend string

// The backends.
const (
	// Local is comm/local: ranks are goroutine groups of one process.
	Local Backend = "local"
	// MPI is comm/mpi: ranks are the processes of an MPI job.
	MPI Backend = "mpi"
	// Adopted is a communicator given with WithComm.
	Adopted Backend = "adopted"
)

// An Option configures New and RunLocal.
type Option func(*config)

type config struct {
	comm         comm.Comm
	signals      bool
	setSignals   bool
	logOpts      []logger.Option
	machine      *hardware.Machine
	hwOpts       []hardware.Option
	getenv       func(string) string
	mpiOpts      []mpi.Option
	mpiHandle    uintptr // WithMPIComm
	mpiHandleSet bool
	exit         func(code int) // replaced by tests of the signal path
	// stderr receives RunLocal's report of the ranks a shutdown waits
	// for, first after shutdownReport and then every five times that
	// (both replaced by tests).
	stderr         io.Writer
	shutdownReport time.Duration
	sims           []accel.SimConfig // WithSimDevices
	simsSet        bool
	shareSims      bool           // WithSharedSimDevices
	shared         []accel.Device // opened by RunLocal for every rank; closed there
	cudaN          int            // WithCUDA
	cudaSet        bool
	cudaDriver     *cuda.Driver   // WithCUDADriver
	sharedGPUs     []accel.Device // opened by RunLocal for every rank; closed there
	gpusShared     bool
	// localMachines is RunLocal's table of the ranks' machine
	// descriptions, one per rank, shared by the ranks of the process: each
	// fills its own entry, and after a barrier all read it, so n ranks
	// hold n descriptions between them instead of n each.
	localMachines []*hardware.Machine
}

// WithComm makes New adopt c (the world, or a sub-communicator obtained
// with Split) instead of opening a world: New neither initializes nor
// finalizes MPI, and Close does not free c. Every rank of c calls New.
// Signal handling is off unless WithSignals(true) is given.
func WithComm(c comm.Comm) Option { return func(cf *config) { cf.comm = c } }

// WithSignals turns the handling of SIGINT and SIGTERM on or off. When on,
// the first such signal runs Close (the callback stack, then the MPI
// finalization if pz started MPI) and exits the process with status
// 128+signo (130 for SIGINT, 143 for SIGTERM). New and Run enable it by
// default (Run for in-process ranks too); RunLocal and WithComm leave it
// off by default. Under Run and RunLocal a signal first cancels every
// rank's context and waits for the ranks' functions to return, then
// every rank's Close runs, and the process exits the same way. Under MPI
// with several ranks the signaled rank cannot finalize MPI (the other
// ranks may be waiting for it): it says so on stderr, runs its callbacks
// without MPI_Finalize and ends the job with MPI_Abort, as a failed rank
// does (mpirun sends SIGTERM to every rank when it is signaled itself, so
// each does this, if its function returns before Open MPI follows up
// with SIGKILL: a moment later, so a computation that does not watch its
// context loses its finalizers there). A rank that is already ending the
// job because its function failed ignores the SIGTERM Open MPI sends to
// every rank of a job it aborts: it has said why it ends.
func WithSignals(on bool) Option {
	return func(c *config) { c.signals, c.setSignals = on, true }
}

// WithLogOptions configures every rank's logger (see package logger). The
// PZ_LOG* environment variables apply to what these leave open.
func WithLogOptions(opts ...logger.Option) Option {
	return func(c *config) { c.logOpts = append(c.logOpts, opts...) }
}

// WithMachine uses m as this rank's hardware description instead of
// calling hardware.Discover (under RunLocal: every in-process rank's). m
// must not be modified afterwards.
func WithMachine(m *hardware.Machine) Option { return func(c *config) { c.machine = m } }

// WithHardwareOptions passes options to hardware.Discover, e.g.
// hardware.WithoutGPUs() for a program that does not use GPUs and should
// not load the CUDA driver.
func WithHardwareOptions(opts ...hardware.Option) Option {
	return func(c *config) { c.hwOpts = append(c.hwOpts, opts...) }
}

// WithGetenv reads the launcher's environment (see internal/launch), the
// devices' (PZ_NSIM, PZ_NCUDA...) and PZ_TRACE for Scheduler through
// getenv instead of os.Getenv.
func WithGetenv(getenv func(string) string) Option {
	return func(c *config) { c.getenv = getenv }
}

func newConfig(opts []Option) *config {
	c := &config{getenv: os.Getenv, exit: os.Exit, stderr: os.Stderr, shutdownReport: 2 * time.Second}
	for _, o := range opts {
		o(c)
	}
	return c
}

// A RuntimeView is one rank's view of a parallel program: the ranks, their
// resource sets, the collectives among them, a stack of finalizers and a
// logger. Make one with New (one per process) or RunLocal (one per
// in-process rank) and Close it when done.
//
// Methods are safe for concurrent use, except that collectives on one
// RuntimeView must be called in the same order on every rank and, as for
// comm.Comm, not concurrently with each other.
type RuntimeView struct {
	c       comm.Comm
	backend Backend
	log     *logger.Logger
	stack   *callbacks.Stack // user callbacks above pz's own teardown

	machines []*hardware.Machine
	devs     []accel.Device // this rank's devices (WithSimDevices)
	setsMu   sync.Mutex
	sets     map[int]*resourceset.ResourceSet // built on first use, by rank

	schedMu   sync.Mutex
	sched     *dist.Scheduler    // made by the first Scheduler call
	schedAt   string             // where that call was made (file:line), for later calls' errors
	schedOpts []scheduler.Option // that call's options, which later calls' must agree with
	// spare is the P Scheduler added for MPI's progress (procs.Spare):
	// RunMaster sizes its workers from spare.From while GOMAXPROCS is
	// still spare.To.
	spare procs.Spare

	getenv func(string) string // WithGetenv's, or os.Getenv: PZ_TRACE for Scheduler
	stderr io.Writer           // where Scheduler's trace at Close says what it wrote instead of the merged trace

	sig      *signalHandler // nil when signals are off
	world    *mpi.World     // nil unless the backend is MPI
	aborting *atomic.Bool   // set by abortJob: the teardown skips MPI_Finalize
	// abortMPI calls the world's MPI_Abort, once per process however many
	// paths end the job (abortJob, onSignal: see onceAbort); nil unless
	// the backend is MPI.
	abortMPI func(code int) error

	// Run's function, while it runs (under a launcher): a signal ends its
	// context and waits for it before the finalizers run.
	runMu     sync.Mutex
	runCancel context.CancelCauseFunc
	runDone   chan struct{}
	// ending says which path ends this process, the first to claim it
	// (claimEnd): endFailure (abortJob) or endSignal (onSignal); the
	// other stands aside.
	ending atomic.Int32
}

// The paths that may end a process's MPI job (RuntimeView.ending).
const (
	endNone    int32 = iota
	endFailure       // abortJob: the rank's function failed
	endSignal        // onSignal: SIGINT or SIGTERM
)

// claimEnd claims the ending of this process for path by, and reports
// whether it was the first path to claim it (or had it already).
func (rt *RuntimeView) claimEnd(by int32) bool {
	return rt.ending.CompareAndSwap(endNone, by) || rt.ending.Load() == by
}

// signaled reports whether a signal's handler is ending the process.
func (rt *RuntimeView) signaled() bool { return rt.ending.Load() == endSignal }

// build finishes a RuntimeView on communicator c: logger, hardware
// exchange. teardown is pushed first onto the stack, so that it runs after
// every user callback. It is collective on c. On error it runs teardown.
func build(ctx context.Context, c comm.Comm, backend Backend, cfg *config, m *hardware.Machine, teardown func() error) (*RuntimeView, error) {
	fail := func(err error) (*RuntimeView, error) {
		if teardown != nil {
			err = errors.Join(err, teardown())
		}
		return nil, err
	}
	log, err := logger.New(c.Rank(), c.Size(), cfg.logOpts...)
	if err != nil {
		return fail(fmt.Errorf("runtimeview: %w", err))
	}
	rt := &RuntimeView{c: c, backend: backend, log: log, stack: callbacks.New(), getenv: cfg.getenv, stderr: cfg.stderr}
	// The logger closes last: the teardown below it may still log.
	if err := rt.stack.PushNamed("logger", log.Close); err != nil {
		return fail(err)
	}
	if teardown != nil {
		if err := rt.stack.PushNamed("communicator", teardown); err != nil {
			return fail(err)
		}
	}
	if m == nil {
		if m, err = hardware.Discover(ctx, cfg.hwOpts...); err != nil {
			return nil, errors.Join(fmt.Errorf("runtimeview: discover hardware: %w", err), rt.stack.Close())
		}
	}
	devs, owned, m, err := openDevices(ctx, cfg, m)
	if err != nil {
		return nil, errors.Join(err, rt.stack.Close())
	}
	rt.devs = devs
	if len(owned) > 0 {
		// Closed after every user callback and the scheduler's (shared
		// ones by RunLocal, after every rank).
		if err := rt.stack.PushNamed("devices", func() error { return closeDevices(owned) }); err != nil {
			return nil, errors.Join(err, closeDevices(owned), rt.stack.Close())
		}
	}
	// Every rank describes its machine to every other rank once, here,
	// where all ranks are known to be present: an exchange on first use
	// would deadlock a program that looks at other ranks' resource sets on
	// the root only. In-process ranks share one table (localMachines).
	if t := cfg.localMachines; len(t) == c.Size() {
		t[c.Rank()] = m
		if err := c.Barrier(ctx); err != nil {
			return nil, errors.Join(fmt.Errorf("runtimeview: exchange hardware descriptions: %w", err), rt.stack.Close())
		}
		rt.machines = t
	} else {
		machines, err := resourceset.Exchange(ctx, c, m)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("runtimeview: %w", err), rt.stack.Close())
		}
		rt.machines = machines
	}
	rt.sets = make(map[int]*resourceset.ResourceSet)
	return rt, nil
}

// Size returns the number of ranks.
func (rt *RuntimeView) Size() int { return rt.c.Size() }

// Rank returns this rank's index in [0, Size).
func (rt *RuntimeView) Rank() int { return rt.c.Rank() }

// Comm returns the communicator of all ranks, for the collectives of
// package comm.
func (rt *RuntimeView) Comm() comm.Comm { return rt.c }

// Backend reports which backend the ranks communicate through.
func (rt *RuntimeView) Backend() Backend { return rt.backend }

// ResourceSet returns rank i's resource set. It is built on first use from
// the hardware description exchanged at construction; it needs no
// communication. It panics if i is not in [0, Size), like a slice index.
func (rt *RuntimeView) ResourceSet(i int) *resourceset.ResourceSet {
	if i < 0 || i >= len(rt.machines) {
		panic(fmt.Sprintf("runtimeview: ResourceSet(%d) out of range [0, %d)", i, len(rt.machines)))
	}
	rt.setsMu.Lock()
	defer rt.setsMu.Unlock()
	if rt.sets[i] == nil {
		rs, err := resourceset.New(rt.c, i, rt.machines[i], rt.log.Local())
		if err != nil {
			panic(err) // unreachable: the arguments were checked above
		}
		if i == rt.Rank() && len(rt.devs) > 0 {
			if err := rs.AttachDevices(rt.devs); err != nil {
				panic(err) // unreachable: the description lists these devices
			}
		}
		rt.sets[i] = rs
	}
	return rt.sets[i]
}

// MyResourceSet returns this rank's resource set.
func (rt *RuntimeView) MyResourceSet() *resourceset.ResourceSet { return rt.ResourceSet(rt.Rank()) }

// Logger returns the rank-selected logger: by default only rank 0 prints
// (see package logger and the PZ_LOG* variables); each line carries the
// rank. For a logger that prints on every rank use
// MyResourceSet().Logger().
func (rt *RuntimeView) Logger() *zap.Logger { return rt.log.Zap() }

// StackCallback pushes fn onto the finalizer stack: Close runs the
// callbacks last pushed first, each exactly once, before pz finalizes MPI
// (when it started MPI). Close's errors number the callbacks in the order
// they were pushed here (callback 0 for the first), on every backend; pz's
// own (the scheduler, the communicator, the logger) are named instead. It
// returns an error wrapping callbacks.ErrClosed after Close has begun. A
// callback runs on the goroutine that called Close, or on the signal
// handler's; a Close it calls returns callbacks.ErrCloseInCallback
// rather than wait for itself.
func (rt *RuntimeView) StackCallback(fn func() error) error {
	if err := rt.stack.Push(fn); err != nil {
		return fmt.Errorf("runtimeview: rank %d: StackCallback: %w", rt.Rank(), err)
	}
	return nil
}

// Barrier returns once every rank has entered it.
func (rt *RuntimeView) Barrier(ctx context.Context) error {
	if err := rt.c.Barrier(ctx); err != nil {
		return rt.callError("Barrier", err)
	}
	return nil
}

// Close runs the finalizer stack: the callbacks given to StackCallback,
// last first, then pz's own teardown (finalizing MPI if New initialized it,
// and closing the logger). Every callback runs exactly once even if others
// fail or panic; the errors are joined. Close is idempotent: later calls
// return the first call's result. It stops the signal handler and leaves no
// goroutine behind. Called from a callback of the stack it is running, it
// returns an error wrapping callbacks.ErrCloseInCallback at once (the
// Close running the callback goes on), rather than wait for itself.
func (rt *RuntimeView) Close() error {
	nested, err := rt.closeStackNested()
	if nested {
		// This Close runs inside a callback of the stack: the Close
		// running it stops the handler. (Only the stack's own answer
		// tells: the first Close's error wraps ErrCloseInCallback too
		// when such a callback returned it, and must stop the handler.)
		return err
	}
	if rt.sig != nil {
		rt.sig.stop()
	}
	return err
}

// closeStack runs the finalizer stack once (later calls wait for the
// first and return its result: callbacks.Stack.Close); the signal handler
// calls it directly because Close would wait for the handler itself.
func (rt *RuntimeView) closeStack() error {
	_, err := rt.closeStackNested()
	return err
}

// closeStackNested is closeStack, also reporting whether the call came
// from one of the stack's own callbacks (callbacks.Stack.Close returned
// ErrCloseInCallback itself, not a callback's error wrapping it).
func (rt *RuntimeView) closeStackNested() (nested bool, err error) {
	err = rt.stack.Close()
	if err == nil {
		return false, nil
	}
	// Identity, not errors.Is: the nested call's own answer.
	return err == callbacks.ErrCloseInCallback, fmt.Errorf("runtimeview: rank %d: Close: %w", rt.Rank(), err)
}
