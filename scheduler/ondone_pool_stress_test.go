package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// poolInfo is what a pooled task of the stress test is, kept by the
// test (the task's Arg points to it).
type poolInfo struct {
	cl    *scheduler.Codelet
	nacc  int
	calls atomic.Int32 // OnDone calls
}

// poolCheckMonitor checks, in every hook that gets a *Task, that the
// task is still the one it was made as: its Arg, codelet and number of
// accesses agree (a task back in Submit's pool, zeroed or reused by
// another submission, would not).
type poolCheckMonitor struct {
	mu   sync.Mutex
	errs []string
}

func (m *poolCheckMonitor) check(hook string, t *scheduler.Task) {
	in, _ := t.Arg.(*poolInfo)
	var bad string
	switch {
	case in == nil:
		bad = fmt.Sprintf("%s: task %q has Arg %v", hook, t.Name(), t.Arg)
	case in.cl != t.Codelet || in.nacc != len(t.Access):
		bad = fmt.Sprintf("%s: task %q of %d accesses is not the one of %q and %d", hook, t.Name(), len(t.Access), in.cl.Name, in.nacc)
	default:
		for i, a := range t.Access {
			if a.Handle == nil {
				bad = fmt.Sprintf("%s: task %q access %d has no handle", hook, t.Name(), i)
			}
		}
	}
	if bad != "" {
		m.mu.Lock()
		m.errs = append(m.errs, bad)
		m.mu.Unlock()
	}
}

func (m *poolCheckMonitor) TaskPushed(_ *scheduler.Context, t *scheduler.Task) { m.check("pushed", t) }
func (m *poolCheckMonitor) TaskPopped(_ *scheduler.Context, t *scheduler.Task, _ int) {
	m.check("popped", t)
}
func (m *poolCheckMonitor) IdleCycle(*scheduler.Context, int, time.Duration) {}
func (m *poolCheckMonitor) IdleEnd(*scheduler.Context, int, time.Duration)   {}
func (m *poolCheckMonitor) TaskExecuted(_ *scheduler.Context, t *scheduler.Task, _ int, _ time.Duration) {
	m.check("executed", t)
}

// Pooled tasks with OnDone callbacks (1 to 9 accesses, so that their
// access arrays are reused across sizes), some failing, some detached
// (done from another goroutine), some canceled by their CancelOn
// context or a failed predecessor, under a monitor: every hook that
// gets the *Task sees the task it was made as (not one back in the
// pool), and every OnDone runs once, with the task's outcome.
func TestOnDonePooledTasksUnderMonitorAndCancel(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(3))
	mon := &poolCheckMonitor{}
	s.SetMonitor(mon, time.Hour)
	defer s.SetMonitor(nil, 0)
	const nh, n = 12, 600
	vals := make([]uint64, nh)
	hs := make([]*scheduler.Handle, nh)
	for i := range vals {
		h, err := s.RegisterValue(&vals[i])
		require.NoError(t, err)
		hs[i] = h
	}
	boom := errors.New("boom")
	cpu := &scheduler.Codelet{Name: "cpu", CPU: func(c *scheduler.Call) error {
		in := c.Arg.(*poolInfo)
		if len(c.Task.Access) != in.nacc {
			return fmt.Errorf("running with %d accesses, made with %d", len(c.Task.Access), in.nacc)
		}
		return nil
	}}
	bad := &scheduler.Codelet{Name: "bad", CPU: func(*scheduler.Call) error { return boom }}
	det := &scheduler.Codelet{Name: "det", Detached: func(t *scheduler.Task, done func(error)) {
		in := t.Arg.(*poolInfo)
		go done(nil)
		_ = in
	}}
	stop, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	infos := make([]*poolInfo, n)
	for i := range n {
		cl := cpu
		switch {
		case i%23 == 0:
			cl = bad
		case i%5 == 0:
			cl = det
		}
		k := 1 + i%9
		in := &poolInfo{cl: cl, nacc: k}
		infos[i] = in
		args := []scheduler.Arg{scheduler.WithArg(in), scheduler.OnDone(func(error) { in.calls.Add(1) })}
		for j := range k {
			m := scheduler.ModeR
			if (i+j)%3 == 0 {
				m = scheduler.ModeRW
			}
			args = append(args, scheduler.Data(hs[(i*7+j)%nh], m))
		}
		if i%2 == 1 {
			args = append(args, scheduler.CancelOn(stop))
		}
		require.NoError(t, s.Submit(ctx, cl, args...))
		if i == n/2 {
			cancel(errors.New("half way"))
		}
	}
	require.Error(t, s.WaitAll(ctx))
	for i, in := range infos {
		assert.Equal(t, int32(1), in.calls.Load(), "task %d's OnDone calls", i)
	}
	mon.mu.Lock()
	defer mon.mu.Unlock()
	assert.Empty(t, mon.errs)
}
