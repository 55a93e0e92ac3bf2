//go:build mpi

package mpi

/*
#include "pz_mpi.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// persistent is an MPI persistent request (MPI_Send_init, MPI_Recv_init):
// MPI matches the buffer, peer and tag once, and each round is an
// MPI_Start. The buffer stays pinned, and the request reachable through a
// cgo.Handle, from Init to Free; each round is a request (request.round)
// over the same MPI_Request, so that waiting on it, the request sets and
// the progress engine work as for Isend and Irecv.
type persistent struct {
	c      *Comm
	call   string // "MPI_Send_init" or "MPI_Recv_init"
	req    *C.MPI_Request
	pin    runtime.Pinner
	handle cgo.Handle
	dt     mpiType // a derived type past MPI's counts, freed by Free
	recv   bool
	elem   comm.Datatype
	bytes  int
	// The arguments of MPI_Send_init/MPI_Recv_init, to make the request
	// again where MPI freed it: Open MPI 4.1 sets a persistent request to
	// MPI_REQUEST_NULL when a round completes with an error (a truncated
	// receive), as if it were a one-shot request.
	bp        unsafe.Pointer
	n         C.int
	peer, tag C.int

	mu     sync.Mutex
	cur    *request // the last round started
	freed  bool
	closed chan struct{}
}

var _ comm.Persistent = (*persistent)(nil)
var _ comm.PersistentComm = (*Comm)(nil)

// SendInit sets up a persistent send (MPI_Send_init); see
// comm.SendInit, which checks the arguments and handles ProcNull.
func (c *Comm) SendInit(buf comm.Buf, dest, tag int) (comm.Persistent, error) {
	return c.persistentInit("SendInit", buf, dest, tag, false)
}

// RecvInit sets up a persistent receive (MPI_Recv_init); see
// comm.RecvInit.
func (c *Comm) RecvInit(buf comm.Buf, source, tag int) (comm.Persistent, error) {
	return c.persistentInit("RecvInit", buf, source, tag, true)
}

func (c *Comm) persistentInit(name string, buf comm.Buf, peer, tag int, recv bool) (comm.Persistent, error) {
	if err := c.usable(name); err != nil {
		return nil, err
	}
	if err := c.checkP2PBuf(name, buf); err != nil {
		return nil, err
	}
	if err := c.checkP2P(name, peer, tag, recv); err != nil {
		return nil, err
	}
	n, dt, err := c.span(name, len(buf.Bytes), c.h.byte)
	if err != nil {
		return nil, err
	}
	p := &persistent{c: c, call: "MPI_Send_init", req: new(C.MPI_Request), dt: dt, recv: recv, elem: buf.Type, bytes: len(buf.Bytes),
		bp: ptr(buf.Bytes), n: n, peer: C.int(peer), tag: C.int(tag)}
	if recv {
		p.call = "MPI_Recv_init"
	}
	if p.bp != nil {
		p.pin.Pin(p.bp)
	}
	if rc := p.init(); rc != 0 {
		p.pin.Unpin()
		c.free(dt)
		return nil, fmt.Errorf("mpi: %s: %w", name, c.st.error(p.call, rc))
	}
	p.handle = cgo.NewHandle(p)
	return p, nil
}

// init makes the MPI request.
func (p *persistent) init() C.int {
	p.c.st.lock()
	defer p.c.st.unlock()
	if p.recv {
		return C.pz_recv_init(p.bp, p.n, p.dt.t, p.peer, p.tag, p.c.c, p.req)
	}
	return C.pz_send_init(p.bp, p.n, p.dt.t, p.peer, p.tag, p.c.c, p.req)
}

// active returns the round in progress, or nil.
func (p *persistent) active() *request {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil || p.cur.completed() {
		return nil
	}
	return p.cur
}

// Start begins a round (MPI_Start).
func (p *persistent) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.freed:
		return fmt.Errorf("%w: mpi: Start: persistent request freed", comm.ErrInvalidArg)
	case p.cur != nil && !p.cur.completed():
		return fmt.Errorf("%w: mpi: Start", comm.ErrActive)
	}
	if err := p.c.usable("Start"); err != nil {
		return err
	}
	if *p.req == p.c.h.request_null { // MPI freed it after a failed round
		if rc := p.init(); rc != 0 {
			return fmt.Errorf("mpi: Start: %w", p.c.st.error(p.call, rc))
		}
	}
	r := &request{c: p.c, call: p.call, req: p.req, round: true, recv: p.recv, bytes: p.bytes, dt: p.elem, doneCh: make(chan struct{})}
	p.c.st.lock()
	rc := C.pz_start(p.req)
	p.c.st.unlock()
	if rc != 0 {
		return fmt.Errorf("mpi: Start: %w", p.c.st.error("MPI_Start", rc))
	}
	p.cur = r
	return nil
}

// Wait waits for the active round (see comm.Persistent).
func (p *persistent) Wait(ctx context.Context) (comm.Status, error) {
	r := p.last()
	if r == nil {
		return comm.Status{}, nil
	}
	return r.Wait(ctx)
}

// Test tests the active round (see comm.Persistent).
func (p *persistent) Test() (bool, comm.Status, error) {
	r := p.last()
	if r == nil {
		return true, comm.Status{}, nil
	}
	return r.Test()
}

// last returns the round that Wait and Test report on: the active one,
// or the one just completed (so that its Status and error are still
// read), or nil before the first Start.
func (p *persistent) last() *request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// Done implements comm.Notifier for the active round; closed when none is.
func (p *persistent) Done() <-chan struct{} {
	if r := p.active(); r != nil {
		return r.Done()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed == nil {
		p.closed = make(chan struct{})
		close(p.closed)
	}
	return p.closed
}

// Free releases the request (MPI_Request_free) once no round is active.
func (p *persistent) Free() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.freed:
		return fmt.Errorf("%w: mpi: Free: persistent request freed", comm.ErrInvalidArg)
	case p.cur != nil && !p.cur.completed():
		return fmt.Errorf("%w: mpi: Free", comm.ErrActive)
	}
	p.freed = true
	if p.c.st.finalized.Load() {
		return nil // MPI is gone, and the request with it
	}
	var rc C.int
	if *p.req != p.c.h.request_null {
		p.c.st.lock()
		rc = C.pz_request_free(p.req)
		p.c.st.unlock()
	}
	p.pin.Unpin()
	p.handle.Delete()
	p.c.free(p.dt)
	if rc != 0 {
		return fmt.Errorf("mpi: Free: %w", p.c.st.error("MPI_Request_free", rc))
	}
	return nil
}
