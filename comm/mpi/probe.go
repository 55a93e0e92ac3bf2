//go:build mpi

package mpi

/*
#include "pz_mpi.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/pzgo/pz/comm"
)

func (c *Comm) checkProbe(call string, dt comm.Datatype, source, tag int) error {
	if err := c.usable(call); err != nil {
		return err
	}
	if err := comm.CheckBuf(call, c.rank, comm.Buf{Type: dt}); err != nil {
		return err // a *comm.ArgError, as on comm/local
	}
	return c.checkP2P(call, source, tag, true)
}

// Iprobe reports whether a matching message is waiting (MPI_Iprobe),
// counting its size in dt as Probe does.
func (c *Comm) Iprobe(dt comm.Datatype, source, tag int) (bool, comm.Status, error) {
	if source == comm.ProcNull {
		err := c.checkProbe("Iprobe", dt, 0, tag) // rank 0 is in every communicator
		return err == nil, comm.NullStatus(), err
	}
	if err := c.checkProbe("Iprobe", dt, source, tag); err != nil {
		return false, comm.Status{}, err
	}
	var flag C.int
	var st C.pz_status
	c.st.lock()
	rc := C.pz_iprobe(C.int(source), C.int(tag), c.c, &flag, &st)
	c.st.unlock()
	if rc != 0 {
		return false, comm.Status{}, c.p2pErr("Iprobe", recvFrom(source, tag), c.st.error("MPI_Iprobe", rc))
	}
	if flag == 0 {
		return false, comm.Status{}, nil
	}
	status, err := probeStatus(st, dt)
	if err != nil {
		err = c.p2pErr("Iprobe", recvFrom(source, tag), err)
	}
	return true, status, err
}

// Probe waits for a matching message (MPI_Probe, or MPI_Iprobe polled when
// ctx can be canceled). Its Status counts the message's bytes in dt: as
// Recv says, MPI carries no datatype, so only a size that is not a whole
// number of dt is an error wrapping comm.ErrMismatch; a message of another datatype
// whose size divides is counted in dt. The stall watch sees the wait.
func (c *Comm) Probe(ctx context.Context, dt comm.Datatype, source, tag int) (comm.Status, error) {
	if source == comm.ProcNull {
		if err := c.checkProbe("Probe", dt, 0, tag); err != nil {
			return comm.Status{}, err
		}
		return comm.NullStatus(), nil
	}
	if err := c.checkProbe("Probe", dt, source, tag); err != nil {
		return comm.Status{}, err
	}
	id := c.beginP2P(ctx, p2p(p2pProbe, source, tag))
	st, err := c.probe(ctx, source, tag)
	c.st.watch.endP2P(id)
	var status comm.Status
	if err == nil {
		status, err = probeStatus(st, dt)
	}
	if err != nil {
		err = c.p2pErr("Probe", recvFrom(source, tag), err)
	}
	return status, err
}

// probe waits for a matching message (MPI_Probe, or MPI_Iprobe polled when
// ctx can be canceled) and returns its status.
func (c *Comm) probe(ctx context.Context, source, tag int) (C.pz_status, error) {
	var st C.pz_status
	if c.blocks(ctx) {
		rc := C.pz_probe(C.int(source), C.int(tag), c.c, &st)
		c.st.paceP2P()
		if rc != 0 {
			return st, c.st.error("MPI_Probe", rc)
		}
		return st, nil
	}
	err := poll(ctx, 0, func() (bool, error) {
		if c.freed.Load() { // Free, on another goroutine (end.go)
			return false, comm.ErrFreed
		}
		var flag C.int
		c.st.lock()
		rc := C.pz_iprobe(C.int(source), C.int(tag), c.c, &flag, &st)
		c.st.unlock()
		if rc != 0 {
			return false, c.st.error("MPI_Iprobe", rc)
		}
		return flag != 0, nil
	})
	if err != nil {
		return st, err
	}
	return st, nil
}

// Improbe takes a waiting message out of matching (MPI_Improbe).
func (c *Comm) Improbe(dt comm.Datatype, source, tag int) (comm.Message, error) {
	if source == comm.ProcNull {
		if err := c.checkProbe("Improbe", dt, 0, tag); err != nil {
			return nil, err
		}
		return comm.NullMessage(), nil
	}
	if err := c.checkProbe("Improbe", dt, source, tag); err != nil {
		return nil, err
	}
	msg, st, err := c.mprobe(context.Background(), source, tag, false)
	if err == nil && msg == c.h.message_null {
		return nil, nil
	}
	var m comm.Message
	if err == nil {
		m, err = c.matched(msg, st, dt)
	}
	if err != nil {
		return nil, c.p2pErr("Improbe", recvFrom(source, tag), err)
	}
	return m, nil
}

// Mprobe waits for a matching message and takes it out of matching
// (MPI_Mprobe, or MPI_Improbe polled when ctx can be canceled), counting
// its size in dt as Probe does. The stall watch sees the wait.
func (c *Comm) Mprobe(ctx context.Context, dt comm.Datatype, source, tag int) (comm.Message, error) {
	if source == comm.ProcNull {
		if err := c.checkProbe("Mprobe", dt, 0, tag); err != nil {
			return nil, err
		}
		return comm.NullMessage(), nil
	}
	if err := c.checkProbe("Mprobe", dt, source, tag); err != nil {
		return nil, err
	}
	id := c.beginP2P(ctx, p2p(p2pMprobe, source, tag))
	msg, st, err := c.mprobe(ctx, source, tag, true)
	c.st.watch.endP2P(id)
	var m comm.Message
	if err == nil {
		m, err = c.matched(msg, st, dt)
	}
	if err != nil {
		return nil, c.p2pErr("Mprobe", recvFrom(source, tag), err)
	}
	return m, nil
}

// matched wraps a matched message. One whose size is not a whole number of
// dt is consumed and the mismatch returned.
func (c *Comm) matched(msg C.MPI_Message, st C.pz_status, dt comm.Datatype) (comm.Message, error) {
	status, err := probeStatus(st, dt)
	if err != nil {
		c.st.lock()
		C.pz_mrecv(nil, 0, c.h.byte, &msg, &st)
		c.st.unlock()
		return nil, err
	}
	return &message{c: c, msg: msg, st: st, dt: dt, status: status}, nil
}

// message implements comm.Message for an MPI_Message.
type message struct {
	c        *Comm
	msg      C.MPI_Message
	st       C.pz_status
	dt       comm.Datatype
	status   comm.Status
	received atomic.Bool
}

// Status implements comm.Message.
func (m *message) Status() comm.Status { return m.status }

// Recv receives the message (MPI_Mrecv).
func (m *message) Recv(into comm.Into) (comm.Status, error) {
	if m.received.Swap(true) {
		return comm.Status{}, m.c.p2pErr("Message.Recv", recvFrom(m.status.Source, m.status.Tag), fmt.Errorf("%w: the message was already received", comm.ErrInvalidArg))
	}
	msg := m.msg // a local: m holds Go pointers, which cgo must not see
	if m.c.freed.Load() || m.c.st.finalized.Load() {
		// The communicator was freed: the message is dropped (consumed
		// into no memory while MPI lives), as on comm/local.
		if !m.c.st.finalized.Load() {
			st := m.st
			m.c.st.lock()
			C.pz_mrecv(nil, 0, m.c.h.byte, &msg, &st)
			m.c.st.unlock()
		}
		return comm.Status{}, m.c.p2pErr("Message.Recv", recvFrom(m.status.Source, m.status.Tag), fmt.Errorf("%w before the message was received", comm.ErrFreed))
	}
	id := m.c.st.watch.beginP2P(p2p(p2pMrecv, m.status.Source, m.status.Tag))
	st, err := m.c.mrecv(&msg, m.st, m.dt, into)
	m.c.st.watch.endP2P(id)
	if err != nil {
		err = m.c.p2pErr("Message.Recv", recvFrom(m.status.Source, m.status.Tag), err)
	}
	return st, err
}
