package resourceset_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
// 0 made, and each collective runs over their host-addressable memory.
// Joining waits, as ncclCommInitRank does, until every rank has joined.
// Its reductions know float64 sums only.
type collSim struct {
	*accel.Sim
	key        string
	hub        *hub
	prepareErr error // what PrepareCollective returns, if set
	joinErr    error // what Join returns, once every rank joined, if set
	// fail, while set, is what this rank's collectives return after they
	// ran (a fault its stream reported); only its rank's goroutine sets
	// it and calls them.
	fail error

	mu       sync.Mutex
	calls    map[string]int // collectives that ran here, by name
	ids      int            // ids made
	prepared int            // joins prepared and not yet used or closed
}

func (d *collSim) Key() string { return d.key }

func (d *collSim) NewCollectiveID() ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids++
	return []byte(fmt.Sprintf("id-%p-%d", d, d.ids)), nil
}

func (d *collSim) PrepareCollective(ctx context.Context, n, rank int) (accel.CollectiveJoin, error) {
	if d.prepareErr != nil {
		return nil, d.prepareErr
	}
	d.mu.Lock()
	d.prepared++
	d.mu.Unlock()
	return &collJoin{dev: d, n: n, rank: rank}, nil
}

// openJoins returns how many prepared joins are neither used nor closed.
func (d *collSim) openJoins() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.prepared
}

// A collJoin is a collSim's prepared join.
type collJoin struct {
	dev     *collSim
	n, rank int
	once    sync.Once
}

// release ends the prepared join (true the first time).
func (j *collJoin) release() (first bool) {
	j.once.Do(func() {
		j.dev.mu.Lock()
		j.dev.prepared--
		j.dev.mu.Unlock()
		first = true
	})
	return first
}

func (j *collJoin) Join(ctx context.Context, id []byte) (accel.CollectiveComm, error) {
	if !j.release() {
		return nil, errors.New("collSim: a join used twice")
	}
	g := j.dev.hub.group(string(id), j.n)
	if err := g.join(ctx); err != nil {
		return nil, err
	}
	if j.dev.joinErr != nil {
		return nil, j.dev.joinErr
	}
	return &collComm{dev: j.dev, group: g, rank: j.rank}, nil
}

func (j *collJoin) Close() error {
	j.release()
	return nil
}

// ran counts a collective that ran on the device.
func (d *collSim) ran(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.calls == nil {
		d.calls = map[string]int{}
	}
	d.calls[name]++
}

// ranOnDevice returns the collectives that ran on the device, by name.
func (d *collSim) ranOnDevice() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.calls)
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
		g = &group{n: n, parts: make([]part, n), all: make(chan struct{})}
		g.cond = sync.NewCond(&g.mu)
		h.groups[id] = g
	}
	return g
}

// A part is one rank's buffers in a collective, as bytes.
type part struct{ send, recv []byte }

// A group meets its ranks' calls: each deposits its part and waits until
// all have; the last runs the collective over every part.
type group struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	parts   []part
	arrived int
	round   int
	joined  int
	all     chan struct{} // closed when every rank joined
}

// join waits until every rank has joined the group, as
// ncclCommInitRank does.
func (g *group) join(ctx context.Context) error {
	g.mu.Lock()
	if g.joined++; g.joined == g.n {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("collSim: joining: %w", ctx.Err())
	}
}

func (g *group) meet(rank int, p part, run func(parts []part)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	round := g.round
	g.parts[rank] = p
	if g.arrived++; g.arrived == g.n {
		run(g.parts)
		g.arrived = 0
		g.round++
		g.cond.Broadcast()
	}
	for g.round == round {
		g.cond.Wait()
	}
}

type collComm struct {
	dev   *collSim
	group *group
	rank  int
}

// bytes returns n bytes at off of m; nil for a nil m.
func (c *collComm) bytes(m accel.Mem, off, n int) []byte {
	if m == nil {
		return nil
	}
	return c.dev.Host(m)[off : off+n]
}

// size is the size of an element of kind.
func size(kind reflect.Kind) int {
	switch kind {
	case reflect.Int8, reflect.Uint8:
		return 1
	case reflect.Int32, reflect.Uint32, reflect.Float32:
		return 4
	}
	return 8
}

// sumInto adds the float64s of every part's send into dst.
func sumInto(dst []byte, parts []part) {
	sum := make([]float64, len(dst)/8)
	for _, p := range parts {
		for i, x := range unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(p.send))), len(sum)) {
			sum[i] += x
		}
	}
	copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(sum))), len(dst)))
}

func (c *collComm) AllReduce(send accel.Mem, soff int, recv accel.Mem, roff int, count int, kind reflect.Kind, op accel.ReduceOp) (bool, error) {
	if kind != reflect.Float64 || op != accel.OpSum {
		return false, nil
	}
	c.dev.ran("AllReduce")
	c.group.meet(c.rank, part{c.bytes(send, soff, 8*count), c.bytes(recv, roff, 8*count)}, func(parts []part) {
		sum := make([]byte, 8*count)
		sumInto(sum, parts)
		for _, p := range parts {
			copy(p.recv, sum)
		}
	})
	return true, c.dev.fail
}

func (c *collComm) Broadcast(send accel.Mem, soff int, recv accel.Mem, roff int, count int, kind reflect.Kind, root int) (bool, error) {
	n := count * size(kind)
	c.dev.ran("Broadcast")
	var src []byte
	if c.rank == root {
		src = c.bytes(send, soff, n)
	}
	c.group.meet(c.rank, part{src, c.bytes(recv, roff, n)}, func(parts []part) {
		data := slices.Clone(parts[root].send)
		for _, p := range parts {
			copy(p.recv, data)
		}
	})
	return true, c.dev.fail
}

func (c *collComm) Reduce(send accel.Mem, soff int, recv accel.Mem, roff int, count int, kind reflect.Kind, op accel.ReduceOp, root int) (bool, error) {
	if kind != reflect.Float64 || op != accel.OpSum {
		return false, nil
	}
	c.dev.ran("Reduce")
	var dst []byte
	if c.rank == root {
		dst = c.bytes(recv, roff, 8*count)
	}
	c.group.meet(c.rank, part{c.bytes(send, soff, 8*count), dst}, func(parts []part) { sumInto(parts[root].recv, parts) })
	return true, c.dev.fail
}

// offsets returns the byte offset of every rank's part and the total.
func offsets(counts []int, kind reflect.Kind) ([]int, int) {
	off, total := make([]int, len(counts)), 0
	for r, n := range counts {
		off[r] = total
		total += n * size(kind)
	}
	return off, total
}

func (c *collComm) AllGather(send accel.Mem, soff int, recv accel.Mem, roff int, counts []int, kind reflect.Kind) (bool, error) {
	off, total := offsets(counts, kind)
	c.dev.ran("AllGather")
	c.group.meet(c.rank, part{c.bytes(send, soff, counts[c.rank]*size(kind)), c.bytes(recv, roff, total)}, func(parts []part) {
		for _, dst := range parts {
			for r, src := range parts {
				copy(dst.recv[off[r]:], src.send)
			}
		}
	})
	return true, c.dev.fail
}

func (c *collComm) Gather(send accel.Mem, soff int, recv accel.Mem, roff int, counts []int, kind reflect.Kind, root int) (bool, error) {
	off, total := offsets(counts, kind)
	c.dev.ran("Gather")
	var dst []byte
	if c.rank == root {
		dst = c.bytes(recv, roff, total)
	}
	c.group.meet(c.rank, part{c.bytes(send, soff, counts[c.rank]*size(kind)), dst}, func(parts []part) {
		for r, src := range parts {
			copy(parts[root].recv[off[r]:], src.send)
		}
	})
	return true, c.dev.fail
}

func (c *collComm) Scatter(send accel.Mem, soff int, recv accel.Mem, roff int, counts []int, kind reflect.Kind, root int) (bool, error) {
	off, total := offsets(counts, kind)
	c.dev.ran("Scatter")
	var src []byte
	if c.rank == root {
		src = c.bytes(send, soff, total)
	}
	c.group.meet(c.rank, part{src, c.bytes(recv, roff, counts[c.rank]*size(kind))}, func(parts []part) {
		for r, dst := range parts {
			copy(dst.recv, parts[root].send[off[r]:])
		}
	})
	return true, c.dev.fail
}

func (c *collComm) Close() error { return nil }

// TestAllReduceDeviceDirect: ranks whose devices run collectives
// themselves reduce there, not through host memory; when two ranks share
// a device, or when a device cannot, every rank stages instead; an op
// the devices do not have stages too, and so does every rank when one
// rank's device finds it has no collectives when it prepares
// (accel.ErrNoCollectives: no NCCL there). (A communicator that fails
// to form on one rank: TestDirectFormationFailureFailsEveryRank.)
func TestAllReduceDeviceDirect(t *testing.T) {
	const ranks, n = 3, 1000
	for _, c := range []struct {
		name   string
		key    func(rank int) string
		plain  func(rank int) bool // a device without collectives
		none   func(rank int) bool // a device whose PrepareCollective finds none
		op     comm.Op
		direct bool
	}{
		{name: "direct", op: comm.Sum, direct: true},
		{name: "one device shared by two ranks", key: func(r int) string { return fmt.Sprint(min(r, 1)) }, op: comm.Sum},
		{name: "a device without collectives", plain: func(r int) bool { return r == 2 }, op: comm.Sum},
		{name: "no collectives on one rank (no NCCL there)", none: func(r int) bool { return r == 1 }, op: comm.Sum},
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
					if c.none != nil && c.none(r) {
						cs.prepareErr = fmt.Errorf("%w: no NCCL here", accel.ErrNoCollectives)
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
					direct.Add(int64(cs.ranOnDevice()["AllReduce"]))
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

// attach gives every rank a resource set with dev as its one device; it
// returns every rank's device, this rank's attached to dev.
func attach(ctx context.Context, cm comm.Comm, dev accel.Device) ([]*resourceset.Device, error) {
	mine := &hardware.Machine{Accelerators: []hardware.Accelerator{{Name: dev.Name(), Kind: "sim", MemoryBytes: dev.Capacity()}}}
	machines, err := resourceset.Exchange(ctx, cm, mine)
	if err != nil {
		return nil, err
	}
	devs := make([]*resourceset.Device, cm.Size())
	for r := range devs {
		rs, err := resourceset.New(cm, r, machines[r], nil)
		if err != nil {
			return nil, err
		}
		if r == cm.Rank() {
			if err := rs.AttachDevices([]accel.Device{dev}); err != nil {
				return nil, err
			}
		}
		devs[r] = rs.Devices()[0]
	}
	return devs, nil
}

// ownCollSim gives rank cm.Rank() a simulated device of its own that
// runs collectives (meeting the others' in h), attached to its resource
// set; it returns the device and every rank's devices. Close the device.
func ownCollSim(ctx context.Context, cm comm.Comm, h *hub) (*collSim, []*resourceset.Device, error) {
	sim, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
	if err != nil {
		return nil, nil, err
	}
	cs := &collSim{Sim: sim, key: fmt.Sprint(cm.Rank()), hub: h}
	devs, err := attach(ctx, cm, cs)
	if err != nil {
		_ = sim.Close()
		return nil, nil, err
	}
	return cs, devs, nil
}

// filled returns a device slice holding x.
func filled[T comm.Number](ctx context.Context, d *resourceset.Device, x []T) (*resourceset.DeviceSlice[T], error) {
	s, err := resourceset.Alloc[T](d, len(x))
	if err != nil {
		return nil, err
	}
	if err := s.CopyFrom(ctx, x); err != nil {
		s.Free()
		return nil, err
	}
	return s, nil
}

// contents returns what s holds.
func contents[T comm.Number](ctx context.Context, s *resourceset.DeviceSlice[T]) ([]T, error) {
	x := make([]T, s.Len())
	return x, s.CopyTo(ctx, x)
}

// real is the element types the tests count with.
type real interface {
	~int32 | ~int64 | ~float32 | ~float64
}

// seq returns n values from base on.
func seq[T real](base, n int) []T {
	x := make([]T, n)
	for i := range x {
		x[i] = T(base + i)
	}
	return x
}

// TestRootedDeviceDirect: ranks whose devices run collectives themselves
// broadcast, reduce, gather, scatter and all-gather there, from and to
// every root, with lengths that differ across ranks where the call
// allows; a reduction of a kind the devices lack stages, and gives the
// same result.
func TestRootedDeviceDirect(t *testing.T) {
	const ranks, m = 3, 5
	ctx := context.Background()
	h := &hub{}
	calls := make([]map[string]int, ranks)
	err := local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
		r := cm.Rank()
		cs, devs, err := ownCollSim(ctx, cm, h)
		if err != nil {
			return err
		}
		defer cs.Close()
		dev := devs[r]
		check := func(what string, got, want any) error {
			if !reflect.DeepEqual(got, want) {
				return fmt.Errorf("rank %d: %s: %v, want %v", r, what, got, want)
			}
			return nil
		}
		lens := []int{2, 3, 4} // rank r's part of a gather
		for root := range ranks {
			rootDev := devs[root]
			// BcastDevice: the root's values reach every rank.
			x := make([]float64, m)
			if r == root {
				x = seq[float64](100*root, m)
			}
			buf, err := filled(ctx, dev, x)
			if err != nil {
				return err
			}
			if err := resourceset.BcastDevice(ctx, rootDev, buf); err != nil {
				return err
			}
			got, err := contents(ctx, buf)
			buf.Free()
			if err != nil {
				return err
			}
			if err := check(fmt.Sprintf("BcastDevice from %d", root), got, seq[float64](100*root, m)); err != nil {
				return err
			}

			// ReduceDevice: float64 on the devices, int32 staged.
			if err := reduceCheck[float64](ctx, dev, rootDev, r, ranks, m, check); err != nil {
				return err
			}
			if err := reduceCheck[int32](ctx, dev, rootDev, r, ranks, m, check); err != nil {
				return err
			}

			// GatherDevice: rank k's lens[k] values, in rank order.
			mine, err := filled(ctx, dev, seq[float64](10*r, lens[r]))
			if err != nil {
				return err
			}
			var into *resourceset.DeviceSlice[float64]
			if r == root {
				if into, err = resourceset.Alloc[float64](dev, 9); err != nil {
					return err
				}
			}
			ok, err := resourceset.GatherDevice(ctx, rootDev, mine, into)
			mine.Free()
			if err != nil {
				return err
			}
			if err := check("GatherDevice ok", ok, r == root); err != nil {
				return err
			}
			if r == root {
				got, err := contents(ctx, into)
				into.Free()
				if err != nil {
					return err
				}
				want := append(append(seq[float64](0, 2), seq[float64](10, 3)...), seq[float64](20, 4)...)
				if err := check(fmt.Sprintf("GatherDevice to %d", root), got, want); err != nil {
					return err
				}
			}

			// ScatterDevice: rank k gets the root's k-th part of m.
			var from *resourceset.DeviceSlice[int64]
			if r == root {
				if from, err = filled(ctx, dev, seq[int64](1000*root, ranks*m)); err != nil {
					return err
				}
			}
			part, err := resourceset.Alloc[int64](dev, m)
			if err != nil {
				return err
			}
			err = resourceset.ScatterDevice(ctx, rootDev, from, part)
			if from != nil {
				from.Free()
			}
			if err != nil {
				return err
			}
			got64, err := contents(ctx, part)
			part.Free()
			if err != nil {
				return err
			}
			if err := check(fmt.Sprintf("ScatterDevice from %d", root), got64, seq[int64](1000*root+r*m, m)); err != nil {
				return err
			}
		}

		// AllGatherDevice, lengths that differ: every rank gets all.
		mine, err := filled(ctx, dev, seq[float32](10*r, lens[r]))
		if err != nil {
			return err
		}
		defer mine.Free()
		all, err := resourceset.Alloc[float32](dev, 9)
		if err != nil {
			return err
		}
		defer all.Free()
		if err := resourceset.AllGatherDevice(ctx, cm, mine, all); err != nil {
			return err
		}
		got, err := contents(ctx, all)
		if err != nil {
			return err
		}
		want := append(append(seq[float32](0, 2), seq[float32](10, 3)...), seq[float32](20, 4)...)
		if err := check("AllGatherDevice", got, want); err != nil {
			return err
		}
		calls[r] = cs.ranOnDevice()
		return nil
	})
	require.NoError(t, err)
	for r, c := range calls {
		require.Equal(t, map[string]int{"Broadcast": ranks, "Reduce": ranks, "Gather": ranks, "Scatter": ranks, "AllGather": 1}, c,
			"rank %d: every collective ran on the devices but the int32 reductions", r)
	}
}

// reduceCheck reduces rank r's values (r, r+1, ...) into the root
// device and checks the sum there.
func reduceCheck[T real](ctx context.Context, dev, root *resourceset.Device, r, ranks, m int, check func(string, any, any) error) error {
	mine, err := filled(ctx, dev, seq[T](r, m))
	if err != nil {
		return err
	}
	defer mine.Free()
	isRoot := r == root.Rank()
	var into *resourceset.DeviceSlice[T]
	if isRoot {
		if into, err = resourceset.Alloc[T](dev, m); err != nil {
			return err
		}
		defer into.Free()
	}
	ok, err := resourceset.ReduceDevice(ctx, root, mine, into, comm.Sum)
	if err != nil {
		return err
	}
	if err := check("ReduceDevice ok", ok, isRoot); err != nil {
		return err
	}
	if !isRoot {
		return nil
	}
	got, err := contents(ctx, into)
	if err != nil {
		return err
	}
	want := make([]T, m)
	for i := range want {
		want[i] = T(ranks*i + ranks*(ranks-1)/2)
	}
	return check(fmt.Sprintf("ReduceDevice %T to %d", want, root.Rank()), got, want)
}

// TestDirectBadDestination: a destination whose length is not the
// ranks' total on one rank makes every rank take the staging path, which
// reports it on that rank; no rank hangs on the devices.
func TestDirectBadDestination(t *testing.T) {
	const ranks = 2
	ctx := context.Background()
	h := &hub{}
	err := local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
		r := cm.Rank()
		cs, devs, err := ownCollSim(ctx, cm, h)
		if err != nil {
			return err
		}
		defer cs.Close()
		mine, err := filled(ctx, devs[r], seq[float64](r, 3))
		if err != nil {
			return err
		}
		defer mine.Free()
		// Rank 1's destination holds one element too few.
		all, err := resourceset.Alloc[float64](devs[r], 6-r)
		if err != nil {
			return err
		}
		defer all.Free()
		err = resourceset.AllGatherDevice(ctx, cm, mine, all)
		if (err != nil) != (r == 1) || (err != nil && !errors.Is(err, resourceset.ErrInvalid)) {
			return fmt.Errorf("rank %d: AllGatherDevice: %v", r, err)
		}
		// The root's (rank 0's) gather destination is too small.
		var into *resourceset.DeviceSlice[float64]
		if r == 0 {
			if into, err = resourceset.Alloc[float64](devs[0], 5); err != nil {
				return err
			}
			defer into.Free()
		}
		// Every rank learns it (devices.md: "a root's invalid destination
		// fails every rank, never hangs one"), as it does of a nil one.
		_, err = resourceset.GatherDevice(ctx, devs[0], mine, into)
		if !errors.Is(err, resourceset.ErrInvalid) || !strings.Contains(err.Error(), "the root's destination holds 5") {
			return fmt.Errorf("rank %d: GatherDevice into 5 elements: %v", r, err)
		}
		_, err = resourceset.GatherDevice(ctx, devs[0], mine, nil)
		if err == nil || !strings.Contains(err.Error(), "GatherDevice rooted at rank 0") {
			return fmt.Errorf("rank %d: GatherDevice into nil: %v", r, err)
		}
		if c := cs.ranOnDevice(); len(c) != 0 {
			return fmt.Errorf("rank %d ran %v on the devices", r, c)
		}
		return nil
	})
	require.NoError(t, err)
}

// TestDirectFailureFailsEveryRank: when a collective on the devices
// fails on one rank only (its stream reported a fault after the
// collective ran), every rank returns an error, the others' naming that
// rank and its error, and the ranks stay in step: the next collective
// runs on the devices and succeeds everywhere. Before, the others
// returned nil.
func TestDirectFailureFailsEveryRank(t *testing.T) {
	const ranks, m, fails = 3, 4, 1
	for _, c := range []struct {
		call string
		run  func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[float64]) error
	}{
		{"BcastDevice", func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[float64]) error {
			return resourceset.BcastDevice(ctx, devs[0], mine)
		}},
		{"ReduceDevice", func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[float64]) error {
			into, err := resourceset.Alloc[float64](devs[cm.Rank()], m)
			if err != nil {
				return err
			}
			defer into.Free()
			_, err = resourceset.ReduceDevice(ctx, devs[2], mine, into, comm.Sum)
			return err
		}},
		{"AllReduceDevice", func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[float64]) error {
			return resourceset.AllReduceDevice(ctx, cm, mine, comm.Sum)
		}},
		{"GatherDevice", func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[float64]) error {
			into, err := resourceset.Alloc[float64](devs[cm.Rank()], ranks*m)
			if err != nil {
				return err
			}
			defer into.Free()
			_, err = resourceset.GatherDevice(ctx, devs[0], mine, into)
			return err
		}},
		{"ScatterDevice", func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[float64]) error {
			from, err := resourceset.Alloc[float64](devs[cm.Rank()], ranks*m)
			if err != nil {
				return err
			}
			defer from.Free()
			return resourceset.ScatterDevice(ctx, devs[1], from, mine)
		}},
		{"AllGatherDevice", func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[float64]) error {
			into, err := resourceset.Alloc[float64](devs[cm.Rank()], ranks*m)
			if err != nil {
				return err
			}
			defer into.Free()
			return resourceset.AllGatherDevice(ctx, cm, mine, into)
		}},
	} {
		t.Run(c.call, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h := &hub{}
			boom := errors.New("stream fault")
			err := local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
				r := cm.Rank()
				cs, devs, err := ownCollSim(ctx, cm, h)
				if err != nil {
					return err
				}
				defer cs.Close()
				mine, err := filled(ctx, devs[r], seq[float64](10*r, m))
				if err != nil {
					return err
				}
				defer mine.Free()
				if r == fails {
					cs.fail = boom
				}
				err = c.run(ctx, devs, cm, mine)
				cs.fail = nil
				if err := failedEverywhere(r, c.call, fails, "the collective on the devices failed on rank %d: on the devices: ", err, boom); err != nil {
					return err
				}
				// In step: the next collective runs on the devices.
				before := cs.ranOnDevice()["Broadcast"]
				if err := inStep(ctx, r, c.call, devs, mine); err != nil {
					return err
				}
				if cs.ranOnDevice()["Broadcast"] != before+1 {
					return fmt.Errorf("rank %d: BcastDevice did not run on the devices", r)
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// TestDirectFormationFailureFailsEveryRank: when preparing or joining the
// devices' communicator fails on rank 1 of 3 (not for want of
// collectives there, which stages: TestAllReduceDeviceDirect), every rank's first
// collective on the devices returns an error naming rank 1 and its cause,
// on its own (joining waits for every rank, as ncclCommInitRank does: a
// rank that failed before it, unnoticed, left the others waiting
// forever); no prepared join is left open; the next calls on the same
// comm stage, with the right results.
func TestDirectFormationFailureFailsEveryRank(t *testing.T) {
	const ranks, m, fails = 3, 4, 1
	for _, c := range []struct {
		name, step string
		inject     func(cs *collSim, boom error)
	}{
		{"prepare", "preparing the devices' communicator failed on rank %d: ", func(cs *collSim, boom error) { cs.prepareErr = boom }},
		{"join", "joining the devices' communicator failed on rank %d: ", func(cs *collSim, boom error) { cs.joinErr = boom }},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A safety net only: the ranks must end on their own.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			h := &hub{}
			boom := errors.New("creating a context: out of memory")
			err := local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
				r := cm.Rank()
				cs, devs, err := ownCollSim(ctx, cm, h)
				if err != nil {
					return err
				}
				defer cs.Close()
				if r == fails {
					c.inject(cs, boom)
				}
				mine, err := filled(ctx, devs[r], seq[float64](10*r, m))
				if err != nil {
					return err
				}
				defer mine.Free()
				err = resourceset.AllReduceDevice(ctx, cm, mine, comm.Sum)
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
					return fmt.Errorf("rank %d: waited for the safety net: %w", r, err)
				}
				if err := failedEverywhere(r, "AllReduceDevice", fails, c.step, err, boom); err != nil {
					return err
				}
				if !strings.Contains(err.Error(), fmt.Sprint("rank ", fails)) {
					return fmt.Errorf("rank %d: the error does not name rank %d: %v", r, fails, err)
				}
				if n := cs.openJoins(); n != 0 {
					return fmt.Errorf("rank %d: %d prepared joins left open", r, n)
				}
				// The next calls stage, and are right.
				if err := mine.CopyFrom(ctx, seq[float64](10*r, m)); err != nil {
					return err
				}
				if err := resourceset.AllReduceDevice(ctx, cm, mine, comm.Sum); err != nil {
					return fmt.Errorf("rank %d: AllReduceDevice after the failed formation: %w", r, err)
				}
				got, err := contents(ctx, mine)
				if err != nil {
					return err
				}
				if want := []float64{30, 33, 36, 39}; !slices.Equal(got, want) {
					return fmt.Errorf("rank %d: AllReduceDevice gave %v, want %v", r, got, want)
				}
				if err := inStep(ctx, r, "formation", devs, mine); err != nil {
					return err
				}
				if ran := cs.ranOnDevice(); len(ran) != 0 {
					return fmt.Errorf("rank %d: ran on the devices after the failed formation: %v", r, ran)
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// TestDirectMismatchIsAnErrorEverywhere: on ranks whose devices run
// collectives, an AllReduceDevice whose element type or op differs on
// rank 1 is an error wrapping comm.ErrMismatch on every rank. It hung:
// the devices lack rank 1's kind or op, so rank 1 alone staged while the
// others waited on the devices. The next collective runs on the devices.
func TestDirectMismatchIsAnErrorEverywhere(t *testing.T) {
	const ranks, m, odd = 3, 4, 1
	for _, c := range []struct {
		name string
		run  func(ctx context.Context, cm comm.Comm, dev *resourceset.Device, mine *resourceset.DeviceSlice[float64]) error
	}{
		{"element type", func(ctx context.Context, cm comm.Comm, dev *resourceset.Device, mine *resourceset.DeviceSlice[float64]) error {
			if cm.Rank() != odd {
				return resourceset.AllReduceDevice(ctx, cm, mine, comm.Sum)
			}
			f32, err := filled(ctx, dev, seq[float32](0, m))
			if err != nil {
				return err
			}
			defer f32.Free()
			return resourceset.AllReduceDevice(ctx, cm, f32, comm.Sum)
		}},
		{"op", func(ctx context.Context, cm comm.Comm, dev *resourceset.Device, mine *resourceset.DeviceSlice[float64]) error {
			op := comm.Sum
			if cm.Rank() == odd {
				op = comm.Max
			}
			return resourceset.AllReduceDevice(ctx, cm, mine, op)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A safety net only: the ranks must end on their own.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			h := &hub{}
			err := local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
				r := cm.Rank()
				cs, devs, err := ownCollSim(ctx, cm, h)
				if err != nil {
					return err
				}
				defer cs.Close()
				mine, err := filled(ctx, devs[r], seq[float64](10*r, m))
				if err != nil {
					return err
				}
				defer mine.Free()
				if err := c.run(ctx, cm, devs[r], mine); !errors.Is(err, comm.ErrMismatch) {
					return fmt.Errorf("rank %d: %v, want an error wrapping comm.ErrMismatch", r, err)
				}
				before := cs.ranOnDevice()["Broadcast"]
				if err := inStep(ctx, r, c.name, devs, mine); err != nil {
					return err
				}
				if cs.ranOnDevice()["Broadcast"] != before+1 {
					return fmt.Errorf("rank %d: BcastDevice did not run on the devices", r)
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}
