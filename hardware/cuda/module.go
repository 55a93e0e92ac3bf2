package cuda

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// JIT options (CUjit_option) used to capture the compiler's error log.
const (
	jitErrorLogBuffer          int32 = 5 // CU_JIT_ERROR_LOG_BUFFER
	jitErrorLogBufferSizeBytes int32 = 6 // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
	jitLogBytes                      = 16 << 10
)

// A Module is code loaded into a context: PTX that the driver compiled
// for the device, or a cubin/fatbin.
type Module struct {
	c      *Context
	handle uintptr
}

// A Function is a kernel of a Module.
type Function struct {
	m      *Module
	name   string
	handle uintptr
}

// Name returns the kernel's name.
func (f *Function) Name() string { return f.name }

// LoadPTX loads PTX source into the context; the driver JIT-compiles it
// for the device (cuModuleLoadDataEx, or cuModuleLoadData where the Ex
// form is missing). PTX written for an older target (e.g. sm_52) runs on
// newer GPUs. A compile failure returns an *Error whose Log holds the
// compiler's messages.
func (c *Context) LoadPTX(ctx context.Context, ptx string) (*Module, error) {
	return c.LoadModule(ctx, []byte(ptx))
}

// LoadModule loads a module image: PTX text, a cubin or a fatbin
// (cuModuleLoadDataEx). The image is copied, so it need not stay alive.
func (c *Context) LoadModule(ctx context.Context, image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("%w: empty module image", ErrBadArgument)
	}
	// PTX must be NUL-terminated; a cubin does not mind a trailing zero.
	img := make([]byte, len(image)+1)
	copy(img, image)
	m := &Module{c: c}
	err := c.Do(ctx, func() error {
		if c.d.api.moduleLoadDataEx == nil {
			return c.d.check("cuModuleLoadData", c.d.api.moduleLoadData(&m.handle, unsafe.Pointer(&img[0])))
		}
		logBuf := make([]byte, jitLogBytes)
		var pin runtime.Pinner
		pin.Pin(&logBuf[0])
		defer pin.Unpin()
		opts := [2]int32{jitErrorLogBuffer, jitErrorLogBufferSizeBytes}
		// The option values are a void* array: the log buffer's address
		// and its size passed by value in a pointer-sized slot. The driver
		// writes the number of log bytes back into the size slot.
		vals := [2]uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
		r := c.d.api.moduleLoadDataEx(&m.handle, unsafe.Pointer(&img[0]), uint32(len(opts)), &opts[0], &vals[0])
		runtime.KeepAlive(img)
		if r == Success {
			return nil
		}
		err := c.d.errorf("cuModuleLoadDataEx", r)
		var e *Error
		if errors.As(err, &e) {
			n := min(int(vals[1]), len(logBuf))
			if i := bytes.IndexByte(logBuf[:n], 0); i >= 0 {
				n = i
			}
			e.Log = string(bytes.TrimSpace(logBuf[:n]))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Function looks up a kernel by its (mangled, for C++) name
// (cuModuleGetFunction).
func (m *Module) Function(ctx context.Context, name string) (*Function, error) {
	cname := append([]byte(name), 0)
	f := &Function{m: m, name: name}
	err := m.c.call(ctx, "cuModuleGetFunction", func() Result {
		return m.c.d.api.moduleGetFunction(&f.handle, m.handle, &cname[0])
	})
	if err != nil {
		return nil, fmt.Errorf("kernel %q: %w", name, err)
	}
	return f, nil
}

// Unload unloads the module (cuModuleUnload); its Functions become
// invalid.
func (m *Module) Unload(ctx context.Context) error {
	return m.c.call(ctx, "cuModuleUnload", func() Result { return m.c.d.api.moduleUnload(m.handle) })
}

// Dim3 is a grid or block shape. A zero dimension means 1, so Dim3{X: n}
// is a one-dimensional shape.
type Dim3 struct {
	X, Y, Z uint32
}

func (d Dim3) norm() Dim3 {
	return Dim3{max(d.X, 1), max(d.Y, 1), max(d.Z, 1)}
}

// Launch queues kernel f on stream s (nil: the default stream) with grid
// blocks of block threads and sharedMem bytes of dynamic shared memory
// (cuLaunchKernel). It returns once queued; wait with Stream.Synchronize.
//
// args are the kernel's parameters in order, each one of DevicePtr,
// int32, uint32, int64, uint64, float32, float64 or uintptr, matching the
// kernel's parameter sizes (.u64 for pointers, .u32/.s32/.f32 for 4-byte
// values). Plain int is refused because its C size is ambiguous. The
// values are copied when the kernel is queued.
func (c *Context) Launch(ctx context.Context, f *Function, grid, block Dim3, sharedMem int, s *Stream, args ...any) error {
	if f == nil {
		return fmt.Errorf("%w: Launch of a nil Function", ErrBadArgument)
	}
	if sharedMem < 0 || sharedMem > math.MaxUint32 {
		return fmt.Errorf("%w: shared memory %d bytes", ErrBadArgument, sharedMem)
	}
	vals, err := packArgs(args)
	if err != nil {
		return fmt.Errorf("kernel %q: %w", f.name, err)
	}
	g, b := grid.norm(), block.norm()
	return c.Do(ctx, func() error {
		// kernelParams is an array of pointers, each to one argument's
		// value. Both arrays live in Go memory; pinning them lets the
		// driver read pointers to Go memory, as the cgo rules require.
		var pin runtime.Pinner
		defer pin.Unpin()
		var params *unsafe.Pointer
		if len(vals) > 0 {
			ptrs := make([]unsafe.Pointer, len(vals))
			pin.Pin(&vals[0])
			for i := range vals {
				ptrs[i] = unsafe.Pointer(&vals[i])
			}
			pin.Pin(&ptrs[0])
			params = &ptrs[0]
		}
		r := c.d.api.launchKernel(f.handle, g.X, g.Y, g.Z, b.X, b.Y, b.Z, uint32(sharedMem), s.h(), params, nil)
		return c.d.check("cuLaunchKernel", r)
	})
}

// packArgs stores each kernel argument in its own 8-byte slot, written
// through a pointer of the argument's own type so that the slot's first
// bytes hold the value in native byte order whatever the size.
func packArgs(args []any) ([]uint64, error) {
	vals := make([]uint64, len(args))
	for i, a := range args {
		p := unsafe.Pointer(&vals[i])
		switch v := a.(type) {
		case DevicePtr:
			*(*uint64)(p) = uint64(v)
		case uint64:
			*(*uint64)(p) = v
		case int64:
			*(*int64)(p) = v
		case uintptr:
			*(*uintptr)(p) = v
		case uint32:
			*(*uint32)(p) = v
		case int32:
			*(*int32)(p) = v
		case float32:
			*(*float32)(p) = v
		case float64:
			*(*float64)(p) = v
		default:
			return nil, fmt.Errorf("%w: kernel argument %d has type %T; use DevicePtr, int32, uint32, int64, uint64, float32, float64 or uintptr", ErrBadArgument, i, a)
		}
	}
	return vals, nil
}
