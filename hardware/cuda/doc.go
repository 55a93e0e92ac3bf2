// Package cuda binds the CUDA driver API at run time, without cgo and
// without the CUDA toolkit: Open loads libcuda.so.1 (installed with the
// NVIDIA driver) through github.com/ebitengine/purego, so pz builds with
// CGO_ENABLED=0 and runs anywhere, using GPUs where a driver exists.
//
// # No driver, no GPUs
//
// On a machine without the driver, Open returns an error wrapping
// ErrNoDriver, and a nil *Driver answers every query as a machine with
// zero devices:
//
//	d, err := cuda.Open()
//	if err != nil && !cuda.IsNoDriver(err) {
//		return err // a driver that is installed but broken
//	}
//	devs, err := d.Devices() // empty when d is nil
//
// # Other systems
//
// CUDA exists on Linux (and Windows, which pz does not target). On macOS
// the package builds, Open finds no libcuda.so.1 and returns ErrNoDriver,
// and a nil *Driver reports zero devices, as on a Linux machine without
// the driver. The Context's goroutine identifies its OS thread with
// gettid on Linux and with the goroutine's own id elsewhere (it stays
// locked to its thread, so either tells the Context's goroutine apart).
//
// # Contexts and threads
//
// The driver keeps the current context per OS thread; Go moves goroutines
// between threads. Calling the driver from an ordinary goroutine therefore
// fails at random with CUDA_ERROR_INVALID_CONTEXT (measured on an H100:
// the first allocation did). A Context solves this once: Driver.NewContext
// retains the device's primary context on a goroutine locked with
// runtime.LockOSThread, makes it current there, and every method
// (Alloc, copies, Launch, ...) and every Do(ctx, func() error) runs on that
// goroutine. Close releases the primary context and stops the goroutine.
// Several Contexts may share a device: they share its primary context, so
// device pointers are valid in all of them.
//
//	c, err := d.NewContext(ctx, 0)
//	defer c.Close()
//	p, err := c.Alloc(ctx, 1<<20)
//	err = c.Do(ctx, func() error { return cublasCall() }) // other libraries, same thread
//
// # What is bound
//
// Devices and attributes (name, UUID, memory, SM count, compute
// capability, PCI location), primary contexts, memory information, device
// memory, pinned host memory (AllocHost), synchronous and asynchronous
// copies, non-blocking streams, events and elapsed time, PTX and cubin
// modules (LoadPTX, with the JIT error log in the returned *Error), kernel
// launches, and driver error names and descriptions. Failed calls return
// an *Error naming the driver function; it unwraps to a Result, so
// errors.Is(err, cuda.ErrOutOfMemory) works.
//
// Beyond these:
//
//   - Stream-ordered allocation: AllocAsync and FreeAsync allocate from
//     and free to the device's default memory pool at a point of a
//     stream; DefaultMemPool returns the pool (a MemPool), whose release
//     threshold says how much freed memory it keeps for reuse, and whose
//     TrimTo gives kept memory back.
//   - Peers: Driver.CanAccessPeer, Context.EnablePeerAccess (which
//     reports access already on as ErrPeerAccessAlreadyEnabled) and
//     DisablePeerAccess, and CopyPeerAsync between two devices' memory,
//     which works with or without peer access.
//   - Host functions: LaunchHostFunc queues a Go function on a stream,
//     run by a driver thread once the work before it is done, before the
//     work after it starts; its result comes back on a channel. The
//     function must not call CUDA.
//   - Pinned memory: AllocHostFlags (portable, mapped, write-combined
//     pinned memory), IsPinned (whether a []byte lies in page-locked
//     memory: AllocHost, AllocHostFlags or HostRegister) and
//     HostDevicePtr (the device address of mapped memory).
//   - Green contexts (CUDA 12.4): Driver.SMs, Driver.SplitSMs and
//     Driver.NewGreenContext give a Context whose kernels run on a share
//     of the device's SMs; Context.SMs reads the share back. See below.
//
// These entry points are optional: a driver that lacks them (one older
// than CUDA 11.2 has no memory pools, one older than 12.4 no green
// contexts) still opens, and the methods that need them return an error
// wrapping ErrNotSupported, as they do when the driver reports
// CUDA_ERROR_NOT_SUPPORTED for the device.
//
// # Green contexts
//
// A green context runs kernels on a partition of a device's SMs, so that
// one worker's kernels cannot take the SMs another's need. Split the
// device's SMs (Driver.SMs, then Driver.SplitSMs, which rounds the group
// size up to the device's granularity: 8 SMs on compute capability 9.0
// and later) and give a part to NewGreenContext:
//
//	all, err := d.SMs(0)                      // every SM of device 0
//	parts, rest, err := d.SplitSMs(all, 2, 8) // two groups of at least 8 SMs
//	g, err := d.NewGreenContext(ctx, 0, parts[0])
//	defer g.Close()                           // destroys the green context
//	s, err := g.NewStream(ctx)                // a stream of the green context
//	err = g.Launch(ctx, f, grid, block, 0, s, p, n) // runs on parts[0]'s SMs
//
// The green Context is a Context like the others, with its own thread on
// which the converted green context (cuCtxFromGreenCtx) is current. Its
// streams belong to the green context because they are created on that
// thread (cuStreamCreate), so they need no CUDA 12.5 entry point. Memory
// is the device's: pointers from the device's primary Context work in the
// green one and the reverse. Modules, streams and events belong to the
// Context that made them. Close destroys the green context after the
// Context's thread is done, and releases the primary context it held;
// destroy its streams first (the driver detaches those left).
//
// The entry points are CUDA 12.4's, bound by their names; CUdevResource
// is passed as the 144 bytes cuda.h has given it since (green.go
// explains the layout, which 13.0 changed inside without changing its
// size or the place of the SM count).
//
// # NCCL
//
// OpenNCCL loads NCCL (libnccl.so.2, or the library PZ_NCCL_LIBRARY
// names) at run time, as OpenBLAS loads cuBLAS, for collectives between
// ranks that each have a GPU of their own. Without it OpenNCCL returns
// an error wrapping ErrNoNCCL, and callers fall back to staging through
// host memory. One rank makes the communicator's id and sends it to the
// others over a transport of its own; then every rank, at the same time,
// joins with a Context of its device:
//
//	n, err := cuda.OpenNCCL("")
//	id, err := n.UniqueID()                      // on rank 0, then broadcast
//	comm, err := n.NewComm(ctx, c, nranks, rank, id) // blocks until all have joined
//	defer comm.Close()
//	err = comm.AllReduce(ctx, send, recv, count, cuda.NCCLFloat64, cuda.NCCLSum, s)
//	err = comm.Synchronize(ctx, s) // the stream, or the communicator's error
//
// Every call runs on the Context's thread (NCCL needs no current context,
// but the calls are serialized with the Context's others). Collectives
// (AllReduce, Broadcast, Reduce, AllGather, ReduceScatter) are queued on
// a stream of the Context's device and return at once; every rank must
// queue the same ones in the same order. Arguments NCCL refuses fail
// the call with an *NCCLError, which unwraps to an NCCLResult
// (errors.Is(err, cuda.ErrNCCLInvalidArgument)); a collective that fails
// later (a peer that died, and on the stand-in, ranks that disagree)
// shows as the communicator's asynchronous error, which Err and
// Synchronize return: then Abort the communicator. NCCL.Group batches a
// Context's collectives between ncclGroupStart and ncclGroupEnd.
//
// ncclCommInitRank takes its id, a 128-byte struct, by value; purego
// passes structs by value on amd64, arm64, loong64 and ppc64le, where
// OpenNCCL works (elsewhere it returns ErrNoNCCL). The stand-in NCCL of
// internal/fakecuda checks a checksum over the bytes it receives, so the
// tests would catch an id passed wrong.
//
// # Host functions and Go
//
// The driver calls a host function (a CUhostFn) on a thread of its own,
// which Go did not create. LaunchHostFunc passes the driver one C
// callback made with purego.NewCallback, which enters Go through the cgo
// callback path and so works on such threads in CGO_ENABLED=1 builds and
// in CGO_ENABLED=0 ones (purego's fakecgo); the tests run it both ways
// against the stand-in driver, which calls it from its stream threads.
// purego callbacks are never freed and a process may make only about
// 2000, so the package makes this one, on first use, and the userData
// the driver passes back selects the Go function from a table.
//
// # Signatures
//
// Each entry point is declared in driver.go next to its C prototype from
// cuda.h, with the C types mapped as follows: CUresult is int32 (Result);
// CUdevice is int (int32); CUdeviceptr is unsigned long long (DevicePtr,
// uint64); size_t is uintptr; unsigned int is uint32; the opaque handles
// (CUcontext, CUmodule, CUfunction, CUstream, CUevent) are uintptr. The
// symbols are the versioned ones cuda.h maps the plain names to
// (cuMemAlloc_v2, cuMemcpyHtoDAsync_v2, cuStreamDestroy_v2,
// cuDevicePrimaryCtxRelease_v2, ...).
//
// # Cancellation
//
// Every call takes a context.Context. A call that has not started when
// ctx is done is skipped and returns ctx.Err(); a driver call that has
// started always completes. Stream.Synchronize and Event.Synchronize poll
// when ctx can be cancelled, so a wait can be abandoned and does not hold
// the Context's thread.
package cuda
