package hypervisor

import (
	"fmt"
	"sync"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// TaskTyped is implemented by a policy that decides from the types of
// task of the registered contexts (View.Types), such as TEFT. With such
// a policy the hypervisor counts the tasks of each type as they are
// pushed and completed, at the cost of one short lock per event; without
// it, View.Types is nil. A policy that wraps TEFT must implement it too
// (see Policy).
type TaskTyped interface {
	// WantsTaskTypes is a marker; it is never called.
	WantsTaskTypes()
}

// taskTyped is what New checks.
type taskTyped = TaskTyped

// TaskTypeView is one type of task of a registered context in a View: a
// codelet submitted to that context. (StarPU keys types by codelet and
// data footprint, Task.Footprint here; AnnounceTasks may announce a type
// without data arguments, whose footprint is then unknown, so all the
// tasks of a codelet in a context are one type.)
type TaskTypeView struct {
	// Context is the index in View.Contexts of the type's context.
	Context int
	// Codelet is the tasks' codelet; Name its name.
	Codelet *scheduler.Codelet
	Name    string
	// Remaining counts the tasks of the type not completed: announced
	// (AnnounceTasks) or pushed (submitted and ready), whichever is
	// more, minus completed.
	Remaining int64
	// Time is, by kind of worker (indexed by scheduler.WorkerKind), the
	// mean time of one task: measured on the tasks completed so far, or,
	// before the first, the scheduler's calibrated performance model for
	// the arguments given to AnnounceTasks; 0 when unknown.
	Time []time.Duration
	// Flops is the mean flops of the completed tasks (0 before the
	// first, or without Codelet.Flops).
	Flops float64
}

// typeKey is one type of task: a codelet in a context.
type typeKey struct {
	c  *scheduler.Context
	cl *scheduler.Codelet
}

// typeCounters are the counts of one type of task; guarded by
// taskTypes.mu.
type typeCounters struct {
	announced, pushed, done int64
	flops                   float64
	elapsed                 []time.Duration // by kind: sum
	runs                    []int64         // by kind
	args                    []scheduler.Arg // for the performance model
}

// taskTypes are the counters of every type of task seen or announced.
type taskTypes struct {
	on    bool // the policy wants them (set by New)
	mu    sync.Mutex
	m     map[typeKey]*typeCounters
	order []typeKey
}

func (tt *taskTypes) getLocked(k typeKey, nkinds int) *typeCounters {
	tc := tt.m[k]
	if tc == nil {
		tc = &typeCounters{elapsed: make([]time.Duration, nkinds), runs: make([]int64, nkinds)}
		tt.m[k] = tc
		tt.order = append(tt.order, k)
	}
	return tc
}

func (tt *taskTypes) pushed(c *scheduler.Context, t *scheduler.Task) {
	tt.mu.Lock()
	tt.getLocked(typeKey{c, t.Codelet}, 0).pushed++
	tt.mu.Unlock()
}

func (tt *taskTypes) executed(c *scheduler.Context, t *scheduler.Task, kind scheduler.WorkerKind, elapsed time.Duration, flops float64) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tc := tt.getLocked(typeKey{c, t.Codelet}, 0)
	tc.done++
	tc.flops += flops
	for int(kind) >= len(tc.runs) {
		tc.runs = append(tc.runs, 0)
		tc.elapsed = append(tc.elapsed, 0)
	}
	tc.runs[kind]++
	tc.elapsed[kind] += elapsed
}

// view returns the types of the contexts of cs; nkinds sizes Time.
func (tt *taskTypes) view(s *scheduler.Scheduler, cs []ContextView, nkinds int) []TaskTypeView {
	idx := make(map[*scheduler.Context]int, len(cs))
	for i := range cs {
		idx[cs[i].Context] = i
	}
	type snap struct {
		k  typeKey
		tc typeCounters
	}
	var snaps []snap
	tt.mu.Lock()
	for _, k := range tt.order {
		if _, ok := idx[k.c]; ok {
			tc := *tt.m[k]
			tc.elapsed, tc.runs = append([]time.Duration(nil), tc.elapsed...), append([]int64(nil), tc.runs...)
			snaps = append(snaps, snap{k, tc})
		}
	}
	tt.mu.Unlock()
	out := make([]TaskTypeView, 0, len(snaps))
	for _, sn := range snaps {
		tc := &sn.tc
		tv := TaskTypeView{Context: idx[sn.k.c], Codelet: sn.k.cl, Time: make([]time.Duration, nkinds)}
		if sn.k.cl != nil {
			tv.Name = sn.k.cl.Name
		}
		// The tasks announced and not completed, and at least those
		// submitted and not completed: a type announced with fewer
		// tasks than were submitted still has its queued tasks to run.
		tv.Remaining = max(max(tc.announced, tc.pushed)-tc.done, 0)
		if tc.done > 0 {
			tv.Flops = tc.flops / float64(tc.done)
		}
		for kd := range tv.Time {
			switch {
			case kd < len(tc.runs) && tc.runs[kd] > 0:
				tv.Time[kd] = tc.elapsed[kd] / time.Duration(tc.runs[kd])
			case tc.args != nil:
				if ns, ok := s.ModelEstimate(sn.k.cl, scheduler.WorkerKind(kd), tc.args...); ok {
					tv.Time[kd] = time.Duration(ns)
				}
			}
		}
		out = append(out, tv)
	}
	return out
}

// AnnounceTasks declares that c runs n tasks of codelet cl, in addition
// to those announced before (StarPU's sc_hypervisor_set_type_of_task):
// teft counts them as remaining work before they are submitted, so that
// it plans for types not seen yet. Once a type is announced, its
// remaining count is the announced count minus the completed tasks, so
// announce every task of the type, those already submitted included
// (the tasks submitted and not completed count in any case: announcing
// too few does not hide queued work). args, if given, are the arguments of such a
// task (their data shapes select the scheduler's calibrated performance
// model of cl, which gives the type's time per kind of worker until its
// first tasks have run). c must be registered and not deleted. Close
// logs a warning (WithLogger) for each type of which fewer tasks were
// submitted than announced: teft held workers for them.
func (h *Hypervisor) AnnounceTasks(c *scheduler.Context, cl *scheduler.Codelet, n int, args ...scheduler.Arg) error {
	switch {
	case cl == nil:
		return fmt.Errorf("%w: AnnounceTasks(%v, nil codelet, %d): give the codelet of the tasks announced", ErrBadOption, c, n)
	case n < 0:
		return fmt.Errorf("%w: AnnounceTasks(%v, codelet %q, %d): the number of tasks announced must be at least 0", ErrBadOption, c, cl.Name, n)
	}
	h.regMu.Lock()
	_, err := h.registeredLocked(fmt.Sprintf("AnnounceTasks(%v, codelet %q, %d)", c, cl.Name, n), c)
	h.regMu.Unlock()
	if err != nil {
		return err
	}
	h.types.mu.Lock()
	defer h.types.mu.Unlock()
	tc := h.types.getLocked(typeKey{c, cl}, h.nkinds)
	tc.announced += int64(n)
	if len(args) > 0 {
		tc.args = args
	}
	h.stir()
	return nil
}
