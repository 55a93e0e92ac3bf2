package resourceset_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
)

// collSim is a simulated device that runs collectives itself, as a CUDA
// GPU does through NCCL: the ranks' devices meet in a hub by the id rank
// 0 made, and AllReduce sums their host-addressable memory.
type collSim struct {
	*accel.Sim
	key     string
	hub     *hub
	joinErr error        // what JoinCollective returns, if set
	reduces atomic.Int64 // AllReduce calls that ran here
}

func (d *collSim) Key() string { return d.key }

func (d *collSim) NewCollectiveID() ([]byte, error) {
	return []byte(fmt.Sprintf("id-%p", d)), nil
}

func (d *collSim) JoinCollective(id []byte, n, rank int) (accel.CollectiveComm, error) {
	if d.joinErr != nil {
		return nil, d.joinErr
	}
	return &collComm{dev: d, group: d.hub.group(string(id), n), rank: rank}, nil
}

// A hub holds the groups of the ranks' devices, by id.
type hub struct {
	mu     sync.Mutex
	groups map[string]*group
}

func (h *hub) group(id string, n int) *group {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.groups == nil {
		h.groups = map[string]*group{}
	}
	g := h.groups[id]
	if g == nil {
		g = &group{n: n, bufs: make([][]float64, n)}
		g.cond = sync.NewCond(&g.mu)
		h.groups[id] = g
	}
	return g
}

// A group sums its ranks' float64 buffers: each deposits its buffer and
// waits until all have, the last one sums, then each takes the sum.
type group struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	bufs    [][]float64
	arrived int
	round   int
	sum     []float64
}

type collComm struct {
	dev   *collSim
	group *group
	rank  int
}

func (c *collComm) AllReduce(send accel.Mem, soff int, recv accel.Mem, roff int, count int, kind reflect.Kind, op accel.ReduceOp) (bool, error) {
	if kind != reflect.Float64 || op != accel.OpSum {
		return false, nil
	}
	c.dev.reduces.Add(1)
	view := func(m accel.Mem, off int) []float64 {
		b := c.dev.Host(m)[off:]
		return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), count)
	}
	g := c.group
	g.mu.Lock()
	defer g.mu.Unlock()
	round := g.round
	g.bufs[c.rank] = view(send, soff)
	if g.arrived++; g.arrived == g.n {
		g.sum = make([]float64, count)
		for _, b := range g.bufs {
			for i, x := range b {
				g.sum[i] += x
			}
		}
		g.arrived = 0
		g.round++
		g.cond.Broadcast()
	}
	for g.round == round {
		g.cond.Wait()
	}
	copy(view(recv, roff), g.sum)
	return true, nil
}

func (c *collComm) Close() error { return nil }

// TestAllReduceDeviceDirect: ranks whose devices run collectives
// themselves reduce there, not through host memory; when two ranks share
// a device, when a device cannot, or when joining fails on one rank,
// every rank stages instead; an op the devices do not have stages too.
func TestAllReduceDeviceDirect(t *testing.T) {
	const ranks, n = 3, 1000
	for _, c := range []struct {
		name    string
		key     func(rank int) string
		joinErr func(rank int) error
		plain   func(rank int) bool // a device without collectives
		op      comm.Op
		direct  bool
	}{
		{name: "direct", op: comm.Sum, direct: true},
		{name: "one device shared by two ranks", key: func(r int) string { return fmt.Sprint(min(r, 1)) }, op: comm.Sum},
		{name: "a device without collectives", plain: func(r int) bool { return r == 2 }, op: comm.Sum},
		{name: "joining fails on one rank", joinErr: func(r int) error {
			if r == 1 {
				return errors.New("no NCCL here")
			}
			return nil
		}, op: comm.Sum},
		{name: "an op the devices lack", op: comm.Max},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			h := &hub{}
			var direct atomic.Int64
			err := local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
				r := cm.Rank()
				sim, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
				if err != nil {
					return err
				}
				defer sim.Close()
				var dev accel.Device = sim
				var cs *collSim
				if c.plain == nil || !c.plain(r) {
					cs = &collSim{Sim: sim, key: fmt.Sprint(r), hub: h}
					if c.key != nil {
						cs.key = c.key(r)
					}
					if c.joinErr != nil {
						cs.joinErr = c.joinErr(r)
					}
					dev = cs
				}
				mine := &hardware.Machine{Accelerators: []hardware.Accelerator{{Name: dev.Name(), Kind: "sim", MemoryBytes: dev.Capacity()}}}
				machines, err := resourceset.Exchange(ctx, cm, mine)
				if err != nil {
					return err
				}
				me, err := resourceset.New(cm, r, machines[r], nil)
				if err != nil {
					return err
				}
				if err := me.AttachDevices([]accel.Device{dev}); err != nil {
					return err
				}
				buf, err := resourceset.Alloc[float64](me.Devices()[0], n)
				if err != nil {
					return err
				}
				defer buf.Free()
				host := make([]float64, n)
				for i := range host {
					host[i] = float64(r*n + i)
				}
				for round := range 2 { // the second call reuses what the first decided
					if err := buf.CopyFrom(ctx, host); err != nil {
						return err
					}
					if err := resourceset.AllReduceDevice(ctx, cm, buf, c.op); err != nil {
						return err
					}
					got := make([]float64, n)
					if err := buf.CopyTo(ctx, got); err != nil {
						return err
					}
					for i, x := range got {
						want := float64(3*i + n*(0+1+2))
						if c.op == comm.Max {
							want = float64(2*n + i)
						}
						if x != want {
							return fmt.Errorf("rank %d round %d element %d: %v, want %v", r, round, i, x, want)
						}
					}
				}
				if cs != nil {
					direct.Add(cs.reduces.Load())
				}
				return nil
			})
			require.NoError(t, err)
			if c.direct {
				require.EqualValues(t, 2*ranks, direct.Load(), "every rank's two calls ran on the devices")
			} else {
				require.Zero(t, direct.Load(), "every rank staged")
			}
		})
	}
}
