package runtimeview

import (
	"context"
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
// alive. A second signal during that time ends the process at once (see
// signalHandler).
const shutdownGrace = 30 * time.Second

// repeatWindow is how soon after the first a signal counts as the same
// one: a terminal's ^C reaches the whole process group, and a launcher
// (pzrun) relays it too, microseconds apart. A person who means it
// signals again later.
const repeatWindow = 100 * time.Millisecond

// ExitStatus returns the conventional exit status of a process stopped by
// sig: 128 plus the signal number (130 for SIGINT, 143 for SIGTERM), or 1
// for a signal that is not a syscall.Signal.
func ExitStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// A SignalError is the cause of the ranks' context (context.Cause) when
// the process received SIGINT or SIGTERM: errors.Is(err,
// context.Canceled) holds for it, as for any cancellation, and
// errors.As finds the signal.
type SignalError struct {
	Signal os.Signal
}

// Error names the signal: "runtimeview: interrupt received".
func (e *SignalError) Error() string { return fmt.Sprintf("runtimeview: %v received", e.Signal) }

// Is reports whether target is context.Canceled.
func (e *SignalError) Is(target error) bool { return target == context.Canceled }

// A signalHandler waits for SIGINT or SIGTERM on one goroutine and calls
// onSignal once if one arrives before stop. A second one, while onSignal
// or the shutdown after it runs, ends the process at once with its
// ExitStatus (a shutdown that hangs must not need kill -9). The handler
// stays installed for that: restoring the signal's disposition would not
// do, since a process that started with SIGINT ignored (a shell's
// background job) would get SIG_IGN back, and the second signal would do
// nothing.
type signalHandler struct {
	ch       chan os.Signal
	quit     chan struct{}
	done     chan struct{}
	again    chan struct{} // closed when the second-signal watch has ended
	stopOnce sync.Once
}

func startSignals(onSignal func(os.Signal), exit func(int)) *signalHandler {
	return startSignalsClock(onSignal, exit, time.Now, nil)
}

// startSignalsClock is startSignals reading the time from now, and
// calling repeated (when not nil) for each signal it takes as a repeat of
// the first (within repeatWindow): a test's clock and its event.
func startSignalsClock(onSignal func(os.Signal), exit func(int), now func() time.Time, repeated func(os.Signal)) *signalHandler {
	h := &signalHandler{
		ch:    make(chan os.Signal, 1),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
		again: make(chan struct{}),
	}
	signal.Notify(h.ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		defer close(h.done)
		select {
		case s := <-h.ch:
			first := now()
			go func() {
				defer close(h.again)
				for {
					select {
					case s2 := <-h.ch:
						if now().Sub(first) < repeatWindow {
							// The same interrupt, sent to the group and relayed.
							if repeated != nil {
								repeated(s2)
							}
							continue
						}
						fmt.Fprintf(os.Stderr, "pz: %v again during the shutdown after %v: exiting at once\n", s2, s)
						exit(ExitStatus(s2))
						return
					case <-h.quit:
						return
					}
				}
			}()
			onSignal(s)
		case <-h.quit:
			close(h.again)
		}
	}()
	return h
}

// stop uninstalls the handler and waits for its goroutines. It must not
// be called from onSignal.
func (h *signalHandler) stop() {
	h.stopOnce.Do(func() {
		signal.Stop(h.ch)
		close(h.quit)
	})
	<-h.done
	<-h.again
}

// onSignal is the process world's reaction to SIGINT or SIGTERM: end
// Run's function (its context canceled) and wait for it, then run the
// finalizer stack (each bounded by shutdownGrace) and exit with
// ExitStatus. Under MPI with several ranks the stack runs without
// MPI_Finalize and MPI_Abort ends the job: the other ranks may be waiting
// for this one, and MPI_Finalize would wait for them. Failures are
// written to standard error, since the stack closes the logger.
//
// A rank that is already ending the job because its function failed
// (abortJob: it said so, and MPI_Abort follows) ignores the signal: Open
// MPI sends SIGTERM to every process of a job it aborts, this one
// included, and announcing a signal-driven end there as well would
// misreport why the job ended. onSignal then returns at once; a second
// signal still ends the process at once (see signalHandler).
func (rt *RuntimeView) onSignal(s os.Signal, exit func(int)) {
	if !rt.claimEnd(endSignal) {
		return
	}
	rt.log.Local().Warn("signal received: ending the rank's work, running the finalizer stack and exiting", zap.Stringer("signal", s))
	rt.runMu.Lock()
	cancel, fnDone := rt.runCancel, rt.runDone
	rt.runMu.Unlock()
	if cancel != nil {
		cancel(&SignalError{Signal: s})
		select {
		case <-fnDone:
		case <-time.After(shutdownGrace):
			fmt.Fprintf(os.Stderr, "pz: rank %d: after %v: the rank's function did not return within %v; finalizing anyway\n", rt.Rank(), s, shutdownGrace)
		}
	}
	abort := rt.abortMPI != nil && rt.Size() > 1
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
		if err := rt.abortMPI(ExitStatus(s)); err != nil {
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
