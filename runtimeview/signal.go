package runtimeview

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// shutdownGrace bounds how long the signal path waits for the finalizer
// stack before exiting anyway: a callback or MPI_Finalize that hangs (for
// instance because a peer was killed) must not keep an interrupted job
// alive. A second signal during that time kills the process at once, as
// the handler is uninstalled when the first arrives.
const shutdownGrace = 30 * time.Second

// ExitStatus returns the conventional exit status of a process stopped by
// sig: 128 plus the signal number (130 for SIGINT, 143 for SIGTERM), or 1
// for a signal that is not a syscall.Signal.
func ExitStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// A signalHandler waits for SIGINT or SIGTERM on one goroutine and calls
// onSignal once if one arrives before stop.
type signalHandler struct {
	ch       chan os.Signal
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func startSignals(onSignal func(os.Signal)) *signalHandler {
	h := &signalHandler{
		ch:   make(chan os.Signal, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	signal.Notify(h.ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		defer close(h.done)
		select {
		case s := <-h.ch:
			// Restore the default action first, so that a second signal
			// ends a shutdown that hangs.
			signal.Stop(h.ch)
			onSignal(s)
		case <-h.quit:
		}
	}()
	return h
}

// stop uninstalls the handler and waits for its goroutine. It must not be
// called from onSignal.
func (h *signalHandler) stop() {
	h.stopOnce.Do(func() {
		signal.Stop(h.ch)
		close(h.quit)
	})
	<-h.done
}

// onSignal is the process world's reaction to SIGINT or SIGTERM: end
// Run's function (its context canceled) and wait for it, then run the
// finalizer stack (each bounded by shutdownGrace) and exit with
// ExitStatus. Under MPI with several ranks the stack runs without
// MPI_Finalize and MPI_Abort ends the job: the other ranks may be waiting
// for this one, and MPI_Finalize would wait for them. Failures are
// written to standard error, since the stack closes the logger.
func (rt *RuntimeView) onSignal(s os.Signal, exit func(int)) {
	rt.signaled.Store(true)
	rt.log.Local().Warn("signal received: ending the rank's work, running the finalizer stack and exiting", zap.Stringer("signal", s))
	rt.runMu.Lock()
	cancel, fnDone := rt.runCancel, rt.runDone
	rt.runMu.Unlock()
	if cancel != nil {
		cancel(fmt.Errorf("runtimeview: %v received", s))
		select {
		case <-fnDone:
		case <-time.After(shutdownGrace):
			fmt.Fprintf(os.Stderr, "pz: rank %d: after %v: the rank's function did not return within %v; finalizing anyway\n", rt.Rank(), s, shutdownGrace)
		}
	}
	abort := rt.world != nil && rt.Size() > 1
	if abort {
		fmt.Fprintf(os.Stderr, "pz: rank %d of %d: %v received: ending the job (finalizers, then MPI_Abort)\n", rt.Rank(), rt.Size(), s)
		rt.aborting.Store(true)
	}
	done := make(chan error, 1)
	go func() { done <- rt.closeStack() }()
	timer := time.NewTimer(shutdownGrace)
	defer timer.Stop()
	finished := false
	select {
	case err := <-done:
		finished = true
		if err != nil {
			fmt.Fprintf(os.Stderr, "pz: rank %d: after %v: %v\n", rt.Rank(), s, err)
		}
	case <-timer.C:
		fmt.Fprintf(os.Stderr, "pz: rank %d: after %v: the finalizer stack did not finish within %v; exiting anyway\n", rt.Rank(), s, shutdownGrace)
	}
	if abort {
		if err := rt.world.Abort(ExitStatus(s)); err != nil {
			fmt.Fprintf(os.Stderr, "pz: rank %d: %v\n", rt.Rank(), err)
		}
	}
	exit(ExitStatus(s))
	// Only reached when exit returns (tests): wait for the stack so that no
	// goroutine is left behind.
	if !finished {
		<-done
	}
}
