/*
 * fakecuda.c: a stand-in for the CUDA driver library (libcuda.so.1), for
 * tests on machines without a GPU. Never use it in production.
 *
 * It exports the driver entry points that pz's hardware/cuda binds, with
 * the C prototypes and CUresult codes of cuda.h, and behaves like the
 * real driver where Go code can get things wrong:
 *
 *   - the current context is per OS thread: a call that needs one fails
 *     with CUDA_ERROR_INVALID_CONTEXT on a thread that has none;
 *   - device pointers are host memory XOR'ed with DEV_TAG, a non-canonical
 *     address, so dereferencing one on the host crashes; every call checks
 *     that device ranges lie in live allocations of the current device;
 *   - streams are queues run by a thread of their own, which sleeps
 *     PZ_FAKECUDA_DELAY_US before each operation, so that a missing
 *     synchronization gives wrong results;
 *   - asynchronous copies from or to pageable host memory complete before
 *     returning; with pinned memory they are queued;
 *   - "kernels" are host functions named after PTX .entry points (see the
 *     Modules section); a fault makes the stream's error sticky;
 *   - stream-ordered allocations exist for kernels between the points of
 *     the stream where cuMemAllocAsync and cuMemFreeAsync were queued, and
 *     come from per-device pools that keep freed memory up to a release
 *     threshold (see the Memory pools section);
 *   - kernels may use other devices' memory only with peer access
 *     (cuCtxEnablePeerAccess), and mapped host memory (cuMemHostAlloc with
 *     CU_MEMHOSTALLOC_DEVICEMAP) at its host address;
 *   - host functions (cuLaunchHostFunc) run on driver threads, and calls
 *     into the driver from them fail with CUDA_ERROR_NOT_PERMITTED;
 *   - green contexts (CUDA 12.4) partition a device's SMs: each is a
 *     context of its own, current per thread like a primary one, over the
 *     device's memory, whose streams and kernels record the SM count they
 *     run with (see the Green contexts section);
 *   - the same file is a stand-in cuBLAS, cuSOLVER and NCCL: collectives
 *     between the devices of one process, queued on streams, where each
 *     rank's stream waits for the others' (see the NCCL section); with
 *     PZ_FAKECUDA_NCCL_PROCESSES=1, between processes, which meet in
 *     POSIX shared memory (see the NCCL across processes section).
 *
 * Configuration, read by the first cuInit: PZ_FAKECUDA_DEVICES (default 1;
 * 0 makes cuInit fail with CUDA_ERROR_NO_DEVICE), PZ_FAKECUDA_MEMORY
 * (bytes per device, default 256 MiB), PZ_FAKECUDA_DELAY_US (default 20),
 * PZ_FAKECUDA_SMS (SMs per device, default 16, at most MAX_SMS),
 * PZ_FAKECUDA_NCCL_TIMEOUT_MS (how long NCCL waits for other ranks,
 * default 60000), PZ_FAKECUDA_NCCL_PROCESSES (1: NCCL communicators may
 * span processes; default 0).
 *
 * Locking: one global mutex (g_mu) guards every table and every stream
 * and event field; one condition variable (g_cv) is broadcast whenever a
 * stream makes progress, another (g_ncv, on CLOCK_MONOTONIC for the
 * bounded waits) whenever an NCCL clique or collective does; NCCL
 * across processes has a mutex and condition variable in each shared
 * segment, taken after g_mu, never before. Copies,
 * memsets, kernels and collectives run without the mutex, and nobody
 * sleeps while holding it. Entry points never call other
 * entry points, only static helpers, so that two copies of the library
 * loaded side by side cannot interpose on each other.
 *
 * Build (-fno-math-errno keeps sqrt an instruction, so no libm is needed):
 *   cc -std=gnu11 -O2 -fno-math-errno -fPIC -shared -pthread -o libcuda.so.1 fakecuda.c
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

_Static_assert(sizeof(void *) == 8, "the stand-in driver needs a 64-bit host");

/* ---- Types and constants of cuda.h ---- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fctx *CUcontext;
typedef struct fstream *CUstream;
typedef struct fevent *CUevent;
typedef struct fmodule *CUmodule;
typedef struct ffunc *CUfunction;
typedef struct fpool *CUmemoryPool;
typedef struct fgreen *CUgreenCtx;
typedef struct fdesc *CUdevResourceDesc;
typedef void (*CUhostFn)(void *userData);
typedef struct { char bytes[16]; } CUuuid;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	CUDA_ERROR_LAUNCH_TIMEOUT = 702,
	CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
	CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
	CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
	CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
	CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
	CUDA_ERROR_MISALIGNED_ADDRESS = 716,
	CUDA_ERROR_LAUNCH_FAILED = 719,
	CUDA_ERROR_NOT_PERMITTED = 800,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_INVALID_RESOURCE_TYPE = 914,
	CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 915,
	CUDA_ERROR_STREAM_DETACHED = 917,
	CUDA_ERROR_UNKNOWN = 999,
};

enum { CU_STREAM_NON_BLOCKING = 0x1 };
enum { CU_EVENT_DISABLE_TIMING = 0x2, CU_EVENT_INTERPROCESS = 0x4 };
enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2, CU_MEMORYTYPE_ARRAY = 3, CU_MEMORYTYPE_UNIFIED = 4 };
enum { CU_MEMHOSTALLOC_PORTABLE = 0x1, CU_MEMHOSTALLOC_DEVICEMAP = 0x2, CU_MEMHOSTALLOC_WRITECOMBINED = 0x4 };
enum {
	CU_POINTER_ATTRIBUTE_CONTEXT = 1,
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
	CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
	CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
	CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
};
enum {
	CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
	CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
	CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
	CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
	CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
	CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
	CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
	CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
};
enum {
	CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
	CU_JIT_ERROR_LOG_BUFFER = 5,
	CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

typedef struct {
	size_t srcXInBytes, srcY;
	int srcMemoryType;
	const void *srcHost;
	CUdeviceptr srcDevice;
	void *srcArray;
	size_t srcPitch;
	size_t dstXInBytes, dstY;
	int dstMemoryType;
	void *dstHost;
	CUdeviceptr dstDevice;
	void *dstArray;
	size_t dstPitch;
	size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;

_Static_assert(sizeof(CUDA_MEMCPY2D) == 128, "CUDA_MEMCPY2D is 128 bytes in cuda.h");

/*
 * CUdevResource (CUDA 12.4+): a tagged union of 144 bytes. In 12.x the
 * union is CUdevSmResource (smCount only until 12.x) or _oversize[48]; in
 * 13.x it is _oversize[40] followed by a nextResource pointer, and
 * CUdevSmResource has gained minSmPartitionSize, smCoscheduledAlignment
 * and flags after smCount. Either way type is at offset 0 and smCount at
 * 96. The driver keeps private data in _internal_padding; so does this
 * one (struct resinfo).
 */
enum { CU_DEV_RESOURCE_TYPE_INVALID = 0, CU_DEV_RESOURCE_TYPE_SM = 1 };
enum { CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING = 0x1, CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE = 0x2 };
enum { CU_GREEN_CTX_DEFAULT_STREAM = 0x1 };

typedef struct {
	unsigned smCount, minSmPartitionSize, smCoscheduledAlignment, flags;
} CUdevSmResource;

typedef struct {
	int type;
	unsigned char _internal_padding[92];
	union {
		CUdevSmResource sm;
		unsigned char _oversize[48];
	};
} CUdevResource;

_Static_assert(sizeof(CUdevResource) == 144, "CUdevResource is 144 bytes in cuda.h (12.4 to 13.x)");
_Static_assert(__builtin_offsetof(CUdevResource, sm) == 96, "CUdevResource.sm is at offset 96 in cuda.h");

/* ---- Configuration and global state ---- */

#define MAX_DEVICES 64
#define MAX_ARGS 8
#define DEV_TAG 0x5a5a000000000000ULL /* device address = host address ^ DEV_TAG */
#define DEV_TAG_MASK 0xffff000000000000ULL
#define DEV_ALIGN 256                  /* cuMemAlloc alignment */
#define HOST_ALIGN 4096                /* cuMemAllocHost alignment */
#define UNWRITTEN 0xa5                 /* what fresh device memory holds */
#define DRIVER_VERSION 12040
#define MAX_SMS 1024                   /* PZ_FAKECUDA_SMS at most */

/* A primary context: one per device, alive while retained. */
struct fctx {
	int device;
	int refs;        /* cuDevicePrimaryCtxRetain count; 0: inactive */
	int destroying;  /* the last release is tearing it down */
	size_t used;     /* device bytes allocated */
	CUresult sticky; /* error of a kernel that failed on the default stream */
	unsigned gen;    /* teardowns so far: library handles of older ones are stale */
	unsigned long long peers; /* bit d: kernels may access device d's memory (cuCtxEnablePeerAccess) */
	unsigned sms;    /* SMs its kernels run on: the device's, or a green context's share */
	int green;       /* converted from a green context (cuCtxFromGreenCtx) */
};

/* PRIMARY is the primary context of c's device, which owns the device's memory. */
#define PRIMARY(c) (&g_ctx[(c)->device])

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static _Atomic int g_init = -1; /* -1 before cuInit, then its result */
static int g_ndev;
static size_t g_memory;
static unsigned long long g_delay_us;
static unsigned g_sms;
static unsigned long long g_nccl_timeout_ms; /* PZ_FAKECUDA_NCCL_TIMEOUT_MS */
static int g_nccl_procs;                     /* PZ_FAKECUDA_NCCL_PROCESSES: communicators span processes */
static struct fctx g_ctx[MAX_DEVICES];
static __thread struct fctx *t_current;
static __thread int t_stream_thread; /* the thread runs a stream (stream_main) */
static __thread int t_in_host_fn;    /* the thread is running a cuLaunchHostFunc function */

static CUresult unlock_with(CUresult r)
{
	pthread_mutex_unlock(&g_mu);
	return r;
}

static CUresult check_init(void)
{
	return atomic_load(&g_init) == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

/* ---- Statistics (pzfake_stats) ---- */

enum { ST_ALLOCS, ST_BYTES, ST_HTOD, ST_DTOH, ST_KERNELS, ST_REFUSED, ST_LIBRARY, ST_GREEN, ST_NCCL, ST_NCCL_P2P, NSTATS };
static _Atomic unsigned long long g_stats[NSTATS];
static _Atomic unsigned long long g_green_kernels[MAX_SMS + 1]; /* launches in green contexts by SM count */

static void stat_add(int i, long long d)
{
	atomic_fetch_add(&g_stats[i], (unsigned long long)d);
}

/*
 * pzfake_stats copies up to n counters into out, in this order: device
 * allocations live, device bytes live, host-to-device copies,
 * device-to-host copies, kernels launched, calls refused for want of a
 * current context, cuBLAS and cuSOLVER operations queued, green contexts
 * live, NCCL operations queued (collectives, sends and receives), NCCL
 * sends and receives queued. It returns how many counters there are.
 */
EXPORT int pzfake_stats(unsigned long long *out, int n)
{
	for (int i = 0; out != NULL && i < n && i < NSTATS; i++)
		out[i] = atomic_load(&g_stats[i]);
	return NSTATS;
}

/*
 * pzfake_green_kernels copies up to n counters into out: out[k] is the
 * number of kernels launched on a stream (or the default stream) of a
 * green context of k SMs: the SM count the stream recorded from its
 * context. It returns how many counters there are (MAX_SMS + 1).
 */
EXPORT int pzfake_green_kernels(unsigned long long *out, int n)
{
	for (int i = 0; out != NULL && i < n && i <= MAX_SMS; i++)
		out[i] = atomic_load(&g_green_kernels[i]);
	return MAX_SMS + 1;
}

/* ---- Error names ---- */

static const struct {
	CUresult code;
	const char *name, *text;
} g_errors[] = {
	{CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
	{CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	 "peer access is not supported between these two devices"},
	{CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
	{CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	 "peer access is already enabled"},
	{CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
	{CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
	{CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	 "part or all of the requested memory range is already mapped"},
	{CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	 "pointer does not correspond to a registered memory region"},
	{CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
	{CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	{CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
	{CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{CUDA_ERROR_INVALID_RESOURCE_TYPE, "CUDA_ERROR_INVALID_RESOURCE_TYPE", "invalid resource type"},
	{CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
	 "invalid resource configuration"},
	{CUDA_ERROR_STREAM_DETACHED, "CUDA_ERROR_STREAM_DETACHED",
	 "operation not permitted on a stream detached from its green context"},
	{CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult r)
{
	for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
		if (g_errors[i].code == r)
			return (int)i;
	return -1;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **p)
{
	int i = error_index(r);
	if (p == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*p = i < 0 ? NULL : g_errors[i].name;
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char **p)
{
	int i = error_index(r);
	if (p == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*p = i < 0 ? NULL : g_errors[i].text;
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* ---- Initialization ---- */

/* env_number reads a decimal environment variable; -1 if malformed. */
static int env_number(const char *name, unsigned long long def, unsigned long long *out)
{
	const char *s = getenv(name);
	char *end;
	if (s == NULL || *s == '\0') {
		*out = def;
		return 0;
	}
	errno = 0;
	*out = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || *s == '-' || !isdigit((unsigned char)*s)) {
		fprintf(stderr, "fakecuda: %s=%s is not a number\n", name, s);
		return -1;
	}
	return 0;
}

static void pools_init(void);

/* configure reads the environment; the result is cuInit's. */
static CUresult configure(void)
{
	unsigned long long ndev, mem, delay, sms, timeout, procs;
	if (env_number("PZ_FAKECUDA_DEVICES", 1, &ndev) != 0 ||
	    env_number("PZ_FAKECUDA_MEMORY", 256ULL << 20, &mem) != 0 ||
	    env_number("PZ_FAKECUDA_DELAY_US", 20, &delay) != 0 || env_number("PZ_FAKECUDA_SMS", 16, &sms) != 0 ||
	    env_number("PZ_FAKECUDA_NCCL_TIMEOUT_MS", 60000, &timeout) != 0 ||
	    env_number("PZ_FAKECUDA_NCCL_PROCESSES", 0, &procs) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (procs > 1) {
		fprintf(stderr, "fakecuda: PZ_FAKECUDA_NCCL_PROCESSES=%llu: want 0 or 1\n", procs);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (ndev > MAX_DEVICES || mem == 0 || mem > (1ULL << 46)) {
		fprintf(stderr, "fakecuda: want 0-%d devices of 1 byte to 64 TiB, have %llu of %llu bytes\n",
			MAX_DEVICES, ndev, mem);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (sms == 0 || sms > MAX_SMS) {
		fprintf(stderr, "fakecuda: want 1-%d SMs a device, have %llu\n", MAX_SMS, sms);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (ndev == 0)
		return CUDA_ERROR_NO_DEVICE;
	g_ndev = (int)ndev;
	g_memory = (size_t)mem;
	g_delay_us = delay;
	g_sms = (unsigned)sms;
	g_nccl_timeout_ms = timeout;
	g_nccl_procs = (int)procs;
	for (int i = 0; i < g_ndev; i++) {
		g_ctx[i].device = i;
		g_ctx[i].sms = g_sms;
	}
	pools_init();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuInit(unsigned int flags)
{
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	if (atomic_load(&g_init) == -1)
		atomic_store(&g_init, configure());
	return unlock_with(atomic_load(&g_init));
}

/* Like the real driver, this one works before cuInit. */
EXPORT CUresult cuDriverGetVersion(int *version)
{
	if (version == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*version = DRIVER_VERSION;
	return CUDA_SUCCESS;
}

/* ---- Devices ---- */

static CUresult check_device(CUdevice dev)
{
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	return dev >= 0 && dev < g_ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (count == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*count = g_ndev;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	CUresult r = check_device(ordinal);
	if (r != CUDA_SUCCESS)
		return r;
	if (dev == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult r = check_device(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (name == NULL || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "pz fake GPU %d", dev);
	return CUDA_SUCCESS;
}

/* The UUID spells "pzfake", then a version-4 marker, then the ordinal. */
static CUresult device_uuid(CUuuid *uuid, CUdevice dev)
{
	static const unsigned char head[10] = {'p', 'z', 'f', 'a', 'k', 'e', 0x40, 0, 0x80, 0};
	CUresult r = check_device(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (uuid == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(uuid->bytes, head, sizeof head);
	for (int i = 0; i < 6; i++)
		uuid->bytes[15 - i] = (char)((unsigned long long)dev >> (8 * i));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return device_uuid(uuid, dev); }
EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return device_uuid(uuid, dev); }

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CUresult r = check_device(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (bytes == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = g_memory;
	return CUDA_SUCCESS;
}

/* attribute gives a plausible value (a small sm_90 part) or 0. */
static int attribute(int attr, CUdevice dev)
{
	switch (attr) {
	case 1: case 2: case 3: return 1024;    /* max threads per block, block dims x y */
	case 4: return 64;                      /* block dim z */
	case 5: return 2147483647;              /* grid dim x */
	case 6: case 7: return 65535;           /* grid dims y z */
	case 8: return 49152;                   /* shared memory per block */
	case 9: return 65536;                   /* constant memory */
	case 10: return 32;                     /* warp size */
	case 11: return 2147483647;             /* max pitch */
	case 12: case 82: return 65536;         /* registers per block, per SM */
	case 13: return 1755000;                /* clock rate, kHz */
	case 14: return 512;                    /* texture alignment */
	case 15: case 19: case 31: case 41: return 1; /* overlap, map host, concurrent kernels, UVA */
	case 16: return (int)g_sms;             /* multiprocessors (PZ_FAKECUDA_SMS) */
	case 33: return dev + 1;                /* PCI bus */
	case 36: return 2619000;                /* memory clock, kHz */
	case 37: return 5120;                   /* memory bus width */
	case 38: return 4 << 20;                /* L2 cache */
	case 39: return 2048;                   /* threads per SM */
	case 40: return 2;                      /* copy engines */
	case 75: return 9;                      /* compute capability major */
	case 81: return 233472;                 /* shared memory per SM */
	case 83: return 1;                      /* managed memory */
	case 97: return 232448;                 /* shared memory per block, opt-in */
	default: return 0;                      /* 76 (minor), PCI domain and device, and the rest */
	}
}

EXPORT CUresult cuDeviceGetAttribute(int *value, int attr, CUdevice dev)
{
	CUresult r = check_device(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (value == NULL || attr <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	*value = attribute(attr, dev);
	return CUDA_SUCCESS;
}

/* ---- Contexts: primary ones and green ones, current per thread ---- */

/*
 * A green context (cuGreenCtxCreate): the CUgreenCtx handle is the
 * struct, the CUcontext that cuCtxFromGreenCtx converts it to is its ctx.
 * It holds a reference to its device's primary context while alive
 * (ctx.refs == 1). Green contexts are never freed, only marked dead
 * (ctx.refs == 0), so that stale handles, and threads that still have a
 * destroyed one current, fail cleanly.
 */
struct fgreen {
	struct fgreen *next; /* in g_greens */
	struct fctx ctx;
};

static struct fgreen *g_greens;

/* green_find_locked returns green context h, alive or dead, or NULL. */
static struct fgreen *green_find_locked(CUgreenCtx h)
{
	for (struct fgreen *g = g_greens; g != NULL; g = g->next)
		if (g == h)
			return g;
	return NULL;
}

/* ctx_live returns c unless it is inactive or being torn down. */
static struct fctx *ctx_live(struct fctx *c)
{
	return c == NULL || c->refs == 0 || c->destroying ? NULL : c;
}

/*
 * ctx_lookup_locked returns live context h: an active primary context or
 * the CUcontext of a live green context; else NULL.
 */
static struct fctx *ctx_lookup_locked(CUcontext h)
{
	uintptr_t p = (uintptr_t)h, first = (uintptr_t)&g_ctx[0];
	if (p >= first && p < first + (uintptr_t)g_ndev * sizeof g_ctx[0] && (p - first) % sizeof g_ctx[0] == 0)
		return ctx_live(h);
	for (struct fgreen *g = g_greens; g != NULL; g = g->next)
		if (&g->ctx == h)
			return ctx_live(h);
	return NULL;
}

/*
 * lock_ctx locks g_mu and returns the calling thread's current context in
 * *pc. Without one it counts a refusal, unlocks and fails. A host function
 * (cuLaunchHostFunc) that calls the driver gets CUDA_ERROR_NOT_PERMITTED.
 */
static CUresult lock_ctx(struct fctx **pc)
{
	CUresult r = check_init();
	struct fctx *c = t_current;
	if (r != CUDA_SUCCESS)
		return r;
	if (t_in_host_fn) /* the driver's rule for host functions */
		return CUDA_ERROR_NOT_PERMITTED;
	pthread_mutex_lock(&g_mu);
	if (c == NULL || c->refs == 0 || c->destroying) {
		stat_add(ST_REFUSED, 1);
		return unlock_with(CUDA_ERROR_INVALID_CONTEXT);
	}
	*pc = c;
	return CUDA_SUCCESS;
}

static void ctx_destroy_locked(struct fctx *c);

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult r = check_device(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (pctx == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	while (g_ctx[dev].destroying)
		pthread_cond_wait(&g_cv, &g_mu);
	g_ctx[dev].refs++;
	*pctx = &g_ctx[dev];
	return unlock_with(CUDA_SUCCESS);
}

/* The last release destroys the context and everything made in it. */
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	CUresult r = check_device(dev);
	struct fctx *c;
	if (r != CUDA_SUCCESS)
		return r;
	c = &g_ctx[dev];
	pthread_mutex_lock(&g_mu);
	while (c->destroying)
		pthread_cond_wait(&g_cv, &g_mu);
	if (c->refs == 0)
		return unlock_with(CUDA_ERROR_INVALID_CONTEXT);
	if (--c->refs == 0)
		ctx_destroy_locked(c);
	return unlock_with(CUDA_SUCCESS);
}

/* ctx may be a primary context or one converted from a green context. */
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (ctx == NULL) {
		t_current = NULL;
		return CUDA_SUCCESS;
	}
	pthread_mutex_lock(&g_mu);
	if (ctx_lookup_locked(ctx) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_CONTEXT);
	t_current = ctx;
	return unlock_with(CUDA_SUCCESS);
}

/* ---- Device memory: a sorted table of allocations ---- */

struct pblock;

struct alloc {
	uintptr_t base; /* host address */
	size_t size;
	int device;
	struct pblock *blk; /* the pool block behind a cuMemAllocAsync allocation, else NULL */
	int pending;        /* cuMemAllocAsync: its stream has not reached the allocation yet */
	int freeing;        /* cuMemFreeAsync queued: a second free is an error */
};

static struct alloc *g_allocs;
static size_t g_nallocs, g_allocs_cap;

/* alloc_find_locked returns the index of the allocation holding host address a, or -1. */
static long alloc_find_locked(uintptr_t a)
{
	size_t lo = 0, hi = g_nallocs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (g_allocs[mid].base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || a - g_allocs[lo - 1].base >= g_allocs[lo - 1].size)
		return -1;
	return (long)(lo - 1);
}

static int alloc_insert_locked(struct alloc a)
{
	size_t i = 0;
	if (g_nallocs == g_allocs_cap) {
		size_t cap = g_allocs_cap ? 2 * g_allocs_cap : 64;
		struct alloc *t = realloc(g_allocs, cap * sizeof *t);
		if (t == NULL)
			return -1;
		g_allocs = t;
		g_allocs_cap = cap;
	}
	while (i < g_nallocs && g_allocs[i].base < a.base)
		i++;
	memmove(&g_allocs[i + 1], &g_allocs[i], (g_nallocs - i) * sizeof g_allocs[0]);
	g_allocs[i] = a;
	g_nallocs++;
	return 0;
}

static void pool_put_locked(struct pblock *b);

/*
 * alloc_remove_locked frees allocation i and forgets it; the block of a
 * pool allocation goes back to its pool.
 */
static void alloc_remove_locked(size_t i)
{
	struct alloc a = g_allocs[i];
	stat_add(ST_ALLOCS, -1);
	stat_add(ST_BYTES, -(long long)a.size);
	memmove(&g_allocs[i], &g_allocs[i + 1], (g_nallocs - i - 1) * sizeof g_allocs[0]);
	g_nallocs--;
	if (a.blk != NULL) {
		pool_put_locked(a.blk);
		return;
	}
	g_ctx[a.device].used -= a.size;
	free((void *)a.base);
}

/*
 * dev_range_locked returns the host address of device range [d, d+n),
 * which must lie in one live allocation of device dev, or NULL.
 */
static char *dev_range_locked(int dev, CUdeviceptr d, size_t n)
{
	uintptr_t a = (uintptr_t)(d ^ DEV_TAG);
	long i = alloc_find_locked(a);
	if (i < 0 || g_allocs[i].device != dev || n > g_allocs[i].size - (a - g_allocs[i].base))
		return NULL;
	return (char *)a;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n)
{
	struct fctx *c;
	CUresult r = lock_ctx(&c);
	void *p;
	if (r != CUDA_SUCCESS)
		return r;
	if (dptr == NULL || n == 0)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	c = PRIMARY(c); /* memory is the device's, whichever context allocates it */
	if (n > g_memory - c->used)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	p = aligned_alloc(DEV_ALIGN, (n + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN);
	if (p == NULL || alloc_insert_locked((struct alloc){.base = (uintptr_t)p, .size = n, .device = c->device}) != 0) {
		free(p);
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	}
	memset(p, UNWRITTEN, n);
	c->used += n;
	stat_add(ST_ALLOCS, 1);
	stat_add(ST_BYTES, (long long)n);
	*dptr = (CUdeviceptr)(uintptr_t)p ^ DEV_TAG;
	return unlock_with(CUDA_SUCCESS);
}

static void drain_locked(struct fctx *c, int blocking_only);

/* Like cudaFree, cuMemFree waits for the context's streams first. */
EXPORT CUresult cuMemFree_v2(CUdeviceptr d)
{
	struct fctx *c;
	CUresult r = lock_ctx(&c);
	uintptr_t a = (uintptr_t)(d ^ DEV_TAG);
	long i;
	if (r != CUDA_SUCCESS)
		return r;
	i = alloc_find_locked(a);
	if (i < 0 || g_allocs[i].base != a || g_allocs[i].device != c->device)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	drain_locked(c, 0);
	i = alloc_find_locked(a); /* freed by another thread meanwhile? */
	if (i < 0 || g_allocs[i].base != a)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	alloc_remove_locked((size_t)i);
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	struct fctx *c;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (free_bytes == NULL || total == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	*free_bytes = g_memory - PRIMARY(c)->used;
	*total = g_memory;
	return unlock_with(CUDA_SUCCESS);
}

/*
 * ---- Memory pools: each device's default pool (cuMemAllocAsync) ----
 *
 * A pool hands out blocks of device memory and keeps the blocks freed to
 * it (cached) up to its release threshold. Every block, outstanding or
 * cached, is reserved: it counts against the device's memory (fctx.used),
 * so that cuMemGetInfo shows it, until the pool releases it. The real
 * driver releases memory above the threshold at the next synchronization;
 * this one does when the free is reached, and when the threshold is set.
 */

struct pblock {
	struct pblock *next; /* in the pool's cached list */
	struct fpool *pool;
	uintptr_t base;
	size_t cap;
};

struct fpool {
	int device;
	int reuse[3]; /* CU_MEMPOOL_ATTR_REUSE_*: kept, not acted on */
	unsigned long long threshold;
	unsigned long long reserved, reserved_high, used, used_high;
	struct pblock *cached;
};

static struct fpool g_pools[MAX_DEVICES];

static void pool_reset_locked(struct fpool *p, int dev)
{
	*p = (struct fpool){.device = dev, .reuse = {1, 1, 1}};
}

static void pools_init(void)
{
	for (int i = 0; i < g_ndev; i++)
		pool_reset_locked(&g_pools[i], i);
}

/* pool_lookup returns pool handle h, or NULL if it is none. */
static struct fpool *pool_lookup(CUmemoryPool h)
{
	uintptr_t p = (uintptr_t)h, first = (uintptr_t)&g_pools[0];
	if (p < first || p >= first + (uintptr_t)g_ndev * sizeof g_pools[0] || (p - first) % sizeof g_pools[0] != 0)
		return NULL;
	return h;
}

static void pool_release_block_locked(struct fpool *p, struct pblock **pp)
{
	struct pblock *b = *pp;
	*pp = b->next;
	p->reserved -= b->cap;
	g_ctx[p->device].used -= b->cap;
	free((void *)b->base);
	free(b);
}

/* pool_trim_locked releases cached blocks while more than keep bytes stay reserved. */
static void pool_trim_locked(struct fpool *p, unsigned long long keep)
{
	while (p->cached != NULL && p->reserved > keep)
		pool_release_block_locked(p, &p->cached);
}

/*
 * pool_trim_to_locked is cuMemPoolTrimTo: it releases cached blocks as
 * long as at least keep bytes stay reserved.
 */
static void pool_trim_to_locked(struct fpool *p, unsigned long long keep)
{
	for (struct pblock **pp = &p->cached; *pp != NULL;) {
		if (p->reserved - (*pp)->cap >= keep)
			pool_release_block_locked(p, pp);
		else
			pp = &(*pp)->next;
	}
}

/* pool_put_locked takes back a block whose allocation was freed. */
static void pool_put_locked(struct pblock *b)
{
	struct fpool *p = b->pool;
	p->used -= b->cap;
	b->next = p->cached;
	p->cached = b;
	pool_trim_locked(p, p->threshold);
}

/*
 * pool_take_locked returns a block of at least n bytes for context c: the
 * smallest cached one that fits, else a new one (fresh memory holds
 * UNWRITTEN), releasing the cached blocks first if the device is short of
 * memory. NULL if the device has no room.
 */
static struct pblock *pool_take_locked(struct fpool *p, struct fctx *c, size_t n)
{
	struct pblock **best = NULL, *b;
	size_t cap;
	if (n > g_memory)
		return NULL;
	cap = (n + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN;
	for (struct pblock **pp = &p->cached; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->cap >= n && (best == NULL || (*pp)->cap < (*best)->cap))
			best = pp;
	if (best != NULL) {
		b = *best;
		*best = b->next;
	} else {
		if (cap > g_memory - c->used)
			pool_trim_locked(p, 0);
		if (cap > g_memory - c->used || (b = calloc(1, sizeof *b)) == NULL)
			return NULL;
		if ((b->base = (uintptr_t)aligned_alloc(DEV_ALIGN, cap)) == 0) {
			free(b);
			return NULL;
		}
		memset((void *)b->base, UNWRITTEN, cap);
		b->pool = p;
		b->cap = cap;
		c->used += cap;
		p->reserved += cap;
		if (p->reserved > p->reserved_high)
			p->reserved_high = p->reserved;
	}
	b->next = NULL;
	p->used += b->cap;
	if (p->used > p->used_high)
		p->used_high = p->used;
	return b;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
	CUresult r = check_device(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (pool == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*pool = &g_pools[dev];
	return CUDA_SUCCESS;
}

/* lock_pool is check_init and the lookup of h, then g_mu. */
static CUresult lock_pool(CUmemoryPool h, struct fpool **pp)
{
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if ((*pp = pool_lookup(h)) == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	return CUDA_SUCCESS;
}

/*
 * The reuse policies are ints, the rest cuuint64_t. The current amounts
 * cannot be set; the high watermarks can only be reset, with 0.
 */
EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool h, int attr, void *value)
{
	struct fpool *p;
	unsigned long long v;
	CUresult r = lock_pool(h, &p);
	if (r != CUDA_SUCCESS)
		return r;
	if (value == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		p->reuse[attr - 1] = *(int *)value != 0;
		return unlock_with(CUDA_SUCCESS);
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		p->threshold = *(unsigned long long *)value;
		pool_trim_locked(p, p->threshold);
		return unlock_with(CUDA_SUCCESS);
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		if ((v = *(unsigned long long *)value) != 0)
			return unlock_with(CUDA_ERROR_INVALID_VALUE);
		if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
			p->reserved_high = p->reserved;
		else
			p->used_high = p->used;
		return unlock_with(CUDA_SUCCESS);
	}
	return unlock_with(CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool h, int attr, void *value)
{
	struct fpool *p;
	unsigned long long v;
	CUresult r = lock_pool(h, &p);
	if (r != CUDA_SUCCESS)
		return r;
	if (value == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		*(int *)value = p->reuse[attr - 1];
		return unlock_with(CUDA_SUCCESS);
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->threshold; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = p->reserved_high; break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v = p->used_high; break;
	default: return unlock_with(CUDA_ERROR_INVALID_VALUE);
	}
	*(unsigned long long *)value = v;
	return unlock_with(CUDA_SUCCESS);
}

/* Outstanding allocations, and frees not reached yet, keep their blocks. */
EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool h, size_t keep)
{
	struct fpool *p;
	CUresult r = lock_pool(h, &p);
	if (r != CUDA_SUCCESS)
		return r;
	pool_trim_to_locked(p, keep);
	return unlock_with(CUDA_SUCCESS);
}

/* ---- Pinned host memory: cuMemAllocHost and registered ranges ---- */

enum { PIN_ALLOCATED = 1, PIN_REGISTERED = 2 };

struct pinned {
	struct pinned *next;
	uintptr_t base;
	size_t size;
	int kind;
	struct fctx *ctx;
	unsigned flags; /* cuMemHostAlloc's or cuMemHostRegister's */
};

static struct pinned *g_pinned;

/* pinned_holds_locked reports whether [p, p+n) lies in one pinned range. */
static int pinned_holds_locked(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	for (struct pinned *x = g_pinned; x != NULL; x = x->next)
		if (a >= x->base && a - x->base < x->size && n <= x->size - (a - x->base))
			return 1;
	return 0;
}

/* pinned_find_locked returns the pinned range holding address a, or NULL. */
static struct pinned *pinned_find_locked(uintptr_t a)
{
	for (struct pinned *x = g_pinned; x != NULL; x = x->next)
		if (a >= x->base && a - x->base < x->size)
			return x;
	return NULL;
}

/*
 * mapped_range_locked returns [a, a+n) if it lies in host memory that
 * cuMemHostAlloc mapped into the devices' address space
 * (CU_MEMHOSTALLOC_DEVICEMAP), whose device address is its host address
 * as under unified addressing; else NULL. Memory from cuMemAllocHost or
 * cuMemHostRegister is not mapped here.
 */
static char *mapped_range_locked(uintptr_t a, size_t n)
{
	struct pinned *x = pinned_find_locked(a);
	if (x == NULL || x->kind != PIN_ALLOCATED || !(x->flags & CU_MEMHOSTALLOC_DEVICEMAP) ||
	    n > x->size - (a - x->base))
		return NULL;
	return (char *)a;
}

static int pinned_overlaps_locked(uintptr_t a, size_t n)
{
	for (struct pinned *x = g_pinned; x != NULL; x = x->next)
		if (a < x->base + x->size && x->base < a + n)
			return 1;
	return 0;
}

/* pinned_take_locked unlinks and returns the range starting at base of that kind. */
static struct pinned *pinned_take_locked(uintptr_t base, int kind)
{
	for (struct pinned **pp = &g_pinned; *pp != NULL; pp = &(*pp)->next) {
		struct pinned *x = *pp;
		if (x->base == base && x->kind == kind) {
			*pp = x->next;
			return x;
		}
	}
	return NULL;
}

static CUresult pin_locked(struct fctx *c, void *p, size_t n, int kind, unsigned flags)
{
	struct pinned *x = malloc(sizeof *x);
	if (x == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*x = (struct pinned){g_pinned, (uintptr_t)p, n, kind, PRIMARY(c), flags};
	g_pinned = x;
	return CUDA_SUCCESS;
}

static CUresult alloc_host(void **pp, size_t n, unsigned flags)
{
	struct fctx *c;
	CUresult r = lock_ctx(&c);
	void *p;
	if (r != CUDA_SUCCESS)
		return r;
	if (pp == NULL || n == 0 || n > SIZE_MAX - HOST_ALIGN ||
	    (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)))
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	p = aligned_alloc(HOST_ALIGN, (n + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN);
	if (p == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	if ((r = pin_locked(c, p, n, PIN_ALLOCATED, flags)) != CUDA_SUCCESS) {
		free(p);
		return unlock_with(r);
	}
	*pp = p;
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t n)
{
	return alloc_host(pp, n, 0);
}

/*
 * cuMemHostAlloc is cuMemAllocHost with flags. Every context here sees
 * all pinned memory, so CU_MEMHOSTALLOC_PORTABLE changes nothing;
 * CU_MEMHOSTALLOC_DEVICEMAP lets kernels use the memory at its host
 * address (mapped_range_locked); CU_MEMHOSTALLOC_WRITECOMBINED is
 * accepted. Other bits are invalid.
 */
EXPORT CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags)
{
	return alloc_host(pp, n, flags);
}

/* Freeing pinned memory waits for the streams that may still copy it. */
EXPORT CUresult cuMemFreeHost(void *p)
{
	struct fctx *c;
	CUresult r = lock_ctx(&c);
	struct pinned *x;
	if (r != CUDA_SUCCESS)
		return r;
	drain_locked(c, 0);
	if ((x = pinned_take_locked((uintptr_t)p, PIN_ALLOCATED)) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	free(p);
	free(x);
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags)
{
	struct fctx *c;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (p == NULL || n == 0 || (uintptr_t)p > UINTPTR_MAX - n)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if (pinned_overlaps_locked((uintptr_t)p, n))
		return unlock_with(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	return unlock_with(pin_locked(c, p, n, PIN_REGISTERED, flags));
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
	struct fctx *c;
	CUresult r = lock_ctx(&c);
	struct pinned *x;
	if (r != CUDA_SUCCESS)
		return r;
	drain_locked(c, 0);
	if ((x = pinned_take_locked((uintptr_t)p, PIN_REGISTERED)) == NULL)
		return unlock_with(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	free(x);
	return unlock_with(CUDA_SUCCESS);
}

/* ---- Operations: what streams run ---- */

enum op_kind { OP_COPY, OP_MEMSET, OP_KERNEL, OP_RECORD, OP_WAIT, OP_LIB, OP_ALLOC, OP_FREE, OP_HOST_FN, OP_NCCL, OP_P2P };

struct kexec;
struct kernel {
	const char *name;
	int nargs; /* each passed in an 8-byte slot */
	CUresult (*run)(const struct kexec *);
};

/* A copy of height rows of width bytes; a 1D copy has one row. */
struct copy {
	char *dst;
	const char *src;
	size_t dpitch, spitch, width, height;
};

/* A device matrix of a library call: rows x cols, column-major, leading dimension ld. */
struct devmat {
	CUdeviceptr p;
	size_t rows, cols, ld;
};

enum lib_op { LIB_GEMM, LIB_SYRK, LIB_TRSM, LIB_POTRF };

/*
 * A cuBLAS or cuSOLVER operation, with its scalars read at call time.
 * Matrices a, b, c are A, B, C; for potrf, A, the workspace and devInfo.
 */
struct libjob {
	enum lib_op op;
	int f32, dev;
	int ta, tb, uplo, side, diag; /* transposes as 0/1 */
	size_t m, n, k;
	double alpha, beta;
	struct devmat a, b, c;
};

struct fcomm;

/* One rank's part of an NCCL collective: what it passed (see the NCCL section). */
struct collarg {
	int kind;             /* enum coll_kind */
	int dtype, redop, root;
	size_t count;         /* count, sendcount or recvcount, as passed */
	CUdeviceptr send, recv;
};

/* One rank's ncclSend or ncclRecv: what it passed (see the NCCL section). */
struct p2parg {
	struct fcomm *comm;
	int recv;             /* 0: ncclSend, 1: ncclRecv */
	int peer, dtype;
	size_t count;
	CUdeviceptr buf;
	unsigned long long seq; /* of the messages from sender to receiver */
};

struct op {
	struct op *next;
	enum op_kind kind;
	union {
		struct copy copy;
		struct { char *dst; size_t n; unsigned char value; } set;
		struct { const struct kernel *k; int dev; unsigned long long threads, args[MAX_ARGS]; } kern;
		struct { struct fevent *e; unsigned long long seq; } ev;
		struct libjob lib;
		uintptr_t base; /* OP_ALLOC, OP_FREE: the allocation's host address */
		struct { CUhostFn fn; void *data; } host;
		struct { struct fcomm *comm; unsigned long long seq; struct collarg a; } nccl; /* the comm's seq-th collective */
		struct { struct p2parg *v; size_t n, cap; } p2p; /* sends and receives that progress together */
	} u;
};

/* An event: the latest record, and the latest record that a stream reached. */
struct fevent {
	struct fevent *next;
	struct fctx *ctx;
	unsigned flags;
	unsigned long long recorded, completed;
	struct timespec when; /* when `completed` was reached */
	CUresult err;         /* the sticky error of the stream that reached it */
	int refs;             /* the handle and queued operations */
};

static struct fevent *g_events; /* live handles */

static void event_unref_locked(struct fevent *e)
{
	if (--e->refs == 0)
		free(e);
}

/* event_complete_locked marks record seq of e reached, with the stream's error. */
static void event_complete_locked(struct fevent *e, unsigned long long seq, CUresult err)
{
	if (seq <= e->completed)
		return;
	e->completed = seq;
	e->err = err;
	clock_gettime(CLOCK_MONOTONIC, &e->when);
	pthread_cond_broadcast(&g_cv);
}

static struct op *op_new(enum op_kind kind)
{
	struct op *o = calloc(1, sizeof *o);
	if (o != NULL)
		o->kind = kind;
	return o;
}

static void op_free_locked(struct op *o)
{
	if (o->kind == OP_RECORD || o->kind == OP_WAIT)
		event_unref_locked(o->u.ev.e);
	if (o->kind == OP_P2P)
		free(o->u.p2p.v);
	free(o);
}

static void run_copy(const struct copy *c)
{
	for (size_t r = 0; r < c->height; r++)
		memmove(c->dst + r * c->dpitch, c->src + r * c->spitch, c->width);
}

static CUresult run_kernel(struct op *o);
static CUresult run_lib(const struct libjob *j);
static CUresult run_nccl(struct op *o, CUresult err);
static CUresult run_p2p(struct op *o, CUresult err);

/* alloc_reached marks the allocation at base made: its stream has reached cuMemAllocAsync. */
static void alloc_reached(uintptr_t base)
{
	long i;
	pthread_mutex_lock(&g_mu);
	if ((i = alloc_find_locked(base)) >= 0 && g_allocs[i].base == base)
		g_allocs[i].pending = 0;
	pthread_mutex_unlock(&g_mu);
}

/* free_reached frees the allocation at base: its stream has reached cuMemFreeAsync. */
static void free_reached(uintptr_t base)
{
	long i;
	pthread_mutex_lock(&g_mu);
	if ((i = alloc_find_locked(base)) >= 0 && g_allocs[i].base == base && g_allocs[i].freeing)
		alloc_remove_locked((size_t)i);
	pthread_mutex_unlock(&g_mu);
}

static void *host_fn_main(void *arg)
{
	struct op *o = arg;
	t_in_host_fn = 1;
	o->u.host.fn(o->u.host.data);
	t_in_host_fn = 0;
	return NULL;
}

/*
 * run_host_fn calls a cuLaunchHostFunc function as the driver does, on a
 * thread of the driver's: the stream's own, or for the default stream
 * (run in the caller) a thread made for the call, which the caller joins.
 */
static CUresult run_host_fn(struct op *o)
{
	pthread_t t;
	if (t_stream_thread) {
		host_fn_main(o);
		return CUDA_SUCCESS;
	}
	if (pthread_create(&t, NULL, host_fn_main, o) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_join(t, NULL);
	return CUDA_SUCCESS;
}

/*
 * run_op runs o without g_mu held. err is the sticky error of the stream
 * it runs on: after a failure, only event records still complete, and
 * NCCL collectives, sends and receives, which only tell their peers that
 * this rank failed.
 */
static CUresult run_op(struct op *o, CUresult err)
{
	if (err != CUDA_SUCCESS && o->kind != OP_RECORD && o->kind != OP_NCCL && o->kind != OP_P2P) /* tell the peers */
		return CUDA_SUCCESS;
	switch (o->kind) {
	case OP_COPY:
		run_copy(&o->u.copy);
		break;
	case OP_MEMSET:
		memset(o->u.set.dst, o->u.set.value, o->u.set.n);
		break;
	case OP_KERNEL:
		return run_kernel(o);
	case OP_LIB:
		return run_lib(&o->u.lib);
	case OP_RECORD:
		pthread_mutex_lock(&g_mu);
		event_complete_locked(o->u.ev.e, o->u.ev.seq, err);
		pthread_mutex_unlock(&g_mu);
		break;
	case OP_WAIT:
		pthread_mutex_lock(&g_mu);
		while (o->u.ev.e->completed < o->u.ev.seq)
			pthread_cond_wait(&g_cv, &g_mu);
		pthread_mutex_unlock(&g_mu);
		break;
	case OP_ALLOC:
		alloc_reached(o->u.base);
		break;
	case OP_FREE:
		free_reached(o->u.base);
		break;
	case OP_HOST_FN:
		return run_host_fn(o);
	case OP_NCCL:
		return run_nccl(o, err);
	case OP_P2P:
		return run_p2p(o, err);
	}
	return CUDA_SUCCESS;
}

/* ---- Streams: a FIFO of operations run by a thread of its own ---- */

struct fstream {
	struct fstream *next; /* in g_streams until its thread exits */
	struct fctx *ctx;
	unsigned flags;
	struct op *head, *tail;
	unsigned long pending; /* operations queued or running */
	CUresult err;          /* sticky error */
	int refs;              /* the handle, the thread, and waiters */
	int dead;              /* destroyed: the thread exits once drained */
	int detached;          /* its green context was destroyed: only cuStreamDestroy works */
	unsigned sms;          /* SMs of its context: what its kernels run on */
};

static struct fstream *g_streams;

static void stream_unref_locked(struct fstream *s)
{
	if (--s->refs == 0)
		free(s);
}

static void stream_unlink_locked(struct fstream *s)
{
	for (struct fstream **pp = &g_streams; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			return;
		}
}

/* stream_wait_locked waits until s has run everything queued; returns its sticky error. */
static CUresult stream_wait_locked(struct fstream *s)
{
	CUresult r;
	s->refs++;
	while (s->pending > 0)
		pthread_cond_wait(&g_cv, &g_mu);
	r = s->err;
	stream_unref_locked(s);
	return r;
}

/*
 * ctx_covers reports whether work of c includes stream s: its own
 * streams and, for a primary context, those of the device's green
 * contexts (cuCtxSynchronize on a primary context waits for them too).
 */
static int ctx_covers(const struct fctx *c, const struct fstream *s)
{
	return s->ctx == c || (!c->green && s->ctx->device == c->device);
}

/*
 * drain_locked waits until no stream that c covers (no blocking one, if
 * blocking_only: what the legacy default stream waits for) has work.
 */
static void drain_locked(struct fctx *c, int blocking_only)
{
	for (;;) {
		struct fstream *s = g_streams;
		while (s != NULL && !(ctx_covers(c, s) && s->pending > 0 &&
				      !(blocking_only && (s->flags & CU_STREAM_NON_BLOCKING))))
			s = s->next;
		if (s == NULL)
			return;
		stream_wait_locked(s);
	}
}

static void pause_before_op(void)
{
	struct timespec ts = {(time_t)(g_delay_us / 1000000), (long)(g_delay_us % 1000000) * 1000};
	while (g_delay_us > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void *stream_main(void *arg)
{
	struct fstream *s = arg;
	t_stream_thread = 1;
	pthread_mutex_lock(&g_mu);
	for (;;) {
		struct op *o;
		CUresult err, r;
		while (s->head == NULL && !s->dead)
			pthread_cond_wait(&g_cv, &g_mu);
		if ((o = s->head) == NULL)
			break;
		err = s->err;
		pthread_mutex_unlock(&g_mu);
		pause_before_op();
		r = run_op(o, err);
		pthread_mutex_lock(&g_mu);
		if ((s->head = o->next) == NULL)
			s->tail = NULL;
		s->pending--;
		if (r != CUDA_SUCCESS && s->err == CUDA_SUCCESS)
			s->err = r;
		op_free_locked(o);
		pthread_cond_broadcast(&g_cv);
	}
	stream_unlink_locked(s);
	stream_unref_locked(s);
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_mu);
	return NULL;
}

/*
 * resolve_stream_locked finds stream handle h of context c: NULL in *ps
 * for the default stream (0, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD).
 * A stream whose green context was destroyed is refused with
 * CUDA_ERROR_STREAM_DETACHED, as the driver documents.
 */
static CUresult resolve_stream_locked(struct fctx *c, CUstream h, struct fstream **ps)
{
	*ps = NULL;
	if ((uintptr_t)h <= 2)
		return CUDA_SUCCESS;
	for (struct fstream *s = g_streams; s != NULL; s = s->next)
		if (s == h && !s->dead) {
			*ps = s;
			if (s->detached)
				return CUDA_ERROR_STREAM_DETACHED;
			return s->ctx == c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
		}
	return CUDA_ERROR_INVALID_HANDLE;
}

/*
 * submit_locked queues o on s, or runs it in the caller: on the default
 * stream (after the blocking streams), or when now is set (after s has
 * drained: a copy staged through pageable memory). Returns the result
 * of running it, or the sticky error that prevented it.
 */
static CUresult submit_locked(struct fctx *c, struct fstream *s, struct op *o, int now)
{
	CUresult sticky, r;
	int kernel = o->kind == OP_KERNEL || o->kind == OP_LIB || o->kind == OP_NCCL || o->kind == OP_P2P;
	if (s != NULL && !now) {
		if (s->tail != NULL)
			s->tail->next = o;
		else
			s->head = o;
		s->tail = o;
		s->pending++;
		pthread_cond_broadcast(&g_cv);
		return CUDA_SUCCESS;
	}
	if (s != NULL) {
		sticky = stream_wait_locked(s);
	} else {
		drain_locked(c, 1);
		sticky = c->sticky;
	}
	pthread_mutex_unlock(&g_mu);
	r = run_op(o, sticky);
	pthread_mutex_lock(&g_mu);
	op_free_locked(o);
	if (sticky != CUDA_SUCCESS)
		return sticky;
	if (kernel && r != CUDA_SUCCESS) { /* a kernel's fault is asynchronous */
		c->sticky = r;
		return CUDA_SUCCESS;
	}
	return r;
}

/*
 * stream_create_locked makes a stream of c, whose kernels run on c's
 * SMs (a green context's share when c was converted from one), and
 * starts its thread.
 */
static CUresult stream_create_locked(struct fctx *c, unsigned flags, CUstream *ps)
{
	struct fstream *s;
	pthread_attr_t attr;
	pthread_t t;
	int failed;
	if ((s = calloc(1, sizeof *s)) == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*s = (struct fstream){.next = g_streams, .ctx = c, .flags = flags, .refs = 2, .sms = c->sms};
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	failed = pthread_create(&t, &attr, stream_main, s);
	pthread_attr_destroy(&attr);
	if (failed) {
		free(s);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	g_streams = s;
	*ps = s;
	return CUDA_SUCCESS;
}

/*
 * A stream created while a context converted from a green context is
 * current belongs to that green context (cuStreamGetGreenCtx's
 * documentation): its kernels run on the green context's SMs.
 */
EXPORT CUresult cuStreamCreate(CUstream *ps, unsigned int flags)
{
	struct fctx *c;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (ps == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	return unlock_with(stream_create_locked(c, flags, ps));
}

static void stream_destroy_locked(struct fstream *s)
{
	s->dead = 1;
	stream_unref_locked(s);
	pthread_cond_broadcast(&g_cv);
}

/*
 * Queued work still runs; the stream goes away when it is done. A stream
 * detached from its destroyed green context can only be destroyed, which
 * needs no current context (the stream's own is gone).
 */
EXPORT CUresult cuStreamDestroy_v2(CUstream h)
{
	struct fctx *c;
	struct fstream *s;
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!t_in_host_fn && (uintptr_t)h > 2) {
		pthread_mutex_lock(&g_mu);
		for (s = g_streams; s != NULL; s = s->next)
			if (s == h && !s->dead && s->detached) {
				stream_destroy_locked(s);
				return unlock_with(CUDA_SUCCESS);
			}
		pthread_mutex_unlock(&g_mu);
	}
	if ((r = lock_ctx(&c)) != CUDA_SUCCESS)
		return r;
	if ((r = resolve_stream_locked(c, h, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (s == NULL)
		return unlock_with(CUDA_ERROR_INVALID_HANDLE);
	stream_destroy_locked(s);
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamSynchronize(CUstream h)
{
	struct fctx *c;
	struct fstream *s;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = resolve_stream_locked(c, h, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (s == NULL) {
		drain_locked(c, 1);
		return unlock_with(c->sticky);
	}
	return unlock_with(stream_wait_locked(s));
}

EXPORT CUresult cuStreamQuery(CUstream h)
{
	struct fctx *c;
	struct fstream *s;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = resolve_stream_locked(c, h, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (s == NULL)
		return unlock_with(c->sticky);
	if (s->err != CUDA_SUCCESS)
		return unlock_with(s->err);
	return unlock_with(s->pending > 0 ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS);
}

/*
 * cuCtxSynchronize waits for every stream of the context (of a primary
 * context: also those of the device's green contexts, as documented);
 * any sticky error poisons it.
 */
EXPORT CUresult cuCtxSynchronize(void)
{
	struct fctx *c;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	drain_locked(c, 0);
	r = c->sticky;
	for (struct fstream *s = g_streams; s != NULL && r == CUDA_SUCCESS; s = s->next)
		if (ctx_covers(c, s) && !s->detached)
			r = s->err;
	return unlock_with(r);
}

/* ---- Copies and memset ---- */

enum side { HOST, DEVICE };

/* translate_locked checks one side of a copy of n bytes and returns its host address. */
static CUresult translate_locked(struct fctx *c, enum side side, uintptr_t a, size_t n, char **out)
{
	*out = side == HOST ? (char *)a : dev_range_locked(c->device, a, n);
	return *out == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static void count_copy(enum side dst, enum side src)
{
	if (src == HOST && dst == DEVICE)
		stat_add(ST_HTOD, 1);
	if (src == DEVICE && dst == HOST)
		stat_add(ST_DTOH, 1);
}

/*
 * copy1d implements the 1D copies. Synchronous ones (async false) run on
 * the default stream; asynchronous ones with a pageable host side are
 * staged: they wait for the stream and complete before returning.
 */
static CUresult copy1d(enum side dk, uintptr_t dst, enum side sk, uintptr_t src, size_t n, CUstream h, int async)
{
	struct fctx *c;
	struct fstream *s = NULL;
	struct op *o;
	char *d, *p;
	int staged;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (async && (r = resolve_stream_locked(c, h, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (n == 0)
		return unlock_with(CUDA_SUCCESS);
	if ((r = translate_locked(c, dk, dst, n, &d)) != CUDA_SUCCESS ||
	    (r = translate_locked(c, sk, src, n, &p)) != CUDA_SUCCESS)
		return unlock_with(r);
	staged = (dk == HOST && !pinned_holds_locked(d, n)) || (sk == HOST && !pinned_holds_locked(p, n));
	if ((o = op_new(OP_COPY)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	o->u.copy = (struct copy){d, p, n, n, n, 1};
	count_copy(dk, sk);
	return unlock_with(submit_locked(c, s, o, staged));
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	return copy1d(DEVICE, dst, HOST, (uintptr_t)src, n, NULL, 0);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	return copy1d(HOST, (uintptr_t)dst, DEVICE, src, n, NULL, 0);
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy1d(DEVICE, dst, DEVICE, src, n, NULL, 0);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h)
{
	return copy1d(DEVICE, dst, HOST, (uintptr_t)src, n, h, 1);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream h)
{
	return copy1d(HOST, (uintptr_t)dst, DEVICE, src, n, h, 1);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h)
{
	return copy1d(DEVICE, dst, DEVICE, src, n, h, 1);
}

static CUresult memset_d8(CUdeviceptr dst, unsigned char v, size_t n, CUstream h, int async)
{
	struct fctx *c;
	struct fstream *s = NULL;
	struct op *o;
	char *d;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (async && (r = resolve_stream_locked(c, h, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (n == 0)
		return unlock_with(CUDA_SUCCESS);
	if ((r = translate_locked(c, DEVICE, dst, n, &d)) != CUDA_SUCCESS)
		return unlock_with(r);
	if ((o = op_new(OP_MEMSET)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	o->u.set.dst = d;
	o->u.set.n = n;
	o->u.set.value = v;
	return unlock_with(submit_locked(c, s, o, 0));
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n)
{
	return memset_d8(dst, v, n, NULL, 0);
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream h)
{
	return memset_d8(dst, v, n, h, 1);
}

/* ---- 2D copies (CUDA_MEMCPY2D) ---- */

/*
 * side2d_locked checks one side of a 2D copy: rows start at base +
 * (y+r)*pitch + x. It returns the first row's host address and whether
 * the side is host memory. A unified pointer is device memory when it
 * carries DEV_TAG, else host memory.
 */
static CUresult side2d_locked(struct fctx *c, int type, const void *host, CUdeviceptr dev, size_t x, size_t y,
			      size_t pitch, const CUDA_MEMCPY2D *p, char **out, enum side *side)
{
	size_t off, span;
	if (pitch < p->WidthInBytes || __builtin_mul_overflow(y, pitch, &off) ||
	    __builtin_add_overflow(off, x, &off) || __builtin_mul_overflow(p->Height - 1, pitch, &span) ||
	    __builtin_add_overflow(span, p->WidthInBytes, &span))
		return CUDA_ERROR_INVALID_VALUE;
	*side = HOST;
	switch (type) {
	case CU_MEMORYTYPE_HOST:
		*out = host == NULL ? NULL : (char *)host + off;
		break;
	case CU_MEMORYTYPE_UNIFIED:
		if ((dev & DEV_TAG_MASK) == DEV_TAG) { /* a device address, live or not */
			*out = dev_range_locked(c->device, dev + off, span);
			*side = DEVICE;
		} else {
			*out = dev == 0 ? NULL : (char *)(uintptr_t)dev + off;
		}
		break;
	case CU_MEMORYTYPE_DEVICE:
		*out = dev_range_locked(c->device, dev + off, span);
		*side = DEVICE;
		break;
	default: /* CU_MEMORYTYPE_ARRAY: CUDA arrays are not supported */
		*out = NULL;
	}
	return *out == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* host_span_pinned reports whether a host side of a 2D copy is pinned. */
static int host_span_pinned_locked(const char *first, size_t pitch, const CUDA_MEMCPY2D *p)
{
	return pinned_holds_locked(first, (p->Height - 1) * pitch + p->WidthInBytes);
}

static CUresult copy2d(const CUDA_MEMCPY2D *p, CUstream h, int async)
{
	struct fctx *c;
	struct fstream *s = NULL;
	struct op *o;
	char *d, *src;
	enum side dk, sk;
	int staged;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (p == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if (async && (r = resolve_stream_locked(c, h, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (p->WidthInBytes == 0 || p->Height == 0)
		return unlock_with(CUDA_SUCCESS);
	if ((r = side2d_locked(c, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY,
			       p->dstPitch, p, &d, &dk)) != CUDA_SUCCESS ||
	    (r = side2d_locked(c, p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY,
			       p->srcPitch, p, &src, &sk)) != CUDA_SUCCESS)
		return unlock_with(r);
	staged = (dk == HOST && !host_span_pinned_locked(d, p->dstPitch, p)) ||
		 (sk == HOST && !host_span_pinned_locked(src, p->srcPitch, p));
	if ((o = op_new(OP_COPY)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	o->u.copy = (struct copy){d, src, p->dstPitch, p->srcPitch, p->WidthInBytes, p->Height};
	count_copy(dk, sk);
	return unlock_with(submit_locked(c, s, o, staged));
}

EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{
	return copy2d(p, NULL, 0);
}

EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream h)
{
	return copy2d(p, h, 1);
}

/* ---- Events ---- */

/* find_event_locked returns live event h, or NULL. */
static struct fevent *find_event_locked(CUevent h)
{
	for (struct fevent *e = g_events; e != NULL; e = e->next)
		if (e == h)
			return e;
	return NULL;
}

static void event_unlink_locked(struct fevent *e)
{
	for (struct fevent **pp = &g_events; *pp != NULL; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			return;
		}
}

/* lock_event is lock_ctx, then the lookup of h. */
static CUresult lock_event(CUevent h, struct fctx **pc, struct fevent **pe)
{
	CUresult r = lock_ctx(pc);
	if (r != CUDA_SUCCESS)
		return r;
	if ((*pe = find_event_locked(h)) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_HANDLE);
	return CUDA_SUCCESS;
}

static int event_done_locked(const struct fevent *e)
{
	return e->completed >= e->recorded; /* a never-recorded event is complete */
}

EXPORT CUresult cuEventCreate(CUevent *pe, unsigned int flags)
{
	struct fctx *c;
	struct fevent *e;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (pe == NULL || flags > 7 || ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)))
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((e = calloc(1, sizeof *e)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	*e = (struct fevent){.next = g_events, .ctx = c, .flags = flags, .refs = 1};
	g_events = e;
	*pe = e;
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuEventDestroy_v2(CUevent h)
{
	struct fctx *c;
	struct fevent *e;
	CUresult r = lock_event(h, &c, &e);
	if (r != CUDA_SUCCESS)
		return r;
	event_unlink_locked(e);
	event_unref_locked(e);
	return unlock_with(CUDA_SUCCESS);
}

/* cuEventRecord queues a marker that completes e when the stream reaches it. */
EXPORT CUresult cuEventRecord(CUevent h, CUstream hs)
{
	struct fctx *c;
	struct fevent *e;
	struct fstream *s;
	struct op *o;
	CUresult r = lock_event(h, &c, &e);
	if (r != CUDA_SUCCESS)
		return r;
	if (e->ctx != c)
		return unlock_with(CUDA_ERROR_INVALID_HANDLE);
	if ((r = resolve_stream_locked(c, hs, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if ((o = op_new(OP_RECORD)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	o->u.ev.e = e;
	o->u.ev.seq = ++e->recorded;
	e->refs++;
	return unlock_with(submit_locked(c, s, o, 0));
}

EXPORT CUresult cuEventQuery(CUevent h)
{
	struct fctx *c;
	struct fevent *e;
	CUresult r = lock_event(h, &c, &e);
	if (r != CUDA_SUCCESS)
		return r;
	return unlock_with(event_done_locked(e) ? e->err : CUDA_ERROR_NOT_READY);
}

EXPORT CUresult cuEventSynchronize(CUevent h)
{
	struct fctx *c;
	struct fevent *e;
	CUresult r = lock_event(h, &c, &e);
	if (r != CUDA_SUCCESS)
		return r;
	e->refs++;
	while (!event_done_locked(e))
		pthread_cond_wait(&g_cv, &g_mu);
	r = e->err;
	event_unref_locked(e);
	return unlock_with(r);
}

static CUresult elapsed_time(float *ms, CUevent hstart, CUevent hend)
{
	struct fctx *c;
	struct fevent *a, *b;
	CUresult r = lock_event(hstart, &c, &a);
	if (r != CUDA_SUCCESS)
		return r;
	if (ms == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((b = find_event_locked(hend)) == NULL || a->recorded == 0 || b->recorded == 0 ||
	    ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING))
		return unlock_with(CUDA_ERROR_INVALID_HANDLE);
	if (!event_done_locked(a) || !event_done_locked(b))
		return unlock_with(CUDA_ERROR_NOT_READY);
	if (a->err != CUDA_SUCCESS || b->err != CUDA_SUCCESS)
		return unlock_with(a->err != CUDA_SUCCESS ? a->err : b->err);
	*ms = (float)((double)(b->when.tv_sec - a->when.tv_sec) * 1e3 +
		      (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e6);
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	return elapsed_time(ms, start, end);
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end)
{
	return elapsed_time(ms, start, end);
}

/*
 * cuStreamWaitEvent makes s wait for e's latest record as of now; the
 * event may belong to another context. On the default stream the caller
 * waits.
 */
EXPORT CUresult cuStreamWaitEvent(CUstream hs, CUevent h, unsigned int flags)
{
	struct fctx *c;
	struct fevent *e;
	struct fstream *s;
	struct op *o;
	CUresult r = lock_event(h, &c, &e);
	if (r != CUDA_SUCCESS)
		return r;
	if (flags > 1)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((r = resolve_stream_locked(c, hs, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (event_done_locked(e))
		return unlock_with(CUDA_SUCCESS);
	if ((o = op_new(OP_WAIT)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	o->u.ev.e = e;
	o->u.ev.seq = e->recorded;
	e->refs++;
	return unlock_with(submit_locked(c, s, o, 0));
}

/* ---- Stream-ordered allocation: cuMemAllocAsync, cuMemFreeAsync ---- */

/*
 * cuMemAllocAsync takes a block from the device's default pool at once
 * (the address is known, and calls may name it), but the allocation
 * exists for kernels only once its stream reaches it: a kernel that runs
 * earlier, on another stream, faults with CUDA_ERROR_ILLEGAL_ADDRESS.
 */
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream hs)
{
	struct fctx *c;
	struct fstream *s;
	struct pblock *b;
	struct op *o;
	long i;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = resolve_stream_locked(c, hs, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (dptr == NULL || n == 0)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((o = op_new(OP_ALLOC)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	if ((b = pool_take_locked(&g_pools[c->device], PRIMARY(c), n)) == NULL) {
		free(o);
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	}
	if (alloc_insert_locked((struct alloc){.base = b->base, .size = n, .device = c->device, .blk = b,
					       .pending = 1}) != 0) {
		pool_put_locked(b);
		free(o);
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	}
	stat_add(ST_ALLOCS, 1);
	stat_add(ST_BYTES, (long long)n);
	o->u.base = b->base;
	if ((r = submit_locked(c, s, o, 0)) != CUDA_SUCCESS) {
		/* a sticky error on the default stream: nothing was allocated */
		if ((i = alloc_find_locked(b->base)) >= 0 && g_allocs[i].base == b->base)
			alloc_remove_locked((size_t)i);
		return unlock_with(r);
	}
	*dptr = (CUdeviceptr)b->base ^ DEV_TAG;
	return unlock_with(CUDA_SUCCESS);
}

/*
 * cuMemFreeAsync frees at the point of the stream where it is queued:
 * until the stream gets there, the memory stays usable; then a pool
 * block returns to its pool (and memory from cuMemAlloc to the device).
 */
EXPORT CUresult cuMemFreeAsync(CUdeviceptr d, CUstream hs)
{
	struct fctx *c;
	struct fstream *s;
	struct op *o;
	uintptr_t a = (uintptr_t)(d ^ DEV_TAG);
	long i;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = resolve_stream_locked(c, hs, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	i = alloc_find_locked(a);
	if (i < 0 || g_allocs[i].base != a || g_allocs[i].device != c->device || g_allocs[i].freeing)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((o = op_new(OP_FREE)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	g_allocs[i].freeing = 1;
	o->u.base = a;
	return unlock_with(submit_locked(c, s, o, 0));
}

/* ---- Host functions: cuLaunchHostFunc ---- */

/*
 * cuLaunchHostFunc queues fn(data): the stream's thread calls it once the
 * work before it is done, and the work after it waits for it to return.
 * A call into the driver from fn fails with CUDA_ERROR_NOT_PERMITTED.
 */
EXPORT CUresult cuLaunchHostFunc(CUstream hs, CUhostFn fn, void *data)
{
	struct fctx *c;
	struct fstream *s;
	struct op *o;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = resolve_stream_locked(c, hs, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (fn == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((o = op_new(OP_HOST_FN)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	o->u.host.fn = fn;
	o->u.host.data = data;
	return unlock_with(submit_locked(c, s, o, 0));
}

/* ---- Peers: every pair of devices may access each other's memory ---- */

EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
	CUresult r = check_device(dev);
	if (r != CUDA_SUCCESS || (r = check_device(peer)) != CUDA_SUCCESS)
		return r;
	if (can == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*can = dev != peer;
	return CUDA_SUCCESS;
}

/*
 * cuCtxEnablePeerAccess lets kernels of the current context use the
 * memory of peer's device (see kernel_range_locked), until either
 * context is destroyed or cuCtxDisablePeerAccess. Access is a property
 * of the primary contexts: green contexts share their device's.
 */
EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
	struct fctx *c, *p;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((p = ctx_lookup_locked(peer)) == NULL || p->device == c->device)
		return unlock_with(CUDA_ERROR_INVALID_CONTEXT);
	if (flags != 0)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	c = PRIMARY(c);
	if (c->peers & (1ULL << p->device))
		return unlock_with(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
	c->peers |= 1ULL << p->device;
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peer)
{
	struct fctx *c, *p;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((p = ctx_lookup_locked(peer)) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_CONTEXT);
	c = PRIMARY(c);
	if (!(c->peers & (1ULL << p->device)))
		return unlock_with(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
	c->peers &= ~(1ULL << p->device);
	return unlock_with(CUDA_SUCCESS);
}

/*
 * cuMemcpyPeerAsync copies between allocations of two contexts' devices,
 * queued on a stream of the current context. Like the real driver, it
 * needs no peer access (the driver then stages the copy).
 */
EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext hdst, CUdeviceptr src, CUcontext hsrc, size_t n,
				  CUstream hs)
{
	struct fctx *c, *dc, *sc;
	struct fstream *s;
	struct op *o;
	char *d, *p;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((dc = ctx_lookup_locked(hdst)) == NULL || (sc = ctx_lookup_locked(hsrc)) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_CONTEXT);
	if ((r = resolve_stream_locked(c, hs, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (n == 0)
		return unlock_with(CUDA_SUCCESS);
	if ((d = dev_range_locked(dc->device, dst, n)) == NULL || (p = dev_range_locked(sc->device, src, n)) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((o = op_new(OP_COPY)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	o->u.copy = (struct copy){d, p, n, n, n, 1};
	return unlock_with(submit_locked(c, s, o, 0));
}

/* ---- Pointer attributes: cuPointerGetAttribute ---- */

/*
 * cuPointerGetAttribute knows device allocations (cuMemAlloc,
 * cuMemAllocAsync) and pinned host memory (cuMemAllocHost,
 * cuMemHostAlloc, cuMemHostRegister), at any address inside them. Other
 * addresses, such as pageable host memory, give CUDA_ERROR_INVALID_VALUE,
 * as in the real driver. It answers CONTEXT, MEMORY_TYPE, DEVICE_POINTER
 * (for host memory only if mapped: mapped_range_locked), HOST_POINTER
 * (host memory only) and DEVICE_ORDINAL.
 */
EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr ptr)
{
	struct fctx *c, *owner;
	struct pinned *x = NULL;
	int device;
	long i = -1;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (data == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((ptr & DEV_TAG_MASK) == DEV_TAG)
		i = alloc_find_locked((uintptr_t)(ptr ^ DEV_TAG));
	else
		x = pinned_find_locked((uintptr_t)ptr);
	if (i < 0 && x == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	owner = x != NULL ? x->ctx : &g_ctx[g_allocs[i].device];
	device = owner->device;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = owner;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = x != NULL ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		if (x != NULL && mapped_range_locked((uintptr_t)ptr, 1) == NULL)
			return unlock_with(CUDA_ERROR_INVALID_VALUE);
		*(CUdeviceptr *)data = ptr;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (x == NULL)
			return unlock_with(CUDA_ERROR_INVALID_VALUE);
		*(void **)data = (void *)(uintptr_t)ptr;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = device;
		break;
	default:
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	}
	return unlock_with(CUDA_SUCCESS);
}

/* ---- Kernels: host functions, given their arguments' 8-byte slots ---- */

struct kexec {
	int dev;
	unsigned long long threads; /* grid size times block size */
	const unsigned long long *args;
};

/* kcount is n, limited to one element per thread launched, as in a kernel without a grid-stride loop. */
static size_t kcount(const struct kexec *x, int i)
{
	unsigned long long n = x->args[i];
	return (size_t)(n < x->threads ? n : x->threads);
}

static double kf64(const struct kexec *x, int i)
{
	double v;
	memcpy(&v, &x->args[i], sizeof v);
	return v;
}

/*
 * kernel_range_locked is dev_range_locked for a kernel of device dev as
 * it runs: the range may also lie in the memory of a device that dev has
 * peer access to, or in mapped host memory (mapped_range_locked); an
 * allocation whose cuMemAllocAsync its stream has not reached is not
 * there yet.
 */
static char *kernel_range_locked(int dev, CUdeviceptr d, size_t n)
{
	uintptr_t a = (uintptr_t)(d ^ DEV_TAG);
	long i;
	if ((d & DEV_TAG_MASK) != DEV_TAG)
		return mapped_range_locked((uintptr_t)d, n);
	if ((i = alloc_find_locked(a)) < 0 || g_allocs[i].pending || n > g_allocs[i].size - (a - g_allocs[i].base))
		return NULL;
	if (g_allocs[i].device != dev && !(g_ctx[dev].peers & (1ULL << g_allocs[i].device)))
		return NULL;
	return (char *)a;
}

/* kmem translates pointer argument i, which must cover n elements of size sz. */
static CUresult kmem(const struct kexec *x, int i, size_t n, size_t sz, void **out)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, sz, &bytes))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	pthread_mutex_lock(&g_mu);
	*out = kernel_range_locked(x->dev, x->args[i], bytes);
	pthread_mutex_unlock(&g_mu);
	if (*out == NULL)
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	return (uintptr_t)*out % sz == 0 ? CUDA_SUCCESS : CUDA_ERROR_MISALIGNED_ADDRESS;
}

/* pz_fill_f64(double *x, double v, unsigned long long n): x[i] = v */
static CUresult k_fill_f64(const struct kexec *x)
{
	size_t n = kcount(x, 2);
	double v = kf64(x, 1), *p;
	CUresult r = n == 0 ? CUDA_SUCCESS : kmem(x, 0, n, sizeof *p, (void **)&p);
	for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
		p[i] = v;
	return r;
}

/* pz_scale_f64(double *x, double a, unsigned long long n): x[i] *= a */
static CUresult k_scale_f64(const struct kexec *x)
{
	size_t n = kcount(x, 2);
	double a = kf64(x, 1), *p;
	CUresult r = n == 0 ? CUDA_SUCCESS : kmem(x, 0, n, sizeof *p, (void **)&p);
	for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
		p[i] *= a;
	return r;
}

/* pz_axpy_f64(double *y, double a, const double *x, unsigned long long n): y[i] += a*x[i] */
static CUresult k_axpy_f64(const struct kexec *x)
{
	size_t n = kcount(x, 3);
	double a = kf64(x, 1), *y, *v;
	CUresult r = CUDA_SUCCESS;
	if (n > 0 && (r = kmem(x, 0, n, sizeof *y, (void **)&y)) == CUDA_SUCCESS)
		r = kmem(x, 2, n, sizeof *v, (void **)&v);
	for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
		y[i] += a * v[i];
	return r;
}

/* pz_add_f32(float *y, const float *x, unsigned long long n): y[i] += x[i] */
static CUresult k_add_f32(const struct kexec *x)
{
	size_t n = kcount(x, 2);
	float *y, *v;
	CUresult r = CUDA_SUCCESS;
	if (n > 0 && (r = kmem(x, 0, n, sizeof *y, (void **)&y)) == CUDA_SUCCESS)
		r = kmem(x, 1, n, sizeof *v, (void **)&v);
	for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
		y[i] += v[i];
	return r;
}

/* pz_fail(): fails, making the stream's error sticky */
static CUresult k_fail(const struct kexec *x)
{
	(void)x;
	return CUDA_ERROR_LAUNCH_FAILED;
}

/*
 * pz_wait_u32(const unsigned *flag): waits until the 32-bit word at flag,
 * a HOST address (host memory the test owns, such as cuMemAllocHost's),
 * is nonzero; after 60 s it fails with CUDA_ERROR_LAUNCH_TIMEOUT. Tests
 * use it to hold a stream until the host has seen something happen.
 */
static CUresult k_wait_u32(const struct kexec *x)
{
	const unsigned *flag = (const unsigned *)(uintptr_t)x->args[0];
	struct timespec nap = {0, 50000};
	if (flag == NULL)
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	for (long i = 0; i < 60L * 20000; i++) {
		if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != 0)
			return CUDA_SUCCESS;
		nanosleep(&nap, NULL);
	}
	return CUDA_ERROR_LAUNCH_TIMEOUT;
}

static const struct kernel g_kernels[] = {
	{"pz_fill_f64", 3, k_fill_f64},
	{"pz_scale_f64", 3, k_scale_f64},
	{"pz_axpy_f64", 4, k_axpy_f64},
	{"pz_add_f32", 3, k_add_f32},
	{"pz_fail", 0, k_fail},
	{"pz_wait_u32", 1, k_wait_u32},
};

#define NKERNELS (sizeof g_kernels / sizeof g_kernels[0])

static CUresult run_kernel(struct op *o)
{
	struct kexec x = {o->u.kern.dev, o->u.kern.threads, o->u.kern.args};
	return o->u.kern.k->run(&x);
}

/* ---- Modules: PTX text whose .entry names are built-in kernels ---- */

struct ffunc {
	struct fmodule *mod;
	const struct kernel *k;
};

struct fmodule {
	struct fmodule *next;
	struct fctx *ctx;
	int nfuncs;
	struct ffunc funcs[NKERNELS];
};

static struct fmodule *g_modules;

static const struct kernel *kernel_named(const char *name, size_t len)
{
	for (size_t i = 0; i < NKERNELS; i++)
		if (strlen(g_kernels[i].name) == len && memcmp(g_kernels[i].name, name, len) == 0)
			return &g_kernels[i];
	return NULL;
}

static void module_add(struct fmodule *m, const struct kernel *k)
{
	for (int i = 0; i < m->nfuncs; i++)
		if (m->funcs[i].k == k)
			return;
	m->funcs[m->nfuncs++] = (struct ffunc){m, k};
}

/* module_scan adds the built-in kernels named after ".entry" in text. */
static void module_scan(struct fmodule *m, const char *text)
{
	static const char ident[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$";
	for (const char *p = strstr(text, ".entry"); p != NULL; p = strstr(p, ".entry")) {
		size_t n;
		const struct kernel *k;
		p += strlen(".entry");
		if (!isspace((unsigned char)*p))
			continue;
		while (isspace((unsigned char)*p))
			p++;
		n = strspn(p, ident);
		if ((k = kernel_named(p, n)) != NULL)
			module_add(m, k);
		p += n;
	}
}

/* A JIT error log buffer from the options of cuModuleLoadDataEx. */
struct jitlog {
	char *buf;
	size_t size;
	void **size_slot; /* gets the number of bytes written */
};

static struct jitlog jit_options(unsigned n, const int *opts, void **vals)
{
	struct jitlog log = {NULL, 0, NULL};
	for (unsigned i = 0; opts != NULL && vals != NULL && i < n; i++) {
		if (opts[i] == CU_JIT_ERROR_LOG_BUFFER)
			log.buf = vals[i];
		if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
			log.size = (size_t)(uintptr_t)vals[i];
			log.size_slot = &vals[i];
		}
		if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
			vals[i] = NULL; /* no info log */
	}
	return log;
}

/* jit_fail writes msg into the error log, if any, and returns CUDA_ERROR_INVALID_IMAGE. */
static CUresult jit_fail(struct jitlog *log, const char *msg)
{
	size_t n = 0;
	if (log->buf != NULL && log->size > 0) {
		snprintf(log->buf, log->size, "%s", msg);
		n = strlen(log->buf) + 1;
	}
	if (log->size_slot != NULL)
		*log->size_slot = (void *)(uintptr_t)n;
	return CUDA_ERROR_INVALID_IMAGE;
}

/* check_image fails like a PTX compiler on an image that has syntax_error in it. */
static CUresult check_image(const char *text, struct jitlog *log)
{
	char msg[256];
	const char *bad;
	int line = 1;
	if (strncmp(text, "\177ELF", 4) == 0)
		return jit_fail(log, "fakecuda: only PTX text modules are supported, not cubins");
	if ((bad = strstr(text, "syntax_error")) == NULL) {
		if (log->size_slot != NULL)
			*log->size_slot = NULL;
		return CUDA_SUCCESS;
	}
	for (const char *p = text; p < bad; p++)
		line += *p == '\n';
	snprintf(msg, sizeof msg, "ptxas application ptx input, line %d; error   : syntax error (fakecuda)", line);
	return jit_fail(log, msg);
}

static CUresult module_load(CUmodule *pm, const void *image, struct jitlog *log)
{
	struct fctx *c;
	struct fmodule *m;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (pm == NULL || image == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((r = check_image(image, log)) != CUDA_SUCCESS)
		return unlock_with(r);
	if ((m = calloc(1, sizeof *m)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	m->ctx = c;
	module_scan(m, image);
	m->next = g_modules;
	g_modules = m;
	*pm = m;
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuModuleLoadData(CUmodule *pm, const void *image)
{
	struct jitlog log = {NULL, 0, NULL};
	return module_load(pm, image, &log);
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *pm, const void *image, unsigned int n, int *opts, void **vals)
{
	struct jitlog log;
	if (n > 0 && (opts == NULL || vals == NULL))
		return CUDA_ERROR_INVALID_VALUE;
	log = jit_options(n, opts, vals);
	return module_load(pm, image, &log);
}

/* module_take_locked unlinks and returns live module h of c, or NULL. */
static struct fmodule *module_take_locked(struct fctx *c, CUmodule h)
{
	for (struct fmodule **pp = &g_modules; *pp != NULL; pp = &(*pp)->next) {
		struct fmodule *m = *pp;
		if (m == h && m->ctx == c) {
			*pp = m->next;
			return m;
		}
	}
	return NULL;
}

static struct fmodule *find_module_locked(struct fctx *c, CUmodule h)
{
	for (struct fmodule *m = g_modules; m != NULL; m = m->next)
		if (m == h && m->ctx == c)
			return m;
	return NULL;
}

EXPORT CUresult cuModuleUnload(CUmodule h)
{
	struct fctx *c;
	struct fmodule *m;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((m = module_take_locked(c, h)) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_HANDLE);
	free(m); /* queued launches refer to the static kernel table only */
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuModuleGetFunction(CUfunction *pf, CUmodule h, const char *name)
{
	struct fctx *c;
	struct fmodule *m;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (pf == NULL || name == NULL)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((m = find_module_locked(c, h)) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_HANDLE);
	for (int i = 0; i < m->nfuncs; i++)
		if (strcmp(m->funcs[i].k->name, name) == 0) {
			*pf = &m->funcs[i];
			return unlock_with(CUDA_SUCCESS);
		}
	return unlock_with(CUDA_ERROR_NOT_FOUND);
}

/* find_function_locked returns the kernel of function handle h of c, or NULL. */
static const struct kernel *find_function_locked(struct fctx *c, CUfunction h)
{
	for (struct fmodule *m = g_modules; m != NULL; m = m->next)
		for (int i = 0; m->ctx == c && i < m->nfuncs; i++)
			if (&m->funcs[i] == h)
				return m->funcs[i].k;
	return NULL;
}

/* launch_shape checks the launch configuration and returns the thread count (saturated). */
static CUresult launch_shape(const unsigned dims[6], unsigned shared, unsigned long long *threads)
{
	unsigned long long t = 1;
	for (int i = 0; i < 6; i++)
		if (dims[i] == 0)
			return CUDA_ERROR_INVALID_VALUE;
	if (dims[1] > 65535 || dims[2] > 65535 || dims[3] > 1024 || dims[4] > 1024 || dims[5] > 64 ||
	    (unsigned long long)dims[3] * dims[4] * dims[5] > 1024 || shared > 49152)
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < 6; i++)
		if (__builtin_mul_overflow(t, dims[i], &t))
			t = ~0ULL;
	*threads = t;
	return CUDA_SUCCESS;
}

/*
 * cuLaunchKernel copies the arguments (each params[i] points to an 8-byte
 * slot) and queues the kernel; extra (packed arguments) is not supported.
 */
EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			       unsigned bz, unsigned shared, CUstream hs, void **params, void **extra)
{
	const unsigned dims[6] = {gx, gy, gz, bx, by, bz};
	struct fctx *c;
	struct fstream *s;
	const struct kernel *k;
	struct op *o;
	unsigned long long threads;
	CUresult r = lock_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((k = find_function_locked(c, f)) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_HANDLE);
	if ((r = launch_shape(dims, shared, &threads)) != CUDA_SUCCESS ||
	    (r = resolve_stream_locked(c, hs, &s)) != CUDA_SUCCESS)
		return unlock_with(r);
	if (extra != NULL || (k->nargs > 0 && params == NULL))
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	for (int i = 0; i < k->nargs; i++)
		if (params[i] == NULL)
			return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((o = op_new(OP_KERNEL)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	o->u.kern.k = k;
	o->u.kern.dev = c->device;
	o->u.kern.threads = threads;
	for (int i = 0; i < k->nargs; i++)
		memcpy(&o->u.kern.args[i], params[i], sizeof o->u.kern.args[i]);
	stat_add(ST_KERNELS, 1);
	if (c->green)
		atomic_fetch_add(&g_green_kernels[s != NULL ? s->sms : c->sms], 1);
	return unlock_with(submit_locked(c, s, o, 0));
}

/* ---- Context teardown ---- */

/*
 * ctx_has_streams_locked reports whether a stream of c's device is left:
 * the primary context's, or one detached from a destroyed green context
 * (live green contexts hold the primary context, so there are none when
 * it is torn down).
 */
static int ctx_has_streams_locked(struct fctx *c)
{
	for (struct fstream *s = g_streams; s != NULL; s = s->next)
		if (s->ctx->device == c->device)
			return 1;
	return 0;
}

/* ctx_stop_streams_locked destroys the streams of c's device and waits for their threads to exit. */
static void ctx_stop_streams_locked(struct fctx *c)
{
	for (struct fstream *s = g_streams, *next; s != NULL; s = next) {
		next = s->next; /* the thread's reference keeps s linked */
		if (s->ctx->device == c->device && !s->dead) {
			s->dead = 1;
			stream_unref_locked(s);
		}
	}
	pthread_cond_broadcast(&g_cv);
	while (ctx_has_streams_locked(c))
		pthread_cond_wait(&g_cv, &g_mu);
}

static void ctx_free_objects_locked(struct fctx *c)
{
	for (struct fevent **pp = &g_events; *pp != NULL;) {
		struct fevent *e = *pp;
		if (e->ctx != c) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		event_unref_locked(e);
	}
	for (struct fmodule **pp = &g_modules; *pp != NULL;) {
		struct fmodule *m = *pp;
		if (m->ctx != c) {
			pp = &m->next;
			continue;
		}
		*pp = m->next;
		free(m);
	}
}

static void ctx_free_memory_locked(struct fctx *c)
{
	for (size_t i = g_nallocs; i-- > 0;)
		if (g_allocs[i].device == c->device)
			alloc_remove_locked(i);
	pool_trim_locked(&g_pools[c->device], 0); /* every block is cached by now */
	pool_reset_locked(&g_pools[c->device], c->device);
	for (struct pinned **pp = &g_pinned; *pp != NULL;) {
		struct pinned *x = *pp;
		if (x->ctx != c) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		if (x->kind == PIN_ALLOCATED)
			free((void *)x->base);
		free(x);
	}
}

/* ctx_destroy_locked tears down a context after its last release, as the driver does. */
static void ctx_destroy_locked(struct fctx *c)
{
	c->destroying = 1;
	ctx_stop_streams_locked(c);
	ctx_free_objects_locked(c);
	ctx_free_memory_locked(c);
	c->peers = 0;
	for (int i = 0; i < g_ndev; i++) /* peer access to c ends with it */
		g_ctx[i].peers &= ~(1ULL << c->device);
	c->sticky = CUDA_SUCCESS;
	c->gen++;
	c->destroying = 0;
	pthread_cond_broadcast(&g_cv);
}

/*
 * ---- Green contexts (CUDA 12.4): SM resources, descriptors, contexts ----
 *
 * A device has g_sms SMs (PZ_FAKECUDA_SMS). cuDeviceGetDevResource gives
 * them all; cuDevSmResourceSplitByCount cuts groups of minCount SMs off a
 * resource, rounded up to the granularity of the compute capability 9.0
 * the stand-in reports (at least 8 SMs, a multiple of 8; with
 * CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING at least 2, a multiple
 * of 2), and leaves the rest in the remainder (CU_DEV_RESOURCE_TYPE_INVALID
 * when nothing is left). cuDevResourceGenerateDesc makes a descriptor of
 * resources of one device from one split, cuGreenCtxCreate a green
 * context over it, which retains the device's primary context until
 * cuGreenCtxDestroy. Its CUcontext (cuCtxFromGreenCtx) is a context of
 * its own: current per thread, with its own streams, events and modules,
 * over the device's memory, which belongs to the primary context. Its
 * streams, and those cuGreenCtxStreamCreate makes for it, remember its SM
 * count, which each kernel launched on them is counted under
 * (pzfake_green_kernels). cuGreenCtxDestroy waits for the work queued in
 * its streams, then detaches them (later calls on them but cuStreamDestroy
 * fail with CUDA_ERROR_STREAM_DETACHED), frees its events and modules, and
 * releases the primary context. Descriptors are never freed: the driver
 * API has no call to free one.
 */

#define RES_MAGIC 0x707a736dU /* "pzsm": the stand-in made the resource */
#define SM_GRANULE 8         /* minimum and alignment of a split's groups on compute capability 9.0 */
#define SM_GRANULE_FINE 2    /* the same with CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING */

/* What the stand-in keeps in a CUdevResource's _internal_padding. */
struct resinfo {
	unsigned magic;
	int device;
	unsigned long long split; /* the split instance that made it, 0 for a device's or context's */
	unsigned index;           /* its group in the split; the remainder's is the group count */
};

_Static_assert(sizeof(struct resinfo) <= sizeof(((CUdevResource *)0)->_internal_padding), "resinfo fits");

struct fdesc {
	struct fdesc *next; /* in g_descs */
	int device;
	unsigned sms;
};

static struct fdesc *g_descs;
static unsigned long long g_splits; /* split instances so far */

/*
 * res_fill writes an SM resource of sms SMs of device; with none, the
 * resource is CU_DEV_RESOURCE_TYPE_INVALID. The 13.x fields after smCount
 * are filled too (in 12.x they are part of _oversize).
 */
static void res_fill(CUdevResource *r, int device, unsigned sms, unsigned long long split, unsigned index,
		     unsigned granule)
{
	struct resinfo info = {RES_MAGIC, device, split, index};
	memset(r, 0, sizeof *r);
	if (sms == 0)
		return;
	r->type = CU_DEV_RESOURCE_TYPE_SM;
	memcpy(r->_internal_padding, &info, sizeof info);
	r->sm.smCount = sms;
	r->sm.minSmPartitionSize = granule;
	r->sm.smCoscheduledAlignment = granule;
}

/* res_read checks that r is an SM resource the stand-in made and returns its private data. */
static CUresult res_read(const CUdevResource *r, struct resinfo *info)
{
	if (r == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (r->type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	memcpy(info, r->_internal_padding, sizeof *info);
	if (info->magic != RES_MAGIC || info->device < 0 || info->device >= g_ndev || r->sm.smCount == 0 ||
	    r->sm.smCount > g_sms)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource *resource, int type)
{
	CUresult r = check_device(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (resource == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	res_fill(resource, dev, g_sms, 0, 0, SM_GRANULE);
	return CUDA_SUCCESS;
}

/*
 * cuDevSmResourceSplitByCount: with result NULL it only says how many
 * groups there would be; else it makes min(*nbGroups, possible) of them.
 * The results (and the remainder) of a split cannot be split again, as
 * documented: only a device's, a context's or a green context's resource.
 */
EXPORT CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned *nbGroups, const CUdevResource *input,
					    CUdevResource *remainder, unsigned flags, unsigned minCount)
{
	struct resinfo in;
	unsigned count, granule, size, possible, n;
	unsigned long long split;
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (nbGroups == NULL || (flags & ~(unsigned)(CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING |
						    CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE)))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = res_read(input, &in)) != CUDA_SUCCESS)
		return r;
	if (in.split != 0)
		return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
	count = input->sm.smCount; /* read before writing: input may alias an output */
	if (minCount > count || (result != NULL && *nbGroups == 0))
		return CUDA_ERROR_INVALID_VALUE;
	granule = (flags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) ? SM_GRANULE_FINE : SM_GRANULE;
	size = (minCount > granule ? minCount : granule);
	size = (size + granule - 1) / granule * granule;
	possible = count / size;
	if (result == NULL) {
		*nbGroups = possible;
		return CUDA_SUCCESS;
	}
	n = *nbGroups < possible ? *nbGroups : possible;
	pthread_mutex_lock(&g_mu);
	split = ++g_splits;
	pthread_mutex_unlock(&g_mu);
	for (unsigned i = 0; i < n; i++)
		res_fill(&result[i], in.device, size, split, i, granule);
	if (remainder != NULL)
		res_fill(remainder, in.device, count - n * size, split, n, granule);
	*nbGroups = n;
	return CUDA_SUCCESS;
}

/*
 * cuDevResourceGenerateDesc: resources of one device and, when there are
 * several, distinct ones from one split, as documented (else
 * CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION).
 */
EXPORT CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources, unsigned nb)
{
	struct resinfo first = {0, 0, 0, 0}, info, other;
	struct fdesc *d;
	unsigned long long sms = 0;
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (phDesc == NULL || resources == NULL || nb == 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < nb; i++) {
		if ((r = res_read(&resources[i], &info)) != CUDA_SUCCESS)
			return r;
		if (i == 0)
			first = info;
		else if (info.device != first.device || info.split == 0 || info.split != first.split)
			return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
		for (unsigned j = 0; j < i; j++) { /* the same group twice */
			memcpy(&other, resources[j]._internal_padding, sizeof other);
			if (other.index == info.index)
				return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
		}
		sms += resources[i].sm.smCount;
	}
	if ((d = calloc(1, sizeof *d)) == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&g_mu);
	*d = (struct fdesc){g_descs, first.device, (unsigned)sms};
	g_descs = d;
	*phDesc = d;
	return unlock_with(CUDA_SUCCESS);
}

static struct fdesc *desc_find_locked(CUdevResourceDesc h)
{
	for (struct fdesc *d = g_descs; d != NULL; d = d->next)
		if (d == h)
			return d;
	return NULL;
}

/* cuGreenCtxCreate retains dev's primary context; CU_GREEN_CTX_DEFAULT_STREAM is required (12.4). */
EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned flags)
{
	struct fdesc *d;
	struct fgreen *g;
	CUresult r = check_device(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (phCtx == NULL || flags != CU_GREEN_CTX_DEFAULT_STREAM)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	if ((d = desc_find_locked(desc)) == NULL || d->device != dev)
		return unlock_with(CUDA_ERROR_INVALID_VALUE);
	if ((g = calloc(1, sizeof *g)) == NULL)
		return unlock_with(CUDA_ERROR_OUT_OF_MEMORY);
	while (g_ctx[dev].destroying)
		pthread_cond_wait(&g_cv, &g_mu);
	g_ctx[dev].refs++;
	g->ctx = (struct fctx){.device = dev, .refs = 1, .sms = d->sms, .green = 1};
	g->next = g_greens;
	g_greens = g;
	stat_add(ST_GREEN, 1);
	*phCtx = g;
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx h)
{
	struct fgreen *g;
	struct fctx *c, *p;
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&g_mu);
	if ((g = green_find_locked(h)) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_CONTEXT);
	c = &g->ctx;
	if (ctx_live(c) == NULL)
		return unlock_with(CUDA_ERROR_CONTEXT_IS_DESTROYED);
	c->destroying = 1; /* refuses new work from threads that have it current */
	drain_locked(c, 0);
	for (struct fstream *s = g_streams; s != NULL; s = s->next)
		if (s->ctx == c)
			s->detached = 1;
	ctx_free_objects_locked(c);
	c->sticky = CUDA_SUCCESS;
	c->gen++; /* library handles made in it are stale */
	c->refs = 0;
	c->destroying = 0;
	stat_add(ST_GREEN, -1);
	p = PRIMARY(c);
	if (--p->refs == 0)
		ctx_destroy_locked(p);
	pthread_cond_broadcast(&g_cv);
	return unlock_with(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx h)
{
	struct fgreen *g;
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (pContext == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	if ((g = green_find_locked(h)) == NULL || ctx_live(&g->ctx) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_CONTEXT);
	*pContext = &g->ctx;
	return unlock_with(CUDA_SUCCESS);
}

/* ctx_resource_locked fills resource with the SMs of live context c, or fails. */
static CUresult ctx_resource_locked(struct fctx *c, CUdevResource *resource, int type)
{
	if (c == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (resource == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	res_fill(resource, c->device, c->sms, 0, 0, SM_GRANULE);
	return CUDA_SUCCESS;
}

/* cuCtxGetDevResource: a primary context has the device's SMs, a converted green context its own. */
EXPORT CUresult cuCtxGetDevResource(CUcontext h, CUdevResource *resource, int type)
{
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&g_mu);
	return unlock_with(ctx_resource_locked(ctx_lookup_locked(h), resource, type));
}

EXPORT CUresult cuGreenCtxGetDevResource(CUgreenCtx h, CUdevResource *resource, int type)
{
	struct fgreen *g;
	CUresult r = check_init();
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&g_mu);
	g = green_find_locked(h);
	return unlock_with(ctx_resource_locked(g == NULL ? NULL : ctx_live(&g->ctx), resource, type));
}

/*
 * cuGreenCtxStreamCreate (CUDA 12.5) makes a stream of green context h
 * whatever the calling thread's current context; CU_STREAM_NON_BLOCKING
 * is required. Priorities are accepted and ignored.
 */
EXPORT CUresult cuGreenCtxStreamCreate(CUstream *ps, CUgreenCtx h, unsigned flags, int priority)
{
	struct fgreen *g;
	CUresult r = check_init();
	(void)priority;
	if (r != CUDA_SUCCESS)
		return r;
	if (ps == NULL || flags != CU_STREAM_NON_BLOCKING)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	if ((g = green_find_locked(h)) == NULL || ctx_live(&g->ctx) == NULL)
		return unlock_with(CUDA_ERROR_INVALID_CONTEXT);
	return unlock_with(stream_create_locked(&g->ctx, flags, ps));
}

/*
 * ---- cuBLAS and cuSOLVER (dense) stand-ins ----
 *
 * The same library file serves as libcublas and libcusolver: handles
 * belong to the context current when they were made, operations run on
 * the host, queued on the stream the handle is bound to, over the device
 * memory they name. Scalars (alpha, beta) are host pointers (pointer mode
 * host) and are read at call time. Bad arguments return INVALID_VALUE
 * without queueing; a matrix outside live device memory fails its stream
 * with CUDA_ERROR_ILLEGAL_ADDRESS, as a faulting kernel does. A call on a
 * thread whose current context is not the handle's is refused with
 * NOT_INITIALIZED (and counted as a call without a current context).
 */

typedef int cublasStatus_t;
typedef int cusolverStatus_t;

enum {
	CUBLAS_STATUS_SUCCESS = 0,
	CUBLAS_STATUS_NOT_INITIALIZED = 1,
	CUBLAS_STATUS_ALLOC_FAILED = 3,
	CUBLAS_STATUS_INVALID_VALUE = 7,
	CUBLAS_STATUS_EXECUTION_FAILED = 13,
};

enum {
	CUSOLVER_STATUS_SUCCESS = 0,
	CUSOLVER_STATUS_NOT_INITIALIZED = 1,
	CUSOLVER_STATUS_ALLOC_FAILED = 2,
	CUSOLVER_STATUS_INVALID_VALUE = 3,
	CUSOLVER_STATUS_EXECUTION_FAILED = 6,
};

enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum { CUBLAS_FILL_MODE_LOWER = 0, CUBLAS_FILL_MODE_UPPER = 1 };
enum { CUBLAS_SIDE_LEFT = 0, CUBLAS_SIDE_RIGHT = 1 };
enum { CUBLAS_DIAG_NON_UNIT = 0, CUBLAS_DIAG_UNIT = 1 };

/* The statuses of one library. */
struct libstatus {
	int not_initialized, alloc_failed, invalid_value, execution_failed;
};

static const struct libstatus g_blas_status = {CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_ALLOC_FAILED,
					       CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_EXECUTION_FAILED};
static const struct libstatus g_solver_status = {CUSOLVER_STATUS_NOT_INITIALIZED, CUSOLVER_STATUS_ALLOC_FAILED,
						 CUSOLVER_STATUS_INVALID_VALUE, CUSOLVER_STATUS_EXECUTION_FAILED};

enum lib_kind { KIND_BLAS = 1, KIND_SOLVER = 2 };

struct fhandle {
	struct fhandle *next;
	enum lib_kind kind;
	struct fctx *ctx;
	unsigned gen;    /* ctx->gen at creation */
	CUstream stream; /* as set; 0 is the default stream */
};

typedef struct fhandle *cublasHandle_t;
typedef struct fhandle *cusolverDnHandle_t;

static struct fhandle *g_handles;

static const struct libstatus *lib_status(enum lib_kind kind)
{
	return kind == KIND_BLAS ? &g_blas_status : &g_solver_status;
}

static int unlock_status(int st)
{
	pthread_mutex_unlock(&g_mu);
	return st;
}

static struct fhandle *find_handle_locked(const struct fhandle *h, enum lib_kind kind)
{
	for (struct fhandle *x = g_handles; x != NULL; x = x->next)
		if (x == h && x->kind == kind)
			return x;
	return NULL;
}

static int handle_create(struct fhandle **ph, enum lib_kind kind)
{
	struct fctx *c;
	struct fhandle *h;
	if (lock_ctx(&c) != CUDA_SUCCESS) /* counts a missing context */
		return lib_status(kind)->not_initialized;
	if (ph == NULL)
		return unlock_status(lib_status(kind)->invalid_value);
	if ((h = calloc(1, sizeof *h)) == NULL)
		return unlock_status(lib_status(kind)->alloc_failed);
	*h = (struct fhandle){.next = g_handles, .kind = kind, .ctx = c, .gen = c->gen};
	g_handles = h;
	*ph = h;
	return unlock_status(0);
}

static int handle_destroy(struct fhandle *h, enum lib_kind kind)
{
	pthread_mutex_lock(&g_mu);
	for (struct fhandle **pp = &g_handles; *pp != NULL; pp = &(*pp)->next)
		if (*pp == h && h->kind == kind) {
			*pp = h->next;
			free(h); /* queued operations hold copies of what they need */
			return unlock_status(0);
		}
	return unlock_status(lib_status(kind)->not_initialized);
}

/* lock_handle locks g_mu and finds live handle h; on failure it unlocks. */
static int lock_handle(struct fhandle *h, enum lib_kind kind, struct fhandle **out)
{
	if (check_init() != CUDA_SUCCESS)
		return lib_status(kind)->not_initialized;
	pthread_mutex_lock(&g_mu);
	if ((*out = find_handle_locked(h, kind)) == NULL || (*out)->gen != (*out)->ctx->gen)
		return unlock_status(lib_status(kind)->not_initialized);
	return 0;
}

static int handle_set_stream(struct fhandle *h, enum lib_kind kind, CUstream hs)
{
	struct fhandle *x;
	struct fstream *s;
	int st = lock_handle(h, kind, &x);
	if (st != 0)
		return st;
	if (resolve_stream_locked(x->ctx, hs, &s) != CUDA_SUCCESS)
		return unlock_status(lib_status(kind)->invalid_value);
	x->stream = hs;
	return unlock_status(0);
}

static int handle_get_stream(struct fhandle *h, enum lib_kind kind, CUstream *ps)
{
	struct fhandle *x;
	int st = lock_handle(h, kind, &x);
	if (st != 0)
		return st;
	if (ps == NULL)
		return unlock_status(lib_status(kind)->invalid_value);
	*ps = x->stream;
	return unlock_status(0);
}

/*
 * lock_op locks g_mu for an operation of handle h: the handle must be
 * live, the calling thread's current context the handle's, and its
 * stream live. On failure it unlocks.
 */
static int lock_op(struct fhandle *h, enum lib_kind kind, struct fhandle **out, struct fstream **ps)
{
	struct fctx *c = t_current;
	int st = lock_handle(h, kind, out);
	if (st != 0)
		return st;
	if (c != (*out)->ctx || c->refs == 0 || c->destroying) {
		stat_add(ST_REFUSED, 1);
		return unlock_status(lib_status(kind)->not_initialized);
	}
	if (resolve_stream_locked(c, (*out)->stream, ps) != CUDA_SUCCESS)
		return unlock_status(lib_status(kind)->execution_failed); /* destroyed since cublasSetStream */
	return 0;
}

/* submit_job queues j on s for handle h, with g_mu held, and unlocks. */
static int submit_job(struct fhandle *h, struct fstream *s, const struct libjob *j)
{
	const struct libstatus *ls = lib_status(h->kind);
	struct op *o = op_new(OP_LIB);
	CUresult r;
	if (o == NULL)
		return unlock_status(ls->alloc_failed);
	o->u.lib = *j;
	o->u.lib.dev = h->ctx->device;
	stat_add(ST_LIBRARY, 1);
	r = submit_locked(h->ctx, s, o, 0);
	return unlock_status(r == CUDA_SUCCESS ? 0 : ls->execution_failed);
}

/* Argument checks. */

static int bad_trans(int t) { return t != CUBLAS_OP_N && t != CUBLAS_OP_T && t != CUBLAS_OP_C; }
static int bad_fill(int u) { return u != CUBLAS_FILL_MODE_LOWER && u != CUBLAS_FILL_MODE_UPPER; }

/* bad_ld reports whether ld is below max(1, rows). */
static int bad_ld(int ld, int rows) { return ld < 1 || ld < rows; }

static struct devmat devmat(const void *p, int rows, int cols, int ld)
{
	return (struct devmat){(CUdeviceptr)(uintptr_t)p, (size_t)rows, (size_t)cols, (size_t)ld};
}

/* ---- Running the operations, without g_mu ---- */

/* A host view of a device matrix. */
struct hmat {
	char *p;
	size_t ld;
	int f32;
};

static inline double mget(const struct hmat *x, size_t i, size_t j)
{
	size_t k = i + j * x->ld;
	return x->f32 ? (double)((const float *)(void *)x->p)[k] : ((const double *)(void *)x->p)[k];
}

static inline void mset(const struct hmat *x, size_t i, size_t j, double v)
{
	size_t k = i + j * x->ld;
	if (x->f32)
		((float *)(void *)x->p)[k] = (float)v;
	else
		((double *)(void *)x->p)[k] = v;
}

/* op(X)(i, j) */
static inline double oget(const struct hmat *x, int trans, size_t i, size_t j)
{
	return trans ? mget(x, j, i) : mget(x, i, j);
}

/*
 * map_mat translates device matrix m (elements of sz bytes) into *out;
 * an empty matrix is not touched and needs no memory.
 */
static CUresult map_mat(int dev, const struct devmat *m, size_t sz, int f32, struct hmat *out)
{
	size_t n, bytes;
	char *p;
	*out = (struct hmat){NULL, m->ld, f32};
	if (m->rows == 0 || m->cols == 0)
		return CUDA_SUCCESS;
	if (__builtin_mul_overflow(m->ld, m->cols - 1, &n) || __builtin_add_overflow(n, m->rows, &n) ||
	    __builtin_mul_overflow(n, sz, &bytes))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	pthread_mutex_lock(&g_mu);
	p = dev_range_locked(dev, m->p, bytes);
	pthread_mutex_unlock(&g_mu);
	if (p == NULL)
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	if ((uintptr_t)p % sz != 0)
		return CUDA_ERROR_MISALIGNED_ADDRESS;
	out->p = p;
	return CUDA_SUCCESS;
}

/* C = alpha op(A) op(B) + beta C; C is m x n, op(A) m x k. */
static void run_gemm(const struct libjob *j, const struct hmat *a, const struct hmat *b, const struct hmat *c)
{
	int product = j->k > 0 && j->alpha != 0;
	for (size_t col = 0; col < j->n; col++)
		for (size_t i = 0; i < j->m; i++) {
			double s = 0, v;
			for (size_t l = 0; product && l < j->k; l++)
				s += oget(a, j->ta, i, l) * oget(b, j->tb, l, col);
			v = j->alpha * s;
			if (j->beta != 0)
				v += j->beta * mget(c, i, col);
			mset(c, i, col, v);
		}
}

/* C = alpha op(A) op(A)^T + beta C on the uplo triangle of the n x n C; op(A) is n x k. */
static void run_syrk(const struct libjob *j, const struct hmat *a, const struct hmat *c)
{
	int product = j->k > 0 && j->alpha != 0;
	for (size_t col = 0; col < j->n; col++) {
		size_t lo = j->uplo == CUBLAS_FILL_MODE_LOWER ? col : 0;
		size_t hi = j->uplo == CUBLAS_FILL_MODE_LOWER ? j->n : col + 1;
		for (size_t i = lo; i < hi; i++) {
			double s = 0, v;
			for (size_t l = 0; product && l < j->k; l++)
				s += oget(a, j->ta, i, l) * oget(a, j->ta, col, l);
			v = j->alpha * s;
			if (j->beta != 0)
				v += j->beta * mget(c, i, col);
			mset(c, i, col, v);
		}
	}
}

/*
 * run_trsm solves op(A) X = alpha B (left) or X op(A) = alpha B (right)
 * in place in the m x n B, reading only A's uplo triangle. x is scratch
 * of max(m, n) doubles.
 */
static void run_trsm(const struct libjob *j, const struct hmat *a, const struct hmat *b, double *x)
{
	int lower = (j->uplo == CUBLAS_FILL_MODE_LOWER) != (j->ta != 0); /* op(A) is lower triangular */
	int unit = j->diag == CUBLAS_DIAG_UNIT;
	int left = j->side == CUBLAS_SIDE_LEFT;
	size_t len = left ? j->m : j->n, count = left ? j->n : j->m;
	for (size_t v = 0; v < count; v++) {
		for (size_t p = 0; p < len; p++)
			x[p] = j->alpha == 0 ? 0 : j->alpha * (left ? mget(b, p, v) : mget(b, v, p));
		if (j->alpha != 0) {
			/*
			 * Left: row p of op(A) x = b, lower forward. Right: column p of
			 * x op(A) = b, i.e. the sum over q of x[q] op(A)(q, p): lower
			 * backward.
			 */
			int forward = left == lower;
			for (size_t t = 0; t < len; t++) {
				size_t p = forward ? t : len - 1 - t;
				double s = x[p];
				size_t q0 = forward ? 0 : p + 1, q1 = forward ? p : len;
				for (size_t q = q0; q < q1; q++)
					s -= x[q] * (left ? oget(a, j->ta, p, q) : oget(a, j->ta, q, p));
				if (!unit)
					s /= oget(a, j->ta, p, p);
				x[p] = s;
			}
		}
		for (size_t p = 0; p < len; p++)
			if (left)
				mset(b, p, v, x[p]);
			else
				mset(b, v, p, x[p]);
	}
}

/* Cholesky factor L (i >= j) of potrf: A's lower triangle, or the transpose of its upper one. */
static inline double lget(const struct hmat *a, int upper, size_t i, size_t j)
{
	return upper ? mget(a, j, i) : mget(a, i, j);
}

static inline void lset(const struct hmat *a, int upper, size_t i, size_t j, double v)
{
	if (upper)
		mset(a, j, i, v);
	else
		mset(a, i, j, v);
}

/* run_potrf factors A in place (left-looking) and returns devInfo's value. */
static int run_potrf(const struct libjob *j, const struct hmat *a)
{
	int upper = j->uplo == CUBLAS_FILL_MODE_UPPER;
	for (size_t col = 0; col < j->n; col++) {
		double d = lget(a, upper, col, col), ljj;
		for (size_t k = 0; k < col; k++)
			d -= lget(a, upper, col, k) * lget(a, upper, col, k);
		if (!(d > 0)) /* not positive, or NaN */
			return (int)col + 1;
		ljj = sqrt(d);
		lset(a, upper, col, col, ljj);
		for (size_t i = col + 1; i < j->n; i++) {
			double s = lget(a, upper, i, col);
			for (size_t k = 0; k < col; k++)
				s -= lget(a, upper, i, k) * lget(a, upper, col, k);
			lset(a, upper, i, col, s / ljj);
		}
	}
	return 0;
}

static CUresult run_lib(const struct libjob *j)
{
	size_t esz = j->f32 ? sizeof(float) : sizeof(double);
	struct hmat a, b, c;
	CUresult r = map_mat(j->dev, &j->a, esz, j->f32, &a);
	double *x;
	int info;
	if (r != CUDA_SUCCESS)
		return r;
	switch (j->op) {
	case LIB_GEMM:
		if ((r = map_mat(j->dev, &j->b, esz, j->f32, &b)) != CUDA_SUCCESS ||
		    (r = map_mat(j->dev, &j->c, esz, j->f32, &c)) != CUDA_SUCCESS)
			return r;
		run_gemm(j, &a, &b, &c);
		return CUDA_SUCCESS;
	case LIB_SYRK:
		if ((r = map_mat(j->dev, &j->c, esz, j->f32, &c)) != CUDA_SUCCESS)
			return r;
		run_syrk(j, &a, &c);
		return CUDA_SUCCESS;
	case LIB_TRSM:
		if ((r = map_mat(j->dev, &j->b, esz, j->f32, &b)) != CUDA_SUCCESS)
			return r;
		if ((x = malloc((j->m > j->n ? j->m : j->n) * sizeof *x + 1)) == NULL)
			return CUDA_ERROR_LAUNCH_FAILED;
		run_trsm(j, &a, &b, x);
		free(x);
		return CUDA_SUCCESS;
	case LIB_POTRF:
		if ((r = map_mat(j->dev, &j->b, esz, j->f32, &b)) != CUDA_SUCCESS ||
		    (r = map_mat(j->dev, &j->c, sizeof info, 0, &c)) != CUDA_SUCCESS)
			return r;
		if (b.p != NULL) /* the workspace holds garbage afterwards */
			memset(b.p, 0xff, j->b.rows * esz);
		info = run_potrf(j, &a);
		memcpy(c.p, &info, sizeof info);
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_LAUNCH_FAILED;
}

/* ---- cuBLAS entry points ---- */

EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *ph) { return handle_create(ph, KIND_BLAS); }
EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { return handle_destroy(h, KIND_BLAS); }

EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t h, CUstream s)
{
	return handle_set_stream(h, KIND_BLAS, s);
}

EXPORT cublasStatus_t cublasGetStream_v2(cublasHandle_t h, CUstream *ps)
{
	return handle_get_stream(h, KIND_BLAS, ps);
}

static cublasStatus_t gemm(cublasHandle_t h, int f32, int ta, int tb, int m, int n, int k, double alpha,
			   const void *A, int lda, const void *B, int ldb, double beta, void *C, int ldc)
{
	struct fhandle *x;
	struct fstream *s;
	struct libjob j = {.op = LIB_GEMM, .f32 = f32, .ta = ta != CUBLAS_OP_N, .tb = tb != CUBLAS_OP_N};
	int product = k > 0 && alpha != 0, st = lock_op(h, KIND_BLAS, &x, &s);
	if (st != 0)
		return st;
	if (bad_trans(ta) || bad_trans(tb) || m < 0 || n < 0 || k < 0 || bad_ld(lda, j.ta ? k : m) ||
	    bad_ld(ldb, j.tb ? n : k) || bad_ld(ldc, m))
		return unlock_status(CUBLAS_STATUS_INVALID_VALUE);
	if (m == 0 || n == 0)
		return unlock_status(CUBLAS_STATUS_SUCCESS);
	j.m = (size_t)m, j.n = (size_t)n, j.k = (size_t)k, j.alpha = alpha, j.beta = beta;
	if (product) {
		j.a = j.ta ? devmat(A, k, m, lda) : devmat(A, m, k, lda);
		j.b = j.tb ? devmat(B, n, k, ldb) : devmat(B, k, n, ldb);
	}
	j.c = devmat(C, m, n, ldc);
	return submit_job(x, s, &j);
}

EXPORT cublasStatus_t cublasDgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k, const double *alpha,
				     const double *A, int lda, const double *B, int ldb, const double *beta, double *C,
				     int ldc)
{
	if (alpha == NULL || beta == NULL)
		return h == NULL ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_INVALID_VALUE;
	return gemm(h, 0, ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha,
				     const float *A, int lda, const float *B, int ldb, const float *beta, float *C,
				     int ldc)
{
	if (alpha == NULL || beta == NULL)
		return h == NULL ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_INVALID_VALUE;
	return gemm(h, 1, ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

static cublasStatus_t syrk(cublasHandle_t h, int f32, int uplo, int trans, int n, int k, double alpha,
			   const void *A, int lda, double beta, void *C, int ldc)
{
	struct fhandle *x;
	struct fstream *s;
	struct libjob j = {.op = LIB_SYRK, .f32 = f32, .uplo = uplo, .ta = trans != CUBLAS_OP_N};
	int st = lock_op(h, KIND_BLAS, &x, &s);
	if (st != 0)
		return st;
	if (bad_fill(uplo) || bad_trans(trans) || n < 0 || k < 0 || bad_ld(lda, j.ta ? k : n) || bad_ld(ldc, n))
		return unlock_status(CUBLAS_STATUS_INVALID_VALUE);
	if (n == 0)
		return unlock_status(CUBLAS_STATUS_SUCCESS);
	j.n = (size_t)n, j.k = (size_t)k, j.alpha = alpha, j.beta = beta;
	if (k > 0 && alpha != 0)
		j.a = j.ta ? devmat(A, k, n, lda) : devmat(A, n, k, lda);
	j.c = devmat(C, n, n, ldc);
	return submit_job(x, s, &j);
}

EXPORT cublasStatus_t cublasDsyrk_v2(cublasHandle_t h, int uplo, int trans, int n, int k, const double *alpha,
				     const double *A, int lda, const double *beta, double *C, int ldc)
{
	if (alpha == NULL || beta == NULL)
		return h == NULL ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_INVALID_VALUE;
	return syrk(h, 0, uplo, trans, n, k, *alpha, A, lda, *beta, C, ldc);
}

EXPORT cublasStatus_t cublasSsyrk_v2(cublasHandle_t h, int uplo, int trans, int n, int k, const float *alpha,
				     const float *A, int lda, const float *beta, float *C, int ldc)
{
	if (alpha == NULL || beta == NULL)
		return h == NULL ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_INVALID_VALUE;
	return syrk(h, 1, uplo, trans, n, k, *alpha, A, lda, *beta, C, ldc);
}

static cublasStatus_t trsm(cublasHandle_t h, int f32, int side, int uplo, int trans, int diag, int m, int n,
			   double alpha, const void *A, int lda, void *B, int ldb)
{
	struct fhandle *x;
	struct fstream *s;
	struct libjob j = {.op = LIB_TRSM, .f32 = f32, .side = side, .uplo = uplo, .ta = trans != CUBLAS_OP_N,
			   .diag = diag};
	int ka = side == CUBLAS_SIDE_LEFT ? m : n, st = lock_op(h, KIND_BLAS, &x, &s);
	if (st != 0)
		return st;
	if ((side != CUBLAS_SIDE_LEFT && side != CUBLAS_SIDE_RIGHT) || bad_fill(uplo) || bad_trans(trans) ||
	    (diag != CUBLAS_DIAG_NON_UNIT && diag != CUBLAS_DIAG_UNIT) || m < 0 || n < 0 || bad_ld(lda, ka) ||
	    bad_ld(ldb, m))
		return unlock_status(CUBLAS_STATUS_INVALID_VALUE);
	if (m == 0 || n == 0)
		return unlock_status(CUBLAS_STATUS_SUCCESS);
	j.m = (size_t)m, j.n = (size_t)n, j.alpha = alpha;
	if (alpha != 0)
		j.a = devmat(A, ka, ka, lda);
	j.b = devmat(B, m, n, ldb);
	return submit_job(x, s, &j);
}

EXPORT cublasStatus_t cublasDtrsm_v2(cublasHandle_t h, int side, int uplo, int trans, int diag, int m, int n,
				     const double *alpha, const double *A, int lda, double *B, int ldb)
{
	if (alpha == NULL)
		return h == NULL ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_INVALID_VALUE;
	return trsm(h, 0, side, uplo, trans, diag, m, n, *alpha, A, lda, B, ldb);
}

EXPORT cublasStatus_t cublasStrsm_v2(cublasHandle_t h, int side, int uplo, int trans, int diag, int m, int n,
				     const float *alpha, const float *A, int lda, float *B, int ldb)
{
	if (alpha == NULL)
		return h == NULL ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_INVALID_VALUE;
	return trsm(h, 1, side, uplo, trans, diag, m, n, *alpha, A, lda, B, ldb);
}

/* ---- cuSOLVER entry points ---- */

EXPORT cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *ph) { return handle_create(ph, KIND_SOLVER); }
EXPORT cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t h) { return handle_destroy(h, KIND_SOLVER); }

EXPORT cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t h, CUstream s)
{
	return handle_set_stream(h, KIND_SOLVER, s);
}

EXPORT cusolverStatus_t cusolverDnGetStream(cusolverDnHandle_t h, CUstream *ps)
{
	return handle_get_stream(h, KIND_SOLVER, ps);
}

/* The workspace potrf wants, in elements: n (at least 1). A host-side call. */
static cusolverStatus_t potrf_size(cusolverDnHandle_t h, int uplo, int n, int lda, int *lwork)
{
	struct fhandle *x;
	int st = lock_handle(h, KIND_SOLVER, &x);
	if (st != 0)
		return st;
	if (bad_fill(uplo) || n < 0 || bad_ld(lda, n) || lwork == NULL)
		return unlock_status(CUSOLVER_STATUS_INVALID_VALUE);
	*lwork = n > 0 ? n : 1;
	return unlock_status(CUSOLVER_STATUS_SUCCESS);
}

EXPORT cusolverStatus_t cusolverDnDpotrf_bufferSize(cusolverDnHandle_t h, int uplo, int n, double *A, int lda,
						    int *lwork)
{
	(void)A;
	return potrf_size(h, uplo, n, lda, lwork);
}

EXPORT cusolverStatus_t cusolverDnSpotrf_bufferSize(cusolverDnHandle_t h, int uplo, int n, float *A, int lda,
						    int *lwork)
{
	(void)A;
	return potrf_size(h, uplo, n, lda, lwork);
}

static cusolverStatus_t potrf(cusolverDnHandle_t h, int f32, int uplo, int n, void *A, int lda, void *work,
			      int lwork, int *info)
{
	struct fhandle *x;
	struct fstream *s;
	struct libjob j = {.op = LIB_POTRF, .f32 = f32, .uplo = uplo};
	int st = lock_op(h, KIND_SOLVER, &x, &s);
	if (st != 0)
		return st;
	if (bad_fill(uplo) || n < 0 || bad_ld(lda, n) || lwork < 0)
		return unlock_status(CUSOLVER_STATUS_INVALID_VALUE);
	j.n = (size_t)n;
	j.a = devmat(A, n, n, lda);
	j.b = devmat(work, lwork, 1, lwork > 0 ? lwork : 1);
	j.c = devmat(info, 1, 1, 1);
	return submit_job(x, s, &j);
}

EXPORT cusolverStatus_t cusolverDnDpotrf(cusolverDnHandle_t h, int uplo, int n, double *A, int lda,
					 double *work, int lwork, int *info)
{
	return potrf(h, 0, uplo, n, A, lda, work, lwork, info);
}

EXPORT cusolverStatus_t cusolverDnSpotrf(cusolverDnHandle_t h, int uplo, int n, float *A, int lda, float *work,
					 int lwork, int *info)
{
	return potrf(h, 1, uplo, n, A, lda, work, lwork, info);
}

/*
 * ---- NCCL stand-in ----
 *
 * The same library file serves as libnccl.so.2, with the prototypes and
 * result codes of nccl.h (version 2.23.4), for ranks that are devices of
 * this process; with PZ_FAKECUDA_NCCL_PROCESSES=1, for ranks in several
 * processes, with the same semantics (see the NCCL across processes
 * section: what follows describes the structures of one process, which
 * that section mirrors in shared memory). ncclGetUniqueId makes an id: a magic string, random-ish
 * bytes and a checksum over them, so that ncclCommInitRank can tell a
 * damaged id (one passed wrong by value) from a good one. Each
 * ncclCommInitRank joins the clique of ranks with the same id (a
 * rendezvous table keyed by all 128 bytes) on the device of the context
 * current on the calling thread, and waits until all nranks have joined,
 * at most PZ_FAKECUDA_NCCL_TIMEOUT_MS (then ncclSystemError for every
 * rank that waited). Two ranks on one device fail with ncclInvalidUsage,
 * as NCCL's "Duplicate GPU detected" does.
 *
 * A collective checks its arguments at the call (bad ones return
 * ncclInvalidArgument, as NCCL's ArgsCheck does, and queue nothing),
 * takes the communicator's next sequence number and is queued on its
 * stream as an operation (on the default stream it runs in the caller,
 * or at ncclGroupEnd inside a group). When a stream reaches it, the rank
 * joins the collective of that sequence number of its clique and waits,
 * at most the timeout, for all ranks to join. The last to arrive checks
 * that they agree (the collective, count, type, op and root; if not,
 * every rank's communicator gets ncclInvalidUsage), maps every rank's
 * buffers, computes the result once (in rank order, so results are
 * deterministic) into a buffer of its own and writes every rank's
 * receive buffer, then releases the others. Reading every send buffer
 * before writing any receive buffer makes in-place calls work. A
 * collective that cannot complete (a rank timed out, arrived on a failed
 * stream, or was destroyed or aborted before arriving) writes nothing
 * and gives every communicator an asynchronous error
 * (ncclCommGetAsyncError): the cause to the rank at fault, ncclRemoteError
 * to the others. A communicator with an error refuses further
 * collectives with it; ncclGetLastError(comm) returns its message (the
 * calling thread's last error for a comm without one). A buffer that is
 * no longer live device memory when the collective runs fails that
 * rank's stream with CUDA_ERROR_ILLEGAL_ADDRESS, as a kernel's would.
 *
 * Point-to-point calls (ncclSend, ncclRecv: NCCL 2.7) check their
 * arguments at the call as collectives do (a type or peer out of range,
 * a buffer that is not count elements of the device's memory:
 * ncclInvalidArgument) and are queued the same way. Messages are
 * matched per ordered pair of ranks in issue order: a communicator
 * numbers its sends to each peer and its receives from each peer, and
 * the k-th ncclSend from s to r is the message of the k-th ncclRecv of
 * r from s. Each message is a rendezvous (struct fmsg) that both sides
 * join when their streams reach them; once both are there, whichever
 * side comes second checks that they agree on count and type (if not,
 * both communicators get ncclInvalidUsage and nothing is written) and
 * copies the send buffer into the receive buffer, with g_mu held, so
 * neither buffer can be freed meanwhile. A side waits, at most the
 * timeout, until its message is delivered: a send without its receive
 * times out like a receive without its send, ncclSystemError for both
 * ranks. A side that cannot take part (failed stream or communicator)
 * or whose peer's communicator is gone ends the message as a rank ends
 * a collective: the cause to it, ncclRemoteError to the other; a buffer
 * no longer there fails its rank's stream with
 * CUDA_ERROR_ILLEGAL_ADDRESS. Sending to oneself works: both sides of
 * the message are the same rank's.
 *
 * Sends do not complete before their receives (as NCCL's do beyond its
 * small eager threshold), so outside a group p2p deadlocks where NCCL
 * may (two ranks that each Send, then Recv, on one stream each wait
 * until the timeout); that catches programs that rely on buffering.
 * Inside a group, which is how NCCL wants p2p issued, a thread's sends
 * and receives on one stream are not queued one by one but gathered
 * into a single operation, queued at the outermost ncclGroupEnd (on the
 * default stream, run there on a thread of its own as collectives are):
 * when the stream reaches it, all of them join their messages first and
 * then wait together, so exchanges, gathers and scatters progress in any
 * issue order, as one fused NCCL kernel does. Collectives of the group
 * on that stream were queued at their calls, so they run before it.
 *
 * Communicators and cliques are never freed, so stale handles fail
 * cleanly (ncclInvalidArgument); a collective is freed when all its
 * ranks have left it, a message when both its sides have.
 */

typedef int ncclResult_t;
typedef struct fcomm *ncclComm_t;

enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclNumResults = 8,
};

enum {
	ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
	ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclNumTypes, /* the fp8 types came in 2.24 */
};

enum { ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, ncclNumOps };

enum coll_kind { COLL_ALLREDUCE, COLL_BROADCAST, COLL_REDUCE, COLL_ALLGATHER, COLL_REDUCESCATTER };

#define NCCL_UNIQUE_ID_BYTES 128
#define NCCL_VERSION_CODE 22304 /* 2.23.4: 10000*major + 100*minor + patch */
#define NCCL_ID_MAGIC "pzfake-nccl-id"
#define NCCL_ID_SUM 120 /* the checksum's offset in the id */
#define NCCL_MSG 256

typedef struct {
	char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes in nccl.h");

/* A clique: the communicators made with one id. */
struct fclique {
	struct fclique *next; /* in g_cliques */
	ncclUniqueId id;
	int nranks, joined;
	enum { Q_JOINING, Q_READY, Q_FAILED } state;
	ncclResult_t err; /* of Q_FAILED, with msg */
	char msg[NCCL_MSG];
	struct fcomm **comms; /* by rank */
	struct fcoll *colls;  /* collectives some rank has reached */
	struct fmsg *msgs;    /* point-to-point messages some rank has reached */
	struct fshm *shm;     /* across processes: the shared segment, and nothing above but id, nranks, state */
};

/* A communicator: one rank of a clique. */
struct fcomm {
	struct fcomm *next; /* in g_comms */
	struct fclique *q;
	int rank, device;
	struct fctx *ctx;       /* the primary context of its device */
	unsigned long long seq; /* collectives enqueued */
	unsigned long long *sent, *received; /* by peer: ncclSend, ncclRecv calls enqueued */
	unsigned long pending;  /* collectives, sends and receives enqueued and not finished */
	int gone;               /* destroyed or aborted */
	ncclResult_t async;     /* its first asynchronous error, with msg */
	char msg[NCCL_MSG];
};

/* One rank's part of a collective in flight. */
struct crank {
	int present;         /* its stream has reached the collective */
	ncclResult_t broken; /* it arrived unable to take part: why */
	struct collarg a;
	ncclResult_t result; /* what its communicator gets */
	CUresult fault;      /* what its stream gets */
	char *send, *recv;   /* host addresses of its buffers, mapped by the last to arrive */
};

/* A collective in flight: the seq-th of its clique. */
struct fcoll {
	struct fcoll *next; /* in its clique's colls */
	unsigned long long seq;
	int arrived, left;
	enum { C_GATHERING, C_RUNNING, C_DONE } state;
	char *tmp;        /* the result, computed once */
	struct crank r[]; /* by rank */
};

/* One side of a point-to-point message: its ncclSend (0) or ncclRecv (1). */
struct mside {
	int present;         /* its stream has reached it */
	int left;            /* and has gone on */
	ncclResult_t broken; /* it arrived unable to take part: why */
	struct p2parg a;
	ncclResult_t result; /* what its communicator gets */
	CUresult fault;      /* what its stream gets */
};

/* A point-to-point message in flight: the seq-th from rank src to rank dst. */
struct fmsg {
	struct fmsg *next; /* in its clique's msgs */
	int src, dst;
	unsigned long long seq;
	int done; /* delivered, or ended with results */
	struct mside side[2];
};

/* What an ncclGroupStart/ncclGroupEnd pair defers on a thread. */
struct deferred {
	struct fcomm *init; /* a communicator that joined: wait for its clique */
	struct op *op;      /* a collective on the default stream of ctx, or the sends and receives for stream s */
	struct fctx *ctx;
	struct fstream *s;  /* OP_P2P's stream (referenced), NULL for the default stream */
	struct fcomm *comm; /* op's (the first item's for OP_P2P) */
	ncclResult_t result;
};

/* Across processes (see that section). */
struct fshm;
static void comm_sync_locked(struct fcomm *m);
static void comm_gone_locked(struct fcomm *m);
static ncclResult_t init_wait_shm_locked(struct fcomm *m, const struct timespec *d);
static CUresult run_nccl_shm(struct op *o, CUresult err);
static CUresult run_p2p_shm(struct op *o, CUresult err);
static ncclResult_t init_rank_shm(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank, struct fctx *c);

static struct fclique *g_cliques;
static struct fcomm *g_comms;
static pthread_cond_t g_ncv; /* NCCL waits, on CLOCK_MONOTONIC; broadcast when a clique or collective changes */
static _Atomic unsigned long long g_ids;
static __thread char t_nccl_error[NCCL_MSG]; /* ncclGetLastError: thread-local, as NCCL's */
static __thread int t_group_depth;
static __thread struct deferred *t_deferred;
static __thread size_t t_ndeferred, t_deferred_cap;

__attribute__((constructor)) static void nccl_cv_init(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&g_ncv, &a);
	pthread_condattr_destroy(&a);
}

static const char *const g_coll_names[] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather",
					   "ncclReduceScatter"};
static const char *const g_p2p_names[] = {"ncclSend", "ncclRecv"};

__attribute__((format(printf, 2, 3))) static ncclResult_t nccl_fail(ncclResult_t r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t_nccl_error, sizeof t_nccl_error, fmt, ap);
	va_end(ap);
	return r;
}

static ncclResult_t unlock_nccl(ncclResult_t r)
{
	pthread_mutex_unlock(&g_mu);
	return r;
}

static struct timespec deadline_after(unsigned long long ms)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += (time_t)(ms / 1000);
	t.tv_nsec += (long)(ms % 1000) * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	return t;
}

static int past(const struct timespec *d)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec > d->tv_sec || (t.tv_sec == d->tv_sec && t.tv_nsec >= d->tv_nsec);
}

static size_t type_size(int dtype)
{
	switch (dtype) {
	case ncclInt8:
	case ncclUint8:
		return 1;
	case ncclFloat16:
	case ncclBfloat16:
		return 2;
	case ncclInt32:
	case ncclUint32:
	case ncclFloat32:
		return 4;
	default:
		return 8;
	}
}

static int coll_reduces(int kind) { return kind == COLL_ALLREDUCE || kind == COLL_REDUCE || kind == COLL_REDUCESCATTER; }
static int coll_rooted(int kind) { return kind == COLL_BROADCAST || kind == COLL_REDUCE; }

/*
 * coll_elems gives the elements rank reads from its send buffer and
 * writes to its receive buffer in collective a of nranks; 0 when it does
 * not use one (Broadcast's send buffer but at the root, Reduce's receive
 * buffer but at the root). It fails on overflow.
 */
static int coll_elems(const struct collarg *a, int nranks, int rank, size_t *sendn, size_t *recvn)
{
	size_t all;
	if (__builtin_mul_overflow(a->count, (size_t)nranks, &all) ||
	    __builtin_mul_overflow(all, type_size(a->dtype), &all))
		return -1;
	*sendn = *recvn = a->count;
	switch (a->kind) {
	case COLL_BROADCAST:
		*sendn = rank == a->root ? a->count : 0;
		break;
	case COLL_REDUCE:
		*recvn = rank == a->root ? a->count : 0;
		break;
	case COLL_ALLGATHER:
		*recvn = a->count * (size_t)nranks;
		break;
	case COLL_REDUCESCATTER:
		*sendn = a->count * (size_t)nranks;
		break;
	}
	return 0;
}

/* ---- Unique ids ---- */

static unsigned long long splitmix64(unsigned long long *x)
{
	unsigned long long z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* id_sum is FNV-1a over the id's bytes before the checksum. */
static unsigned long long id_sum(const ncclUniqueId *id)
{
	unsigned long long h = 0xcbf29ce484222325ULL;
	for (int i = 0; i < NCCL_ID_SUM; i++)
		h = (h ^ (unsigned char)id->internal[i]) * 0x100000001b3ULL;
	return h;
}

static int id_valid(const ncclUniqueId *id)
{
	unsigned long long sum;
	memcpy(&sum, id->internal + NCCL_ID_SUM, sizeof sum);
	return memcmp(id->internal, NCCL_ID_MAGIC, sizeof NCCL_ID_MAGIC) == 0 && sum == id_sum(id);
}

/* ---- Cliques and communicators, with g_mu held ---- */

static struct fcomm *comm_find_locked(const struct fcomm *h)
{
	for (struct fcomm *m = g_comms; m != NULL; m = m->next)
		if (m == h)
			return m;
	return NULL;
}

/* comm_fail_locked gives m an asynchronous error, unless it has one. */
static void comm_fail_locked(struct fcomm *m, ncclResult_t r, const char *msg)
{
	if (m == NULL || m->async != ncclSuccess || r == ncclSuccess)
		return;
	m->async = r;
	snprintf(m->msg, sizeof m->msg, "%s", msg);
}

__attribute__((format(printf, 3, 4))) static void clique_fail_locked(struct fclique *q, ncclResult_t r, const char *fmt,
								       ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(q->msg, sizeof q->msg, fmt, ap);
	va_end(ap);
	q->state = Q_FAILED;
	q->err = r;
	pthread_cond_broadcast(&g_ncv);
}

/* clique_join_locked finds the joining clique of id, or makes one of nranks. */
static struct fclique *clique_join_locked(const ncclUniqueId *id, int nranks)
{
	struct fclique *q;
	for (q = g_cliques; q != NULL; q = q->next)
		if (q->state == Q_JOINING && memcmp(&q->id, id, sizeof *id) == 0)
			return q;
	if ((q = calloc(1, sizeof *q)) == NULL || (q->comms = calloc((size_t)nranks, sizeof *q->comms)) == NULL) {
		free(q);
		return NULL;
	}
	q->id = *id;
	q->nranks = nranks;
	q->next = g_cliques;
	g_cliques = q;
	return q;
}

/* clique_complete_locked makes a clique whose ranks have all joined ready, unless two share a device. */
static void clique_complete_locked(struct fclique *q)
{
	for (int i = 0; i < q->nranks; i++)
		for (int j = 0; j < i; j++)
			if (q->comms[i]->device == q->comms[j]->device) {
				clique_fail_locked(q, ncclInvalidUsage,
						   "ncclCommInitRank: duplicate GPU: ranks %d and %d are both on device %d", j, i,
						   q->comms[i]->device);
				return;
			}
	q->state = Q_READY;
	pthread_cond_broadcast(&g_ncv);
}

/* init_wait_locked waits, at most the timeout, until m's clique is complete. */
static ncclResult_t init_wait_locked(struct fcomm *m)
{
	struct fclique *q = m->q;
	struct timespec d = deadline_after(g_nccl_timeout_ms);
	if (q->shm != NULL)
		return init_wait_shm_locked(m, &d);
	while (q->state == Q_JOINING && !past(&d))
		pthread_cond_timedwait(&g_ncv, &g_mu, &d);
	if (q->state == Q_JOINING)
		clique_fail_locked(q, ncclSystemError, "ncclCommInitRank: timed out after %llu ms with %d of %d ranks joined",
				   g_nccl_timeout_ms, q->joined, q->nranks);
	if (q->state == Q_FAILED) {
		m->gone = 1;
		snprintf(t_nccl_error, sizeof t_nccl_error, "%s", q->msg);
		return q->err;
	}
	return ncclSuccess;
}

/*
 * comm_check_locked finds communicator h for call: live, with a clique
 * that has not failed (one still joining inside a group is fine), and
 * no asynchronous error.
 */
static ncclResult_t comm_check_locked(const char *call, struct fcomm *h, struct fcomm **out)
{
	struct fcomm *m = comm_find_locked(h);
	if (m == NULL)
		return nccl_fail(ncclInvalidArgument, "%s: comm is not a communicator", call);
	if (m->gone)
		return nccl_fail(ncclInvalidArgument, "%s: the communicator was destroyed", call);
	comm_sync_locked(m);
	if (m->q->state == Q_FAILED)
		return nccl_fail(m->q->err, "%s: %s", call, m->q->msg);
	if (m->async != ncclSuccess)
		return nccl_fail(m->async, "%s: the communicator has failed: %s", call, m->msg);
	*out = m;
	return ncclSuccess;
}

/* defer_add remembers d until the thread's outermost ncclGroupEnd. */
static int defer_add(struct deferred d)
{
	if (t_ndeferred == t_deferred_cap) {
		size_t cap = t_deferred_cap ? 2 * t_deferred_cap : 8;
		struct deferred *t = realloc(t_deferred, cap * sizeof *t);
		if (t == NULL)
			return -1;
		t_deferred = t;
		t_deferred_cap = cap;
	}
	t_deferred[t_ndeferred++] = d;
	return 0;
}

/* ---- Collectives as their streams reach them ---- */

static struct fcoll *coll_get_locked(struct fclique *q, unsigned long long seq)
{
	struct fcoll *x;
	for (x = q->colls; x != NULL; x = x->next)
		if (x->seq == seq)
			return x;
	if ((x = calloc(1, sizeof *x + (size_t)q->nranks * sizeof x->r[0])) == NULL)
		return NULL;
	x->seq = seq;
	x->next = q->colls;
	q->colls = x;
	return x;
}

static void coll_free_locked(struct fclique *q, struct fcoll *x)
{
	for (struct fcoll **pp = &q->colls; *pp != NULL; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	free(x->tmp);
	free(x);
}

/*
 * coll_end_locked ends x without computing it: rank at fault gets why
 * (none when at < 0), the others ncclRemoteError, and every communicator
 * of the clique the message.
 */
__attribute__((format(printf, 5, 6))) static void coll_end_locked(struct fclique *q, struct fcoll *x, int at,
								    ncclResult_t why, const char *fmt, ...)
{
	char msg[NCCL_MSG];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	for (int i = 0; i < q->nranks; i++) {
		x->r[i].result = at < 0 || i == at ? why : ncclRemoteError;
		comm_fail_locked(q->comms[i], x->r[i].result, msg);
	}
	x->state = C_DONE;
	pthread_cond_broadcast(&g_ncv);
}

/*
 * coll_failed_locked ends x if it cannot complete: a rank arrived unable
 * to take part, the clique failed, or a rank's communicator is gone
 * (destroyed, which waits for its collectives, so it will not arrive; or
 * aborted, which abandons them).
 */
static int coll_failed_locked(struct fclique *q, struct fcoll *x)
{
	const char *name = g_coll_names[0];
	for (int i = 0; i < q->nranks; i++)
		if (x->r[i].present) {
			name = g_coll_names[x->r[i].a.kind];
			break;
		}
	if (q->state == Q_FAILED) {
		coll_end_locked(q, x, -1, q->err, "%s #%llu: %s", name, x->seq, q->msg);
		return 1;
	}
	for (int i = 0; i < q->nranks; i++) {
		if (x->r[i].present && x->r[i].broken != ncclSuccess) {
			coll_end_locked(q, x, i, x->r[i].broken, "%s #%llu: rank %d could not take part (%s)", name, x->seq, i,
					x->r[i].broken == ncclUnhandledCudaError ? "its stream had failed"
										  : "its communicator had failed");
			return 1;
		}
		if (q->comms[i] != NULL && q->comms[i]->gone) {
			coll_end_locked(q, x, i, ncclInvalidUsage, "%s #%llu: rank %d's communicator was destroyed or aborted",
					name, x->seq, i);
			return 1;
		}
	}
	return 0;
}

/* coll_mismatch_locked ends x with ncclInvalidUsage if its ranks disagree. */
static int coll_mismatch_locked(struct fclique *q, struct fcoll *x)
{
	const struct collarg *a0 = &x->r[0].a;
	for (int i = 1; i < q->nranks; i++) {
		const struct collarg *a = &x->r[i].a;
		const char *what = NULL;
		long long mine = 0, first = 0;
		if (a->kind != a0->kind) {
			coll_end_locked(q, x, -1, ncclInvalidUsage, "collective #%llu: rank %d called %s, rank 0 %s", x->seq, i,
					g_coll_names[a->kind], g_coll_names[a0->kind]);
			return 1;
		}
		if (a->count != a0->count)
			what = "count", mine = (long long)a->count, first = (long long)a0->count;
		else if (a->dtype != a0->dtype)
			what = "datatype", mine = a->dtype, first = a0->dtype;
		else if (coll_reduces(a->kind) && a->redop != a0->redop)
			what = "op", mine = a->redop, first = a0->redop;
		else if (coll_rooted(a->kind) && a->root != a0->root)
			what = "root", mine = a->root, first = a0->root;
		if (what != NULL) {
			coll_end_locked(q, x, -1, ncclInvalidUsage, "%s #%llu: rank %d passed %s %lld, rank 0 %lld",
					g_coll_names[a->kind], x->seq, i, what, mine, first);
			return 1;
		}
	}
	return 0;
}

/*
 * coll_map_locked maps every rank's buffers to host addresses, as a
 * kernel of its device sees them, and allocates the result buffer. A
 * buffer that is no longer there ends x: that rank's stream fails with
 * CUDA_ERROR_ILLEGAL_ADDRESS.
 */
static int coll_map_locked(struct fclique *q, struct fcoll *x)
{
	const struct collarg *a0 = &x->r[0].a;
	size_t esz = type_size(a0->dtype), total = a0->count * esz * (size_t)q->nranks;
	for (int i = 0; i < q->nranks; i++) {
		struct crank *r = &x->r[i];
		int dev = q->comms[i]->device;
		size_t sendn, recvn;
		coll_elems(&r->a, q->nranks, i, &sendn, &recvn); /* checked when it was called */
		r->send = sendn == 0 ? NULL : kernel_range_locked(dev, r->a.send, sendn * esz);
		r->recv = recvn == 0 ? NULL : kernel_range_locked(dev, r->a.recv, recvn * esz);
		if ((sendn > 0 && r->send == NULL) || (recvn > 0 && r->recv == NULL)) {
			r->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
			coll_end_locked(q, x, i, ncclUnhandledCudaError,
					"%s #%llu: rank %d's buffer is no longer device memory of device %d",
					g_coll_names[a0->kind], x->seq, i, dev);
			return 1;
		}
	}
	if ((x->tmp = malloc(total > 0 ? total : 1)) == NULL) {
		coll_end_locked(q, x, -1, ncclSystemError, "%s #%llu: out of host memory", g_coll_names[a0->kind], x->seq);
		return 1;
	}
	return 0;
}

/* ---- Arithmetic: element by element, through memcpy (buffers may be misaligned) ---- */

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, f;
	float out;
	if (exp == 0 && mant == 0) {
		f = sign;
	} else if (exp == 0) { /* subnormal: normalize */
		exp = 127 - 15 + 1;
		while (!(mant & 0x400u)) {
			mant <<= 1;
			exp--;
		}
		f = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
	} else if (exp == 31) {
		f = sign | 0x7f800000u | (mant << 13);
	} else {
		f = sign | ((exp + 127 - 15) << 23) | (mant << 13);
	}
	memcpy(&out, &f, sizeof out);
	return out;
}

/* float_to_half rounds to nearest, ties to even. */
static uint16_t float_to_half(float v)
{
	uint32_t f, sign, mant, half, rem, shift, mid;
	int exp;
	memcpy(&f, &v, sizeof f);
	sign = (f >> 16) & 0x8000u;
	mant = f & 0x7fffffu;
	if (((f >> 23) & 0xff) == 0xff)
		return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
	exp = (int)((f >> 23) & 0xff) - 127 + 15;
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (exp <= 0) {
		if (exp < -10)
			return (uint16_t)sign;
		mant |= 0x800000u;
		shift = (uint32_t)(14 - exp);
		half = mant >> shift;
		rem = mant & ((1u << shift) - 1);
		mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (half & 1)))
			half++;
		return (uint16_t)(sign | half);
	}
	half = sign | ((uint32_t)exp << 10) | (mant >> 13);
	rem = mant & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (half & 1)))
		half++; /* a carry into the exponent is right, up to infinity */
	return (uint16_t)half;
}

static float bf16_to_float(uint16_t h)
{
	uint32_t f = (uint32_t)h << 16;
	float out;
	memcpy(&out, &f, sizeof out);
	return out;
}

static uint16_t float_to_bf16(float v)
{
	uint32_t f;
	memcpy(&f, &v, sizeof f);
	if ((f & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((f >> 16) | 0x40u); /* quiet NaN */
	f += 0x7fffu + ((f >> 16) & 1);
	return (uint16_t)(f >> 16);
}

/* REDUCE combines n elements of type T at in into acc; sums and products wrap in U (unsigned for integers). */
#define REDUCE(T, U)                                                                                                   \
	for (size_t i = 0; i < n; i++) {                                                                               \
		T u, v, w;                                                                                             \
		memcpy(&u, acc + i * sizeof(T), sizeof(T));                                                            \
		memcpy(&v, in + i * sizeof(T), sizeof(T));                                                             \
		switch (redop) {                                                                                       \
		case ncclProd: w = (T)((U)u * (U)v); break;                                                            \
		case ncclMax: w = u > v ? u : v; break;                                                                \
		case ncclMin: w = u < v ? u : v; break;                                                                \
		default: w = (T)((U)u + (U)v); break; /* ncclSum, and ncclAvg before its division */                  \
		}                                                                                                      \
		memcpy(acc + i * sizeof(T), &w, sizeof(T));                                                            \
	}

/* REDUCE16 is REDUCE for 16-bit floats, computed in float and rounded at each step. */
#define REDUCE16(TOF, FROMF)                                                                                           \
	for (size_t i = 0; i < n; i++) {                                                                               \
		uint16_t hu, hv;                                                                                       \
		float u, v, w;                                                                                         \
		memcpy(&hu, acc + 2 * i, 2);                                                                           \
		memcpy(&hv, in + 2 * i, 2);                                                                            \
		u = TOF(hu), v = TOF(hv);                                                                              \
		switch (redop) {                                                                                       \
		case ncclProd: w = u * v; break;                                                                       \
		case ncclMax: w = u > v ? u : v; break;                                                                \
		case ncclMin: w = u < v ? u : v; break;                                                                \
		default: w = u + v; break;                                                                             \
		}                                                                                                      \
		hu = FROMF(w);                                                                                         \
		memcpy(acc + 2 * i, &hu, 2);                                                                           \
	}

static void combine(char *acc, const char *in, size_t n, int dtype, int redop)
{
	switch (dtype) {
	case ncclInt8: REDUCE(int8_t, uint8_t) break;
	case ncclUint8: REDUCE(uint8_t, uint8_t) break;
	case ncclInt32: REDUCE(int32_t, uint32_t) break;
	case ncclUint32: REDUCE(uint32_t, uint32_t) break;
	case ncclInt64: REDUCE(int64_t, uint64_t) break;
	case ncclUint64: REDUCE(uint64_t, uint64_t) break;
	case ncclFloat16: REDUCE16(half_to_float, float_to_half) break;
	case ncclFloat32: REDUCE(float, float) break;
	case ncclFloat64: REDUCE(double, double) break;
	case ncclBfloat16: REDUCE16(bf16_to_float, float_to_bf16) break;
	}
}

/* DIVIDE divides n elements of type T at acc by d (ncclAvg). */
#define DIVIDE(T)                                                                                                      \
	for (size_t i = 0; i < n; i++) {                                                                               \
		T u;                                                                                                   \
		memcpy(&u, acc + i * sizeof(T), sizeof(T));                                                            \
		u = (T)(u / (T)d);                                                                                     \
		memcpy(acc + i * sizeof(T), &u, sizeof(T));                                                            \
	}

#define DIVIDE16(TOF, FROMF)                                                                                           \
	for (size_t i = 0; i < n; i++) {                                                                               \
		uint16_t h;                                                                                            \
		memcpy(&h, acc + 2 * i, 2);                                                                            \
		h = FROMF(TOF(h) / (float)d);                                                                          \
		memcpy(acc + 2 * i, &h, 2);                                                                            \
	}

static void divide(char *acc, size_t n, int dtype, int d)
{
	switch (dtype) {
	case ncclInt8: DIVIDE(int8_t) break;
	case ncclUint8: DIVIDE(uint8_t) break;
	case ncclInt32: DIVIDE(int32_t) break;
	case ncclUint32: DIVIDE(uint32_t) break;
	case ncclInt64: DIVIDE(int64_t) break;
	case ncclUint64: DIVIDE(uint64_t) break;
	case ncclFloat16: DIVIDE16(half_to_float, float_to_half) break;
	case ncclFloat32: DIVIDE(float) break;
	case ncclFloat64: DIVIDE(double) break;
	case ncclBfloat16: DIVIDE16(bf16_to_float, float_to_bf16) break;
	}
}

/*
 * coll_compute runs x without g_mu: every rank's stream is inside it, so
 * nobody else touches the buffers. It reads all send buffers into tmp
 * before it writes any receive buffer, so in-place calls work.
 */
static void coll_compute(int nranks, struct fcoll *x)
{
	const struct collarg *a = &x->r[0].a;
	size_t esz = type_size(a->dtype), bytes = a->count * esz;
	size_t total = a->kind == COLL_REDUCESCATTER ? bytes * (size_t)nranks : bytes;
	if (bytes == 0)
		return;
	switch (a->kind) {
	case COLL_ALLREDUCE:
	case COLL_REDUCE:
	case COLL_REDUCESCATTER:
		memcpy(x->tmp, x->r[0].send, total);
		for (int i = 1; i < nranks; i++)
			combine(x->tmp, x->r[i].send, total / esz, a->dtype, a->redop);
		if (a->redop == ncclAvg)
			divide(x->tmp, total / esz, a->dtype, nranks);
		for (int i = 0; i < nranks; i++) {
			if (a->kind == COLL_ALLREDUCE)
				memcpy(x->r[i].recv, x->tmp, bytes);
			else if (a->kind == COLL_REDUCESCATTER)
				memcpy(x->r[i].recv, x->tmp + (size_t)i * bytes, bytes);
			else if (i == a->root)
				memcpy(x->r[i].recv, x->tmp, bytes);
		}
		break;
	case COLL_BROADCAST:
		memcpy(x->tmp, x->r[a->root].send, bytes);
		for (int i = 0; i < nranks; i++)
			memcpy(x->r[i].recv, x->tmp, bytes);
		break;
	case COLL_ALLGATHER:
		for (int i = 0; i < nranks; i++)
			memcpy(x->tmp + (size_t)i * bytes, x->r[i].send, bytes);
		for (int i = 0; i < nranks; i++)
			memcpy(x->r[i].recv, x->tmp, bytes * (size_t)nranks);
		break;
	}
}

/*
 * run_nccl runs a collective as its stream reaches it (or in the caller,
 * for the default stream), without g_mu held: it joins the collective of
 * its sequence number, and the last rank to arrive decides and computes
 * it. err is the stream's sticky error: the rank then arrives only to
 * tell the others. It returns the stream's new error, if any.
 */
static CUresult run_nccl(struct op *o, CUresult err)
{
	struct fcomm *m = o->u.nccl.comm;
	struct fclique *q = m->q;
	struct timespec d = deadline_after(g_nccl_timeout_ms);
	struct fcoll *x;
	struct crank *me;
	CUresult fault;
	if (q->shm != NULL)
		return run_nccl_shm(o, err);
	pthread_mutex_lock(&g_mu);
	if ((x = coll_get_locked(q, o->u.nccl.seq)) == NULL) {
		comm_fail_locked(m, ncclSystemError, "out of host memory");
		m->pending--;
		pthread_cond_broadcast(&g_ncv);
		pthread_mutex_unlock(&g_mu);
		return CUDA_SUCCESS;
	}
	me = &x->r[m->rank];
	me->present = 1;
	me->a = o->u.nccl.a;
	if (err != CUDA_SUCCESS)
		me->broken = ncclUnhandledCudaError;
	else if (m->async != ncclSuccess)
		me->broken = m->async;
	x->arrived++;
	pthread_cond_broadcast(&g_ncv);
	for (;;) {
		if (x->state == C_RUNNING) {
			pthread_cond_wait(&g_ncv, &g_mu);
			continue;
		}
		if (x->state == C_DONE)
			break;
		if (coll_failed_locked(q, x))
			continue;
		if (x->arrived == q->nranks) {
			if (coll_mismatch_locked(q, x) || coll_map_locked(q, x))
				continue;
			x->state = C_RUNNING;
			pthread_mutex_unlock(&g_mu);
			coll_compute(q->nranks, x);
			pthread_mutex_lock(&g_mu);
			x->state = C_DONE;
			pthread_cond_broadcast(&g_ncv);
			continue;
		}
		if (past(&d)) {
			coll_end_locked(q, x, -1, ncclSystemError, "%s #%llu: timed out after %llu ms with %d of %d ranks there",
					g_coll_names[me->a.kind], x->seq, g_nccl_timeout_ms, x->arrived, q->nranks);
			continue;
		}
		pthread_cond_timedwait(&g_ncv, &g_mu, &d);
	}
	fault = me->fault;
	if (++x->left == q->nranks)
		coll_free_locked(q, x);
	m->pending--;
	pthread_cond_broadcast(&g_ncv);
	pthread_mutex_unlock(&g_mu);
	return fault;
}

/* ---- Point-to-point messages as their streams reach them ---- */

static struct fmsg *msg_get_locked(struct fclique *q, int src, int dst, unsigned long long seq)
{
	struct fmsg *x;
	for (x = q->msgs; x != NULL; x = x->next)
		if (x->src == src && x->dst == dst && x->seq == seq)
			return x;
	if ((x = calloc(1, sizeof *x)) == NULL)
		return NULL;
	x->src = src;
	x->dst = dst;
	x->seq = seq;
	x->next = q->msgs;
	q->msgs = x;
	return x;
}

static void msg_free_locked(struct fclique *q, struct fmsg *x)
{
	for (struct fmsg **pp = &q->msgs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	free(x);
}

/*
 * msg_end_locked ends x without delivering it: side at (0 the sender, 1
 * the receiver; both when at < 0) gets why, the other ncclRemoteError,
 * and both ranks' communicators the message, which fmt continues.
 */
__attribute__((format(printf, 5, 6))) static void msg_end_locked(struct fclique *q, struct fmsg *x, int at,
								   ncclResult_t why, const char *fmt, ...)
{
	char msg[NCCL_MSG];
	int n = snprintf(msg, sizeof msg, "message #%llu from rank %d to rank %d: ", x->seq, x->src, x->dst);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
	va_end(ap);
	for (int i = 0; i < 2; i++)
		x->side[i].result = at < 0 || i == at ? why : ncclRemoteError;
	comm_fail_locked(q->comms[x->src], x->side[0].result, msg);
	comm_fail_locked(q->comms[x->dst], x->side[1].result, msg);
	x->done = 1;
	pthread_cond_broadcast(&g_ncv);
}

/*
 * msg_progress_locked delivers x once both its sides are there, or ends
 * it when it cannot be delivered: a side that arrived unable to take
 * part, a failed clique, a rank's communicator gone, sides that
 * disagree, a buffer no longer there. It returns whether x is done.
 */
static int msg_progress_locked(struct fclique *q, struct fmsg *x)
{
	static const char *const who[] = {"the sender", "the receiver"};
	const int rank[2] = {x->src, x->dst};
	const struct p2parg *s = &x->side[0].a, *r = &x->side[1].a;
	char *p[2] = {NULL, NULL};
	size_t bytes;
	if (x->done)
		return 1;
	if (q->state == Q_FAILED) {
		msg_end_locked(q, x, -1, q->err, "%s", q->msg);
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		if (x->side[i].present && x->side[i].broken != ncclSuccess) {
			msg_end_locked(q, x, i, x->side[i].broken, "%s (rank %d) could not take part (%s)", who[i], rank[i],
				       x->side[i].broken == ncclUnhandledCudaError ? "its stream had failed"
										  : "its communicator had failed");
			return 1;
		}
		if (q->comms[rank[i]] != NULL && q->comms[rank[i]]->gone) {
			msg_end_locked(q, x, i, ncclInvalidUsage, "%s's (rank %d) communicator was destroyed or aborted", who[i],
				       rank[i]);
			return 1;
		}
	}
	if (!x->side[0].present || !x->side[1].present)
		return 0;
	if (s->count != r->count || s->dtype != r->dtype) {
		msg_end_locked(q, x, -1, ncclInvalidUsage,
			       "ncclSend of rank %d passed count %zu, datatype %d; ncclRecv of rank %d count %zu, datatype %d",
			       x->src, s->count, s->dtype, x->dst, r->count, r->dtype);
		return 1;
	}
	bytes = s->count * type_size(s->dtype); /* checked at the calls */
	for (int i = 0; i < 2 && bytes > 0; i++) {
		int dev = q->comms[rank[i]]->device;
		if ((p[i] = kernel_range_locked(dev, x->side[i].a.buf, bytes)) == NULL) {
			x->side[i].fault = CUDA_ERROR_ILLEGAL_ADDRESS;
			msg_end_locked(q, x, i, ncclUnhandledCudaError, "%s's (rank %d) buffer is no longer device memory of device %d",
				       who[i], rank[i], dev);
			return 1;
		}
	}
	if (bytes > 0)
		memmove(p[1], p[0], bytes);
	x->done = 1;
	pthread_cond_broadcast(&g_ncv);
	return 1;
}

/*
 * run_p2p runs the sends and receives of o as their stream reaches them
 * (or in the caller, for the default stream), without g_mu held: each
 * joins its message, all of them before any waits, then it waits, at
 * most the timeout, until every message is done. err is the stream's
 * sticky error: the rank then arrives only to tell its peers. It returns
 * the stream's new error, if any.
 */
static CUresult run_p2p(struct op *o, CUresult err)
{
	size_t n = o->u.p2p.n;
	struct p2parg *v = o->u.p2p.v;
	struct fmsg **xs;
	struct timespec d = deadline_after(g_nccl_timeout_ms);
	CUresult fault = CUDA_SUCCESS;
	if (n > 0 && v[0].comm->q->shm != NULL) /* all or none: the mode is the process's */
		return run_p2p_shm(o, err);
	xs = calloc(n > 0 ? n : 1, sizeof *xs);
	pthread_mutex_lock(&g_mu);
	for (size_t i = 0; i < n; i++) {
		struct fcomm *m = v[i].comm;
		int src = v[i].recv ? v[i].peer : m->rank, dst = v[i].recv ? m->rank : v[i].peer;
		struct mside *me;
		if (xs == NULL || (xs[i] = msg_get_locked(m->q, src, dst, v[i].seq)) == NULL) {
			comm_fail_locked(m, ncclSystemError, "out of host memory");
			continue;
		}
		me = &xs[i]->side[v[i].recv];
		me->present = 1;
		me->a = v[i];
		if (err != CUDA_SUCCESS)
			me->broken = ncclUnhandledCudaError;
		else if (m->async != ncclSuccess)
			me->broken = m->async;
	}
	pthread_cond_broadcast(&g_ncv);
	for (;;) {
		int waiting = 0;
		for (size_t i = 0; i < n; i++)
			if (xs != NULL && xs[i] != NULL && !msg_progress_locked(v[i].comm->q, xs[i]))
				waiting = 1;
		if (!waiting)
			break;
		if (past(&d)) {
			for (size_t i = 0; i < n; i++)
				if (xs != NULL && xs[i] != NULL && !xs[i]->done)
					msg_end_locked(v[i].comm->q, xs[i], -1, ncclSystemError,
						       "%s timed out after %llu ms: the matching %s never came", g_p2p_names[v[i].recv],
						       g_nccl_timeout_ms, g_p2p_names[!v[i].recv]);
			continue;
		}
		pthread_cond_timedwait(&g_ncv, &g_mu, &d);
	}
	for (size_t i = 0; i < n; i++) {
		if (xs != NULL && xs[i] != NULL) {
			struct mside *me = &xs[i]->side[v[i].recv];
			if (fault == CUDA_SUCCESS)
				fault = me->fault;
			me->left = 1;
			if (xs[i]->side[!v[i].recv].left) /* a message to oneself has both sides here */
				msg_free_locked(v[i].comm->q, xs[i]);
		}
		v[i].comm->pending--;
	}
	pthread_cond_broadcast(&g_ncv);
	pthread_mutex_unlock(&g_mu);
	free(xs);
	return fault;
}

/*
 * ---- NCCL across processes (PZ_FAKECUDA_NCCL_PROCESSES=1) ----
 *
 * With PZ_FAKECUDA_NCCL_PROCESSES=1 at cuInit, a communicator's ranks
 * may be in different processes (under mpirun, say: each process loads
 * its own copy of the library and uses its own device ordinal, rank r
 * device r, whose memory is its own). The ranks meet in a POSIX
 * shared-memory segment named after the id's first random bytes,
 * /pzfake-nccl-<32 hex digits>, that every rank maps; ncclGetUniqueId
 * needs nothing more, so an id made in any process (with or without the
 * mode) serves. The segment holds a process-shared, robust mutex and a
 * condition variable (on CLOCK_MONOTONIC) that every wait of the section
 * uses, the ranks' table, a table of collectives in flight (SHM_COLLS)
 * and one of messages in flight (SHM_MSGS), and after them a data area
 * through which the bytes go, since device memory is the process's own:
 * a sender or a rank reaching a collective copies its send buffer into a
 * stretch of it; the rank that sees every rank there checks them as in
 * one process and combines the stretches in rank order into a result
 * stretch; each receiver copies its part out into its own buffer. The
 * data area grows as needed (posix_fallocate, so a full /dev/shm fails
 * the operation with ncclSystemError instead of a SIGBUS), each process
 * remapping it when it finds it grown; it never shrinks while the
 * communicator lives.
 *
 * ncclCommInitRank creates the segment (O_EXCL) or opens it, waits, at
 * most the timeout, for its creator to have initialized it, and joins
 * the rank to it; as in one process it refuses a rank that joined
 * already and a different nranks (ncclInvalidUsage), waits at most the
 * timeout for all ranks (then the segment is failed: ncclSystemError for
 * every rank), and fails two ranks on one device ordinal (the devices
 * being those of one host). Once the last rank has joined, or the join
 * has failed, the name is unlinked: the segment lives on in the
 * mappings, so that no name is left in /dev/shm whatever becomes of the
 * processes afterwards, and an id used again makes a new communicator,
 * as in one process. A process that opens a segment whose name has been
 * unlinked meanwhile starts over. ncclCommDestroy and ncclCommAbort mark
 * the rank gone in the segment (so peers waiting for it fail as in one
 * process) and, once the rank's operations have ended, unmap it; the
 * last rank to leave unlinks the name if it is still there.
 *
 * Collectives, sends and receives keep their semantics, checks and
 * errors: the asynchronous errors of every rank's communicator live in
 * the segment, and a process reads its communicator's at each call that
 * looks at it (ncclCommGetAsyncError, ncclGetLastError, the checks of
 * collectives), so a rank that never reached a collective that timed out
 * gets ncclSystemError too. What differs: a buffer is checked when its
 * rank reaches the operation (a send buffer is read then) and a receive
 * buffer again when the result is copied into it; a peer that dies is
 * only noticed by the timeout; a rank's sends and receives on several
 * communicators in one group poll their segments every millisecond. At
 * most SHM_RANKS ranks a communicator (ncclInvalidArgument beyond).
 *
 * Locking: g_mu may be held while taking a segment's mutex, never the
 * other way round; no segment mutex is held while taking another. The
 * data area, and a process's view of it (struct fshm), are only touched
 * with the segment's mutex held.
 */

#define SHM_RANKS MAX_DEVICES /* ranks of a communicator across processes */
#define SHM_COLLS 64          /* collectives in flight */
#define SHM_MSGS 1024         /* point-to-point messages in flight */
#define SHM_MAGIC 0x707a66616b65636eULL
#define SHM_ALIGN ((size_t)64)
#define SHM_GROW ((size_t)64 << 10) /* the data area's first size */

/* A stretch of the data area. */
struct shm_ext {
	int has;
	size_t off, len;
};

/* A rank of the segment. */
struct shm_rank {
	int joined, device, gone;
	ncclResult_t async; /* its communicator's first asynchronous error, with msg */
	char msg[NCCL_MSG];
};

/* One rank's part of a shared collective. */
struct shm_crank {
	int present, left;
	int nobuf;           /* a buffer was not device memory when it arrived */
	ncclResult_t broken; /* it arrived unable to take part: why */
	ncclResult_t result; /* what its communicator gets */
	CUresult fault;      /* what its stream gets */
	struct collarg a;    /* its pointers are its process's */
	struct shm_ext in;   /* its send buffer's bytes */
};

/* A collective in flight: the seq-th of the communicator. */
struct shm_coll {
	int used, done, arrived, left;
	unsigned long long seq;
	struct shm_ext out; /* the result, computed once */
	struct shm_crank r[SHM_RANKS];
};

/* One side of a shared message: its ncclSend (0) or ncclRecv (1). */
struct shm_mside {
	int present, left, nobuf;
	ncclResult_t broken, result;
	CUresult fault;
	int dtype;
	size_t count;
};

/* A message in flight: the seq-th from rank src to rank dst. */
struct shm_msg {
	int used, done, src, dst;
	int delivered; /* done, and data holds the bytes for the receiver */
	unsigned long long seq;
	struct shm_ext data;
	struct shm_mside side[2];
};

/* The segment: this control part, then the data area. */
struct shm_hdr {
	unsigned long long magic;
	_Atomic int ready; /* initialized by its creator */
	pthread_mutex_t mu;
	pthread_cond_t cv; /* broadcast at every change */
	int nranks, joined, attached;
	int state;    /* Q_JOINING, Q_READY, Q_FAILED */
	int unlinked; /* its name is gone */
	ncclResult_t err; /* of Q_FAILED, with msg */
	char msg[NCCL_MSG];
	size_t data_size;
	struct shm_rank ranks[SHM_RANKS];
	struct shm_coll colls[SHM_COLLS];
	struct shm_msg msgs[SHM_MSGS];
};

#define SHM_CTRL ((sizeof(struct shm_hdr) + 4095) & ~(size_t)4095)

/* A communicator's view of its segment. */
struct fshm {
	struct shm_hdr *h; /* NULL once unmapped */
	int fd;            /* kept, to grow the data area after the name is gone */
	char name[64];
	char *data; /* the data area as mapped here */
	size_t mapped;
};

static void shm_lock(struct fshm *s)
{
	if (pthread_mutex_lock(&s->h->mu) == EOWNERDEAD) /* a process died holding it */
		pthread_mutex_consistent(&s->h->mu);
}

static void shm_unlock(struct fshm *s) { pthread_mutex_unlock(&s->h->mu); }

static void shm_wake(struct fshm *s) { pthread_cond_broadcast(&s->h->cv); }

static void shm_wait(struct fshm *s, const struct timespec *d)
{
	if (pthread_cond_timedwait(&s->h->cv, &s->h->mu, d) == EOWNERDEAD)
		pthread_mutex_consistent(&s->h->mu);
}

static void shm_unmap(struct fshm *s)
{
	if (s->data != NULL)
		munmap(s->data, s->mapped);
	if (s->h != NULL)
		munmap(s->h, SHM_CTRL);
	if (s->fd >= 0)
		close(s->fd);
	s->data = NULL;
	s->mapped = 0;
	s->h = NULL;
	s->fd = -1;
}

/* shm_unlink_name removes the segment's name, once; with its mutex held. */
static void shm_unlink_name(struct fshm *s)
{
	if (s->h->unlinked)
		return;
	s->h->unlinked = 1;
	shm_unlink(s->name);
}

/* shm_base maps the data area as it now is and returns it; NULL if it cannot be mapped. */
static char *shm_base(struct fshm *s)
{
	size_t n = s->h->data_size;
	void *p;
	if (n == s->mapped)
		return s->data;
	p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, (off_t)SHM_CTRL);
	if (p == MAP_FAILED)
		return NULL;
	if (s->data != NULL)
		munmap(s->data, s->mapped);
	s->data = p;
	s->mapped = n;
	return s->data;
}

/* shm_overlaps tells whether [off, off+len) meets a stretch in use. */
static int shm_overlaps(const struct shm_hdr *h, size_t off, size_t len)
{
#define MEETS(e) ((e).has && off < (e).off + (e).len && (e).off < off + len)
	for (int i = 0; i < SHM_COLLS; i++) {
		const struct shm_coll *x = &h->colls[i];
		if (!x->used)
			continue;
		if (MEETS(x->out))
			return 1;
		for (int j = 0; j < h->nranks; j++)
			if (MEETS(x->r[j].in))
				return 1;
	}
	for (int i = 0; i < SHM_MSGS; i++)
		if (h->msgs[i].used && MEETS(h->msgs[i].data))
			return 1;
	return 0;
#undef MEETS
}

/* shm_try places len bytes at off if they fit there: at the lowest such off so far. */
static void shm_try(const struct shm_hdr *h, size_t off, size_t len, size_t *best)
{
	if (off < *best && !shm_overlaps(h, off, len))
		*best = off;
}

/*
 * shm_alloc finds a free stretch of len bytes (first fit: at 0 or just
 * after a stretch in use), growing the data area if need be, and maps
 * it; -1 when the system has no room.
 */
static int shm_alloc(struct fshm *s, size_t len, struct shm_ext *e)
{
	struct shm_hdr *h = s->h;
	size_t best = SIZE_MAX, end;
	len = (len + SHM_ALIGN - 1) & ~(SHM_ALIGN - 1);
	shm_try(h, 0, len, &best);
	for (int i = 0; i < SHM_COLLS; i++) {
		const struct shm_coll *x = &h->colls[i];
		if (!x->used)
			continue;
		if (x->out.has)
			shm_try(h, x->out.off + x->out.len, len, &best);
		for (int j = 0; j < h->nranks; j++)
			if (x->r[j].in.has)
				shm_try(h, x->r[j].in.off + x->r[j].in.len, len, &best);
	}
	for (int i = 0; i < SHM_MSGS; i++)
		if (h->msgs[i].used && h->msgs[i].data.has)
			shm_try(h, h->msgs[i].data.off + h->msgs[i].data.len, len, &best);
	end = best + len;
	if (end > h->data_size) {
		size_t size = h->data_size * 2;
		if (size < end)
			size = end;
		if (size < SHM_GROW)
			size = SHM_GROW;
		if (posix_fallocate(s->fd, (off_t)(SHM_CTRL + h->data_size), (off_t)(size - h->data_size)) != 0)
			return -1;
		h->data_size = size;
	}
	if (shm_base(s) == NULL)
		return -1;
	*e = (struct shm_ext){.has = 1, .off = best, .len = len};
	return 0;
}

/* shm_comm_fail gives rank's communicator an asynchronous error, unless it has one. */
static void shm_comm_fail(struct shm_hdr *h, int rank, ncclResult_t r, const char *msg)
{
	struct shm_rank *k = &h->ranks[rank];
	if (r == ncclSuccess || k->async != ncclSuccess)
		return;
	k->async = r;
	snprintf(k->msg, sizeof k->msg, "%s", msg);
}

__attribute__((format(printf, 3, 4))) static void shm_clique_fail(struct fshm *s, ncclResult_t r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->h->msg, sizeof s->h->msg, fmt, ap);
	va_end(ap);
	s->h->state = Q_FAILED;
	s->h->err = r;
	shm_unlink_name(s);
	shm_wake(s);
}

/* shm_sync_held copies to m what its segment says: the clique's state, m's error; with g_mu and the mutex held. */
static void shm_sync_held(struct fcomm *m)
{
	struct fclique *q = m->q;
	struct shm_hdr *h = q->shm->h;
	if (q->state == Q_JOINING && h->state != Q_JOINING) {
		q->state = h->state;
		q->err = h->err;
		snprintf(q->msg, sizeof q->msg, "%s", h->msg);
	}
	comm_fail_locked(m, h->ranks[m->rank].async, h->ranks[m->rank].msg);
}

/* comm_sync_locked is shm_sync_held for a live communicator across processes; nothing for others. */
static void comm_sync_locked(struct fcomm *m)
{
	struct fshm *s = m->q->shm;
	if (s == NULL || s->h == NULL || m->gone)
		return;
	shm_lock(s);
	shm_sync_held(m);
	shm_unlock(s);
}

/*
 * comm_gone_locked follows m's destruction or abortion (m->gone) across
 * processes: it marks the rank gone in the segment, and once m's
 * operations have ended, leaves it (the last rank to leave unlinks the
 * name, if still there) and unmaps it.
 */
static void comm_gone_locked(struct fcomm *m)
{
	struct fshm *s = m->q->shm;
	if (s == NULL || s->h == NULL || !m->gone)
		return;
	shm_lock(s);
	s->h->ranks[m->rank].gone = 1;
	if (m->pending == 0 && --s->h->attached == 0)
		shm_unlink_name(s);
	shm_wake(s);
	shm_unlock(s);
	if (m->pending == 0)
		shm_unmap(s);
}

/* shm_name makes the segment's name from the id's first random bytes. */
static void shm_name(char *out, size_t n, const ncclUniqueId *id)
{
	size_t k = (size_t)snprintf(out, n, "/pzfake-nccl-");
	for (int i = 16; i < 32 && k + 3 <= n; i++)
		k += (size_t)snprintf(out + k, n - k, "%02x", (unsigned char)id->internal[i]);
}

static void pause_briefly(void)
{
	struct timespec t = {0, 100000}; /* 100 µs */
	nanosleep(&t, NULL);
}

/*
 * shm_create makes the segment at fd, new and empty, and initializes it
 * for nranks ranks; then it is ready for the others.
 */
static ncclResult_t shm_create(struct fshm *s, int fd, int nranks)
{
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
	struct shm_hdr *h;
	int e = posix_fallocate(fd, 0, (off_t)SHM_CTRL);
	if (e != 0 || (h = mmap(NULL, SHM_CTRL, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		if (e == 0)
			e = errno;
		close(fd);
		shm_unlink(s->name);
		return nccl_fail(ncclSystemError, "ncclCommInitRank: cannot make shared memory %s: %s", s->name, strerror(e));
	}
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&h->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	h->magic = SHM_MAGIC;
	h->nranks = nranks;
	h->state = Q_JOINING;
	atomic_store_explicit(&h->ready, 1, memory_order_release);
	s->fd = fd;
	s->h = h;
	return ncclSuccess;
}

/* shm_open_existing maps the segment at fd once its creator has initialized it, waiting until d. */
static ncclResult_t shm_open_existing(struct fshm *s, int fd, const struct timespec *d)
{
	struct stat st;
	struct shm_hdr *h;
	for (;;) { /* the creator sizes it first */
		if (fstat(fd, &st) != 0) {
			int e = errno;
			close(fd);
			return nccl_fail(ncclSystemError, "ncclCommInitRank: shared memory %s: %s", s->name, strerror(e));
		}
		if ((size_t)st.st_size >= SHM_CTRL)
			break;
		if (past(d))
			goto stale;
		pause_briefly();
	}
	if ((h = mmap(NULL, SHM_CTRL, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		int e = errno;
		close(fd);
		return nccl_fail(ncclSystemError, "ncclCommInitRank: cannot map shared memory %s: %s", s->name, strerror(e));
	}
	while (!atomic_load_explicit(&h->ready, memory_order_acquire)) {
		if (past(d)) {
			munmap(h, SHM_CTRL);
			goto stale;
		}
		pause_briefly();
	}
	if (h->magic != SHM_MAGIC) {
		munmap(h, SHM_CTRL);
		close(fd);
		return nccl_fail(ncclSystemError, "ncclCommInitRank: %s is not the stand-in's shared memory", s->name);
	}
	s->fd = fd;
	s->h = h;
	return ncclSuccess;
stale: /* its creator died making it */
	close(fd);
	shm_unlink(s->name);
	return nccl_fail(ncclSystemError, "ncclCommInitRank: timed out after %llu ms waiting for shared memory %s",
			 g_nccl_timeout_ms, s->name);
}

/* shm_complete makes a segment whose ranks have all joined ready, unless two share a device. */
static void shm_complete(struct fshm *s)
{
	struct shm_hdr *h = s->h;
	for (int i = 0; i < h->nranks; i++)
		for (int j = 0; j < i; j++)
			if (h->ranks[i].device == h->ranks[j].device) {
				shm_clique_fail(s, ncclInvalidUsage,
						"ncclCommInitRank: duplicate GPU: ranks %d and %d are both on device %d", j, i,
						h->ranks[i].device);
				return;
			}
	h->state = Q_READY;
	shm_unlink_name(s);
	shm_wake(s);
}

/* shm_join maps the segment of id, making it if need be, and joins rank to it, trying until d. */
static ncclResult_t shm_join(struct fshm *s, const ncclUniqueId *id, int nranks, int rank, int device,
			     const struct timespec *d)
{
	shm_name(s->name, sizeof s->name, id);
	for (;;) {
		struct shm_hdr *h;
		ncclResult_t r;
		int fd;
		if (past(d))
			return nccl_fail(ncclSystemError, "ncclCommInitRank: timed out after %llu ms opening shared memory %s",
					 g_nccl_timeout_ms, s->name);
		if ((fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL, 0600)) >= 0) {
			r = shm_create(s, fd, nranks);
		} else if (errno != EEXIST) {
			return nccl_fail(ncclSystemError, "ncclCommInitRank: shm_open %s: %s", s->name, strerror(errno));
		} else if ((fd = shm_open(s->name, O_RDWR, 0)) < 0) {
			if (errno == ENOENT) /* unlinked meanwhile */
				continue;
			return nccl_fail(ncclSystemError, "ncclCommInitRank: shm_open %s: %s", s->name, strerror(errno));
		} else {
			r = shm_open_existing(s, fd, d);
		}
		if (r != ncclSuccess)
			return r;
		h = s->h;
		shm_lock(s);
		if (h->unlinked) { /* complete or failed before we came: a new one */
			shm_unlock(s);
			shm_unmap(s);
			continue;
		}
		if (h->nranks != nranks)
			r = nccl_fail(ncclInvalidUsage, "ncclCommInitRank: rank %d gave %d ranks, the ranks before it %d", rank,
				      nranks, h->nranks);
		else if (h->ranks[rank].joined)
			r = nccl_fail(ncclInvalidUsage, "ncclCommInitRank: rank %d has joined this id already", rank);
		if (r != ncclSuccess) {
			shm_unlock(s);
			shm_unmap(s);
			return r;
		}
		h->ranks[rank].joined = 1;
		h->ranks[rank].device = device;
		h->attached++;
		if (++h->joined == h->nranks)
			shm_complete(s);
		shm_wake(s);
		shm_unlock(s);
		return ncclSuccess;
	}
}

/*
 * init_rank_shm is ncclCommInitRank across processes, called with g_mu
 * held (lock_ctx), which it releases while it joins the segment.
 */
static ncclResult_t init_rank_shm(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank, struct fctx *c)
{
	int device = c->device;
	struct fctx *primary = PRIMARY(c);
	struct timespec d = deadline_after(g_nccl_timeout_ms);
	struct fclique *q;
	struct fcomm *m;
	struct fshm *s;
	unsigned long long *sent, *received;
	ncclResult_t r;
	pthread_mutex_unlock(&g_mu);
	if (nranks > SHM_RANKS)
		return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: %d ranks across processes (at most %d)", nranks,
				 SHM_RANKS);
	q = calloc(1, sizeof *q);
	m = calloc(1, sizeof *m);
	s = calloc(1, sizeof *s);
	sent = calloc((size_t)nranks, sizeof *sent);
	received = calloc((size_t)nranks, sizeof *received);
	if (q == NULL || m == NULL || s == NULL || sent == NULL || received == NULL) {
		r = nccl_fail(ncclSystemError, "ncclCommInitRank: out of host memory");
		goto fail;
	}
	s->fd = -1;
	if ((r = shm_join(s, id, nranks, rank, device, &d)) != ncclSuccess)
		goto fail;
	pthread_mutex_lock(&g_mu);
	q->id = *id;
	q->nranks = nranks;
	q->state = Q_JOINING;
	q->shm = s;
	*m = (struct fcomm){.next = g_comms, .q = q, .rank = rank, .device = device, .ctx = primary, .sent = sent,
			    .received = received};
	g_comms = m;
	if (t_group_depth > 0) {
		if (defer_add((struct deferred){.init = m}) != 0) {
			m->gone = 1;
			comm_gone_locked(m);
			return unlock_nccl(nccl_fail(ncclSystemError, "ncclCommInitRank: out of host memory"));
		}
		*comm = m;
		return unlock_nccl(ncclSuccess);
	}
	if ((r = init_wait_locked(m)) == ncclSuccess)
		*comm = m;
	return unlock_nccl(r);
fail:
	free(q);
	free(m);
	free(s);
	free(sent);
	free(received);
	return r;
}

/*
 * init_wait_shm_locked is init_wait_locked across processes: it waits
 * until d, without g_mu, for the segment's ranks to have joined.
 */
static ncclResult_t init_wait_shm_locked(struct fcomm *m, const struct timespec *d)
{
	struct fclique *q = m->q;
	struct fshm *s = q->shm;
	struct shm_hdr *h = s->h;
	if (h == NULL) /* aborted inside its group */
		return nccl_fail(ncclInvalidUsage, "ncclCommInitRank: the communicator was aborted");
	m->pending++; /* keeps the segment mapped */
	pthread_mutex_unlock(&g_mu);
	shm_lock(s);
	while (h->state == Q_JOINING && !past(d))
		shm_wait(s, d);
	if (h->state == Q_JOINING)
		shm_clique_fail(s, ncclSystemError, "ncclCommInitRank: timed out after %llu ms with %d of %d ranks joined",
				g_nccl_timeout_ms, h->joined, h->nranks);
	shm_unlock(s);
	pthread_mutex_lock(&g_mu);
	shm_lock(s);
	shm_sync_held(m);
	shm_unlock(s);
	m->pending--;
	pthread_cond_broadcast(&g_ncv);
	if (q->state == Q_FAILED) {
		m->gone = 1;
		snprintf(t_nccl_error, sizeof t_nccl_error, "%s", q->msg);
	}
	comm_gone_locked(m); /* failed, or aborted while it waited */
	return q->state == Q_FAILED ? q->err : ncclSuccess;
}

/* ---- Collectives across processes ---- */

static struct shm_coll *shm_coll_get(struct shm_hdr *h, unsigned long long seq)
{
	struct shm_coll *unused = NULL;
	for (int i = 0; i < SHM_COLLS; i++) {
		if (h->colls[i].used && h->colls[i].seq == seq)
			return &h->colls[i];
		if (!h->colls[i].used && unused == NULL)
			unused = &h->colls[i];
	}
	if (unused != NULL) {
		memset(unused, 0, sizeof *unused);
		unused->used = 1;
		unused->seq = seq;
	}
	return unused;
}

/* shm_coll_end is coll_end_locked across processes; it frees the send buffers' copies. */
__attribute__((format(printf, 5, 6))) static void shm_coll_end(struct fshm *s, struct shm_coll *x, int at,
								 ncclResult_t why, const char *fmt, ...)
{
	struct shm_hdr *h = s->h;
	char msg[NCCL_MSG];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	for (int i = 0; i < h->nranks; i++) {
		x->r[i].result = at < 0 || i == at ? why : ncclRemoteError;
		x->r[i].in.has = 0;
		shm_comm_fail(h, i, x->r[i].result, msg);
	}
	x->out.has = 0;
	x->done = 1;
	shm_wake(s);
}

/* shm_coll_failed is coll_failed_locked across processes. */
static int shm_coll_failed(struct fshm *s, struct shm_coll *x)
{
	struct shm_hdr *h = s->h;
	const char *name = g_coll_names[0];
	for (int i = 0; i < h->nranks; i++)
		if (x->r[i].present) {
			name = g_coll_names[x->r[i].a.kind];
			break;
		}
	if (h->state == Q_FAILED) {
		shm_coll_end(s, x, -1, h->err, "%s #%llu: %s", name, x->seq, h->msg);
		return 1;
	}
	for (int i = 0; i < h->nranks; i++) {
		if (x->r[i].present && x->r[i].broken != ncclSuccess) {
			shm_coll_end(s, x, i, x->r[i].broken, "%s #%llu: rank %d could not take part (%s)", name, x->seq, i,
				     x->r[i].broken == ncclUnhandledCudaError ? "its stream had failed"
									      : "its communicator had failed");
			return 1;
		}
		if (h->ranks[i].gone) {
			shm_coll_end(s, x, i, ncclInvalidUsage, "%s #%llu: rank %d's communicator was destroyed or aborted",
				     name, x->seq, i);
			return 1;
		}
	}
	return 0;
}

/* shm_coll_mismatch is coll_mismatch_locked across processes. */
static int shm_coll_mismatch(struct fshm *s, struct shm_coll *x)
{
	const struct collarg *a0 = &x->r[0].a;
	for (int i = 1; i < s->h->nranks; i++) {
		const struct collarg *a = &x->r[i].a;
		const char *what = NULL;
		long long mine = 0, first = 0;
		if (a->kind != a0->kind) {
			shm_coll_end(s, x, -1, ncclInvalidUsage, "collective #%llu: rank %d called %s, rank 0 %s", x->seq, i,
				     g_coll_names[a->kind], g_coll_names[a0->kind]);
			return 1;
		}
		if (a->count != a0->count)
			what = "count", mine = (long long)a->count, first = (long long)a0->count;
		else if (a->dtype != a0->dtype)
			what = "datatype", mine = a->dtype, first = a0->dtype;
		else if (coll_reduces(a->kind) && a->redop != a0->redop)
			what = "op", mine = a->redop, first = a0->redop;
		else if (coll_rooted(a->kind) && a->root != a0->root)
			what = "root", mine = a->root, first = a0->root;
		if (what != NULL) {
			shm_coll_end(s, x, -1, ncclInvalidUsage, "%s #%llu: rank %d passed %s %lld, rank 0 %lld",
				     g_coll_names[a->kind], x->seq, i, what, mine, first);
			return 1;
		}
	}
	return 0;
}

/*
 * shm_coll_compute checks, once all ranks agree, that every rank had its
 * buffers and its send bytes copied, and computes the result into a
 * stretch of its own, in rank order; then x is done.
 */
static void shm_coll_compute(struct fshm *s, struct shm_coll *x)
{
	struct shm_hdr *h = s->h;
	const struct collarg *a = &x->r[0].a;
	int n = h->nranks;
	size_t esz = type_size(a->dtype), bytes = a->count * esz;
	size_t total = a->kind == COLL_REDUCESCATTER || a->kind == COLL_ALLGATHER ? bytes * (size_t)n : bytes;
	char *base, *out;
	for (int i = 0; i < n; i++) {
		size_t sendn = 0, recvn = 0;
		coll_elems(&x->r[i].a, n, i, &sendn, &recvn); /* checked when it was called */
		if (x->r[i].nobuf) {
			x->r[i].fault = CUDA_ERROR_ILLEGAL_ADDRESS;
			shm_coll_end(s, x, i, ncclUnhandledCudaError,
				     "%s #%llu: rank %d's buffer is no longer device memory of device %d", g_coll_names[a->kind],
				     x->seq, i, h->ranks[i].device);
			return;
		}
		if (sendn > 0 && !x->r[i].in.has) {
			shm_coll_end(s, x, i, ncclInternalError, "%s #%llu: rank %d's data is missing", g_coll_names[a->kind],
				     x->seq, i);
			return;
		}
	}
	if (bytes > 0) {
		if (shm_alloc(s, total, &x->out) != 0 || (base = shm_base(s)) == NULL) {
			shm_coll_end(s, x, -1, ncclSystemError, "%s #%llu: out of shared memory", g_coll_names[a->kind], x->seq);
			return;
		}
		out = base + x->out.off;
#define IN(i) (base + x->r[i].in.off)
		switch (a->kind) {
		case COLL_ALLREDUCE:
		case COLL_REDUCE:
		case COLL_REDUCESCATTER:
			memcpy(out, IN(0), total);
			for (int i = 1; i < n; i++)
				combine(out, IN(i), total / esz, a->dtype, a->redop);
			if (a->redop == ncclAvg)
				divide(out, total / esz, a->dtype, n);
			break;
		case COLL_BROADCAST:
			memcpy(out, IN(a->root), bytes);
			break;
		case COLL_ALLGATHER:
			for (int i = 0; i < n; i++)
				memcpy(out + (size_t)i * bytes, IN(i), bytes);
			break;
		}
#undef IN
	}
	for (int i = 0; i < n; i++)
		x->r[i].in.has = 0;
	x->done = 1;
	shm_wake(s);
}

/*
 * run_nccl_shm is run_nccl across processes: the rank copies its send
 * buffer into the segment, waits there for the others, at most the
 * timeout (whoever sees all ranks there checks and computes), and
 * copies its part of the result into its receive buffer.
 */
static CUresult run_nccl_shm(struct op *o, CUresult err)
{
	struct fcomm *m = o->u.nccl.comm;
	struct fshm *s = m->q->shm;
	struct shm_hdr *h = s->h; /* mapped while m has operations pending */
	const struct collarg *a = &o->u.nccl.a;
	struct timespec d = deadline_after(g_nccl_timeout_ms);
	int n = m->q->nranks, rank = m->rank;
	size_t esz = type_size(a->dtype), sendn = 0, recvn = 0;
	struct shm_coll *x;
	struct shm_crank *me;
	CUresult fault = CUDA_SUCCESS;
	char *sp, *rp, *base;
	coll_elems(a, n, rank, &sendn, &recvn); /* checked when it was called */
	pthread_mutex_lock(&g_mu);
	sp = sendn == 0 ? NULL : kernel_range_locked(m->device, a->send, sendn * esz);
	rp = recvn == 0 ? NULL : kernel_range_locked(m->device, a->recv, recvn * esz);
	shm_lock(s);
	shm_sync_held(m);
	if ((x = shm_coll_get(h, o->u.nccl.seq)) == NULL) {
		shm_unlock(s);
		comm_fail_locked(m, ncclSystemError, "too many collectives in flight across processes");
		goto out;
	}
	me = &x->r[rank];
	me->present = 1;
	me->a = *a;
	if (err != CUDA_SUCCESS)
		me->broken = ncclUnhandledCudaError;
	else if (m->async != ncclSuccess)
		me->broken = m->async;
	else if ((sendn > 0 && sp == NULL) || (recvn > 0 && rp == NULL))
		me->nobuf = 1;
	else if (!x->done && sendn > 0) {
		if (shm_alloc(s, sendn * esz, &me->in) != 0 || (base = shm_base(s)) == NULL)
			shm_coll_end(s, x, -1, ncclSystemError, "%s #%llu: out of shared memory", g_coll_names[a->kind], x->seq);
		else
			memcpy(base + me->in.off, sp, sendn * esz);
	}
	x->arrived++;
	shm_wake(s);
	pthread_mutex_unlock(&g_mu); /* waits with the segment's mutex only */
	for (;;) {
		if (x->done || shm_coll_failed(s, x))
			break;
		if (x->arrived == n) {
			if (!shm_coll_mismatch(s, x))
				shm_coll_compute(s, x);
			break;
		}
		if (past(&d)) {
			shm_coll_end(s, x, -1, ncclSystemError, "%s #%llu: timed out after %llu ms with %d of %d ranks there",
				     g_coll_names[a->kind], x->seq, g_nccl_timeout_ms, x->arrived, n);
			break;
		}
		shm_wait(s, &d);
	}
	/* done: copy the result out, with g_mu taken first */
	shm_unlock(s);
	pthread_mutex_lock(&g_mu);
	shm_lock(s);
	if (me->result == ncclSuccess && recvn > 0 && x->out.has) {
		size_t off = a->kind == COLL_REDUCESCATTER ? (size_t)rank * recvn * esz : 0;
		rp = kernel_range_locked(m->device, a->recv, recvn * esz);
		if (rp == NULL) {
			me->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
			shm_comm_fail(h, rank, ncclUnhandledCudaError, "the receive buffer is no longer device memory");
		} else if ((base = shm_base(s)) == NULL) {
			shm_comm_fail(h, rank, ncclSystemError, "cannot map the shared memory");
		} else {
			memcpy(rp, base + x->out.off + off, recvn * esz);
		}
	}
	fault = me->fault;
	me->left = 1;
	if (++x->left == n) {
		x->out.has = 0;
		x->used = 0;
	}
	shm_sync_held(m);
	shm_wake(s);
	shm_unlock(s);
out:
	m->pending--;
	comm_gone_locked(m);
	pthread_cond_broadcast(&g_ncv);
	pthread_mutex_unlock(&g_mu);
	return fault;
}

/* ---- Point-to-point messages across processes ---- */

static struct shm_msg *shm_msg_get(struct shm_hdr *h, int src, int dst, unsigned long long seq)
{
	struct shm_msg *unused = NULL;
	for (int i = 0; i < SHM_MSGS; i++) {
		struct shm_msg *x = &h->msgs[i];
		if (x->used && x->src == src && x->dst == dst && x->seq == seq)
			return x;
		if (!x->used && unused == NULL)
			unused = x;
	}
	if (unused != NULL) {
		memset(unused, 0, sizeof *unused);
		unused->used = 1;
		unused->src = src;
		unused->dst = dst;
		unused->seq = seq;
	}
	return unused;
}

/* shm_msg_end is msg_end_locked across processes. */
__attribute__((format(printf, 5, 6))) static void shm_msg_end(struct fshm *s, struct shm_msg *x, int at,
								ncclResult_t why, const char *fmt, ...)
{
	char msg[NCCL_MSG];
	int k = snprintf(msg, sizeof msg, "message #%llu from rank %d to rank %d: ", x->seq, x->src, x->dst);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
	va_end(ap);
	for (int i = 0; i < 2; i++)
		x->side[i].result = at < 0 || i == at ? why : ncclRemoteError;
	shm_comm_fail(s->h, x->src, x->side[0].result, msg);
	shm_comm_fail(s->h, x->dst, x->side[1].result, msg);
	x->data.has = 0;
	x->done = 1;
	shm_wake(s);
}

/* shm_msg_progress is msg_progress_locked across processes: the receiver copies the bytes out later. */
static int shm_msg_progress(struct fshm *s, struct shm_msg *x)
{
	static const char *const who[] = {"the sender", "the receiver"};
	struct shm_hdr *h = s->h;
	const int rank[2] = {x->src, x->dst};
	const struct shm_mside *sd = &x->side[0], *rv = &x->side[1];
	if (x->done)
		return 1;
	if (h->state == Q_FAILED) {
		shm_msg_end(s, x, -1, h->err, "%s", h->msg);
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		if (x->side[i].present && x->side[i].broken != ncclSuccess) {
			shm_msg_end(s, x, i, x->side[i].broken, "%s (rank %d) could not take part (%s)", who[i], rank[i],
				    x->side[i].broken == ncclUnhandledCudaError ? "its stream had failed"
										: "its communicator had failed");
			return 1;
		}
		if (h->ranks[rank[i]].gone) {
			shm_msg_end(s, x, i, ncclInvalidUsage, "%s's (rank %d) communicator was destroyed or aborted", who[i],
				    rank[i]);
			return 1;
		}
	}
	if (!sd->present || !rv->present)
		return 0;
	if (sd->count != rv->count || sd->dtype != rv->dtype) {
		shm_msg_end(s, x, -1, ncclInvalidUsage,
			    "ncclSend of rank %d passed count %zu, datatype %d; ncclRecv of rank %d count %zu, datatype %d",
			    x->src, sd->count, sd->dtype, x->dst, rv->count, rv->dtype);
		return 1;
	}
	for (int i = 0; i < 2; i++)
		if (x->side[i].nobuf) {
			x->side[i].fault = CUDA_ERROR_ILLEGAL_ADDRESS;
			shm_msg_end(s, x, i, ncclUnhandledCudaError, "%s's (rank %d) buffer is no longer device memory of device %d",
				    who[i], rank[i], h->ranks[rank[i]].device);
			return 1;
		}
	x->delivered = x->data.has;
	x->done = 1;
	shm_wake(s);
	return 1;
}

/* earlier returns the earlier of deadline d and ms milliseconds from now. */
static struct timespec earlier(const struct timespec *d, unsigned long long ms)
{
	struct timespec t = deadline_after(ms);
	return t.tv_sec < d->tv_sec || (t.tv_sec == d->tv_sec && t.tv_nsec < d->tv_nsec) ? t : *d;
}

/*
 * run_p2p_shm is run_p2p across processes: each send and receive joins
 * its message in its communicator's segment (a send copying its bytes
 * in), all before any waits; then it waits, at most the timeout, until
 * every message is done, and each receive copies its bytes out.
 */
static CUresult run_p2p_shm(struct op *o, CUresult err)
{
	size_t n = o->u.p2p.n;
	struct p2parg *v = o->u.p2p.v;
	struct shm_msg **xs = calloc(n > 0 ? n : 1, sizeof *xs);
	struct timespec d = deadline_after(g_nccl_timeout_ms);
	CUresult fault = CUDA_SUCCESS;
	int one = 1; /* all on one segment: wait on its condition variable; else poll */
	pthread_mutex_lock(&g_mu);
	for (size_t i = 0; i < n; i++) {
		struct fcomm *m = v[i].comm;
		struct fshm *s = m->q->shm;
		int src = v[i].recv ? v[i].peer : m->rank, dst = v[i].recv ? m->rank : v[i].peer;
		size_t bytes = v[i].count * type_size(v[i].dtype); /* checked at the call */
		char *p = bytes == 0 ? NULL : kernel_range_locked(m->device, v[i].buf, bytes), *base;
		struct shm_msg *x;
		struct shm_mside *me;
		one = one && s == v[0].comm->q->shm;
		if (xs == NULL) {
			comm_fail_locked(m, ncclSystemError, "out of host memory");
			continue;
		}
		shm_lock(s);
		shm_sync_held(m);
		if ((x = xs[i] = shm_msg_get(s->h, src, dst, v[i].seq)) == NULL) {
			shm_unlock(s);
			comm_fail_locked(m, ncclSystemError, "too many messages in flight across processes");
			continue;
		}
		me = &x->side[v[i].recv];
		me->present = 1;
		me->count = v[i].count;
		me->dtype = v[i].dtype;
		if (err != CUDA_SUCCESS)
			me->broken = ncclUnhandledCudaError;
		else if (m->async != ncclSuccess)
			me->broken = m->async;
		else if (bytes > 0 && p == NULL)
			me->nobuf = 1;
		else if (!v[i].recv && bytes > 0 && !x->done) {
			if (shm_alloc(s, bytes, &x->data) != 0 || (base = shm_base(s)) == NULL)
				shm_msg_end(s, x, -1, ncclSystemError, "out of shared memory");
			else
				memcpy(base + x->data.off, p, bytes);
		}
		shm_wake(s);
		shm_unlock(s);
	}
	pthread_mutex_unlock(&g_mu);
	for (;;) {
		struct fshm *ws = NULL;
		int still = 0;
		for (size_t i = 0; i < n; i++) {
			struct fshm *s = v[i].comm->q->shm;
			if (xs == NULL || xs[i] == NULL)
				continue;
			shm_lock(s);
			if (!shm_msg_progress(s, xs[i])) {
				if (past(&d))
					shm_msg_end(s, xs[i], -1, ncclSystemError, "%s timed out after %llu ms: the matching %s never came",
						    g_p2p_names[v[i].recv], g_nccl_timeout_ms, g_p2p_names[!v[i].recv]);
				else if (ws == NULL)
					ws = s;
			}
			shm_unlock(s);
		}
		if (ws == NULL)
			break;
		shm_lock(ws); /* sleep on one segment, checking again under its mutex */
		for (size_t i = 0; i < n; i++)
			if (xs[i] != NULL && v[i].comm->q->shm == ws && !shm_msg_progress(ws, xs[i]))
				still = 1;
		if (still) {
			struct timespec w = one ? d : earlier(&d, 1);
			shm_wait(ws, &w);
		}
		shm_unlock(ws);
	}
	pthread_mutex_lock(&g_mu);
	for (size_t i = 0; i < n; i++) {
		struct fcomm *m = v[i].comm;
		struct fshm *s = m->q->shm;
		struct shm_msg *x = xs == NULL ? NULL : xs[i];
		if (x != NULL) {
			struct shm_mside *me = &x->side[v[i].recv];
			shm_lock(s);
			if (v[i].recv && x->delivered && me->result == ncclSuccess) {
				size_t bytes = me->count * type_size(me->dtype);
				char *p = kernel_range_locked(m->device, v[i].buf, bytes), *base;
				if (p == NULL) {
					me->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
					shm_comm_fail(s->h, m->rank, ncclUnhandledCudaError,
						      "the receive buffer is no longer device memory");
				} else if ((base = shm_base(s)) == NULL) {
					shm_comm_fail(s->h, m->rank, ncclSystemError, "cannot map the shared memory");
				} else {
					memcpy(p, base + x->data.off, bytes);
				}
			}
			if (fault == CUDA_SUCCESS)
				fault = me->fault;
			me->left = 1;
			if (x->side[!v[i].recv].left) { /* a message to oneself has both sides here */
				x->data.has = 0;
				x->used = 0;
			}
			shm_sync_held(m);
			shm_wake(s);
			shm_unlock(s);
		}
		m->pending--;
	}
	for (size_t i = 0; i < n; i++)
		comm_gone_locked(v[i].comm);
	pthread_cond_broadcast(&g_ncv);
	pthread_mutex_unlock(&g_mu);
	free(xs);
	return fault;
}

/* ---- NCCL entry points ---- */

EXPORT ncclResult_t ncclGetVersion(int *version)
{
	if (version == NULL)
		return nccl_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

static const char *const g_nccl_errors[] = {
	"no error",
	"unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
	"unhandled system error (run with NCCL_DEBUG=INFO for details)",
	"internal error - please report this issue to the NCCL developers",
	"invalid argument (run with NCCL_DEBUG=WARN for details)",
	"invalid usage (run with NCCL_DEBUG=WARN for details)",
	"remote process exited or there was a network error",
	"NCCL operation in progress",
};

EXPORT const char *ncclGetErrorString(ncclResult_t r)
{
	return r >= 0 && r < ncclNumResults ? g_nccl_errors[r] : "unknown result code";
}

/* comm's own asynchronous error message when it has one, else the thread's last error. */
EXPORT const char *ncclGetLastError(ncclComm_t comm)
{
	const char *s = t_nccl_error;
	struct fcomm *m;
	pthread_mutex_lock(&g_mu);
	if ((m = comm_find_locked(comm)) != NULL)
		comm_sync_locked(m);
	if (m != NULL && m->async != ncclSuccess)
		s = m->msg; /* set once, never freed */
	pthread_mutex_unlock(&g_mu);
	return s;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	struct timespec ts;
	unsigned long long state, sum, rnd = 0;
	if (id == NULL)
		return nccl_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
	clock_gettime(CLOCK_REALTIME, &ts);
	/* unique across processes too: the token of the shared segment (NCCL across processes) comes from it */
	if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
		rnd = (unsigned long long)getpid() << 40;
	state = (atomic_fetch_add(&g_ids, 1) + 1) * 0x9e3779b97f4a7c15ULL ^ (unsigned long long)ts.tv_nsec ^
		((unsigned long long)ts.tv_sec << 32) ^ (unsigned long long)(uintptr_t)&g_ids ^ rnd;
	memset(id, 0, sizeof *id);
	memcpy(id->internal, NCCL_ID_MAGIC, sizeof NCCL_ID_MAGIC);
	for (size_t i = 16; i < NCCL_ID_SUM; i += 8) {
		unsigned long long r = splitmix64(&state);
		memcpy(id->internal + i, &r, sizeof r);
	}
	sum = id_sum(id);
	memcpy(id->internal + NCCL_ID_SUM, &sum, sizeof sum);
	return ncclSuccess;
}

/*
 * The id is read from the by-value parameter: a caller that passes it
 * wrong (a pointer, or shifted) fails the checksum. Inside a group the
 * rank joins at once and waits at the outermost ncclGroupEnd.
 */
EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	struct fctx *c;
	struct fclique *q;
	struct fcomm *m;
	ncclResult_t r;
	if (comm == NULL)
		return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: invalid rank %d of %d ranks", rank, nranks);
	if (!id_valid(&id))
		return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: commId is not an id from ncclGetUniqueId");
	if (lock_ctx(&c) != CUDA_SUCCESS) /* counts a missing context */
		return nccl_fail(ncclUnhandledCudaError, "ncclCommInitRank: no current CUDA context on the calling thread");
	if (g_nccl_procs)
		return init_rank_shm(comm, nranks, &id, rank, c);
	if ((q = clique_join_locked(&id, nranks)) == NULL)
		return unlock_nccl(nccl_fail(ncclSystemError, "ncclCommInitRank: out of host memory"));
	if (q->nranks != nranks)
		return unlock_nccl(nccl_fail(ncclInvalidUsage, "ncclCommInitRank: rank %d gave %d ranks, the ranks before it %d",
					     rank, nranks, q->nranks));
	if (q->comms[rank] != NULL)
		return unlock_nccl(nccl_fail(ncclInvalidUsage, "ncclCommInitRank: rank %d has joined this id already", rank));
	if ((m = calloc(1, sizeof *m)) == NULL || (m->sent = calloc((size_t)nranks, sizeof *m->sent)) == NULL ||
	    (m->received = calloc((size_t)nranks, sizeof *m->received)) == NULL) {
		if (m != NULL)
			free(m->sent);
		free(m);
		return unlock_nccl(nccl_fail(ncclSystemError, "ncclCommInitRank: out of host memory"));
	}
	*m = (struct fcomm){.next = g_comms, .q = q, .rank = rank, .device = c->device, .ctx = PRIMARY(c),
			    .sent = m->sent, .received = m->received};
	g_comms = m;
	q->comms[rank] = m;
	if (++q->joined == q->nranks)
		clique_complete_locked(q);
	if (t_group_depth > 0) {
		if (defer_add((struct deferred){.init = m}) != 0) {
			m->gone = 1;
			return unlock_nccl(nccl_fail(ncclSystemError, "ncclCommInitRank: out of host memory"));
		}
		*comm = m;
		return unlock_nccl(ncclSuccess);
	}
	if ((r = init_wait_locked(m)) == ncclSuccess)
		*comm = m;
	return unlock_nccl(r);
}

/*
 * ncclCommDestroy waits for the communicator's collectives (each bounded
 * by the timeout); inside a group, whose collectives wait for its end,
 * it is refused.
 */
EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	struct fcomm *m;
	if (comm == NULL)
		return ncclSuccess;
	if (t_group_depth > 0)
		return nccl_fail(ncclInvalidUsage, "ncclCommDestroy: inside a group (ncclGroupStart)");
	pthread_mutex_lock(&g_mu);
	if ((m = comm_find_locked(comm)) == NULL || m->gone)
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "ncclCommDestroy: comm is not a live communicator"));
	while (m->pending > 0)
		pthread_cond_wait(&g_ncv, &g_mu);
	m->gone = 1;
	comm_gone_locked(m);
	pthread_cond_broadcast(&g_ncv);
	return unlock_nccl(ncclSuccess);
}

/* ncclCommAbort abandons the communicator's collectives: those in flight end with errors. */
EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	struct fcomm *m;
	if (comm == NULL)
		return ncclSuccess;
	pthread_mutex_lock(&g_mu);
	if ((m = comm_find_locked(comm)) == NULL || m->gone)
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "ncclCommAbort: comm is not a live communicator"));
	m->gone = 1;
	comm_gone_locked(m);
	pthread_cond_broadcast(&g_ncv);
	return unlock_nccl(ncclSuccess);
}

/* comm_query finds live communicator comm for a query with an out parameter, and returns with g_mu held. */
static ncclResult_t comm_query(const char *call, ncclComm_t comm, const void *out, struct fcomm **pm)
{
	if (out == NULL)
		return nccl_fail(ncclInvalidArgument, "%s: the result pointer is NULL", call);
	pthread_mutex_lock(&g_mu);
	if ((*pm = comm_find_locked(comm)) == NULL || (*pm)->gone)
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: comm is not a live communicator", call));
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	struct fcomm *m;
	ncclResult_t r = comm_query("ncclCommCount", comm, count, &m);
	if (r != ncclSuccess)
		return r;
	*count = m->q->nranks;
	return unlock_nccl(ncclSuccess);
}

EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	struct fcomm *m;
	ncclResult_t r = comm_query("ncclCommCuDevice", comm, device, &m);
	if (r != ncclSuccess)
		return r;
	*device = m->device;
	return unlock_nccl(ncclSuccess);
}

EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	struct fcomm *m;
	ncclResult_t r = comm_query("ncclCommUserRank", comm, rank, &m);
	if (r != ncclSuccess)
		return r;
	*rank = m->rank;
	return unlock_nccl(ncclSuccess);
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
	struct fcomm *m = NULL;
	ncclResult_t r = comm_query("ncclCommGetAsyncError", comm, asyncError, &m);
	if (r != ncclSuccess)
		return r;
	comm_sync_locked(m);
	if (m->q->state == Q_FAILED)
		*asyncError = m->q->err;
	else if (m->q->state == Q_JOINING)
		*asyncError = ncclInProgress;
	else
		*asyncError = m->async;
	return unlock_nccl(ncclSuccess);
}

/*
 * nccl_stream_locked finds where call queues work of m on stream hs: the
 * context in *pc, and the stream in *ps (NULL for the default stream of
 * the communicator's device, hs 0, 1 or 2).
 */
static ncclResult_t nccl_stream_locked(const char *call, struct fcomm *m, CUstream hs, struct fctx **pc,
				       struct fstream **ps)
{
	struct fstream *s;
	*ps = NULL;
	if ((uintptr_t)hs <= 2) {
		if ((*pc = ctx_live(m->ctx)) == NULL)
			return nccl_fail(ncclUnhandledCudaError, "%s: device %d has no active primary context", call, m->device);
		return ncclSuccess;
	}
	for (s = g_streams; s != NULL && !(s == hs && !s->dead); s = s->next)
		;
	if (s == NULL || s->detached || s->ctx->device != m->device)
		return nccl_fail(ncclUnhandledCudaError, "%s: stream is not a live stream of device %d", call, m->device);
	*pc = s->ctx;
	*ps = s;
	return ncclSuccess;
}

/*
 * nccl_submit_locked queues o, an NCCL operation of m, on s, or runs it
 * on the default stream of c, and returns what call returns: on the
 * default stream, the stream's error or the communicator's.
 */
static ncclResult_t nccl_submit_locked(const char *call, struct fcomm *m, struct fctx *c, struct fstream *s,
				       struct op *o)
{
	CUresult cr = submit_locked(c, s, o, 0);
	if (s != NULL)
		return ncclSuccess;
	if (cr != CUDA_SUCCESS)
		return nccl_fail(ncclUnhandledCudaError, "%s: the default stream of device %d has failed (CUDA error %d)",
				 call, m->device, cr);
	if (m->async != ncclSuccess)
		return nccl_fail(m->async, "%s: %s", call, m->msg);
	return ncclSuccess;
}

/*
 * enqueue checks collective a of communicator h and queues it on stream
 * hs (0, 1 or 2: the default stream of the communicator's device, run
 * now, or at ncclGroupEnd inside a group). It needs no current context:
 * NCCL sets the device itself.
 */
static ncclResult_t enqueue(struct fcomm *h, CUstream hs, struct collarg a)
{
	const char *call = g_coll_names[a.kind];
	struct fcomm *m = NULL;
	struct fstream *s = NULL;
	struct fctx *c;
	struct op *o;
	size_t sendn, recvn, esz;
	ncclResult_t r;
	if (check_init() != CUDA_SUCCESS)
		return nccl_fail(ncclUnhandledCudaError, "%s: CUDA is not initialized", call);
	if (t_in_host_fn)
		return nccl_fail(ncclUnhandledCudaError, "%s: called from a host function", call);
	pthread_mutex_lock(&g_mu);
	if ((r = comm_check_locked(call, h, &m)) != ncclSuccess)
		return unlock_nccl(r);
	if (a.dtype < 0 || a.dtype >= ncclNumTypes)
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: invalid type %d", call, a.dtype));
	if (coll_reduces(a.kind) && (a.redop < 0 || a.redop >= ncclNumOps))
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: invalid reduction operation %d", call, a.redop));
	if (coll_rooted(a.kind) && (a.root < 0 || a.root >= m->q->nranks))
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: invalid root %d (root should be in the 0..%d range)",
					     call, a.root, m->q->nranks - 1));
	if (coll_elems(&a, m->q->nranks, m->rank, &sendn, &recvn) != 0)
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: count %zu overflows", call, a.count));
	esz = type_size(a.dtype);
	if (sendn > 0 && dev_range_locked(m->device, a.send, sendn * esz) == NULL)
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: sendbuff is not %zu bytes of device memory of device %d",
					     call, sendn * esz, m->device));
	if (recvn > 0 && dev_range_locked(m->device, a.recv, recvn * esz) == NULL)
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: recvbuff is not %zu bytes of device memory of device %d",
					     call, recvn * esz, m->device));
	if ((r = nccl_stream_locked(call, m, hs, &c, &s)) != ncclSuccess)
		return unlock_nccl(r);
	if ((o = op_new(OP_NCCL)) == NULL)
		return unlock_nccl(nccl_fail(ncclSystemError, "%s: out of host memory", call));
	o->u.nccl.comm = m;
	o->u.nccl.seq = m->seq++;
	o->u.nccl.a = a;
	m->pending++;
	stat_add(ST_NCCL, 1);
	if (s == NULL && t_group_depth > 0 && defer_add((struct deferred){.op = o, .ctx = c, .comm = m}) == 0)
		return unlock_nccl(ncclSuccess);
	/* a deferral that failed runs now: the sequence number is taken */
	return unlock_nccl(nccl_submit_locked(call, m, c, s, o));
}

/* p2p_add appends a to OP_P2P operation o. */
static int p2p_add(struct op *o, struct p2parg a)
{
	if (o->u.p2p.n == o->u.p2p.cap) {
		size_t cap = o->u.p2p.cap ? 2 * o->u.p2p.cap : 4;
		struct p2parg *v = realloc(o->u.p2p.v, cap * sizeof *v);
		if (v == NULL)
			return -1;
		o->u.p2p.v = v;
		o->u.p2p.cap = cap;
	}
	o->u.p2p.v[o->u.p2p.n++] = a;
	return 0;
}

/*
 * group_p2p_locked returns the operation that gathers the sends and
 * receives of the thread's group for stream s of c (NULL: the default
 * stream), making and deferring it for the first; NULL when out of
 * memory. It holds a reference to s until ncclGroupEnd.
 */
static struct op *group_p2p_locked(struct fctx *c, struct fstream *s, struct fcomm *m)
{
	struct op *o;
	for (size_t i = 0; i < t_ndeferred; i++)
		if (t_deferred[i].op != NULL && t_deferred[i].op->kind == OP_P2P && t_deferred[i].ctx == c &&
		    t_deferred[i].s == s)
			return t_deferred[i].op;
	if ((o = op_new(OP_P2P)) == NULL)
		return NULL;
	if (defer_add((struct deferred){.op = o, .ctx = c, .s = s, .comm = m}) != 0) {
		op_free_locked(o);
		return NULL;
	}
	if (s != NULL)
		s->refs++;
	return o;
}

/*
 * p2p_enqueue checks ncclSend or ncclRecv a of communicator h and queues
 * it on stream hs as enqueue does a collective; inside a group, into the
 * group's one operation for the stream, queued at ncclGroupEnd.
 */
static ncclResult_t p2p_enqueue(struct fcomm *h, CUstream hs, struct p2parg a)
{
	const char *call = g_p2p_names[a.recv];
	struct fcomm *m = NULL;
	struct fstream *s = NULL;
	struct fctx *c;
	struct op *o;
	size_t bytes;
	unsigned long long *seq;
	ncclResult_t r;
	if (check_init() != CUDA_SUCCESS)
		return nccl_fail(ncclUnhandledCudaError, "%s: CUDA is not initialized", call);
	if (t_in_host_fn)
		return nccl_fail(ncclUnhandledCudaError, "%s: called from a host function", call);
	pthread_mutex_lock(&g_mu);
	if ((r = comm_check_locked(call, h, &m)) != ncclSuccess)
		return unlock_nccl(r);
	if (a.dtype < 0 || a.dtype >= ncclNumTypes)
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: invalid type %d", call, a.dtype));
	if (a.peer < 0 || a.peer >= m->q->nranks)
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: invalid peer %d (peer should be in the 0..%d range)",
					     call, a.peer, m->q->nranks - 1));
	if (__builtin_mul_overflow(a.count, type_size(a.dtype), &bytes))
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: count %zu overflows", call, a.count));
	if (bytes > 0 && dev_range_locked(m->device, a.buf, bytes) == NULL)
		return unlock_nccl(nccl_fail(ncclInvalidArgument, "%s: %s is not %zu bytes of device memory of device %d",
					     call, a.recv ? "recvbuff" : "sendbuff", bytes, m->device));
	if ((r = nccl_stream_locked(call, m, hs, &c, &s)) != ncclSuccess)
		return unlock_nccl(r);
	seq = a.recv ? &m->received[a.peer] : &m->sent[a.peer];
	a.comm = m;
	a.seq = *seq;
	if (t_group_depth > 0) {
		if ((o = group_p2p_locked(c, s, m)) == NULL || p2p_add(o, a) != 0)
			return unlock_nccl(nccl_fail(ncclSystemError, "%s: out of host memory", call));
		++*seq;
		m->pending++;
		stat_add(ST_NCCL, 1);
		stat_add(ST_NCCL_P2P, 1);
		return unlock_nccl(ncclSuccess);
	}
	if ((o = op_new(OP_P2P)) == NULL || p2p_add(o, a) != 0) {
		free(o);
		return unlock_nccl(nccl_fail(ncclSystemError, "%s: out of host memory", call));
	}
	++*seq;
	m->pending++;
	stat_add(ST_NCCL, 1);
	stat_add(ST_NCCL_P2P, 1);
	return unlock_nccl(nccl_submit_locked(call, m, c, s, o));
}

EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op,
				  ncclComm_t comm, CUstream stream)
{
	return enqueue(comm, stream,
		       (struct collarg){COLL_ALLREDUCE, datatype, op, 0, count, (CUdeviceptr)(uintptr_t)sendbuff,
					(CUdeviceptr)(uintptr_t)recvbuff});
}

EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, int datatype, int root,
				  ncclComm_t comm, CUstream stream)
{
	return enqueue(comm, stream,
		       (struct collarg){COLL_BROADCAST, datatype, 0, root, count, (CUdeviceptr)(uintptr_t)sendbuff,
					(CUdeviceptr)(uintptr_t)recvbuff});
}

EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, int root,
			       ncclComm_t comm, CUstream stream)
{
	return enqueue(comm, stream,
		       (struct collarg){COLL_REDUCE, datatype, op, root, count, (CUdeviceptr)(uintptr_t)sendbuff,
					(CUdeviceptr)(uintptr_t)recvbuff});
}

EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, int datatype,
				  ncclComm_t comm, CUstream stream)
{
	return enqueue(comm, stream,
		       (struct collarg){COLL_ALLGATHER, datatype, 0, 0, sendcount, (CUdeviceptr)(uintptr_t)sendbuff,
					(CUdeviceptr)(uintptr_t)recvbuff});
}

EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, int datatype, int op,
				      ncclComm_t comm, CUstream stream)
{
	return enqueue(comm, stream,
		       (struct collarg){COLL_REDUCESCATTER, datatype, op, 0, recvcount, (CUdeviceptr)(uintptr_t)sendbuff,
					(CUdeviceptr)(uintptr_t)recvbuff});
}

/* ncclSend sends count elements at sendbuff to rank peer, which must ncclRecv them. */
EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, int datatype, int peer, ncclComm_t comm,
			     CUstream stream)
{
	return p2p_enqueue(comm, stream,
			   (struct p2parg){.recv = 0, .peer = peer, .dtype = datatype, .count = count,
					   .buf = (CUdeviceptr)(uintptr_t)sendbuff});
}

/* ncclRecv receives count elements from rank peer, which must ncclSend them, into recvbuff. */
EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, int datatype, int peer, ncclComm_t comm, CUstream stream)
{
	return p2p_enqueue(comm, stream,
			   (struct p2parg){.recv = 1, .peer = peer, .dtype = datatype, .count = count,
					   .buf = (CUdeviceptr)(uintptr_t)recvbuff});
}

EXPORT ncclResult_t ncclGroupStart(void)
{
	t_group_depth++;
	return ncclSuccess;
}

/*
 * group_op_main runs a deferred default-stream collective, or the
 * group's sends and receives on the default stream, on a thread of its
 * own.
 */
static void *group_op_main(void *arg)
{
	struct deferred *d = arg;
	struct op *o = d->op;
	CUresult cr;
	pthread_mutex_lock(&g_mu);
	if (ctx_live(d->ctx) == NULL) { /* released since: the rank still tells its peers */
		pthread_mutex_unlock(&g_mu);
		run_op(o, CUDA_ERROR_INVALID_CONTEXT);
		pthread_mutex_lock(&g_mu);
		op_free_locked(o);
		cr = CUDA_ERROR_INVALID_CONTEXT;
	} else {
		cr = submit_locked(d->ctx, NULL, o, 0);
	}
	d->result = cr != CUDA_SUCCESS ? ncclUnhandledCudaError : d->comm->async;
	pthread_mutex_unlock(&g_mu);
	return NULL;
}

/*
 * group_queue_locked queues the group's sends and receives for a stream
 * (d->s), unless the stream has gone since; then they run here, failed,
 * to tell their peers.
 */
static void group_queue_locked(struct deferred *d)
{
	struct fstream *s = d->s;
	if (!s->dead && !s->detached) {
		submit_locked(d->ctx, s, d->op, 0);
	} else {
		pthread_mutex_unlock(&g_mu);
		run_op(d->op, CUDA_ERROR_INVALID_HANDLE);
		pthread_mutex_lock(&g_mu);
		op_free_locked(d->op);
		d->result = ncclUnhandledCudaError;
	}
	stream_unref_locked(s);
}

/*
 * The outermost ncclGroupEnd queues the group's sends and receives on
 * their streams (an operation for each stream), starts the group's
 * default-stream collectives and sends and receives, each on a thread
 * of its own (so that one thread may drive several ranks), waits for the
 * cliques of the group's ncclCommInitRank calls, then for those threads;
 * it returns the first error.
 */
EXPORT ncclResult_t ncclGroupEnd(void)
{
	struct deferred *ds = t_deferred;
	size_t n = t_ndeferred;
	pthread_t *threads;
	char *started;
	ncclResult_t r = ncclSuccess;
	if (t_group_depth == 0)
		return nccl_fail(ncclInvalidUsage, "ncclGroupEnd: not in a group (ncclGroupStart)");
	if (--t_group_depth > 0)
		return ncclSuccess;
	t_deferred = NULL;
	t_ndeferred = t_deferred_cap = 0;
	threads = calloc(n + 1, sizeof *threads);
	started = calloc(n + 1, 1);
	pthread_mutex_lock(&g_mu);
	for (size_t i = 0; i < n; i++)
		if (ds[i].op != NULL && ds[i].s != NULL)
			group_queue_locked(&ds[i]);
	pthread_mutex_unlock(&g_mu);
	for (size_t i = 0; i < n; i++)
		if (ds[i].op != NULL && ds[i].s == NULL) {
			if (threads != NULL && started != NULL && pthread_create(&threads[i], NULL, group_op_main, &ds[i]) == 0)
				started[i] = 1;
			else
				group_op_main(&ds[i]); /* no thread: run it here */
		}
	pthread_mutex_lock(&g_mu);
	for (size_t i = 0; i < n; i++)
		if (ds[i].init != NULL) {
			ncclResult_t ri = init_wait_locked(ds[i].init);
			if (r == ncclSuccess)
				r = ri;
		}
	pthread_mutex_unlock(&g_mu);
	for (size_t i = 0; i < n; i++) {
		if (started != NULL && started[i])
			pthread_join(threads[i], NULL);
		if (ds[i].op != NULL && ds[i].result != ncclSuccess && r == ncclSuccess) {
			r = ds[i].result;
			pthread_mutex_lock(&g_mu);
			snprintf(t_nccl_error, sizeof t_nccl_error, "ncclGroupEnd: %.200s", ds[i].comm->msg);
			pthread_mutex_unlock(&g_mu);
		}
	}
	free(threads);
	free(started);
	free(ds);
	return r;
}
