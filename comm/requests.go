package comm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"time"

	"github.com/pzgo/pz/internal/ctxerr"
)

// Notifier is implemented by requests that announce their completion on a
// channel. The requests of both backends do (on MPI, one progress engine per
// process tests every request someone waits for); the request-set functions
// use it to wait for any of many requests without polling.
type Notifier interface {
	// Done returns a channel that is closed when the request has completed.
	Done() <-chan struct{}
}

// WaitWatcher is implemented by requests whose backend watches the waits
// that last (comm/mpi's stall watch reports them and, past its timeout,
// ends the job). A request's own Wait is watched by the backend; WaitAny
// and WaitSome, which wait on Done, call WatchWait on the first active
// request of the set they are about to block on (it stands for the set),
// with their ctx (a comm.Idle ctx is not watched), and the returned
// function once they stop waiting.
type WaitWatcher interface {
	WatchWait(ctx context.Context) (stop func())
}

// Canceler is implemented by requests whose operation can be canceled
// (MPI_Cancel): the point-to-point receives of both backends (Irecv, and
// a round of a Persistent made by RecvInit). Cancel asks for the
// receive to end without taking a message, and returns at once; the
// request still completes through Wait, Test or the request sets, which
// then report one of two outcomes, as MPI_Test_cancelled tells them
// apart:
//
//   - canceled: an error wrapping ErrCanceled and an empty Status. The
//     receive took no message and wrote nothing into its buffer; the
//     message it would have matched goes to a later receive.
//   - completed: the receive had matched a message before Cancel could
//     withdraw it; it completes as if Cancel had not been called (the
//     message whole in the buffer, or the receive's own error).
//
// Either way the buffer is the caller's again once the request has
// completed, and not before: a matched message may still be landing
// when Cancel returns. A canceled receive completes without the other
// ranks (on MPI, MPI_Wait of a canceled request is local), so a Wait
// after Cancel returns promptly, also one already waiting on another
// goroutine.
//
// Cancel of a request that has completed, or was canceled before, does
// nothing and returns nil. A send cannot be canceled (MPI deprecates
// canceling sends, and comm/local may have delivered the message
// already): Cancel of a send's request (Isend, a round of SendInit)
// returns an error wrapping ErrInvalidArg and leaves the send as it
// was. The requests of ProcNull (Isend, Irecv, SendInit, RecvInit) have
// completed at once: their Cancel does nothing. The requests of the
// non-blocking collectives are no Cancelers (MPI cannot cancel a
// collective). Cancel may be called from any goroutine.
type Canceler interface {
	Cancel() error
}

// Completion is one completed request of a request set: its index in the
// set, its Status and its error.
type Completion struct {
	Index  int
	Status Status
	Err    error
}

// The request-set functions take a slice of requests like MPI's arrays of
// requests: a nil entry is inactive and skipped, and every request they
// report as completed is set to nil in the slice, so that a loop calling
// WaitAny or WaitSome until they report nothing handles each request once.

// WaitAll waits for every request in reqs and returns their statuses (by
// index) and the errors of those that failed, each naming its index. On a
// ctx error it returns at once, with the errors of the requests it
// collected before (set to nil in reqs, their statuses filled in) and
// ctx's naming the request it waited for; that request and those after
// it stay in reqs.
func WaitAll(ctx context.Context, reqs []Request) ([]Status, error) {
	sts := make([]Status, len(reqs))
	err := WaitAllInto(ctx, reqs, sts)
	return sts, err
}

// WaitAllInto is WaitAll writing the statuses into sts, which holds one
// per request, or ignoring them when sts is nil (MPI_STATUSES_IGNORE):
// a loop of persistent requests then waits without allocating.
func WaitAllInto(ctx context.Context, reqs []Request, sts []Status) error {
	if sts != nil && len(sts) < len(reqs) {
		return fmt.Errorf("comm: WaitAllInto: %d statuses for %d requests: %w", len(sts), len(reqs), ErrInvalidArg)
	}
	var errs []error
	for i, r := range reqs {
		if r == nil {
			continue
		}
		st, err := r.Wait(ctx)
		if err != nil && ctx.Err() != nil {
			// The wait ended with ctx; a request that completed all the
			// same reports its own result, not ctx's error.
			done, tst, terr := r.Test()
			if !done {
				// The requests collected before this one are out of
				// the set: their errors go with ctx's, or they
				// would be lost.
				return errors.Join(append(errs, fmt.Errorf("comm: WaitAll: request %d: %w", i, ctxerr.Of(ctx, ErrBroken)))...)
			}
			st, err = tst, terr
		}
		reqs[i] = nil
		if sts != nil {
			sts[i] = st
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("request %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// TestAll reports whether every request of reqs has completed
// (MPI_Testall). If so it returns their statuses by index and the
// errors of those that failed, each naming its index, and sets every
// entry to nil; if not, it returns false and leaves reqs as they were, so
// that it can be called again. It does not block.
func TestAll(reqs []Request) (done bool, sts []Status, err error) {
	for _, r := range reqs {
		if r == nil {
			continue
		}
		// A Notifier is asked without Test: a persistent request whose
		// result Test reported would count as collected (see
		// Persistent.Start) while TestAll still leaves it in the set.
		if n, ok := r.(Notifier); ok {
			select {
			case <-n.Done():
				continue
			default:
				return false, nil, nil
			}
		}
		if d, _, _ := r.Test(); !d {
			return false, nil, nil
		}
	}
	sts = make([]Status, len(reqs))
	var errs []error
	for i, r := range reqs {
		if r == nil {
			continue
		}
		_, st, rerr := r.Test()
		reqs[i], sts[i] = nil, st
		if rerr != nil {
			errs = append(errs, fmt.Errorf("request %d: %w", i, rerr))
		}
	}
	return true, sts, errors.Join(errs...)
}

// TestAny returns the first completed request of reqs (setting its entry to
// nil); ok is false when none has completed. With no active request (every
// entry nil) it returns Index -1 and ok true, as MPI_Testany returns flag
// true and MPI_UNDEFINED, and as WaitAny returns at once: a loop that polls
// with TestAny ends when c.Index < 0.
func TestAny(reqs []Request) (c Completion, ok bool) {
	active := false
	for i, r := range reqs {
		if r == nil {
			continue
		}
		active = true
		if done, st, err := r.Test(); done {
			reqs[i] = nil
			return Completion{Index: i, Status: st, Err: err}, true
		}
	}
	return Completion{Index: -1}, !active
}

// TestSome returns every completed request of reqs, in index order, setting
// their entries to nil. It does not block.
func TestSome(reqs []Request) []Completion {
	var out []Completion
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if done, st, err := r.Test(); done {
			reqs[i] = nil
			out = append(out, Completion{Index: i, Status: st, Err: err})
		}
	}
	return out
}

// WaitAny waits until one request of reqs has completed and returns it,
// setting its entry to nil. With no active request it returns Index -1 and
// no error at once. The error is ctx's; the request's own is c.Err.
func WaitAny(ctx context.Context, reqs []Request) (Completion, error) {
	if err := waitSet(ctx, "WaitAny", reqs); err != nil {
		return Completion{Index: -1}, err
	}
	c, _ := TestAny(reqs)
	return c, nil
}

// WaitSome waits until at least one request of reqs has completed and
// returns every completed one, in index order, setting their entries to
// nil. With no active request it returns nothing and no error at once. The
// error is ctx's; each request's own is in its Completion.
func WaitSome(ctx context.Context, reqs []Request) ([]Completion, error) {
	if err := waitSet(ctx, "WaitSome", reqs); err != nil {
		return nil, err
	}
	return TestSome(reqs), nil
}

// Polling of requests that do not implement Notifier: tests with a
// Gosched between them through a window of setSpinWindow (and at least
// setSpins tests), then sleeps from setMinSleep doubling to setMaxSleep.
// A Go sleep on an otherwise idle process lasts about a millisecond
// whatever is asked, so a loop that sleeps after a few tests puts a rank
// that waits often (WaitAny over a ring of messages) into a millisecond
// rhythm; comm/mpi's polled waits spin through a window for the same
// reason.
const (
	setSpins      = 64
	setSpinWindow = 5 * time.Millisecond
	setMinSleep   = time.Microsecond
	setMaxSleep   = 50 * time.Microsecond
)

// setPoller is the polling loop of waitSet, with its clock and its sleep
// (tests give their own).
type setPoller struct {
	now   func() time.Time
	sleep func(time.Duration)
}

// poll calls test until it reports true or ctx is done (then the error is
// ctx's cause, wrapped with call).
func (p setPoller) poll(ctx context.Context, call string, test func() bool) error {
	sleep := setMinSleep
	var until time.Time
	for i := 0; ; i++ {
		if test() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("comm: %s: %w", call, ctxerr.Of(ctx, ErrBroken))
		}
		if i < setSpins {
			runtime.Gosched()
			continue
		}
		if until.IsZero() {
			until = p.now().Add(setSpinWindow)
		}
		if i%16 != 0 || p.now().Before(until) {
			runtime.Gosched()
			continue
		}
		p.sleep(sleep)
		sleep = min(2*sleep, setMaxSleep)
	}
}

// waitSet returns once some active request of reqs has completed (Test
// reports it), there is none, or ctx is done.
func waitSet(ctx context.Context, call string, reqs []Request) error {
	active := 0
	notify := true
	for _, r := range reqs {
		if r == nil {
			continue
		}
		active++
		if done, _, _ := r.Test(); done {
			return nil
		}
		if _, ok := r.(Notifier); !ok {
			notify = false
		}
	}
	if active == 0 {
		return nil
	}
	// One request of the set stands for it in the watch: a WaitAny loop
	// over many requests claims one watch slot per call, not one each.
	for _, r := range reqs {
		if w, ok := r.(WaitWatcher); ok {
			defer w.WatchWait(ctx)()
			break
		}
	}
	if notify {
		cases := make([]reflect.SelectCase, 0, active+1)
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
		for _, r := range reqs {
			if r != nil {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.(Notifier).Done())})
			}
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			return fmt.Errorf("comm: %s: %w", call, ctxerr.Of(ctx, ErrBroken))
		}
		return nil
	}
	return setPoller{now: time.Now, sleep: time.Sleep}.poll(ctx, call, func() bool {
		for _, r := range reqs {
			if r == nil {
				continue
			}
			if done, _, _ := r.Test(); done {
				return true
			}
		}
		return false
	})
}
