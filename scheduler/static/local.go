package static

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// localBoard is the start message's board name for a run in one process.
const localBoard = "(in process)"

// RunLocal runs plan with every client in this process: the single-process
// mode. Each client must be registered (Runnable, Resource) as for
// EnterScheduler; the master checks them the same way. It returns when
// the run ends (frame limit, ExitScheduler, SIGINT/SIGTERM or ctx's end,
// all at a period boundary) with what every client recorded. clients
// must hold one Client for each of the plan's clients: one missing, given
// twice or nil is refused at once (ErrRefused), since nothing else could
// join. A SIGINT or SIGTERM (or ctx's end) before the run starts makes
// RunLocal return without running it.
func RunLocal(ctx context.Context, plan *Plan, clients []*Client, opts ...Option) (*Run, error) {
	m, err := NewMaster(plan, opts...)
	if err != nil {
		return nil, err
	}
	if err := checkLocalClients(plan, clients); err != nil {
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
				m.stopOnSignal(s, cancelCause)
			case <-runCtx.Done():
			}
		}()
	}
	// The clients do not watch ctx: its end is the master's to handle
	// (a stop that names the master, not whichever client saw it first),
	// and before the start the master's return closes their links.
	clientCtx, cancelClients := context.WithCancel(context.WithoutCancel(runCtx))
	defer cancelClients()
	var wg sync.WaitGroup
	// The clients' setups (each builds its records, a few MB) come after
	// the collection above: the collection they cause would land in the
	// loop's first periods (pauses of tens of ms, and the setup's objects
	// counted as the loop's). So once every client is set up, one
	// collection, and then the loops: each client's waits for it.
	setUp := make(chan struct{}, len(clients))
	collected := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(collected)
		for range clients {
			select {
			case <-setUp:
			case <-runCtx.Done():
				return
			}
		}
		runtime.GC()
	}()
	afterSetup := func() {
		setUp <- struct{}{}
		<-collected
	}
	errs := make([]error, len(clients))
	for i, c := range clients {
		cl, ml := newChanPair()
		cl.board, ml.board = shared, shared
		cl.afterSetup = afterSetup
		wg.Add(2)
		go func() {
			defer wg.Done()
			m.serve(runCtx, ml, os.Getpid(), mk)
		}()
		go func() {
			defer wg.Done()
			errs[i] = c.session(clientCtx, cl, &startWatch{option: c.masterTimeout}, nil)
			if errors.Is(errs[i], ErrRefused) {
				cancelCause(errs[i]) // the run cannot start without it
			}
		}()
	}
	run, err := m.supervise(runCtx)
	cancel()
	cancelClients()
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

// checkLocalClients checks that clients hold each of the plan's clients
// once: RunLocal's master would wait forever for a missing one.
func checkLocalClients(plan *Plan, clients []*Client) error {
	var problems []string
	seen := map[string]bool{}
	for i, c := range clients {
		switch {
		case c == nil:
			problems = append(problems, fmt.Sprintf("clients[%d] is nil", i))
		case seen[c.name]:
			problems = append(problems, fmt.Sprintf("client %s is given twice", c.name))
		case !slices.Contains(plan.Clients, c.name):
			problems = append(problems, fmt.Sprintf("client %s is not one of the plan's (its clients are %s)", c.name, strings.Join(plan.Clients, ", ")))
		}
		if c != nil {
			seen[c.name] = true
		}
	}
	var missing []string
	for _, name := range plan.Clients {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("no Client for %s of the plan (its clients are %s): make each with NewClient and register its runnables", strings.Join(missing, ", "), strings.Join(plan.Clients, ", ")))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: RunLocal: %s", ErrRefused, strings.Join(problems, "; "))
	}
	return nil
}

// stopOnSignal is RunLocal's answer to SIGINT or SIGTERM: a graceful stop
// once the run has started; before, cancel ends the wait for the start,
// which requestStop would leave waiting.
func (m *Master) stopOnSignal(s os.Signal, cancel context.CancelCauseFunc) {
	reason := fmt.Sprintf("the process running RunLocal got %v", s)
	if !m.requestStop(reason) {
		cancel(errors.New(reason))
	}
}
