package dist

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
)

// Errors of the distributed layer. Use errors.Is.
var (
	// ErrDistribution: a distribution does not fit the ranks.
	ErrDistribution = errors.New("dist: distribution does not fit the ranks")
	// ErrBadRank: a rank outside the communicator.
	ErrBadRank = errors.New("dist: no such rank")
	// ErrForeignHandle: a handle of another distributed scheduler.
	ErrForeignHandle = errors.New("dist: handle of another scheduler")
	// ErrRankFailed: a task failed on some rank, so the distributed graph
	// could not complete; the error names the rank.
	ErrRankFailed = errors.New("dist: a rank failed")
	// ErrStalled: nothing completed on a rank for the stall timeout
	// (WithStallTimeout); the error says what the rank waited for.
	ErrStalled = errors.New("dist: no progress")
	// ErrClosed: the scheduler was closed.
	ErrClosed = errors.New("dist: scheduler closed")
	// ErrNotHeld: Handle.Fetch on a rank that does not hold the handle's
	// latest version (as of the submissions so far), or while a
	// reduction of it across ranks is in progress; the error says which
	// ranks hold it.
	ErrNotHeld = errors.New("dist: this rank does not hold the handle's latest version")
)

// ctrlTag carries control messages (a rank's failure, a rank closing); data
// transfers of handle id use tag id+1.
const ctrlTag = 0

// ctrlSize is the size of a control message: a kind byte, then (for
// ctrlLeft and ctrlLeftBroken) the sender's steps (ctrlLeftHead), then
// text.
const ctrlSize = 1024

const (
	ctrlFailed byte = 1 + iota // a task failed on the sender; text follows
	ctrlClose                  // self-sent by Close to end the control receive
	// ctrlLeft: the sender left WaitAll early (its context ended, or the
	// stall timeout), or Scatter, Gather, ScatterMatrix or GatherMatrix
	// (quitLocked); the steps of the graph check it started (its
	// graphCheck.reached, 8 bytes little-endian), then text, follow: for
	// a call other than WaitAll, the call's name and a zero byte first.
	// The receivers' waits for later steps end; those it started
	// complete.
	ctrlLeft
	// ctrlGaveUp: the sender's program gave up on the graph (Abandon); text
	// follows. It takes part in no further collective: every wait of the
	// graph check ends (under MPI, MPI_Abort follows).
	ctrlGaveUp
	// ctrlLeftBroken: ctrlLeft, for a cause that is comm.ErrBroken (a rank
	// gave up); steps and text follow, as for ctrlLeft.
	ctrlLeftBroken
	// ctrlAsk: the sender stalled in a collective and asks how far the
	// receiver got; the question's number (8 bytes little-endian)
	// follows. The receiver answers at once, from its progress goroutine
	// (ctrlTell), whatever its program and workers are doing.
	ctrlAsk
	// ctrlTell answers ctrlAsk: the question's number, the steps of the
	// graph check the sender started, the agreements on WaitAll's
	// outcome it started (8 bytes little-endian each), then text saying
	// what it is doing.
	ctrlTell
)

// ctrlTellHead is the length of the head of a ctrlTell message.
const ctrlTellHead = 1 + 3*8

// ctrlLeftHead is the length of the head of a ctrlLeft or ctrlLeftBroken
// message: the kind, then the sender's steps.
const ctrlLeftHead = 1 + 8

// agreementStep is the step of WaitAll's agreement on the outcome for
// endOnLeave: after every step of the graph check, so that any departure
// ends its wait (a rank that left WaitAll never joins it).
const agreementStep = math.MaxInt

// Scheduler runs one task graph across the ranks of a communicator,
// StarPU-MPI style: every rank registers the same data and submits the
// same sequence of tasks; each task runs on one rank (the owner of the data
// it writes, or the rank OnRank names), and the data it reads is sent to
// that rank, non-blocking, as soon as it is produced. Each rank's tasks run
// on its own node-local scheduler.
//
// Methods are safe for concurrent use, but submission order is what every
// rank must agree on: submit from one goroutine per rank.
type Scheduler struct {
	// beforeAgreement, nil but in tests (export_test.go), runs in
	// WaitAll just before the agreement on the outcome.
	beforeAgreement atomic.Pointer[func()]
	// beforeExchange, nil but in tests (export_test.go), runs in
	// Scatter, Gather, ScatterMatrix and GatherMatrix between the
	// comparison of the graphs and the exchange of their arguments.
	beforeExchange atomic.Pointer[func()]
	// beforeCheckExchange, nil but in tests (export_test.go), runs
	// between a comparison of the graphs that found the windows apart
	// and the exchange of their submissions.
	beforeCheckExchange atomic.Pointer[func()]

	local *scheduler.Scheduler
	c     comm.Comm // private duplicate: transfers never mix with the application's messages
	rank  int
	size  int
	prog  *progress

	mu      sync.Mutex // guards the submission walk
	handles []*Handle  // the live handles, in the order of their ids (the reductions' partial results too); Unregister removes them
	nextID  int        // the next handle's id: ids are never reused; guarded by mu
	// tagLimit is the number of handle ids (handles and reductions'
	// partial results): ids 0 to tagLimit-1, whose transfers take tags 1
	// to tagLimit. maxTag, but in tests (export_test.go).
	tagLimit   int
	registered int // handles the program registered, unregistered ones included; guarded by mu
	closed     bool

	sendCl, recvCl *scheduler.Codelet

	// localArgs is the array the arguments of a local task are built in
	// (submitLocal), reused: the local scheduler keeps none of them.
	// Guarded by mu.
	localArgs []scheduler.Arg
	// taskDones are the callbacks of the local tasks of the graph, for
	// reuse (taskDone).
	taskDones sync.Pool
	// xferPool holds the arguments of the transfers' tasks, for reuse
	// (newXfer).
	xferPool sync.Pool

	// graph is given to every task of the graph on the local scheduler
	// (scheduler.CancelOn); fail ends it with the failure, so that the
	// local tasks that have not started never do.
	graph     context.Context
	stopGraph context.CancelCauseFunc

	failMu sync.Mutex
	failed error               // first failure seen here (local task, a peer's message, a graph mismatch)
	origin string              // the failure's own text when it happened on this rank (see fail); guarded by failMu
	later  string              // the first task of this rank's that failed by itself after the graph had failed elsewhere (it was running): no consequence of that failure, so WaitAll names it too; guarded by failMu
	xfers  map[uint64]inflight // transfers in flight, to end them on a failure and explain a stall; guarded by failMu
	nxfer  uint64
	ending int           // receives the failure canceled that have not ended yet; guarded by failMu
	ended  chan struct{} // made by the failure, closed once the receives it canceled have all ended; guarded by failMu

	peerLeft  error                // the first departure heard of (a rank left WaitAll early, or gave the graph up): no agreement with it; guarded by failMu
	leftAt    int                  // with peerLeft: the fewest steps of the graph check that a departed rank started (0 for one that gave up); guarded by failMu
	mostAt    int                  // the most steps of the graph check that a departed rank started: this rank joins those it has not (joinStarted, finishChecks); guarded by failMu
	leaveEnds map[*int]leaveWaiter // waits a peer's departure ends (endOnLeave); guarded by failMu

	check          graphCheck         // guarded by mu
	xferSeq        uint64             // transfers walked so far; guarded by mu
	walking        *scheduler.Codelet // the codelet of the program's submission being walked (Submit), so that a failure names it as the program's task; guarded by mu
	walkingWaitAll bool               // WaitAll is walking the end of the graph (reductions combined, versions brought back to their owners), so that a failure of those tasks names WaitAll; guarded by mu
	unwaited       int                // submissions since WaitAll last returned nil (the same on every rank); guarded by mu
	closing        atomic.Bool        // Close has begun: this rank's program submits no more (Submit reads it before taking mu, which a comparison of the graphs holds)
	told           atomic.Bool        // a call of the program's returned the graph's failure (reply), or the program gave the graph up (Abandon): Close does not report it again
	closeMu        sync.Mutex         // held through Close, so that a second Close waits for the first
	waitSem        chan struct{}      // holds a token through WaitAll and Close's wait: one rank is at one point of the graph at a time (a channel, so that a WaitAll waiting for it heeds its context)
	trace          traceLog
	// closeTrace is the trace Close writes (WithCloseTrace); nil: none.
	closeTrace *CloseTrace

	progressed atomic.Int64 // tasks and transfers completed: the stall watchdog's clock
	stall      time.Duration
	report     func(string)
	timeout    time.Duration // WaitAll gives up after this long without progress; 0: never
	// idleWarned holds the grids of tiles (p, q, mt, nt) whose idle
	// ranks rank 0 has warned of: a program that registers several
	// grids of one layout (two generations of a plate, its halos) is
	// told once. Guarded by mu.
	idleWarned map[[4]int]bool

	peers   []peerCounts // transfers with each rank, by rank
	ctrlBuf []byte

	// pos is how far this rank got, as it tells a rank that asks
	// (ctrlAsk) from the progress goroutine, without d.mu.
	pos position
	// asked is the number of the last question this rank asked
	// (askPeers) and answers its answers, by rank; guarded by failMu.
	asked   uint64
	answers map[int]peerState
	answer  chan struct{} // capacity 1: an answer came; guarded by failMu
}

// position is how far a rank got, for the ranks that ask (ctrlAsk).
type position struct {
	reached    atomic.Int64 // steps of the graph check started (graphCheck.reached)
	submitted  atomic.Int64 // submissions so far
	agreements atomic.Int64 // agreements on WaitAll's outcome started
	open       atomic.Int64 // tasks of the graph submitted here and not done
	phase      atomic.Int32 // where the program is: a phase* constant
}

// Where a rank's program is, as it answers ctrlAsk.
const (
	phaseOutside   int32 = iota // not in WaitAll: submitting, or elsewhere
	phaseComparing              // in WaitAll, comparing the ranks' graphs
	phaseTasks                  // in WaitAll, waiting for its tasks
	phaseAgreeing               // in WaitAll, agreeing on the outcome
)

// peerState is a rank's answer to ctrlAsk.
type peerState struct {
	reached, agreements int
	text                string
}

// New returns a distributed scheduler over the ranks of c, running this
// rank's tasks on local. It duplicates c (a collective: every rank calls
// New at the same point), so that its transfers never match the
// application's messages. Close it before local.
func New(ctx context.Context, c comm.Comm, local *scheduler.Scheduler, opts ...Option) (*Scheduler, error) {
	if c == nil || local == nil {
		return nil, fmt.Errorf("dist: New: %w: a communicator and a local scheduler are required", comm.ErrInvalidArg)
	}
	dc, err := c.Dup(ctx)
	if err != nil {
		return nil, fmt.Errorf("dist: New: duplicating the communicator: %w", err)
	}
	d := &Scheduler{local: local, c: dc, rank: dc.Rank(), size: dc.Size(), prog: newProgress(), ctrlBuf: make([]byte, ctrlSize), waitSem: make(chan struct{}, 1),
		xfers: map[uint64]inflight{}, stall: defaultStall, tagLimit: maxTag, peers: make([]peerCounts, dc.Size()), report: func(s string) { fmt.Fprintln(os.Stderr, s) }}
	d.graph, d.stopGraph = context.WithCancelCause(context.Background())
	for _, o := range opts {
		o(d)
	}
	d.check.timeout = d.timeout
	d.check.failure = d.failureText
	d.check.endOnLeave = d.endOnLeave
	d.check.departed = d.departed
	d.check.claim = d.claim
	d.check.pos = &d.pos
	d.check.ask = d.askPeers
	d.check.registered = func() int { return d.registered } // the check runs with d.mu held
	d.check.beforeExchange = func() {
		if f := d.beforeCheckExchange.Load(); f != nil {
			(*f)()
		}
	}
	d.sendCl = &scheduler.Codelet{Name: "dist.send", Detached: d.startSend}
	d.recvCl = &scheduler.Codelet{Name: "dist.recv", Detached: d.startRecv}
	if err := d.postCtrl(); err != nil {
		d.stopGraph(err)
		d.prog.stop()
		_ = dc.Free()
		return nil, err
	}
	return d, nil
}

// Rank is this rank's index; Size the number of ranks.
func (d *Scheduler) Rank() int { return d.rank }

// Size is the number of ranks.
func (d *Scheduler) Size() int { return d.size }

// Local is the node-local scheduler that runs this rank's tasks.
func (d *Scheduler) Local() *scheduler.Scheduler { return d.local }

// Stats are a rank's transfer counts: the data messages (one per handle
// version sent to a rank) and their payload bytes, as StarPU-MPI's
// STARPU_COMM_STATS counts them. Control messages are not counted.
type Stats struct {
	MessagesSent     int64 // data messages this rank sent
	BytesSent        int64 // their payload bytes
	MessagesReceived int64 // data messages this rank received
	BytesReceived    int64 // their payload bytes
}

// Stats returns this rank's transfer counts so far, with every rank.
func (d *Scheduler) Stats() Stats {
	var st Stats
	for i := range d.peers {
		st = st.add(d.peers[i].load())
	}
	return st
}

// PeerStats returns this rank's transfer counts so far with each rank,
// indexed by rank: PeerStats()[r].MessagesSent is what this rank sent to
// rank r, and equals rank r's PeerStats()[this rank].MessagesReceived
// once the graph is complete. This rank's own entry is zero.
func (d *Scheduler) PeerStats() []Stats {
	out := make([]Stats, len(d.peers))
	for i := range d.peers {
		out[i] = d.peers[i].load()
	}
	return out
}

func (s Stats) add(o Stats) Stats {
	return Stats{s.MessagesSent + o.MessagesSent, s.BytesSent + o.BytesSent,
		s.MessagesReceived + o.MessagesReceived, s.BytesReceived + o.BytesReceived}
}

// peerCounts are the transfers with one rank.
type peerCounts struct {
	msgsSent, bytesSent, msgsRecv, bytesRecv atomic.Int64
}

func (p *peerCounts) load() Stats {
	return Stats{p.msgsSent.Load(), p.bytesSent.Load(), p.msgsRecv.Load(), p.bytesRecv.Load()}
}

// postCtrl posts the receive of the next control message.
func (d *Scheduler) postCtrl() error {
	req, err := d.c.Irecv(comm.Buf{Bytes: d.ctrlBuf, Type: comm.Uint8}, comm.AnySource, ctrlTag)
	if err != nil {
		return fmt.Errorf("dist: posting the control receive: %w", err)
	}
	d.prog.add(req, d.onCtrl)
	return nil
}

// onCtrl handles a control message (on the progress goroutine).
func (d *Scheduler) onCtrl(st comm.Status, err error) {
	if err != nil {
		d.fail(fmt.Errorf("dist: rank %d: control messages: %w", d.rank, err), "")
		return
	}
	if st.Count == 0 {
		return
	}
	switch d.ctrlBuf[0] {
	case ctrlClose:
		return
	case ctrlFailed:
		d.fail(fmt.Errorf("%w: rank %d: %s", ErrRankFailed, st.Source, d.ctrlBuf[1:st.Count]), "")
	case ctrlLeft, ctrlLeftBroken, ctrlGaveUp:
		var err error
		// A rank that gave up takes part in no step of the graph check.
		reached, place, text := 0, "", d.ctrlBuf[1:st.Count]
		switch d.ctrlBuf[0] {
		case ctrlGaveUp:
			err = brokenFailure{fmt.Errorf("%w: rank %d gave up the graph: %s", ErrRankFailed, st.Source, text)}
		case ctrlLeftBroken:
			reached, place, text = leftMessage(d.ctrlBuf[:st.Count])
			err = brokenFailure{fmt.Errorf("%w: rank %d left %s: %s", ErrRankFailed, st.Source, place, text)}
		default:
			reached, place, text = leftMessage(d.ctrlBuf[:st.Count])
			err = fmt.Errorf("%w: rank %d left %s: %s", ErrRankFailed, st.Source, place, text)
		}
		d.fail(err, "")
		d.failMu.Lock()
		if d.peerLeft == nil {
			// The first departure heard of: later ones are mostly
			// its consequences (ranks leaving WaitAll on hearing it).
			d.peerLeft, d.leftAt = err, reached
		}
		d.leftAt = min(d.leftAt, reached)
		if reached < math.MaxInt {
			d.mostAt = max(d.mostAt, reached)
		}
		// The waits for the steps the sender never started end; those
		// for steps it started go on: they complete, and ending them
		// would leave its collective unmatched (under MPI, for its
		// MPI_Finalize to wait for).
		var ends []context.CancelCauseFunc
		for key, w := range d.leaveEnds {
			if w.step >= reached {
				ends = append(ends, w.cancel)
				delete(d.leaveEnds, key)
			}
		}
		err = d.peerLeft
		d.failMu.Unlock()
		for _, end := range ends {
			end(err)
		}
	case ctrlAsk:
		if st.Count >= 1+8 {
			d.tell(st.Source, d.ctrlBuf[1:1+8])
		}
	case ctrlTell:
		if st.Count >= ctrlTellHead {
			d.heard(st.Source, d.ctrlBuf[:st.Count])
		}
	}
	if err := d.postCtrl(); err != nil {
		d.fail(err, "")
	}
}

// fail records the first failure. One that happened on this rank has
// here, its own text (without the rank, which the others add): it is kept
// for the graph check (failureText) and announced to every other rank;
// here is "" for a failure heard of. Either way the transfers in flight,
// whose peers may never take part, fail with it, and the graph's tasks
// on the local scheduler that have not started (computations and
// transfers alike) never do: ending d.graph cancels them
// (scheduler.CancelOn), so that WaitAll returns once the tasks running
// now have, rather than after running the rest of a graph that has
// failed. Only the graph's tasks are canceled, not other work of the
// local scheduler.
//
// A receive still posted would write its buffer whenever its message
// came, after its task, WaitAll and the caller are done with the buffer:
// it is canceled (comm.Canceler), and its task ends with its request
// (startRecv), once canceled or, if its message had matched, received
// whole. Neither waits for the peer to act again (a canceled receive
// completes locally, on MPI too; a matched one only takes in data
// already on its way), so waiting for them (awaitCanceled) cannot hang. A send's task ends at once, as before:
// its request may never complete (the peer canceled its receive, or
// never posts one), and waiting for it would hang WaitAll; MPI
// deprecates canceling sends, and comm/local cannot. A send only reads
// its buffer: the local scheduler cancels the tasks that would write it
// after a failed detached reader, and what a later write by the caller
// could spoil is a message of the failed graph, which its receiver
// either canceled or receives into a buffer its own WaitAll still holds.
func (d *Scheduler) fail(err error, here string) {
	d.failMu.Lock()
	if d.failed != nil {
		d.failMu.Unlock()
		return
	}
	d.failed, d.origin = err, here
	type canceled struct {
		key uint64
		req comm.Canceler
	}
	var ends []func(error)
	var cancels []canceled
	for key, x := range d.xfers {
		if c, ok := x.req.(comm.Canceler); ok {
			x.canceled = true
			d.xfers[key] = x
			cancels = append(cancels, canceled{key, c})
			continue
		}
		ends = append(ends, x.done)
		delete(d.xfers, key)
	}
	d.ending = len(cancels)
	d.ended = make(chan struct{})
	if d.ending == 0 {
		close(d.ended)
	}
	d.failMu.Unlock()
	d.stopGraph(err)
	if here != "" {
		d.announce([]byte{ctrlFailed}, here)
	}
	for _, c := range cancels {
		if cerr := c.req.Cancel(); cerr != nil {
			// The backend could not cancel it (MPI_Cancel failed): end
			// the task now rather than wait for a message that may
			// never come.
			d.abandon(c.key, err)
		}
	}
	for _, done := range ends {
		done(err)
	}
}

// abandon ends the task of the canceled receive key with err at once,
// if its request has not ended it meanwhile.
func (d *Scheduler) abandon(key uint64, err error) {
	d.failMu.Lock()
	x, ok := d.xfers[key]
	if ok {
		d.endLocked(key, x)
	}
	d.failMu.Unlock()
	if ok {
		x.done(err)
	}
}

// endLocked forgets the transfer key in flight, counting a canceled
// receive as ended; d.failMu is held.
func (d *Scheduler) endLocked(key uint64, x inflight) {
	delete(d.xfers, key)
	if x.canceled {
		if d.ending--; d.ending == 0 {
			close(d.ended)
		}
	}
}

// awaitCanceled returns once the receives the failure canceled have
// ended (fail), so that no receive writes a buffer after the call that
// waits returns: at once if there was no failure or nothing to cancel.
//
// A canceled receive whose message had started to arrive ends when the
// rest has; if the link to its sender is cut, it never does (a rank of
// a job whose network failed waited here for ever). So it waits at most
// the stall timeout (or defaultStall without one); then it ends the
// tasks of the receives left, and returns an error that says their
// buffers may still be written, should their data ever arrive.
func (d *Scheduler) awaitCanceled() error {
	d.failMu.Lock()
	ch := d.ended
	d.failMu.Unlock()
	if ch == nil {
		return nil
	}
	bound := d.timeout
	if bound <= 0 {
		bound = defaultStall
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
	}
	d.failMu.Lock()
	var left []uint64
	var what []string
	for key, x := range d.xfers {
		if x.canceled {
			left = append(left, key)
			what = append(what, x.describe())
		}
	}
	d.failMu.Unlock()
	if len(left) == 0 {
		return nil // they ended meanwhile
	}
	err := fmt.Errorf("dist: rank %d: %d canceled receives had begun to arrive and did not end within %v (a link cut mid-message?): %s; their buffers may still be written if their data arrive",
		d.rank, len(left), bound, strings.Join(what, "; "))
	for _, key := range left {
		d.abandon(key, err)
	}
	return err
}

// leave ends this rank's WaitAll early with err: the graph fails here
// with cause (here is its own words, as for fail), and the other ranks,
// which would wait for this one in the outcome's agreement and in the
// graph check, are told it left (ctrlLeft) and how many steps of the
// graph check it started: it starts none afterwards, so that their
// waits for later steps end at once, while those it started complete.
// (A later WaitAll on this rank returns the failure without comparing.)
// It returns err once the receives the failure canceled have ended: no
// buffer changes after WaitAll returns.
func (d *Scheduler) leave(err, cause error, here string) error {
	d.fail(cause, here)
	kind := ctrlLeft
	if errors.Is(cause, comm.ErrBroken) {
		// Left because a rank gave up (or the communicator broke): the
		// others' failure is that too, whichever message they hear first.
		kind = ctrlLeftBroken
	}
	if d.size > 1 {
		// (On one rank WaitAll may be called again.)
		// What a later WaitAll here returns. A failure of another rank
		// (it left WaitAll, a task of its failed) names that rank: this
		// rank left because of it, and saying that this one left would
		// name the wrong rank.
		left := fmt.Errorf("the graph failed when this rank (rank %d) left an earlier WaitAll: %w", d.rank, cause)
		if errors.Is(cause, ErrRankFailed) {
			left = fmt.Errorf("the graph failed in an earlier WaitAll: %w", cause)
		}
		d.mu.Lock()
		reached := d.check.leave(left)
		d.mu.Unlock()
		head := binary.LittleEndian.AppendUint64([]byte{kind}, uint64(reached))
		d.announce(head, err.Error())
	}
	if aerr := d.awaitCanceled(); aerr != nil {
		return fmt.Errorf("%w (and %v)", err, aerr)
	}
	return err
}

// quitLocked records that this rank left the graph in call (Scatter,
// Gather, ScatterMatrix, GatherMatrix) with cause: the call's
// comparison of the graphs or exchange of arguments failed here (a
// stall, this rank's context ended, the communicator failed), so that
// it abandoned, or never joins, a collective the other ranks make. As
// for a rank that left WaitAll (leave), the graph fails with cause
// (here is its own words, as for fail; "" for a failure heard of), a
// later WaitAll on this rank returns it without comparing, and the
// other ranks are told that this rank left and how many steps of the
// graph check it started (ctrlLeft, before the caller abandons its
// collective: under MPI that breaks the communicator here), so that
// their waits for the steps it never starts end at once rather than at
// the stall timeout. It does not wait for the receives the failure
// canceled: the call does (settled), once d.mu is released. d.mu is
// held.
func (d *Scheduler) quitLocked(call string, cause error, here string) {
	d.fail(cause, here)
	if d.size == 1 || d.check.left != nil {
		return
	}
	left := fmt.Errorf("the graph failed when this rank (rank %d) left %s: %w", d.rank, call, cause)
	if errors.Is(cause, ErrRankFailed) {
		left = fmt.Errorf("the graph failed in an earlier %s: %w", call, cause)
	}
	reached := d.check.leave(left)
	kind := ctrlLeft
	if errors.Is(cause, comm.ErrBroken) {
		kind = ctrlLeftBroken
	}
	head := binary.LittleEndian.AppendUint64([]byte{kind}, uint64(reached))
	d.announce(head, call+"\x00"+cause.Error())
}

// brokeWorld reports whether ctx ended because the in-process world
// broke: a rank returned, which cancels every rank's context with the
// break as its cause.
func brokeWorld(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), comm.ErrBroken)
}

// brokenAnswer is the answer of call (Submit) when its error err is
// ctx's end and the world's break ended ctx (brokeWorld): why the rank
// that broke it returned (it left WaitAll, or the break naming its
// failure), as WaitAll answers then and as the ranks that heard it
// before the break do, not "context canceled" wrapping the break. Any
// other error is returned as it is.
func (d *Scheduler) brokenAnswer(ctx context.Context, call string, err error) error {
	if err == nil || !errors.Is(err, context.Canceled) || !brokeWorld(ctx) {
		return err
	}
	// Not d.failure(): this rank's own, the canceled context, may be it.
	why := d.heardDeparture()
	if why == nil {
		why = context.Cause(ctx)
	}
	return fmt.Errorf("dist: %s on rank %d: %w", call, d.rank, why)
}

// rankFailed makes an error that is comm.ErrBroken - the communicator
// broke because a rank failed or returned: under comm/local, a
// consequence the launcher cancels the other ranks with, which a rank
// may meet in a transfer or a wait before it hears the failure's own
// message - also ErrRankFailed, so that errors.Is(err, ErrRankFailed)
// holds whichever way a rank learns of another's failure.
func rankFailed(err error) error {
	if err == nil || !errors.Is(err, comm.ErrBroken) || errors.Is(err, ErrRankFailed) {
		return err
	}
	return brokenFailure{err}
}

// reply is what a call of the program's (Submit, WaitAll, Scatter,
// Gather, ScatterMatrix, GatherMatrix, Unregister, Flush) returns for
// its error err: rankFailed(err). before is the graph's failure as the
// call began (d.failure()), or nil. An error returned once the graph has
// failed, but for a refusal of the call's own input, tells the program
// of the failure (told), which Close then does not report again, when
// the failure came during the call (the call failed with the graph: its
// own departure, or what it heard meanwhile) or the error carries the
// failure known before (carries). Any other error, such as the call's
// own context ending after the graph had failed, leaves it untold.
func (d *Scheduler) reply(before, err error) error {
	err = rankFailed(err)
	if err != nil && !refusal(err) && d.failure() != nil && (before == nil || carries(err, before)) {
		d.told.Store(true)
	}
	return err
}

// carries reports whether err tells the program of the graph's failure
// f (see reply): err wraps f or quotes it (a departure heard of is a
// value of its own, in the same words); or err is the communicator's
// breaking, the failure's consequence (rankFailed); or err is one of
// the kinds the graph's failure reaches the program as (ErrRankFailed,
// as WaitAll's agreed outcome, which names the failure in the failing
// rank's words; ErrGraphMismatch; ErrStalled) and not the call's own
// context ending, which may mention another rank's departure heard
// meanwhile but not f.
func carries(err, f error) bool {
	switch {
	case errors.Is(err, f), strings.Contains(err.Error(), f.Error()), errors.Is(err, comm.ErrBroken):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	for _, k := range []error{ErrRankFailed, ErrGraphMismatch, ErrStalled} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// refusal reports whether err refuses a call's input (a bad argument, a
// handle of another scheduler, a rank outside the communicator, a call
// from a task's code, a closed scheduler) rather than report a failure
// of the graph.
func refusal(err error) bool {
	if errors.Is(err, ErrRankFailed) {
		return false
	}
	for _, r := range []error{comm.ErrInvalidArg, ErrForeignHandle, ErrBadRank, ErrClosed, scheduler.ErrInTask} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// brokenFailure is an error that is both ErrRankFailed and
// comm.ErrBroken, whichever of the two it wraps. It is the failure of a
// rank that gave up the graph (Abandon), as the other ranks hear of it,
// directly (ctrlGaveUp) or from a rank that left WaitAll on hearing it
// (ctrlLeftBroken): that rank takes no further part in the
// communicator's work, so that launchers (comm/local.Run) see the errors
// it causes as consequences of its own. It is also a broken
// communicator met before any such message (rankFailed). Its text is
// the error's.
type brokenFailure struct{ error }

// Is reports ErrRankFailed and comm.ErrBroken as well as what the error
// wraps.
func (e brokenFailure) Is(target error) bool {
	return target == ErrRankFailed || target == comm.ErrBroken
}

// Unwrap returns the failure.
func (e brokenFailure) Unwrap() error { return e.error }

// Abandon ends this rank's part of the graph because its program gives
// up on it (cause says why: the error its function returns, a panic):
// the graph fails here, and the other ranks, which would wait for this
// one in the graph's transfers and collectives, are told, so that their
// Submit and WaitAll return ErrRankFailed naming this rank and cause at
// once instead of waiting for it or reporting that the ranks submitted
// different graphs. A later Close then does not wait for the tasks as
// WaitAll does. It returns once the receives the failure canceled have
// ended. runtimeview calls it for a rank whose function fails, before
// the rank's Close; after the graph failed already, or after Close, it
// does nothing.
func (d *Scheduler) Abandon(cause error) {
	if cause == nil {
		cause = errors.New("no reason given")
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	// The program has the cause: Close does not report the failure.
	d.told.Store(true)
	if closed || d.failure() != nil {
		return
	}
	// One message (not ctrlFailed, then this): a rank that sees the
	// communicator break as a consequence hears the cause in the same
	// pass of its progress loop (WaitAll's sync).
	d.fail(fmt.Errorf("dist: rank %d gave up the graph: %w", d.rank, cause), "")
	d.announce([]byte{ctrlGaveUp}, cause.Error())
	_ = d.awaitCanceled() // the program's failure is what it reports
}

// A leaveWaiter is a wait that a peer's departure ends (endOnLeave).
type leaveWaiter struct {
	cancel context.CancelCauseFunc
	// step is the step of the graph check waited for (graphCheck), or
	// agreementStep: a departure ends the wait if the rank that departed
	// had not started step.
	step int
}

// endOnLeave returns a context derived from ctx that ends, with the
// departure as its cause (the first departure heard of, peerLeft), once
// a rank that never starts step is known to have departed - at once if
// one has - rather than at the stall timeout, or never. A rank that left
// WaitAll early told how many steps of the graph check it started
// (ctrlLeft): the waits for those go on, as they complete, and ending
// one would leave that rank's collective unmatched (for MPI_Finalize to
// wait for); the waits for later steps end, and so does WaitAll's
// agreement (agreementStep), which it never joins. A rank that gave the
// graph up (Abandon) ends every wait. stop releases the context.
func (d *Scheduler) endOnLeave(ctx context.Context, step int) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	key := new(int)
	d.failMu.Lock()
	left := d.departedLocked(step)
	if left == nil {
		if d.leaveEnds == nil {
			d.leaveEnds = map[*int]leaveWaiter{}
		}
		d.leaveEnds[key] = leaveWaiter{cancel, step}
	}
	d.failMu.Unlock()
	if left != nil {
		cancel(left)
	}
	return ctx, func() {
		d.failMu.Lock()
		delete(d.leaveEnds, key)
		d.failMu.Unlock()
		cancel(nil)
	}
}

// departed returns the departure that rules out step of the graph check
// (a rank that never starts it departed, as for endOnLeave), or nil.
func (d *Scheduler) departed(step int) error {
	d.failMu.Lock()
	defer d.failMu.Unlock()
	return d.departedLocked(step)
}

// claim returns the departure that rules out step, a comparison of the
// graph check, or nil once it recorded step as started (d.pos, which
// ctrlAsk's answers give), under failMu, where departures are heard: a
// rank that left and asks how far this one got (joinStarted) is told of
// every comparison this rank started before it heard the departure.
func (d *Scheduler) claim(step int) error {
	d.failMu.Lock()
	defer d.failMu.Unlock()
	if err := d.departedLocked(step); err != nil {
		return err
	}
	d.pos.reached.Store(int64(step + 1))
	return nil
}

// joinStarted, on a rank that left WaitAll without starting the
// comparison of the graphs that comes next (its context had ended),
// asks the other ranks how far they got and, if they all had started
// that comparison before they heard of the departure (or, on two ranks,
// the other rank left after starting it), starts it too (join),
// so that the other rank's collective does not stay unmatched: under
// MPI, it would keep MPI_Finalize waiting (comm/mpi's ErrUnfinalized).
// Close waits for it (finishChecks).
func (d *Scheduler) joinStarted() {
	d.mu.Lock()
	step := 2 * d.check.compared
	d.mu.Unlock()
	target := 0
	if d.size == 2 {
		// The other rank left after starting these (then it never
		// starts step if it left before it).
		d.failMu.Lock()
		target = d.mostAt
		d.failMu.Unlock()
	}
	if d.size > 2 || d.departed(step) == nil {
		// Only the comparisons every other rank started: one that some
		// rank never starts stays unmatched whatever this rank does,
		// and Close would wait for it in vain.
		answers, _ := d.askAll()
		least := math.MaxInt
		for r := range d.size {
			if a, ok := answers[r]; ok {
				least = min(least, a.reached)
			} else if r != d.rank {
				least = 0
			}
		}
		if least < math.MaxInt {
			target = max(target, least)
		}
	}
	d.mu.Lock()
	d.check.joinUpTo(d.c, d.rank, target)
	d.mu.Unlock()
}

// finishChecks, at Close, first joins, on two ranks, the comparisons of
// the graphs that the other rank, which left the graph, started (in
// Submit, Unregister, Flush, a collective or WaitAll, one it then gave
// up) and this rank has not: the departed rank's stays in flight, and
// under MPI would keep MPI_Finalize waiting. Then it waits for the comparisons it joined
// (here and in joinStarted), at most the stall timeout (or defaultStall
// without one): the rank that started them is inside them, and freeing
// the communicator would drop one still queued on this rank. It
// returns an error if one did not complete.
func (d *Scheduler) finishChecks() error {
	if d.size < 2 {
		return nil
	}
	d.prog.sync() // hear the departures already delivered
	d.mu.Lock()
	exchange := d.check.exchange
	d.mu.Unlock()
	if exchange != nil {
		// Bounded by the stall timeout (settle).
		<-exchange
	}
	d.failMu.Lock()
	most := d.mostAt
	d.failMu.Unlock()
	d.mu.Lock()
	if d.size == 2 {
		// The other rank is the one that departed, inside the
		// comparisons it started. (With more ranks, one that never
		// starts them may have closed: they stay unmatched whatever
		// this rank does, and it would wait for them in vain.)
		d.check.joinUpTo(d.c, d.rank, most)
	}
	reqs := d.check.given
	d.check.given = nil
	d.mu.Unlock()
	if len(reqs) == 0 {
		return nil
	}
	bound := d.timeout
	if bound <= 0 {
		bound = defaultStall
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for _, r := range reqs {
		if _, err := r.Wait(ctx); err != nil && ctx.Err() != nil {
			return fmt.Errorf("%w: a comparison of the ranks' graphs that this rank joined after the graph failed, as another rank had started it, did not complete within %v", ErrStalled, bound)
		}
	}
	return nil
}

// departure returns the first departure heard of (peerLeft), or nil.
func (d *Scheduler) departure() error {
	d.failMu.Lock()
	defer d.failMu.Unlock()
	return d.peerLeft
}

// heardDeparture is departure after the progress goroutine has handled
// every control message delivered so far: a rank that left WaitAll says
// so before its return breaks the communicator, and a caller that saw
// the break may not have heard the news yet.
func (d *Scheduler) heardDeparture() error {
	d.prog.sync()
	return d.departure()
}

// departedLocked is departed with d.failMu held.
func (d *Scheduler) departedLocked(step int) error {
	if d.peerLeft != nil && step >= d.leftAt {
		return d.peerLeft
	}
	return nil
}

// leftMessage decodes a ctrlLeft or ctrlLeftBroken message: the steps
// of the graph check its sender started, the call it left (WaitAll,
// unless the text names another before a zero byte), and its text. A
// message too short for the steps (never sent) counts as one whose
// sender started every step: no wait of the graph check ends for it.
func leftMessage(msg []byte) (reached int, place string, text []byte) {
	if len(msg) < ctrlLeftHead {
		return math.MaxInt, "WaitAll", msg[1:]
	}
	reached, text = int(min(binary.LittleEndian.Uint64(msg[1:ctrlLeftHead]), math.MaxInt)), msg[ctrlLeftHead:]
	if i := bytes.IndexByte(text, 0); i >= 0 {
		return reached, string(text[:i]), text[i+1:]
	}
	return reached, "WaitAll", text
}

// announce sends a control message to every other rank: head (the
// kind, and what follows it before the text), then text, cut so that
// the message fits ctrlSize.
func (d *Scheduler) announce(head []byte, text string) {
	msg := make([]byte, len(head), ctrlSize)
	copy(msg, head)
	if len(text) > ctrlSize-len(head) {
		text = text[:ctrlSize-len(head)]
	}
	msg = append(msg, text...)
	for r := range d.size {
		if r == d.rank {
			continue
		}
		if req, err := d.c.Isend(comm.Buf{Bytes: msg, Type: comm.Uint8}, r, ctrlTag); err == nil {
			d.prog.add(req, func(comm.Status, error) {})
		}
	}
}

// failureText describes the failure recorded so far ("" for none) for
// the agreement on WaitAll's outcome: the failure that happened on this
// rank (here) - the graph's, or a task's of this rank that failed by
// itself after the graph had failed elsewhere -, or the failure this rank
// heard of.
func (d *Scheduler) failureText() (string, bool) {
	d.failMu.Lock()
	defer d.failMu.Unlock()
	switch {
	case d.origin != "":
		return d.origin, true
	case d.later != "":
		return d.later, true
	case d.failed != nil:
		return d.failed.Error(), false
	}
	return "", false
}

// failure returns the failure recorded so far, or nil.
func (d *Scheduler) failure() error {
	d.failMu.Lock()
	defer d.failMu.Unlock()
	return d.failed
}

// Close ends the scheduler. Tasks submitted since WaitAll last returned
// nil are not lost: Close first waits for them as WaitAll does (so it is
// collective then, as the runtime view's Close is: every rank closes at
// the same point of its submissions) and returns WaitAll's error. After a
// failure (a task, a rank that left WaitAll early, a stall) it ends the
// transfers in flight instead and waits for this rank's tasks to drain.
// It returns the failure if tasks were pending and no call has reported
// it to the program (the program returns or closes without WaitAll
// after Submit succeeded, and the failure came after); a failure that a
// call returned already (Submit, WaitAll, Scatter, Gather,
// ScatterMatrix, GatherMatrix, Unregister, Flush; the program's own
// cause passed to Abandon) is not reported again, nor are the drained
// tasks' errors, its consequences: as the local scheduler's Close
// returns only what its WaitAll did not. Then it stops the progress loop and
// frees the private communicator. It does not close the local scheduler.
// Closing twice is a no-op. With WithCloseTrace it writes the merged
// trace after that wait, or this rank's own trace once its tasks have
// drained (see WithCloseTrace).
//
// Close called from another goroutine while the program still submits
// or waits on this rank ends that rank's submissions where they are: a
// WaitAll in progress completes first (Close then waits for what it did
// not), and from the moment Close begins Submit, Register, Update,
// Unregister, Flush and a WaitAll not yet started return ErrClosed on
// this rank, so that the graph check tells the other ranks where this
// rank stopped rather than two waits of one rank starting comparisons
// that the other ranks join only once.
func (d *Scheduler) Close() error {
	// A task's code that calls Close would wait here for the program's
	// WaitAll, which waits for that task: refused instead, and the
	// scheduler closed without waiting for the graph (it fails).
	inTask := d.local.CheckNotInTask("dist Close")
	if inTask == nil {
		d.closeMu.Lock()
	} else if !d.closeMu.TryLock() {
		// The Close in progress may be waiting for this task.
		return fmt.Errorf("dist: Close on rank %d: %w (another Close is in progress)", d.rank, inTask)
	}
	defer d.closeMu.Unlock()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	// A difference of the graphs found now is that this rank stopped
	// submitting, not that its program called WaitAll.
	d.closing.Store(true)
	d.check.closing = true
	d.mu.Unlock()
	var errs []error
	if inTask != nil {
		errs = append(errs, fmt.Errorf("dist: Close on rank %d did not wait for the graph: %w", d.rank, inTask))
	} else {
		d.waitSem <- struct{}{} // a WaitAll of the program's in progress ends first
		d.mu.Lock()
		pending := d.unwaited > 0
		d.mu.Unlock()
		if pending && d.failure() == nil {
			if err := d.waitAll(context.Background()); err != nil {
				errs = append(errs, fmt.Errorf("dist: Close: %w", err))
			}
		}
		<-d.waitSem
	}
	d.mu.Lock()
	pending := d.unwaited > 0
	d.mu.Unlock()
	if err := d.failure(); err != nil && pending && !d.told.Load() {
		// The graph failed (a task here or on another rank, a rank that
		// left) with tasks pending, and no call told the program: it
		// returned, or closes, without WaitAll, which would have
		// reported the failure.
		errs = append(errs, fmt.Errorf("dist: Close on rank %d: the graph failed, and no call of the program's reported it: %w", d.rank, err))
	}
	merged, why := false, ""
	if d.closeTrace != nil {
		var err error
		merged, why, err = d.mergeTraceAtClose(len(errs) == 0)
		if err != nil {
			errs = append(errs, fmt.Errorf("dist: Close: %w", err))
		}
	}
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	failed := d.failure() != nil
	// Transfers still in flight would never complete once the progress
	// loop stops: end them, so that the local scheduler can drain, and
	// let the canceled receives end while the loop still runs.
	d.fail(fmt.Errorf("dist: rank %d: %w", d.rank, ErrClosed), "")
	if err := d.awaitCanceled(); err != nil {
		errs = append(errs, fmt.Errorf("dist: Close: %w", err))
	}
	if failed {
		_ = d.local.WaitAll(context.Background())
	}
	if d.closeTrace != nil && !merged {
		// Once this rank's tasks have drained, so that its trace holds
		// them all.
		if err := d.writeOwnTraceAtClose(why); err != nil {
			errs = append(errs, err)
		}
	}
	if err := d.finishChecks(); err != nil {
		errs = append(errs, fmt.Errorf("dist: Close on rank %d: %w", d.rank, err))
	}
	// End this rank's own control receive with a message to itself. A
	// communicator broken by the failure already reported (a rank that
	// returned) has ended it; that is no news.
	consequence := func(err error) bool { return failed && errors.Is(err, comm.ErrBroken) }
	if err := comm.Send(context.Background(), d.c, []uint8{ctrlClose}, d.rank, ctrlTag); err != nil && !consequence(err) {
		errs = append(errs, fmt.Errorf("dist: Close: %w", err))
	}
	d.prog.stop()
	if err := d.c.Free(); err != nil && !errors.Is(err, comm.ErrFreed) && !consequence(err) {
		errs = append(errs, fmt.Errorf("dist: Close: %w", err))
	}
	return errors.Join(errs...)
}

// WaitAll waits until this rank's part of the distributed graph is done,
// then brings every handle's latest version back to its owner (so that
// each owner's memory holds the final data) and agrees with the other
// ranks on the outcome: it returns nil on every rank, or on every rank an
// error naming each rank where a task failed. Every rank calls it at the
// same point of its submission sequence.
//
// Once this rank knows that the graph failed (a task failed here or on
// another rank, a rank left WaitAll or gave the graph up), the graph's
// tasks on its local scheduler that have not started are canceled
// (scheduler.CancelOn: they complete with scheduler.ErrCanceled and the
// failure, without running); those running finish, and WaitAll returns
// the failure as soon as they have. Other work on the local scheduler is
// not affected.
func (d *Scheduler) WaitAll(ctx context.Context) (err error) {
	// Before waiting for another WaitAll or Close's wait, which would
	// wait for the task calling it.
	if err := d.local.CheckNotInTask("dist WaitAll"); err != nil {
		return fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, err)
	}
	select {
	case d.waitSem <- struct{}{}:
	default:
		// Another WaitAll, or Close's wait, holds this rank: wait for it
		// while ctx lasts. The rank does not leave the graph then (the
		// other wait goes on); a WaitAll that gets to wait with ctx
		// ended leaves it, as it did.
		select {
		case d.waitSem <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("dist: WaitAll on rank %d: waiting for this rank's other WaitAll or Close to end its wait: %w", d.rank, context.Cause(ctx))
		}
	}
	defer func() { <-d.waitSem }()
	d.mu.Lock()
	closing := d.closing.Load() && !d.closed
	d.mu.Unlock()
	if closing {
		return fmt.Errorf("dist: WaitAll on rank %d: %w: Close was called on this rank (from another goroutine?) and waits for the graph itself", d.rank, ErrClosed)
	}
	return d.waitAll(ctx)
}

// waitAll is WaitAll; d.waitSem holds its token.
func (d *Scheduler) waitAll(ctx context.Context) (err error) {
	before := d.failure()
	defer func() { err = d.reply(before, err) }()
	if d.size > 1 {
		// Hear of the departures already delivered first: a comparison
		// that a rank which left never joins is then not started (its
		// collective would stay unmatched: under MPI, for
		// MPI_Finalize to wait for).
		d.prog.sync()
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return fmt.Errorf("dist: WaitAll: %w", ErrClosed)
	}
	d.pos.phase.Store(phaseComparing)
	defer d.pos.phase.Store(phaseOutside)
	if err := d.check.diverged; err != nil {
		d.mu.Unlock()
		return fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, err)
	}
	if err := d.check.left; err != nil {
		d.mu.Unlock()
		// This rank left the graph in an earlier call. A Submit,
		// Unregister or Flush whose comparison stalled (recordLocked)
		// did not wait for the receives the failure canceled, as
		// WaitAll's own departure (leave) and the collectives
		// (settled) do: no buffer changes after WaitAll returns.
		return d.settled(fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, err))
	}
	if err := ctx.Err(); err != nil && d.size > 1 && !brokeWorld(ctx) {
		// The program's context ended before the comparison: this rank
		// leaves WaitAll without starting it, and tells the others how
		// far it got, as when its wait ends. A comparison started only
		// to be given up at once is a collective that this rank never
		// completes: under MPI, freeing the communicator at Close drops
		// it if it is still queued on this rank's engine of
		// non-blocking collectives, and a rank that joined it (one
		// whose context also ended does the same) is left inside it,
		// for MPI_Finalize to refuse (comm/mpi's ErrUnfinalized).
		d.mu.Unlock()
		err := fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, err)
		err = d.leave(err, err, "")
		// Another rank may have started that comparison before it
		// heard of the departure: join it then.
		d.joinStarted()
		_ = d.local.WaitAll(ctx)
		return err
	}
	// Compare the last submissions before waiting: ranks whose graphs
	// differ would wait for each other's data for ever.
	cerr := d.check.flush(ctx, d.c)
	if cerr == nil {
		cerr = d.check.settle(ctx, d.c)
	}
	if cerr != nil {
		d.mu.Unlock()
		if errors.Is(cerr, comm.ErrBroken) {
			// A rank that left WaitAll early said so before its return
			// broke the communicator: hear it, and name that instead.
			left := d.heardDeparture()
			if left != nil {
				cerr = left
			}
			if ferr := d.failure(); ferr != nil && left == nil {
				// The graph had failed already (a task here, or a failure
				// heard of), and a rank returned for it without saying
				// it left WaitAll: the failure is the answer.
				cerr = fmt.Errorf("%w (then comparing the graphs: %w)", ferr, cerr)
			}
			if err := ctx.Err(); err != nil && !errors.Is(context.Cause(ctx), comm.ErrBroken) {
				// This rank's own context ended too: that is its answer
				// (unless a failed in-process rank ended it, the failure
				// heard of).
				cerr = fmt.Errorf("%w (and meanwhile %w)", err, cerr)
			}
		}
		// A stalled comparison names the ranks it waited for
		// (askPeers): this rank's transfers do not explain it.
		err := d.leave(fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, cerr), cerr, "")
		_ = d.local.WaitAll(ctx)
		return err
	}
	var werr error
	d.walkingWaitAll = true
	for _, h := range d.handles {
		if h.phase != nil {
			werr = errors.Join(werr, d.endReduxLocked(ctx, h))
		}
	}
	for _, h := range d.handles {
		if h.writer != h.owner && !h.holds(h.owner) && !h.isPartial {
			werr = errors.Join(werr, d.transferLocked(ctx, h, h.writer, h.owner))
		}
	}
	d.walkingWaitAll = false
	if werr != nil {
		d.mu.Unlock()
		err := d.leave(fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, werr), werr, werr.Error())
		_ = d.local.WaitAll(ctx)
		return err
	}
	d.mu.Unlock()
	d.pos.phase.Store(phaseTasks)
	wctx, wcancel := context.WithCancelCause(ctx)
	stop := d.watch(wcancel)
	lerr := d.local.WaitAll(wctx)
	stop()
	gaveUp := wctx.Err() != nil // ctx ended, or the stall timeout
	// A deadline or the stall timeout is explained (what each task
	// waits for); a cancellation (the program's, an interrupt) is what
	// the program asked for, and a report per rank would read as a hang.
	cause := context.Cause(wctx)
	canceled := errors.Is(cause, context.Canceled)
	wcancel(nil)
	if lerr != nil && gaveUp && brokeWorld(ctx) {
		// In process, a rank that returned broke the world, which ended
		// every rank's context: why it returned (it left WaitAll, or told
		// of a failure) is the answer, as on the ranks that heard it
		// before the break, not "context canceled" wrapping the break.
		err := d.heardDeparture()
		if err == nil {
			err = d.failure()
		}
		if err == nil {
			err = context.Cause(ctx)
		}
		err = fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, err)
		if d.size > 1 {
			err = d.leave(err, err, "")
		}
		return err
	}
	if lerr != nil && gaveUp {
		err := fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, lerr)
		if ctx.Err() == nil && errors.Is(cause, ErrStalled) {
			// The watchdog ended the wait, not the program: the error is
			// the stall (ErrStalled), not the cancellation of wctx that
			// the local scheduler reports (context.Canceled).
			err = fmt.Errorf("dist: WaitAll on rank %d: %w (%d tasks of the graph not done here)", d.rank, cause, d.pos.open.Load())
		}
		if !canceled {
			err = fmt.Errorf("%w; %s", err, d.explain())
		}
		if d.size > 1 {
			// The graph cannot go on without this rank: it has failed
			// here too. (On one rank WaitAll may be called again.)
			err = d.leave(err, err, "")
		}
		return err
	}
	// Each rank tells the others the failure that happened on it, in its
	// own words (they add "rank R: "); a rank that only heard of another
	// rank's failure says nothing, as its local errors (transfers ended,
	// tasks canceled) are that failure's consequences, which the failing
	// rank names.
	ferr := d.failure()
	msg := ""
	switch text, here := d.failureText(); {
	case here:
		msg = text
	case ferr != nil:
	case lerr != nil:
		msg = lerr.Error()
	}
	if lerr == nil {
		lerr = ferr
	}
	actx, stopLeave := d.endOnLeave(ctx, agreementStep)
	defer stopLeave()
	// A rank that never comes to the agreement (it returned without
	// WaitAll, or hangs) must not hang this one: the stall timeout bounds
	// the wait as it bounds the graph's.
	actx, stopBound := d.stallBound(actx, "to agree on the outcome of WaitAll (a rank returned without WaitAll, or is stuck)")
	defer stopBound()
	if left := d.departure(); left != nil {
		return d.leftAnswer(ctx, left)
	}
	if f := d.beforeAgreement.Load(); f != nil {
		(*f)()
	}
	if err := ctx.Err(); err != nil && d.size > 1 && !brokeWorld(ctx) {
		// The program's context ended though the comparison and the
		// tasks here completed (a comparison whose other ranks had
		// all joined completes with an ended context): this rank
		// leaves WaitAll, as when the wait ends, so that the others
		// hear that it left. The agreement, a collective with a context
		// already ended, would be abandoned: the communicator broken
		// without a word of why.
		err := fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, err)
		return d.leave(err, err, "")
	}
	d.pos.phase.Store(phaseAgreeing)
	d.pos.agreements.Add(1)
	all, err := comm.AllGatherValues(actx, d.c, msg)
	if err != nil && errors.Is(err, comm.ErrBroken) {
		// A rank that left WaitAll said so before its return broke the
		// communicator; its message may be delivered and not yet
		// handled (the progress goroutine and this collective race for
		// the news): hear it, and name that departure instead.
		if left := d.heardDeparture(); left != nil {
			return d.leftAnswer(ctx, left)
		}
	}
	if err != nil {
		if cause := context.Cause(actx); cause != nil && ctx.Err() == nil {
			err = cause // a peer left, or the stall timeout
			if errors.Is(err, ErrStalled) {
				err = fmt.Errorf("%w; %s", err, d.askPeers(agreementStep))
			}
		}
		d.fail(err, "")
		if lerr != nil {
			return fmt.Errorf("dist: WaitAll on rank %d: %w (and agreeing on the outcome: %v)", d.rank, lerr, err)
		}
		return fmt.Errorf("dist: WaitAll on rank %d: agreeing on the outcome: %w", d.rank, err)
	}
	var failed []string
	for r, m := range all {
		if m != "" {
			failed = append(failed, fmt.Sprintf("rank %d: %s", r, m))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", ErrRankFailed, strings.Join(failed, "; "))
	}
	if ferr != nil {
		// Heard of a failure whose rank did not name it here (it cannot
		// happen while the failing rank takes part, but never say nil).
		return fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, ferr)
	}
	d.mu.Lock()
	d.unwaited = 0
	d.mu.Unlock()
	return nil
}

// leftAnswer is WaitAll's error when a rank left WaitAll (or gave the
// graph up) before the agreement on the outcome: that departure, or this
// rank's own context if it ended too.
func (d *Scheduler) leftAnswer(ctx context.Context, left error) error {
	if err := ctx.Err(); err != nil && !errors.Is(context.Cause(ctx), comm.ErrBroken) {
		// This rank's own context ended too: that is its answer.
		return fmt.Errorf("dist: WaitAll on rank %d: %w (and meanwhile %w)", d.rank, err, left)
	}
	return fmt.Errorf("dist: WaitAll on rank %d: %w", d.rank, left)
}

// An Option configures New.
type Option func(*Scheduler)

// defaultStall is how long WaitAll waits without any task or transfer
// completing on its rank before it reports what the rank waits for.
const defaultStall = time.Minute

// WithStallTimeout makes WaitAll give up, with an error wrapping
// ErrStalled that says what the rank waits for, when nothing has completed
// on its rank for d: a rank that waits for data from a rank that can no
// longer send (a cut link, a hung process) ends instead of hanging. Zero
// (the default) waits as long as WaitAll's context allows.
// runtimeview.Scheduler sets it from PZ_DIST_TIMEOUT.
func WithStallTimeout(d time.Duration) Option {
	return func(s *Scheduler) { s.timeout = d }
}

// WithStallReport sets how long WaitAll may see nothing complete on its rank
// before it calls report with what the rank waits for (default: a minute,
// printed on stderr); it reports again after each such period. A zero
// duration turns the report off.
//
// report also gets the layer's warnings, on rank 0, whatever after is:
// a BlockCyclic2D grid of tiles that leaves ranks without a tile (see
// BlockCyclic2D). A nil report turns both off. runtimeview.Scheduler
// passes the rank's logger's Warn.
func WithStallReport(after time.Duration, report func(explanation string)) Option {
	return func(d *Scheduler) { d.stall, d.report = after, report }
}

// inflight is a transfer in flight: how to end it, and what it is.
type inflight struct {
	done     func(error)
	what     string       // what it is; "": x's (describe)
	x        *xfer        // the transfer, whose text is built on demand
	req      comm.Request // a receive's request, which a failure cancels; nil for a send
	from     int          // a receive's source rank; -1 for a send
	canceled bool         // the failure canceled req; its task ends with it
}

// describe says what the transfer in flight is ("sending H to rank R",
// "receiving H from rank R"), for a stall report or an error: built
// now, from its xfer, which stays in use while it is in flight (an
// entry of d.xfers, read under d.failMu).
func (f inflight) describe() string {
	if f.what != "" || f.x == nil {
		return f.what
	}
	return f.x.what()
}

// watch reports stalls while WaitAll waits; the returned function stops it.
func (d *Scheduler) watch(cancel context.CancelCauseFunc) (stop func()) {
	report := d.stall > 0 && d.report != nil
	if !report && d.timeout <= 0 {
		return func() {}
	}
	period := d.timeout
	if report && (period <= 0 || d.stall < period) {
		period = d.stall
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(max(min(period/4, time.Second), time.Millisecond))
		defer tick.Stop()
		last, since, reported := d.progressed.Load(), time.Now(), time.Now()
		for {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				if p := d.progressed.Load(); p != last {
					last, since, reported = p, now, now
					continue
				}
				if d.timeout > 0 && now.Sub(since) >= d.timeout {
					cancel(fmt.Errorf("%w: nothing completed on rank %d for %v", ErrStalled, d.rank, now.Sub(since).Round(time.Millisecond)))
					return
				}
				if report && now.Sub(reported) >= d.stall {
					d.report(fmt.Sprintf("dist: rank %d: nothing completed for %v; %s", d.rank, now.Sub(since).Round(time.Second), d.explain()))
					reported = now
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-exited
	}
}

// explain says what this rank's transfers in flight wait for: the
// receives (each waits for its source rank to send) first, then the
// sends.
func (d *Scheduler) explain() string {
	d.failMu.Lock()
	var recvs, sends []string
	from := map[int]bool{}
	for _, x := range d.xfers {
		if x.from >= 0 {
			from[x.from] = true
			// what is "receiving H from rank R"; say what is waited for.
			recvs = append(recvs, fmt.Sprintf("waits for rank %d to send %s", x.from, strings.TrimSuffix(strings.TrimPrefix(x.describe(), "receiving "), fmt.Sprintf(" from rank %d", x.from))))
			continue
		}
		sends = append(sends, x.describe())
	}
	d.failMu.Unlock()
	n := len(recvs) + len(sends)
	if n == 0 {
		return d.explainLocal()
	}
	slices.Sort(recvs)
	slices.Sort(sends)
	what := append(recvs, sends...)
	const most = 8
	more := ""
	if len(what) > most {
		more = fmt.Sprintf(" and %d more", len(what)-most)
		what = what[:most]
	}
	var kinds []string
	if len(recvs) > 0 {
		ranks := slices.Sorted(maps.Keys(from))
		names := make([]string, len(ranks))
		for i, r := range ranks {
			names[i] = fmt.Sprint(r)
		}
		kinds = append(kinds, fmt.Sprintf("%s from rank %s", count(len(recvs), "receive"), strings.Join(names, ", ")))
	}
	if len(sends) > 0 {
		kinds = append(kinds, count(len(sends), "send"))
	}
	return fmt.Sprintf("rank %d waits for %s (%s): %s%s", d.rank, count(n, "transfer"), strings.Join(kinds, ", "), strings.Join(what, "; "), more)
}

// stallBound bounds by the stall timeout (WithStallTimeout,
// PZ_DIST_TIMEOUT under rt.Scheduler) a collective step in which this
// rank waits for the others (forWhat: "to call Scatter ..."): a rank that
// never comes must not hang the others, which end with ErrStalled saying
// what they waited for. Without a timeout ctx alone bounds it.
func (d *Scheduler) stallBound(ctx context.Context, forWhat string) (context.Context, context.CancelFunc) {
	if d.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, d.timeout, fmt.Errorf("%w: rank %d waited %v for the other ranks %s", ErrStalled, d.rank, d.timeout, forWhat))
}

// explainLocal says what a rank with no transfer in flight is busy
// with: the tasks its workers run, when its scheduler's watchdog records
// them (scheduler.WithWatchdog, PZ_WATCHDOG).
func (d *Scheduler) explainLocal() string {
	var running []scheduler.RunningTask
	ok := false
	if d.local != nil {
		running, ok = d.local.Running()
	}
	switch {
	case !ok:
		return fmt.Sprintf("rank %d has no transfer in flight (its own tasks are running or waiting for each other; PZ_WATCHDOG=30s names the running ones)", d.rank)
	case len(running) == 0:
		return fmt.Sprintf("rank %d has no transfer in flight and runs no task (its tasks wait for each other)", d.rank)
	}
	parts := make([]string, len(running))
	for i, r := range running {
		parts[i] = r.String()
	}
	return fmt.Sprintf("rank %d has no transfer in flight; it runs %s", d.rank, strings.Join(parts, ", "))
}

// count returns n and the noun, in the plural unless n is 1: "1
// transfer", "3 receives".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
