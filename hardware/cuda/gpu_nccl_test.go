package cuda_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
)

// TestNCCLOnGPU runs collectives and a ring of sends and receives on
// the real NCCL, one rank per GPU of the machine (up to 4; a single GPU
// makes a communicator of one rank, which still checks the binding: the
// id passed by value, the calls and their arguments). It skips without a
// GPU or without libnccl.so.2.
func TestNCCLOnGPU(t *testing.T) {
	d := openDriver(t)
	n, err := cuda.OpenNCCL("")
	if errors.Is(err, cuda.ErrNoNCCL) {
		t.Skipf("no NCCL on this machine, GPU test skipped: %v", err)
	}
	require.NoError(t, err)
	t.Logf("NCCL %d from %s", n.Version(), n.Library())
	require.GreaterOrEqual(t, n.Version(), 20900, "NCCL 2.9 and later encode the version as 10000*major+100*minor+patch")
	devices, err := d.DeviceCount()
	require.NoError(t, err)
	nranks := min(devices, 4)
	ctx, cancel := context.WithTimeout(context.Background(), gpuTimeout)
	defer cancel()

	id, err := n.UniqueID()
	require.NoError(t, err)
	const count = 1 << 20
	errs := make([]error, nranks)
	var wg sync.WaitGroup
	for r := range nranks {
		wg.Go(func() {
			errs[r] = func() error {
				c, err := d.NewContext(ctx, r)
				if err != nil {
					return err
				}
				defer func() { assert.NoError(t, c.Close()) }()
				s, err := c.NewStream(ctx)
				if err != nil {
					return err
				}
				defer func() { assert.NoError(t, s.Destroy(ctx)) }()
				comm, err := n.NewComm(ctx, c, nranks, r, id)
				if err != nil {
					return err
				}
				defer func() { assert.NoError(t, comm.Close()) }()
				x := make([]float64, count)
				for i := range x {
					x[i] = float64(i%1000 + r)
				}
				p, err := c.Alloc(ctx, 8*count)
				if err != nil {
					return err
				}
				defer func() { assert.NoError(t, c.Free(ctx, p)) }()
				if err := c.CopyHtoD(ctx, p, cuda.Bytes(x)); err != nil {
					return err
				}
				// Small integers: the sum is exact in any order.
				if err := comm.AllReduce(ctx, p, p, count, cuda.NCCLFloat64, cuda.NCCLSum, s); err != nil {
					return err
				}
				if err := comm.Broadcast(ctx, p, p, 16, cuda.NCCLFloat64, 0, s); err != nil {
					return err
				}
				if err := comm.Synchronize(ctx, s); err != nil {
					return err
				}
				got := make([]float64, count)
				if err := c.CopyDtoH(ctx, cuda.Bytes(got), p); err != nil {
					return err
				}
				for i := range got {
					want := float64(nranks*(i%1000) + nranks*(nranks-1)/2)
					if got[i] != want {
						t.Errorf("rank %d: element %d is %v, want %v", r, i, got[i], want)
						break
					}
				}

				// A ring of Send and Recv in one group (to itself with one
				// rank), when the library has them (NCCL 2.7).
				const ring = 4096
				next, prev := (r+1)%nranks, (r+nranks-1)%nranks
				for i := range ring {
					x[i] = float64(r*ring + i)
				}
				if err := c.CopyHtoD(ctx, p, cuda.Bytes(x[:ring])); err != nil {
					return err
				}
				q := p + cuda.DevicePtr(8*ring)
				err = n.Group(ctx, c, func() error {
					return errors.Join(comm.Send(ctx, p, ring, cuda.NCCLFloat64, next, s),
						comm.Recv(ctx, q, ring, cuda.NCCLFloat64, prev, s))
				})
				if errors.Is(err, cuda.ErrNotSupported) {
					t.Logf("rank %d: no ncclSend/ncclRecv: %v", r, err)
					return nil
				}
				if err != nil {
					return err
				}
				if err := comm.Synchronize(ctx, s); err != nil {
					return err
				}
				if err := c.CopyDtoH(ctx, cuda.Bytes(got[:ring]), q); err != nil {
					return err
				}
				for i := range ring {
					if want := float64(prev*ring + i); got[i] != want {
						t.Errorf("rank %d: received element %d is %v, want %v", r, i, got[i], want)
						break
					}
				}
				return nil
			}()
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}
