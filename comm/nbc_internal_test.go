package comm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestNBCWaitRunsNextInline: a Wait that cannot be canceled runs the
// operation at the head of the queue on its own goroutine, and only that
// one, in start order. The engine's loop goroutine is held off by
// marking it running (as when it was started but has not been scheduled
// yet): an operation the Wait did not run itself would never complete,
// so each Wait below returns only through runInline.
func TestNBCWaitRunsNextInline(t *testing.T) {
	n := NewNBC(func(context.Context) (Comm, error) { return nil, nil })
	var order []int
	op := func(i int) func(context.Context, Comm) error {
		return func(context.Context, Comm) error {
			order = append(order, i) // read after Wait returned
			return nil
		}
	}
	n.mu.Lock()
	n.running = true // a loop that has not run yet
	n.mu.Unlock()
	r1, err := n.Start("Op1", 0, op(1))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := n.Start("Op2", 0, op(2))
	if err != nil {
		t.Fatal(err)
	}
	// wait waits for r with a ctx that cannot be canceled, and fails the
	// test if that does not return (no loop will run the operation).
	wait := func(r Request) {
		t.Helper()
		errc := make(chan error, 1)
		go func() {
			_, err := r.Wait(context.Background())
			errc <- err
		}()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Wait did not run the next operation itself")
		}
	}
	if n.runInline(r2.(*nbcOp)) {
		t.Fatal("runInline ran the second operation before the first")
	}
	wait(r1)
	if done, _, _ := r2.Test(); done {
		t.Fatal("the second operation ran with the first")
	}
	// Cancelable: no inline run (it could not be abandoned half-way).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r2.Wait(ctx); err == nil {
		t.Fatal("Wait with a canceled ctx returned nil for an operation that has not run")
	}
	wait(r2)
	if len(order) != 2 || order[0] != 1 || order[1] != 2 {
		t.Fatalf("operations ran in order %v, want [1 2]", order)
	}
	n.mu.Lock()
	n.running = false // the loop held off above never ran
	n.mu.Unlock()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNBCWaitIdle: on an engine of blocking collectives, whose Close
// does not wait for the one in progress, WaitIdle returns while it runs
// only with its context's error, and once it has ended.
func TestNBCWaitIdle(t *testing.T) {
	n := NewNBCBlocking(func(context.Context) (Comm, error) { return nil, nil })
	release, started := make(chan struct{}), make(chan struct{})
	req, err := n.Start("Blocked", 0, func(context.Context, Comm) error {
		close(started)
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	_ = n.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, want := n.Running(), "Blocked #1 on rank 0"; got != want {
		t.Fatalf("Running while the operation runs: %q, want %q", got, want)
	}
	if err := n.WaitIdle(ctx); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "Blocked #1 on rank 0 is still running") {
		t.Fatalf("WaitIdle while the operation runs: %v, want context.Canceled naming the operation", err)
	}
	if n.Finished() {
		t.Fatal("Finished while a collective of the closed engine still runs")
	}
	close(release)
	<-req.(*nbcOp).done
	if err := n.WaitIdle(context.Background()); err != nil {
		t.Fatalf("WaitIdle after the operation: %v", err)
	}
	// Its loop goroutine exits after completing the operation.
	for !n.Finished() {
		n.mu.Lock()
		for n.running || n.cur != nil {
			n.idle.Wait()
		}
		n.mu.Unlock()
	}
}
