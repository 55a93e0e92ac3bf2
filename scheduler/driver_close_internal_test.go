package scheduler

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gatedDriver wraps a driver: init reports itself on inited, and deinit
// reports itself on inDeinit and then waits for gate.
type gatedDriver struct {
	driver
	inited, inDeinit, gate chan struct{}
}

func (g gatedDriver) init(w *worker) error {
	close(g.inited)
	return g.driver.init(w)
}

func (g gatedDriver) deinit(w *worker) error {
	close(g.inDeinit)
	<-g.gate
	return g.driver.deinit(w)
}

// TestDriverRunCtxEndsDuringClose: a Driver's Run whose ctx ends while
// Close waits for a task returns ctx's error, as its doc says (ctx ended
// first: the worker left the scheduler then), also when Close has ended
// by the time Run's Deinit does - not nil, which says it drove the
// worker until Close.
func TestDriverRunCtxEndsDuringClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, WithWorkers(2), WithDrivenWorkers(1), WithPolicy("eager"), WithPerfModelDir(""))
	require.NoError(t, err)
	defer s.Close()
	d, err := s.Driver(1)
	require.NoError(t, err)
	g := gatedDriver{driver: d.w.drv, inited: make(chan struct{}), inDeinit: make(chan struct{}), gate: make(chan struct{})}
	d.w.drv = g

	// A task the launched worker runs holds Close until released.
	started, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Submit(ctx, &Codelet{Name: "hold", CPU: func(*Call) error {
		close(started)
		<-release
		return nil
	}}))
	<-started

	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	ran := make(chan error, 1)
	go func() { ran <- d.Run(rctx) }()
	<-g.inited
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	for !s.Closed() && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	require.True(t, s.Closed(), "Close did not start")

	rcancel() // Run's ctx ends while Close waits for hold
	<-g.inDeinit
	close(release)
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	close(g.gate)
	select {
	case err := <-ran:
		require.ErrorIs(t, err, context.Canceled, "Run's ctx ended before Close did")
	case <-ctx.Done():
		t.Fatal("Run did not return")
	}
}
