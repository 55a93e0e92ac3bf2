package hypervisor_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/hypervisor"
)

// pendingHeldAppDriven is app_driven whose first Resize takes the requests due
// (none) and then holds the decision until release is closed; with
// panics, every later Resize panics.
type pendingHeldAppDriven struct {
	*hypervisor.AppDriven
	entered, release chan struct{}
	panics           bool
	calls            atomic.Int64
}

func (p *pendingHeldAppDriven) Resize(v *hypervisor.View) []hypervisor.Move {
	n := p.calls.Add(1)
	if n > 1 && p.panics {
		panic("boom")
	}
	moves := p.AppDriven.Resize(v)
	if n == 1 {
		close(p.entered)
		<-p.release
	}
	return moves
}

// Issue 9: a decision asked for while another ran - here the hook of a
// tagged task with an AppDriven.OnTag request, left pending behind a
// ResizeNow - was dropped when Close was called before the holder let
// go: the holder skipped it (closed), and the request was never
// applied. Close now runs it before it returns; when it cannot (the
// scheduler was closed first) Close returns ErrDecisionDropped, and
// when the policy panics in it, ErrPolicyPanic.
func TestCloseRunsTheDecisionPendingAtClose(t *testing.T) {
	for _, tc := range []struct {
		name                string
		panics, closeSched  bool
		wantErr             error
		wantResizes, wantDo int
	}{
		{name: "applied", wantResizes: 1},
		{name: "scheduler closed first", closeSched: true, wantErr: hypervisor.ErrDecisionDropped, wantDo: 1},
		{name: "policy panics", panics: true, wantErr: hypervisor.ErrPolicyPanic, wantDo: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, 3)
			a, b := newContexts(t, s, []int{0, 1}, []int{2})
			pol := &pendingHeldAppDriven{AppDriven: hypervisor.NewAppDriven(), panics: tc.panics,
				entered: make(chan struct{}), release: make(chan struct{})}
			busy := make(chan hypervisor.Trigger, 1024)
			closeWaits := make(chan struct{})
			hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv),
				hypervisor.WithTrigger(0), // hooks only: the first Resize is ResizeNow's
				hypervisor.WithOnBusy(func(tr hypervisor.Trigger) { busy <- tr }),
				hypervisor.WithOnCloseWait(func() { close(closeWaits) }))
			require.NoError(t, err)
			require.NoError(t, hv.Register(a, hypervisor.Limits{}))
			require.NoError(t, hv.Register(b, hypervisor.Limits{}))
			require.NoError(t, pol.OnTag(42, a, b, 1))

			// A decision under way holds the decision lock.
			nowDone := make(chan []hypervisor.Resize, 1)
			go func() { nowDone <- hv.ResizeNow() }()
			waitFor(t, pol.entered, 10*time.Second, "ResizeNow's decision is under way")
			// The tagged task's hook asks for a decision: left pending.
			task := scheduler.NewTask(clTag(), scheduler.InContext(a), scheduler.WithTag(42))
			require.NoError(t, s.SubmitTask(ctx, task))
			require.NoError(t, task.Wait(ctx))
			assert.Equal(t, hypervisor.TriggerHook, waitFor(t, busy, 10*time.Second, "the hook's decision is left pending"))
			require.Equal(t, 1, pol.Due())
			if tc.closeSched {
				require.NoError(t, s.Close())
			}

			closeDone := make(chan error, 1)
			go func() { closeDone <- hv.Close() }()
			waitFor(t, closeWaits, 10*time.Second, "Close waits for the decision under way")
			close(pol.release)
			err = waitFor(t, closeDone, 10*time.Second, "Close returns once the decisions ran")
			assert.Empty(t, waitFor(t, nowDone, 10*time.Second, "ResizeNow returns"), "ResizeNow's decision had no request")
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.wantResizes, hv.ResizeCount(), "the request pending at Close")
			if tc.wantResizes > 0 {
				r := hv.Resizes()[0]
				assert.Equal(t, "a->b", r.From+"->"+r.To)
			}
			if tc.closeSched {
				assert.Contains(t, err.Error(), "1 request(s)")
				assert.Contains(t, err.Error(), "scheduler was closed")
			}
			assert.Equal(t, tc.wantDo, pol.Due(), "requests left due")
			calls := pol.calls.Load()
			// Nothing decides after Close.
			assert.Nil(t, hv.ResizeNow())
			assert.Equal(t, calls, pol.calls.Load(), "a decision ran after Close")
			assert.Equal(t, err, hv.Close(), "a second Close returns the same error")
		})
	}
}
