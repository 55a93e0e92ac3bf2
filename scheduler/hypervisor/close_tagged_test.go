package hypervisor_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/hypervisor"
)

// panickyAppDriven is app_driven whose Resize panics.
type panickyAppDriven struct{ *hypervisor.AppDriven }

func (panickyAppDriven) Resize(*hypervisor.View) []hypervisor.Move { panic("boom") }

// A worker completes a task - Task.Wait returns - before it calls the
// TaskExecuted hook; an AppDriven.OnTag request of a tagged task whose
// hook had not run when the program called Close was dropped (Close
// skipped the later hook: no resize). The worker is held between the
// completion and the hook until Close was called: the request must
// still be applied by the time Close returns - or, when the policy
// panics in that decision, Close must return ErrPolicyPanic, not hang.
func TestCloseAppliesRequestOfCompletedTaggedTask(t *testing.T) {
	for _, panics := range []bool{false, true} {
		name := map[bool]string{false: "applied", true: "policy panics"}[panics]
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, 2)
			a, b := newContexts(t, s, []int{0}, []int{1})
			driven := hypervisor.NewAppDriven()
			var pol hypervisor.Policy = driven
			if panics {
				pol = panickyAppDriven{driven}
			}
			closing, entered := make(chan struct{}), make(chan struct{})
			hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv),
				hypervisor.WithOnClosing(func() { close(closing) }),
				hypervisor.WithOnExecuted(func(tk *scheduler.Task) {
					if tk.Tag == 42 {
						close(entered)
						<-closing // the hook comes after Close was called
					}
				}))
			require.NoError(t, err)
			require.NoError(t, hv.Register(a, hypervisor.Limits{}))
			require.NoError(t, hv.Register(b, hypervisor.Limits{}))
			require.NoError(t, driven.OnTag(42, a, b, 1))
			task := scheduler.NewTask(clTag(), scheduler.InContext(a), scheduler.WithTag(42))
			require.NoError(t, s.SubmitTask(ctx, task))
			require.NoError(t, task.Wait(ctx)) // the tagged task completed
			<-entered                          // its worker is before the hook
			err = hv.Close()
			if panics {
				require.ErrorIs(t, err, hypervisor.ErrPolicyPanic)
				assert.Zero(t, hv.ResizeCount())
				return
			}
			require.NoError(t, err)
			require.Equal(t, 1, hv.ResizeCount(), "the request of the task completed before Close is applied")
			r := hv.Resizes()[0]
			assert.Equal(t, "a->b", r.From+"->"+r.To)
			assert.Zero(t, driven.Due())
		})
	}
}
