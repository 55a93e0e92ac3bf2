package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pzgo/pz/runtimeview"
)

// repeatWindow is how close to the first stop signal a second one must
// come to count as the same stop delivered twice rather than a demand to
// stop at once. coreutils timeout signals pzrun and then its whole process
// group, pzrun included, microseconds apart; a person who signals again
// does it tenths of a second later at the soonest.
const repeatWindow = 100 * time.Millisecond

// A stopSignal is the cause of pzrun's context when SIGINT or SIGTERM
// stopped pzrun: a launched program is passed the same signal.
type stopSignal struct{ sig os.Signal }

func (s *stopSignal) Error() string { return fmt.Sprintf("pzrun: %v received", s.sig) }

// Is reports whether target is context.Canceled: a stop is a
// cancellation (as runtimeview.SignalError is), so what it ends reports
// the plain cancellation (the distributed scheduler's WaitAll lists no
// pending transfers then).
func (s *stopSignal) Is(target error) bool { return target == context.Canceled }

// signalOf returns the signal that ended ctx, or nil when ctx is not done
// or ended otherwise.
func signalOf(ctx context.Context) os.Signal {
	var s *stopSignal
	if errors.As(context.Cause(ctx), &s) {
		return s.sig
	}
	return nil
}

// relaySignals reads pzrun's SIGINT and SIGTERM from sigs until it is
// closed. The first cancels pzrun's context with a *stopSignal cause: the
// ranks return, or a launched program is passed the signal. A later one
// that comes repeatWindow or more after the first (now tells the time) is
// sent on again, once: what pzrun runs must end at once. Those within
// the window are the first one delivered twice, and dropped.
func relaySignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, again chan<- os.Signal, now func() time.Time) {
	var first time.Time
	sent := false
	for s := range sigs {
		switch {
		case first.IsZero():
			first = now()
			cancel(&stopSignal{sig: s})
		case sent || now().Sub(first) < repeatWindow:
		default:
			sent = true
			again <- s // buffered: the only send
		}
	}
}

// exitOnAgain ends the process when a second stop signal arrives on
// again (nil: never) while an app's ranks run, without waiting for them:
// they ignore their canceled context. The returned function stops the
// watch and waits for its goroutine.
func exitOnAgain(again <-chan os.Signal, stderr io.Writer) (stop func()) {
	if again == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-again:
			fmt.Fprintf(stderr, "pzrun: %v again: exiting without waiting for the ranks\n", s)
			os.Exit(runtimeview.ExitStatus(s))
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// stopGrace bounds how long a rank of an MPI job of several ranks may go
// on after a stop signal before it ends the job itself (abortAfterStop):
// an app that checks its context only now and then (bench comm, between
// sizes) must not keep the job running for minutes. It is runtimeview's
// own bound on a rank's function after a signal.
const stopGrace = 30 * time.Second

// abortAfterStop watches a rank of an MPI job (rank of size) while its
// app runs: when a stop signal ends ctx and the app has not returned
// grace later (stopGrace in pzrun), it says so on stderr and ends the
// job with abort (MPI_Abort with status 1, pzrun's status for a
// signalled rank of an MPI job), then exit(1) should abort return. The
// app's other ranks may wait for this one in a collective, and it
// cannot leave MPI before the app returns. The returned function, called
// when the app returns, stops the watch and waits for its goroutine;
// done is closed once the goroutine has ended (at once when ctx ends
// otherwise than by a stop signal).
func abortAfterStop(ctx context.Context, name string, rank, size int, grace time.Duration, stderr io.Writer, abort func(code int) error, exit func(int)) (stop func(), done <-chan struct{}) {
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-ctx.Done():
		case <-quit:
			return
		}
		s := signalOf(ctx)
		if s == nil {
			return // not a stop: the app's own cancellation
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-quit:
		case <-timer.C:
			fmt.Fprintf(stderr, "pzrun (rank %d of %d): %s still running %v after %s: ending the job (MPI_Abort)\n", rank, size, name, grace, signalName(s))
			if err := abort(exitFail); err != nil {
				fmt.Fprintf(stderr, "pzrun (rank %d): %v\n", rank, err)
			}
			exit(exitFail)
		}
	}()
	return func() {
		close(quit)
		<-ended
	}, ended
}
