//go:build mpi

package mpi

/*
#include <stdlib.h>
#include "pz_mpi.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync/atomic"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// persistent is an MPI persistent request (MPI_Send_init, MPI_Recv_init),
// the comm.PersistentOp that comm.SendInit and comm.RecvInit drive: MPI
// matches the buffer, peer and tag once, and each round is an MPI_Start.
// The buffer stays pinned, and the operation reachable through a
// cgo.Handle, from Init to Free; each round is a request (request.round,
// one object reused by every round) over the same MPI_Request, so that
// waiting on it, the request sets and the progress engine work as for
// Isend and Irecv.
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
	bottom    bool // dt is at absolute addresses (MPI_BOTTOM): a wide receive's buffer and room
	// stage is C memory of stageBytes of a receive that the rank's own
	// message may match (wideRecv): the whole receive, staged, when the
	// buffer has at most stageBytes, else the room past the buffer. Freed
	// by Free.
	stage unsafe.Pointer
	// r is every round's request, reset by Start once the last round has
	// completed (comm's Persistent starts no round before), so that a
	// round allocates nothing.
	r request
	// started: a round was started (under r.mu); orphaned: a round was
	// handed to MPI unfinished when the communicator was freed or MPI
	// finalized (request.orphan), so the buffer and stage stay for good.
	started  bool
	orphaned atomic.Bool
}

var _ comm.PersistentComm = (*Comm)(nil)

// SendInit sets up a persistent send (MPI_Send_init); use comm.SendInit,
// which checks the arguments and handles ProcNull.
func (c *Comm) SendInit(buf comm.Buf, dest, tag int) (comm.PersistentOp, error) {
	return c.persistentInit("SendInit", buf, dest, tag, false)
}

// RecvInit sets up a persistent receive (MPI_Recv_init); use
// comm.RecvInit.
func (c *Comm) RecvInit(buf comm.Buf, source, tag int) (comm.PersistentOp, error) {
	return c.persistentInit("RecvInit", buf, source, tag, true)
}

func (c *Comm) persistentInit(name string, buf comm.Buf, peer, tag int, recv bool) (*persistent, error) {
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
	p.r.room = p.bytes
	if recv {
		p.call = "MPI_Recv_init"
		if peer == c.rank || peer == comm.AnySource {
			// A wide receive (wideRecv), as Irecv's: staged when small,
			// else the buffer with room past it.
			p.stage = C.malloc(stageBytes)
			if p.bytes <= stageBytes {
				p.r.into, p.r.stage, p.r.room = buf.Bytes, p.stage, stageBytes
				p.bp, p.n = p.stage, stageBytes
			} else {
				c.free(dt)
				tt, err := c.tailType(name, p.bp, p.bytes, p.stage)
				if err != nil {
					C.free(p.stage)
					return nil, err
				}
				p.dt, p.bottom, p.r.room = tt, true, p.bytes+stageBytes
			}
		}
	}
	if p.bp != nil && p.r.stage == nil { // Go memory MPI reads or writes
		p.pin.Pin(p.bp)
	}
	if rc := p.init(); rc != 0 {
		p.pin.Unpin()
		c.free(p.dt)
		if p.stage != nil {
			C.free(p.stage)
		}
		ps := sendTo(peer, tag)
		if recv {
			ps = recvFrom(peer, tag)
		}
		return nil, c.p2pErr(name, ps, c.st.error(p.call, rc))
	}
	// The rounds' request; its fields other than the state Start resets
	// are set once (the progress engine reads them without its lock).
	p.r.c, p.r.call, p.r.req, p.r.owner = c, p.call, p.req, p
	p.r.round, p.r.recv, p.r.bytes, p.r.dt = true, recv, p.bytes, p.elem
	p.r.what = p2p(p2pWaitSendInit, peer, tag)
	if recv {
		p.r.what = p2p(p2pWaitRecvInit, peer, tag)
	}
	p.handle = cgo.NewHandle(p)
	c.st.pmu.Lock()
	if c.st.persist == nil {
		c.st.persist = map[*persistent]struct{}{}
	}
	c.st.persist[p] = struct{}{}
	c.st.pmu.Unlock()
	return p, nil
}

// init makes the MPI request.
func (p *persistent) init() C.int {
	p.c.st.lock()
	defer p.c.st.unlock()
	switch {
	case p.bottom:
		return C.pz_recv_init_bottom(p.dt.t, p.peer, p.tag, p.c.c, p.req)
	case p.recv:
		return C.pz_recv_init(p.bp, p.n, p.dt.t, p.peer, p.tag, p.c.c, p.req)
	}
	return C.pz_send_init(p.bp, p.n, p.dt.t, p.peer, p.tag, p.c.c, p.req)
}

// Start begins a round (MPI_Start) and returns its request.
func (p *persistent) Start() (comm.Request, error) {
	if err := p.c.usable("Start"); err != nil {
		return nil, err
	}
	if *p.req == p.c.h.request_null { // MPI freed it after a failed round
		if rc := p.init(); rc != 0 {
			return nil, p.r.errf(fmt.Errorf("Start: %w", p.c.st.error(p.call, rc)))
		}
	}
	// The round's request is held while MPI starts it and its state is
	// reset: the progress engine, which may still list the last round's
	// (Done), tests only requests it can lock, and would otherwise see an
	// inactive MPI request as complete.
	r := &p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage != nil { // staged: what MPI leaves unwritten comes back as it was (recvStaged)
		copy(unsafe.Slice((*byte)(r.stage), len(r.into)), r.into)
	}
	p.c.st.lock()
	rc := C.pz_start(p.req)
	p.c.st.unlock()
	if rc != 0 { // the last round stays as it completed
		return nil, p.r.errf(fmt.Errorf("Start: %w", p.c.st.error("MPI_Start", rc)))
	}
	p.started = true
	r.st, r.err = comm.Status{}, nil
	r.resetCancel()
	r.doneCh.Store(nil)
	r.closed.Store(false)
	r.watched.Store(false)
	r.fin.Store(false)
	return r, nil
}

// Free releases the request (MPI_Request_free), the buffer's pin and the
// handle.
func (p *persistent) Free() error {
	p.c.st.pmu.Lock()
	delete(p.c.st.persist, p)
	p.c.st.pmu.Unlock()
	defer p.handle.Delete()
	if p.orphaned.Load() {
		// A round was handed to MPI unfinished (request.orphan): MPI
		// freed the request once done, and may still use the memory.
		return nil
	}
	defer p.pin.Unpin()
	if p.stage != nil {
		defer C.free(p.stage)
	}
	if p.c.st.finalized.Load() {
		return nil // MPI is gone, and the request with it
	}
	defer p.c.free(p.dt)
	if *p.req == p.c.h.request_null {
		return nil
	}
	p.c.st.lock()
	rc := C.pz_request_free(p.req)
	p.c.st.unlock()
	if rc != 0 {
		return fmt.Errorf("mpi: Free: %w", p.c.st.error("MPI_Request_free", rc))
	}
	return nil
}
