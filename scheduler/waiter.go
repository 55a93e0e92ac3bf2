package scheduler

import (
	"context"
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
	for z.n.Load() != 0 {
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
		select {
		case <-ch:
			z.nw.Add(-1)
		case <-ctx.Done():
			z.nw.Add(-1)
			return ctxErr(ctx)
		}
	}
	return nil
}
