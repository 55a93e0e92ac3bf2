//go:build mpi

package mpi

/*
#include "pz_mpi.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// Point-to-point.

// checkP2P validates a peer rank and a tag (comm.CheckPeer, comm.CheckTag,
// as on comm/local) and MPI's tag limit. any allows the wildcards.
func (c *Comm) checkP2P(what string, peer, tag int, any bool) error {
	if err := comm.FirstErr(comm.CheckPeer(what, c.rank, peer, c.size, any), comm.CheckTag(what, c.rank, tag, any)); err != nil {
		return err
	}
	if tag > math.MaxInt32 {
		return &comm.ArgError{Op: what, Rank: c.rank, Detail: fmt.Sprintf("tag %d exceeds MPI's limit %d", tag, math.MaxInt32)}
	}
	return nil
}

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
		id := c.st.watch.begin("MPI_Send", c.size)
		rc := C.pz_send(ptr(buf.Bytes), C.int(len(buf.Bytes)), c.h.byte, C.int(dest), C.int(tag), c.c)
		c.st.watch.end(id)
		if rc != 0 {
			return fmt.Errorf("mpi: %w", c.st.error("MPI_Send", rc))
		}
		return nil
	}
	n, dt, err := c.span("Send", len(buf.Bytes), c.h.byte)
	if err != nil {
		return err
	}
	defer c.free(dt)
	bp := ptr(buf.Bytes)
	return c.doSized(ctx, "MPI_Send", false, len(buf.Bytes),
		func() C.int { return C.pz_send(bp, n, dt.t, C.int(dest), C.int(tag), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_isend(bp, n, dt.t, C.int(dest), C.int(tag), c.c, r) }, bp)
}

// Ssend is the synchronous send (MPI_Ssend, or MPI_Issend tested until
// done when ctx can be canceled): it returns once a receive has matched
// the message.
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
	return c.doSized(ctx, "MPI_Ssend", false, len(buf.Bytes),
		func() C.int { return C.pz_ssend(bp, n, dt.t, C.int(dest), C.int(tag), c.c) },
		func(r *C.MPI_Request) C.int { return C.pz_issend(bp, n, dt.t, C.int(dest), C.int(tag), c.c, r) }, bp)
}

// Recv receives one message (MPI_Mprobe, or MPI_Improbe polled when ctx can
// be canceled, then MPI_Mrecv, so that another thread cannot steal the
// matched message). A message that does not fit the buffer into returns is
// consumed and ErrTruncated returned.
func (c *Comm) Recv(ctx context.Context, dt comm.Datatype, source, tag int, into comm.Into) (comm.Status, error) {
	if err := c.usable("Recv"); err != nil {
		return comm.Status{}, err
	}
	if !dt.Valid() {
		return comm.Status{}, fmt.Errorf("mpi: Recv: invalid datatype %v: %w", dt, comm.ErrInvalidArg)
	}
	if err := c.checkP2P("Recv", source, tag, true); err != nil {
		return comm.Status{}, err
	}
	msg, st, err := c.mprobe(ctx, "Recv", source, tag, true)
	if err != nil {
		return comm.Status{}, err
	}
	return c.mrecv("Recv", &msg, st, dt, into)
}

// mprobe matches a message (MPI_Mprobe, or MPI_Improbe polled when ctx can
// be canceled). Without wait it tests once and returns a null message if
// none is there.
func (c *Comm) mprobe(ctx context.Context, call string, source, tag int, wait bool) (C.MPI_Message, C.pz_status, error) {
	msg := c.h.message_null
	var st C.pz_status
	if wait && c.blocks(ctx) {
		if rc := C.pz_mprobe(C.int(source), C.int(tag), c.c, &msg, &st); rc != 0 {
			return msg, st, fmt.Errorf("mpi: %s: %w", call, c.st.error("MPI_Mprobe", rc))
		}
		return msg, st, nil
	}
	test := func() (bool, error) {
		var flag C.int
		c.st.lock()
		rc := C.pz_improbe(C.int(source), C.int(tag), c.c, &flag, &msg, &st)
		c.st.unlock()
		if rc != 0 {
			return false, c.st.error("MPI_Improbe", rc)
		}
		return flag != 0, nil
	}
	var err error
	if wait {
		err = poll(ctx, 0, test)
	} else {
		_, err = test()
	}
	if err != nil {
		return msg, st, fmt.Errorf("mpi: %s: %w", call, err)
	}
	return msg, st, nil
}

// probeStatus turns a probed message's status into a comm.Status counting
// elements of dt.
func probeStatus(call string, st C.pz_status, dt comm.Datatype) (comm.Status, error) {
	status := comm.Status{Source: int(st.source), Tag: int(st.tag)}
	nbytes := int(st.bytes)
	if nbytes%dt.Size() != 0 {
		return status, fmt.Errorf("%w: mpi: %s: message of %d bytes from rank %d is not a whole number of %s (the sender used another datatype)", comm.ErrMismatch, call, nbytes, status.Source, dt)
	}
	status.Count = nbytes / dt.Size()
	return status, nil
}

// mrecv receives a matched message into the buffer into returns. A message
// that does not fit, or has the wrong size for dt, is consumed and the
// error returned.
func (c *Comm) mrecv(call string, msg *C.MPI_Message, st C.pz_status, dt comm.Datatype, into comm.Into) (comm.Status, error) {
	nbytes := int(st.bytes)
	status, err := probeStatus(call, st, dt)
	var buf []byte
	if err == nil {
		buf, err = into(status.Count)
		if err == nil && len(buf) < nbytes {
			err = fmt.Errorf("mpi: %s: message of %d elements from rank %d, buffer holds %d: %w", call, status.Count, status.Source, len(buf)/dt.Size(), comm.ErrTruncated)
		}
	}
	var n C.int
	var mt mpiType
	if err == nil {
		n, mt, err = c.span(call, nbytes, c.h.byte)
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
		return status, fmt.Errorf("mpi: %s: %w", call, c.st.error("MPI_Mrecv", rc))
	}
	return status, nil
}

// SendrecvBuf implements comm.SendrecvComm: one MPI_Sendrecv where both
// the send and the receive may block in MPI (blocks, directRecv);
// otherwise an Isend, a RecvBuf and a Wait. The received message travels
// as bytes, as Recv's does: its size is checked against recv's element
// type.
func (c *Comm) SendrecvBuf(ctx context.Context, send comm.Buf, dest, sendTag int, recv comm.Buf, source, recvTag int) (comm.Status, error) {
	if err := c.usable("Sendrecv"); err != nil {
		return comm.Status{}, err
	}
	if err := comm.FirstErr(c.checkP2PBuf("Sendrecv", send), c.checkP2P("Sendrecv", dest, sendTag, false),
		c.checkP2PBuf("Sendrecv", recv), c.checkP2P("Sendrecv", source, recvTag, true)); err != nil {
		return comm.Status{}, err
	}
	if len(send.Bytes) > maxCount || !c.directRecv(ctx, len(recv.Bytes), source) {
		return c.sendrecvSplit(ctx, send, dest, sendTag, recv, source, recvTag)
	}
	id := c.st.watch.begin("MPI_Sendrecv", c.size)
	var st C.pz_status
	rc := C.pz_sendrecv(ptr(send.Bytes), C.int(len(send.Bytes)), c.h.byte, C.int(dest), C.int(sendTag),
		ptr(recv.Bytes), C.int(len(recv.Bytes)), c.h.byte, C.int(source), C.int(recvTag), c.c, &st)
	c.st.watch.end(id)
	return c.received("Sendrecv", "MPI_Sendrecv", rc, st, recv.Type)
}

// received turns the outcome of a receive into a fixed buffer of dt
// elements into its Status: MPI's error, or a size that is not a whole
// number of dt.
func (c *Comm) received(call, mpiCall string, rc C.int, st C.pz_status, dt comm.Datatype) (comm.Status, error) {
	status := comm.Status{Source: int(st.source), Tag: int(st.tag)}
	if rc != 0 {
		return status, fmt.Errorf("mpi: %s: %w", call, c.st.error(mpiCall, rc))
	}
	n, sz := int(st.bytes), dt.Size()
	if n%sz != 0 {
		return status, fmt.Errorf("%w: mpi: %s: received %d bytes from rank %d, not a whole number of %s (the sender used another datatype)", comm.ErrMismatch, call, n, status.Source, dt)
	}
	status.Count = n / sz
	return status, nil
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
	if !c.directRecv(ctx, len(buf.Bytes), source) {
		return c.Recv(ctx, buf.Type, source, tag, func(int) ([]byte, error) { return buf.Bytes, nil })
	}
	if err := c.usable("Recv"); err != nil {
		return comm.Status{}, err
	}
	if err := comm.FirstErr(c.checkP2PBuf("Recv", buf), c.checkP2P("Recv", source, tag, true)); err != nil {
		return comm.Status{}, err
	}
	id := c.st.watch.begin("MPI_Recv", c.size)
	var st C.pz_status
	rc := C.pz_recv(ptr(buf.Bytes), C.int(len(buf.Bytes)), c.h.byte, C.int(source), C.int(tag), c.c, &st)
	c.st.watch.end(id)
	return c.received("Recv", "MPI_Recv", rc, st, buf.Type)
}

var _ comm.RecvBufComm = (*Comm)(nil)

var _ comm.SendrecvComm = (*Comm)(nil)

// sendrecvSplit is SendrecvBuf as an Isend, a RecvBuf (which consumes a
// message too long for recv and says so) and a Wait.
func (c *Comm) sendrecvSplit(ctx context.Context, send comm.Buf, dest, sendTag int, recv comm.Buf, source, recvTag int) (comm.Status, error) {
	sr, err := c.Isend(send, dest, sendTag)
	if err != nil {
		return comm.Status{}, err
	}
	st, rerr := c.RecvBuf(ctx, recv, source, recvTag)
	if _, werr := sr.Wait(ctx); werr != nil && rerr == nil {
		rerr = werr
	}
	return st, rerr
}

// Isend starts a send (MPI_Isend). buf is pinned until the request
// completes.
func (c *Comm) Isend(buf comm.Buf, dest, tag int) (comm.Request, error) {
	if err := c.usable("Isend"); err != nil {
		return nil, err
	}
	if err := c.checkP2PBuf("Isend", buf); err != nil {
		return nil, err
	}
	if err := c.checkP2P("Isend", dest, tag, false); err != nil {
		return nil, err
	}
	n, dt, err := c.span("Isend", len(buf.Bytes), c.h.byte)
	if err != nil {
		return nil, err
	}
	defer c.free(dt) // MPI keeps it while the send is pending
	r := newRequest(c, "MPI_Isend")
	bp := r.sendFrom(buf.Bytes)
	r.bytes = len(buf.Bytes)
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
		return nil, fmt.Errorf("mpi: Isend: %w", c.st.error("MPI_Isend", rc))
	}
	return r, nil
}

// Irecv starts a receive into buf (MPI_Irecv). A larger message completes
// with an error wrapping comm.ErrTruncated.
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
	n, dt, err := c.span("Irecv", len(buf.Bytes), c.h.byte)
	if err != nil {
		return nil, err
	}
	defer c.free(dt) // MPI keeps it while the receive is pending
	r := newRequest(c, "MPI_Irecv")
	bp := r.recvInto(buf.Bytes)
	r.recv, r.dt, r.bytes = true, buf.Type, len(buf.Bytes)
	c.st.lock()
	var rc C.int
	if dt.made {
		rc = C.pz_irecv(bp, n, dt.t, C.int(source), C.int(tag), c.c, r.req)
	} else { // C memory, or Go memory recvInto pinned
		rc = C.pz_irecv_u(C.uintptr_t(uintptr(bp)), n, c.byteU, C.int(source), C.int(tag), c.cu, C.uintptr_t(uintptr(unsafe.Pointer(r.req))))
	}
	c.st.unlock()
	if rc != 0 {
		r.release()
		return nil, fmt.Errorf("mpi: Irecv: %w", c.st.error("MPI_Irecv", rc))
	}
	return r, nil
}
