//go:build linux

package fakecuda_test

import (
	"testing"
	"time"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/pzgo/pz/hardware/cuda"
)

// TestHostFuncThreads checks that the stand-in calls host functions as
// the driver does: on a thread of its own (the stream's, or one made for
// a call on the default stream), where calls into the driver fail with
// CUDA_ERROR_NOT_PERMITTED; and not at all after a fault on the stream.
func TestHostFuncThreads(t *testing.T) {
	d, lib := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	k := kernels(t, ctx, c)
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	defer func() { _ = purego.Dlclose(h) }()
	var ctxSynchronize func() int32
	sym, err := purego.Dlsym(h, "cuCtxSynchronize")
	require.NoError(t, err)
	purego.RegisterFunc(&ctxSynchronize, sym)

	var executor int
	require.NoError(t, c.Do(ctx, func() error { executor = unix.Gettid(); return nil }))
	wait := func(done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("the host function did not run")
			return nil
		}
	}
	for _, s := range []*cuda.Stream{newStream(t, ctx, c), nil} {
		var tid int
		var r int32
		done, err := c.LaunchHostFunc(ctx, func() error {
			tid = unix.Gettid()
			r = ctxSynchronize()
			return nil
		}, s)
		require.NoError(t, err)
		require.NoError(t, wait(done))
		require.NotEqual(t, executor, tid, "stream %v: not on the Context's thread", s)
		require.EqualValues(t, cuda.ErrNotPermitted, r, "stream %v: no driver calls", s)
	}

	// After a fault, the stream runs nothing more, host functions included.
	s := newStream(t, ctx, c)
	require.NoError(t, launch(ctx, c, k["pz_fail"], 1, s))
	done, err := c.LaunchHostFunc(ctx, func() error { return nil }, s)
	require.NoError(t, err)
	require.ErrorIs(t, s.Synchronize(ctx), cuda.ErrLaunchFailed)
	select {
	case err := <-done:
		t.Fatalf("ran after the fault: %v", err)
	default:
	}
}
