package fakecuda_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// nccl.h's results and enums.
const (
	ncclSuccess            = 0
	ncclUnhandledCudaError = 1
	ncclInvalidArgument    = 4
	ncclInvalidUsage       = 5
	ncclRemoteError        = 6

	ncclFloat64 = 8
	ncclSum     = 0
)

// ncclUniqueID is ncclUniqueId, which ncclCommInitRank takes by value.
type ncclUniqueID struct{ internal [128]byte }

// rawNCCL binds the stand-in NCCL's entry points directly.
type rawNCCL struct {
	getVersion   func(v *int32) int32
	getUniqueID  func(id *ncclUniqueID) int32
	commInitRank func(comm *uintptr, nranks int32, id ncclUniqueID, rank int32) int32
	// initByPointer is ncclCommInitRank bound wrong: the id by pointer.
	initByPointer          func(comm *uintptr, nranks int32, id *ncclUniqueID, rank int32) int32
	commDestroy, commAbort func(comm uintptr) int32
	commCount              func(comm uintptr, n *int32) int32
	commUserRank           func(comm uintptr, rank *int32) int32
	commCuDevice           func(comm uintptr, dev *int32) int32
	commGetAsyncError      func(comm uintptr, r *int32) int32
	getErrorString         func(r int32) string
	getLastError           func(comm uintptr) string
	allReduce              func(send, recv cuda.DevicePtr, count uintptr, dt, op int32, comm, stream uintptr) int32
	send                   func(send cuda.DevicePtr, count uintptr, dt, peer int32, comm, stream uintptr) int32
	recv                   func(recv cuda.DevicePtr, count uintptr, dt, peer int32, comm, stream uintptr) int32
	groupStart, groupEnd   func() int32
	// Driver calls, to make contexts current on a thread of the test's.
	primaryCtxRetain  func(ctx *uintptr, dev int32) int32
	primaryCtxRelease func(dev int32) int32
	ctxSetCurrent     func(ctx uintptr) int32
}

func bindNCCL(t *testing.T, lib string) *rawNCCL {
	t.Helper()
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = purego.Dlclose(h) })
	n := &rawNCCL{}
	for fptr, name := range map[any]string{
		&n.getVersion:        "ncclGetVersion",
		&n.getUniqueID:       "ncclGetUniqueId",
		&n.commInitRank:      "ncclCommInitRank",
		&n.initByPointer:     "ncclCommInitRank",
		&n.commDestroy:       "ncclCommDestroy",
		&n.commAbort:         "ncclCommAbort",
		&n.commCount:         "ncclCommCount",
		&n.commUserRank:      "ncclCommUserRank",
		&n.commCuDevice:      "ncclCommCuDevice",
		&n.commGetAsyncError: "ncclCommGetAsyncError",
		&n.getErrorString:    "ncclGetErrorString",
		&n.getLastError:      "ncclGetLastError",
		&n.allReduce:         "ncclAllReduce",
		&n.send:              "ncclSend",
		&n.recv:              "ncclRecv",
		&n.groupStart:        "ncclGroupStart",
		&n.groupEnd:          "ncclGroupEnd",
		&n.primaryCtxRetain:  "cuDevicePrimaryCtxRetain",
		&n.primaryCtxRelease: "cuDevicePrimaryCtxRelease_v2",
		&n.ctxSetCurrent:     "cuCtxSetCurrent",
	} {
		sym, err := purego.Dlsym(h, name)
		require.NoError(t, err, name)
		purego.RegisterFunc(fptr, sym)
	}
	return n
}

// TestNCCLUniqueIDByValue checks that ncclCommInitRank reads its id
// from the by-value argument, as purego passes it, and the rank after it.
func TestNCCLUniqueIDByValue(t *testing.T) {
	d, lib := open(t, 2, 1<<20)
	n := bindNCCL(t, lib)
	var v int32
	require.EqualValues(t, ncclSuccess, n.getVersion(&v))
	require.EqualValues(t, 22304, v)
	var id ncclUniqueID
	require.EqualValues(t, ncclSuccess, n.getUniqueID(&id))
	require.Equal(t, "pzfake-nccl-id\x00", string(id.internal[:15]))
	ctx, c0 := newContext(t, d, 0)
	_, c1 := newContext(t, d, 1)

	// Bound wrong, with the id by pointer, the call passes the stand-in
	// other words in the id's place (and the pointer in the rank's), which
	// it refuses; so it does an id with one byte changed.
	damaged := id
	damaged.internal[64] ^= 0x10
	require.NoError(t, c0.Do(ctx, func() error {
		var comm uintptr
		if r := n.initByPointer(&comm, 1, &id, 0); r != ncclInvalidArgument {
			return fmt.Errorf("by pointer: %d, want ncclInvalidArgument", r)
		}
		if r := n.commInitRank(&comm, 1, damaged, 0); r != ncclInvalidArgument {
			return fmt.Errorf("damaged: %d, want ncclInvalidArgument", r)
		}
		if msg := n.getLastError(0); msg != "ncclCommInitRank: commId is not an id from ncclGetUniqueId" {
			return fmt.Errorf("last error %q", msg)
		}
		return nil
	}))

	// By value, two ranks on two threads: each gets its rank and device.
	comms := make([]uintptr, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range []*cuda.Context{c0, c1} {
		wg.Go(func() {
			errs[r] = c.Do(ctx, func() error {
				if res := n.commInitRank(&comms[r], 2, id, int32(r)); res != ncclSuccess {
					return fmt.Errorf("ncclCommInitRank: %d: %s", res, n.getLastError(0))
				}
				var rank, dev, count int32
				if n.commUserRank(comms[r], &rank) != ncclSuccess || n.commCuDevice(comms[r], &dev) != ncclSuccess ||
					n.commCount(comms[r], &count) != ncclSuccess {
					return errors.New("queries failed")
				}
				if rank != int32(r) || dev != int32(r) || count != 2 {
					return fmt.Errorf("rank %d, device %d, count %d", rank, dev, count)
				}
				return nil
			})
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for _, comm := range comms {
		require.EqualValues(t, ncclSuccess, n.commDestroy(comm))
	}
	var count int32
	require.EqualValues(t, ncclInvalidArgument, n.commCount(comms[0], &count), "a destroyed communicator")
	require.EqualValues(t, ncclInvalidArgument, n.commDestroy(comms[0]), "destroyed twice")
	require.EqualValues(t, ncclSuccess, n.commDestroy(0), "NULL, as NCCL allows")
	require.EqualValues(t, ncclSuccess, n.commAbort(0))
}

// TestNCCLOneThreadGroup drives two devices' ranks from one thread, the
// way single-process NCCL programs do: ncclCommInitRank for each device
// in one group, then a group of collectives on the default streams,
// which ncclGroupEnd runs together.
func TestNCCLOneThreadGroup(t *testing.T) {
	d, lib := open(t, 2, 1<<20)
	n := bindNCCL(t, lib)
	ctx, c0 := newContext(t, d, 0)
	_, c1 := newContext(t, d, 1)
	const count = 16
	bufs := make([]cuda.DevicePtr, 2)
	for r, c := range []*cuda.Context{c0, c1} {
		x := make([]float64, count)
		for i := range x {
			x[i] = float64(i * (r + 1))
		}
		p, err := c.Alloc(ctx, 8*count)
		require.NoError(t, err)
		require.NoError(t, c.CopyHtoD(ctx, p, cuda.Bytes(x)))
		bufs[r] = p
	}
	var id ncclUniqueID
	require.EqualValues(t, ncclSuccess, n.getUniqueID(&id))

	done := make(chan error, 1)
	go func() {
		// A thread of its own, discarded afterwards (it stays locked).
		runtime.LockOSThread()
		done <- func() error {
			ctxs := make([]uintptr, 2)
			comms := make([]uintptr, 2)
			for dev := range ctxs {
				if r := n.primaryCtxRetain(&ctxs[dev], int32(dev)); r != 0 {
					return fmt.Errorf("cuDevicePrimaryCtxRetain: %d", r)
				}
				defer n.primaryCtxRelease(int32(dev))
			}
			defer n.ctxSetCurrent(0)
			if n.groupStart() != ncclSuccess {
				return errors.New("ncclGroupStart")
			}
			for dev := range comms {
				n.ctxSetCurrent(ctxs[dev]) // the rank's device, as cudaSetDevice
				if r := n.commInitRank(&comms[dev], 2, id, int32(dev)); r != ncclSuccess {
					return fmt.Errorf("ncclCommInitRank in a group: %d", r)
				}
			}
			if r := n.groupEnd(); r != ncclSuccess {
				return fmt.Errorf("ncclGroupEnd after the inits: %d: %s", r, n.getLastError(0))
			}
			if n.groupStart() != ncclSuccess {
				return errors.New("ncclGroupStart")
			}
			for dev, comm := range comms {
				if r := n.allReduce(bufs[dev], bufs[dev], count, ncclFloat64, ncclSum, comm, 0); r != ncclSuccess {
					return fmt.Errorf("ncclAllReduce: %d", r)
				}
			}
			if r := n.groupEnd(); r != ncclSuccess {
				return fmt.Errorf("ncclGroupEnd after the collectives: %d: %s", r, n.getLastError(0))
			}
			for _, comm := range comms {
				if r := n.commDestroy(comm); r != ncclSuccess {
					return fmt.Errorf("ncclCommDestroy: %d", r)
				}
			}
			return nil
		}()
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the group never ended")
	}
	want := make([]float64, count)
	for i := range want {
		want[i] = float64(3 * i)
	}
	for r, c := range []*cuda.Context{c0, c1} {
		got := make([]float64, count)
		require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(got), bufs[r]))
		require.Equal(t, want, got, "rank %d", r)
	}
	require.EqualValues(t, 2, stats(t, lib).NCCL)
}

func TestNCCLEntryPointErrors(t *testing.T) {
	_, lib := open(t, 1, 1<<20)
	n := bindNCCL(t, lib)
	require.Equal(t, "invalid usage (run with NCCL_DEBUG=WARN for details)", n.getErrorString(ncclInvalidUsage))
	require.Equal(t, "no error", n.getErrorString(ncclSuccess))
	require.Equal(t, "unknown result code", n.getErrorString(99))
	require.EqualValues(t, ncclInvalidArgument, n.getVersion(nil))
	require.EqualValues(t, ncclInvalidArgument, n.getUniqueID(nil))

	var id ncclUniqueID
	require.EqualValues(t, ncclSuccess, n.getUniqueID(&id))
	before := stats(t, lib).InvalidContext
	res := make(chan string, 1)
	go func() {
		// A thread without a current context, and without a group.
		runtime.LockOSThread()
		var comm uintptr
		r1 := n.commInitRank(&comm, 1, id, 0)
		msg1 := n.getLastError(0)
		r2 := n.groupEnd()
		msg2 := n.getLastError(0)
		n.groupStart()
		r3 := n.commDestroy(1) // refused before the handle is looked at
		msg3 := n.getLastError(0)
		n.groupEnd()
		res <- fmt.Sprintf("%d %s | %d %s | %d %s", r1, msg1, r2, msg2, r3, msg3)
	}()
	select {
	case got := <-res:
		require.Equal(t, "1 ncclCommInitRank: no current CUDA context on the calling thread | "+
			"5 ncclGroupEnd: not in a group (ncclGroupStart) | "+
			"5 ncclCommDestroy: inside a group (ncclGroupStart)", got)
	case <-time.After(time.Minute):
		t.Fatal("no answer")
	}
	require.Equal(t, before+1, stats(t, lib).InvalidContext, "counted as a call without a context")
}

// ncclRanks opens an instance of n devices, one rank per device, each
// with a Context, a stream and a communicator, through hardware/cuda.
func ncclRanks(t *testing.T, n int) (context.Context, []*cuda.Context, []*cuda.Stream, []*cuda.NCCLComm, string) {
	t.Helper()
	fakecuda.SetNCCLTimeout(t, 20*time.Second)
	d, lib := open(t, n, 1<<20)
	nc, err := cuda.OpenNCCL(lib)
	require.NoError(t, err)
	id, err := nc.UniqueID()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cs := make([]*cuda.Context, n)
	ss := make([]*cuda.Stream, n)
	comms := make([]*cuda.NCCLComm, n)
	errs := make([]error, n)
	for r := range n {
		_, cs[r] = newContext(t, d, r)
		ss[r], err = cs[r].NewStream(ctx)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { comms[r], errs[r] = nc.NewComm(ctx, cs[r], n, r, id) })
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		t.Cleanup(func() { assert.NoError(t, comms[r].Close()) })
	}
	return ctx, cs, ss, comms, lib
}

// TestNCCLHalfPrecision checks the 16-bit floating-point types bit by
// bit: sums rounded to nearest even, subnormals, max.
func TestNCCLHalfPrecision(t *testing.T) {
	ctx, cs, ss, comms, _ := ncclRanks(t, 2)
	for _, c := range []struct {
		name string
		dt   cuda.NCCLType
		op   cuda.NCCLOp
		a, b []uint16 // rank 0's and rank 1's
		want []uint16
	}{
		{"float16 sum", cuda.NCCLFloat16, cuda.NCCLSum,
			// 1.5+2.25, 2048+1 (a tie, to even 2048), 2050+1 (a tie, to even 2052), subnormals 2⁻²⁴+2⁻²⁴
			[]uint16{0x3e00, 0x6800, 0x6801, 0x0001}, []uint16{0x4080, 0x3c00, 0x3c00, 0x0001},
			[]uint16{0x4380, 0x6800, 0x6802, 0x0002}},
		{"float16 max", cuda.NCCLFloat16, cuda.NCCLMax,
			[]uint16{0xbc00, 0x3800}, []uint16{0x3800, 0xbc00}, []uint16{0x3800, 0x3800}}, // max(-1, 0.5)
		{"bfloat16 sum", cuda.NCCLBfloat16, cuda.NCCLSum,
			// 1.5+2.25, 256+1 (to even 256), 258+1 (to even 260)
			[]uint16{0x3fc0, 0x4380, 0x4381}, []uint16{0x4010, 0x3f80, 0x3f80}, []uint16{0x4070, 0x4380, 0x4382}},
		{"float16 avg", cuda.NCCLFloat16, cuda.NCCLAvg,
			[]uint16{0x4000}, []uint16{0x4400}, []uint16{0x4200}}, // (2+4)/2 = 3
	} {
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r, x := range [][]uint16{c.a, c.b} {
			wg.Go(func() {
				errs[r] = func() error {
					p, err := cs[r].Alloc(ctx, 2*len(x))
					if err != nil {
						return err
					}
					if err := cs[r].CopyHtoD(ctx, p, cuda.Bytes(x)); err != nil {
						return err
					}
					if err := comms[r].AllReduce(ctx, p, p, len(x), c.dt, c.op, ss[r]); err != nil {
						return err
					}
					if err := comms[r].Synchronize(ctx, ss[r]); err != nil {
						return err
					}
					got := make([]uint16, len(x))
					if err := cs[r].CopyDtoH(ctx, cuda.Bytes(got), p); err != nil {
						return err
					}
					if fmt.Sprintf("%04x", got) != fmt.Sprintf("%04x", c.want) {
						return fmt.Errorf("got %04x, want %04x", got, c.want)
					}
					return nil
				}()
			})
		}
		wg.Wait()
		for r, err := range errs {
			require.NoError(t, err, "%s, rank %d", c.name, r)
		}
	}
}

// TestNCCLFailedStreamTellsPeers: a rank whose stream has failed before
// its collective still arrives, so that its peers end with
// ncclRemoteError instead of waiting; its own communicator gets
// ncclUnhandledCudaError, and its stream keeps its own error.
func TestNCCLFailedStreamTellsPeers(t *testing.T) {
	ctx, cs, ss, comms, _ := ncclRanks(t, 2)
	k := kernels(t, ctx, cs[0])
	require.NoError(t, cs[0].Launch(ctx, k["pz_fail"], cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, ss[0]))
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			p, err := cs[r].Alloc(ctx, 8)
			if err == nil {
				err = comms[r].AllReduce(ctx, p, p, 1, cuda.NCCLFloat64, cuda.NCCLSum, ss[r])
			}
			if err == nil {
				err = comms[r].Synchronize(ctx, ss[r])
			}
			errs[r] = err
		})
	}
	wg.Wait()
	// Rank 0's Synchronize returns whichever error it sees first.
	require.True(t, errors.Is(errs[0], cuda.ErrLaunchFailed) || errors.Is(errs[0], cuda.ErrNCCLUnhandledCuda), "%v", errs[0])
	require.ErrorIs(t, errs[1], cuda.ErrNCCLRemote)
	// The collective has ended: it gave every communicator its error at once.
	require.ErrorIs(t, comms[0].Err(ctx), cuda.ErrNCCLUnhandledCuda)
	require.ErrorIs(t, ss[0].Synchronize(ctx), cuda.ErrLaunchFailed, "the stream's own error stays")
	require.NoError(t, ss[1].Synchronize(ctx), "the peer's stream goes on")
}

// TestNCCLBufferFreedBeforeRun: a buffer checked when the collective
// was queued but freed before the stream reached it fails that rank's
// stream with CUDA_ERROR_ILLEGAL_ADDRESS, as a kernel's access would.
func TestNCCLBufferFreedBeforeRun(t *testing.T) {
	ctx, cs, ss, comms, _ := ncclRanks(t, 2)
	c := cs[0]
	k := kernels(t, ctx, c)
	flag, err := c.AllocHost(ctx, 4)
	require.NoError(t, err)
	clear(flag) // page-locked memory comes as it was left: a freed flag held 1
	t.Cleanup(func() { assert.NoError(t, c.FreeHost(ctx, flag)) })
	side, err := c.NewStream(ctx)
	require.NoError(t, err)
	p, err := c.AllocAsync(ctx, 8, side)
	require.NoError(t, err)
	require.NoError(t, side.Synchronize(ctx))
	// Hold rank 0's stream, queue the collective behind the gate, free
	// the buffer on the other stream, then open the gate.
	require.NoError(t, c.Launch(ctx, k["pz_wait_u32"], cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, ss[0], uint64(uintptr(unsafe.Pointer(&flag[0])))))
	require.NoError(t, comms[0].AllReduce(ctx, p, p, 1, cuda.NCCLFloat64, cuda.NCCLSum, ss[0]))
	require.NoError(t, c.FreeAsync(ctx, p, side))
	require.NoError(t, side.Synchronize(ctx))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&flag[0])), 1)

	q, err := cs[1].Alloc(ctx, 8)
	require.NoError(t, err)
	require.NoError(t, comms[1].AllReduce(ctx, q, q, 1, cuda.NCCLFloat64, cuda.NCCLSum, ss[1]))
	require.ErrorIs(t, comms[1].Synchronize(ctx, ss[1]), cuda.ErrNCCLRemote)
	require.ErrorIs(t, ss[0].Synchronize(ctx), cuda.ErrIllegalAddress)
	require.ErrorIs(t, comms[0].Err(ctx), cuda.ErrNCCLUnhandledCuda)
}

// TestNCCLOneThreadP2P drives two devices' ranks from one thread with
// ncclSend and ncclRecv on the default streams: in one group, each rank
// receives from the other and from itself before it sends, which only
// works because ncclGroupEnd runs each device's sends and receives
// together, on a thread of their own. Bad arguments fail at the call.
func TestNCCLOneThreadP2P(t *testing.T) {
	d, lib := open(t, 2, 1<<20)
	n := bindNCCL(t, lib)
	ctx, c0 := newContext(t, d, 0)
	_, c1 := newContext(t, d, 1)
	const count = 8
	sends := make([]cuda.DevicePtr, 2)
	recvs := make([]cuda.DevicePtr, 2) // from rank 0, then from rank 1
	for r, c := range []*cuda.Context{c0, c1} {
		x := make([]float64, count)
		for i := range x {
			x[i] = float64(100*r + i)
		}
		p, err := c.Alloc(ctx, 8*count)
		require.NoError(t, err)
		require.NoError(t, c.CopyHtoD(ctx, p, cuda.Bytes(x)))
		sends[r] = p
		recvs[r], err = c.Alloc(ctx, 2*8*count)
		require.NoError(t, err)
	}
	var id ncclUniqueID
	require.EqualValues(t, ncclSuccess, n.getUniqueID(&id))

	done := make(chan error, 1)
	go func() {
		// A thread of its own, discarded afterwards (it stays locked).
		runtime.LockOSThread()
		done <- func() error {
			ctxs := make([]uintptr, 2)
			comms := make([]uintptr, 2)
			for dev := range ctxs {
				if r := n.primaryCtxRetain(&ctxs[dev], int32(dev)); r != 0 {
					return fmt.Errorf("cuDevicePrimaryCtxRetain: %d", r)
				}
				defer n.primaryCtxRelease(int32(dev))
			}
			defer n.ctxSetCurrent(0)
			n.groupStart()
			for dev := range comms {
				n.ctxSetCurrent(ctxs[dev])
				if r := n.commInitRank(&comms[dev], 2, id, int32(dev)); r != ncclSuccess {
					return fmt.Errorf("ncclCommInitRank in a group: %d", r)
				}
			}
			if r := n.groupEnd(); r != ncclSuccess {
				return fmt.Errorf("ncclGroupEnd after the inits: %d: %s", r, n.getLastError(0))
			}
			for _, c := range []struct {
				call func() int32
				want string
			}{
				{func() int32 { return n.send(sends[0], count, ncclFloat64, 2, comms[0], 0) },
					"ncclSend: invalid peer 2 (peer should be in the 0..1 range)"},
				{func() int32 { return n.recv(recvs[0], count, 99, 1, comms[0], 0) }, "ncclRecv: invalid type 99"},
				{func() int32 { return n.send(sends[0], count+1, ncclFloat64, 1, comms[0], 0) },
					"ncclSend: sendbuff is not 72 bytes of device memory of device 0"},
				{func() int32 { return n.recv(sends[1], count, ncclFloat64, 1, comms[0], 0) },
					"ncclRecv: recvbuff is not 64 bytes of device memory of device 0"},
			} {
				if r, msg := c.call(), n.getLastError(0); r != ncclInvalidArgument || msg != c.want {
					return fmt.Errorf("got %d %q, want ncclInvalidArgument %q", r, msg, c.want)
				}
			}
			if n.groupStart() != ncclSuccess {
				return errors.New("ncclGroupStart")
			}
			for dev, comm := range comms {
				for peer := range 2 {
					if r := n.recv(recvs[dev]+cuda.DevicePtr(8*count*peer), count, ncclFloat64, int32(peer), comm, 0); r != ncclSuccess {
						return fmt.Errorf("ncclRecv: %d: %s", r, n.getLastError(0))
					}
				}
				for peer := range 2 {
					if r := n.send(sends[dev], count, ncclFloat64, int32(peer), comm, 0); r != ncclSuccess {
						return fmt.Errorf("ncclSend: %d: %s", r, n.getLastError(0))
					}
				}
			}
			if r := n.groupEnd(); r != ncclSuccess {
				return fmt.Errorf("ncclGroupEnd after the sends and receives: %d: %s", r, n.getLastError(0))
			}
			for _, comm := range comms {
				var async int32
				if r := n.commGetAsyncError(comm, &async); r != ncclSuccess || async != ncclSuccess {
					return fmt.Errorf("ncclCommGetAsyncError: %d, %d: %s", r, async, n.getLastError(comm))
				}
				if r := n.commDestroy(comm); r != ncclSuccess {
					return fmt.Errorf("ncclCommDestroy: %d", r)
				}
			}
			return nil
		}()
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the group never ended")
	}
	want := make([]float64, 0, 2*count)
	for r := range 2 {
		for i := range count {
			want = append(want, float64(100*r+i))
		}
	}
	for r, c := range []*cuda.Context{c0, c1} {
		got := make([]float64, 2*count)
		require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(got), recvs[r]))
		require.Equal(t, want, got, "rank %d", r)
	}
	st := stats(t, lib)
	require.EqualValues(t, 8, st.NCCLP2P, "2 sends and 2 receives of each rank; the refused calls are not counted")
	require.EqualValues(t, 8, st.NCCL, "NCCL operations, sends and receives included")
}

// TestNCCLP2PBufferFreedBeforeRun: a send buffer freed before the
// stream reached the send fails that rank's stream with
// CUDA_ERROR_ILLEGAL_ADDRESS; the receiver gets ncclRemoteError and its
// buffer is not written.
func TestNCCLP2PBufferFreedBeforeRun(t *testing.T) {
	ctx, cs, ss, comms, _ := ncclRanks(t, 2)
	c := cs[0]
	k := kernels(t, ctx, c)
	flag, err := c.AllocHost(ctx, 4)
	require.NoError(t, err)
	clear(flag) // page-locked memory comes as it was left: a freed flag held 1
	t.Cleanup(func() { assert.NoError(t, c.FreeHost(ctx, flag)) })
	side, err := c.NewStream(ctx)
	require.NoError(t, err)
	p, err := c.AllocAsync(ctx, 8, side)
	require.NoError(t, err)
	require.NoError(t, side.Synchronize(ctx))
	require.NoError(t, c.Launch(ctx, k["pz_wait_u32"], cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, ss[0], uint64(uintptr(unsafe.Pointer(&flag[0])))))
	require.NoError(t, comms[0].Send(ctx, p, 1, cuda.NCCLFloat64, 1, ss[0]))
	require.NoError(t, c.FreeAsync(ctx, p, side))
	require.NoError(t, side.Synchronize(ctx))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&flag[0])), 1)

	q, err := cs[1].Alloc(ctx, 8)
	require.NoError(t, err)
	require.NoError(t, cs[1].CopyHtoD(ctx, q, cuda.Bytes([]float64{-1})))
	require.NoError(t, comms[1].Recv(ctx, q, 1, cuda.NCCLFloat64, 0, ss[1]))
	require.ErrorIs(t, comms[1].Synchronize(ctx, ss[1]), cuda.ErrNCCLRemote)
	require.ErrorIs(t, ss[0].Synchronize(ctx), cuda.ErrIllegalAddress)
	require.ErrorIs(t, comms[0].Err(ctx), cuda.ErrNCCLUnhandledCuda)
	require.NoError(t, ss[1].Synchronize(ctx))
	got := make([]float64, 1)
	require.NoError(t, cs[1].CopyDtoH(ctx, cuda.Bytes(got), q))
	require.Equal(t, []float64{-1}, got, "not written")
}
