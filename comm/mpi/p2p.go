//go:build mpi

package mpi

/*
#include "pz_mpi.h"
*/
import "C"

import (
	"context"
	"fmt"
	"strings"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// Point-to-point.

// peers names the peers and tags of a point-to-point call in its errors,
// as comm/local does: "to rank 1 tag 5", "from any rank with any tag",
// both for Sendrecv. It is a value, said only when there is an error.
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

// peerPast stands for a peer past what a p2pWhat holds (2^28-2).
const peerPast = -1 << 40

func (p peers) String() string {
	rank := func(r int) string {
		switch r {
		case comm.AnySource:
			return "any rank"
		case peerPast:
			return "a rank past 2^28"
		}
		return fmt.Sprintf("rank %d", r)
	}
	var parts []string
	if p.send {
		parts = append(parts, fmt.Sprintf("to %s tag %d", rank(p.dest), p.sendTag))
	}
	if p.recv {
		if p.recvTag == comm.AnyTag {
			parts = append(parts, fmt.Sprintf("from %s with any tag", rank(p.source)))
		} else {
			parts = append(parts, fmt.Sprintf("from %s tag %d", rank(p.source), p.recvTag))
		}
	}
	return strings.Join(parts, ", ")
}

// p2pErr is the error of a point-to-point call on this rank, naming the
// call, the rank and the peers and tags, as comm/local's do: "mpi: Recv
// on rank 1 from rank 0 tag 5: comm: message larger than receive buffer:
// ...".
func (c *Comm) p2pErr(call string, p peers, err error) error {
	return fmt.Errorf("mpi: %s on rank %d %s: %w", call, c.rank, p, err)
}

// selfSendHint says why a send (an Ssend with sync) from a rank to itself
// ended by its context and what a program does instead: the rank posted
// no receive for it before sending, and the send waited for one (an
// Ssend always does; MPICH buffers no send to the rank itself, whatever
// its size; Open MPI buffers only those below its eager limit), as
// docs/backends.md, "Sends that wait for their receive", says.
func selfSendHint(sync bool) string {
	why := "a send to the rank itself waits until this rank receives it"
	switch {
	case sync:
		why = "an Ssend to the rank itself waits until this rank receives it"
	case Library() == "mpich":
		why += " (MPICH buffers no send to the rank itself, whatever its size)"
	case Library() == "openmpi":
		why += " (Open MPI buffers only one below its eager limit)"
	}
	return why + ": post the receive first (Irecv, then the send, then Wait), or use Sendrecv or SendrecvReplace, " +
		"or Isend and Wait after the receives (docs/backends.md, \"Sends that wait for their receive\")"
}

// checkP2P validates a peer rank and a tag (comm.CheckPeer, comm.CheckTag,
// as on comm/local) and the library's tag limit (TagUB). any allows the
// wildcards.
func (c *Comm) checkP2P(what string, peer, tag int, any bool) error {
	if err := comm.FirstErr(comm.CheckPeer(what, c.rank, peer, c.size, any), comm.CheckTag(what, c.rank, tag, any)); err != nil {
		return err
	}
	if tag > c.st.tagUB {
		return &comm.ArgError{Op: what, Rank: c.rank, Detail: fmt.Sprintf("tag %d exceeds %d, the largest this MPI library takes (MPI_TAG_UB; mpi.Comm.TagUB)", tag, c.st.tagUB)}
	}
	return nil
}

// TagUB is the largest tag the MPI library takes (its MPI_TAG_UB
// attribute, read at Init): 2^31-1 under Open MPI, 2^28-1 under MPICH 4;
// MPI promises only 32767. The point-to-point calls refuse a larger tag
// with a *comm.ArgError before MPI sees it. comm/local takes any
// non-negative tag.
func (c *Comm) TagUB() int { return c.st.tagUB }

// checkP2PBuf validates a message buffer (comm.CheckBuf, as on
// comm/local). Messages of any size go: one past MPI's int count travels
// as one element of a derived datatype.
func (c *Comm) checkP2PBuf(what string, b comm.Buf) error {
	return comm.CheckBuf(what, c.rank, b)
}

// Send sends buf to dest (MPI_Send, or MPI_Isend tested until done when ctx
// can be canceled; a canceled Send may still be delivered later).
// Point-to-point messages travel as bytes: the receiver checks the size
// against its element type.
func (c *Comm) Send(ctx context.Context, buf comm.Buf, dest, tag int) error {
	if err := c.usable("Send"); err != nil {
		return err
	}
	if err := c.checkP2PBuf("Send", buf); err != nil {
		return err
	}
	if err := c.checkP2P("Send", dest, tag, false); err != nil {
		return err
	}
	if c.blocks(ctx) && len(buf.Bytes) <= maxCount {
		// The common blocking case, without doSized's closures.
		id := c.beginP2P(ctx, p2p(p2pSend, dest, tag))
		rc := C.pz_send(ptr(buf.Bytes), C.int(len(buf.Bytes)), c.h.byte, C.int(dest), C.int(tag), c.c)
		c.st.watch.endP2P(id)
		c.st.paceP2P()
		if rc != 0 {
			return c.p2pErr("Send", sendTo(dest, tag), c.st.error("MPI_Send", rc))
		}
		return nil
	}
	n, dt, err := c.span("Send", len(buf.Bytes), c.h.byte)
	if err != nil {
		return err
	}
	defer c.free(dt)
	bp := ptr(buf.Bytes)
	return c.p2pSized(ctx, "Send", "MPI_Send", p2p(p2pSend, dest, tag), len(buf.Bytes),
		func() C.int { return C.pz_send(bp, n, dt.t, C.int(dest), C.int(tag), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_isend(bp, n, dt.t, C.int(dest), C.int(tag), c.c, r) }, bp)
}

// Ssend is the synchronous send (MPI_Ssend, or MPI_Issend tested until
// done when ctx can be canceled): it returns once a receive has matched
// the message. If ctx ends after the message was posted and before a
// receive matched it, the error wraps ctx's error and says that MPI
// cannot withdraw a send, as comm.Ssend says: the message stays posted
// and a later receive on dest may still take it (comm/local withdraws
// it).
func (c *Comm) Ssend(ctx context.Context, buf comm.Buf, dest, tag int) error {
	if err := c.usable("Ssend"); err != nil {
		return err
	}
	if err := c.checkP2PBuf("Ssend", buf); err != nil {
		return err
	}
	if err := c.checkP2P("Ssend", dest, tag, false); err != nil {
		return err
	}
	n, dt, err := c.span("Ssend", len(buf.Bytes), c.h.byte)
	if err != nil {
		return err
	}
	defer c.free(dt)
	bp := ptr(buf.Bytes)
	return c.p2pSized(ctx, "Ssend", "MPI_Ssend", p2p(p2pSsend, dest, tag), len(buf.Bytes),
		func() C.int { return C.pz_ssend(bp, n, dt.t, C.int(dest), C.int(tag), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_issend(bp, n, dt.t, C.int(dest), C.int(tag), c.c, r) }, bp)
}

// p2pSized is doSized for the send name (MPI's call), watched as what,
// whose errors name the rank, the peer and the tag (p2pErr).
func (c *Comm) p2pSized(ctx context.Context, name, call string, what p2pWhat, nbytes int, block func() C.int, start func(*C.MPI_Request) C.int, pins ...unsafe.Pointer) error {
	id := c.beginP2P(ctx, what)
	defer c.st.watch.endP2P(id)
	p := what.peers()
	if c.blocks(ctx) {
		rc := block()
		c.st.paceP2P()
		if rc != 0 {
			return c.p2pErr(name, p, c.st.error(call, rc))
		}
		return nil
	}
	if ctx.Err() != nil {
		return c.p2pErr(name, p, ctxErr(ctx))
	}
	r := newRequest(c, call, false, pins...)
	r.what = what
	c.st.lock()
	rc := start(r.req)
	c.st.unlock()
	if rc != 0 {
		r.release()
		return c.p2pErr(name, p, c.st.error(call, rc))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := poll(ctx, spinFor(nbytes), r.test); err != nil {
		if ctx.Err() != nil && p.dest == c.rank {
			err = fmt.Errorf("%w: %s", err, selfSendHint(what.kind() == p2pSsend))
		}
		if what.kind() == p2pSsend && ctx.Err() != nil {
			// As comm.Ssend says: the message cannot be withdrawn,
			// and the error says so; the communicator stays usable,
			// so no ErrBroken.
			err = fmt.Errorf("%w: MPI cannot withdraw a send: the message stays posted, and a later receive on rank %d may still take it", err, p.dest)
		}
		return c.p2pErr(name, p, err)
	}
	return r.err
}

// Recv receives one message (MPI_Mprobe, or MPI_Improbe polled when ctx can
// be canceled, then MPI_Mrecv, so that another thread cannot steal the
// matched message). A message that does not fit the buffer into returns is
// consumed and ErrTruncated returned.
//
// Datatypes: messages travel as bytes (MPI_BYTE) without the sender's
// datatype, and Recv counts them in dt. A message whose size is not a
// whole number of dt is consumed and an error wrapping comm.ErrMismatch
// returned (countOf); one of another datatype whose size divides is
// received as it is (3 float64 received as Int32 are 6 meaningless
// int32s, and no error), where comm/local returns an error wrapping
// comm.ErrMismatch. Use one datatype per tag.
//
// The stall watch (WithStallReport, WithTimeout) sees the wait on the
// blocking and the polled path.
func (c *Comm) Recv(ctx context.Context, dt comm.Datatype, source, tag int, into comm.Into) (comm.Status, error) {
	if err := c.usable("Recv"); err != nil {
		return comm.Status{}, err
	}
	if err := comm.CheckBuf("Recv", c.rank, comm.Buf{Type: dt}); err != nil {
		return comm.Status{}, err // a *comm.ArgError, as on comm/local
	}
	if err := c.checkP2P("Recv", source, tag, true); err != nil {
		return comm.Status{}, err
	}
	return c.recv(ctx, "Recv", recvFrom(source, tag), dt, source, tag, into)
}

// recv is Recv for call (Recv, or Sendrecv's receive), whose errors name
// p.
func (c *Comm) recv(ctx context.Context, call string, p peers, dt comm.Datatype, source, tag int, into comm.Into) (comm.Status, error) {
	kind := p2pRecv
	if call != "Recv" {
		kind = sendrecvKind(call)
	}
	id := c.beginP2P(ctx, p2p(kind, source, tag))
	msg, st, err := c.mprobe(ctx, source, tag, true)
	var status comm.Status
	if err == nil {
		status, err = c.mrecv(&msg, st, dt, into)
	}
	c.st.watch.endP2P(id)
	if err != nil {
		err = c.p2pErr(call, p, err)
	}
	return status, err
}

// mprobe matches a message (MPI_Mprobe, or MPI_Improbe polled when ctx can
// be canceled). Without wait it tests once and returns a null message if
// none is there. The caller's error names the call (p2pErr).
func (c *Comm) mprobe(ctx context.Context, source, tag int, wait bool) (C.MPI_Message, C.pz_status, error) {
	msg := c.h.message_null
	var st C.pz_status
	if wait && c.blocks(ctx) {
		rc := C.pz_mprobe(C.int(source), C.int(tag), c.c, &msg, &st)
		c.st.paceP2P()
		if rc != 0 {
			return msg, st, c.st.error("MPI_Mprobe", rc)
		}
		return msg, st, nil
	}
	test := func() (bool, error) {
		if c.freed.Load() { // Free, on another goroutine (end.go)
			return false, comm.ErrFreed
		}
		c.st.lock()
		r := C.pz_improbe(C.int(source), C.int(tag), c.c)
		c.st.unlock()
		if r.rc != 0 {
			return false, c.st.error("MPI_Improbe", r.rc)
		}
		if r.flag == 0 {
			return false, nil
		}
		msg, st = r.m, r.st
		return true, nil
	}
	var err error
	if wait {
		err = poll(ctx, 0, test)
	} else {
		_, err = test()
	}
	if err != nil {
		return msg, st, err
	}
	return msg, st, nil
}

// probeStatus turns a probed message's status into a comm.Status counting
// elements of dt.
func probeStatus(st C.pz_status, dt comm.Datatype) (comm.Status, error) {
	status := comm.Status{Source: int(st.source), Tag: int(st.tag)}
	var err error
	status.Count, err = countOf(int(st.bytes), status, dt)
	return status, err
}

// countOf is the element count of a message of nbytes (from st.Source
// with st.Tag) received as dt, or, when nbytes is not a whole number of
// dt, an error wrapping comm.ErrMismatch that says so, as comm/local's
// for a message of another datatype does (no *comm.MismatchError, which
// reports a collective whose ranks disagree). Messages travel as bytes,
// without their datatype, so this is all the receiver can check: a
// message of another datatype whose size divides passes
// (docs/backends.md, Recv).
func countOf(nbytes int, st comm.Status, dt comm.Datatype) (int, error) {
	if nbytes%dt.Size() != 0 {
		return 0, fmt.Errorf("%w: datatype of the message from rank %d (tag %d): its %d bytes are not a whole number of %v (%d bytes), the receiver's datatype; the sender used another",
			comm.ErrMismatch, st.Source, st.Tag, nbytes, dt, dt.Size())
	}
	return nbytes / dt.Size(), nil
}

// mrecv receives a matched message into the buffer into returns. A message
// that does not fit, or has the wrong size for dt, is consumed and the
// error returned; the caller's error names the call (p2pErr).
func (c *Comm) mrecv(msg *C.MPI_Message, st C.pz_status, dt comm.Datatype, into comm.Into) (comm.Status, error) {
	nbytes := int(st.bytes)
	status, err := probeStatus(st, dt)
	var buf []byte
	if err == nil {
		buf, err = into(status.Count)
		if err == nil && len(buf) < nbytes {
			err = fmt.Errorf("%w: message from rank %d has %d elements, buffer holds %d", comm.ErrTruncated, status.Source, status.Count, len(buf)/dt.Size())
		}
	}
	var n C.int
	var mt mpiType
	if err == nil {
		n, mt, err = c.span("MPI_Mrecv", nbytes, c.h.byte)
	}
	if err != nil {
		// Consume the message: receiving it into no memory truncates it.
		c.st.lock()
		C.pz_mrecv(nil, 0, c.h.byte, msg, &st)
		c.st.unlock()
		return status, err
	}
	defer c.free(mt)
	c.st.lock()
	rc := C.pz_mrecv(ptr(buf), n, mt.t, msg, &st)
	c.st.unlock()
	if rc != 0 {
		return status, c.st.error("MPI_Mrecv", rc)
	}
	return status, nil
}

// SendrecvBuf implements comm.SendrecvComm: one MPI_Sendrecv where both
// the send and the receive may block in MPI (blocks, directRecv);
// otherwise an Isend, a RecvBuf and a Wait. The received message travels
// as bytes, as Recv's does: its size is checked against recv's element
// type.
func (c *Comm) SendrecvBuf(ctx context.Context, send comm.Buf, dest, sendTag int, recv comm.Buf, source, recvTag int) (comm.Status, error) {
	return c.sendrecv(ctx, "Sendrecv", send, dest, sendTag, recv, source, recvTag)
}

// SendrecvReplaceBuf implements comm.SendrecvReplaceComm: SendrecvBuf of
// a copy of buf into buf, its errors naming SendrecvReplace.
func (c *Comm) SendrecvReplaceBuf(ctx context.Context, buf comm.Buf, dest, sendTag, source, recvTag int) (comm.Status, error) {
	send := comm.Buf{Type: buf.Type, Bytes: append([]byte(nil), buf.Bytes...)}
	return c.sendrecv(ctx, "SendrecvReplace", send, dest, sendTag, buf, source, recvTag)
}

// sendrecvKind is the kind of the wait in call's receive (Sendrecv,
// SendrecvReplace).
func sendrecvKind(call string) p2pKind {
	if call == "SendrecvReplace" {
		return p2pSendrecvReplace
	}
	return p2pSendrecv
}

// sendrecv is SendrecvBuf for call (Sendrecv, SendrecvReplace), which
// its errors name.
func (c *Comm) sendrecv(ctx context.Context, call string, send comm.Buf, dest, sendTag int, recv comm.Buf, source, recvTag int) (comm.Status, error) {
	if err := c.usable(call); err != nil {
		return comm.Status{}, err
	}
	if err := comm.FirstErr(c.checkP2PBuf(call, send), c.checkP2P(call, dest, sendTag, false),
		c.checkP2PBuf(call, recv), c.checkP2P(call, source, recvTag, true)); err != nil {
		return comm.Status{}, err
	}
	if len(send.Bytes) > maxCount || !c.directRecv(ctx, len(recv.Bytes), source) {
		return c.sendrecvSplit(ctx, call, send, dest, sendTag, recv, source, recvTag)
	}
	id := c.beginP2P(ctx, p2p(sendrecvKind(call), source, recvTag))
	var st C.pz_status
	rc := C.pz_sendrecv(ptr(send.Bytes), C.int(len(send.Bytes)), c.h.byte, C.int(dest), C.int(sendTag),
		ptr(recv.Bytes), C.int(len(recv.Bytes)), c.h.byte, C.int(source), C.int(recvTag), c.c, &st)
	c.st.watch.endP2P(id)
	c.st.paceP2P()
	status, err := c.received("MPI_Sendrecv", rc, &st, recv)
	if err != nil {
		err = c.p2pErr(call, sendrecvPeers(dest, sendTag, source, recvTag), err)
	}
	return status, err
}

// received turns the outcome of a receive into buf, a fixed buffer, into
// its Status: MPI's error (for a message that did not fit, one wrapping
// comm.ErrTruncated that says both sizes, as truncation does), or a size
// that is not a whole number of buf's elements. The caller's error names
// the call (p2pErr).
func (c *Comm) received(mpiCall string, rc C.int, st *C.pz_status, buf comm.Buf) (comm.Status, error) {
	status := comm.Status{Source: int(st.source), Tag: int(st.tag)}
	if rc != 0 {
		e := c.st.error(mpiCall, rc).(*Error)
		if e.Truncated {
			var err error
			status.Count, err = truncation(st, e, buf.Type, len(buf.Bytes), len(buf.Bytes))
			return status, err
		}
		return status, e
	}
	var err error
	status.Count, err = countOf(int(st.bytes), status, buf.Type)
	return status, err
}

// directRecv reports whether a receive of n bytes from source may be one
// blocking MPI call into the caller's buffer: the call blocks (blocks), n
// is within MPI's counts, and the message cannot come from this rank
// itself. Open MPI 4.1 truncates a message to a receive posted on the
// same rank silently, where Recv's matched probe sees its size first.
func (c *Comm) directRecv(ctx context.Context, n, source int) bool {
	return c.blocks(ctx) && n <= maxCount && source != c.rank && source != comm.AnySource
}

// RecvBuf implements comm.RecvBufComm: one MPI_Recv where directRecv
// allows it, otherwise Recv.
func (c *Comm) RecvBuf(ctx context.Context, buf comm.Buf, source, tag int) (comm.Status, error) {
	return c.recvBuf(ctx, "Recv", recvFrom(source, tag), buf, source, tag)
}

// recvBuf is RecvBuf for call (Recv, or Sendrecv's receive), whose
// errors name p.
func (c *Comm) recvBuf(ctx context.Context, call string, p peers, buf comm.Buf, source, tag int) (comm.Status, error) {
	if err := c.usable(call); err != nil {
		return comm.Status{}, err
	}
	if err := comm.FirstErr(c.checkP2PBuf(call, buf), c.checkP2P(call, source, tag, true)); err != nil {
		return comm.Status{}, err
	}
	if !c.directRecv(ctx, len(buf.Bytes), source) {
		return c.recv(ctx, call, p, buf.Type, source, tag, func(int) ([]byte, error) { return buf.Bytes, nil })
	}
	id := c.beginP2P(ctx, p2p(p2pRecv, source, tag))
	var st C.pz_status
	rc := C.pz_recv(ptr(buf.Bytes), C.int(len(buf.Bytes)), c.h.byte, C.int(source), C.int(tag), c.c, &st)
	c.st.watch.endP2P(id)
	c.st.paceP2P()
	status, err := c.received("MPI_Recv", rc, &st, buf)
	if err != nil {
		err = c.p2pErr(call, p, err)
	}
	return status, err
}

var _ comm.RecvBufComm = (*Comm)(nil)

var (
	_ comm.SendrecvComm        = (*Comm)(nil)
	_ comm.SendrecvReplaceComm = (*Comm)(nil)
)

// sendrecvSplit is sendrecv as an Isend, a RecvBuf (which consumes a
// message too long for recv and says so) and a Wait, whose errors name
// call (the Isend's too: the program called Sendrecv).
func (c *Comm) sendrecvSplit(ctx context.Context, call string, send comm.Buf, dest, sendTag int, recv comm.Buf, source, recvTag int) (comm.Status, error) {
	sr, err := c.isend(call, send, dest, sendTag)
	if err != nil {
		return comm.Status{}, err
	}
	st, rerr := c.recvBuf(ctx, call, sendrecvPeers(dest, sendTag, source, recvTag), recv, source, recvTag)
	if _, werr := sr.Wait(ctx); werr != nil && rerr == nil {
		rerr = werr
	}
	return st, rerr
}

// Isend starts a send (MPI_Isend). buf is pinned until the request
// completes.
func (c *Comm) Isend(buf comm.Buf, dest, tag int) (comm.Request, error) {
	r, err := c.isend("Isend", buf, dest, tag)
	if err != nil {
		return nil, err // no typed nil in the interface
	}
	return r, nil
}

// isend is Isend for call (Isend, or Sendrecv's send), which its errors
// and its request's name.
func (c *Comm) isend(call string, buf comm.Buf, dest, tag int) (*request, error) {
	if err := c.usable(call); err != nil {
		return nil, err
	}
	if err := c.checkP2PBuf(call, buf); err != nil {
		return nil, err
	}
	if err := c.checkP2P(call, dest, tag, false); err != nil {
		return nil, err
	}
	n, dt, err := c.span(call, len(buf.Bytes), c.h.byte)
	if err != nil {
		return nil, err
	}
	defer c.free(dt) // MPI keeps it while the send is pending
	r := newRequest(c, "MPI_Isend", false)
	if call != "Isend" {
		r.op = call
	}
	bp := r.sendFrom(buf.Bytes)
	kind := p2pWaitIsend
	switch call {
	case "Sendrecv":
		kind = p2pWaitSendrecv
	case "SendrecvReplace":
		kind = p2pWaitSendrecvReplace
	}
	r.bytes, r.dt, r.what = len(buf.Bytes), buf.Type, p2p(kind, dest, tag)
	c.st.lock()
	var rc C.int
	if dt.made {
		rc = C.pz_isend(bp, n, dt.t, C.int(dest), C.int(tag), c.c, r.req)
	} else { // C memory, or Go memory sendFrom pinned
		rc = C.pz_isend_u(C.uintptr_t(uintptr(bp)), n, c.byteU, C.int(dest), C.int(tag), c.cu, C.uintptr_t(uintptr(unsafe.Pointer(r.req))))
	}
	c.st.unlock()
	if rc != 0 {
		r.release()
		return nil, c.p2pErr(call, sendTo(dest, tag), c.st.error("MPI_Isend", rc))
	}
	return r, nil
}

// Irecv starts a receive into buf (MPI_Irecv). A larger message completes
// with an error wrapping comm.ErrTruncated, and a Status whose Count is
// the message's where its size is known (request.truncated). A receive
// of at most 4 KiB passes through C memory with room for 4 KiB, and one
// that the rank's own message may match has room past its buffer
// (wideRecv): Open MPI truncates such a message silently.
func (c *Comm) Irecv(buf comm.Buf, source, tag int) (comm.Request, error) {
	if err := c.usable("Irecv"); err != nil {
		return nil, err
	}
	if err := c.checkP2PBuf("Irecv", buf); err != nil {
		return nil, err
	}
	if err := c.checkP2P("Irecv", source, tag, true); err != nil {
		return nil, err
	}
	nb := len(buf.Bytes)
	r := newRequest(c, "MPI_Irecv", false)
	r.recv, r.dt, r.bytes, r.room, r.what = true, buf.Type, nb, nb, p2p(p2pWaitIrecv, source, tag)
	var rc C.int
	switch {
	case nb <= stageBytes: // C memory, with room for stageBytes
		bp := r.recvStaged(buf.Bytes)
		c.st.lock()
		rc = C.pz_irecv_u(C.uintptr_t(uintptr(bp)), stageBytes, c.byteU, C.int(source), C.int(tag), c.cu, C.uintptr_t(uintptr(unsafe.Pointer(r.req))))
		c.st.unlock()
	case c.wideRecv(nb, source):
		// The buffer, pinned, then the slot's C memory: one datatype
		// at absolute addresses (MPI_BOTTOM).
		dt, err := c.tailType("Irecv", r.pinned(buf.Bytes), nb, r.slot.staging())
		if err != nil {
			r.release()
			return nil, err
		}
		r.room = nb + stageBytes
		c.st.lock()
		rc = C.pz_irecv_bottom(dt.t, C.int(source), C.int(tag), c.c, r.req)
		c.st.unlock()
		c.free(dt) // MPI keeps it while the receive is pending
	default:
		n, dt, err := c.span("Irecv", nb, c.h.byte)
		if err != nil {
			r.release()
			return nil, err
		}
		bp := r.pinned(buf.Bytes)
		c.st.lock()
		if dt.made {
			rc = C.pz_irecv(bp, n, dt.t, C.int(source), C.int(tag), c.c, r.req)
		} else {
			rc = C.pz_irecv_u(C.uintptr_t(uintptr(bp)), n, c.byteU, C.int(source), C.int(tag), c.cu, C.uintptr_t(uintptr(unsafe.Pointer(r.req))))
		}
		c.st.unlock()
		c.free(dt)
	}
	if rc != 0 {
		r.release()
		return nil, c.p2pErr("Irecv", recvFrom(source, tag), c.st.error("MPI_Irecv", rc))
	}
	return r, nil
}
