// Package ctxerr says why a context ended, the same way in every layer:
// the context's error, which errors.Is finds as context.Canceled or
// context.DeadlineExceeded, with the cause the program gave
// (context.WithCancelCause, WithTimeoutCause) in its message and chain.
package ctxerr

import (
	"context"
	"errors"
	"fmt"
)

// Of returns why ctx ended, nil if it has not: ctx.Err() when the cause
// is that error, the cause alone when it already wraps it or is one of
// except (a cause that is not a cancellation of the caller, such as a
// broken communicator that ended every rank's context), and otherwise
// "context canceled: CAUSE", wrapping both.
func Of(ctx context.Context, except ...error) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, err) {
		return cause
	}
	for _, e := range except {
		if errors.Is(cause, e) {
			return cause
		}
	}
	return fmt.Errorf("%w: %w", err, cause)
}
