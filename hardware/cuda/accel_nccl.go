package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"

	"github.com/pzgo/pz/hardware/accel"
)

// The Accel as an accel.Collectives: NCCL, loaded on first use (the
// library PZ_NCCL_LIBRARY names, else libnccl.so.2), runs the device
// collectives of ranks that each have a GPU of their own, on the GPU's
// memory. Without NCCL the Accel reports it (PrepareCollective's error
// wraps accel.ErrNoCollectives), and resource sets stage through host
// memory.

var _ accel.Collectives = (*Accel)(nil)

// ncclState is an Accel's NCCL library and the communicators it joined.
type ncclState struct {
	once  sync.Once
	lib   *NCCL
	err   error
	comms []*accelComm
}

// nccl loads NCCL once for the Accel.
func (a *Accel) nccl() (*NCCL, error) {
	a.coll.once.Do(func() { a.coll.lib, a.coll.err = OpenNCCL("") })
	return a.coll.lib, a.coll.err
}

// NewCollectiveID returns a new NCCL communicator id (ncclGetUniqueId).
// NCCL starts the communicator's bootstrap root with it, a thread that
// waits until every rank has joined: make it once every rank has
// prepared (PrepareCollective), and pass it to every rank's Join.
func (a *Accel) NewCollectiveID() ([]byte, error) {
	lib, err := a.nccl()
	if err != nil {
		return nil, err
	}
	id, err := lib.UniqueID()
	if err != nil {
		return nil, err
	}
	return id[:], nil
}

// PrepareCollective does this rank's local part of joining a NCCL
// communicator of n ranks as rank: it checks n and rank, loads NCCL and
// creates the context and stream the communicator will run on. It
// waits for no other rank; what can fail here fails before any rank
// enters ncclCommInitRank, which waits for all of them. Without NCCL
// (ErrNoNCCL) the error wraps accel.ErrNoCollectives too.
func (a *Accel) PrepareCollective(ctx context.Context, n, rank int) (accel.CollectiveJoin, error) {
	if n < 1 || n > math.MaxInt32 || rank < 0 || rank >= n {
		return nil, fmt.Errorf("%w: rank %d of %d ranks", ErrBadArgument, rank, n)
	}
	lib, err := a.nccl()
	if errors.Is(err, ErrNoNCCL) {
		return nil, fmt.Errorf("%w: %w", accel.ErrNoCollectives, err)
	} else if err != nil {
		return nil, err
	}
	c, err := a.d.NewContext(ctx, a.info.Ordinal)
	if err != nil {
		return nil, err
	}
	s, err := c.NewStream(ctx)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return &ncclJoin{a: a, lib: lib, c: c, s: s, n: n, rank: rank}, nil
}

// An ncclJoin is a prepared join of a NCCL communicator: the context and
// stream it will run on, until Join hands them to the communicator or
// Close releases them.
type ncclJoin struct {
	a       *Accel
	lib     *NCCL
	n, rank int

	mu sync.Mutex
	c  *Context // nil once Join or Close took it
	s  *Stream
}

// take hands the join's context and stream to its one user: Join or
// Close (nil after the first).
func (j *ncclJoin) take() (*Context, *Stream) {
	j.mu.Lock()
	defer j.mu.Unlock()
	c, s := j.c, j.s
	j.c, j.s = nil, nil
	return c, s
}

// Join checks id, then joins the NCCL communicator of id
// (ncclCommInitRank: it returns when every rank has joined). The
// Accel's Close leaves it.
func (j *ncclJoin) Join(ctx context.Context, id []byte) (accel.CollectiveComm, error) {
	c, s := j.take()
	if c == nil {
		return nil, fmt.Errorf("%w: a NCCL join used or closed before", ErrBadArgument)
	}
	release := func(err error) error { return errors.Join(err, s.Destroy(context.Background()), c.Close()) }
	var nid NCCLID
	if len(id) != len(nid) {
		return nil, release(fmt.Errorf("%w: a NCCL id of %d bytes, want %d", ErrBadArgument, len(id), len(nid)))
	}
	copy(nid[:], id)
	comm, err := j.lib.NewComm(ctx, c, j.n, j.rank, nid)
	if err != nil {
		return nil, release(err)
	}
	ac := &accelComm{a: j.a, c: c, s: s, comm: comm}
	j.a.mu.Lock()
	j.a.coll.comms = append(j.a.coll.comms, ac)
	j.a.mu.Unlock()
	return ac, nil
}

// Close releases the context and stream of a join that did not happen.
func (j *ncclJoin) Close() error {
	c, s := j.take()
	if c == nil {
		return nil
	}
	return errors.Join(s.Destroy(context.Background()), c.Close())
}

// An accelComm is an Accel's part of a NCCL communicator.
type accelComm struct {
	a    *Accel
	c    *Context
	s    *Stream
	comm *NCCLComm
	once sync.Once
	err  error
}

// ncclOps maps the device collectives' reductions to NCCL's.
var ncclOps = [...]NCCLOp{accel.OpSum: NCCLSum, accel.OpProd: NCCLProd, accel.OpMax: NCCLMax, accel.OpMin: NCCLMin}

// ncclKinds maps element kinds to NCCL's types.
var ncclKinds = map[reflect.Kind]NCCLType{
	reflect.Int8: NCCLInt8, reflect.Uint8: NCCLUint8, reflect.Int32: NCCLInt32, reflect.Uint32: NCCLUint32,
	reflect.Int64: NCCLInt64, reflect.Uint64: NCCLUint64, reflect.Int: NCCLInt64, reflect.Uint: NCCLUint64,
	reflect.Float32: NCCLFloat32, reflect.Float64: NCCLFloat64,
}

// ptr returns the device address of n bytes at off of m; 0 for no
// bytes of a nil m (a non-root rank's buffer of a rooted collective).
func ptr(m accel.Mem, off, n int) (DevicePtr, error) {
	if m == nil && n == 0 {
		return 0, nil
	}
	b, err := buffer(m, off, n)
	if err != nil {
		return 0, err
	}
	return b.ptr + DevicePtr(off), nil
}

// run issues a collective on the communicator's stream, waits for it
// and reports ok; a kind NCCL has no type for (or an op it lacks)
// reports false.
func (ac *accelComm) run(kind reflect.Kind, op accel.ReduceOp, issue func(ctx context.Context, dt NCCLType) error) (bool, error) {
	dt, ok := ncclKinds[kind]
	if !ok || op < 0 || int(op) >= len(ncclOps) {
		return false, nil
	}
	ctx := context.Background()
	if err := issue(ctx, dt); err != nil {
		return true, err
	}
	return true, ac.comm.Synchronize(ctx, ac.s)
}

// checkCounts checks a counts argument: one per rank, none negative.
func (ac *accelComm) checkCounts(call string, counts []int) error {
	if len(counts) != ac.comm.Size() {
		return fmt.Errorf("%w: %s with %d counts for %d ranks", ErrBadArgument, call, len(counts), ac.comm.Size())
	}
	for r, n := range counts {
		if n < 0 {
			return fmt.Errorf("%w: %s with count %d for rank %d", ErrBadArgument, call, n, r)
		}
	}
	return nil
}

// AllReduce runs ncclAllReduce on the communicator's stream and waits
// for it; a kind NCCL has no type for reports false.
func (ac *accelComm) AllReduce(send accel.Mem, soff int, recv accel.Mem, roff int, count int, kind reflect.Kind, op accel.ReduceOp) (bool, error) {
	return ac.run(kind, op, func(ctx context.Context, dt NCCLType) error {
		n := count * dt.Size()
		sp, err := ptr(send, soff, n)
		if err != nil {
			return err
		}
		rp, err := ptr(recv, roff, n)
		if err != nil {
			return err
		}
		return ac.comm.AllReduce(ctx, sp, rp, count, dt, ncclOps[op], ac.s)
	})
}

// Broadcast runs ncclBroadcast and waits for it.
func (ac *accelComm) Broadcast(send accel.Mem, soff int, recv accel.Mem, roff int, count int, kind reflect.Kind, root int) (bool, error) {
	return ac.run(kind, accel.OpSum, func(ctx context.Context, dt NCCLType) error {
		n := count * dt.Size()
		sp := DevicePtr(0)
		if ac.comm.Rank() == root {
			var err error
			if sp, err = ptr(send, soff, n); err != nil {
				return err
			}
		}
		rp, err := ptr(recv, roff, n)
		if err != nil {
			return err
		}
		return ac.comm.Broadcast(ctx, sp, rp, count, dt, root, ac.s)
	})
}

// Reduce runs ncclReduce and waits for it.
func (ac *accelComm) Reduce(send accel.Mem, soff int, recv accel.Mem, roff int, count int, kind reflect.Kind, op accel.ReduceOp, root int) (bool, error) {
	return ac.run(kind, op, func(ctx context.Context, dt NCCLType) error {
		n := count * dt.Size()
		sp, err := ptr(send, soff, n)
		if err != nil {
			return err
		}
		rp := DevicePtr(0)
		if ac.comm.Rank() == root {
			if rp, err = ptr(recv, roff, n); err != nil {
				return err
			}
		}
		return ac.comm.Reduce(ctx, sp, rp, count, dt, ncclOps[op], root, ac.s)
	})
}

// AllGather runs ncclAllGather when every rank sends as many elements,
// else one ncclBroadcast from each rank into its part, in one group.
func (ac *accelComm) AllGather(send accel.Mem, soff int, recv accel.Mem, roff int, counts []int, kind reflect.Kind) (bool, error) {
	if err := ac.checkCounts("AllGather", counts); err != nil {
		return true, err
	}
	return ac.run(kind, accel.OpSum, func(ctx context.Context, dt NCCLType) error {
		esz, me := dt.Size(), ac.comm.Rank()
		total, equal := 0, true
		for _, n := range counts {
			total += n
			equal = equal && n == counts[0]
		}
		sp, err := ptr(send, soff, counts[me]*esz)
		if err != nil {
			return err
		}
		rp, err := ptr(recv, roff, total*esz)
		if err != nil {
			return err
		}
		if equal {
			return ac.comm.AllGather(ctx, sp, rp, counts[0], dt, ac.s)
		}
		return ac.a.coll.lib.Group(ctx, ac.c, func() error {
			off := rp
			for r, n := range counts {
				if n > 0 {
					if err := ac.comm.Broadcast(ctx, sp, off, n, dt, r, ac.s); err != nil {
						return err
					}
				}
				off += DevicePtr(n * esz)
			}
			return nil
		})
	})
}

// Gather runs, in one group, the root's ncclRecv from every rank into
// its part of recv and every rank's ncclSend to the root. A NCCL without
// point-to-point calls (before 2.7) reports false.
func (ac *accelComm) Gather(send accel.Mem, soff int, recv accel.Mem, roff int, counts []int, kind reflect.Kind, root int) (bool, error) {
	return ac.p2p("Gather", send, soff, recv, roff, counts, kind, root, true)
}

// Scatter runs, in one group, the root's ncclSend of each part of send
// to its rank and every rank's ncclRecv from the root. A NCCL without
// point-to-point calls reports false.
func (ac *accelComm) Scatter(send accel.Mem, soff int, recv accel.Mem, roff int, counts []int, kind reflect.Kind, root int) (bool, error) {
	return ac.p2p("Scatter", send, soff, recv, roff, counts, kind, root, false)
}

// p2p is Gather (gather true) and Scatter: the root's side moves every
// rank's part of its buffer, each rank's side its own part.
func (ac *accelComm) p2p(call string, send accel.Mem, soff int, recv accel.Mem, roff int, counts []int, kind reflect.Kind, root int, gather bool) (bool, error) {
	if err := ac.checkCounts(call, counts); err != nil {
		return true, err
	}
	if root < 0 || root >= ac.comm.Size() {
		return true, fmt.Errorf("%w: %s with root %d of %d ranks", ErrBadArgument, call, root, ac.comm.Size())
	}
	if api := &ac.a.coll.lib.api; api.send == nil || api.recv == nil {
		return false, nil // the same on every rank that loaded this NCCL
	}
	return ac.run(kind, accel.OpSum, func(ctx context.Context, dt NCCLType) error {
		esz, me := dt.Size(), ac.comm.Rank()
		total := 0
		for _, n := range counts {
			total += n
		}
		// own is this rank's part; all is the root's whole buffer.
		own, all, ownOff, allOff := send, recv, soff, roff
		if !gather {
			own, all, ownOff, allOff = recv, send, roff, soff
		}
		// ownOp moves this rank's part, allOp each rank's part at the root.
		ownOp, allOp := ac.comm.Send, ac.comm.Recv
		if !gather {
			ownOp, allOp = ac.comm.Recv, ac.comm.Send
		}
		owp, err := ptr(own, ownOff, counts[me]*esz)
		if err != nil {
			return err
		}
		alp := DevicePtr(0)
		if me == root {
			if alp, err = ptr(all, allOff, total*esz); err != nil {
				return err
			}
		}
		return ac.a.coll.lib.Group(ctx, ac.c, func() error {
			if me == root {
				for r, n := range counts {
					if n > 0 {
						if err := allOp(ctx, alp, n, dt, r, ac.s); err != nil {
							return err
						}
					}
					alp += DevicePtr(n * esz)
				}
			}
			if counts[me] > 0 {
				return ownOp(ctx, owp, counts[me], dt, root, ac.s)
			}
			return nil
		})
	})
}

// Close leaves the communicator and releases its stream and context.
func (ac *accelComm) Close() error {
	ac.once.Do(func() {
		ctx := context.Background()
		ac.err = errors.Join(ac.comm.Close(), ac.s.Destroy(ctx), ac.c.Close())
	})
	return ac.err
}

// closeComms leaves the communicators the Accel joined (Close).
func (a *Accel) closeComms() error {
	a.mu.Lock()
	comms := a.coll.comms
	a.coll.comms = nil
	a.mu.Unlock()
	var errs []error
	for _, c := range comms {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
