package comm

import (
	"context"
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

// A Persistent over a backend whose requests are no Notifiers still
// announces its round's completion (WaitAny needs it), and reports the
// round again once it has completed.
func TestPersistentRoundWithoutNotifier(t *testing.T) {
	var round pollOnly
	p := &restarted{start: func() (Request, error) {
		round = pollOnly{done: make(chan struct{})}
		return round, nil
	}}
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
