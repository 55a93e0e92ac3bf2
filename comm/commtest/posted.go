package commtest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pzgo/pz/comm"
)

// postedTruncatedCase: a receive posted before its message arrives
// (Irecv, a started RecvInit) into a buffer too short for it completes
// with ErrTruncated and a Status naming the sender, the tag and the
// message's element count, whether the message comes from another rank,
// from the rank itself (Open MPI 4.1 truncates a small message a rank
// sends itself silently, to the size of a receive posted before it) or
// from AnySource; small (staged under MPI) and past 4 KiB. A message that
// fits, posted the same ways, arrives whole and leaves the rest of the
// buffer as it was. At one rank every message is the rank's own.
func postedTruncatedCase(ctx context.Context, c comm.Comm) error {
	n, me := c.Size(), c.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	type recv struct {
		what      string
		from      int // the source the receive names
		sender    int // the rank that sends the message
		tag       int
		buf, msg  int // elements
		persist   bool
		exactOnly bool // the library may not say a truncated message's size (MPICH: a receive from another rank past 4 KiB, or a persistent one of any size)
	}
	var rs []recv
	tag := 10
	for _, size := range []struct{ buf, msg int }{{2, 3}, {1, 2}, {2000, 2001}, {3, 2}, {2000, 1999}} {
		for _, persist := range []bool{false, true} {
			for _, src := range []struct {
				what         string
				from, sender int
			}{{"self", me, me}, {"peer", left, left}, {"any", comm.AnySource, left}} {
				rs = append(rs, recv{what: src.what, from: src.from, sender: src.sender, tag: tag,
					buf: size.buf, msg: size.msg, persist: persist,
					exactOnly: src.what == "peer" && (persist || size.buf*4 > 4096) && src.sender != me})
				tag++
			}
		}
	}
	kind := func(r recv) string {
		if r.persist {
			return "RecvInit"
		}
		return "Irecv"
	}
	name := func(r recv) string {
		return fmt.Sprintf("%s from %s (rank %d) of %d int32 into %d", kind(r), r.what, r.sender, r.msg, r.buf)
	}
	bufs := make([][]int32, len(rs))
	reqs := make([]comm.Request, len(rs))
	var ps []comm.Persistent
	defer func() {
		for _, p := range ps {
			_ = p.Free()
		}
	}()
	for i, r := range rs {
		bufs[i] = make([]int32, r.buf)
		for j := range bufs[i] {
			bufs[i][j] = -1
		}
		if r.persist {
			p, err := comm.RecvInit(c, bufs[i], r.from, r.tag)
			if err != nil {
				return fmt.Errorf("%s: %w", name(r), err)
			}
			ps = append(ps, p)
			if err := p.Start(); err != nil {
				return fmt.Errorf("%s: Start: %w", name(r), err)
			}
			reqs[i] = p
			continue
		}
		q, err := comm.Irecv(c, bufs[i], r.from, r.tag)
		if err != nil {
			return fmt.Errorf("%s: %w", name(r), err)
		}
		reqs[i] = q
	}
	// Every receive is posted on every rank before any message is sent.
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	var sends []comm.Request
	// Each rank sends what its right neighbour's receives from a peer or
	// AnySource expect, and what its own receives from itself expect.
	for _, r := range rs {
		dest := me
		if r.what != "self" {
			dest = right
		}
		msg := make([]int32, r.msg)
		for j := range msg {
			msg[j] = int32(1000*me + j)
		}
		s, err := comm.Isend(c, msg, dest, r.tag)
		if err != nil {
			return fmt.Errorf("Isend to %d tag %d: %w", dest, r.tag, err)
		}
		sends = append(sends, s)
	}
	var errs []error
	for i, r := range rs {
		st, err := reqs[i].Wait(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name(r), err)
		}
		if r.msg > r.buf {
			count := r.msg
			if r.exactOnly && st.Count == 0 {
				count = 0
			}
			if !errors.Is(err, comm.ErrTruncated) || st.Source != r.sender || st.Tag != r.tag || st.Count != count {
				errs = append(errs, fmt.Errorf("%s: status %+v, error %v; want ErrTruncated, source %d, tag %d, count %d",
					name(r), st, err, r.sender, r.tag, r.msg))
			} else if !strings.Contains(err.Error(), kind(r)+" ") && !strings.Contains(err.Error(), kind(r)+":") {
				errs = append(errs, fmt.Errorf("%s: error %q does not name the receive (%s)", name(r), err, kind(r)))
			}
			continue
		}
		if err != nil || st.Source != r.sender || st.Tag != r.tag || st.Count != r.msg {
			errs = append(errs, fmt.Errorf("%s: status %+v, error %v; want source %d, tag %d, count %d",
				name(r), st, err, r.sender, r.tag, r.msg))
			continue
		}
		for j, v := range bufs[i] {
			want := int32(1000*r.sender + j)
			if j >= r.msg {
				want = -1
			}
			if v != want {
				errs = append(errs, fmt.Errorf("%s: element %d is %d, want %d", name(r), j, v, want))
				break
			}
		}
	}
	if err := waitAll(ctx, sends...); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
