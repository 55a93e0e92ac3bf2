package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/sourcegraph/conc"
	"github.com/sourcegraph/conc/panics"

	"github.com/pzgo/pz/comm"
)

// Run runs fn on n in-process ranks, each on its own goroutine with its
// rank's world communicator, and waits for all of them.
//
// The first rank to fail (return an error, panic, or exit its goroutine
// with runtime.Goexit) cancels the context given to the others, with the
// failure as its cause, and breaks the world: ranks blocked in a
// collective, a receive or a Wait return an error wrapping comm.ErrBroken
// that names the failed rank. A rank that returns nil can no longer take
// part in a collective, send or receive: ranks waiting for it in a
// collective, a receive or probe that no queued message matches, or a
// send that waits for its receiver, on any communicator it belongs to,
// fail at once with comm.ErrBroken naming it, while ranks that do not
// need it go on (a send of up to 4 KiB to it is buffered and succeeds;
// see the package doc). Run returns a comm.RankErrors, one
// *comm.RankError per failed rank (nil if none), the cause leading
// (errors.As finds it) and the others, mostly its consequences, after it
// in rank order; its message names ranks that failed alike once. The cause is the first rank to fail with an error that
// does not wrap comm.ErrBroken, nor is the context's cancellation by an
// earlier failure (those are another rank's consequences: a rank whose
// user reduction panics, say, waits for the
// others to drop its buffers before its panic reaches Run, so they
// return first), or the first to fail if all do; a panic is returned as a
// *comm.PanicError carrying the stack, in that rank's error only (the
// others name the failed rank and the first line of its error).
//
// The context fn gets knows its rank: a collective called with it on
// another rank's communicator (one reached through a package-level
// variable, say) fails at once with an error wrapping comm.ErrInvalidArg
// that names both ranks, instead of waiting for ever for the caller's own
// rank to arrive.
func Run(ctx context.Context, n int, fn func(ctx context.Context, c comm.Comm) error) error {
	comms, err := New(n)
	if err != nil {
		return err
	}
	w := comms[0].(*rankComm).g.w
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	errs := make(comm.RankErrors, n)
	var first atomic.Int64 // the rank that failed first, + 1; 0 for none
	var root atomic.Int64  // the first that failed not for ErrBroken, + 1; 0 for none
	fail := func(r int, err error) {
		errs[r] = &comm.RankError{Rank: r, Err: err}
		first.CompareAndSwap(0, int64(r)+1)
		// ctx.Err() after another rank's failure canceled ctx is a
		// consequence too.
		followed := errors.Is(err, comm.ErrBroken) ||
			errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), comm.ErrBroken)
		if !followed {
			root.CompareAndSwap(0, int64(r)+1)
		}
		// The cause wraps ErrBroken, so that a rank that notices the
		// canceled context first reports the same thing as one that
		// notices the broken world. It carries the error's first line
		// only: a panic's stack is in the failed rank's own error, once.
		// The context's cause is the world's, whichever rank broke it:
		// a rank that fails as a consequence, between the first failure's
		// break and its cancel, must not make its own failure the cause
		// that the ranks still to notice report.
		w.breakWith(fmt.Errorf("%w: rank %d failed: %w", comm.ErrBroken, r, causeLine(err)))
		cancel(w.brk.broken())
		// A failed rank has left too: the receives posted from it (an
		// Irecv polled with Test, whose Done channel a select waits on)
		// complete with ErrBroken, as when it returns nil, instead of
		// staying pending for ever; Wait alone saw the break.
		w.leave(r, "failed")
	}
	// conc's WaitGroup scopes the rank goroutines: Run returns only once
	// every one of them has. Panics never reach it: runRank turns them into
	// errors, so that a panicking rank breaks the world at once instead of
	// when the others are done.
	var wg conc.WaitGroup
	for r := range n {
		wg.Go(func() {
			returned := false
			defer func() {
				if !returned {
					fail(r, errGoexit)
				}
			}()
			err := runRank(context.WithValue(ctx, rankKey{}, &rankMark{w: w, rank: r}), comms[r], fn)
			returned = true
			if err != nil {
				fail(r, err)
				return
			}
			// Ranks still waiting for this one in a collective would wait
			// for ever: tell them.
			w.leave(r, "returned from its function")
		})
	}
	wg.Wait()
	// The cause leads: the others' errors are mostly its consequences,
	// and errors.As finds the first RankError. The others follow in rank
	// order.
	f := int(root.Load())
	if f == 0 {
		f = int(first.Load())
	}
	if f > 0 {
		lead := errs[f-1]
		errs = append(comm.RankErrors{lead}, slices.Delete(errs, f-1, f)...)
	}
	errs = slices.DeleteFunc(errs, func(e *comm.RankError) bool { return e == nil })
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// firstLine is err's message up to its first newline, with "..." when
// more follows.
func firstLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		return msg[:i] + " ..."
	}
	return msg
}

// causeLine is a failed rank's error as the world's break carries it:
// its first line (see firstLine). A context's end (a cancellation, a
// signal's, a deadline) stays in the chain, so that every rank that
// reports the break still satisfies errors.Is(err, context.Canceled)
// when the job was canceled; another failure's chain is the failed
// rank's alone (a rank that only saw the break did not pass, say, an
// invalid argument).
func causeLine(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return lineError{err}
	}
	return errors.New(firstLine(err))
}

// lineError is err shown by its first line.
type lineError struct{ err error }

func (e lineError) Error() string { return firstLine(e.err) }
func (e lineError) Unwrap() error { return e.err }

// errGoexit is what a rank that left through runtime.Goexit returns.
var errGoexit = errors.New("local: rank goroutine exited via runtime.Goexit (t.FailNow or log.Fatal in a rank?)")

// runRank calls fn and turns a panic into a *comm.PanicError.
func runRank(ctx context.Context, c comm.Comm, fn func(ctx context.Context, c comm.Comm) error) error {
	var err error
	if p := panics.Try(func() { err = fn(ctx, c) }); p != nil {
		return p.AsError()
	}
	return err
}

// rankKey is the context key under which Run marks each rank's context
// with a *rankMark, so that a collective called on one rank's
// communicator from another rank's goroutine fails (see foreignCaller).
type rankKey struct{}

// rankMark names the rank a context of Run belongs to: rank of world w.
type rankMark struct {
	w    *world
	rank int
}
