/*
 * fakenvml.c: a stand-in for NVML (libnvidia-ml.so.1), for tests on
 * machines without a GPU. Never use it in production.
 *
 * It exports the entry points that pz's hardware/nvml binds, with the C
 * prototypes, struct layout and nvmlReturn_t codes of nvml.h:
 *
 *   nvmlInit_v2, nvmlShutdown, nvmlErrorString,
 *   nvmlDeviceGetHandleByUUID, nvmlDeviceGetHandleByPciBusId_v2
 *   (and the older nvmlDeviceGetHandleByPciBusId), nvmlDeviceGetMemoryInfo
 *
 * and behaves like the real library where a caller can go wrong:
 *
 *   - nvmlInit_v2 and nvmlShutdown keep a reference count; every other
 *     call fails with NVML_ERROR_UNINITIALIZED while it is 0;
 *   - NULL pointers, an empty UUID, a malformed PCI bus id and a handle
 *     that is not one of its devices give NVML_ERROR_INVALID_ARGUMENT; a
 *     UUID or bus id that names no device gives NVML_ERROR_NOT_FOUND;
 *   - PCI bus ids are parsed as NVML documents them, all numbers in
 *     hexadecimal: domain:bus:device.function, domain:bus:device or
 *     bus:device.function, so "0000:01:00.0", "00000000:01:00.0" and
 *     "01:00.0" name the same device.
 *
 * Configuration, read by each nvmlInit_v2 that finds the count at 0:
 *
 *   PZ_FAKENVML_DEVICES      "UUID,BUSID,TOTAL,FREE;..." - one entry per
 *                            device, TOTAL and FREE in bytes (decimal),
 *                            FREE <= TOTAL; unset or empty: no device.
 *                            A malformed value makes nvmlInit_v2 fail
 *                            with NVML_ERROR_UNKNOWN (and say why on
 *                            stderr).
 *   PZ_FAKENVML_INIT_ERROR   an nvmlReturn_t that nvmlInit_v2 returns
 *                            instead of initializing, e.g. 9
 *                            (NVML_ERROR_DRIVER_NOT_LOADED).
 *
 * One extra export, pzfakenvml_stats, reads the counters (see below).
 *
 * Locking: one mutex guards the state; the counters are atomic. Entry
 * points never call other entry points, only static helpers, and all
 * state is static, so that two copies of the library loaded side by side
 * cannot interpose on each other.
 *
 * Build:
 *   cc -std=gnu11 -O2 -fPIC -shared -pthread -o libnvidia-ml.so.1 fakenvml.c
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- Types and constants of nvml.h ---- */

typedef int nvmlReturn_t;
typedef struct fdev *nvmlDevice_t;

typedef struct {
	unsigned long long total; /* bytes */
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_UNKNOWN = 999,
};

/* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define UUID_SIZE 96
#define MAX_DEVICES 64

/* ---- State ---- */

struct fdev {
	char uuid[UUID_SIZE];
	unsigned long long domain, bus, device, function;
	unsigned long long total, free;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_refs; /* nvmlInit_v2 minus nvmlShutdown calls, >= 0 */
static int g_ndev;
static struct fdev g_dev[MAX_DEVICES];

/* Counters, in pzfakenvml_stats order. */
static _Atomic unsigned long long g_inits, g_shutdowns, g_lookups, g_meminfo;

/* ---- Error strings (nvmlErrorString's texts) ---- */

static const struct {
	nvmlReturn_t code;
	const char *text;
} g_errors[] = {
	{0, "Success"},
	{1, "Uninitialized"},
	{2, "Invalid Argument"},
	{3, "Not Supported"},
	{4, "Insufficient Permissions"},
	{5, "Already Initialized"},
	{6, "Not Found"},
	{7, "Insufficient Size"},
	{8, "Insufficient External Power"},
	{9, "Driver Not Loaded"},
	{10, "Timeout"},
	{11, "Interrupt request issue"},
	{12, "NVML Shared Library Not Found"},
	{13, "Function Not Found"},
	{14, "Corrupted infoROM"},
	{15, "GPU is lost"},
	{16, "GPU requires restart"},
	{17, "The operating system has blocked the request."},
	{18, "RM has detected an NVML/RM version mismatch."},
	{19, "In use by another client"},
	{20, "Insufficient Memory"},
	{21, "No data"},
	{999, "Unknown Error"},
};

EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
	for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
		if (g_errors[i].code == result)
			return g_errors[i].text;
	return "Unknown Error";
}

/* ---- Parsing ---- */

/* parse_pci reads a PCI bus id in one of the forms NVML accepts. */
static int parse_pci(const char *s, unsigned long long *dom, unsigned long long *bus,
		     unsigned long long *dev, unsigned long long *fn)
{
	unsigned int a, b, c, d;
	int n = -1;
	for (const char *p = s; *p != '\0'; p++)
		if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
			return -1;
	if (sscanf(s, "%x:%x:%x.%x%n", &a, &b, &c, &d, &n) == 4 && n >= 0 && s[n] == '\0') {
		*dom = a, *bus = b, *dev = c, *fn = d;
		return 0;
	}
	n = -1;
	if (sscanf(s, "%x:%x:%x%n", &a, &b, &c, &n) == 3 && n >= 0 && s[n] == '\0') {
		*dom = a, *bus = b, *dev = c, *fn = 0;
		return 0;
	}
	n = -1;
	if (sscanf(s, "%x:%x.%x%n", &b, &c, &d, &n) == 3 && n >= 0 && s[n] == '\0') {
		*dom = 0, *bus = b, *dev = c, *fn = d;
		return 0;
	}
	return -1;
}

/* parse_number reads a decimal byte count ending at end. */
static int parse_number(const char *s, const char *end, unsigned long long *out)
{
	char buf[32];
	char *stop;
	size_t n = (size_t)(end - s);
	if (n == 0 || n >= sizeof buf)
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)buf[i]))
			return -1;
	errno = 0;
	*out = strtoull(buf, &stop, 10);
	return errno != 0 || *stop != '\0' ? -1 : 0;
}

/* parse_device reads "UUID,BUSID,TOTAL,FREE" from s up to end. */
static int parse_device(const char *s, const char *end, struct fdev *d)
{
	const char *f[4];
	const char *fend[4];
	const char *p = s;
	char pci[64];
	for (int i = 0; i < 4; i++) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		f[i] = p;
		fend[i] = i < 3 ? c : end;
		if (i < 3 && c == NULL)
			return -1;
		p = i < 3 ? c + 1 : end;
	}
	if (memchr(f[3], ',', (size_t)(end - f[3])) != NULL)
		return -1;
	size_t ulen = (size_t)(fend[0] - f[0]), plen = (size_t)(fend[1] - f[1]);
	if (ulen == 0 || ulen >= UUID_SIZE || plen == 0 || plen >= sizeof pci)
		return -1;
	memcpy(d->uuid, f[0], ulen);
	d->uuid[ulen] = '\0';
	memcpy(pci, f[1], plen);
	pci[plen] = '\0';
	if (parse_pci(pci, &d->domain, &d->bus, &d->device, &d->function) != 0 ||
	    parse_number(f[2], fend[2], &d->total) != 0 ||
	    parse_number(f[3], fend[3], &d->free) != 0 || d->free > d->total)
		return -1;
	return 0;
}

/* configure reads the environment; the result is nvmlInit_v2's. */
static nvmlReturn_t configure(void)
{
	const char *s = getenv("PZ_FAKENVML_INIT_ERROR");
	if (s != NULL && *s != '\0') {
		char *end;
		long r = strtol(s, &end, 10);
		if (*end == '\0' && r != NVML_SUCCESS)
			return (nvmlReturn_t)r;
		fprintf(stderr, "fakenvml: PZ_FAKENVML_INIT_ERROR=%s is not a nonzero nvmlReturn_t\n", s);
		return NVML_ERROR_UNKNOWN;
	}
	g_ndev = 0;
	s = getenv("PZ_FAKENVML_DEVICES");
	if (s == NULL || *s == '\0')
		return NVML_SUCCESS;
	for (const char *p = s; *p != '\0';) {
		const char *end = strchr(p, ';');
		if (end == NULL)
			end = p + strlen(p);
		if (g_ndev == MAX_DEVICES || parse_device(p, end, &g_dev[g_ndev]) != 0) {
			fprintf(stderr, "fakenvml: PZ_FAKENVML_DEVICES: want at most %d entries \"UUID,BUSID,TOTAL,FREE\" "
				"separated by ';' with FREE <= TOTAL, have %s\n", MAX_DEVICES, s);
			g_ndev = 0;
			return NVML_ERROR_UNKNOWN;
		}
		g_ndev++;
		p = *end == ';' ? end + 1 : end;
	}
	return NVML_SUCCESS;
}

/* ---- Initialization and cleanup ---- */

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
	nvmlReturn_t r = NVML_SUCCESS;
	atomic_fetch_add(&g_inits, 1);
	pthread_mutex_lock(&g_mu);
	if (g_refs == 0)
		r = configure();
	if (r == NVML_SUCCESS)
		g_refs++;
	pthread_mutex_unlock(&g_mu);
	return r;
}

/* Like the real library, a shutdown too many is not an error. */
EXPORT nvmlReturn_t nvmlShutdown(void)
{
	atomic_fetch_add(&g_shutdowns, 1);
	pthread_mutex_lock(&g_mu);
	if (g_refs > 0)
		g_refs--;
	pthread_mutex_unlock(&g_mu);
	return NVML_SUCCESS;
}

/* ---- Devices ---- */

/* lookup finds the device match accepts; the caller holds g_mu. */
static nvmlReturn_t lookup(nvmlDevice_t *device, int (*match)(const struct fdev *, const void *), const void *key)
{
	for (int i = 0; i < g_ndev; i++) {
		if (match(&g_dev[i], key)) {
			*device = &g_dev[i];
			return NVML_SUCCESS;
		}
	}
	return NVML_ERROR_NOT_FOUND;
}

static int match_uuid(const struct fdev *d, const void *key)
{
	return strcmp(d->uuid, key) == 0;
}

static int match_pci(const struct fdev *d, const void *key)
{
	const struct fdev *k = key;
	return d->domain == k->domain && d->bus == k->bus && d->device == k->device && d->function == k->function;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	nvmlReturn_t r;
	atomic_fetch_add(&g_lookups, 1);
	pthread_mutex_lock(&g_mu);
	if (g_refs == 0)
		r = NVML_ERROR_UNINITIALIZED;
	else if (uuid == NULL || *uuid == '\0' || device == NULL)
		r = NVML_ERROR_INVALID_ARGUMENT;
	else
		r = lookup(device, match_uuid, uuid);
	pthread_mutex_unlock(&g_mu);
	return r;
}

static nvmlReturn_t handle_by_pci(const char *bus_id, nvmlDevice_t *device)
{
	struct fdev key;
	nvmlReturn_t r;
	atomic_fetch_add(&g_lookups, 1);
	pthread_mutex_lock(&g_mu);
	if (g_refs == 0)
		r = NVML_ERROR_UNINITIALIZED;
	else if (bus_id == NULL || device == NULL ||
		 parse_pci(bus_id, &key.domain, &key.bus, &key.device, &key.function) != 0)
		r = NVML_ERROR_INVALID_ARGUMENT;
	else
		r = lookup(device, match_pci, &key);
	pthread_mutex_unlock(&g_mu);
	return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device)
{
	return handle_by_pci(bus_id, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device)
{
	return handle_by_pci(bus_id, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	nvmlReturn_t r = NVML_SUCCESS;
	atomic_fetch_add(&g_meminfo, 1);
	pthread_mutex_lock(&g_mu);
	if (g_refs == 0)
		r = NVML_ERROR_UNINITIALIZED;
	else if (memory == NULL || device == NULL || device < &g_dev[0] || device >= &g_dev[g_ndev])
		r = NVML_ERROR_INVALID_ARGUMENT;
	else {
		memory->total = device->total;
		memory->free = device->free;
		memory->used = device->total - device->free;
	}
	pthread_mutex_unlock(&g_mu);
	return r;
}

/* ---- Test hooks ---- */

/*
 * pzfakenvml_stats copies up to n counters into out and returns how many
 * it keeps: nvmlInit_v2 calls, nvmlShutdown calls, handle lookups
 * (by UUID or PCI bus id), nvmlDeviceGetMemoryInfo calls, and the
 * current initialization count.
 */
EXPORT int pzfakenvml_stats(unsigned long long *out, int n)
{
	unsigned long long v[5];
	v[0] = atomic_load(&g_inits);
	v[1] = atomic_load(&g_shutdowns);
	v[2] = atomic_load(&g_lookups);
	v[3] = atomic_load(&g_meminfo);
	pthread_mutex_lock(&g_mu);
	v[4] = (unsigned long long)g_refs;
	pthread_mutex_unlock(&g_mu);
	for (int i = 0; i < n && i < 5; i++)
		out[i] = v[i];
	return 5;
}
