package scheduler_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/pzgo/pz/scheduler"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// OnDone callbacks get the task's error, run once on its completion, in
// the order given among WithCallback's (a nil one ignored), and a panic
// in one fails the task as in a callback of WithCallback.
func TestOnDoneOrderAndErr(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	boom := errors.New("boom")
	bad := &scheduler.Codelet{Name: "bad", CPU: func(*scheduler.Call) error { return boom }}
	var order []string
	od := func(name string) scheduler.Arg {
		return scheduler.OnDone(func(err error) { order = append(order, name+":"+errString(err, boom)) })
	}
	cb := func(name string) scheduler.Arg {
		return scheduler.WithCallback(func(t *scheduler.Task) { order = append(order, name+":"+errString(t.Err(), boom)) })
	}
	for _, c := range []struct {
		cl   *scheduler.Codelet
		args []scheduler.Arg
		want []string
	}{
		{noop, []scheduler.Arg{od("a")}, []string{"a:nil"}},
		{noop, []scheduler.Arg{od("a"), scheduler.OnDone(nil), od("b")}, []string{"a:nil", "b:nil"}},
		{noop, []scheduler.Arg{od("a"), cb("b"), od("c")}, []string{"a:nil", "b:nil", "c:nil"}},
		{noop, []scheduler.Arg{cb("a"), od("b"), cb("c")}, []string{"a:nil", "b:nil", "c:nil"}},
		{bad, []scheduler.Arg{od("a"), cb("b")}, []string{"a:boom", "b:boom"}},
		{bad, []scheduler.Arg{od("a"), od("b")}, []string{"a:boom", "b:boom"}},
	} {
		order = nil
		err := s.Submit(ctx, c.cl, append(c.args, scheduler.Synchronous())...)
		if c.cl == bad {
			require.ErrorIs(t, err, boom)
		} else {
			require.NoError(t, err)
		}
		assert.Equal(t, c.want, order)
	}
	require.ErrorIs(t, s.WaitAll(ctx), boom)

	err := s.Submit(ctx, noop, scheduler.OnDone(func(error) { panic("in OnDone") }), scheduler.Synchronous())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "callback")
	require.Error(t, s.WaitAll(ctx))
}

// errString is "nil", "boom" for an error wrapping boom, else the
// error's text.
func errString(err, boom error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, boom):
		return "boom"
	}
	return err.Error()
}

// Tasks with an OnDone callback come from Submit's pool and go back to
// it, also those of more accesses than a task holds inline, whose access
// array a later task reuses: tasks of 10 and of 2 accesses alternate,
// each adding one to its data, and each callback runs once without
// error.
func TestOnDonePooledTasksOfManyAccesses(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	const nh, rounds = 10, 200
	vals := make([]uint64, nh)
	hs := make([]*scheduler.Handle, nh)
	for i := range vals {
		h, err := s.RegisterValue(&vals[i])
		require.NoError(t, err)
		hs[i] = h
	}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		for i := range c.Task.Access {
			*scheduler.ValueOf[*uint64](c, i)++
		}
		return nil
	}}
	var done, failed atomic.Int64
	onDone := scheduler.OnDone(func(err error) {
		done.Add(1)
		if err != nil {
			failed.Add(1)
		}
	})
	var want [nh]uint64
	for r := range rounds {
		n := nh
		if r%2 == 1 {
			n = 2
		}
		args := []scheduler.Arg{onDone}
		for i := range n {
			h := (i + r) % nh
			args = append(args, scheduler.RW(hs[h]))
			want[h]++
		}
		require.NoError(t, s.Submit(ctx, add, args...))
	}
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, int64(rounds), done.Load())
	assert.Zero(t, failed.Load())
	// CPU workers only: the values are in RAM once WaitAll returns.
	assert.Equal(t, want[:], vals)
}
