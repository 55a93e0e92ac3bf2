package cuda

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/pzgo/pz/hardware/accel"
)

// The Accel as an accel.Collectives: NCCL, loaded on first use (the
// library PZ_NCCL_LIBRARY names, else libnccl.so.2), runs the device
// collectives of ranks that each have a GPU of their own, on the GPU's
// memory. Without NCCL the Accel reports it, and resource sets stage
// through host memory.

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

// JoinCollective joins the NCCL communicator of id as rank of n, on a
// context and a stream of its own (ncclCommInitRank: it returns when
// every rank has joined). Close leaves it.
func (a *Accel) JoinCollective(id []byte, n, rank int) (accel.CollectiveComm, error) {
	lib, err := a.nccl()
	if err != nil {
		return nil, err
	}
	var nid NCCLID
	if len(id) != len(nid) {
		return nil, fmt.Errorf("%w: a NCCL id of %d bytes, want %d", ErrBadArgument, len(id), len(nid))
	}
	copy(nid[:], id)
	ctx := context.Background()
	c, err := a.d.NewContext(ctx, a.info.Ordinal)
	if err != nil {
		return nil, err
	}
	s, err := c.NewStream(ctx)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	comm, err := lib.NewComm(ctx, c, n, rank, nid)
	if err != nil {
		return nil, errors.Join(err, s.Destroy(ctx), c.Close())
	}
	ac := &accelComm{a: a, c: c, s: s, comm: comm}
	a.mu.Lock()
	a.coll.comms = append(a.coll.comms, ac)
	a.mu.Unlock()
	return ac, nil
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

// AllReduce runs ncclAllReduce on the communicator's stream and waits
// for it; a kind NCCL has no type for reports false.
func (ac *accelComm) AllReduce(send accel.Mem, soff int, recv accel.Mem, roff int, count int, kind reflect.Kind, op accel.ReduceOp) (bool, error) {
	dt, ok := ncclKinds[kind]
	if !ok || int(op) >= len(ncclOps) {
		return false, nil
	}
	n := count * dt.Size()
	sb, err := buffer(send, soff, n)
	if err != nil {
		return true, err
	}
	rb, err := buffer(recv, roff, n)
	if err != nil {
		return true, err
	}
	ctx := context.Background()
	if err := ac.comm.AllReduce(ctx, sb.ptr+DevicePtr(soff), rb.ptr+DevicePtr(roff), count, dt, ncclOps[op], ac.s); err != nil {
		return true, err
	}
	return true, ac.comm.Synchronize(ctx, ac.s)
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
