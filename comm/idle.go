package comm

import "context"

// idleKey marks a context of waits that are idle by design (see Idle).
type idleKey struct{}

// Idle returns a context like ctx whose waits are idle by design: a
// server waiting for its next request, a worker rank waiting for the
// master's next task. A backend that watches for stalls (comm/mpi's
// stall reports and timeout, PZ_COMM_REPORT and PZ_COMM_TIMEOUT) does not
// count the point-to-point waits made with it, however long they last;
// the context's own cancellation and deadline still apply.
func Idle(ctx context.Context) context.Context { return context.WithValue(ctx, idleKey{}, true) }

// IsIdle reports whether ctx was made by Idle (or derives from such a
// context): for backends.
func IsIdle(ctx context.Context) bool {
	v, _ := ctx.Value(idleKey{}).(bool)
	return v
}
