package runtimeview

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/callbacks"
	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/internal/lockedbuf"
	"github.com/pzgo/pz/logger"
)

// withExit replaces os.Exit on the signal path, so that the handler can be
// tested in this process.
func withExit(f func(int)) Option { return func(c *config) { c.exit = f } }

var quiet = WithLogOptions(logger.WithEnv(nil), logger.WithOff())

func syntheticMachine() *hardware.Machine {
	return &hardware.Machine{
		Host:   hardware.Host{Hostname: "test"},
		CPU:    hardware.CPU{LogicalCores: 1},
		Memory: hardware.Memory{TotalBytes: 1 << 30, AvailableBytes: 1 << 29},
		GPUs:   []hardware.GPU{},
	}
}

func TestSignalInProcess(t *testing.T) {
	if mpi.Available() {
		t.Skip("built with -tags mpi: New would initialize MPI; the subprocess test covers signals")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	codes := make(chan int, 1)
	rt, err := New(ctx, WithMachine(syntheticMachine()), quiet, WithGetenv(func(string) string { return "" }),
		withExit(func(c int) { codes <- c }))
	require.NoError(t, err)
	var ran atomic.Int32
	require.NoError(t, rt.StackCallback(func() error { ran.Add(1); return nil }))

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case c := <-codes:
		assert.Equal(t, 143, c)
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	assert.Equal(t, int32(1), ran.Load())
	require.NoError(t, rt.Close(), "Close after the signal path returns its result")
	assert.Equal(t, int32(1), ran.Load(), "exactly once")
	select {
	case <-rt.sig.done:
	default:
		t.Fatal("the signal goroutine outlived Close")
	}
}

// SIGINT ends every rank of RunLocal, runs each one's stack, exits with
// 130, and the ranks' alike errors read as one line (what RunLocal prints
// on stderr), not a line per rank.
func TestSignalRunLocal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var code atomic.Int32
	var closed, waiting atomic.Int32
	const n = 64
	err := RunLocal(ctx, n, func(ctx context.Context, rt *RuntimeView) error {
		if err := rt.StackCallback(func() error { closed.Add(1); return nil }); err != nil {
			return err
		}
		if waiting.Add(1) == n {
			// The last rank to get here interrupts the process.
			if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return context.Cause(ctx)
	}, WithMachine(syntheticMachine()), quiet, WithSignals(true), withExit(func(c int) { code.Store(int32(c)) }))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "interrupt received")
	assert.Equal(t, "ranks 0-63 (64 ranks): runtimeview: interrupt received", err.Error())
	assert.Equal(t, int32(130), code.Load())
	assert.Equal(t, int32(n), closed.Load(), "every rank's stack ran")
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
	// Every rank's error is a cancellation, whatever wrapped it.
	var res comm.RankErrors
	require.ErrorAs(t, err, &res)
	for _, e := range res {
		require.NotNil(t, e)
		assert.ErrorIs(t, e, context.Canceled, "rank %d", e.Rank)
		var se *SignalError
		if assert.ErrorAs(t, e, &se, "rank %d", e.Rank) {
			assert.Equal(t, syscall.SIGINT, se.Signal)
		}
	}
}

// TestSecondSignalWhenIgnoredAtStart: a process started with SIGINT
// ignored (a shell's background job) is ended by a second SIGINT during
// a shutdown that hangs; the handler used to restore the disposition it
// started with, SIG_IGN, and the second SIGINT did nothing.
func TestSecondSignalWhenIgnoredAtStart(t *testing.T) {
	signal.Ignore(syscall.SIGINT)
	defer signal.Reset(syscall.SIGINT)
	codes := make(chan int, 2)
	first := make(chan os.Signal, 1)
	repeats := make(chan os.Signal, 1)
	hang := make(chan struct{})
	// The handler's clock: 20 ms after the first signal for the repeat,
	// past the window for the second signal.
	var clock atomic.Int64
	t0 := time.Now()
	now := func() time.Time { return t0.Add(time.Duration(clock.Load())) }
	h := startSignalsClock(func(s os.Signal) {
		first <- s
		<-hang // a shutdown that does not end
	}, func(c int) { codes <- c }, now, func(s os.Signal) { repeats <- s })
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case s := <-first:
		assert.Equal(t, syscall.SIGINT, s)
	case <-time.After(10 * time.Second):
		t.Fatal("the first SIGINT was not delivered")
	}
	// A repeat at once is the same interrupt (a group's and a
	// launcher's): the shutdown goes on.
	clock.Store(int64(20 * time.Millisecond))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case s := <-repeats:
		assert.Equal(t, syscall.SIGINT, s)
	case c := <-codes:
		t.Fatalf("a repeat within the window ended the process (%d)", c)
	case <-time.After(10 * time.Second):
		t.Fatal("the repeated SIGINT was not delivered")
	}
	clock.Store(int64(repeatWindow + 20*time.Millisecond))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case c := <-codes:
		assert.Equal(t, 130, c)
	case <-time.After(10 * time.Second):
		t.Fatal("the second SIGINT did not end the process")
	}
	close(hang)
	h.stop()
}

// TestShutdownNamesWaitedRanks: after SIGTERM, a rank whose function does
// not return holds RunLocal's exit; RunLocal says which rank it waits for
// (it said nothing for as long as the rank ran), and stops saying so once
// every rank has returned.
func TestShutdownNamesWaitedRanks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stderr lockedbuf.Buffer
	var code atomic.Int32
	var waiting atomic.Int32
	const n = 3
	err := RunLocal(ctx, n, func(rctx context.Context, rt *RuntimeView) error {
		if waiting.Add(1) == n {
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				return err
			}
		}
		<-rctx.Done()
		if rt.Rank() != 2 {
			return nil
		}
		// Rank 2 goes on after its context ended, until RunLocal has
		// named it alone: on a loaded machine ranks 0 and 1 may not have
		// returned by the first report ("ranks 0-2"); the next, five
		// report periods later, names rank 2 alone.
		for !strings.Contains(stderr.String(), " for rank 2 to return") {
			select {
			case <-ctx.Done():
				return errors.New("RunLocal never named the rank it waits for")
			case <-time.After(time.Millisecond):
			}
		}
		return nil
	}, WithMachine(syntheticMachine()), quiet, WithSignals(true), withExit(func(c int) { code.Store(int32(c)) }),
		func(c *config) { c.stderr, c.shutdownReport = &stderr, 20*time.Millisecond })
	require.NoError(t, err)
	assert.Equal(t, int32(143), code.Load())
	out := stderr.String()
	assert.Contains(t, out, "pz: after terminated: waiting ")
	assert.Contains(t, out, " for rank 2 to return (a rank's function must return once its context ends; terminated again exits at once)")
	assert.NotContains(t, out, "rank 0")
}

// A callback that calls rt.Close and returns its error (ErrCloseInCallback)
// made the outer Close's joined error wrap ErrCloseInCallback too, so that
// Close, and every later one, took itself for the nested call and skipped
// stopping the signal handler: its goroutine outlived Close, and a SIGINT
// after Close still ran the handler (exit 130). Close stops it.
func TestCloseStopsSignalsAfterCallbackCloses(t *testing.T) {
	if mpi.Available() {
		t.Skip("built with -tags mpi: New would initialize MPI")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rt, err := New(ctx, WithMachine(syntheticMachine()), quiet, WithGetenv(func(string) string { return "" }),
		withExit(func(c int) { t.Errorf("exit(%d) after Close", c) }))
	require.NoError(t, err)
	require.NoError(t, rt.StackCallback(rt.Close))
	err = rt.Close()
	require.ErrorIs(t, err, callbacks.ErrCloseInCallback, "the callback's own error is reported")
	require.ErrorIs(t, rt.Close(), callbacks.ErrCloseInCallback, "a later Close returns the same")
	select {
	case <-rt.sig.done:
	default:
		t.Fatal("the signal goroutine outlived Close")
	}
}
