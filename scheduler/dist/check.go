package dist

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
)

// ErrGraphMismatch: ranks submitted different graphs.
var ErrGraphMismatch = errors.New("dist: ranks submitted different task graphs")

// checkWindow is the number of submissions whose fingerprints the ranks
// compare at once: a rank that submits something else than the others is
// caught within two windows.
const checkWindow = 64

// leftMark is the count a rank that left the graph contributes to a
// comparison it joins only because another rank had started it (join),
// plus its rank: no window holds that many submissions, so a rank that
// still waits in that comparison reads the departure from its result
// (the count's max), rather than compare windows.
const leftMark = 1 << 40

// submission describes one Submit, as the ranks compare it.
type submission struct {
	seq     int
	codelet string
	access  []accessDesc
	onRank  int // -1 if none
}

type accessDesc struct {
	id   int
	mode scheduler.Mode
	// owner is the handle's owner on this rank: a distribution that
	// differs between ranks differs here.
	owner int
	// The handle's shape and element type as this rank registered it:
	// ranks that registered one handle differently differ here (a 2 x 3
	// handle against a 3 x 2 one would otherwise move the same bytes).
	rows, cols int
	dt         comm.Datatype
	name       string // the handle's name, if it has one: for the message only
	// reduction names a Redux access's codelets, "init/combine"
	// (SetReduction): every rank must use the same.
	reduction string
}

func (s submission) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "submission #%d: codelet %q", s.seq, s.codelet)
	for _, a := range s.access {
		red := ""
		if a.reduction != "" {
			red = ", reduction " + a.reduction
		}
		if a.name != "" {
			fmt.Fprintf(&b, " %v(#%d %q owner %d, %d x %d %v%s)", a.mode, a.id, a.name, a.owner, a.rows, a.cols, a.dt, red)
		} else {
			fmt.Fprintf(&b, " %v(#%d owner %d, %d x %d %v%s)", a.mode, a.id, a.owner, a.rows, a.cols, a.dt, red)
		}
	}
	if s.onRank >= 0 {
		fmt.Fprintf(&b, " on rank %d", s.onRank)
	}
	return b.String()
}

// graphCheck compares the ranks' submissions window by window: at the end
// of a window each rank starts a non-blocking AllReduce of the window's
// hash (its max and its negated min: equal on every rank only if every
// hash is); the result is looked at when the next window ends, or at
// WaitAll, so that submission never waits for it. On a mismatch the ranks
// exchange the window's submissions and name the first that differs.
//
// Its collectives are numbered alike on every rank, as steps:
// comparison k (of the window flushed k-th, from 0, at a window's end or
// by WaitAll) is step 2k, the exchange of its submissions step 2k+1. A
// rank that leaves WaitAll tells the others how far it got (reached): it
// takes part in no step from there on, so the others do not start those
// or stop waiting in them at once, rather than at the stall timeout,
// while the steps it started complete.
type graphCheck struct {
	timeout time.Duration // longest wait for a comparison; 0: ctx's
	n       int           // submissions so far
	window  []submission  // the current window
	// acc holds the accesses of the current window's submissions (Submit
	// appends them, and the submission's access slice points into it;
	// those of a submission refused before add stay unused); spareWin
	// and spareAcc
	// are a settled window's arrays, which the next window reuses, so
	// that a submission allocates nothing here.
	acc      []accessDesc
	spareWin []submission
	spareAcc []accessDesc
	pending  *pendingCheck
	// given are the comparisons this rank started after the graph
	// failed, only because another rank had started them (join): Close
	// waits for them before freeing the communicator, as freeing it
	// would drop one still queued, leaving the other rank inside it
	// (under MPI, for MPI_Finalize to refuse).
	given []comm.Request
	// exchange, once this rank started the exchange of submissions
	// after a comparison found the windows apart, is closed when it
	// ends; Close waits for it before freeing the communicator
	// (finishExchange), as the call that started it may have returned
	// first (its context ended) while the others complete it.
	exchange chan struct{}
	compared int // comparisons started (windows flushed)
	reached  int // steps started: one past the last this rank started

	// failure reports the failure this rank has seen, if any, and whether
	// it happened here (a task of this rank) rather than being heard of.
	failure func() (text string, here bool)
	// endOnLeave, if set, derives the context of a wait for step: it
	// ends when a rank that never starts step is known to have left (it
	// left WaitAll before reaching step, or gave the graph up), as that
	// rank will not take part.
	endOnLeave func(ctx context.Context, step int) (context.Context, func())
	// departed, if set, returns the departure that rules step out (as
	// for endOnLeave), or nil: a step ruled out is not started, as its
	// collective would stay unmatched (under MPI, for MPI_Finalize to
	// wait for).
	departed func(step int) error
	// claim, if set, is departed for a comparison about to start that
	// also, when step is not ruled out, records it as started (pos) in
	// the same critical section as the departures are heard in: a rank
	// that left and then asks how far the others got (join) sees every
	// comparison started before its departure was heard.
	claim func(step int) error
	// diverged is the verdict of a comparison that found the ranks'
	// submissions apart: from then on the ranks' collectives on the
	// communicator no longer pair up, so WaitAll returns it at once.
	diverged error
	// pos, if set, mirrors n and reached, for the ranks that ask how far
	// this one got (ctrlAsk), which are answered without d.mu.
	pos *position
	// ask, if set, asks the other ranks how far they got when a wait for
	// step stalled, and says which have not started it (askPeers).
	ask func(step int) string
	// left is set when this rank left WaitAll and told the others how
	// far it got (leave): it starts no step afterwards, as they wait for
	// none from there on.
	left error
	// closing is set when Close waits for the graph (the program
	// returned or closed without WaitAll): a window it ends is where
	// the rank stopped submitting, not a WaitAll of the program's.
	closing bool
	// registered, if set, is the number of handles the program has
	// registered on this rank (Register, RegisterTiles): ranks whose
	// counts differ refer to one handle by different numbers.
	registered func() int
	// beforeExchange, if set, runs between a comparison that found the
	// windows apart and the exchange of their submissions (tests).
	beforeExchange func()
}

// checkExchange is what the ranks exchange when their windows differ:
// the window's submissions, and the failure the rank has seen. A failure
// explains a difference: a rank that learns of one stops submitting,
// and the ranks learn of it at different points.
type checkExchange struct {
	Window      []string
	Failure     string
	FailureHere bool
	// End is the number of submissions the rank had made when the
	// window ended; Closing says that Close ended it (the rank stopped
	// submitting), else a window shorter than the others' was ended
	// by WaitAll.
	End     int
	Closing bool
	// Handles is the number of handles the rank had registered when the
	// window ended (-1: unknown).
	Handles int
}

type pendingCheck struct {
	step   int // the comparison's step; its exchange is step+1
	req    comm.Request
	in     []int64 // hash, -hash, count (own allocations: cgo refuses memory next to Go pointers)
	out    []int64
	window []submission
	acc    []accessDesc // the array window's accesses point into
	// What the ranks exchange if the windows differ, besides the
	// window: the submissions and registrations made when the window
	// ended, and whether Close ended it.
	end, handles int
	closing      bool
}

// add records one submission; at a window's end it starts the comparison
// and returns the previous window's verdict (nil, or an error naming the
// first differing submission).
func (g *graphCheck) add(ctx context.Context, c comm.Comm, s submission) error {
	s.seq = g.n
	g.n++
	if g.pos != nil {
		g.pos.submitted.Store(int64(g.n))
	}
	g.window = append(g.window, s)
	if len(g.window) < checkWindow {
		return nil
	}
	return g.flush(ctx, c)
}

// flush ends the current window: it waits for the previous comparison,
// starts this window's, and returns the previous verdict.
func (g *graphCheck) flush(ctx context.Context, c comm.Comm) error {
	if g.left != nil {
		return fmt.Errorf("dist: comparing the ranks' graphs: %w", g.left)
	}
	if err := g.settle(ctx, c); err != nil {
		return err
	}
	step := 2 * g.compared
	if err := g.claimStep(step); err != nil {
		return fmt.Errorf("dist: comparing the ranks' graphs: %w", err)
	}
	h := windowHash(g.window)
	p := &pendingCheck{step: step, window: g.window, acc: g.acc, in: []int64{int64(h), -int64(h), int64(len(g.window))}, out: make([]int64, 3),
		end: g.n, closing: g.closing, handles: -1}
	if g.registered != nil {
		p.handles = g.registered()
	}
	g.window, g.acc = g.spareWin, g.spareAcc
	g.spareWin, g.spareAcc = nil, nil
	req, err := c.Iallreduce(comm.BufOf(p.in), comm.BufOf(p.out), comm.Max)
	if err != nil {
		g.reach(g.reached) // not started after all (claimStep)
		return fmt.Errorf("dist: comparing the ranks' graphs: %w", err)
	}
	g.compared++
	g.reach(step + 1)
	p.req = req
	g.pending = p
	return nil
}

// recycle keeps the arrays of p, a settled comparison's window, for the
// next window (flush), cleared of their references.
func (g *graphCheck) recycle(p *pendingCheck) {
	if cap(p.window) > cap(g.spareWin) {
		clear(p.window)
		g.spareWin = p.window[:0]
	}
	if cap(p.acc) > cap(g.spareAcc) {
		clear(p.acc)
		g.spareAcc = p.acc[:0]
	}
	p.window, p.acc = nil, nil
}

// leave records that this rank left WaitAll, which failed the graph
// with err, and returns the steps it started (reached), which it tells
// the other ranks: it starts none afterwards. A comparison it started
// and has not settled stays in flight, for the others to complete.
func (g *graphCheck) leave(err error) (reached int) {
	g.left = err
	return g.reached
}

// reach records that this rank started the steps before reached.
func (g *graphCheck) reach(reached int) {
	g.reached = reached
	if g.pos != nil {
		g.pos.reached.Store(int64(reached))
	}
}

// stalled adds to err, the error of a wait for step that stalled, the
// ranks waited for (ask).
func (g *graphCheck) stalled(err error, step int) error {
	if g.ask == nil {
		return err
	}
	return fmt.Errorf("%w; %s", err, g.ask(step))
}

// join starts, after this rank left the graph (leave) or heard that
// another left, the comparison that follows the last it started,
// because another rank had started it: that rank's collective would
// otherwise stay unmatched. This rank's part is its departure's mark
// (leftMark plus rank), which a rank still waiting in it reads as the
// departure (settle). It does not wait for it: Close does (given).
func (g *graphCheck) join(c comm.Comm, rank int) {
	step := 2 * g.compared
	in := []int64{0, 0, leftMark + int64(rank)}
	req, err := c.Iallreduce(comm.BufOf(in), comm.BufOf(make([]int64, 3)), comm.Max)
	if err != nil {
		return // the communicator broke or was freed: it pairs nothing any more
	}
	g.compared++
	g.reach(step + 1)
	g.given = append(g.given, req)
}

// joinUpTo starts (join) the comparisons that a rank which started the
// steps before reached started and this one has not, unless the ranks'
// graphs were found apart (their collectives no longer pair up).
func (g *graphCheck) joinUpTo(c comm.Comm, rank, reached int) {
	for g.diverged == nil && g.compared < (reached+1)/2 {
		n := g.compared
		g.join(c, rank)
		if g.compared == n {
			return
		}
	}
}

// claimStep returns the departure that rules step, a comparison, out,
// or nil once it recorded the step as started (claim).
func (g *graphCheck) claimStep(step int) error {
	if g.claim == nil {
		return g.ruledOut(step)
	}
	return g.claim(step)
}

// ruledOut returns the departure that rules step out (departed), or nil.
func (g *graphCheck) ruledOut(step int) error {
	if g.departed == nil {
		return nil
	}
	return g.departed(step)
}

// untilLeft returns ctx, ending as well once step is ruled out
// (endOnLeave), and the function that releases it.
func (g *graphCheck) untilLeft(ctx context.Context, step int) (context.Context, func()) {
	if g.endOnLeave == nil {
		return ctx, func() {}
	}
	return g.endOnLeave(ctx, step)
}

// settle waits for the comparison in flight, if any, and returns its
// verdict.
func (g *graphCheck) settle(ctx context.Context, c comm.Comm) error {
	p := g.pending
	if p == nil {
		return nil
	}
	g.pending = nil
	// Once settled, nothing refers to p's window: the next window
	// reuses its arrays.
	defer g.recycle(p)
	parent := ctx
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, g.timeout,
			fmt.Errorf("%w: the comparison of the ranks' graphs did not complete in %v", ErrStalled, g.timeout))
		defer cancel()
	}
	wctx, stop := g.untilLeft(ctx, p.step)
	_, err := p.req.Wait(wctx)
	cause := context.Cause(wctx) // before stop, which ends wctx
	stop()
	if err != nil {
		err = endedBy(err, cause, parent)
		if errors.Is(cause, ErrStalled) && parent.Err() == nil {
			err = g.stalled(err, p.step)
		}
		return fmt.Errorf("dist: comparing the ranks' graphs: %w", err)
	}
	// Max of hash and of -hash: all equal iff max == -(-min) == min. The
	// count's max equals this rank's count on every rank only if all agree,
	// which the hash covers too (it includes the count).
	if p.out[0] == -p.out[1] && p.out[2] == p.in[2] {
		return nil
	}
	if p.out[2] >= leftMark {
		// A rank that had left joined this comparison only because
		// this one had started it (join): it is that departure, which
		// its message names once heard.
		err := g.ruledOut(p.step)
		if err == nil {
			err = fmt.Errorf("%w: rank %d left the graph before this comparison of the ranks' graphs", ErrRankFailed, p.out[2]-leftMark)
		}
		return fmt.Errorf("dist: comparing the ranks' graphs: %w", err)
	}
	if g.beforeExchange != nil {
		g.beforeExchange()
	}
	// A rank that left before the exchange never joins it: the windows
	// differ because the ranks stopped, which its departure explains.
	if err := g.ruledOut(p.step + 1); err != nil {
		return fmt.Errorf("dist: comparing the ranks' graphs: %w", err)
	}
	mine := checkExchange{Window: describe(p.window), End: p.end, Closing: p.closing, Handles: p.handles}
	if g.failure != nil {
		mine.Failure, mine.FailureHere = g.failure()
	}
	g.reach(p.step + 2)
	// Every rank that completed the comparison found the windows apart
	// and makes the exchange: it goes ahead whatever this call's context
	// (bounded by the stall timeout, and ended by the departure of a rank
	// that never starts it), on a goroutine of its own. A rank that gave
	// it up when its context ended left the others inside it (under MPI,
	// for MPI_Finalize to refuse) and none could name the difference.
	// When the context ends first, this call returns, and the exchange
	// completes for the others; Close waits for it (finishExchange).
	type exchanged struct {
		all   []checkExchange
		err   error
		cause error
	}
	bound := g.timeout
	if bound <= 0 {
		bound = defaultStall
	}
	detached := context.WithoutCancel(parent)
	tctx, cancel := context.WithTimeoutCause(detached, bound,
		fmt.Errorf("%w: the exchange of the ranks' submissions after their graphs were found apart did not complete in %v", ErrStalled, bound))
	xctx, stop := g.untilLeft(tctx, p.step+1)
	res := make(chan exchanged, 1)
	done := make(chan struct{})
	g.exchange = done
	go func() {
		defer close(done)
		defer cancel()
		defer stop()
		all, err := comm.AllGatherValues(xctx, c, mine)
		res <- exchanged{all, err, context.Cause(xctx)}
	}()
	var x exchanged
	select {
	case x = <-res:
	case <-parent.Done():
		if brokeWorld(parent) {
			// In process, a rank that returned broke the world, which
			// ended every rank's context: the exchange, which may have
			// completed with that rank, ends at once either way.
			x = <-res
			break
		}
		select {
		case x = <-res:
		default:
			g.diverged = fmt.Errorf("%w: the windows of submissions #%d to #%d differ, and this rank's context ended before the ranks exchanged them to name the first difference: %w",
				ErrGraphMismatch, p.end-len(p.window), p.end-1, context.Cause(parent))
			return g.diverged
		}
	}
	all, err := x.all, x.err
	if err != nil && x.cause != nil {
		// A rank left, or the stall timeout: the windows differ because
		// the ranks stopped, which the cause explains.
		err = endedBy(err, x.cause, detached)
		if errors.Is(x.cause, ErrStalled) {
			err = g.stalled(err, p.step+1)
		}
		return fmt.Errorf("dist: comparing the ranks' graphs: %w", err)
	}
	if err != nil {
		g.diverged = fmt.Errorf("%w (and exchanging the submissions: %v)", ErrGraphMismatch, err)
		return g.diverged
	}
	var stopped bool
	stopped, g.diverged = firstDifference(all)
	if f := firstFailure(all); f != "" {
		if stopped {
			// A rank failed and stopped submitting: the failure is
			// the cause, the shorter window its consequence.
			g.diverged = fmt.Errorf("%w: %s (the ranks stopped submitting at different points: %v)", ErrRankFailed, f, g.diverged)
		} else {
			// The ranks made different submissions at one position:
			// that is the cause, and a failure (data moved for one
			// graph and received for the other) its consequence.
			g.diverged = fmt.Errorf("%w (and then: %s)", g.diverged, f)
		}
	}
	return g.diverged
}

// endedBy is the error of a wait that returned err after its context
// ended with cause (nil if it did not end). When the caller's own
// context (parent) has not ended and the wait ended for its context,
// the cause alone is the error (a stall, ErrStalled, or a rank's
// departure): the program canceled nothing, and an error that is also
// context.Canceled or DeadlineExceeded would say it had. Otherwise the
// cause, when there is one, goes in front of err.
func endedBy(err, cause error, parent context.Context) error {
	switch {
	case cause == nil:
		return err
	case parent.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return cause
	case errors.Is(err, cause):
		return err
	}
	return fmt.Errorf("%w: %w", cause, err)
}

// firstFailure names the failure behind a difference of the ranks'
// submissions: the first rank where it happened, else the first that
// heard of one; "" if no rank saw any.
func firstFailure(all []checkExchange) string {
	for r, x := range all {
		if x.Failure != "" && x.FailureHere {
			return fmt.Sprintf("rank %d: %s", r, x.Failure)
		}
	}
	for _, x := range all {
		if x.Failure != "" {
			return x.Failure
		}
	}
	return ""
}

// describe lists a window's submissions as strings, for the exchange.
func describe(w []submission) []string {
	out := make([]string, len(w))
	for i, s := range w {
		out[i] = s.String()
	}
	return out
}

// firstDifference names the first position where some rank's submission
// differs from rank 0's, and reports whether some rank had made no
// submission there (it stopped earlier: its program called WaitAll, or
// returned or closed) rather than a different one. Where the ranks have
// registered different numbers of handles, it says so: they then refer
// to one handle by different numbers. The result is the same on every
// rank.
func firstDifference(all []checkExchange) (stopped bool, err error) {
	longest := 0
	for _, x := range all {
		longest = max(longest, len(x.Window))
	}
	for i := range longest {
		for r := 1; r < len(all); r++ {
			if i < len(all[0].Window) && i < len(all[r].Window) && all[0].Window[i] == all[r].Window[i] {
				continue
			}
			if i >= len(all[0].Window) && i >= len(all[r].Window) {
				continue
			}
			stopped := i >= len(all[0].Window) || i >= len(all[r].Window)
			return stopped, fmt.Errorf("%w: %s; %s%s", ErrGraphMismatch, didAt(0, all[0], i), didAt(r, all[r], i), registrations(all))
		}
	}
	return false, fmt.Errorf("%w: the windows' hashes differ but their submissions read the same%s", ErrGraphMismatch, registrations(all))
}

// didAt says what rank r did at position i of the window it exchanged
// (x): the submission it made there, or, past the window's end, where
// it stopped.
func didAt(r int, x checkExchange, i int) string {
	switch {
	case i < len(x.Window):
		return fmt.Sprintf("rank %d made %s", r, x.Window[i])
	case x.Closing:
		return fmt.Sprintf("rank %d stopped after %s (it returned or closed without WaitAll; Close waits for the graph as WaitAll does)", r, count(x.End, "submission"))
	}
	return fmt.Sprintf("rank %d is in WaitAll after %s", r, count(x.End, "submission"))
}

// registrations says, when the ranks have registered different numbers
// of handles, how many each has ("" when they agree or it is unknown).
func registrations(all []checkExchange) string {
	ref := all[0].Handles
	var differ []string
	for r := 1; r < len(all); r++ {
		if h := all[r].Handles; h != ref && h >= 0 && ref >= 0 {
			differ = append(differ, fmt.Sprintf("rank %d %d", r, h))
		}
	}
	if len(differ) == 0 {
		return ""
	}
	const most = 8
	if len(differ) > most {
		differ = append(differ[:most], fmt.Sprintf("and %d more ranks", len(differ)-most))
	}
	return fmt.Sprintf(" (rank 0 has registered %s, %s: every rank registers the same handles in the same order, so that a handle's number is the same on every rank)", count(ref, "handle"), strings.Join(differ, ", "))
}

// windowHash is a deterministic 64-bit FNV-1a hash of a window's
// submissions, the same on every rank and process.
func windowHash(w []submission) uint64 {
	h := uint64(14695981039346656037)
	mix := func(v uint64) {
		for range 8 {
			h ^= v & 0xff
			h *= 1099511628211
			v >>= 8
		}
	}
	for _, s := range w {
		mix(uint64(s.seq))
		for i := 0; i < len(s.codelet); i++ {
			h ^= uint64(s.codelet[i])
			h *= 1099511628211
		}
		mix(uint64(len(s.access)))
		for _, a := range s.access {
			mix(uint64(a.id))
			mix(uint64(a.mode))
			mix(uint64(a.owner))
			mix(uint64(a.rows))
			mix(uint64(a.cols))
			mix(uint64(a.dt))
			mix(uint64(len(a.reduction)))
			for i := 0; i < len(a.reduction); i++ {
				h ^= uint64(a.reduction[i])
				h *= 1099511628211
			}
		}
		mix(uint64(int64(s.onRank)))
	}
	return h
}
