package local

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/ctxerr"
	"github.com/pzgo/pz/internal/spin"
)

// p2pEager is the largest message (bytes) that Send copies and returns
// from at once. Larger messages are handed over by reference: the receiver
// copies straight from the sender's buffer (one copy) and Send waits for it.
// 4 KiB is also Open MPI's shared-memory eager limit, so programs that
// work on MPI do not depend on more buffering here; above it the extra
// allocation and copy cost more than the handshake.
const p2pEager = 4 << 10

// preMake is the largest message whose struct and eager copy a send makes
// before taking the receiver's mailbox lock (see startMode).
const preMake = 256

// mailbox holds one rank's unmatched incoming messages and unmatched
// posted receives, each in arrival order; MPI's matching rules follow from
// scanning them front to back.
type mailbox struct {
	mu     spin.Lock
	unexp  []*message
	posted []*recvPost
	probes []chan struct{} // blocked probes: closed when a message is queued in unexp, or a rank leaves
	// byRef counts the messages by reference that this mailbox's rank
	// sent and no receiver has released yet (releaseSender): Free looks
	// for them in every mailbox only when there are some (endPending).
	byRef atomic.Int64
}

// releaseSender closes a message by reference's done, releasing its
// sender (the message consumed, withdrawn or failed), and counts it out
// of its sender's byRef.
func (g *group) releaseSender(m *message) {
	close(m.done)
	g.boxes[m.src].byRef.Add(-1)
}

// message is a send waiting for, or handed to, a receiver.
type message struct {
	src, tag int
	dt       comm.Datatype
	data     []byte        // a private copy (eager; its memory is reused with the message) or the sender's buffer
	done     chan struct{} // by reference only: closed when the receiver is done with data
	err      error         // by reference only: set before done closes if no receiver ever will take it
}

// recvPost is a receive waiting for a message.
type recvPost struct {
	src, tag int
	dt       comm.Datatype
	handoff  chan *message // blocking Recv: the matched message (capacity 1)
	req      *request      // Irecv: completed by the sender
	buf      []byte        // Irecv: the destination
	call     string        // Irecv: the receive's name in errors (Irecv, or RecvInit for a persistent one)
	counted  bool          // counted by group.await; read and written under the mailbox lock
}

func matches(wantSrc, wantTag, src, tag int) bool {
	return (wantSrc == comm.AnySource || wantSrc == src) && (wantTag == comm.AnyTag || wantTag == tag)
}

// takePosted removes and returns the oldest posted receive matching a
// message from src with tag, or nil. b.mu is held.
func (b *mailbox) takePosted(src, tag int) *recvPost {
	for i, p := range b.posted {
		if matches(p.src, p.tag, src, tag) {
			b.posted = slices.Delete(b.posted, i, i+1)
			return p
		}
	}
	return nil
}

// takeUnexp removes and returns the oldest message matching a receive for
// src and tag, or nil. b.mu is held.
func (b *mailbox) takeUnexp(src, tag int) *message {
	for i, m := range b.unexp {
		if matches(src, tag, m.src, m.tag) {
			b.unexp = slices.Delete(b.unexp, i, i+1)
			return m
		}
	}
	return nil
}

// removeMsg removes m if it is still unmatched. b.mu is held.
func (b *mailbox) removeMsg(m *message) bool {
	if i := slices.Index(b.unexp, m); i >= 0 {
		b.unexp = slices.Delete(b.unexp, i, i+1)
		return true
	}
	return false
}

// removePost removes p if it is still unmatched. b.mu is held.
func (b *mailbox) removePost(p *recvPost) bool {
	if i := slices.Index(b.posted, p); i >= 0 {
		b.posted = slices.Delete(b.posted, i, i+1)
		return true
	}
	return false
}

func (c *rankComm) checkSend(call string, buf comm.Buf, dest, tag int) error {
	if err := c.usable(); err != nil {
		return fmt.Errorf("local: %s on rank %d: %w", call, c.rank, err)
	}
	return comm.FirstErr(
		comm.CheckBuf(call, c.rank, buf),
		comm.CheckPeer(call, c.rank, dest, c.g.size, false),
		comm.CheckTag(call, c.rank, tag, false))
}

func (c *rankComm) checkRecv(call string, dt comm.Datatype, source, tag int) error {
	if err := c.usable(); err != nil {
		return fmt.Errorf("local: %s on rank %d: %w", call, c.rank, err)
	}
	return comm.FirstErr(
		comm.CheckBuf(call, c.rank, comm.Buf{Type: dt}),
		comm.CheckPeer(call, c.rank, source, c.g.size, true),
		comm.CheckTag(call, c.rank, tag, true))
}

// checkNullProbe checks a probe of ProcNull: the communicator, the
// datatype and the tag, as for any source.
func (c *rankComm) checkNullProbe(call string, dt comm.Datatype, tag int) error {
	return c.checkRecv(call, dt, 0, tag) // rank 0 is in every communicator
}

// start delivers or enqueues a message and returns it if the sender must
// wait for the receiver (by-reference handover), or nil when buf may be
// reused at once.
func (c *rankComm) start(buf comm.Buf, dest, tag int) *message {
	return c.startMode(buf, dest, tag, false)
}

// startMode is start; sync hands every message over by reference, so
// that the sender waits for a receiver to take it (Ssend).
func (c *rankComm) startMode(buf comm.Buf, dest, tag int, sync bool) *message {
	// A small message (and its eager copy) is made before taking the
	// lock, which the receiver and its other senders contend for: the
	// lock is held shorter, and a posted Irecv that takes the data
	// straight from buf leaves it unused (recycled). Larger
	// ones are made only when no posted receive takes them.
	var m *message
	if len(buf.Bytes) <= preMake {
		m = c.newMessage(buf, tag, sync)
	}
	box := &c.g.boxes[dest]
	box.mu.Lock()
	if p := box.takePosted(c.rank, tag); p != nil {
		if p.counted {
			c.g.matched(p.src)
		}
		if p.req != nil {
			box.mu.Unlock()
			// A posted Irecv: copy straight into its buffer.
			st, err := deliver(p.call, peers{}, p.buf, p.dt, c.rank, tag, buf.Type, buf.Bytes, dest)
			p.req.complete(st, err)
			c.g.w.recyclePost(p)
			if m != nil {
				c.g.w.recycle(m) // made before the lock, not needed
			}
			return nil
		}
		if m == nil {
			m = c.newMessage(buf, tag, sync)
		}
		wm := waitable(m) // once handed off, an eager m is the receiver's
		p.handoff <- m    // capacity 1 and p was posted once: never blocks
		box.mu.Unlock()
		return wm
	}
	if m == nil {
		m = c.newMessage(buf, tag, sync)
	}
	wm := waitable(m) // once queued, an eager m is the receiver's
	if wm != nil {
		if c.freed.Load() {
			// Free ran (on another goroutine) since this send's check:
			// its sweep of this mailbox is over (see endPending).
			box.mu.Unlock()
			wm.err = errSendFreed(dest)
			c.g.releaseSender(wm)
			return wm
		}
		if err := c.g.broken(); err != nil {
			// Broken since the send's check: the break's sweep of
			// this mailbox may be over (see endBroken).
			box.mu.Unlock()
			wm.err = err
			c.g.releaseSender(wm)
			return wm
		}
		if why := c.g.gone[dest].Load(); why != nil {
			// No one will take it: fail the send rather than wait for
			// ever (the check is under the lock that leave's sweep takes,
			// so a departure is seen here or there). An eager message is
			// queued all the same, as a buffered MPI send would be.
			box.mu.Unlock()
			wm.err = fmt.Errorf("%w: rank %d %s before receiving this message", comm.ErrBroken, dest, *why)
			c.g.releaseSender(wm)
			return wm
		}
	}
	box.unexp = append(box.unexp, m)
	for _, ch := range box.probes {
		close(ch)
	}
	box.probes = box.probes[:0]
	box.mu.Unlock()
	return wm
}

func waitable(m *message) *message {
	if m.done == nil {
		return nil
	}
	return m
}

func (c *rankComm) newMessage(buf comm.Buf, tag int, sync bool) *message {
	if len(buf.Bytes) <= p2pEager && !sync {
		// Eager: a copy in a message received before and recycled.
		m, _ := c.g.w.msgs.Get().(*message)
		if m == nil {
			m = new(message)
		}
		m.src, m.tag, m.dt = c.rank, tag, buf.Type
		m.data = append(m.data[:0], buf.Bytes...)
		return m
	}
	c.g.boxes[c.rank].byRef.Add(1)
	return &message{src: c.rank, tag: tag, dt: buf.Type, data: buf.Bytes, done: make(chan struct{})}
}

// newPost returns a receive post, recycled when one is free; its handoff
// channel is empty.
func (w *world) newPost() *recvPost {
	if p, _ := w.posts.Get().(*recvPost); p != nil {
		return p
	}
	return &recvPost{handoff: make(chan *message, 1)}
}

// recyclePost keeps p for a later receive once no one can reach it: its
// receive completed, or it was never posted, or it was withdrawn.
func (w *world) recyclePost(p *recvPost) {
	p.req, p.buf, p.call, p.counted = nil, nil, "", false
	w.posts.Put(p)
}

// recycle keeps an eager message for a later send once no one can read
// it: it was received (its data copied out) or never queued. Messages
// handed over by reference are left to the collector.
func (w *world) recycle(m *message) {
	if m.done == nil {
		w.msgs.Put(m)
	}
}

// deliver copies a message into dst for a receive (call, its peers pp;
// the source and tag are the message's) expecting dt on rank `to`, and
// returns its Status.
func deliver(call string, pp peers, dst []byte, dt comm.Datatype, src, tag int, mdt comm.Datatype, data []byte, to int) (comm.Status, error) {
	pp = pp.from(src, tag)
	st := comm.Status{Source: src, Tag: tag, Count: len(data) / mdt.Size()}
	if mdt != dt {
		return st, typeMismatch(call, pp, st, mdt, dt, to, "receives")
	}
	if len(data) > len(dst) {
		return st, fmt.Errorf("local: %s on rank %d %s: %w: message from rank %d has %d elements, buffer holds %d",
			call, to, pp, comm.ErrTruncated, src, st.Count, len(dst)/dt.Size())
	}
	copyBytes(dst, data)
	return st, nil
}

// typeMismatch is the error of a receive or probe (call; verb says which)
// on rank `to` expecting dt for the message st of datatype mdt, naming
// the message's source and tag up front as the other point-to-point
// errors (and comm/mpi's) do: the
// sender's datatype and the receiver's, for that message. It wraps
// comm.ErrMismatch; it is no *comm.MismatchError, which reports a
// collective.
func typeMismatch(call string, pp peers, st comm.Status, mdt, dt comm.Datatype, to int, verb string) error {
	return fmt.Errorf("local: %s on rank %d %s: %w: datatype of the message from rank %d (tag %d, %d elements): rank %d sent %v, rank %d %s %v",
		call, to, pp.from(st.Source, st.Tag), comm.ErrMismatch, st.Source, st.Tag, st.Count, st.Source, mdt, to, verb, dt)
}

// Send implements comm.Comm. Messages up to 4 KiB are copied and Send
// returns at once; larger ones wait until the receiver has copied them out
// of buf. If ctx ends before a receiver took the message, it is withdrawn.
func (c *rankComm) Send(ctx context.Context, buf comm.Buf, dest, tag int) error {
	return c.send(ctx, "Send", buf, dest, tag, false)
}

// Ssend is the synchronous send: it returns once a receive has taken the
// message (MPI_Ssend), whatever its size. If ctx ends before, the message
// is withdrawn.
func (c *rankComm) Ssend(ctx context.Context, buf comm.Buf, dest, tag int) error {
	return c.send(ctx, "Ssend", buf, dest, tag, true)
}

func (c *rankComm) send(ctx context.Context, call string, buf comm.Buf, dest, tag int, sync bool) error {
	if err := c.checkSend(call, buf, dest, tag); err != nil {
		return err
	}
	if ctx.Err() != nil {
		// A context that ended before the call sends nothing, also a
		// message that would be buffered, as under comm/mpi, which does
		// not post it.
		return fmt.Errorf("local: %s on rank %d to rank %d tag %d: %w", call, c.rank, dest, tag, ctxerr.Of(ctx, comm.ErrBroken))
	}
	return c.awaitTaken(ctx, call, sendTo(dest, tag), c.startMode(buf, dest, tag, sync))
}

// awaitTaken waits until a receiver has taken m (from startMode; nil for
// a message that needs no wait), or withdraws it when ctx ends or the
// group breaks first. p names the call's peers in errors (the
// destination, and a Sendrecv's source too).
func (c *rankComm) awaitTaken(ctx context.Context, call string, p peers, m *message) error {
	if m == nil {
		return nil
	}
	dest := p.dest
	if yieldUntil(func() bool { return isClosed(m.done) }) {
		return m.failed(call, c.rank, p)
	}
	select {
	case <-m.done:
		return m.failed(call, c.rank, p)
	case <-ctx.Done():
	case <-c.g.brk.ch:
	case <-c.g.w.brk.ch:
	}
	box := &c.g.boxes[dest]
	box.mu.Lock()
	withdrawn := box.removeMsg(m)
	box.mu.Unlock()
	if !withdrawn {
		// A receiver holds the message and is copying it: that is bounded
		// work, and returning now would let the caller overwrite buf.
		// (Or the receiver left and the sweep failed it.)
		<-m.done
		return m.failed(call, c.rank, p)
	}
	if err := ctx.Err(); err != nil {
		if dest == c.rank && (call == "Send" || call == "Ssend") {
			return fmt.Errorf("local: %s on rank %d %s: %w: %s", call, c.rank, p, ctxerr.Of(ctx, comm.ErrBroken), selfSendHint(call == "Ssend"))
		}
		return fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, p, ctxerr.Of(ctx, comm.ErrBroken))
	}
	if err := c.usable(); err != nil {
		return fmt.Errorf("local: %s on rank %d: %w", call, c.rank, err)
	}
	return nil
}

// selfSendHint says why a Send (an Ssend with sync) from a rank to itself
// ended by its context and what a program does instead, as comm/mpi's
// errors do: the rank posted no receive for it before sending, and the
// send waited for one (an Ssend always does; a Send above 4 KiB does
// here, and under MPICH a Send to the rank itself of any size), as
// docs/backends.md, "Sends that wait for their receive", says.
func selfSendHint(sync bool) string {
	why := "a send to the rank itself waits until this rank receives it (comm/local buffers only one of up to 4 KiB, MPICH none)"
	if sync {
		why = "an Ssend to the rank itself waits until this rank receives it"
	}
	return why + ": post the receive first (Irecv, then the send, then Wait), or use Sendrecv or SendrecvReplace, " +
		"or Isend and Wait after the receives (docs/backends.md, \"Sends that wait for their receive\")"
}

// failed is the error of call on rank `rank` sending m (to the peers p
// name), once m's done is closed: nil if a receiver took it.
func (m *message) failed(call string, rank int, p peers) error {
	if m.err == nil {
		return nil
	}
	return fmt.Errorf("local: %s on rank %d %s: %w", call, rank, p, m.err)
}

// Recv implements comm.Comm.
func (c *rankComm) Recv(ctx context.Context, dt comm.Datatype, source, tag int, into comm.Into) (comm.Status, error) {
	if err := c.checkRecv("Recv", dt, source, tag); err != nil {
		return comm.Status{}, err
	}
	return c.recv(ctx, "Recv", recvFrom(source, tag), dt, source, tag, into, nil)
}

// RecvBuf implements comm.RecvBufComm: Recv into buf, with no Into.
func (c *rankComm) RecvBuf(ctx context.Context, buf comm.Buf, source, tag int) (comm.Status, error) {
	if err := c.checkRecv("Recv", buf.Type, source, tag); err != nil {
		return comm.Status{}, err
	}
	return c.recv(ctx, "Recv", recvFrom(source, tag), buf.Type, source, tag, nil, buf.Bytes)
}

var _ comm.RecvBufComm = (*rankComm)(nil)

// SendrecvBuf implements comm.SendrecvComm: the send starts (a small
// message is copied), the receive runs, then the send waits for its
// receiver if it was handed over by reference. It makes no Request.
func (c *rankComm) SendrecvBuf(ctx context.Context, send comm.Buf, dest, sendTag int, recv comm.Buf, source, recvTag int) (comm.Status, error) {
	return c.sendrecv(ctx, "Sendrecv", send, dest, sendTag, recv, source, recvTag)
}

// SendrecvReplaceBuf implements comm.SendrecvReplaceComm: SendrecvBuf of
// a copy of buf into buf, its errors naming SendrecvReplace.
func (c *rankComm) SendrecvReplaceBuf(ctx context.Context, buf comm.Buf, dest, sendTag, source, recvTag int) (comm.Status, error) {
	send := comm.Buf{Type: buf.Type, Bytes: append([]byte(nil), buf.Bytes...)}
	return c.sendrecv(ctx, "SendrecvReplace", send, dest, sendTag, buf, source, recvTag)
}

// sendrecv is SendrecvBuf for call (Sendrecv, SendrecvReplace), which
// its errors name.
func (c *rankComm) sendrecv(ctx context.Context, call string, send comm.Buf, dest, sendTag int, recv comm.Buf, source, recvTag int) (comm.Status, error) {
	if err := comm.FirstErr(c.checkSend(call, send, dest, sendTag), c.checkRecv(call, recv.Type, source, recvTag)); err != nil {
		return comm.Status{}, err
	}
	m := c.start(send, dest, sendTag)
	p := sendrecvPeers(dest, sendTag, source, recvTag)
	st, err := c.recv(ctx, call, p, recv.Type, source, recvTag, nil, recv.Bytes)
	if serr := c.awaitTaken(ctx, call, p, m); serr != nil && err == nil {
		err = serr
	}
	return st, err
}

var (
	_ comm.SendrecvComm        = (*rankComm)(nil)
	_ comm.SendrecvReplaceComm = (*rankComm)(nil)
)

// recv receives one message into the buffer into returns or, with a nil
// into, into dst. call and pp name the caller and its peers in errors
// (a Sendrecv's destination too).
func (c *rankComm) recv(ctx context.Context, call string, pp peers, dt comm.Datatype, source, tag int, into comm.Into, dst []byte) (comm.Status, error) {
	box := &c.g.boxes[c.rank]
	// A post from an earlier receive (its channel empty), made before
	// taking the lock; left unused when the message is already here.
	p := c.g.w.newPost()
	p.src, p.tag, p.dt = source, tag, dt
	box.mu.Lock()
	if m := box.takeUnexp(source, tag); m != nil {
		box.mu.Unlock()
		c.g.w.recyclePost(p)
		return c.consume(call, pp, m, dt, into, dst)
	}
	if c.freed.Load() { // Free ran since the check: its sweep is over (endPending)
		box.mu.Unlock()
		c.g.w.recyclePost(p)
		return comm.Status{}, fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, pp, comm.ErrFreed)
	}
	p.counted = c.g.await(c.rank, source)
	if err := c.g.unreachable(c.rank, source); err != nil {
		if p.counted {
			c.g.unawait(source)
		}
		box.mu.Unlock()
		c.g.w.recyclePost(p)
		return comm.Status{}, fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, pp, err)
	}
	box.posted = append(box.posted, p)
	box.mu.Unlock()
	// Yield a while before parking: a sender on another core usually
	// comes within microseconds, and waking a parked goroutine costs more.
	for range spinYields {
		select {
		case m := <-p.handoff:
			return c.handedOff(call, pp, p, m, into, dst)
		default:
		}
		runtime.Gosched()
	}
	var cause error
	select {
	case m := <-p.handoff:
		return c.handedOff(call, pp, p, m, into, dst)
	case <-ctx.Done():
		cause = ctxerr.Of(ctx, comm.ErrBroken)
	case <-c.g.brk.ch:
		cause = c.g.brk.broken()
	case <-c.g.w.brk.ch:
		cause = c.g.w.brk.broken()
	}
	box.mu.Lock()
	withdrawn := box.removePost(p)
	box.mu.Unlock()
	if withdrawn {
		if p.counted {
			c.g.unawait(source)
		}
	} else {
		// A sender matched us first and put the message in handoff under
		// the lock (or leave's sweep its mark): take it rather than lose
		// it.
		return c.handedOff(call, pp, p, <-p.handoff, into, dst)
	}
	c.g.w.recyclePost(p) // no sender saw it
	return comm.Status{}, fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, pp, cause)
}

// handedOff completes the blocking receive posted as p with m, from p's
// handoff: a message, or the mark of leave's sweep (w.left) when no sender
// can match p any more. pp names the call's peers in errors.
func (c *rankComm) handedOff(call string, pp peers, p *recvPost, m *message, into comm.Into, dst []byte) (comm.Status, error) {
	source, dt := p.src, p.dt
	c.g.w.recyclePost(p)
	if m == &c.g.w.left {
		return comm.Status{}, fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, pp, c.g.unreachable(c.rank, source))
	}
	if m == &c.g.w.freed {
		return comm.Status{}, fmt.Errorf("local: %s on rank %d %s: %w before a message matched the receive", call, c.rank, pp, comm.ErrFreed)
	}
	return c.consume(call, pp, m, dt, into, dst)
}

// peers names the peers and tags of a point-to-point call in its errors,
// as comm/mpi's do: "to rank 1 tag 5", "from any rank with any tag",
// both for Sendrecv ("to rank 1 tag 7, from rank 1 tag 7").
type peers struct {
	send, recv      bool
	dest, sendTag   int
	source, recvTag int
}

func sendTo(dest, tag int) peers     { return peers{send: true, dest: dest, sendTag: tag} }
func recvFrom(source, tag int) peers { return peers{recv: true, source: source, recvTag: tag} }
func sendrecvPeers(dest, sendTag, source, recvTag int) peers {
	return peers{send: true, recv: true, dest: dest, sendTag: sendTag, source: source, recvTag: recvTag}
}

// from is p receiving from source with tag: a matched message's.
func (p peers) from(source, tag int) peers {
	p.recv, p.source, p.recvTag = true, source, tag
	return p
}

func (p peers) String() string {
	switch {
	case p.send && p.recv:
		return fmt.Sprintf("to rank %d tag %d, %s", p.dest, p.sendTag, fromWhom(p.source, p.recvTag))
	case p.send:
		return fmt.Sprintf("to rank %d tag %d", p.dest, p.sendTag)
	}
	return fromWhom(p.source, p.recvTag)
}

// fromWhom describes a receive's source and tag in errors.
func fromWhom(source, tag int) string {
	from := fmt.Sprintf("from rank %d", source)
	if source == comm.AnySource {
		from = "from any rank"
	}
	if tag == comm.AnyTag {
		return from + " with any tag"
	}
	return fmt.Sprintf("%s tag %d", from, tag)
}

// await counts a receive or probe of rank me from source that is posted
// or about to be, so that a departing source can tell whether it strands
// any (group.awaited), and reports whether it did. A receive calls it
// under its mailbox lock and then checks unreachable: a departing source
// either finds it counted or is seen gone (see group.leave). Receives
// from any rank or from oneself are not counted: a departure strands
// those only once every rank but one has left, when leave sweeps every
// mailbox; nor are any in a group of fewer than sweepAllBelow ranks,
// where every departure sweeps every mailbox.
//
// A post leaves the count in one of two ways, each once it is out of the
// mailbox: the receiver that withdraws it (or a probe once woken) calls
// unawait; a sender that matches it, or a sweep that fails it, calls
// matched. The two counts live on different lines (one the receivers
// of source write, one of source's slot, which source's sends write),
// so that a receive and the send that matches it each write a line
// that is already theirs.
func (g *group) await(me, source int) bool {
	if g.size < sweepAllBelow || source == comm.AnySource || source == me {
		return false
	}
	g.awaits[source].n.Add(1)
	return true
}

// unawait uncounts a receive or probe from source that await counted, by
// its receiver, once it is no longer posted.
func (g *group) unawait(source int) { g.awaits[source].n.Add(-1) }

// matched uncounts a receive from source that await counted, once a
// sender or a sweep took it out of its mailbox.
func (g *group) matched(source int) { g.slots[source].matched.Add(1) }

// awaited reports whether some receive or probe from rank i may be
// posted (or about to be). matched only grows and is read first; each
// post is counted before it is posted and uncounted after it is taken
// out: so the difference is at least the number counted and not taken
// out.
func (g *group) awaited(i int) bool {
	if g.awaits == nil {
		return false // never counted: every departure sweeps every mailbox
	}
	m := g.slots[i].matched.Load()
	return g.awaits[i].n.Load() > m
}

// unreachable returns why no message can come any more for a receive on
// rank me from source: source left Run (or, for AnySource, every rank but
// me did), so only messages already queued could match, and the caller
// found none. It returns nil otherwise, at once when no rank left. A
// rank's messages to itself are never unreachable: another of its
// goroutines may send them.
func (g *group) unreachable(me, source int) error {
	if g.nGone.Load() == 0 || source == me {
		return nil
	}
	if source != comm.AnySource {
		if why := g.gone[source].Load(); why != nil {
			return g.breakOr(fmt.Errorf("%w: rank %d %s, and no message from it matches", comm.ErrBroken, source, *why))
		}
		return nil
	}
	if g.size == 1 || !g.othersGone(me) {
		return nil
	}
	return g.breakOr(fmt.Errorf("%w: every other rank has left (returned from its function), and no message matches", comm.ErrBroken))
}

// breakOr is the error that broke g's world or g, which names the rank
// that failed first and why, or else err: a rank that failed has left
// too (Run), and its departure's sweep would otherwise name only the
// departure.
func (g *group) breakOr(err error) error {
	if b := g.w.brk.broken(); b != nil {
		return b
	}
	if b := g.brk.broken(); b != nil {
		return b
	}
	return err
}

// othersGone reports whether every rank of g but me has left Run, from
// nGone in O(1). nGone is added to after the mark, so it may lag the
// marks while departures are under way; but the departure that brings it
// to size-1 sweeps every mailbox after (see group.leave), and finds a
// receive that was posted meanwhile.
func (g *group) othersGone(me int) bool {
	switch n := int(g.nGone.Load()); {
	case n == g.size:
		return true
	case n < g.size-1:
		return false
	case g.gone[me].Load() == nil:
		return true // me's mark precedes its count: the size-1 counted are the others
	}
	// me left too, and a goroutine it left behind receives: read the marks.
	for j := range g.gone {
		if j != me && g.gone[j].Load() == nil {
			return false
		}
	}
	return true
}

// consume copies a matched message to the buffer from into (or, with a
// nil into, to dst) and releases its sender. call and pp name the
// receive and its peers, the source and tag those of m.
func (c *rankComm) consume(call string, pp peers, m *message, dt comm.Datatype, into comm.Into, dst []byte) (comm.Status, error) {
	pp = pp.from(m.src, m.tag)
	if m.done != nil {
		defer c.g.releaseSender(m)
	}
	st := comm.Status{Source: m.src, Tag: m.tag, Count: len(m.data) / m.dt.Size()}
	if m.dt != dt {
		return st, typeMismatch(call, pp, st, m.dt, dt, c.rank, "receives")
	}
	if into != nil {
		var err error
		if dst, err = into(st.Count); err != nil {
			return st, fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, pp, err)
		}
	}
	st, err := deliver(call, pp, dst, dt, m.src, m.tag, m.dt, m.data, c.rank)
	c.g.w.recycle(m)
	return st, err
}

// yieldUntil polls done, yielding the processor between polls, for a
// short while before the caller parks; it reports whether done held.
func yieldUntil(done func() bool) bool {
	for i := 0; ; i++ {
		if done() {
			return true
		}
		if i == spinYields {
			return false
		}
		runtime.Gosched()
	}
}

// isClosed reports whether ch is closed (it is never sent on).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// request is a pending Isend or Irecv. An Isend's completes when done,
// its message's channel, closes (set at once; for an eager message, the
// world's closed channel). An Irecv's is completed by the sender that
// matches it (complete) or by Irecv itself: fin is set, and the channel
// ch, made only for a caller that needs one (Done, or a Wait that parks),
// is closed. A receive that completes while its rank polls thus makes no
// channel.
type request struct {
	c    *rankComm
	done <-chan struct{} // Isend: closed on completion; nil for an Irecv
	m    *message        // Isend by reference: the message, whose err tells if it failed
	peer int             // the destination (a send) or source (a receive), for errors
	tag  int             // the tag, for errors
	call string          // the call that made it (Isend, SendInit, Irecv, RecvInit), for errors
	fin  atomic.Bool     // Irecv: completed; st and err are set before
	mu   sync.Mutex      // Irecv: guards ch against complete
	ch   chan struct{}   // Irecv: made by Done, closed by complete
	st   comm.Status
	err  error
}

// complete completes an Irecv's request with st and err. The sender that
// matched it touches r no more once complete has released r.mu (a
// persistent receive may then reset r for its next round).
func (r *request) complete(st comm.Status, err error) {
	r.mu.Lock()
	r.st, r.err = st, err
	r.fin.Store(true)
	ch := r.ch
	r.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// completed reports whether r has completed.
func (r *request) completed() bool {
	if r.done == nil {
		return r.fin.Load()
	}
	return isClosed(r.done)
}

// result is the outcome of r once it completed: an Isend's message may
// have failed (its receiver left Run).
func (r *request) result() (comm.Status, error) {
	if r.m != nil && r.m.err != nil {
		return comm.Status{}, r.m.failed(r.call, r.c.rank, sendTo(r.peer, r.m.tag))
	}
	return r.st, r.err
}

// Wait implements comm.Request.
func (r *request) Wait(ctx context.Context) (comm.Status, error) {
	if yieldUntil(r.completed) {
		return r.result()
	}
	r.c.g.runBeforePark()
	var cause error
	select {
	case <-r.Done():
		return r.result()
	case <-ctx.Done():
		// r may have completed as the wait ended (select picks either
		// ready case): a completed request reports its result.
		if r.completed() {
			return r.result()
		}
		return comm.Status{}, fmt.Errorf("local: %s on rank %d %s: Wait: %w", r.call, r.c.rank, r.whom(), ctxerr.Of(ctx, comm.ErrBroken))
	case <-r.c.g.brk.ch:
		cause = r.c.g.brk.broken()
	case <-r.c.g.w.brk.ch:
		cause = r.c.g.w.brk.broken()
	}
	if r.completed() {
		return r.result()
	}
	return comm.Status{}, r.brokenErr(cause)
}

// whom names r's peer and tag in errors, as the call that made it does.
func (r *request) whom() string {
	if r.done == nil {
		return fromWhom(r.peer, r.tag)
	}
	return fmt.Sprintf("to rank %d tag %d", r.peer, r.tag)
}

// Done implements comm.Notifier. The channel closes when r completes, and
// when r's communicator or the world breaks first (a rank failed, Abort):
// the break completes r with an error (see group.endBroken).
func (r *request) Done() <-chan struct{} {
	if r.done != nil {
		return r.done
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fin.Load() {
		return r.c.g.w.closed
	}
	if r.ch == nil {
		r.ch = make(chan struct{})
	}
	return r.ch
}

// Test implements comm.Request. A request that has not completed when
// its communicator (or the world) is broken, by Abort or by a rank that
// failed, reports done with the error its Wait returns, wrapping
// comm.ErrBroken and naming the cause, so that a loop polling Test ends
// as a Wait would. (The break's sweep, endBroken, completes such a
// request with that error, closing its Done channel; Test and Wait may
// see the break before the sweep reaches it.)
func (r *request) Test() (bool, comm.Status, error) {
	if r.completed() {
		st, err := r.result()
		return true, st, err
	}
	cause := r.c.g.brk.broken()
	if cause == nil {
		cause = r.c.g.w.brk.broken()
	}
	if cause == nil {
		return false, comm.Status{}, nil
	}
	if r.completed() { // completed as the break came: its result stands
		st, err := r.result()
		return true, st, err
	}
	return true, comm.Status{}, r.brokenErr(cause)
}

// brokenErr is the error of r's Wait or Test when its communicator's
// break (cause) ends it before it completed: the error the break's sweep
// completes it with (see endBroken).
func (r *request) brokenErr(cause error) error {
	return brokenReqErr(r.call, r.c.rank, r.whom(), cause)
}

var _ comm.Canceler = (*request)(nil)

// Cancel implements comm.Canceler. An Irecv still posted is taken out of
// its rank's mailbox and completes at once with comm.ErrCanceled; one a
// sender has matched completes as it would have (that sender is copying
// into its buffer, bounded work). A send cannot be canceled: a message
// up to 4 KiB is in the receiver's mailbox or buffer already, a larger
// one may be being copied, and MPI deprecates it.
func (r *request) Cancel() error {
	if r.done != nil {
		return fmt.Errorf("local: Cancel on rank %d: %w: an Isend cannot be canceled (MPI deprecates canceling sends); wait for it", r.c.rank, comm.ErrInvalidArg)
	}
	if r.fin.Load() {
		return nil
	}
	box := &r.c.g.boxes[r.c.rank]
	box.mu.Lock()
	var p *recvPost
	for i, q := range box.posted {
		if q.req == r {
			p = q
			box.posted = slices.Delete(box.posted, i, i+1)
			break
		}
	}
	box.mu.Unlock()
	if p == nil {
		// Matched (a sender completes r) or completed already.
		return nil
	}
	if p.counted {
		r.c.g.unawait(p.src)
	}
	err := fmt.Errorf("local: %s on rank %d %s: %w", p.call, r.c.rank, fromWhom(p.src, p.tag), comm.ErrCanceled)
	r.c.g.w.recyclePost(p) // taken out under the lock: no sender saw it
	r.complete(comm.Status{}, err)
	return nil
}

// endPending ends this rank's point-to-point calls still pending on c's
// group once c is freed (c.freed is set), each with an error wrapping
// comm.ErrFreed: the receives posted in its mailbox (an Irecv, a started
// persistent receive, a blocking Recv on another goroutine) before a
// message matched them, the probes blocked there, and the messages it
// sent by reference (above 4 KiB, an Ssend) that no receiver has taken,
// which are withdrawn (never delivered; their senders' Wait, Send or
// Ssend fail). Messages of up to 4 KiB that it sent stay queued at their
// receivers, as sent. A call that checked c before Free and posts after
// this sweep sees c.freed under the same mailbox lock and fails alike.
func (c *rankComm) endPending() {
	g := c.g
	box := &g.boxes[c.rank]
	box.mu.Lock()
	posted := box.posted
	box.posted = nil
	for _, ch := range box.probes {
		close(ch)
	}
	box.probes = box.probes[:0]
	box.mu.Unlock()
	for _, p := range posted {
		if p.counted {
			g.matched(p.src)
		}
		if p.req == nil {
			p.handoff <- &g.w.freed // capacity 1 and p was posted once: never blocks
			continue
		}
		p.req.complete(comm.Status{}, fmt.Errorf("local: %s on rank %d %s: %w before a message matched the receive", p.call, c.rank, fromWhom(p.src, p.tag), comm.ErrFreed))
		g.w.recyclePost(p)
	}
	if box.byRef.Load() == 0 {
		// No message of this rank's waits for a receiver: nothing to
		// withdraw (a send that starts after Free fails: see start).
		return
	}
	for j := range g.boxes {
		b := &g.boxes[j]
		var mine []*message
		b.mu.Lock()
		kept := b.unexp[:0]
		for _, m := range b.unexp {
			if m.src == c.rank && m.done != nil {
				mine = append(mine, m)
				continue
			}
			kept = append(kept, m)
		}
		clear(b.unexp[len(kept):])
		b.unexp = kept
		b.mu.Unlock()
		for _, m := range mine {
			m.err = errSendFreed(j)
			g.releaseSender(m)
		}
	}
}

// errSendFreed is the error of a message by reference to dest that Free
// withdrew.
func errSendFreed(dest int) error {
	return fmt.Errorf("%w before rank %d received the message; it is not delivered", comm.ErrFreed, dest)
}

// Isend implements comm.Comm. Up to 4 KiB the message is copied and the
// request is complete at once; larger messages complete when the receiver
// has copied them.
func (c *rankComm) Isend(buf comm.Buf, dest, tag int) (comm.Request, error) {
	if err := c.checkSend("Isend", buf, dest, tag); err != nil {
		return nil, err
	}
	r := new(request)
	c.isend(r, "Isend", buf, dest, tag)
	return r, nil
}

// isend starts a send into r, a request not in use.
func (c *rankComm) isend(r *request, call string, buf comm.Buf, dest, tag int) {
	r.c, r.st, r.peer, r.tag, r.call = c, comm.Status{Source: c.rank, Tag: tag, Count: buf.Len()}, dest, tag, call
	r.m = c.start(buf, dest, tag)
	if r.m != nil {
		r.done = r.m.done
	} else {
		r.done = c.g.w.closed
	}
}

// Irecv implements comm.Comm. A matching sender copies straight into buf.
func (c *rankComm) Irecv(buf comm.Buf, source, tag int) (comm.Request, error) {
	if err := c.checkRecv("Irecv", buf.Type, source, tag); err != nil {
		return nil, err
	}
	r := new(request)
	c.irecv(r, "Irecv", buf, source, tag)
	return r, nil
}

// irecv posts a receive completing r, a new request or a completed one
// reset (resetRecv).
func (c *rankComm) irecv(r *request, call string, buf comm.Buf, source, tag int) {
	// Made before taking the lock, which the senders to this rank
	// contend for: no sender waits for it. The post is a recycled one;
	// the sender that takes it recycles it again.
	r.c, r.peer, r.tag, r.call = c, source, tag, call
	post := c.g.w.newPost()
	post.src, post.tag, post.dt, post.req, post.buf, post.call = source, tag, buf.Type, r, buf.Bytes, call
	box := &c.g.boxes[c.rank]
	box.mu.Lock()
	if m := box.takeUnexp(source, tag); m != nil {
		box.mu.Unlock()
		c.g.w.recyclePost(post)
		st, err := deliver(call, peers{}, buf.Bytes, buf.Type, m.src, m.tag, m.dt, m.data, c.rank)
		if m.done != nil {
			c.g.releaseSender(m)
		}
		c.g.w.recycle(m)
		r.st, r.err = st, err
		r.fin.Store(true)
		return
	}
	if c.freed.Load() { // Free ran since the check (or before a persistent Start): its sweep is over
		box.mu.Unlock()
		c.g.w.recyclePost(post)
		r.err = fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, fromWhom(source, tag), comm.ErrFreed)
		r.fin.Store(true)
		return
	}
	if err := c.g.broken(); err != nil {
		// Broken since the check: the break's sweep of this mailbox may
		// be over (see endBroken).
		box.mu.Unlock()
		c.g.w.recyclePost(post)
		r.err = brokenReqErr(call, c.rank, fromWhom(source, tag), err)
		r.fin.Store(true)
		return
	}
	post.counted = c.g.await(c.rank, source)
	if err := c.g.unreachable(c.rank, source); err != nil {
		if post.counted {
			c.g.unawait(source)
		}
		box.mu.Unlock()
		c.g.w.recyclePost(post)
		r.err = fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, fromWhom(source, tag), err)
		r.fin.Store(true)
		return
	}
	box.posted = append(box.posted, post)
	box.mu.Unlock()
}

// resetRecv makes a completed Irecv request r ready for another receive.
func (r *request) resetRecv() {
	r.mu.Lock()
	r.fin.Store(false)
	r.ch, r.st, r.err = nil, comm.Status{}, nil
	r.mu.Unlock()
}

var _ comm.PersistentComm = (*rankComm)(nil)

// SendInit implements comm.PersistentComm: each round is an Isend into
// one request, reused.
func (c *rankComm) SendInit(buf comm.Buf, dest, tag int) (comm.PersistentOp, error) {
	if err := c.checkSend("SendInit", buf, dest, tag); err != nil {
		return nil, err
	}
	return &persistentOp{c: c, buf: buf, peer: dest, tag: tag}, nil
}

// RecvInit implements comm.PersistentComm: each round is an Irecv into
// one request, reused.
func (c *rankComm) RecvInit(buf comm.Buf, source, tag int) (comm.PersistentOp, error) {
	if err := c.checkRecv("RecvInit", buf.Type, source, tag); err != nil {
		return nil, err
	}
	return &persistentOp{c: c, buf: buf, peer: source, tag: tag, recv: true}, nil
}

// persistentOp is a persistent send or receive: one request serves every
// round (comm's Persistent starts a round only once the last one has
// completed, and exposes the last round's request alone), so a round
// allocates nothing.
type persistentOp struct {
	c    *rankComm
	buf  comm.Buf
	peer int
	tag  int
	recv bool
	r    request
}

// Start implements comm.PersistentOp.
func (p *persistentOp) Start() (comm.Request, error) {
	if err := p.c.usable(); err != nil {
		return nil, fmt.Errorf("local: Start on rank %d: %w", p.c.rank, err)
	}
	if p.recv {
		p.r.resetRecv()
		p.c.irecv(&p.r, "RecvInit", p.buf, p.peer, p.tag)
	} else {
		p.c.isend(&p.r, "SendInit", p.buf, p.peer, p.tag)
	}
	return &p.r, nil
}

// Free implements comm.PersistentOp: nothing is held between rounds.
func (p *persistentOp) Free() error { return nil }

// findUnexp returns the oldest unmatched message matching source and tag,
// or nil. b.mu is held.
func (b *mailbox) findUnexp(src, tag int) *message {
	for _, m := range b.unexp {
		if matches(src, tag, m.src, m.tag) {
			return m
		}
	}
	return nil
}

// probeStatus is the Status of m for a receive of dt on rank `to`.
func probeStatus(call string, m *message, dt comm.Datatype, to int) (comm.Status, error) {
	st := comm.Status{Source: m.src, Tag: m.tag, Count: len(m.data) / m.dt.Size()}
	if m.dt != dt {
		return st, typeMismatch(call, peers{}, st, m.dt, dt, to, "probes for")
	}
	return st, nil
}

// probe looks for a message matching source and tag. With hdr nil it
// removes it from matching (and the caller owns it); otherwise it copies
// its header into hdr (the caller's) and returns hdr. If there is none,
// with wait it waits for one until ctx is done or the group breaks;
// without it returns nil.
func (c *rankComm) probe(ctx context.Context, call string, dt comm.Datatype, source, tag int, wait bool, hdr *message) (*message, error) {
	if err := c.checkRecv(call, dt, source, tag); err != nil {
		return nil, err
	}
	box := &c.g.boxes[c.rank]
	for {
		if c.freed.Load() { // Free woke this probe (endPending)
			return nil, fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, fromWhom(source, tag), comm.ErrFreed)
		}
		box.mu.Lock()
		m := box.findUnexp(source, tag)
		if m != nil {
			if hdr == nil {
				box.removeMsg(m)
			} else {
				// Once the lock is released a receiver may take m and
				// recycle it for another send: keep what the Status needs
				// (data for its length only), in the caller's memory.
				*hdr = message{src: m.src, tag: m.tag, dt: m.dt, data: m.data}
				m = hdr
			}
			box.mu.Unlock()
			return m, nil
		}
		if !wait {
			box.mu.Unlock()
			return nil, nil
		}
		if c.freed.Load() { // Free ran since the check: its sweep is over (endPending)
			box.mu.Unlock()
			return nil, fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, fromWhom(source, tag), comm.ErrFreed)
		}
		counted := c.g.await(c.rank, source)
		if err := c.g.unreachable(c.rank, source); err != nil {
			if counted {
				c.g.unawait(source)
			}
			box.mu.Unlock()
			return nil, fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, fromWhom(source, tag), err)
		}
		ch := make(chan struct{})
		box.probes = append(box.probes, ch)
		box.mu.Unlock()
		var cause error
		select {
		case <-ch:
		case <-ctx.Done():
			cause = ctxerr.Of(ctx, comm.ErrBroken)
		case <-c.g.brk.ch:
			cause = c.g.brk.broken()
		case <-c.g.w.brk.ch:
			cause = c.g.w.brk.broken()
		}
		// Counted while ch was in probes: a departure of source meanwhile
		// swept this mailbox and closed ch; a later one is seen by the
		// next check, counted anew.
		if counted {
			c.g.unawait(source)
		}
		if cause == nil {
			continue
		}
		box.mu.Lock()
		if i := slices.Index(box.probes, ch); i >= 0 {
			box.probes = slices.Delete(box.probes, i, i+1)
		}
		box.mu.Unlock()
		return nil, fmt.Errorf("local: %s on rank %d %s: %w", call, c.rank, fromWhom(source, tag), cause)
	}
}

// Iprobe implements comm.Comm.
func (c *rankComm) Iprobe(dt comm.Datatype, source, tag int) (bool, comm.Status, error) {
	if source == comm.ProcNull {
		err := c.checkNullProbe("Iprobe", dt, tag)
		return err == nil, comm.NullStatus(), err
	}
	var hdr message
	m, err := c.probe(context.Background(), "Iprobe", dt, source, tag, false, &hdr)
	if m == nil || err != nil {
		return false, comm.Status{}, err
	}
	st, err := probeStatus("Iprobe", m, dt, c.rank)
	return true, st, err
}

// Probe implements comm.Comm.
func (c *rankComm) Probe(ctx context.Context, dt comm.Datatype, source, tag int) (comm.Status, error) {
	if source == comm.ProcNull {
		if err := c.checkNullProbe("Probe", dt, tag); err != nil {
			return comm.Status{}, err
		}
		return comm.NullStatus(), nil
	}
	var hdr message
	m, err := c.probe(ctx, "Probe", dt, source, tag, true, &hdr)
	if err != nil {
		return comm.Status{}, err
	}
	return probeStatus("Probe", m, dt, c.rank)
}

// Improbe implements comm.Comm.
func (c *rankComm) Improbe(dt comm.Datatype, source, tag int) (comm.Message, error) {
	if source == comm.ProcNull {
		if err := c.checkNullProbe("Improbe", dt, tag); err != nil {
			return nil, err
		}
		return comm.NullMessage(), nil
	}
	m, err := c.probe(context.Background(), "Improbe", dt, source, tag, false, nil)
	if m == nil || err != nil {
		return nil, err
	}
	return c.matched("Improbe", m, dt)
}

// Mprobe implements comm.Comm.
func (c *rankComm) Mprobe(ctx context.Context, dt comm.Datatype, source, tag int) (comm.Message, error) {
	if source == comm.ProcNull {
		if err := c.checkNullProbe("Mprobe", dt, tag); err != nil {
			return nil, err
		}
		return comm.NullMessage(), nil
	}
	m, err := c.probe(ctx, "Mprobe", dt, source, tag, true, nil)
	if err != nil {
		return nil, err
	}
	return c.matched("Mprobe", m, dt)
}

// matched wraps a message taken by a matched probe. A datatype mismatch
// consumes the message (releasing its sender) and is returned.
func (c *rankComm) matched(call string, m *message, dt comm.Datatype) (comm.Message, error) {
	st, err := probeStatus(call, m, dt, c.rank)
	if err != nil {
		if m.done != nil {
			c.g.releaseSender(m)
		}
		return nil, err
	}
	return &matchedMsg{c: c, m: m, dt: dt, st: st}, nil
}

// matchedMsg implements comm.Message.
type matchedMsg struct {
	c        *rankComm
	m        *message
	dt       comm.Datatype
	st       comm.Status
	received atomic.Bool
}

// Status implements comm.Message.
func (mm *matchedMsg) Status() comm.Status { return mm.st }

// Recv implements comm.Message.
func (mm *matchedMsg) Recv(into comm.Into) (comm.Status, error) {
	if mm.received.Swap(true) {
		return comm.Status{}, fmt.Errorf("local: Message.Recv on rank %d: %w: the message from rank %d tag %d was already received",
			mm.c.rank, comm.ErrInvalidArg, mm.st.Source, mm.st.Tag)
	}
	if mm.c.freed.Load() {
		// The communicator was freed: the message is dropped (its
		// sender released, as by a receive), as under MPI.
		if mm.m.done != nil {
			mm.c.g.releaseSender(mm.m)
		}
		return comm.Status{}, fmt.Errorf("local: Message.Recv on rank %d: the message from rank %d tag %d: %w before it was received",
			mm.c.rank, mm.st.Source, mm.st.Tag, comm.ErrFreed)
	}
	return mm.c.consume("Message.Recv", peers{}, mm.m, mm.dt, into, nil)
}
