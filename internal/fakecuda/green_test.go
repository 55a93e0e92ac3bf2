package fakecuda_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// resource is a CUdevResource (144 bytes) as 32-bit words: type is word
// 0, the union starts at word 24 (byte 96) with smCount,
// minSmPartitionSize and smCoscheduledAlignment.
type resource [36]uint32

func (r *resource) typ() uint32   { return r[0] }
func (r *resource) count() uint32 { return r[24] }

// Enums of cuda.h.
const (
	resourceTypeSM       = 1   // CU_DEV_RESOURCE_TYPE_SM
	ignoreCoscheduling   = 1   // CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING
	greenDefaultStream   = 1   // CU_GREEN_CTX_DEFAULT_STREAM
	streamNonBlocking    = 1   // CU_STREAM_NON_BLOCKING
	errContextDestroyed  = 709 // CUDA_ERROR_CONTEXT_IS_DESTROYED
	errInvalidResType    = 914 // CUDA_ERROR_INVALID_RESOURCE_TYPE
	errInvalidResConfig  = 915 // CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION
	errStreamDetachedRes = 917 // CUDA_ERROR_STREAM_DETACHED
)

// greenAPI binds the stand-in's green context entry points (and a few
// stream ones) directly, to call them with arguments the Go API never
// passes.
type greenAPI struct {
	deviceGetDevResource   func(dev int32, r *resource, typ int32) int32
	split                  func(result *resource, nb *uint32, input, rem *resource, flags, minCount uint32) int32
	generateDesc           func(desc *uintptr, r *resource, n uint32) int32
	greenCtxCreate         func(g *uintptr, desc uintptr, dev int32, flags uint32) int32
	greenCtxDestroy        func(g uintptr) int32
	ctxFromGreenCtx        func(c *uintptr, g uintptr) int32
	ctxGetDevResource      func(c uintptr, r *resource, typ int32) int32
	greenCtxGetDevResource func(g uintptr, r *resource, typ int32) int32
	greenCtxStreamCreate   func(s *uintptr, g uintptr, flags uint32, priority int32) int32
	ctxSetCurrent          func(c uintptr) int32
	streamQuery            func(s uintptr) int32
	streamDestroy          func(s uintptr) int32
}

func bindGreen(t *testing.T, lib string) *greenAPI {
	t.Helper()
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = purego.Dlclose(h) })
	a := &greenAPI{}
	for name, fptr := range map[string]any{
		"cuDeviceGetDevResource":      &a.deviceGetDevResource,
		"cuDevSmResourceSplitByCount": &a.split,
		"cuDevResourceGenerateDesc":   &a.generateDesc,
		"cuGreenCtxCreate":            &a.greenCtxCreate,
		"cuGreenCtxDestroy":           &a.greenCtxDestroy,
		"cuCtxFromGreenCtx":           &a.ctxFromGreenCtx,
		"cuCtxGetDevResource":         &a.ctxGetDevResource,
		"cuGreenCtxGetDevResource":    &a.greenCtxGetDevResource,
		"cuGreenCtxStreamCreate":      &a.greenCtxStreamCreate,
		"cuCtxSetCurrent":             &a.ctxSetCurrent,
		"cuStreamQuery":               &a.streamQuery,
		"cuStreamDestroy_v2":          &a.streamDestroy,
	} {
		sym, err := purego.Dlsym(h, name)
		require.NoError(t, err, name)
		purego.RegisterFunc(fptr, sym)
	}
	return a
}

// openGreen loads a fresh instance with devices GPUs of 16 SMs.
func openGreen(t *testing.T, devices int) (*cuda.Driver, string) {
	t.Helper()
	fakecuda.SetSMs(t, 16)
	return open(t, devices, 1<<20)
}

// TestSMsConfiguration checks EnvSMs: the multiprocessor count and the
// SM resource follow it, and values out of range make cuInit fail.
func TestSMsConfiguration(t *testing.T) {
	fakecuda.SetSMs(t, 132)
	d, lib := open(t, 1, 1<<20)
	dev, err := d.Device(0)
	require.NoError(t, err)
	require.Equal(t, 132, dev.SMCount)
	var r resource
	require.Zero(t, bindGreen(t, lib).deviceGetDevResource(0, &r, resourceTypeSM))
	require.EqualValues(t, 132, r.count())

	for _, bad := range []string{"0", "1025", "many"} {
		t.Setenv(fakecuda.EnvSMs, bad)
		_, err := cuda.OpenLibrary(fakecuda.Instance(t))
		require.Error(t, err, bad)
		require.False(t, cuda.IsNoDriver(err), "%s: a broken driver, not a missing one", bad)
	}
}

// TestSplitEntryPoint calls cuDeviceGetDevResource and
// cuDevSmResourceSplitByCount with the arguments the documentation
// allows and some it does not.
func TestSplitEntryPoint(t *testing.T) {
	_, lib := openGreen(t, 1)
	a := bindGreen(t, lib)
	var all resource
	require.Zero(t, a.deviceGetDevResource(0, &all, resourceTypeSM))
	require.EqualValues(t, resourceTypeSM, all.typ())
	require.EqualValues(t, 16, all.count())
	require.EqualValues(t, 8, all[25], "minSmPartitionSize, as CUDA 13 reports it")
	require.EqualValues(t, 8, all[26], "smCoscheduledAlignment")
	require.EqualValues(t, errInvalidResType, a.deviceGetDevResource(0, &all, 2), "workqueues are not SMs")
	require.EqualValues(t, cuda.ErrInvalidDevice, a.deviceGetDevResource(3, &all, resourceTypeSM))
	require.EqualValues(t, cuda.ErrInvalidValue, a.deviceGetDevResource(0, nil, resourceTypeSM))

	// With no result array, the split says how many groups it would make.
	for _, tc := range []struct{ flags, minCount, want uint32 }{
		{0, 8, 2}, {0, 0, 2}, {0, 1, 2}, {0, 9, 1}, {0, 16, 1},
		{ignoreCoscheduling, 1, 8}, {ignoreCoscheduling, 3, 4}, {ignoreCoscheduling, 16, 1},
	} {
		var nb uint32
		require.Zero(t, a.split(nil, &nb, &all, nil, tc.flags, tc.minCount), "%+v", tc)
		require.Equal(t, tc.want, nb, "%+v", tc)
	}

	var parts [4]resource
	var rem resource
	nb := uint32(4)
	require.Zero(t, a.split(&parts[0], &nb, &all, &rem, 0, 8))
	require.EqualValues(t, 2, nb, "only as many groups as fit")
	require.EqualValues(t, 8, parts[0].count())
	require.EqualValues(t, 8, parts[1].count())
	require.Zero(t, rem.typ(), "nothing left: CU_DEV_RESOURCE_TYPE_INVALID")
	require.Zero(t, rem.count())
	nb = 1
	require.Zero(t, a.split(&parts[0], &nb, &all, &rem, 0, 1))
	require.EqualValues(t, 1, nb)
	require.EqualValues(t, 8, parts[0].count(), "rounded up to 8")
	require.EqualValues(t, resourceTypeSM, rem.typ())
	require.EqualValues(t, 8, rem.count())
	nb = 1
	require.Zero(t, a.split(&parts[0], &nb, &all, nil, 0, 1), "the remainder may be NULL")

	var empty, forged resource
	forged[0], forged[24] = resourceTypeSM, 4
	for _, tc := range []struct {
		name     string
		result   *resource
		nb       uint32
		input    *resource
		flags    uint32
		minCount uint32
		want     int32
	}{
		{"minCount above the count", &parts[0], 1, &all, 0, 17, int32(cuda.ErrInvalidValue)},
		{"no groups", &parts[0], 0, &all, 0, 8, int32(cuda.ErrInvalidValue)},
		{"unknown flags", &parts[0], 1, &all, 4, 8, int32(cuda.ErrInvalidValue)},
		{"no input", &parts[0], 1, nil, 0, 8, int32(cuda.ErrInvalidValue)},
		{"not an SM resource", &parts[0], 1, &empty, 0, 8, errInvalidResType},
		{"not the driver's", &parts[0], 1, &forged, 0, 2, int32(cuda.ErrInvalidValue)},
		{"a remainder split again", &parts[1], 1, &rem, 0, 8, errInvalidResConfig},
	} {
		nb := tc.nb
		require.Equal(t, tc.want, a.split(tc.result, &nb, tc.input, nil, tc.flags, tc.minCount), tc.name)
	}
	require.EqualValues(t, cuda.ErrInvalidValue, a.split(&parts[0], nil, &all, nil, 0, 8), "no nbGroups")
}

// TestGreenContextEntryPoints goes through a green context's life with
// the entry points called directly: descriptor, creation, conversion,
// resources, streams, destruction, and stale handles after it.
func TestGreenContextEntryPoints(t *testing.T) {
	d, lib := openGreen(t, 2)
	newContext(t, d, 0) // holds the primary context, which the green context's destruction then leaves
	a := bindGreen(t, lib)
	var all, all1 resource
	require.Zero(t, a.deviceGetDevResource(0, &all, resourceTypeSM))
	require.Zero(t, a.deviceGetDevResource(1, &all1, resourceTypeSM))
	split := func(in *resource) [2]resource {
		var parts [2]resource
		nb := uint32(2)
		require.Zero(t, a.split(&parts[0], &nb, in, nil, 0, 8))
		return parts
	}
	p0, q0, p1 := split(&all), split(&all), split(&all1)

	var desc uintptr
	for _, tc := range []struct {
		name string
		res  []resource
		want int32
	}{
		{"two devices", []resource{p0[0], p1[1]}, errInvalidResConfig},
		{"two splits", []resource{p0[0], q0[1]}, errInvalidResConfig},
		{"one group twice", []resource{p0[1], p0[1]}, errInvalidResConfig},
		{"a device's and a group", []resource{all, p0[0]}, errInvalidResConfig},
		{"no SMs", []resource{{}}, errInvalidResType},
	} {
		require.Equal(t, tc.want, a.generateDesc(&desc, &tc.res[0], uint32(len(tc.res))), tc.name)
	}
	require.EqualValues(t, cuda.ErrInvalidValue, a.generateDesc(&desc, &p0[0], 0))
	require.EqualValues(t, cuda.ErrInvalidValue, a.generateDesc(nil, &p0[0], 1))
	require.Zero(t, a.generateDesc(&desc, &all1, 1), "a device's resource alone")
	desc1 := desc
	require.Zero(t, a.generateDesc(&desc, &p0[0], 2), "both groups of one split")

	var g uintptr
	require.EqualValues(t, cuda.ErrInvalidValue, a.greenCtxCreate(&g, desc, 0, 0), "CU_GREEN_CTX_DEFAULT_STREAM is required")
	require.EqualValues(t, cuda.ErrInvalidValue, a.greenCtxCreate(&g, desc1, 0, greenDefaultStream), "device 1's descriptor")
	require.EqualValues(t, cuda.ErrInvalidValue, a.greenCtxCreate(&g, desc+8, 0, greenDefaultStream), "not a descriptor")
	require.EqualValues(t, cuda.ErrInvalidDevice, a.greenCtxCreate(&g, desc, 7, greenDefaultStream))
	require.Zero(t, a.greenCtxCreate(&g, desc, 0, greenDefaultStream))
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.GreenContexts)

	var r resource
	require.Zero(t, a.greenCtxGetDevResource(g, &r, resourceTypeSM))
	require.EqualValues(t, 16, r.count(), "two groups of 8")
	require.EqualValues(t, errInvalidResType, a.greenCtxGetDevResource(g, &r, 2))
	var c uintptr
	require.Zero(t, a.ctxFromGreenCtx(&c, g))
	require.NotEqual(t, g, c, "a CUgreenCtx is not a CUcontext")
	require.Zero(t, a.ctxGetDevResource(c, &r, resourceTypeSM))
	require.EqualValues(t, 16, r.count())
	require.EqualValues(t, cuda.ErrInvalidContext, a.ctxGetDevResource(g, &r, resourceTypeSM), "a green handle")
	require.EqualValues(t, cuda.ErrInvalidValue, a.ctxFromGreenCtx(nil, g))

	var s uintptr
	require.EqualValues(t, cuda.ErrInvalidValue, a.greenCtxStreamCreate(&s, g, 0, 0), "CU_STREAM_NON_BLOCKING is required")
	require.Zero(t, a.greenCtxStreamCreate(&s, g, streamNonBlocking, -1), "whatever the calling thread's context")
	require.EqualValues(t, cuda.ErrInvalidContext, a.streamQuery(s), "no context current here")

	// A thread with the green context current uses its stream; it keeps
	// the destroyed context current afterwards, which then fails.
	current, destroyed := make(chan int32, 1), make(chan struct{})
	after := make(chan int32, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: Go discards the thread
		if r := a.ctxSetCurrent(c); r != 0 {
			current <- r
			return
		}
		current <- a.streamQuery(s)
		select {
		case <-destroyed:
			after <- a.streamQuery(0)
		case <-time.After(time.Minute):
			after <- -1
		}
	}()
	require.Zero(t, recv(t, current))
	require.Zero(t, a.greenCtxDestroy(g))
	close(destroyed)
	require.EqualValues(t, cuda.ErrInvalidContext, recv(t, after), "a destroyed context current")
	require.EqualValues(t, errContextDestroyed, a.greenCtxDestroy(g))
	require.EqualValues(t, cuda.ErrInvalidContext, a.greenCtxDestroy(c), "not a green context")
	require.EqualValues(t, cuda.ErrInvalidContext, a.ctxFromGreenCtx(&c, g))
	require.EqualValues(t, cuda.ErrInvalidContext, a.greenCtxGetDevResource(g, &r, resourceTypeSM))
	require.EqualValues(t, cuda.ErrInvalidContext, a.ctxSetCurrent(c))
	require.Zero(t, a.streamDestroy(s), "a detached stream needs no current context to be destroyed")
	st, err = fakecuda.Stats(lib)
	require.NoError(t, err)
	require.Zero(t, st.GreenContexts)
}

// recv reads one result within a minute.
func recv(t *testing.T, ch <-chan int32) int32 {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute):
		t.Fatal("no result within a minute")
		return 0
	}
}

// TestGreenContextStreams checks the streams of a green Context: they
// belong to it, cuCtxSynchronize in the primary context waits for them
// but not the reverse, destroying the green context waits for their
// work and detaches them, and cuGreenCtxStreamCreate makes one as
// cuStreamCreate does on its thread.
func TestGreenContextStreams(t *testing.T) {
	fakecuda.SetDelay(t, time.Millisecond) // work queued is still pending when the test looks
	d, lib := openGreen(t, 1)
	ctx, c := newContext(t, d, 0)
	a := bindGreen(t, lib)
	all, err := d.SMs(0)
	require.NoError(t, err)
	parts, _, err := d.SplitSMs(all, 2, 8)
	require.NoError(t, err)
	g, err := d.NewGreenContext(ctx, 0, parts[0])
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() }) // closed below; this is for a test that fails first
	gk, ck := kernels(t, ctx, g), kernels(t, ctx, c)
	const n = 512
	p, err := c.Alloc(ctx, 8*n)
	require.NoError(t, err)
	out := make([]float64, n)

	// The primary context's synchronization covers the green streams.
	s, err := g.NewStream(ctx)
	require.NoError(t, err)
	for v := range 4 {
		require.NoError(t, launch(ctx, g, gk["pz_fill_f64"], n, s, p, float64(v), uint64(n)))
	}
	require.NoError(t, c.Synchronize(ctx))
	require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(out), p))
	require.Equal(t, 3.0, out[n-1])

	// The green context's does not cover the primary context's streams.
	h := newHolder(t, ctx, c, 1)
	cs := newStream(t, ctx, c)
	h.hold(t, ctx, c, ck, cs, 0)
	require.NoError(t, g.Synchronize(ctx), "returns while the primary context's stream is held")
	h.release(0)
	require.NoError(t, cs.Synchronize(ctx))

	// cuGreenCtxStreamCreate's stream belongs to the green context.
	var raw uintptr
	require.NoError(t, g.Do(ctx, func() error {
		if r := a.greenCtxStreamCreate(&raw, g.GreenHandle(), streamNonBlocking, 0); r != 0 {
			return cuda.Result(r)
		}
		if r := a.streamQuery(raw); r != 0 {
			return cuda.Result(r)
		}
		return nil
	}))
	require.NoError(t, c.Do(ctx, func() error {
		require.EqualValues(t, cuda.ErrInvalidHandle, a.streamQuery(raw), "not the primary context's")
		return nil
	}))

	// Destroying the green context waits for its streams' work, then
	// detaches them.
	for v := range 4 {
		require.NoError(t, launch(ctx, g, gk["pz_fill_f64"], n, s, p, float64(10+v), uint64(n)))
	}
	require.NoError(t, g.Close())
	require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(out), p))
	require.Equal(t, 13.0, out[n-1], "the queued kernels ran before the green context went")
	err = launch(ctx, c, ck["pz_fill_f64"], n, s, p, 1.0, uint64(n))
	require.ErrorIs(t, err, cuda.ErrStreamDetached)
	require.ErrorIs(t, s.Destroy(ctx), cuda.ErrClosed, "its Context is closed")
	require.NoError(t, c.Do(ctx, func() error {
		require.EqualValues(t, errStreamDetachedRes, a.streamQuery(raw))
		require.Zero(t, a.streamDestroy(s.Handle()))
		require.Zero(t, a.streamDestroy(raw))
		return nil
	}))
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.Equal(t, map[int]uint64{8: 8}, st.GreenKernels)
	require.NoError(t, c.Free(ctx, p))
}
