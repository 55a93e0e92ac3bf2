package resourceset

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware/accel"
)

// Direct collectives: when every rank's slice is on a device of its own
// that runs collectives itself (accel.Collectives: NCCL on CUDA GPUs),
// AllReduceDevice runs there instead of staging through host memory. The
// ranks first exchange their devices' keys (one small collective per
// call): equal keys or a device without collectives on any rank mean
// staging. A communicator of those devices is formed the first time a
// comm.Comm is used with them (an id from rank 0, sent over the comm;
// every rank agrees that all joined) and kept, under the comm and the
// keys of all ranks, for later calls: the same on every rank, since every
// rank sees the same keys.

// directs holds a device's communicators, by the comm.Comm they serve
// (the map keeps each comm reachable, so a key never names another one)
// and the ranks' device keys; a nil entry means they cannot be formed.
type directs struct {
	mu    sync.Mutex
	comms map[comm.Comm]map[string]accel.CollectiveComm
}

// direct returns the communicator of d's device for c's ranks, forming
// it on first use; nil when they cannot use one (a device without
// collectives on some rank, two ranks on one device, or a formation that
// failed somewhere). Every rank of c calls it at the same point.
func (d *Device) direct(ctx context.Context, c comm.Comm) (accel.CollectiveComm, error) {
	coll, _ := d.dev.(accel.Collectives)
	key := ""
	if coll != nil {
		key = d.dev.Key()
	}
	keys, err := comm.AllGatherValues(ctx, c, key)
	if err != nil {
		return nil, err
	}
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
	seen := map[string]bool{}
	for _, k := range keys {
		if k == "" || seen[k] {
			remember(nil)
			return nil, nil
		}
		seen[k] = true
	}
	var id []byte
	var idErr string
	if c.Rank() == 0 {
		if id, err = coll.NewCollectiveID(); err != nil {
			idErr = err.Error()
		}
	}
	msg, err := comm.BcastValue(ctx, c, struct {
		ID  []byte
		Err string
	}{id, idErr}, 0)
	if err != nil {
		return nil, err
	}
	if msg.Err != "" {
		remember(nil)
		return nil, nil
	}
	cc, jerr := coll.JoinCollective(msg.ID, c.Size(), c.Rank())
	failed := int64(0)
	if jerr != nil {
		failed = 1
	}
	anyFailed, err := comm.AllReduce(ctx, c, []int64{failed}, comm.Max)
	if err != nil {
		if cc != nil {
			_ = cc.Close()
		}
		return nil, err
	}
	if anyFailed[0] != 0 {
		if cc != nil {
			_ = cc.Close()
		}
		remember(nil)
		return nil, nil
	}
	remember(cc)
	return cc, nil
}

// reduceOps maps comm's reductions to the devices'.
var reduceOps = map[comm.Op]accel.ReduceOp{comm.Sum: accel.OpSum, comm.Prod: accel.OpProd, comm.Max: accel.OpMax, comm.Min: accel.OpMin}

// directAllReduce runs AllReduceDevice on the devices' communicator when
// there is one; ok reports whether it did. The decision is the same on
// every rank: the communicator is, and the kind and op are every rank's.
func directAllReduce[T comm.Number](ctx context.Context, c comm.Comm, buf *DeviceSlice[T], op comm.Op) (ok bool, err error) {
	rop, known := reduceOps[op]
	if !known {
		return false, nil
	}
	cc, err := buf.dev.direct(ctx, c)
	if err != nil || cc == nil {
		return false, err
	}
	kind := reflect.TypeFor[T]().Kind()
	ok, err = cc.AllReduce(buf.mem, 0, buf.mem, 0, buf.n, kind, rop)
	if err != nil {
		return true, fmt.Errorf("on the devices: %w", err)
	}
	return ok, nil
}
