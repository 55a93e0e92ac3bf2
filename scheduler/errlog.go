package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// errorLog keeps the errors of failed tasks until a WaitAll takes them,
// counting the canceled ones (their dependents) rather than listing
// them: one per scope, the scheduler's and each context's.
type errorLog struct {
	mu        sync.Mutex
	errs      []error
	canceled  int
	firstCanc error
}

// record keeps err.
func (l *errorLog) record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(err, ErrCanceled) {
		l.canceled++
		if l.firstCanc == nil {
			l.firstCanc = err
		}
		return
	}
	l.errs = append(l.errs, err)
}

// take returns the errors kept so far, joined, with one error for the
// canceled tasks (of is "" or names the scope, ` of "ctx"`), and clears
// them: each error is reported once.
func (l *errorLog) take(of string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	errs := collapse(l.errs)
	if l.canceled > 0 {
		// Why is the first's to say: a failed task they depend on, a
		// CancelOn context, or Close (a wait for a task never submitted).
		errs = append(errs, fmt.Errorf("%w: %s%s not run (the first canceled, in completion order: %v)", ErrCanceled, tasks(int64(l.canceled)), of, l.firstCanc))
	}
	l.errs, l.canceled, l.firstCanc = nil, 0, nil
	return errors.Join(errs...)
}

// collapse lists an error that repeats once, the first of its kind,
// saying how many times it occurred: a closing scheduler fails every
// pending transfer the same way, and a hundred identical lines hide the
// one that matters. Task errors are alike when their codelet and cause
// are (whatever the task, tag or worker); a codelet's tasks that do not
// fit in a device's memory (ErrDeviceMemory) are alike whatever their
// data.
func collapse(errs []error) []error {
	if len(errs) < 2 {
		return errs
	}
	seen := make(map[string]int, len(errs))
	var out []error
	var times []int
	for _, e := range errs {
		msg := e.Error()
		if te, ok := e.(*TaskError); ok && te.Err != nil {
			msg = fmt.Sprintf("%q %v %v", te.Codelet, te.Panicked, te.Err)
			if errors.Is(te.Err, ErrDeviceMemory) {
				// Each names its own handles and sizes: alike when the
				// codelet is (a tiling too large for the device fails
				// every task of a kind).
				msg = fmt.Sprintf("%q device memory", te.Codelet)
			}
		}
		if i, ok := seen[msg]; ok {
			times[i]++
			continue
		}
		seen[msg] = len(out)
		out = append(out, e)
		times = append(times, 1)
	}
	for i, n := range times {
		if n > 1 {
			out[i] = &repeated{err: out[i], n: n}
		}
	}
	return out
}

// repeated is an error that occurred n times.
type repeated struct {
	err error
	n   int
}

func (r *repeated) Error() string {
	return fmt.Sprintf("%v (and %d more like it)", r.err, r.n-1)
}

func (r *repeated) Unwrap() error { return r.err }

// takeErrors returns and clears the errors of c (and, with sub, of its
// sub-contexts).
func (c *Context) takeErrors(sub bool) error {
	var errs []error
	if err := c.errs.take(fmt.Sprintf(" of %q", c.name)); err != nil {
		errs = append(errs, err)
	}
	if sub {
		for _, ch := range c.Children() {
			if err := ch.takeErrors(true); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// takeContextErrors returns the errors of every context's tasks not yet
// returned, for Scheduler.WaitAll.
func (s *Scheduler) takeContextErrors() error {
	s.cx.mu.Lock()
	all := slices.Clone(s.cx.all)
	s.cx.mu.Unlock()
	var errs []error
	for _, c := range all {
		if c.parent != nil {
			if err := c.takeErrors(false); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
