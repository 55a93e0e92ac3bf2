// Package fakecuda is a stand-in CUDA driver for tests: a small C library
// (csrc/fakecuda.c) that exports the driver entry points hardware/cuda
// binds, so that the binding, its thread and context handling and the code
// built on it run for real on machines without a GPU. It is never for
// production use.
//
// Build compiles the library with the system's C compiler (cc, or $CC)
// and returns its path, for cuda.OpenLibrary. Each load of a library file
// is one instance of the driver with its own state: Instance gives a test
// a private copy, whose configuration the environment sets when
// cuda.OpenLibrary calls cuInit:
//
//	fakecuda.Setenv(t, 2, 64<<20) // two devices of 64 MiB
//	d, err := cuda.OpenLibrary(fakecuda.Instance(t))
//
// The stand-in behaves like the real driver where Go code can go wrong:
//
//   - The current context is per OS thread. A call that needs one, made
//     on a thread that has none, fails with CUDA_ERROR_INVALID_CONTEXT
//     (and is counted: Counters.InvalidContext).
//   - Device pointers are not host addresses: dereferencing one on the
//     host crashes, and every call checks that device ranges lie in live
//     allocations of the current device. Fresh device memory holds the
//     byte 0xA5. The last release of a primary context frees everything
//     made in it.
//   - Streams run their work on threads of their own, after a delay
//     (EnvDelay) before each operation, so a missing synchronization
//     shows up as wrong data. Asynchronous copies from or to pageable host
//     memory complete before they return, as the real driver stages them;
//     with pinned memory (AllocHost, HostRegister) they are queued. The
//     default stream runs work at once, in the caller.
//   - Modules are PTX text; their kernels are the built-in ones below
//     that the text names after ".entry". Text containing "syntax_error"
//     fails to load with CUDA_ERROR_INVALID_IMAGE and a JIT error log.
//   - Stream-ordered allocations (cuMemAllocAsync) come from the
//     device's default pool (cuDeviceGetDefaultMemPool). The address is
//     known at once, but kernels find the memory only once the stream
//     has reached the allocation, and no longer once it has reached its
//     cuMemFreeAsync, which returns the memory to the pool. The pool keeps
//     freed memory up to its release threshold
//     (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 0 by default) and releases the
//     rest when the free is reached or the threshold lowered (the real
//     driver does at the next synchronization); cuMemPoolTrimTo releases
//     kept memory. What the pool holds counts as used in cuMemGetInfo.
//   - Every two devices may be peers (cuDeviceCanAccessPeer). A kernel
//     may use another device's memory only while its context has peer
//     access to that device's (cuCtxEnablePeerAccess, one way, until
//     cuCtxDisablePeerAccess or either primary context's destruction).
//     cuMemcpyPeerAsync copies between devices with or without it.
//   - Host functions (cuLaunchHostFunc) run on the stream's thread, a
//     pthread, between the work before and after them; on the default
//     stream, on a thread made for the call, which the caller joins.
//     Driver calls from a host function fail with
//     CUDA_ERROR_NOT_PERMITTED.
//   - cuPointerGetAttribute knows device allocations and pinned host
//     memory (cuMemAllocHost, cuMemHostAlloc, cuMemHostRegister), at any
//     address inside; other host memory gives CUDA_ERROR_INVALID_VALUE,
//     as in the real driver. Of pinned memory, only cuMemHostAlloc's with
//     CU_MEMHOSTALLOC_DEVICEMAP is mapped: kernels may use it at its
//     host address, which is its CU_POINTER_ATTRIBUTE_DEVICE_POINTER.
//   - Green contexts (CUDA 12.4): each device has EnvSMs SMs, its
//     multiprocessor count and its SM resource (cuDeviceGetDevResource).
//     cuDevSmResourceSplitByCount makes up to nbGroups groups of minCount
//     SMs rounded up as on compute capability 9.0 (at least 8, a multiple
//     of 8; with CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING at least
//     2, a multiple of 2) and puts the rest in the remainder
//     (CU_DEV_RESOURCE_TYPE_INVALID when none is left); its outputs cannot
//     be split again. cuDevResourceGenerateDesc takes resources of one
//     device from one split (else CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
//     cuGreenCtxCreate (CU_GREEN_CTX_DEFAULT_STREAM required) retains the
//     device's primary context until cuGreenCtxDestroy. The CUcontext of
//     a green context (cuCtxFromGreenCtx) is a context of its own,
//     current per thread, with its own streams (cuStreamCreate while it
//     is current, or cuGreenCtxStreamCreate), events and modules, over the
//     device's memory; cuCtxSynchronize in the primary context waits for
//     its streams too. Each stream records the SM count of its context,
//     and the kernels launched in green contexts are counted by it
//     (Counters.GreenKernels).
//     cuGreenCtxDestroy waits for the work queued in its streams, then
//     detaches them: calls on them fail with CUDA_ERROR_STREAM_DETACHED,
//     but cuStreamDestroy, which needs no current context for them. Green
//     contexts are never freed, so stale handles fail cleanly
//     (CUDA_ERROR_CONTEXT_IS_DESTROYED, CUDA_ERROR_INVALID_CONTEXT).
//
// The built-in kernels run on the host, each thread of the launch
// handling one element (there is no grid-stride loop, so a grid too small
// for n leaves elements undone, as on a GPU). Their parameters:
//
//	pz_fill_f64(double *x, double v, unsigned long long n)     x[i] = v
//	pz_scale_f64(double *x, double a, unsigned long long n)    x[i] *= a
//	pz_axpy_f64(double *y, double a, const double *x, unsigned long long n)  y[i] += a*x[i]
//	pz_add_f32(float *y, const float *x, unsigned long long n) y[i] += x[i]
//	pz_fail()  fails: the stream's later waits return CUDA_ERROR_LAUNCH_FAILED
//	pz_wait_u32(const unsigned *flag)  waits until the word at flag, a HOST
//	           address, is nonzero (CUDA_ERROR_LAUNCH_TIMEOUT after 60 s)
//
// A kernel whose pointer argument is not in a live allocation (of its
// device, of a device its context has peer access to, or mapped host
// memory) fails its stream with CUDA_ERROR_ILLEGAL_ADDRESS.
//
// The same library file is also a stand-in cuBLAS and cuSOLVER (dense):
// point cuda.OpenBLAS and cuda.OpenSolver at the path of the driver
// instance, so that they share its state. It exports, with the
// prototypes and status codes of cublas_api.h and cusolverDn.h,
//
//	cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2, cublasGetStream_v2,
//	cublas{D,S}gemm_v2, cublas{D,S}syrk_v2, cublas{D,S}trsm_v2,
//	cusolverDnCreate, cusolverDnDestroy, cusolverDnSetStream, cusolverDnGetStream,
//	cusolverDn{D,S}potrf_bufferSize, cusolverDn{D,S}potrf
//
// A handle belongs to the context current on the thread that created it
// (without one, creation fails with NOT_INITIALIZED and is counted in
// Counters.InvalidContext); an operation called on a thread whose current
// context is not the handle's fails the same way. Operations run on the
// host, column-major as in BLAS, queued on the handle's stream like
// kernels (Counters.Library counts them). Scalars are host pointers, read
// at call time. Bad arguments (negative sizes, a leading dimension below
// the rows, unknown enums) return INVALID_VALUE and queue nothing; a
// matrix not inside a live allocation of the handle's device, over the
// whole extent the operation touches, fails the stream with
// CUDA_ERROR_ILLEGAL_ADDRESS. syrk writes only the uplo triangle of C,
// trsm reads only A's uplo triangle (and not its diagonal with
// CUBLAS_DIAG_UNIT), potrf reads and writes only A's uplo triangle, sets
// the device int devInfo to 0 or to the order of the first leading minor
// that is not positive definite, and leaves garbage in its workspace
// (potrf_bufferSize asks for n elements).
//
// It is also a stand-in NCCL (2.23.4, nccl.h's prototypes and result
// codes) for ranks that are devices of this process, or with
// EnvNCCLProcesses of several processes (below): point cuda.OpenNCCL at
// the instance's path too (SetLibraries sets PZ_NCCL_LIBRARY). It
// exports
//
//	ncclGetVersion, ncclGetUniqueId, ncclCommInitRank, ncclCommDestroy,
//	ncclCommAbort, ncclCommCount, ncclCommCuDevice, ncclCommUserRank,
//	ncclCommGetAsyncError, ncclGetErrorString, ncclGetLastError,
//	ncclAllReduce, ncclBroadcast, ncclReduce, ncclAllGather,
//	ncclReduceScatter, ncclSend, ncclRecv, ncclGroupStart, ncclGroupEnd
//
// with these semantics:
//
//   - ncclGetUniqueId makes a fresh id: a magic string, random-ish bytes
//     and a checksum. ncclCommInitRank reads the id from its by-value
//     parameter and refuses one that fails the checksum
//     (ncclInvalidArgument), so a binding that passes it wrong is caught.
//   - ncclCommInitRank joins the rank to the clique of its id, on the
//     device of the context current on the calling thread (none:
//     ncclUnhandledCudaError, counted in Counters.InvalidContext), and
//     blocks until all nranks have joined, at most EnvNCCLTimeout (then
//     ncclSystemError). A rank outside [0, nranks) is ncclInvalidArgument
//     (as in NCCL); a rank that joined twice, a different nranks for one
//     id, or two ranks on one device (NCCL's "Duplicate GPU detected")
//     are ncclInvalidUsage.
//   - A collective checks its arguments when called (an unknown type or
//     op, a root out of range, a buffer that is not device memory of the
//     communicator's device: ncclInvalidArgument, nothing queued) and is
//     queued on its stream, as a kernel is (Counters.NCCL counts them); on
//     the default stream it runs in the caller, and inside
//     ncclGroupStart/ncclGroupEnd at the outermost ncclGroupEnd, each on a
//     thread of its own. When the stream reaches it, it waits, at most
//     EnvNCCLTimeout, for the same collective (by sequence number) of
//     every rank; the last to arrive checks that all passed the same
//     collective, count, type, op and root, reads every rank's send
//     buffer, combines them in rank order (so results are deterministic;
//     16-bit floats in float, rounded at each step; ncclAvg divides the
//     sum, integers truncating) and writes every rank's receive buffer.
//     In place (send == recv) works.
//   - A collective that cannot complete writes nothing and gives every
//     rank's communicator an asynchronous error (ncclCommGetAsyncError):
//     ranks that disagree, ncclInvalidUsage for all; a timeout,
//     ncclSystemError for all; a rank whose stream had failed
//     (ncclUnhandledCudaError) or whose communicator was destroyed or
//     aborted before it arrived (ncclInvalidUsage), that cause to it and
//     ncclRemoteError to the others. The streams go on; a buffer freed
//     before the collective ran fails its rank's stream with
//     CUDA_ERROR_ILLEGAL_ADDRESS. A communicator with an error refuses
//     later collectives with it; ncclGetLastError(comm) returns its
//     message, or the calling thread's last error.
//   - ncclSend and ncclRecv (NCCL 2.7) check their arguments at the call
//     like collectives (an unknown type, a peer out of range, a buffer
//     that is not count elements of the device's memory:
//     ncclInvalidArgument) and are queued the same way (Counters.NCCL
//     and Counters.NCCLP2P count them). Messages between two ranks match
//     in issue order: the k-th ncclSend from s to r is the k-th ncclRecv
//     of r from s, and both must pass the same count and type (else both
//     communicators get ncclInvalidUsage and nothing is written). A
//     rank may send to itself. A send completes only with its receive
//     (a rendezvous), and each side waits for the other at most
//     EnvNCCLTimeout (then ncclSystemError for both), so outside a group
//     two ranks that each send and then receive on one stream deadlock
//     until the timeout, as NCCL may. Inside ncclGroupStart/ncclGroupEnd
//     a thread's sends and receives on one stream become one operation,
//     queued at the outermost ncclGroupEnd (the default stream's run
//     there, on a thread of their own), which joins all its messages
//     before it waits: exchanges, gathers and scatters work in any issue
//     order. Failures end messages as they end collectives: a failed
//     stream or communicator tells the peer (ncclRemoteError), a freed
//     buffer fails its stream with CUDA_ERROR_ILLEGAL_ADDRESS.
//   - ncclCommDestroy waits for the communicator's collectives, sends and
//     receives (inside a group it is ncclInvalidUsage); ncclCommAbort
//     abandons them (those in flight end with errors).
//     Communicators are never freed: stale handles get
//     ncclInvalidArgument.
//
// # NCCL across processes
//
// With EnvNCCLProcesses=1 in the environment of every rank's process
// (read at cuInit), a communicator's ranks may be in different
// processes, as under mpirun: each process loads the library (the same
// file is fine: every process has its own driver state), makes its
// context on its own device ordinal, the devices being those of one
// host (rank r on device r, with EnvDevices at least the number of
// ranks: two ranks on one ordinal are NCCL's duplicate GPU), and calls
// ncclCommInitRank with the 128 bytes of an id from ncclGetUniqueId in
// any process, passed on by the program (over MPI, say). The semantics,
// argument checks and errors above hold across the processes:
//
//   - The ranks meet in a POSIX shared-memory segment,
//     /dev/shm/pzfake-nccl-<32 hex digits of the id>, which the first
//     rank to come creates, with a process-shared, robust mutex and
//     condition variable. ncclCommInitRank waits there, at most
//     EnvNCCLTimeout, for all ranks (then ncclSystemError for those that
//     came). Once all have joined, or the join has failed, the name is
//     unlinked: the segment lives on only in the processes' mappings,
//     so nothing is left in /dev/shm whatever becomes of the processes.
//     ncclCommDestroy and ncclCommAbort leave it and unmap it (once the
//     rank's operations have ended).
//   - Device memory is each process's own, so the bytes go through the
//     segment's data area, which grows as operations need it: a rank
//     reaching a collective or a send copies its send buffer in; the
//     rank that finds all ranks there checks and combines them in rank
//     order, as in one process; each rank copies its part of the result
//     (a receiver its message) into its own buffer. A buffer is checked
//     when its rank reaches the operation, and a receive buffer again
//     when the result is copied into it.
//   - Every rank's asynchronous error lives in the segment, so a
//     timeout or a disagreement reaches every rank's communicator
//     (ncclCommGetAsyncError), in every process, as in one process. A
//     process that dies is only noticed by the timeout.
//   - Limits: 64 ranks a communicator (ncclInvalidArgument beyond); 64
//     collectives and 1024 messages in flight in a communicator
//     (ncclSystemError beyond). A rank's sends and receives on several
//     communicators in one group wait by polling every millisecond.
package fakecuda

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ebitengine/purego"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/cbuild"
)

//go:embed csrc/fakecuda.c
var source []byte

// The environment variables the library reads at cuInit.
const (
	// EnvDevices is the number of devices, default 1; 0 makes cuInit
	// fail with CUDA_ERROR_NO_DEVICE (cuda.ErrNoDriver to OpenLibrary).
	EnvDevices = "PZ_FAKECUDA_DEVICES"
	// EnvMemory is the memory of each device in bytes, default 256 MiB.
	EnvMemory = "PZ_FAKECUDA_MEMORY"
	// EnvDelay is how long, in microseconds, a stream's thread sleeps
	// before each operation, default 20.
	EnvDelay = "PZ_FAKECUDA_DELAY_US"
	// EnvSMs is the number of SMs of each device, 1 to 1024, default 16:
	// the multiprocessor count and the SM resource green contexts split.
	EnvSMs = "PZ_FAKECUDA_SMS"
	// EnvNCCLTimeout is how long, in milliseconds, ncclCommInitRank,
	// collectives, sends and receives wait for the other ranks, default
	// 60000.
	EnvNCCLTimeout = "PZ_FAKECUDA_NCCL_TIMEOUT_MS"
	// EnvNCCLProcesses, set to 1 (default 0), lets the ranks of an NCCL
	// communicator be in different processes, e.g. under mpirun, which
	// meet in POSIX shared memory (see "NCCL across processes" in the
	// package documentation). Every rank's process must set it.
	EnvNCCLProcesses = "PZ_FAKECUDA_NCCL_PROCESSES"
)

// LibraryName is the file name Build gives the library.
const LibraryName = "libcuda.so.1"

// library is the stand-in as internal/cbuild compiles it.
var library = cbuild.Library{
	Name: LibraryName, What: "the stand-in CUDA driver", Cache: "pz-fakecuda", Source: source,
	Flags: []string{"-std=gnu11", "-O2", "-fno-math-errno", "-fPIC", "-shared", "-pthread", "-Wall", "-Wextra"},
}

// Build compiles the stand-in driver, once per source and compiler for
// all the test binaries of this user (the library is cached under
// os.TempDir, written atomically), and returns the library's path. It
// skips the test when there is no C compiler and fails it when the
// compilation fails.
//
// All loads of this path share one instance of the driver, whose
// configuration is read by the first cuInit; use Instance for a fresh one.
func Build(tb testing.TB) string {
	tb.Helper()
	cc, err := cbuild.Compiler()
	if err != nil {
		tb.Skipf("%v: %v", ErrNoCompiler, err)
	}
	path, err := library.Build(cc, nil)
	if err != nil {
		tb.Fatalf("fakecuda: %v", err)
	}
	return path
}

// Compile is Build for code without a testing.TB, such as an Example: it
// returns an error wrapping ErrNoCompiler where Build would skip. All
// loads of the path it returns share one instance of the driver.
func Compile() (string, error) {
	cc, err := cbuild.Compiler()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoCompiler, err)
	}
	return library.Build(cc, nil)
}

// ErrNoCompiler is returned by Compile when there is no C compiler.
var ErrNoCompiler = errors.New("fakecuda: no C compiler to build the stand-in CUDA driver (install cc or set CC)")

// Instance returns the path of a private copy of the library in
// tb.TempDir(). The dynamic loader loads each file once, so the copy is
// a driver instance of its own: fresh state, counters starting at zero,
// and a configuration read from the environment by its first cuInit.
func Instance(tb testing.TB) string {
	tb.Helper()
	return instance(tb, Build(tb))
}

// cName is the name of a C function the library may lack.
var cName = regexp.MustCompile(`^(cu|cublas|cusolver|nccl)[A-Za-z0-9_]+$`)

// InstanceWithout is Instance for a library that lacks the entry points
// named (each a C function name, e.g. "ncclSend"), as an older library
// does: the functions are renamed at compile time, so everything else is
// as in Instance.
func InstanceWithout(tb testing.TB, symbols ...string) string {
	tb.Helper()
	cc, err := cbuild.Compiler()
	if err != nil {
		tb.Skipf("%v: %v", ErrNoCompiler, err)
	}
	var defs []string
	for _, s := range symbols {
		if !cName.MatchString(s) {
			tb.Fatalf("fakecuda: %q is not a CUDA, cuBLAS, cuSOLVER or NCCL function name", s)
		}
		defs = append(defs, "-D"+s+"=pzfake_hidden_"+s)
	}
	path, err := library.Build(cc, defs)
	if err != nil {
		tb.Fatalf("fakecuda: %v", err)
	}
	return instance(tb, path)
}

// instance copies the library at lib into tb.TempDir().
func instance(tb testing.TB, lib string) string {
	tb.Helper()
	b, err := os.ReadFile(lib)
	if err != nil {
		tb.Fatalf("fakecuda: %v", err)
	}
	path := filepath.Join(tb.TempDir(), LibraryName)
	if err := os.WriteFile(path, b, 0o755); err != nil {
		tb.Fatalf("fakecuda: %v", err)
	}
	return path
}

// Open loads a fresh instance (Instance) with devices GPUs of memory
// bytes each (Setenv) and returns its driver and the library's path.
func Open(tb testing.TB, devices int, memory int64) (*cuda.Driver, string) {
	tb.Helper()
	lib := Instance(tb)
	Setenv(tb, devices, memory)
	d, err := cuda.OpenLibrary(lib)
	if err != nil {
		tb.Fatalf("fakecuda: %v", err)
	}
	return d, lib
}

// SetLibraries points PZ_CUDA_LIBRARY, PZ_CUBLAS_LIBRARY,
// PZ_CUSOLVER_LIBRARY and PZ_NCCL_LIBRARY at lib for the rest of the
// test, so that code that opens the driver and the libraries itself
// finds the instance.
func SetLibraries(tb testing.TB, lib string) {
	tb.Helper()
	for _, v := range []string{"PZ_CUDA_LIBRARY", "PZ_CUBLAS_LIBRARY", "PZ_CUSOLVER_LIBRARY", "PZ_NCCL_LIBRARY"} {
		tb.Setenv(v, lib)
	}
}

// Setenv configures the instances that the test loads next (their
// cuInit reads the environment): devices devices of memory bytes each.
// Like tb.Setenv, it restores the environment when the test ends and
// cannot be used in parallel tests.
func Setenv(tb testing.TB, devices int, memory int64) {
	tb.Helper()
	tb.Setenv(EnvDevices, strconv.Itoa(devices))
	tb.Setenv(EnvMemory, strconv.FormatInt(memory, 10))
}

// SetDelay sets how long the streams of the instances that the test
// loads next sleep before each operation (EnvDelay), to the microsecond.
func SetDelay(tb testing.TB, d time.Duration) {
	tb.Helper()
	tb.Setenv(EnvDelay, strconv.FormatInt(d.Microseconds(), 10))
}

// SetNCCLTimeout sets how long the NCCL calls of the instances that the
// test loads next wait for the other ranks (EnvNCCLTimeout), to the
// millisecond.
func SetNCCLTimeout(tb testing.TB, d time.Duration) {
	tb.Helper()
	tb.Setenv(EnvNCCLTimeout, strconv.FormatInt(d.Milliseconds(), 10))
}

// SetSMs sets the number of SMs of each device of the instances that the
// test loads next (EnvSMs).
func SetSMs(tb testing.TB, sms int) {
	tb.Helper()
	tb.Setenv(EnvSMs, strconv.Itoa(sms))
}

// Counters are an instance's statistics, in the order pzfake_stats
// fills them up to NCCLP2P, then the kernels of green contexts
// (pzfake_green_kernels).
type Counters struct {
	// LiveAllocations and LiveBytes are the device allocations not yet
	// freed, and their size.
	LiveAllocations uint64
	LiveBytes       uint64
	// HtoD and DtoH count the copy calls (synchronous, asynchronous and
	// 2D) from host to device and from device to host.
	HtoD uint64
	DtoH uint64
	// Kernels counts the kernels launched.
	Kernels uint64
	// InvalidContext counts the calls refused with
	// CUDA_ERROR_INVALID_CONTEXT because the calling thread had no
	// current context.
	InvalidContext uint64
	// Library counts the cuBLAS and cuSOLVER operations queued (or run,
	// on the default stream).
	Library uint64
	// GreenContexts counts the green contexts alive (created by
	// cuGreenCtxCreate and not destroyed).
	GreenContexts uint64
	// NCCL counts the NCCL operations queued (or run, on the default
	// stream) by all ranks: collectives, and the sends and receives
	// that NCCLP2P counts too.
	NCCL uint64
	// NCCLP2P counts the ncclSend and ncclRecv calls queued (or run, on
	// the default stream, or deferred to ncclGroupEnd) by all ranks.
	NCCLP2P uint64
	// GreenKernels counts the kernels launched in green contexts (on
	// their streams or default streams) by the number of SMs they run
	// on, the green context's, which each stream records when it is
	// created. Counts of zero are left out, and the map is nil when all
	// are, so Counters of programs without green contexts compare equal
	// as before. Kernels counts these too.
	GreenKernels map[int]uint64
}

// Stats reads the counters of the instance loaded from lib (loading it
// if nobody has), through the library's extra exports
//
//	int pzfake_stats(unsigned long long *out, int n)
//	int pzfake_green_kernels(unsigned long long *out, int n)
//
// which copy up to n counters into out and return how many they keep:
// the first in the order of Counters' fields up to NCCLP2P, the
// second the kernels launched in green contexts of k SMs at index k.
func Stats(lib string) (Counters, error) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return Counters{}, fmt.Errorf("fakecuda: %w", err)
	}
	defer func() { _ = purego.Dlclose(h) }()
	sym, err := purego.Dlsym(h, "pzfake_stats")
	if err != nil {
		return Counters{}, fmt.Errorf("fakecuda: %s is not the stand-in driver: %w", lib, err)
	}
	var stats func(out *uint64, n int32) int32
	purego.RegisterFunc(&stats, sym)
	var c Counters
	const n = 10
	var out [n]uint64
	if got := stats(&out[0], n); got < n {
		return Counters{}, fmt.Errorf("fakecuda: %s keeps %d counters, want %d", lib, got, n)
	}
	c.LiveAllocations, c.LiveBytes, c.HtoD, c.DtoH, c.Kernels, c.InvalidContext, c.Library, c.GreenContexts, c.NCCL,
		c.NCCLP2P = out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8], out[9]
	sym, err = purego.Dlsym(h, "pzfake_green_kernels")
	if err != nil {
		return Counters{}, fmt.Errorf("fakecuda: %s is not the stand-in driver: %w", lib, err)
	}
	var green func(out *uint64, n int32) int32
	purego.RegisterFunc(&green, sym)
	counts := make([]uint64, green(nil, 0))
	if len(counts) > 0 {
		green(&counts[0], int32(len(counts)))
	}
	for sms, k := range counts {
		if k > 0 {
			if c.GreenKernels == nil {
				c.GreenKernels = map[int]uint64{}
			}
			c.GreenKernels[sms] = k
		}
	}
	return c, nil
}
