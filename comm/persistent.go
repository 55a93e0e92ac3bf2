package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Persistent is a point-to-point operation set up once and started many
// times (MPI's persistent requests): the buffer, peer and tag are checked
// once, and on the MPI backend MPI_Send_init/MPI_Recv_init match them once,
// so a loop that exchanges the same halo every iteration pays only Start
// and Wait. Between Start and the Wait or Test that reports the round
// complete, the Persistent is an active Request of that round, and can be
// put in the request sets (WaitAll, WaitAny, ...); its buffer must not be
// touched then. Wait and Test of an inactive Persistent report completion
// at once: with the last round's Status and error, or an empty Status
// before the first Start.
//
// Cancel cancels the round in progress, as of an Irecv for a receive
// (see Canceler); that of an inactive receive does nothing, and that of
// a send returns an error wrapping ErrInvalidArg.
//
// Its methods may be called from one goroutine at a time, but for
// Cancel, which may come from any goroutine.
type Persistent interface {
	Request
	Notifier
	Canceler
	// Start begins a round. It fails with an error wrapping ErrActive
	// until Wait or Test (or a request-set call such as WaitAll, which
	// use them) has reported the last round's completion, as for MPI's
	// persistent requests, so that no round's error goes unseen; and
	// with ErrInvalidArg after Free.
	Start() error
	// Free releases the operation (MPI_Request_free). It fails with an
	// error wrapping ErrActive, as Start does, until the last round's
	// completion has been reported (to drop a receive, Cancel it and
	// Wait).
	Free() error
}

// PersistentComm is implemented by backends with native persistent
// requests: comm/mpi (MPI_Send_init, MPI_Recv_init) and comm/local (one
// request reused every round: a round allocates nothing). SendInit and
// RecvInit use them; on other backends each round is an Isend or an
// Irecv. The arguments are checked, and ProcNull handled, before these
// are called.
type PersistentComm interface {
	SendInit(buf Buf, dest, tag int) (PersistentOp, error)
	RecvInit(buf Buf, source, tag int) (PersistentOp, error)
}

// PersistentOp is a backend's persistent operation, which a Persistent
// drives: Start begins a round and returns its Request; Free releases the
// operation. The Persistent calls Start only when no round is active and
// Free once, never during a round.
type PersistentOp interface {
	Start() (Request, error)
	Free() error
}

// ErrActive is wrapped by the error of Start on an active Persistent and
// of Free on one: its round has not been reported complete yet.
var ErrActive = fmt.Errorf("%w: persistent request is active", ErrInvalidArg)

// SendInit sets up a send of buf to dest with tag, to be started many
// times (MPI_Send_init). dest may be ProcNull: every round then completes
// at once. buf's contents at each Start are what that round sends.
func SendInit[T Number](c Comm, buf []T, dest, tag int) (Persistent, error) {
	return persistentInit(c, "SendInit", BufOf(buf), dest, tag, false)
}

// RecvInit sets up a receive into buf from source (or AnySource) with tag
// (or AnyTag), to be started many times (MPI_Recv_init). source may be
// ProcNull: every round then completes at once with a Status whose Source
// is ProcNull. A message longer than buf completes its round with an error
// wrapping ErrTruncated.
func RecvInit[T Number](c Comm, buf []T, source, tag int) (Persistent, error) {
	return persistentInit(c, "RecvInit", BufOf(buf), source, tag, true)
}

// persistentInit checks the arguments once and builds the Persistent:
// on the backend's PersistentOp where it has one, else an Isend or Irecv
// per round.
func persistentInit(c Comm, call string, b Buf, peer, tag int, recv bool) (Persistent, error) {
	if err := FirstErr(CheckBuf(call, c.Rank(), b), CheckTag(call, c.Rank(), tag, recv)); err != nil {
		return nil, err
	}
	if peer == ProcNull {
		return &restarted{start: func() (Request, error) { return doneRequest{nullStatus}, nil }}, nil
	}
	if err := CheckPeer(call, c.Rank(), peer, c.Size(), recv); err != nil {
		return nil, err
	}
	if pc, ok := c.(PersistentComm); ok {
		init := pc.SendInit
		if recv {
			init = pc.RecvInit
		}
		op, err := init(b, peer, tag)
		if err != nil {
			return nil, err
		}
		return &restarted{start: op.Start, free: op.Free}, nil
	}
	if recv {
		return &restarted{start: func() (Request, error) { return c.Irecv(b, peer, tag) }}, nil
	}
	return &restarted{start: func() (Request, error) { return c.Isend(b, peer, tag) }}, nil
}

// StartAll starts every Persistent of ps (MPI_Startall), nil entries
// skipped. On an error it returns it, naming the index, and the ones
// before it stay started.
func StartAll(ps ...Persistent) error {
	for i, p := range ps {
		if p == nil {
			continue
		}
		if err := p.Start(); err != nil {
			return fmt.Errorf("comm: StartAll: request %d: %w", i, err)
		}
	}
	return nil
}

// restarted is every Persistent: each Start calls start for a new round
// (a backend's PersistentOp, or an Isend or Irecv), and Free calls free
// (nil: nothing to release). Wait, Test and Done go to the last round
// started: a completed request reports its Status and error again, so
// nothing else needs remembering but whether Wait or Test has reported
// it, which the next Start needs.
type restarted struct {
	start func() (Request, error)
	free  func() error

	mu       sync.Mutex
	round    Request // the last round started, nil before the first
	reported bool    // Wait or Test has reported round's completion
	freed    bool
	closed   chan struct{} // the Done of a Persistent never started
	waiter   chan struct{} // Done of a round that is no Notifier
	waited   Request       // that round
}

var errFreed = errors.New("persistent request freed")

// active returns nil when no round is active, or else the error for
// call (Start or Free): a round is active from its Start until Wait or
// Test has reported its completion, as MPI's, so that neither the next
// round nor Free drops a result unseen; p.mu is held.
func (p *restarted) active(call string) error {
	if p.round == nil || p.reported {
		return nil
	}
	if done, _, _ := p.round.Test(); done {
		return fmt.Errorf("%w: %s: the last round completed but its result has not been collected (Wait or Test)", ErrActive, call)
	}
	return fmt.Errorf("%w: %s", ErrActive, call)
}

// Start implements Persistent.
func (p *restarted) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.freed {
		return fmt.Errorf("%w: Start: %w", ErrInvalidArg, errFreed)
	}
	if err := p.active("Start"); err != nil {
		return err
	}
	r, err := p.start()
	if err != nil {
		return err
	}
	p.round, p.reported = r, false
	return nil
}

// report records that Wait or Test has reported round's completion.
func (p *restarted) report(round Request) {
	p.mu.Lock()
	if p.round == round {
		p.reported = true
	}
	p.mu.Unlock()
}

func (p *restarted) last() Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.round
}

// Wait implements Persistent: the last round, or at once before the first.
func (p *restarted) Wait(ctx context.Context) (Status, error) {
	r := p.last()
	if r == nil {
		return Status{}, nil
	}
	st, err := r.Wait(ctx)
	// A wait that ended with its context reported nothing, even if the
	// round has completed since.
	if err == nil || !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		if done, _, _ := r.Test(); done {
			p.report(r)
		}
	}
	return st, err
}

// Test implements Persistent, as Wait.
func (p *restarted) Test() (bool, Status, error) {
	r := p.last()
	if r == nil {
		return true, Status{}, nil
	}
	done, st, err := r.Test()
	if done {
		p.report(r)
	}
	return done, st, err
}

// Done implements Notifier for the last round; closed before the first.
func (p *restarted) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch n, ok := p.round.(Notifier); {
	case ok:
		return n.Done()
	case p.round != nil:
		// Both of pz's backends give Notifiers; for a backend that does
		// not, a goroutine waits for the round.
		if p.waited != p.round {
			r, ch := p.round, make(chan struct{})
			p.waiter, p.waited = ch, r
			go func() {
				_, _ = r.Wait(context.Background())
				close(ch)
			}()
		}
		return p.waiter
	}
	if p.closed == nil {
		p.closed = make(chan struct{})
		close(p.closed)
	}
	return p.closed
}

// Cancel implements Canceler for the last round started: nothing to do
// before the first.
func (p *restarted) Cancel() error {
	r := p.last()
	if r == nil {
		return nil
	}
	if c, ok := r.(Canceler); ok {
		return c.Cancel()
	}
	// Both of pz's backends' requests are Cancelers; another backend's
	// round can only be left to complete.
	if done, _, _ := r.Test(); done {
		return nil
	}
	return fmt.Errorf("%w: Cancel: the backend's requests cannot be canceled", ErrInvalidArg)
}

// Free implements Persistent.
func (p *restarted) Free() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.freed {
		return fmt.Errorf("%w: Free: %w", ErrInvalidArg, errFreed)
	}
	if err := p.active("Free"); err != nil {
		return err
	}
	p.freed = true
	if p.free != nil {
		return p.free()
	}
	return nil
}
