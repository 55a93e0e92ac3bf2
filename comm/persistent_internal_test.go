package comm

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// pollOnly is a Request of a backend that does not announce completion
// (no Done): it completes when done is closed.
type pollOnly struct{ done chan struct{} }

func (r pollOnly) Wait(ctx context.Context) (Status, error) {
	select {
	case <-r.done:
		return Status{Tag: 4}, nil
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

func (r pollOnly) Test() (bool, Status, error) {
	select {
	case <-r.done:
		return true, Status{Tag: 4}, nil
	default:
		return false, Status{}, nil
	}
}

// pollPersistent is a Persistent whose rounds are pollOnly requests;
// round is the last one started (close its done to complete it).
func pollPersistent() (p *restarted, round *pollOnly) {
	round = new(pollOnly)
	p = &restarted{start: func() (Request, error) {
		*round = pollOnly{done: make(chan struct{})}
		return *round, nil
	}}
	return p, round
}

// A Persistent over a backend whose requests are no Notifiers still
// announces its round's completion (WaitAny needs it), and reports the
// round again once it has completed.
func TestPersistentRoundWithoutNotifier(t *testing.T) {
	p, round := pollPersistent()
	select {
	case <-p.Done():
	default:
		t.Fatal("Done of a Persistent never started is not closed")
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	done := p.Done()
	select {
	case <-done:
		t.Fatal("Done closed before the round completed")
	default:
	}
	close(round.done)
	<-done // the event itself: the waiting goroutine saw the round complete
	if st, err := p.Wait(context.Background()); err != nil || st.Tag != 4 {
		t.Fatalf("Wait after the round: %+v, %v", st, err)
	}
	if ok, st, _ := p.Test(); !ok || st.Tag != 4 {
		t.Fatalf("Test after the round: %v, %+v", ok, st)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("Start after a completed round: %v", err)
	}
}

// A round that completed is active until Wait or Test reports it: Start
// and Free refuse it (its error would go unseen), a Wait that ends with
// its context reports nothing, and Test's or Wait's report frees it.
func TestPersistentRoundActiveUntilReported(t *testing.T) {
	p, round := pollPersistent()
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); !errors.Is(err, ErrActive) || strings.Contains(err.Error(), "collected") {
		t.Fatalf("Start during a round: %v, want ErrActive (in progress)", err)
	}
	close(round.done)
	for _, call := range []func() error{p.Start, p.Free} {
		if err := call(); !errors.Is(err, ErrActive) || !strings.Contains(err.Error(), "not been collected") {
			t.Fatalf("after a round completed unreported: %v, want ErrActive naming the uncollected result", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	waitCanceled := &restarted{start: func() (Request, error) { return pollOnly{done: make(chan struct{})}, nil }}
	if err := waitCanceled.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := waitCanceled.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a canceled context: %v", err)
	}
	if err := waitCanceled.Start(); !errors.Is(err, ErrActive) {
		t.Fatalf("Start after a canceled Wait: %v, want ErrActive", err)
	}
	if ok, st, err := p.Test(); !ok || st.Tag != 4 || err != nil {
		t.Fatalf("Test of the completed round: %v, %+v, %v", ok, st, err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("Start after Test reported the round: %v", err)
	}
	close(round.done)
	if _, err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(); err != nil {
		t.Fatalf("Free after Wait reported the round: %v", err)
	}
}

// TestAll over a set with a round still in progress leaves a completed
// persistent round uncollected (Start still refuses it); once every
// request has completed it collects the round.
func TestTestAllCollectsPersistentRoundsOnlyWhenDone(t *testing.T) {
	p, round := pollPersistent()
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	close(round.done)
	<-p.Done()
	other := pollOnly{done: make(chan struct{})}
	reqs := []Request{p, other}
	if done, _, _ := TestAll(reqs); done {
		t.Fatal("TestAll: done with a request pending")
	}
	if err := p.Start(); !errors.Is(err, ErrActive) {
		t.Fatalf("Start after a TestAll that reported nothing: %v, want ErrActive", err)
	}
	close(other.done)
	done, sts, err := TestAll(reqs)
	if !done || err != nil || sts[0].Tag != 4 {
		t.Fatalf("TestAll once both completed: %v, %+v, %v", done, sts, err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("Start after TestAll collected the round: %v", err)
	}
}
