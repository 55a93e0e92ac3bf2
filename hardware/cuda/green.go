package cuda

import (
	"context"
	"errors"
	"fmt"
	"unsafe"
)

// Green contexts (CUDA 12.4): the entry points are optional, see
// driver.go. The steps follow the driver API's Green Contexts section:
// get a device's SM resource (cuDeviceGetDevResource), split it
// (cuDevSmResourceSplitByCount), make a descriptor of some parts
// (cuDevResourceGenerateDesc), create the green context
// (cuGreenCtxCreate) and convert it into a CUcontext (cuCtxFromGreenCtx)
// that cuCtxSetCurrent accepts.

const (
	// devResourceTypeSM is CU_DEV_RESOURCE_TYPE_SM (CUdevResourceType).
	devResourceTypeSM int32 = 1
	// greenCtxDefaultStream is CU_GREEN_CTX_DEFAULT_STREAM, which
	// cuGreenCtxCreate requires in CUDA 12.4 and accepts after.
	greenCtxDefaultStream uint32 = 1
)

// devResource is CUdevResource, a tagged union of 144 bytes in every
// cuda.h from 12.4 on:
//
//	CUDA 12.4 to 12.9:
//	struct { CUdevResourceType type; unsigned char _internal_padding[92];
//	         union { CUdevSmResource sm; unsigned char _oversize[48]; }; }
//	CUDA 13.x:
//	struct { CUdevResourceType type; unsigned char _internal_padding[92];
//	         union { CUdevSmResource sm; CUdevWorkqueueConfigResource wqConfig;
//	                 CUdevWorkqueueResource wq; unsigned char _oversize[40]; };
//	         struct CUdevResource_st *nextResource; }
//
// In both, type is at offset 0 and the union at 96, and CUdevSmResource
// begins with unsigned int smCount (12.4 has nothing else; 13.0 adds
// minSmPartitionSize and smCoscheduledAlignment after it, 13.1 flags and
// localityDomainId, all inside the union). This layout names only type
// and smCount and carries the other 136 bytes verbatim: the driver keeps
// private data in _internal_padding (and, from 13.0, may link resources
// through nextResource), so a resource goes back to it exactly as it
// wrote it. The leading zero-length uint64 array gives the 8-byte
// alignment that nextResource gives the C struct from 13.0 on.
type devResource struct {
	_       [0]uint64
	typ     int32    // CUdevResourceType
	_       [92]byte // _internal_padding
	smCount uint32   // sm.smCount, the union's first word
	_       [44]byte // the rest of the union, and nextResource from 13.0
}

// The size and smCount's offset in cuda.h, checked at compile time.
var (
	_ [144]byte = [unsafe.Sizeof(devResource{})]byte{}
	_ [96]byte  = [unsafe.Offsetof(devResource{}.smCount)]byte{}
)

// ErrTooFewSMs is returned, wrapped, by SplitSMs when a resource has too
// few SMs for the split asked for: fewer than groups*minCount, or fewer
// than groups groups take once the driver has rounded minCount up to the
// device's SM granularity. It wraps ErrBadArgument.
var ErrTooFewSMs = fmt.Errorf("%w: too few SMs", ErrBadArgument)

// An SMResource is a set of streaming multiprocessors (SMs) of one
// device, as the driver describes it (a CUdevResource of type
// CU_DEV_RESOURCE_TYPE_SM): all of a device's (Driver.SMs), a Context's
// (Context.SMs), or a part of a split (Driver.SplitSMs), which
// NewGreenContext turns into a green context. It is a small value, safe
// to copy and to use from any goroutine. The zero SMResource has no SMs.
type SMResource struct {
	ordinal int
	raw     devResource
}

// Count returns the number of SMs in r: 0 for the zero SMResource and
// for the empty rest of a split.
func (r SMResource) Count() int {
	if r.raw.typ != devResourceTypeSM {
		return 0
	}
	return int(r.raw.smCount)
}

// Ordinal returns the ordinal of the device whose SMs r holds.
func (r SMResource) Ordinal() int { return r.ordinal }

// String describes r, e.g. "cuda0: 8 SMs".
func (r SMResource) String() string {
	return fmt.Sprintf("cuda%d: %d SMs", r.ordinal, r.Count())
}

// SMs returns all the SMs of device ordinal (cuDeviceGetDevResource),
// the resource to split with SplitSMs; its Count is the device's
// multiprocessor count. It needs no Context. It returns an error
// wrapping ErrNotSupported when the driver predates green contexts (CUDA
// 12.4) or the device lacks them, and ErrNoDriver for a nil Driver.
func (d *Driver) SMs(ordinal int) (SMResource, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return SMResource{}, err
	}
	if d.api.deviceGetDevResource == nil {
		return SMResource{}, d.unsupported("cuDeviceGetDevResource")
	}
	r := SMResource{ordinal: ordinal}
	if err := d.check("cuDeviceGetDevResource", d.api.deviceGetDevResource(dev, &r.raw, devResourceTypeSM)); err != nil {
		return SMResource{}, fmt.Errorf("cuda: device %d: SMs: %w", ordinal, err)
	}
	return r, nil
}

// SplitSMs splits r into groups disjoint parts of at least minCount SMs
// each (cuDevSmResourceSplitByCount with default flags) and returns them
// with the SMs left over, rest, whose Count is 0 when there are none. r
// must come from SMs or Context.SMs: the driver does not split parts
// again. It needs no Context and calls the driver once.
//
// The driver rounds minCount up to the device's SM granularity and gives
// every part that many SMs, so read the parts' Count. Its guideline (CUDA
// 12.4 documentation, "subject to change"): at least 1 SM on compute
// capability 6.x; at least 2, a multiple of 2, on 7.x; at least 4, a
// multiple of 2, on 8.x; at least 8, a multiple of 8, on 9.0 and later.
// The rest has fewer functional and performance guarantees than the
// parts.
//
// groups and minCount must be positive (else ErrBadArgument). When r has
// fewer than groups*minCount SMs, or the driver makes fewer than groups
// parts after rounding, SplitSMs returns an error wrapping ErrTooFewSMs.
// It returns an error wrapping ErrNotSupported when the driver predates
// green contexts (CUDA 12.4), and ErrNoDriver for a nil Driver.
func (d *Driver) SplitSMs(r SMResource, groups, minCount int) (parts []SMResource, rest SMResource, err error) {
	if d == nil {
		return nil, SMResource{}, ErrNoDriver
	}
	if d.api.devSmResourceSplitByCount == nil {
		return nil, SMResource{}, d.unsupported("cuDevSmResourceSplitByCount")
	}
	what := fmt.Sprintf("cuda: device %d: splitting %d SMs into %d groups of at least %d", r.ordinal, r.Count(), groups, minCount)
	n := r.Count()
	switch {
	case groups < 1 || minCount < 1:
		return nil, SMResource{}, fmt.Errorf("%s: %w: groups and minCount must be positive", what, ErrBadArgument)
	case n == 0:
		return nil, SMResource{}, fmt.Errorf("%s: %w: no SMs to split", what, ErrBadArgument)
	case groups > n || minCount > n || groups*minCount > n: // the product cannot overflow once both are at most n
		return nil, SMResource{}, fmt.Errorf("%s: %w", what, ErrTooFewSMs)
	}
	raw := make([]devResource, groups)
	made := uint32(groups)
	in := r.raw
	rest = SMResource{ordinal: r.ordinal}
	if err := d.check("cuDevSmResourceSplitByCount",
		d.api.devSmResourceSplitByCount(&raw[0], &made, &in, &rest.raw, 0, uint32(minCount))); err != nil {
		return nil, SMResource{}, fmt.Errorf("%s: %w", what, err)
	}
	if int(made) < groups {
		return nil, SMResource{}, fmt.Errorf("%s: %w: rounded to the device's SM granularity, %d groups fit", what, ErrTooFewSMs, made)
	}
	parts = make([]SMResource, made)
	for i := range parts {
		parts[i] = SMResource{ordinal: r.ordinal, raw: raw[i]}
	}
	return parts, rest, nil
}

// NewGreenContext creates a green context on device ordinal over sms (one
// resource, or several parts of one SplitSMs, all of that device) and
// returns a Context whose thread has it current: it generates the
// resource descriptor (cuDevResourceGenerateDesc), creates the green
// context (cuGreenCtxCreate, CU_GREEN_CTX_DEFAULT_STREAM), converts it
// into a CUcontext (cuCtxFromGreenCtx) and makes that current
// (cuCtxSetCurrent), all on the Context's thread.
//
// The Context is used like one from NewContext, with the same threading
// and cancellation rules, but the kernels launched through it run on its
// SMs only: on its default stream and on the streams NewStream creates,
// which belong to the green context because they are created while it is
// current (cuStreamGetGreenCtx's documentation; cuGreenCtxStreamCreate,
// CUDA 12.5, is not needed). Memory is the device's: pointers allocated
// through any Context of the device may be used through this one and the
// reverse. Modules, streams and events belong to the Context that made
// them; use them through it. SMs reads the Context's share back.
//
// The green context retains the device's primary context, so creating it
// is cheap while a Context from NewContext holds the device, and costs
// the primary context's creation otherwise. Close destroys it
// (cuGreenCtxDestroy) once its thread is done; the driver does not
// destroy its streams but detaches them (CUDA_ERROR_STREAM_DETACHED), so
// destroy them before Close.
//
// It returns an error wrapping ErrBadArgument when sms is empty, holds a
// resource without SMs or one of another device, and ErrNotSupported when
// the driver predates green contexts (CUDA 12.4) or the device lacks
// them. If ctx is done by the time the context is ready, NewGreenContext
// destroys it and returns ctx.Err().
func (d *Driver) NewGreenContext(ctx context.Context, ordinal int, sms ...SMResource) (*Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dev, err := d.device(ordinal)
	if err != nil {
		return nil, err
	}
	for _, s := range []struct {
		bound bool
		name  string
	}{
		{d.api.devResourceGenerateDesc != nil, "cuDevResourceGenerateDesc"},
		{d.api.greenCtxCreate != nil, "cuGreenCtxCreate"},
		{d.api.greenCtxDestroy != nil, "cuGreenCtxDestroy"},
		{d.api.ctxFromGreenCtx != nil, "cuCtxFromGreenCtx"},
	} {
		if !s.bound {
			return nil, d.unsupported(s.name)
		}
	}
	if len(sms) == 0 {
		return nil, fmt.Errorf("cuda: device %d: green context: %w: no SMs", ordinal, ErrBadArgument)
	}
	raw := make([]devResource, len(sms))
	total := 0
	for i, r := range sms {
		switch {
		case r.Count() == 0:
			return nil, fmt.Errorf("cuda: device %d: green context: %w: SM resource %d has no SMs", ordinal, ErrBadArgument, i)
		case r.ordinal != ordinal:
			return nil, fmt.Errorf("cuda: device %d: green context: %w: SM resource %d is of device %d", ordinal, ErrBadArgument, i, r.ordinal)
		}
		raw[i] = r.raw
		total += r.Count()
	}
	c := &Context{d: d, ordinal: ordinal, dev: dev}
	setup := func() error {
		var desc, green, h uintptr
		if err := d.check("cuDevResourceGenerateDesc", d.api.devResourceGenerateDesc(&desc, &raw[0], uint32(len(raw)))); err != nil {
			return err
		}
		if err := d.check("cuGreenCtxCreate", d.api.greenCtxCreate(&green, desc, dev, greenCtxDefaultStream)); err != nil {
			return err
		}
		err := d.check("cuCtxFromGreenCtx", d.api.ctxFromGreenCtx(&h, green))
		if err == nil {
			err = d.check("cuCtxSetCurrent", d.api.ctxSetCurrent(h))
		}
		if err != nil {
			_ = d.api.greenCtxDestroy(green)
			return err
		}
		c.handle, c.green = h, green
		return nil
	}
	// The thread runs teardown after its last call: nothing uses the
	// green context after it is destroyed.
	teardown := func() error {
		err := d.check("cuCtxSetCurrent", d.api.ctxSetCurrent(0))
		err = errors.Join(err, d.check("cuGreenCtxDestroy", d.api.greenCtxDestroy(c.green)))
		if err != nil {
			return fmt.Errorf("cuda: device %d: closing the green context of %d SMs: %w", ordinal, total, err)
		}
		return nil
	}
	c.ex, err = startExecutor(setup, teardown)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: green context of %d SMs: %w", ordinal, total, err)
	}
	if err := ctx.Err(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// SMs returns the SMs the Context's kernels run on (cuCtxGetDevResource):
// all the device's for a Context from NewContext, its share for one from
// NewGreenContext. The result may be split with SplitSMs. It returns an
// error wrapping ErrNotSupported when the driver predates green contexts
// (CUDA 12.4).
func (c *Context) SMs(ctx context.Context) (SMResource, error) {
	if c.d.api.ctxGetDevResource == nil {
		return SMResource{}, c.d.unsupported("cuCtxGetDevResource")
	}
	r := SMResource{ordinal: c.ordinal}
	err := c.call(ctx, "cuCtxGetDevResource", func() Result {
		return c.d.api.ctxGetDevResource(c.handle, &r.raw, devResourceTypeSM)
	})
	if err != nil {
		return SMResource{}, err
	}
	return r, nil
}

// GreenHandle returns the raw CUgreenCtx of a Context from
// NewGreenContext, for libraries bound separately that take one; 0 for a
// Context from NewContext. Handle returns the CUcontext either way.
func (c *Context) GreenHandle() uintptr { return c.green }
