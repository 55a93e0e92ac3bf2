package commtest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pzgo/pz/comm"
)

// nameCases are the cases of how errors begin: the backends' errors
// begin alike (docs/backends.md), naming the call the program made, the
// rank and, point to point, the peers and tags, after the backend's own
// prefix ("local: ", "mpi: ").
func nameCases() []Case {
	return []Case{
		{"Names/Sendrecv", sendrecvNamesCase},
		{"Names/ValueHelpers", valueHelperNamesCase},
	}
}

// begins checks that err's message, past the backend's prefix, begins
// with want; what names the call in the error returned.
func begins(what string, err error, want string) error {
	if err == nil {
		return fmt.Errorf("%s: no error; want one beginning %q", what, want)
	}
	msg := err.Error()
	for _, p := range []string{"local: ", "mpi: "} {
		if rest, ok := strings.CutPrefix(msg, p); ok {
			msg = rest
			break
		}
	}
	if !strings.HasPrefix(msg, want) {
		return fmt.Errorf("%s: %q; want it to begin %q past the backend's prefix", what, err.Error(), want)
	}
	return nil
}

// sendrecvNamesCase: a truncated Sendrecv's (and SendrecvReplace's)
// error names both peers with their tags, as "Sendrecv on rank 1 to
// rank 2 tag 9, from rank 0 tag 4: ", on every backend.
func sendrecvNamesCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	// The message Sendrecv receives (tag 4), sent first; Sendrecv's own
	// (tag 9) is taken by a receive posted before it (MPICH's send to
	// the rank itself waits for its receive).
	rr, err := comm.Irecv(c, make([]float64, 3), prev, 9)
	if err != nil {
		return err
	}
	sr, err := comm.Isend(c, []float64{1, 2, 3}, next, 4)
	if err != nil {
		return err
	}
	_, err = comm.Sendrecv(ctx, c, []float64{1, 2, 3}, next, 9, make([]float64, 2), prev, 4)
	var errs []error
	if !errors.Is(err, comm.ErrTruncated) {
		errs = append(errs, fmt.Errorf("Sendrecv of 3 into 2: %v; want comm.ErrTruncated", err))
	} else if e := begins("Sendrecv of 3 into 2", err, fmt.Sprintf("Sendrecv on rank %d to rank %d tag 9, from rank %d tag 4: ", me, next, prev)); e != nil {
		errs = append(errs, e)
	}
	if _, err := rr.Wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("Recv of Sendrecv's message: %w", err))
	}
	if _, err := sr.Wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("Isend: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if n < 2 {
		return c.Barrier(ctx)
	}
	// Odd ranks send 3 elements, even ones 2: an even rank after an odd
	// one gets a message longer than its buffer.
	buf := make([]float64, 2+me%2)
	_, err = comm.SendrecvReplace(ctx, c, buf, next, 6, prev, 6)
	if prev%2 == 1 && me%2 == 0 {
		if !errors.Is(err, comm.ErrTruncated) {
			return fmt.Errorf("SendrecvReplace of 3 into 2: %v; want comm.ErrTruncated", err)
		}
		if e := begins("SendrecvReplace of 3 into 2", err, fmt.Sprintf("SendrecvReplace on rank %d to rank %d tag 6, from rank %d tag 6: ", me, next, prev)); e != nil {
			return e
		}
	} else if err != nil {
		return fmt.Errorf("SendrecvReplace: %w", err)
	}
	return c.Barrier(ctx)
}

// valueHelperNamesCase: misuse of a value helper (too few values for
// ScatterValues, a root out of range) is an *comm.ArgError naming the
// helper the program called, not the collective under it, on every rank.
func valueHelperNamesCase(ctx context.Context, c comm.Comm) error {
	n := c.Size()
	var errs []error
	named := func(call string, err error, detail string) {
		var ae *comm.ArgError
		switch {
		case !errors.As(err, &ae):
			errs = append(errs, fmt.Errorf("%s: %v; want a *comm.ArgError", call, err))
		case ae.Op != call:
			errs = append(errs, fmt.Errorf("%s: the *comm.ArgError names %s: %v", call, ae.Op, err))
		default:
			if e := begins(call, err, fmt.Sprintf("comm: %s: invalid argument on rank %s", call, detail)); e != nil {
				errs = append(errs, e)
			}
		}
	}
	_, err := comm.ScatterValues(ctx, c, make([]point, n+1), 0)
	named("ScatterValues", err, fmt.Sprintf("0: %d values for %d ranks", n+1, n))
	_, err = comm.ScatterValues(ctx, c, make([]point, n-1), 0)
	named("ScatterValues", err, fmt.Sprintf("0: %d values for %d ranks", n-1, n))
	// A root out of range: every rank checks it and fails alone.
	_, err = comm.BcastValue(ctx, c, point{}, n)
	named("BcastValue", err, "")
	_, err = comm.BcastValue(ctx, c, []float64{1}, n)
	named("BcastValue", err, "")
	_, err = comm.GatherValues(ctx, c, point{}, n)
	named("GatherValues", err, "")
	_, err = comm.ReduceValue(ctx, c, 1, func(a, b int) int { return a + b }, n)
	named("ReduceValue", err, "")
	_, err = comm.ScatterValues(ctx, c, make([]point, n), n)
	named("ScatterValues", err, "")
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.Barrier(ctx)
}
