package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInlineKeepsPolicyOrder checks that a worker runs a dependent it
// released at once only when the policy would have given it that task
// next: with a higher-priority task queued, the dependent waits its turn.
func TestInlineKeepsPolicyOrder(t *testing.T) {
	for _, pol := range []string{"prio", "lws", "ws"} {
		t.Run(pol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := New(ctx, WithWorkers(1), WithPolicy(pol), WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
			require.NoError(t, err)
			defer s.Close()
			var mu sync.Mutex
			var order []string
			started, release := make(chan struct{}), make(chan struct{})
			gate := &Codelet{Name: "gate", CPU: func(*Call) error {
				close(started)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			}}
			rec := &Codelet{Name: "rec", CPU: func(c *Call) error {
				mu.Lock()
				order = append(order, c.Arg.(string))
				mu.Unlock()
				return nil
			}}
			require.NoError(t, s.Submit(ctx, gate))
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("gate task did not start")
			}
			// Queued behind the gate: A (prio 5), C (prio 1); B depends on
			// A and has priority 0, so C must run before B.
			a := NewTask(rec, WithArg("A"), WithPriority(5))
			require.NoError(t, s.SubmitTask(ctx, a))
			require.NoError(t, s.Submit(ctx, rec, WithArg("C"), WithPriority(1)))
			require.NoError(t, s.Submit(ctx, rec, WithArg("B"), After(a)))
			close(release)
			require.NoError(t, s.WaitAll(ctx))
			assert.Equal(t, []string{"A", "C", "B"}, order)
			var n int64
			for _, st := range s.Stats() {
				n += st.Tasks
			}
			assert.Equal(t, int64(4), n, "every task counted, inlined or not")
		})
	}
}

// TestInlineChainRunsOnce runs long chains on several handles under
// every policy and checks each increment happened exactly once and in
// order (a chain's tasks are released one by one, mostly inline).
func TestInlineChainRunsOnce(t *testing.T) {
	for _, pol := range Policies() {
		t.Run(pol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := New(ctx, WithWorkers(2), WithPolicy(pol), WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
			require.NoError(t, err)
			defer s.Close()
			const chains, n = 4, 3000
			vals := make([][]int, chains)
			hs := make([]*Handle, chains)
			for i := range hs {
				hs[i], err = s.RegisterValue(&vals[i])
				require.NoError(t, err)
			}
			app := &Codelet{Name: "append", CPU: func(c *Call) error {
				p := ValueOf[*[]int](c, 0)
				*p = append(*p, c.Arg.(int))
				return nil
			}}
			for k := 0; k < n; k++ {
				for i := range hs {
					require.NoError(t, s.Submit(ctx, app, RW(hs[i]), WithArg(k)))
				}
			}
			require.NoError(t, s.WaitAll(ctx))
			for i := range vals {
				require.Len(t, vals[i], n, "chain %d", i)
				for k, v := range vals[i] {
					if v != k {
						t.Fatalf("chain %d: element %d is %d", i, k, v)
					}
				}
			}
		})
	}
}
