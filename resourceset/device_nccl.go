package resourceset

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware/accel"
)

// Routes. Every device collective first agrees, in one small collective,
// which way its data take; the choice is the same on every rank, since
// every rank decides from what all ranks sent. In order of preference:
//
//   - within one device: every rank's slice is on one device object that
//     in-process ranks share (accel.Sharer), so the data move by copies
//     within it;
//   - direct: every rank's slice is on a device of its own that runs
//     collectives itself (accel.Collectives: NCCL on CUDA GPUs), so they
//     run there, on the devices' memory;
//   - by address: the comm reaches every rank's device memory itself
//     (comm.DeviceComm and accel.Addresser: a CUDA-aware MPI and CUDA
//     GPUs), so its collectives take the devices' addresses;
//   - staging otherwise: device memory is copied to host buffers and back
//     around comm's collectives.
//
// The devices' communicator is formed the first time a comm.Comm is used
// with them and kept, under the comm and the keys of all ranks' devices,
// for later calls: the same on every rank, since every rank sees the
// same keys. Forming it (form) is three steps, each agreed by every rank
// before the next: every rank prepares what can fail on it alone, rank 0
// makes the id and sends it, every rank joins (which waits for all). A
// step that fails anywhere fails that call on every rank, naming the
// rank and its cause, and the refusal is remembered: later calls stage.

// directs holds a device's communicators, by the comm.Comm they serve
// (the map keeps each comm reachable, so a key never names another one)
// and the ranks' device keys; a nil entry means they cannot be formed.
type directs struct {
	mu    sync.Mutex
	comms map[comm.Comm]map[string]accel.CollectiveComm
}

// A route is the way a collective's data take, agreed by every rank.
type route struct {
	within accel.Sharer         // every slice is on this shared device
	direct accel.CollectiveComm // the ranks' devices' communicator
	byAddr comm.DeviceComm      // the comm, which reaches every rank's device memory
	sendAt uintptr              // with byAddr: this rank's send slice's address (need.at)
	recvAt uintptr              // and its recv slice's
	counts []int                // every rank's element count
	into   []int                // every rank's length of its other slice
}

// A routePart is what one rank sends in routeOf's collective.
type routePart struct {
	Within, Direct string // the shared device's instance, the device's key
	ByAddr, Bad    bool   // the comm reaches the device's memory; invalid arguments
	N, Into        int
	Call           string // the call, its element kind, op and root (need's)
	Kind, Op       uint8
	Root           int
}

// A need is what a collective brings to routeOf: this rank's slice
// length n and the length of its other slice (into: the destination of a
// gather), whether its slices may take a route other than staging
// (usable false: the other slice is on another device, or arguments are
// invalid in a way the staging path reports), and, for the calls whose
// lengths must be the same on every rank (equal), this rank's invalid
// arguments (bad: the root's). at gives the addresses of this rank's
// slices for the by-address route (its addr of each; nil slices, as the
// other ranks' destination of a gather, are 0); routeOf looks them up
// before its collective, so a rank whose device cannot give them is one
// the comm does not reach, and every rank stages, rather than that rank
// alone failing before a collective that the others enter. The call, the
// element kind, the op (comm.NoOp but for reductions) and the root (-1
// for none) must be the same on every rank: the devices' collectives take
// them as they are (a kind or op the devices lack on one rank only would
// send that rank alone to another route), so routeOf checks them.
type need struct {
	call          string
	kind          reflect.Kind
	op            comm.Op
	root          int
	n, into       int
	usable, equal bool
	bad           error
	at            func() (send, recv uintptr, err error)
}

// addrs is a need's at for the slices send and recv (either may be nil).
func addrs[T comm.Number](send, recv *DeviceSlice[T]) func() (uintptr, uintptr, error) {
	return func() (uintptr, uintptr, error) {
		s, err := addr(send)
		if err != nil {
			return 0, 0, err
		}
		r, err := addr(recv)
		if err != nil {
			return 0, 0, err
		}
		return s, r, nil
	}
}

// routeOf agrees on the route of a collective on c whose slice on this
// rank is on d, in one small collective that also checks the lengths
// (need.equal): a length that differs on some rank, or a rank's invalid
// arguments, is an error on every rank. A rank that is not usable makes
// every rank stage. Every rank of c calls it at the same point.
func routeOf(ctx context.Context, c comm.Comm, d *Device, nd need) (route, error) {
	me := routePart{N: nd.n, Into: nd.into, Bad: nd.bad != nil, Call: nd.call, Kind: uint8(nd.kind), Op: uint8(nd.op), Root: nd.root}
	var sendAt, recvAt uintptr
	if nd.usable {
		if sh, ok := d.dev.(accel.Sharer); ok {
			me.Within = sh.Instance()
		}
		if _, ok := d.dev.(accel.Collectives); ok {
			me.Direct = d.dev.Key()
		}
		if nd.bad == nil && nd.at != nil && reaches(c, d.dev) {
			// Looked up here, so that a failure is this rank's
			// part (not reached: every rank stages), not an early
			// return before the comm's collective.
			var err error
			sendAt, recvAt, err = nd.at()
			me.ByAddr = err == nil
		}
	}
	all, err := comm.AllGatherValues(ctx, c, me)
	if err != nil {
		return route{}, err
	}
	if err := agreed(nd, all); err != nil {
		return route{}, err
	}
	rt := route{counts: make([]int, len(all)), into: make([]int, len(all)), sendAt: sendAt, recvAt: recvAt}
	keys := make([]string, len(all))
	seen := map[string]bool{}
	within, direct, byAddr := true, true, true
	for r, p := range all {
		rt.counts[r], rt.into[r], keys[r] = p.N, p.Into, p.Direct
		within = within && p.Within != "" && p.Within == me.Within
		direct = direct && p.Direct != "" && !seen[p.Direct]
		seen[p.Direct] = true
		byAddr = byAddr && p.ByAddr
	}
	switch {
	case within:
		rt.within = d.dev.(accel.Sharer)
	case direct:
		if rt.direct, err = d.form(ctx, c, keys); err != nil {
			return route{}, err
		}
	}
	if rt.within == nil && rt.direct == nil && byAddr {
		rt.byAddr = c.(comm.DeviceComm)
	}
	return rt, nil
}

// agreed checks what every rank sent: a rank's invalid arguments are its
// error, and the same comm.ErrMismatch on every other rank; so are
// lengths that differ where they must be the same (need.equal).
func agreed(nd need, all []routePart) error {
	lo, hi, bad := nd.n, nd.n, -1 // bad: the first rank whose arguments are invalid
	for r, p := range all {
		lo, hi = min(lo, p.N), max(hi, p.N)
		if p.Bad && bad < 0 {
			bad = r
		}
	}
	for r, p := range all {
		switch {
		case p.Call != nd.call:
			return fmt.Errorf("%w: %s on this rank, %s on rank %d", comm.ErrMismatch, nd.call, p.Call, r)
		case p.Kind != uint8(nd.kind):
			return fmt.Errorf("%w: %s: elements of kind %v on this rank, %v on rank %d", comm.ErrMismatch, nd.call, nd.kind, reflect.Kind(p.Kind), r)
		case p.Op != uint8(nd.op):
			return fmt.Errorf("%w: %s: op %v on this rank, %v on rank %d", comm.ErrMismatch, nd.call, nd.op, comm.Op(p.Op), r)
		case p.Root != nd.root:
			return fmt.Errorf("%w: %s: rooted at rank %d on this rank, at rank %d on rank %d", comm.ErrMismatch, nd.call, nd.root, p.Root, r)
		}
	}
	switch {
	case nd.bad != nil:
		return nd.bad
	case bad >= 0 && bad == nd.root:
		return fmt.Errorf("%w: %s: the root's arguments are invalid (see the root's error)", comm.ErrMismatch, nd.call)
	case bad >= 0:
		return fmt.Errorf("%w: %s: rank %d's arguments are invalid (see its error)", comm.ErrMismatch, nd.call, bad)
	case nd.equal && lo != hi:
		return fmt.Errorf("%w: %s: lengths differ across ranks (from %d to %d elements; this rank %d)", comm.ErrMismatch, nd.call, lo, hi, nd.n)
	}
	return nil
}

// reaches reports whether c runs collectives on dev's memory by address
// (a CUDA-aware MPI and a CUDA GPU).
func reaches(c comm.Comm, dev accel.Device) bool {
	dc, ok := c.(comm.DeviceComm)
	ad, ok2 := dev.(accel.Addresser)
	return ok && ok2 && ad.Space() != "" && dc.Reaches(ad.Space())
}

// apartAddrs is addrs, except that a send slice that is the recv slice
// (a gather's or scatter's in-place form, which MPI's Gatherv, Scatterv
// and Allgatherv refuse) has no addresses: that rank's part is not
// reached by address, and every rank takes another route, which takes
// it in place. Reductions keep addrs: MPI reduces in place.
func apartAddrs[T comm.Number](send, recv *DeviceSlice[T]) func() (uintptr, uintptr, error) {
	if send != nil && recv != nil && send.mem == recv.mem && send.n > 0 {
		return nil
	}
	return addrs(send, recv)
}

// addr returns the address of s's memory for a DeviceComm; 0 for a nil
// or empty slice.
func addr[T comm.Number](s *DeviceSlice[T]) (uintptr, error) {
	if s == nil || s.n == 0 {
		return 0, nil
	}
	ad, ok := s.dev.dev.(accel.Addresser)
	if !ok {
		return 0, fmt.Errorf("%v is not reached by address", s.dev)
	}
	return ad.Address(s.mem, 0)
}

// total is the sum of the ranks' counts.
func (rt route) total() int {
	t := 0
	for _, n := range rt.counts {
		t += n
	}
	return t
}

// form returns the communicator of d's device with the devices of keys
// (one per rank of c), forming it on first use; nil when an earlier
// formation failed. A formation that fails on some rank is an error on
// every rank, naming that rank and its cause. Every rank of c calls it
// at the same point.
func (d *Device) form(ctx context.Context, c comm.Comm, keys []string) (accel.CollectiveComm, error) {
	group := strings.Join(keys, "\x00")
	d.directs.mu.Lock()
	cc, known := d.directs.comms[c][group]
	d.directs.mu.Unlock()
	if known { // formed (or refused) by these ranks' devices together before
		return cc, nil
	}
	remember := func(cc accel.CollectiveComm) {
		d.directs.mu.Lock()
		if d.directs.comms == nil {
			d.directs.comms = map[comm.Comm]map[string]accel.CollectiveComm{}
		}
		if d.directs.comms[c] == nil {
			d.directs.comms[c] = map[string]accel.CollectiveComm{}
		}
		d.directs.comms[c][group] = cc
		d.directs.mu.Unlock()
	}
	coll := d.dev.(accel.Collectives)
	// Prepare first, on every rank, and agree that every rank did before
	// an id is made or any rank joins: a join waits for every rank
	// (ncclCommInitRank), so a rank that failed alone before it would
	// leave the others waiting forever. A rank without device
	// collectives (accel.ErrNoCollectives: no NCCL on its node) makes
	// every rank stage, as a device without Collectives does; any other
	// failure fails every rank. One small AllReduce tells every rank
	// which; who failed and why is sent only when some rank did.
	join, perr := coll.PrepareCollective(ctx, c.Size(), c.Rank())
	closeJoin := func(err error) error {
		if join != nil {
			return errors.Join(err, join.Close())
		}
		return err
	}
	var flags, found [2]int64 // no collectives, failed
	if errors.Is(perr, accel.ErrNoCollectives) {
		flags[0], perr = 1, nil
	} else if perr != nil {
		flags[1] = 1
	}
	if err := c.AllReduce(ctx, comm.BufOf(flags[:]), comm.BufOf(found[:]), comm.Max); err != nil {
		return nil, closeJoin(errors.Join(perr, fmt.Errorf("agreeing that every rank prepared the devices' communicator: %w", err)))
	}
	if found[1] != 0 {
		failed, err := agreeOutcome(ctx, c, perr, preparing)
		if err == nil { // cannot be: some rank failed
			err = fmt.Errorf("%s failed on some rank", preparing)
		}
		return nil, formFailed(c, failed, perr, closeJoin(err), remember)
	}
	if found[0] != 0 {
		// Every rank stages: a failure to release the join is no
		// reason for this rank alone to fail.
		_ = closeJoin(nil)
		remember(nil)
		return nil, nil
	}
	var id []byte
	var idErr string
	if c.Rank() == 0 {
		var err error
		if id, err = coll.NewCollectiveID(); err != nil {
			idErr = err.Error()
			if idErr == "" {
				idErr = fmt.Sprintf("%T with no message", err)
			}
		}
	}
	msg, err := comm.BcastValue(ctx, c, struct {
		ID  []byte
		Err string
	}{id, idErr}, 0)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sending the devices' communicator's id: %w", err), join.Close())
	}
	if msg.Err != "" {
		err := fmt.Errorf("%s failed on rank 0: %s", makingID, msg.Err)
		return nil, formFailed(c, true, nil, errors.Join(err, join.Close()), remember)
	}
	cc, jerr := join.Join(ctx, msg.ID)
	if failed, err := agreeOutcome(ctx, c, jerr, joining); err != nil {
		if cc != nil {
			err = errors.Join(err, cc.Close())
		}
		return nil, formFailed(c, failed, jerr, err, remember)
	}
	remember(cc)
	return cc, nil
}

// The steps of forming the devices' communicator that agreeOutcome
// names in the errors of the ranks where they did not fail.
const (
	preparing = "preparing the devices' communicator"
	makingID  = "making the devices' communicator's id"
	joining   = "joining the devices' communicator"
)

// formFailed ends a formation that failed: when some rank's step failed
// (failed; own is this rank's error, if it was one of them), every rank
// returns err, which names the ranks and their causes, and remembers the
// refusal, so that the next calls on c stage; a failure of c itself is
// returned as it is, and nothing is remembered.
func formFailed(c comm.Comm, failed bool, own, err error, remember func(accel.CollectiveComm)) error {
	if !failed {
		return err
	}
	remember(nil)
	if own != nil {
		err = fmt.Errorf("on rank %d: %w", c.Rank(), err)
	}
	return fmt.Errorf("forming the devices' communicator (the next calls on this comm stage): %w", err)
}

// reduceOps maps comm's reductions to the devices'.
var reduceOps = map[comm.Op]accel.ReduceOp{comm.Sum: accel.OpSum, comm.Prod: accel.OpProd, comm.Max: accel.OpMax, comm.Min: accel.OpMin}

// kindOf is the element kind of T, as the devices' collectives take it.
func kindOf[T comm.Number]() reflect.Kind { return reflect.TypeFor[T]().Kind() }

// settle ends a collective that ran on the devices (ok) on every rank of
// c: the devices' collective moved every rank's data, so a failure on
// any rank (a fault its stream reported, a call that failed) reaches
// every rank (agreeParts: one small AllReduce on c, and the failed
// ranks' errors only when some failed), and no rank returns nil with
// data that a failed rank's part made wrong. Every rank of c calls it
// after the same collective, with what it returned:
// settle(ctx, c)(rt.direct.Broadcast(...)); ok false (the devices lack
// the kind or op, the same on every rank) ends nothing.
func settle(ctx context.Context, c comm.Comm) func(ok bool, err error) (bool, error) {
	return func(ok bool, err error) (bool, error) {
		if !ok && err == nil {
			return false, nil
		}
		return true, agreeParts(ctx, c, onDevices(err), onTheDevices)
	}
}

// onDevices wraps the error of a collective that ran on the devices.
func onDevices(err error) error {
	if err != nil {
		return fmt.Errorf("on the devices: %w", err)
	}
	return nil
}
