package local

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
)

// engine returns this rank's engine of non-blocking collectives, or an
// error if c is not usable. They run on the group's duplicate (see
// group.nbcGroup), on one goroutine per rank while any is pending.
func (c *rankComm) engine(call string) (*comm.NBC, error) {
	if err := c.usable(); err != nil {
		return nil, fmt.Errorf("local: %s on rank %d: %w", call, c.rank, err)
	}
	c.nbcOnce.Do(func() {
		c.nbc = comm.NewNBC(func(context.Context) (comm.Comm, error) {
			return &rankComm{g: c.g.nbcGroup(), rank: c.rank}, nil
		})
	})
	if c.nbc == nil { // freed since usable
		return nil, fmt.Errorf("local: %s on rank %d: %w", call, c.rank, comm.ErrFreed)
	}
	return c.nbc, nil
}

// Ibarrier implements comm.Comm.
func (c *rankComm) Ibarrier() (comm.Request, error) {
	n, err := c.engine("Ibarrier")
	if err != nil {
		return nil, err
	}
	return n.Ibarrier(c.rank)
}

// Ibcast implements comm.Comm.
func (c *rankComm) Ibcast(buf comm.Buf, root int) (comm.Request, error) {
	n, err := c.engine("Ibcast")
	if err != nil {
		return nil, err
	}
	return n.Ibcast(c.rank, buf, root)
}

// Ireduce implements comm.Comm.
func (c *rankComm) Ireduce(send, recv comm.Buf, op comm.Op, root int) (comm.Request, error) {
	n, err := c.engine("Ireduce")
	if err != nil {
		return nil, err
	}
	return n.Ireduce(c.rank, send, recv, op, root)
}

// Iallreduce implements comm.Comm.
func (c *rankComm) Iallreduce(send, recv comm.Buf, op comm.Op) (comm.Request, error) {
	n, err := c.engine("Iallreduce")
	if err != nil {
		return nil, err
	}
	return n.Iallreduce(c.rank, send, recv, op)
}

// Igather implements comm.Comm.
func (c *rankComm) Igather(send comm.Buf, root int, alloc comm.Alloc, counts []int) (comm.Request, error) {
	n, err := c.engine("Igather")
	if err != nil {
		return nil, err
	}
	return n.Igather(c.rank, send, root, alloc, counts)
}

// Iallgather implements comm.Comm.
func (c *rankComm) Iallgather(send comm.Buf, alloc comm.Alloc, counts []int) (comm.Request, error) {
	n, err := c.engine("Iallgather")
	if err != nil {
		return nil, err
	}
	return n.Iallgather(c.rank, send, alloc, counts)
}

// Iscatter implements comm.Comm.
func (c *rankComm) Iscatter(send comm.Buf, counts []int, root int, alloc comm.Alloc) (comm.Request, error) {
	n, err := c.engine("Iscatter")
	if err != nil {
		return nil, err
	}
	return n.Iscatter(c.rank, send, counts, root, alloc)
}

// Ialltoall implements comm.Comm.
func (c *rankComm) Ialltoall(send comm.Buf, sendCounts []int, alloc comm.Alloc, recvCounts []int) (comm.Request, error) {
	n, err := c.engine("Ialltoall")
	if err != nil {
		return nil, err
	}
	return n.Ialltoall(c.rank, send, sendCounts, alloc, recvCounts)
}
