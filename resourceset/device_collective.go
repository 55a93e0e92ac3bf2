package resourceset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware/accel"
)

// The device forms of the rooted collectives move data between device
// memory on several ranks. Every rank passes a DeviceSlice on one of its
// own devices; the root's data (the source of BcastDevice and
// ScatterDevice, the destination of GatherDevice and ReduceDevice) live on
// the root device. The ranks agree on a route first (device_nccl.go):
//
//   - within one device, when every rank's slice is on one device object
//     that in-process ranks share (accel.Sharer): BcastDevice,
//     GatherDevice, ScatterDevice and AllGatherDevice copy between the
//     buffers within the device (the reductions stage);
//   - on the devices, when every rank's slice is on a device of its own
//     that runs collectives itself (accel.Collectives: NCCL on CUDA GPUs):
//     every collective runs there, device memory to device memory;
//   - staging otherwise: device memory is copied to host buffers and back
//     around comm's collectives, in chunks of StagingChunk bytes for
//     BcastDevice and ReduceDevice (and AllReduce in runtimeview), so that
//     one chunk's copies overlap the next chunk's transfer; the two chunk
//     buffers are page-locked ones the device lends when it is an
//     accel.Stager (a CUDA GPU), which makes their copies asynchronous.
//
// Lengths are agreed in the same step (routeOf): a rank whose length
// differs from the others' gets, like every rank, an error wrapping
// comm.ErrMismatch instead of a hang.

// StagingChunk is the size in bytes of the chunks of the staging path.
const StagingChunk = 1 << 20

// mineCheck validates a rank's own slice before any communication; a
// rank it refuses still takes part in the agreement step (refuse).
func mineCheck[T comm.Number](root *Device, call string, s *DeviceSlice[T]) error {
	if root == nil {
		return fmt.Errorf("%w: %s with a nil root device", ErrInvalid, call)
	}
	if s == nil || s.mem == nil {
		return fmt.Errorf("%w: %s with a nil or freed DeviceSlice", ErrInvalid, call)
	}
	if !s.dev.IsMine() {
		return fmt.Errorf("%w: %s with a slice on %v, not this rank's", ErrInvalid, call, s.dev)
	}
	if root.c.Rank() == root.rank && s.dev.rank == root.rank && s.dev.idx != root.idx {
		return fmt.Errorf("%w: %s rooted at %v: the root passes a slice on that device, not on %v", ErrInvalid, call, root, s.dev)
	}
	return nil
}

// refuse is the part that a rank whose own arguments are invalid (bad,
// from mineCheck) takes in the agreement step of a device collective on
// c, so that the other ranks, which are in that step, return an error
// naming it instead of waiting for its next collective (under MPI, for
// ever if it has none). nd is what the valid call would have said (call,
// element kind, op, root). It returns bad, joined with a disagreement
// that the step found first. Without a communicator (a nil root device)
// nothing can be told: bad alone.
func refuse(ctx context.Context, c comm.Comm, nd need, bad error) error {
	if c == nil {
		return bad
	}
	nd.bad, nd.usable, nd.at, nd.n, nd.into = bad, false, nil, 0, 0
	if _, err := routeOf(ctx, c, nil, nd); err != nil && err != bad {
		return errors.Join(bad, fmt.Errorf("resourceset: %s: %w", nd.call, err))
	}
	return bad
}

// rootComm is root's communicator, nil for a nil root.
func rootComm(root *Device) comm.Comm {
	if root == nil {
		return nil
	}
	return root.c
}

// rootRank is root's rank, -1 for a nil root.
func rootRank(root *Device) int {
	if root == nil {
		return -1
	}
	return root.rank
}

func chunks[T comm.Number](n int) (size, count int) {
	size = max(1, StagingChunk/elemSize[T]())
	return size, (n + size - 1) / size
}

// BcastDevice copies the root device's buf into buf on every other rank:
// every rank passes a slice of the same length on one of its devices (on
// the root's rank, the root device).
func BcastDevice[T comm.Number](ctx context.Context, root *Device, buf *DeviceSlice[T]) error {
	if err := mineCheck(root, "BcastDevice", buf); err != nil {
		return refuse(ctx, rootComm(root), need{call: "BcastDevice", kind: kindOf[T](), root: rootRank(root)}, err)
	}
	c := root.c
	rt, err := routeOf(ctx, c, buf.dev, need{call: "BcastDevice", kind: kindOf[T](), root: root.rank, n: buf.n, equal: true, usable: true, at: addrs(buf, nil)})
	if err != nil {
		return wrap(root, "BcastDevice", err)
	}
	if rt.within != nil {
		if err := fromRootWithin(ctx, c, root, rt.within, buf, buf, true); err != nil {
			return wrap(root, "BcastDevice", err)
		}
		return nil
	}
	if rt.direct != nil {
		if ok, err := settle(ctx, c)(rt.direct.Broadcast(buf.mem, 0, buf.mem, 0, buf.n, kindOf[T](), root.rank)); err != nil {
			return wrap(root, "BcastDevice", err)
		} else if ok {
			return nil
		}
	}
	if rt.byAddr != nil {
		if err := rt.byAddr.BcastAt(ctx, rt.sendAt, buf.n, comm.DatatypeOf[T](), root.rank); err != nil {
			return wrap(root, "BcastDevice", err)
		}
		return nil
	}
	size, count := chunks[T](buf.n)
	host, release := stagingBuffers[T](buf.dev.dev, min(size, buf.n))
	defer release() // after the waits below
	pending := [2]<-chan error{}
	var errs []error // the root's copies out, the others' copies in
	wait := func(i int) {
		if pending[i] != nil {
			if err := <-pending[i]; err != nil {
				errs = append(errs, err)
			}
			pending[i] = nil
		}
	}
	isRoot := c.Rank() == root.rank
	span := func(k int) (int, int) { return k * size, min((k+1)*size, buf.n) }
	if isRoot && count > 0 {
		lo, hi := span(0)
		pending[0] = buf.CopyOutAsync(lo, host[0][:hi-lo])
	}
	for k := 0; k < count; k++ {
		lo, hi := span(k)
		h := host[k%2][:hi-lo]
		if isRoot {
			wait(k % 2) // chunk k is in host
			if k+1 < count {
				lo1, hi1 := span(k + 1)
				pending[(k+1)%2] = buf.CopyOutAsync(lo1, host[(k+1)%2][:hi1-lo1])
			}
		} else {
			wait(k % 2) // the copy-in of chunk k-2 has released the buffer
		}
		if err := comm.Bcast(ctx, c, h, root.rank); err != nil {
			wait(0)
			wait(1)
			return wrap(root, "BcastDevice", err)
		}
		if !isRoot {
			pending[k%2] = buf.CopyInAsync(lo, h)
		}
	}
	wait(0)
	wait(1)
	// The others' data came from the root's copies out of its device:
	// every rank hears of their failure (the others then hold what the
	// root sent, not its data). A rank's copy into its own slice fails
	// that rank only.
	var out, in error
	if isRoot {
		out = errors.Join(errs...)
	} else {
		in = errors.Join(errs...)
	}
	if err := errors.Join(in, agreeParts(ctx, c, out, rootCopyOut)); err != nil {
		return wrap(root, "BcastDevice", err)
	}
	return nil
}

// ReduceDevice combines every rank's mine element-wise with op into the
// root device's into; every rank passes slices of the same length (into
// is ignored, and may be nil, on other ranks). It reports ok on the root.
func ReduceDevice[T comm.Number](ctx context.Context, root *Device, mine, into *DeviceSlice[T], op comm.Op) (ok bool, err error) {
	if err := mineCheck(root, "ReduceDevice", mine); err != nil {
		return false, refuse(ctx, rootComm(root), need{call: "ReduceDevice", kind: kindOf[T](), op: op, root: rootRank(root)}, err)
	}
	c := root.c
	isRoot := c.Rank() == root.rank
	var bad error
	if isRoot {
		if err := mineCheck(root, "ReduceDevice", into); err != nil {
			bad = err
		} else if into.n != mine.n {
			bad = fmt.Errorf("%w: ReduceDevice: into has %d elements, mine %d", ErrInvalid, into.n, mine.n)
		}
	}
	if !isRoot {
		into = nil
	}
	rt, err := routeOf(ctx, c, mine.dev, need{call: "ReduceDevice", kind: kindOf[T](), op: op, root: root.rank, n: mine.n, equal: true, usable: true, bad: bad, at: addrs(mine, into)})
	if err != nil {
		return false, wrap(root, "ReduceDevice", err)
	}
	if rop, known := reduceOps[op]; known && rt.direct != nil {
		var dst accel.Mem
		if into != nil {
			dst = into.mem
		}
		if ok, err := settle(ctx, c)(rt.direct.Reduce(mine.mem, 0, dst, 0, mine.n, kindOf[T](), rop, root.rank)); err != nil {
			return false, wrap(root, "ReduceDevice", err)
		} else if ok {
			return isRoot, nil
		}
	}
	if rt.byAddr != nil {
		if err := rt.byAddr.ReduceAt(ctx, rt.sendAt, rt.recvAt, mine.n, comm.DatatypeOf[T](), op, root.rank); err != nil {
			return false, wrap(root, "ReduceDevice", err)
		}
		return isRoot, nil
	}
	if err := staged(ctx, c, mine, into, func(chunk []T) ([]T, error) { return comm.Reduce(ctx, c, chunk, op, root.rank) }); err != nil {
		return false, wrap(root, "ReduceDevice", err)
	}
	return isRoot, nil
}

// stagingBuffers returns two host buffers of n elements for staging d's
// data: page-locked ones that d lends (accel.Stager: a CUDA GPU), whose
// copies are asynchronous, else Go memory. release gives them back once
// no copy uses them.
func stagingBuffers[T comm.Number](d accel.Device, n int) (host [2][]T, release func()) {
	if st, ok := d.(accel.Stager); ok && n > 0 {
		var rel [2]func()
		for i := range host {
			b, r, err := st.Staging(n * elemSize[T]())
			if err != nil {
				if i == 1 {
					rel[0]()
				}
				break
			}
			host[i], rel[i] = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), r
			if i == 1 {
				return host, func() { rel[0](); rel[1]() }
			}
		}
	}
	return [2][]T{make([]T, n), make([]T, n)}, func() {}
}

// staged runs buf through a reduction on c chunk by chunk: each chunk is
// copied to host memory (the next chunk's copy overlapping the
// collective), handed to step, and step's result, when into is not nil,
// copied into the same chunk of into (overlapping the next chunks).
//
// Every rank's result depends on every rank's copies out of its device:
// a copy out that failed on any rank fails every rank (agreeParts, one
// small AllReduce after the chunks; every rank runs every chunk, so they
// stay in step). A copy into this rank's into fails this rank only.
func staged[T comm.Number](ctx context.Context, c comm.Comm, buf, into *DeviceSlice[T], step func(chunk []T) ([]T, error)) error {
	size, count := chunks[T](buf.n)
	host, release := stagingBuffers[T](buf.dev.dev, min(size, buf.n))
	defer release() // every path below waits for its copies first
	span := func(k int) (int, int) { return k * size, min((k+1)*size, buf.n) }
	var next <-chan error
	if count > 0 {
		lo, hi := span(0)
		next = buf.CopyOutAsync(lo, host[0][:hi-lo])
	}
	var outs []<-chan error
	var errs, ins []error // copies out of buf, into into
	waitOuts := func() {
		for _, o := range outs {
			if err := <-o; err != nil {
				ins = append(ins, err)
			}
		}
	}
	for k := 0; k < count; k++ {
		lo, hi := span(k)
		if err := <-next; err != nil {
			errs = append(errs, err)
		}
		if k+1 < count {
			lo1, hi1 := span(k + 1)
			next = buf.CopyOutAsync(lo1, host[(k+1)%2][:hi1-lo1])
		}
		r, err := step(host[k%2][:hi-lo])
		if err != nil {
			if k+1 < count {
				<-next
			}
			waitOuts()
			return errors.Join(append(append(errs, ins...), err)...)
		}
		if into != nil {
			outs = append(outs, into.CopyInAsync(lo, r)) // r is step's own: no reuse hazard
		}
	}
	waitOuts()
	return errors.Join(errors.Join(ins...), agreeParts(ctx, c, errors.Join(errs...), stagingCopyOut))
}

// AllReduceDevice combines every rank's buf element-wise with op on
// communicator c, in place: every rank passes a slice of the same length
// on one of its devices. It takes the staging path in chunks
// (runtimeview.AllReduceDevice calls it on the RuntimeView's ranks).
func AllReduceDevice[T comm.Number](ctx context.Context, c comm.Comm, buf *DeviceSlice[T], op comm.Op) error {
	if buf == nil || buf.mem == nil || !buf.dev.IsMine() {
		return refuse(ctx, c, need{call: "AllReduceDevice", kind: kindOf[T](), op: op, root: -1}, fmt.Errorf("%w: AllReduceDevice: the slice must be a live one on this rank's devices", ErrInvalid))
	}
	rt, err := routeOf(ctx, c, buf.dev, need{call: "AllReduceDevice", kind: kindOf[T](), op: op, root: -1, n: buf.n, equal: true, usable: true, at: addrs(buf, buf)})
	if err != nil {
		return fmt.Errorf("resourceset: AllReduceDevice: %w", err)
	}
	if rop, known := reduceOps[op]; known && rt.direct != nil {
		if ok, err := settle(ctx, c)(rt.direct.AllReduce(buf.mem, 0, buf.mem, 0, buf.n, kindOf[T](), rop)); err != nil {
			return fmt.Errorf("resourceset: AllReduceDevice: %w", err)
		} else if ok {
			return nil
		}
	}
	if rt.byAddr != nil {
		if err := rt.byAddr.AllReduceAt(ctx, rt.sendAt, rt.recvAt, buf.n, comm.DatatypeOf[T](), op); err != nil {
			return fmt.Errorf("resourceset: AllReduceDevice: %w", err)
		}
		return nil
	}
	if err := staged(ctx, c, buf, buf, func(chunk []T) ([]T, error) { return comm.AllReduce(ctx, c, chunk, op) }); err != nil {
		return fmt.Errorf("resourceset: AllReduceDevice: %w", err)
	}
	return nil
}

// AllGatherDevice collects every rank's mine (lengths may differ, and may
// be 0) into every rank's into on communicator c, in rank order; into
// holds exactly the sum of the lengths, on any of this rank's devices.
// into is this rank's own destination, as an MPI receive buffer: one that
// is nil, freed, another rank's or of another length fails this rank only
// (ErrInvalid), after it took part; the others get the data. into may be
// mine itself (in place) when mine holds the sum, that is when the other
// ranks send nothing. The result and errors are the same whatever route
// the data take.
func AllGatherDevice[T comm.Number](ctx context.Context, c comm.Comm, mine, into *DeviceSlice[T]) error {
	if mine == nil || mine.mem == nil || !mine.dev.IsMine() {
		return refuse(ctx, c, need{call: "AllGatherDevice", kind: kindOf[T](), root: -1}, fmt.Errorf("%w: AllGatherDevice: mine must be a live slice on this rank's devices", ErrInvalid))
	}
	// A bad into is this rank's own error, returned after it took part
	// (staging, as for an into of another length), so that the others
	// are not left waiting for it.
	var own error
	intoN, usable := -1, false
	if into == nil || into.mem == nil || !into.dev.IsMine() {
		own = fmt.Errorf("%w: AllGatherDevice: into is nil, freed or on another rank's device", ErrInvalid)
		into = nil
	} else {
		intoN, usable = into.n, into.dev.dev == mine.dev.dev
	}
	rt, err := routeOf(ctx, c, mine.dev, need{call: "AllGatherDevice", kind: kindOf[T](), root: -1, n: mine.n, into: intoN, usable: usable, at: apartAddrs(mine, into)})
	if err != nil {
		return fmt.Errorf("resourceset: AllGatherDevice: %w", errors.Join(own, err))
	}
	if rt.within != nil {
		if err := allGatherWithin(ctx, c, rt.within, mine, into); err != nil {
			return fmt.Errorf("resourceset: AllGatherDevice: %w", err)
		}
		return nil
	}
	if total := rt.total(); !slices.ContainsFunc(rt.into, func(n int) bool { return n != total }) {
		if rt.direct != nil {
			if ok, err := settle(ctx, c)(rt.direct.AllGather(mine.mem, 0, into.mem, 0, rt.counts, kindOf[T]())); err != nil {
				return fmt.Errorf("resourceset: AllGatherDevice: %w", err)
			} else if ok {
				return nil
			}
		}
		if rt.byAddr != nil {
			if err := rt.byAddr.AllGatherAt(ctx, rt.sendAt, rt.counts, rt.recvAt, comm.DatatypeOf[T]()); err != nil {
				return fmt.Errorf("resourceset: AllGatherDevice: %w", err)
			}
			return nil
		}
	}
	// A rank whose copy out of mine failed still sends (the others wait
	// for its part), and every rank hears of it before it copies what
	// the ranks sent into into. A copy into into fails its rank only.
	host := make([]T, mine.n)
	cerr := <-mine.CopyOutAsync(0, host)
	parts, err := comm.AllGather(ctx, c, host)
	if err != nil {
		return fmt.Errorf("resourceset: AllGatherDevice: %w", errors.Join(cerr, err))
	}
	if err := agreeParts(ctx, c, cerr, stagingCopyOut); err != nil {
		return fmt.Errorf("resourceset: AllGatherDevice: %w", errors.Join(own, err))
	}
	if own != nil {
		return fmt.Errorf("resourceset: AllGatherDevice: %w", own)
	}
	if err := fillParts(into, parts); err != nil {
		return fmt.Errorf("resourceset: AllGatherDevice: %w", err)
	}
	return nil
}

// fillParts copies parts one after the other into into, which holds
// exactly their total.
func fillParts[T comm.Number](into *DeviceSlice[T], parts [][]T) error {
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if total != into.n {
		return fmt.Errorf("%w: the ranks sent %d elements, the destination holds %d", ErrInvalid, total, into.n)
	}
	var outs []<-chan error
	off := 0
	for _, p := range parts {
		outs = append(outs, into.CopyInAsync(off, p))
		off += len(p)
	}
	var errs []error
	for _, o := range outs {
		if err := <-o; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// GatherDevice collects every rank's mine (lengths may differ) into the
// root device's into, in rank order; into holds the sum of the lengths
// (ignored, and may be nil, on other ranks). It reports ok on the root.
// A root's into that is invalid or of another length fails every rank.
func GatherDevice[T comm.Number](ctx context.Context, root *Device, mine, into *DeviceSlice[T]) (ok bool, err error) {
	if err := mineCheck(root, "GatherDevice", mine); err != nil {
		return false, refuse(ctx, rootComm(root), need{call: "GatherDevice", kind: kindOf[T](), root: rootRank(root)}, err)
	}
	c := root.c
	isRoot := c.Rank() == root.rank
	intoN := 0
	var bad error
	var intoAt *DeviceSlice[T] // into, by address on the root only
	if isRoot {
		if bad = mineCheck(root, "GatherDevice", into); bad == nil {
			intoN, intoAt = into.n, into
		}
	}
	// The root's invalid destination, or one that does not hold what
	// the ranks send, fails every rank (the others learn it here).
	rt, err := routeOf(ctx, c, mine.dev, need{call: "GatherDevice", kind: kindOf[T](), root: root.rank, n: mine.n, into: intoN, usable: true, bad: bad, at: apartAddrs(mine, intoAt)})
	if err != nil {
		return false, wrap(root, "GatherDevice", err)
	}
	if got, want := rt.into[root.rank], rt.total(); got != want {
		return false, wrap(root, "GatherDevice", fmt.Errorf("%w: the ranks send %d elements, the root's destination holds %d", ErrInvalid, want, got))
	}
	if rt.within != nil {
		if err := gatherWithin(ctx, c, root, rt.within, mine, into); err != nil {
			return false, wrap(root, "GatherDevice", err)
		}
		return isRoot, nil
	}
	if rt.into[root.rank] == rt.total() {
		if !isRoot {
			into = nil
		}
		if rt.direct != nil {
			var dst accel.Mem
			if into != nil {
				dst = into.mem
			}
			if ok, err := settle(ctx, c)(rt.direct.Gather(mine.mem, 0, dst, 0, rt.counts, kindOf[T](), root.rank)); err != nil {
				return false, wrap(root, "GatherDevice", err)
			} else if ok {
				return isRoot, nil
			}
		}
		if rt.byAddr != nil {
			if err := rt.byAddr.GatherAt(ctx, rt.sendAt, rt.counts, rt.recvAt, comm.DatatypeOf[T](), root.rank); err != nil {
				return false, wrap(root, "GatherDevice", err)
			}
			return isRoot, nil
		}
	}
	// A rank whose copy out of mine failed still sends (the root waits
	// for its part), and every rank hears of it before the root copies
	// what the ranks sent into into. The root's copy into into fails the
	// root only: the result is the root's alone, as with MPI_Gather.
	host := make([]T, mine.n)
	cerr := <-mine.CopyOutAsync(0, host)
	parts, err := comm.Gather(ctx, c, host, root.rank)
	if err != nil {
		return false, wrap(root, "GatherDevice", errors.Join(cerr, err))
	}
	if err := agreeParts(ctx, c, cerr, stagingCopyOut); err != nil {
		return false, wrap(root, "GatherDevice", err)
	}
	if !isRoot {
		return false, nil
	}
	if err := fillParts(into, parts); err != nil {
		return false, wrap(root, "GatherDevice", err)
	}
	return true, nil
}

// ScatterDevice sends consecutive parts of the root device's from, one
// of mine.Len() elements per rank in rank order, into every rank's mine;
// every rank passes the same length, and from holds Size × that on the
// root (ignored, and may be nil, elsewhere).
func ScatterDevice[T comm.Number](ctx context.Context, root *Device, from, mine *DeviceSlice[T]) error {
	if err := mineCheck(root, "ScatterDevice", mine); err != nil {
		return refuse(ctx, rootComm(root), need{call: "ScatterDevice", kind: kindOf[T](), root: rootRank(root)}, err)
	}
	c := root.c
	isRoot := c.Rank() == root.rank
	var bad error
	var fromAt *DeviceSlice[T] // from, by address on the root only
	if isRoot {
		if err := mineCheck(root, "ScatterDevice", from); err != nil {
			bad = err
		} else if from.n != c.Size()*mine.n {
			bad = fmt.Errorf("%w: ScatterDevice: from has %d elements, want %d ranks × %d", ErrInvalid, from.n, c.Size(), mine.n)
		}
		fromAt = from
	}
	rt, err := routeOf(ctx, c, mine.dev, need{call: "ScatterDevice", kind: kindOf[T](), root: root.rank, n: mine.n, equal: true, usable: true, bad: bad, at: apartAddrs(fromAt, mine)})
	if err != nil {
		return wrap(root, "ScatterDevice", err)
	}
	if rt.within != nil {
		if err := fromRootWithin(ctx, c, root, rt.within, from, mine, false); err != nil {
			return wrap(root, "ScatterDevice", err)
		}
		return nil
	}
	if rt.direct != nil {
		var src accel.Mem
		if isRoot {
			src = from.mem
		}
		if ok, err := settle(ctx, c)(rt.direct.Scatter(src, 0, mine.mem, 0, rt.counts, kindOf[T](), root.rank)); err != nil {
			return wrap(root, "ScatterDevice", err)
		} else if ok {
			return nil
		}
	}
	if rt.byAddr != nil {
		if err := rt.byAddr.ScatterAt(ctx, rt.sendAt, rt.counts, rt.recvAt, comm.DatatypeOf[T](), root.rank); err != nil {
			return wrap(root, "ScatterDevice", err)
		}
		return nil
	}
	var (
		parts [][]T
		cerr  error // the root's copy out of from
	)
	if isRoot {
		all := make([]T, from.n)
		// On an error the others still wait in Scatter: they get
		// zeros, and then the error (agreeParts), before they copy
		// anything into mine.
		cerr = <-from.CopyOutAsync(0, all)
		parts = split(all, c.Size(), mine.n)
	}
	part, err := comm.Scatter(ctx, c, parts, root.rank)
	if err != nil {
		return wrap(root, "ScatterDevice", errors.Join(cerr, err))
	}
	if err := agreeParts(ctx, c, cerr, rootCopyOut); err != nil {
		return wrap(root, "ScatterDevice", err)
	}
	if err := <-mine.CopyInAsync(0, part); err != nil {
		return wrap(root, "ScatterDevice", err)
	}
	return nil
}

func split[T any](all []T, n, each int) [][]T {
	parts := make([][]T, n)
	for i := range parts {
		parts[i] = all[i*each : (i+1)*each]
	}
	return parts
}

// gatherWithin is GatherDevice's device-to-device path: every rank names
// its buffer, the root copies each into its place in into within the
// device, and the buffers stay until the root's copies ended.
func gatherWithin[T comm.Number](ctx context.Context, c comm.Comm, root *Device, sh accel.Sharer, mine, into *DeviceSlice[T]) error {
	name := sh.Export(mine.mem)
	defer sh.Unexport(name)
	all, ok, err := GatherValues(ctx, root, [2]uint64{name, uint64(mine.n)})
	if err != nil {
		return err
	}
	var cerr error
	if ok {
		if cerr = mineCheck(root, "GatherDevice", into); cerr == nil {
			cerr = copyPartsWithin(sh, all, into)
		}
	}
	return agreeParts(ctx, c, cerr, withinCopy)
}

// fromRootWithin is the device-to-device path of BcastDevice
// (everyOther: the root keeps its buffer, every rank copies all of src)
// and ScatterDevice (every rank, the root included, copies its part of
// src, at rank × dst.Len()): the root names src, the ranks copy within
// the device, and src stays until every copy ended. The arguments were
// agreed on already.
func fromRootWithin[T comm.Number](ctx context.Context, c comm.Comm, root *Device, sh accel.Sharer, src, dst *DeviceSlice[T], everyOther bool) error {
	isRoot := c.Rank() == root.rank
	var name uint64
	if isRoot {
		name = sh.Export(src.mem)
		defer sh.Unexport(name)
	}
	name, err := comm.BcastValue(ctx, c, name, root.rank)
	if err != nil {
		return err
	}
	var cerr error
	if !(everyOther && isRoot) && dst.n > 0 {
		off := 0
		if !everyOther {
			off = c.Rank() * dst.n
		}
		es := elemSize[T]()
		if m, ok := sh.Import(name); !ok {
			cerr = fmt.Errorf("%w: the root's buffer %d is not exported on %s", ErrInvalid, name, dst.dev.Name())
		} else {
			ch := make(chan error, 1)
			dst.dev.dev.CopyWithin(dst.mem, 0, m, off*es, dst.n*es, func(_ time.Time, err error) { ch <- err })
			cerr = <-ch
		}
	}
	return agreeParts(ctx, c, cerr, withinCopy)
}

// copyPartsWithin copies the exported buffers parts (name, length) one
// after the other into into, within the device.
func copyPartsWithin[T comm.Number](sh accel.Sharer, parts [][2]uint64, into *DeviceSlice[T]) error {
	total := 0
	for _, x := range parts {
		total += int(x[1])
	}
	if total != into.n {
		return fmt.Errorf("%w: the ranks sent %d elements, the destination holds %d", ErrInvalid, total, into.n)
	}
	es := elemSize[T]()
	var chans []chan error
	var errs []error
	off := 0
	for _, x := range parts {
		src, found := sh.Import(x[0])
		if !found {
			errs = append(errs, fmt.Errorf("%w: a rank's buffer %d is not exported on %s", ErrInvalid, x[0], into.dev.Name()))
			break
		}
		if x[1] == 0 || (src == into.mem && off == 0) {
			// Nothing to copy: a part of no elements (whose
			// allocation may have no memory at all), or this rank's
			// own part already in place (into is mine).
			off += int(x[1])
			continue
		}
		ch := make(chan error, 1)
		chans = append(chans, ch)
		into.dev.dev.CopyWithin(into.mem, off*es, src, 0, int(x[1])*es, func(_ time.Time, err error) { ch <- err })
		off += int(x[1])
	}
	for _, ch := range chans {
		errs = append(errs, <-ch)
	}
	return errors.Join(errs...)
}

// allGatherWithin is AllGatherDevice's device-to-device path. An into
// whose length is not the ranks' total fails this rank only, as on the
// other paths (docs/devices.md); a copy that fails fails every rank.
func allGatherWithin[T comm.Number](ctx context.Context, c comm.Comm, sh accel.Sharer, mine, into *DeviceSlice[T]) error {
	name := sh.Export(mine.mem)
	defer sh.Unexport(name)
	all, err := comm.AllGatherValues(ctx, c, [2]uint64{name, uint64(mine.n)})
	if err != nil {
		return err
	}
	total := 0
	for _, x := range all {
		total += int(x[1])
	}
	var own, cerr error
	if total != into.n {
		own = fmt.Errorf("%w: the ranks sent %d elements, the destination holds %d", ErrInvalid, total, into.n)
	} else {
		cerr = copyPartsWithin(sh, all, into)
	}
	return errors.Join(own, agreeParts(ctx, c, cerr, withinCopy))
}

// The parts agreeParts names in the errors of the ranks that did not fail.
const (
	withinCopy     = "the copy within the device"
	rootCopyOut    = "the root's copy out of the device"
	stagingCopyOut = "the copy out of the device"
	onTheDevices   = "the collective on the devices"
)

// maxPartErr is how many bytes of a rank's error agreeParts sends the
// others.
const maxPartErr = 512

// agreeParts ends a device collective on every rank of c (within one
// device, staged, or on the devices), cerr being this rank's part's
// error (nil when it succeeded). It returns only when every rank's part
// ended (on the within route the exported buffers stay until then, as
// the barrier it replaced kept them); and a part
// that failed on any rank fails every rank: a rank returns its own error
// first, then the others' (at most maxPartErr bytes of each), naming
// their ranks, so that no rank goes on as if the collective succeeded
// while another does not. One small AllReduce when every part
// succeeded; an AllGather of the errors' texts after it otherwise.
//
// what names the part in the others' errors (withinCopy, rootCopyOut,
// stagingCopyOut, onTheDevices).
func agreeParts(ctx context.Context, c comm.Comm, cerr error, what string) error {
	_, err := agreeOutcome(ctx, c, cerr, what)
	return err
}

// agreeOutcome is agreeParts, and also reports whether a part failed on
// some rank (false with an error: c itself failed).
func agreeOutcome(ctx context.Context, c comm.Comm, cerr error, what string) (failed bool, err error) {
	var flag, anyFailed [1]int64
	if cerr != nil {
		flag[0] = 1
	}
	if err := c.AllReduce(ctx, comm.BufOf(flag[:]), comm.BufOf(anyFailed[:]), comm.Max); err != nil {
		return false, errors.Join(cerr, err)
	}
	if anyFailed[0] == 0 {
		return false, nil
	}
	var text []byte
	if cerr != nil {
		msg := cerr.Error()
		if msg == "" {
			msg = fmt.Sprintf("%T with no message", cerr)
		}
		if len(msg) > maxPartErr {
			msg = msg[:maxPartErr-3] + "..."
		}
		text = []byte(msg)
	}
	var all []byte
	counts, err := c.AllGather(ctx, comm.Buf{Bytes: text, Type: comm.Uint8}, func(n int) []byte {
		all = make([]byte, n)
		return all
	})
	if err != nil {
		return true, errors.Join(cerr, fmt.Errorf("learning which ranks' parts failed: %w", err))
	}
	// The others' errors, ranks that failed alike named together.
	var texts []string
	ranks := map[string][]int{}
	off := 0
	for r, k := range counts {
		msg := string(all[off : off+k])
		off += k
		if k == 0 || r == c.Rank() {
			continue
		}
		if ranks[msg] == nil {
			texts = append(texts, msg)
		}
		ranks[msg] = append(ranks[msg], r)
	}
	errs := []error{cerr}
	for _, msg := range texts {
		errs = append(errs, fmt.Errorf("%s failed on %s: %s", what, comm.FormatRanks(ranks[msg]), msg))
	}
	return true, errors.Join(errs...)
}
