package commtest

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/comm"
)

// freePendingCase: Free of a communicator ends this rank's
// point-to-point operations still pending on it, so that no Wait waits
// for ever: once Free has returned, an Irecv and a started persistent
// receive that no message matched are complete - Test reports them done
// at once, Wait, WaitAll and WaitAny return at once, and Done is closed -
// with an error wrapping ErrFreed (not ErrCanceled); a message taken by
// a matched probe is dropped by its Recv, which returns ErrFreed; an
// Irecv that had its message before Free completes as usual, the
// message in its buffer. (Before, the receives waited until their
// context ended, on both backends.) A send that no receive took is not
// part of the suite: MPI cannot withdraw it, and under MPICH the orphan
// message then matched a receive on a later communicator that reused the
// freed one's context (comm/local's TestFreeWithdrawsSends covers the
// embedded backend's withdrawal). Messages to this rank itself are sent
// non-blocking: MPICH's blocking send to self waits for the receive.
func freePendingCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	left := (me + n - 1) % n
	d, err := c.Dup(ctx)
	if err != nil {
		return err
	}
	freed := false
	defer func() {
		if !freed {
			_ = d.Free()
		}
	}()
	irecv, err := comm.Irecv(d, make([]int32, 4), left, 1) // no message
	if err != nil {
		return err
	}
	p, err := comm.RecvInit(d, make([]float64, 2), comm.AnySource, 2) // no message
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	if _, err := comm.Isend(d, []int64{7, 8}, me, 4); err != nil { // taken by Mprobe below
		return err
	}
	msg, err := d.Mprobe(ctx, comm.Int64, me, 4)
	if err != nil {
		return fmt.Errorf("Mprobe: %w", err)
	}
	got := make([]int16, 3)
	matched, err := comm.Irecv(d, got, me, 5) // its message comes before Free
	if err != nil {
		return err
	}
	if _, err := comm.Isend(d, []int16{1, 2, 3}, me, 5); err != nil {
		return err
	}
	freed = true
	if err := d.Free(); err != nil {
		return fmt.Errorf("Free: %w", err)
	}
	// No rank returns (which on comm/local fails the calls waiting for
	// it with ErrBroken) before every rank has freed d.
	if err := c.Barrier(ctx); err != nil {
		return err
	}

	var errs []error
	pending := []struct {
		what string
		r    comm.Request
	}{{"Irecv", irecv}, {"persistent receive", p}}
	for _, q := range pending {
		done, st, err := q.r.Test()
		if !done || !errors.Is(err, comm.ErrFreed) || errors.Is(err, comm.ErrCanceled) || st != (comm.Status{}) {
			errs = append(errs, fmt.Errorf("%s pending at Free: Test after Free: done %v, status %+v, error %v; want done, an empty status and ErrFreed", q.what, done, st, err))
		}
		if !done {
			continue // its waits would wait for ever
		}
		if nt, ok := q.r.(comm.Notifier); ok {
			select {
			case <-nt.Done():
			default:
				errs = append(errs, fmt.Errorf("%s pending at Free: Done is not closed after Free", q.what))
			}
		}
		if _, err := q.r.Wait(context.Background()); !errors.Is(err, comm.ErrFreed) {
			errs = append(errs, fmt.Errorf("%s pending at Free: Wait after Free: %v, want ErrFreed", q.what, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	set := []comm.Request{irecv, p}
	if _, err := comm.WaitAll(context.Background(), set); !errors.Is(err, comm.ErrFreed) {
		errs = append(errs, fmt.Errorf("WaitAll after Free: %v, want ErrFreed", err))
	}
	set = []comm.Request{nil, irecv}
	if cp, err := comm.WaitAny(context.Background(), set); err != nil || cp.Index != 1 || !errors.Is(cp.Err, comm.ErrFreed) {
		errs = append(errs, fmt.Errorf("WaitAny after Free: %+v, %v; want index 1 and ErrFreed", cp, err))
	}
	if _, err := msg.Recv(func(int) ([]byte, error) { return make([]byte, 16), nil }); !errors.Is(err, comm.ErrFreed) {
		errs = append(errs, fmt.Errorf("Recv of a message matched before Free: %v, want ErrFreed", err))
	}
	if st, err := matched.Wait(ctx); err != nil || st.Count != 3 || got[0] != 1 || got[2] != 3 {
		errs = append(errs, fmt.Errorf("Irecv whose message came before Free: %+v, %v, %v; want 3 elements [1 2 3]", st, err, got))
	}
	if err := p.Start(); !errors.Is(err, comm.ErrFreed) {
		errs = append(errs, fmt.Errorf("Start after Free: %v, want ErrFreed", err))
	}
	if err := p.Free(); err != nil {
		errs = append(errs, fmt.Errorf("persistent Free after the communicator's: %w", err))
	}
	return errors.Join(errs...)
}
