package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/hardware"
)

// ErrOption is wrapped by the error New, Run or RunLocal returns for an
// option that does not apply, and by Run's and RunLocal's for a nil
// function.
var ErrOption = errors.New("runtimeview: invalid option")

// RunLocal runs fn on n in-process ranks (comm/local, the embedded backend)
// and waits for all of them. Each rank gets its own RuntimeView, closed
// when fn returns (its callback stack runs then), and a context that is
// canceled when another rank fails. The machine is discovered once and
// shared by the ranks, which all live on it.
//
// RunLocal refuses (ErrLaunch) a rank count whose own state would not fit
// in the machine's available memory, before starting any rank: pz keeps
// about 16 KiB per rank (1,000 ranks take ~25 MB, 100,000 ~1.2 GB), and
// the kernel would kill the process without a word. The ranks share one
// table of the machine descriptions.
//
// RunLocal returns nil when every rank's fn and Close succeeded; otherwise
// the ranks' errors as a comm.RankErrors, each a *comm.RankError naming
// its rank (a panic in fn becomes one too); its message names ranks that
// failed alike once (a signal's cancellation of 1,024 ranks is a line). fn must not keep its RuntimeView after it
// returns.
//
// Signals are not handled unless WithSignals(true) is given: then SIGINT
// or SIGTERM cancels every rank's context, every rank's Close runs, and
// RunLocal exits the process with ExitStatus once all ranks have returned.
// WithComm does not apply.
func RunLocal(ctx context.Context, n int, fn func(ctx context.Context, rt *RuntimeView) error, opts ...Option) error {
	cfg := newConfig(opts)
	if cfg.comm != nil {
		return fmt.Errorf("%w: WithComm cannot be used with RunLocal", ErrOption)
	}
	if fn == nil {
		return fmt.Errorf("%w: RunLocal with a nil function", ErrOption)
	}
	if n < 1 {
		return fmt.Errorf("%w: RunLocal needs at least 1 rank, got %d", ErrLaunch, n)
	}
	m := cfg.machine
	if m == nil {
		var err error
		if m, err = hardware.Discover(ctx, cfg.hwOpts...); err != nil {
			return fmt.Errorf("runtimeview: discover hardware: %w", err)
		}
	}
	if err := CheckRankMemory(n, m.Memory.AvailableBytes); err != nil {
		return err
	}
	if n > 0 {
		cfg.localMachines = make([]*hardware.Machine, n)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		sigMu    sync.Mutex
		received os.Signal
	)
	returned := make([]atomic.Bool, n) // by rank: its function has returned
	ranDone := make(chan struct{})     // local.Run has returned
	var reports sync.WaitGroup         // reportShutdown after a signal
	defer func() {
		close(ranDone)
		reports.Wait()
	}()
	if cfg.setSignals && cfg.signals {
		h := startSignals(func(s os.Signal) {
			sigMu.Lock()
			received = s
			sigMu.Unlock()
			cancel(&SignalError{Signal: s})
			reports.Go(func() { reportShutdown(cfg, s, returned, ranDone) })
		}, cfg.exit)
		defer h.stop()
	}

	if cfg.shareSims {
		sims, err := simConfigs(cfg)
		if err != nil {
			return err
		}
		if cfg.shared, err = newSims(sims); err != nil {
			return err
		}
		defer func() { _ = closeDevices(cfg.shared) }()
	}
	// In-process ranks share the process's GPUs, as the ranks of a node
	// share its GPUs: each opened once, so that the device collectives
	// copy between the ranks' buffers within the GPU.
	gpus, err := openGPUs(ctx, cfg)
	if err != nil {
		return err
	}
	cfg.sharedGPUs, cfg.gpusShared = gpus, true
	defer func() { _ = closeDevices(gpus) }()
	err = local.Run(ctx, n, func(ctx context.Context, c comm.Comm) (err error) {
		defer returned[c.Rank()].Store(true)
		// Close frees the rank's communicator, as under MPI Close
		// finalizes it: a collective after Close fails on both
		// backends (comm.ErrFreed).
		rt, err := build(ctx, c, Local, cfg, m, c.Free)
		if err != nil {
			return err
		}
		// Deferred so that the stack also runs when fn panics.
		returned := false
		defer func() {
			var p any
			switch {
			case !returned:
				// The other ranks hear the panic's value; the panic
				// goes on to local.Run, which keeps its stack (the
				// panicking frames are still below this one).
				if p = recover(); p != nil {
					rt.abandonGraph(fmt.Errorf("its function panicked: %v", p))
				} else {
					rt.abandonGraph(errors.New("its function called runtime.Goexit"))
				}
			case err != nil:
				rt.abandonGraph(err)
			}
			err = joinClose(err, rt.Close())
			if p != nil {
				panic(p)
			}
		}()
		err = fn(ctx, rt)
		returned = true
		return err
	})

	sigMu.Lock()
	s := received
	sigMu.Unlock()
	if s != nil {
		if err != nil {
			fmt.Fprintf(os.Stderr, "pz: after %v: %v\n", s, err)
		}
		cfg.exit(ExitStatus(s))
	}
	return err
}

// reportShutdown says, on cfg.stderr, which ranks a shutdown after
// signal s still waits for: first after cfg.shutdownReport, then every
// five times that, until done (every rank returned). A rank whose
// function does not watch its context holds the exit with no other word.
func reportShutdown(cfg *config, s os.Signal, returned []atomic.Bool, done <-chan struct{}) {
	start := time.Now()
	wait := cfg.shutdownReport
	for {
		select {
		case <-done:
			return
		case <-time.After(wait):
		}
		var left []int
		for r := range returned {
			if !returned[r].Load() {
				left = append(left, r)
			}
		}
		if len(left) == 0 {
			return
		}
		fmt.Fprintf(cfg.stderr, "pz: after %v: waiting %v for %s to return (a rank's function must return once its context ends; %v again exits at once)\n",
			s, time.Since(start).Round(time.Second), comm.FormatRanks(left), s)
		wait = 5 * cfg.shutdownReport
	}
}

// What pz itself keeps for an in-process rank: its goroutines, runtime
// view and communicator, measured with `pzrun -n N hello` (peak RSS 25
// MB at 1,000 ranks, 126 MB at 10,000, 1.2 GB at 100,000).
const rankBytes = 16 << 10

// CheckRankMemory refuses (ErrLaunch) n in-process ranks whose own state
// alone would not fit in avail bytes of available memory (a machine's
// hardware.Memory.AvailableBytes; 0 when unknown, which passes): the
// process would be killed by the kernel's OOM killer without a word.
// RunLocal calls it before starting any rank; a launcher calls it to
// refuse a rank count before it starts a program that would run them
// (pzrun -n N ./prog). It costs a few arithmetic operations.
func CheckRankMemory(n int, avail uint64) error {
	if n <= 0 || avail == 0 {
		return nil
	}
	need := float64(n) * rankBytes
	if need <= float64(avail) {
		return nil
	}
	return fmt.Errorf("%w: %d in-process ranks need about %.1f GiB for pz's own state (%d KiB per rank), more than the %.1f GiB available; run fewer ranks, or one process per rank under MPI",
		ErrLaunch, n, need/(1<<30), rankBytes>>10, float64(avail)/(1<<30))
}
