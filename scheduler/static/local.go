package static

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
)

// localBoard is the start message's board name for a run in one process.
const localBoard = "(in process)"

// RunLocal runs plan with every client in this process: the single-process
// mode. Each client must be registered (Runnable, Resource) as for
// EnterScheduler; the master checks them the same way. It returns when
// the run ends (frame limit, ExitScheduler, SIGINT/SIGTERM or ctx's end,
// all at a period boundary) with what every client recorded.
func RunLocal(ctx context.Context, plan *Plan, clients []*Client, opts ...Option) (*Run, error) {
	m, err := NewMaster(plan, opts...)
	if err != nil {
		return nil, err
	}
	shared := newBoard(len(plan.Runnables()), len(plan.Clients))
	defer raiseProcs(plan.cpuThreads())()
	runtime.GC() // the setup's garbage, before the loop
	mk := func() (*board, string, error) { return shared, localBoard, nil }
	runCtx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	defer cancel()
	if m.opts.signals {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sigs)
		go func() {
			select {
			case s := <-sigs:
				m.requestStop(fmt.Sprintf("got %v", s))
			case <-runCtx.Done():
			}
		}()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for i, c := range clients {
		cl, ml := newChanPair()
		cl.board, ml.board = shared, shared
		wg.Add(2)
		go func() {
			defer wg.Done()
			m.serve(runCtx, ml, os.Getpid(), mk)
		}()
		go func() {
			defer wg.Done()
			errs[i] = c.session(runCtx, cl, false)
			if errors.Is(errs[i], ErrRefused) {
				cancelCause(errs[i]) // the run cannot start without it
			}
		}()
	}
	run, err := m.supervise(runCtx)
	cancel()
	m.closeAll()
	wg.Wait()
	var refused []error
	for _, e := range errs {
		if errors.Is(e, ErrRefused) {
			refused = append(refused, e)
		}
	}
	if len(refused) > 0 && run == nil {
		return nil, errors.Join(refused...)
	}
	if run != nil && err == nil {
		for i, e := range errs {
			if e != nil {
				err = errors.Join(err, fmt.Errorf("client %s: %w", clients[i].name, e))
			}
		}
	}
	return run, err
}
