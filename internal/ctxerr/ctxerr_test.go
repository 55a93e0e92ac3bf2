package ctxerr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pzgo/pz/internal/ctxerr"
)

var errBroken = errors.New("broken")

func TestOf(t *testing.T) {
	if err := ctxerr.Of(context.Background()); err != nil {
		t.Fatalf("a live context: %v", err)
	}
	plain, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ctxerr.Of(plain); err != context.Canceled {
		t.Fatalf("a plain cancel: %v", err)
	}
	stop := errors.New("user pressed stop")
	caused, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(stop)
	err := ctxerr.Of(caused)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, stop) || err.Error() != "context canceled: user pressed stop" {
		t.Fatalf("a cause: %v", err)
	}
	// A cause that wraps the context's error already is kept as it is.
	wrapped, cancelWrapped := context.WithCancelCause(context.Background())
	cancelWrapped(fmt.Errorf("signal: %w", context.Canceled))
	if err := ctxerr.Of(wrapped); err.Error() != "signal: context canceled" {
		t.Fatalf("a cause wrapping Canceled: %v", err)
	}
	// An excepted cause is not a cancellation of the caller.
	broken, cancelBroken := context.WithCancelCause(context.Background())
	cancelBroken(fmt.Errorf("rank 2 failed: %w", errBroken))
	if err := ctxerr.Of(broken, errBroken); errors.Is(err, context.Canceled) || !errors.Is(err, errBroken) {
		t.Fatalf("an excepted cause: %v", err)
	}
	late, cancelLate := context.WithTimeoutCause(context.Background(), time.Nanosecond, errors.New("the step took too long"))
	defer cancelLate()
	<-late.Done()
	if err := ctxerr.Of(late); !errors.Is(err, context.DeadlineExceeded) || err.Error() != "context deadline exceeded: the step took too long" {
		t.Fatalf("a deadline with a cause: %v", err)
	}
}

func ExampleOf() {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("user pressed stop"))
	err := ctxerr.Of(ctx)
	fmt.Println(err, errors.Is(err, context.Canceled))
	// Output: context canceled: user pressed stop true
}
