package scheduler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// A zeroWaiter is a counter that goroutines can wait on to reach zero:
// the scheduler's tasks in flight (WaitAll, Close) and each context's
// pending tasks (Context.WaitAll). Adding costs one atomic add, plus a
// load when the count reaches zero; only waiters take the lock.
type zeroWaiter struct {
	n   atomic.Int64
	nw  atomic.Int32
	mu  sync.Mutex
	chs []chan struct{}
}

func (z *zeroWaiter) add(d int64) int64 {
	v := z.n.Add(d)
	if v == 0 && z.nw.Load() > 0 {
		z.mu.Lock()
		for _, ch := range z.chs {
			close(ch)
		}
		z.chs = nil
		z.mu.Unlock()
	}
	return v
}

func (z *zeroWaiter) wait(ctx context.Context) error {
	for {
		ch := z.zero()
		if ch == nil {
			return nil
		}
		select {
		case <-ch:
			z.unwait()
		case <-ctx.Done():
			z.unwait()
			return ctxErr(ctx)
		}
	}
}

// zero returns a channel closed when the count reaches zero, or nil when
// it is zero already. With a channel, the caller is counted as a waiter
// until it calls unwait.
func (z *zeroWaiter) zero() <-chan struct{} {
	if z.n.Load() == 0 {
		return nil
	}
	// Announce the waiter before re-checking, so that an add that
	// brings the count to zero sees it.
	z.nw.Add(1)
	z.mu.Lock()
	if z.n.Load() == 0 {
		z.mu.Unlock()
		z.nw.Add(-1)
		return nil
	}
	ch := make(chan struct{})
	z.chs = append(z.chs, ch)
	z.mu.Unlock()
	return ch
}

// unwait ends the wait of a caller of zero.
func (z *zeroWaiter) unwait() { z.nw.Add(-1) }

// tasks is "1 task" or "N tasks", for messages.
func tasks(n int64) string {
	if n == 1 {
		return "1 task"
	}
	return fmt.Sprintf("%d tasks", n)
}
