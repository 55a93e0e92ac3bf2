package fakenvml_test

import (
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/fakenvml"
)

// nvmlReturn_t codes, from nvml.h.
const (
	success         = 0
	uninitialized   = 1
	invalidArgument = 2
	noPermission    = 4
	notFound        = 6
	unknown         = 999
)

// raw is the stand-in's C API, bound directly, so that these tests check
// the library against nvml.h and not against hardware/nvml's use of it.
// Pointers are uintptr so that NULL can be passed.
type raw struct {
	init         func() int32
	shutdown     func() int32
	errorString  func(r int32) string
	handleByUUID func(uuid uintptr, dev uintptr) int32
	handleByPCI  func(busID uintptr, dev uintptr) int32
	memoryInfo   func(dev uintptr, mem uintptr) int32
}

// memory is nvmlMemory_t.
type memory struct{ total, free, used uint64 }

func load(t *testing.T, lib string) *raw {
	t.Helper()
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	r := &raw{}
	for name, fptr := range map[string]any{
		"nvmlInit_v2":                      &r.init,
		"nvmlShutdown":                     &r.shutdown,
		"nvmlErrorString":                  &r.errorString,
		"nvmlDeviceGetHandleByUUID":        &r.handleByUUID,
		"nvmlDeviceGetHandleByPciBusId_v2": &r.handleByPCI,
		"nvmlDeviceGetMemoryInfo":          &r.memoryInfo,
	} {
		purego.RegisterLibFunc(fptr, h, name)
	}
	return r
}

// cstr returns a NUL-terminated copy of s and its address; the caller
// keeps the slice alive across the call.
func cstr(s string) ([]byte, uintptr) {
	b := append([]byte(s), 0)
	return b, uintptr(unsafe.Pointer(&b[0]))
}

var devs = []fakenvml.Device{
	{UUID: "GPU-00000000-0000-4000-8000-000000000001", PCIBusID: "0000:01:00.0", TotalBytes: 1000, FreeBytes: 600},
	{UUID: "MIG-00000000-0000-4000-8000-000000000002", PCIBusID: "0000:a1:00.0", TotalBytes: 2000, FreeBytes: 2000},
}

// byUUID looks uuid up and returns the handle and the result.
func byUUID(r *raw, uuid string) (uintptr, int32) {
	b, p := cstr(uuid)
	var h uintptr
	ret := r.handleByUUID(p, uintptr(unsafe.Pointer(&h)))
	_ = b[0] // keep b alive
	return h, ret
}

func byPCI(r *raw, busID string) (uintptr, int32) {
	b, p := cstr(busID)
	var h uintptr
	ret := r.handleByPCI(p, uintptr(unsafe.Pointer(&h)))
	_ = b[0]
	return h, ret
}

func memInfo(r *raw, h uintptr) (memory, int32) {
	var m memory
	ret := r.memoryInfo(h, uintptr(unsafe.Pointer(&m)))
	return m, ret
}

func TestLifecycleAndLookups(t *testing.T) {
	lib := fakenvml.Instance(t)
	fakenvml.Setenv(t, devs...)
	r := load(t, lib)

	// Before nvmlInit_v2, every call is refused.
	_, ret := byUUID(r, devs[0].UUID)
	assert.EqualValues(t, uninitialized, ret, "lookup before init")
	_, ret = byPCI(r, devs[0].PCIBusID)
	assert.EqualValues(t, uninitialized, ret, "PCI lookup before init")

	require.EqualValues(t, success, r.init())
	require.EqualValues(t, success, r.init(), "init is counted, not refused")

	h0, ret := byUUID(r, devs[0].UUID)
	require.EqualValues(t, success, ret)
	m, ret := memInfo(r, h0)
	require.EqualValues(t, success, ret)
	assert.Equal(t, memory{total: 1000, free: 600, used: 400}, m)

	h1, ret := byUUID(r, devs[1].UUID)
	require.EqualValues(t, success, ret, "a MIG UUID")
	m, ret = memInfo(r, h1)
	require.EqualValues(t, success, ret)
	assert.Equal(t, memory{total: 2000, free: 2000}, m)

	// The bus id forms NVML documents, compared as numbers.
	for _, id := range []string{"0000:01:00.0", "00000000:01:00.0", "01:00.0", "0:1:0", "0000:01:00.0"} {
		h, ret := byPCI(r, id)
		assert.EqualValues(t, success, ret, id)
		assert.Equal(t, h0, h, id)
	}
	for _, id := range []string{"0000:A1:00.0", "a1:00.0"} {
		h, ret := byPCI(r, id)
		assert.EqualValues(t, success, ret, id)
		assert.Equal(t, h1, h, id)
	}

	// Unknown devices, malformed ids and NULL pointers.
	_, ret = byUUID(r, "GPU-ffffffff-0000-4000-8000-000000000001")
	assert.EqualValues(t, notFound, ret)
	_, ret = byUUID(r, "gpu-00000000-0000-4000-8000-000000000001")
	assert.EqualValues(t, notFound, ret, "UUIDs match exactly")
	_, ret = byUUID(r, "")
	assert.EqualValues(t, invalidArgument, ret)
	_, ret = byPCI(r, "0000:02:00.0")
	assert.EqualValues(t, notFound, ret)
	for _, id := range []string{"", "01", "0x0:01:00.0", "0000:01:00.0 ", "zz:00.0", "0000-01-00.0"} {
		_, ret = byPCI(r, id)
		assert.EqualValues(t, invalidArgument, ret, "%q", id)
	}
	b, p := cstr(devs[0].UUID)
	assert.EqualValues(t, invalidArgument, r.handleByUUID(0, uintptr(unsafe.Pointer(&h0))), "NULL uuid")
	assert.EqualValues(t, invalidArgument, r.handleByUUID(p, 0), "NULL device")
	_ = b[0]
	assert.EqualValues(t, invalidArgument, r.memoryInfo(h0, 0), "NULL memory")
	_, ret = memInfo(r, 0)
	assert.EqualValues(t, invalidArgument, ret, "NULL handle")
	var notHandle [8]byte
	_, ret = memInfo(r, uintptr(unsafe.Pointer(&notHandle[0])))
	assert.EqualValues(t, invalidArgument, ret, "not one of its handles")

	// nvmlErrorString's texts.
	assert.Equal(t, "Not Found", r.errorString(notFound))
	assert.Equal(t, "Uninitialized", r.errorString(uninitialized))
	assert.Equal(t, "Invalid Argument", r.errorString(invalidArgument))
	assert.Equal(t, "Unknown Error", r.errorString(12345))

	// Two inits need two shutdowns; a third is not an error.
	require.EqualValues(t, success, r.shutdown())
	_, ret = memInfo(r, h0)
	assert.EqualValues(t, success, ret, "still initialized once")
	require.EqualValues(t, success, r.shutdown())
	_, ret = memInfo(r, h0)
	assert.EqualValues(t, uninitialized, ret, "after the last shutdown")
	assert.EqualValues(t, success, r.shutdown())

	st, err := fakenvml.Stats(lib)
	require.NoError(t, err)
	assert.Equal(t, fakenvml.Counters{Inits: 2, Shutdowns: 3, Lookups: 23, MemoryInfo: 7, Refs: 0}, st)
}

func TestConfiguration(t *testing.T) {
	cases := []struct {
		name, devices, initError string
		want                     int32
	}{
		{name: "no devices", want: success},
		{name: "malformed", devices: "GPU-1,0000:01:00.0,10", want: unknown},
		{name: "free above total", devices: "GPU-1,0000:01:00.0,10,11", want: unknown},
		{name: "bad bus id", devices: "GPU-1,bus,10,1", want: unknown},
		{name: "not a number", devices: "GPU-1,0000:01:00.0,10,-1", want: unknown},
		{name: "init error", devices: fakenvml.Format(devs...), initError: "4", want: noPermission},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lib := fakenvml.Instance(t)
			t.Setenv(fakenvml.EnvDevices, c.devices)
			t.Setenv(fakenvml.EnvInitError, c.initError)
			r := load(t, lib)
			assert.EqualValues(t, c.want, r.init(), "case %d", i)
			if c.want == success {
				_, ret := byUUID(r, devs[0].UUID)
				assert.EqualValues(t, notFound, ret, "case %d", i)
				assert.EqualValues(t, success, r.shutdown(), "case %d", i)
			}
			st, err := fakenvml.Stats(lib)
			require.NoError(t, err)
			assert.EqualValues(t, 1, st.Inits, "case %d", i)
			assert.Zero(t, st.Refs, "case %d: a failed init is not counted", i)
		})
	}
}

func TestBuildWithout(t *testing.T) {
	lib := fakenvml.BuildWithout(t, "nvmlDeviceGetMemoryInfo")
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	require.NoError(t, err)
	defer func() { _ = purego.Dlclose(h) }()
	_, err = purego.Dlsym(h, "nvmlDeviceGetMemoryInfo")
	assert.Error(t, err, "the symbol is gone")
	_, err = purego.Dlsym(h, "nvmlInit_v2")
	assert.NoError(t, err, "the others stay")
}

func TestFormat(t *testing.T) {
	assert.Equal(t, "GPU-a,0000:01:00.0,10,4;MIG-b,01:00.0,20,20", fakenvml.Format(
		fakenvml.Device{UUID: "GPU-a", PCIBusID: "0000:01:00.0", TotalBytes: 10, FreeBytes: 4},
		fakenvml.Device{UUID: "MIG-b", PCIBusID: "01:00.0", TotalBytes: 20, FreeBytes: 20}))
	assert.Empty(t, fakenvml.Format())
}
