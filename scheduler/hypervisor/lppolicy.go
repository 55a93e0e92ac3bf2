package hypervisor

import (
	"errors"
	"math"
	"slices"

	"go.uber.org/zap"
)

// FEFT is the feft policy (StarPU's feft_lp, "fastest end first"): a
// linear program (SolveFlops) over the registered contexts' remaining
// flops (Limits.TotalFlops minus the flops done; correct them during the
// run with SetTotalFlops or AddTotalFlops) and each kind of worker's
// measured speed on each context (ContextView.KindSpeed) predicts the
// distribution of the workers with which all the contexts finish first.
// Contexts that declared no total flops keep their workers. A speed not
// measured yet is taken from the same kind of worker on the other
// contexts, else from any worker (1 flop/s if none has run a task).
// With fewer workers than contexts with work, a context with no task
// pending is planned as without work, so that its workers go to those
// whose tasks wait.
//
// It moves workers toward the program's distribution: at once when a
// hook or ResizeNow asks; under the speed trigger, when a context's
// instant speed parts from the speed the program plans for it (its
// remaining flops over the predicted end) by more than Gap, relative; under
// the idle trigger, when a context that must give workers has an idle
// one.
type FEFT struct {
	// Gap is the relative difference between a context's measured and
	// planned speed that justifies a resize under the speed trigger.
	Gap float64
}

// Name returns "feft".
func (FEFT) Name() string { return "feft" }

// Resize implements Policy.
func (p FEFT) Resize(v *View) []Move {
	var managed []int
	for i := range v.Contexts {
		if v.Contexts[i].Limits.TotalFlops > 0 {
			managed = append(managed, i)
		}
	}
	if len(managed) < 2 {
		return nil
	}
	nk := numKinds(v)
	prob := FlopsProblem{Workers: make([]int, nk)}
	remaining := make([]float64, len(managed))
	active := make([]bool, len(managed))
	for m, i := range managed {
		c := &v.Contexts[i]
		// As for gflops_rate: a context is active until its declared
		// work is done, unless it stopped taking tasks and has none left.
		active[m] = c.Remaining() > 1e-9*c.Limits.TotalFlops && !(c.Pending == 0 && c.Context.Stopped())
		if active[m] {
			remaining[m] = c.Remaining()
		}
		prob.Flops = append(prob.Flops, remaining[m])
		prob.Speed = append(prob.Speed, kindSpeeds(v, managed, i, nk))
	}
	return lpResize(v, managed, active, remaining, nil, p.Gap, func(minw, maxw []int, drop []bool) (Distribution, error) {
		q := prob
		q.Min, q.Max = minw, maxw
		if drop != nil {
			q.Flops = slices.Clone(prob.Flops)
			for m := range drop {
				if drop[m] {
					q.Flops[m] = 0
				}
			}
		}
		return SolveFlops(q)
	}, &prob.Workers)
}

// TEFT is the teft policy (StarPU's teft_lp, "task-based end first"): a
// linear program (SolveTasks) over every type of task left in the
// registered contexts (View.Types: a codelet in a context), their
// counts and their times per kind of worker (measured on the tasks
// completed, or the scheduler's calibrated model for announced types)
// predicts the distribution of the workers with which all the tasks end
// first. Announce future types with Hypervisor.AnnounceTasks before they
// are submitted; types never announced count their ready tasks. A type
// whose time is unknown on every kind is given the mean time of its
// context's other types (or of all types; it is left out if none is
// known). Contexts without any type seen or announced keep their
// workers. Resizes happen as for FEFT; under the speed trigger a
// context's planned speed is its remaining flops (each type's count
// times its mean flops) over the predicted end, compared with its
// measured ContextView.Speed; when its codelets declare no Flops (no
// flops left to plan), it is its remaining tasks over the predicted end,
// compared with its measured ContextView.TaskSpeed. Flops are not
// needed.
type TEFT struct {
	// Gap is as in FEFT.
	Gap float64
}

// Name returns "teft".
func (TEFT) Name() string { return "teft" }

// WantsTaskTypes implements TaskTyped.
func (TEFT) WantsTaskTypes() {}

// Resize implements Policy.
func (p TEFT) Resize(v *View) []Move {
	idx := map[int]int{} // context index -> index in managed
	var managed []int
	for _, t := range v.Types {
		if _, ok := idx[t.Context]; !ok {
			idx[t.Context] = len(managed)
			managed = append(managed, t.Context)
		}
	}
	if len(managed) < 2 {
		return nil
	}
	nk := numKinds(v)
	prob := TaskProblem{Contexts: len(managed), Workers: make([]int, nk)}
	remaining := make([]float64, len(managed))
	tasks := make([]float64, len(managed)) // tasks left, for contexts without flops
	active := make([]bool, len(managed))
	// Mean known time per kind, by context and overall, for the types
	// not measured yet.
	ctxMean := make([][]float64, len(managed))
	ctxN := make([][]int, len(managed))
	allMean, allN := make([]float64, nk), make([]int, nk)
	for m := range managed {
		ctxMean[m], ctxN[m] = make([]float64, nk), make([]int, nk)
	}
	for _, t := range v.Types {
		m := idx[t.Context]
		for k, d := range t.Time {
			if d > 0 && k < nk {
				ctxMean[m][k] += d.Seconds()
				ctxN[m][k]++
				allMean[k] += d.Seconds()
				allN[k]++
			}
		}
	}
	for _, t := range v.Types {
		if t.Remaining <= 0 {
			continue
		}
		m := idx[t.Context]
		tt := TaskType{Context: m, Count: float64(t.Remaining), Time: make([]float64, nk)}
		known := false
		for k := range tt.Time {
			if k < len(t.Time) && t.Time[k] > 0 {
				tt.Time[k], known = t.Time[k].Seconds(), true
			}
		}
		if !known {
			for k := range tt.Time {
				switch {
				case ctxN[m][k] > 0:
					tt.Time[k], known = ctxMean[m][k]/float64(ctxN[m][k]), true
				case allN[k] > 0:
					tt.Time[k], known = allMean[k]/float64(allN[k]), true
				}
			}
		}
		if !known {
			continue
		}
		c := &v.Contexts[t.Context]
		active[m] = active[m] || !(c.Pending == 0 && c.Context.Stopped())
		remaining[m] += float64(t.Remaining) * t.Flops
		tasks[m] += float64(t.Remaining)
		prob.Types = append(prob.Types, tt)
	}
	// Without flops, plan and measure the speed in tasks.
	inTasks := make([]bool, len(managed))
	for m := range managed {
		if !(remaining[m] > 0) && tasks[m] > 0 {
			inTasks[m], remaining[m] = true, tasks[m]
		}
	}
	return lpResize(v, managed, active, remaining, inTasks, p.Gap, func(minw, maxw []int, drop []bool) (Distribution, error) {
		q := prob
		q.Min, q.Max = minw, maxw
		if drop != nil {
			q.Types = slices.DeleteFunc(slices.Clone(prob.Types), func(t TaskType) bool { return drop[t.Context] })
		}
		return SolveTasks(q)
	}, &prob.Workers)
}

// numKinds is the number of worker kinds in v.
func numKinds(v *View) int {
	n := 1
	for _, w := range v.Workers {
		n = max(n, int(w.Kind)+1)
	}
	return n
}

// kindSpeeds returns the speed of each kind of worker on context i:
// measured there, else the mean over the managed contexts for that
// kind, else the mean busy speed of any, else 1.
func kindSpeeds(v *View, managed []int, i, nk int) []float64 {
	sp := make([]float64, nk)
	var anySum float64
	var anyN int
	for _, j := range managed {
		if s := v.Contexts[j].BusySpeed; s > 0 {
			anySum += s
			anyN++
		}
	}
	for k := range sp {
		if k < len(v.Contexts[i].KindSpeed) && v.Contexts[i].KindSpeed[k] > 0 {
			sp[k] = v.Contexts[i].KindSpeed[k]
			continue
		}
		var sum float64
		var n int
		for _, j := range managed {
			if ks := v.Contexts[j].KindSpeed; k < len(ks) && ks[k] > 0 {
				sum += ks[k]
				n++
			}
		}
		switch {
		case n > 0:
			sp[k] = sum / float64(n)
		case anyN > 0:
			sp[k] = anySum / float64(anyN)
		default:
			sp[k] = 1
		}
	}
	return sp
}

// lpResize is the part feft and teft share: count the managed contexts'
// workers by kind (into *workers, which solve's problem reads), solve
// within the limits (each context with work keeping one worker, unless
// there are fewer workers than such contexts), and move workers toward
// the solution when the trigger says so. solve plans for the contexts
// in managed but those marked in drop (nil: none), which it treats as
// without work.
//
// With fewer workers than contexts with work, a context whose declared
// work is not done but which has no task pending (between two phases)
// is planned as without work, so that its workers go to the contexts
// whose tasks wait: it would hold them idle otherwise (the program can
// leave no context with work without a worker), and those tasks would
// never run. managed are context indices in
// v; active, remaining (flops, or tasks where inTasks, which may be
// nil) are by position in managed.
func lpResize(v *View, managed []int, active []bool, remaining []float64, inTasks []bool, gap float64,
	solve func(minw, maxw []int, drop []bool) (Distribution, error), workers *[]int) []Move {
	nk := len(*workers)
	cur := make([][]int, len(managed))
	minw, maxw, baseMin := make([]int, len(managed)), make([]int, len(managed)), make([]int, len(managed))
	for m, i := range managed {
		c := &v.Contexts[i]
		cur[m] = make([]int, nk)
		for _, w := range c.Workers {
			if w < len(v.Workers) {
				k := int(v.Workers[w].Kind)
				cur[m][k]++
				(*workers)[k]++
			}
		}
		baseMin[m] = keep(c)
		minw[m] = baseMin[m]
		if active[m] {
			minw[m] = max(minw[m], 1)
		}
		maxw[m] = c.Limits.Max
	}
	d, err := solve(minw, maxw, nil)
	if errors.Is(err, ErrInfeasible) {
		// More contexts with work than workers: the program decides
		// which wait (the hypervisor still never empties a context with
		// pending tasks).
		d, err = solve(baseMin, maxw, nil)
	}
	if errors.Is(err, ErrInfeasible) {
		// Still too few: those with no task pending wait first.
		var drop []bool
		for m, i := range managed {
			if active[m] && v.Contexts[i].Pending == 0 {
				if drop == nil {
					drop = make([]bool, len(managed))
				}
				drop[m] = true
			}
		}
		if drop != nil {
			if d, err = solve(baseMin, maxw, drop); err == nil {
				for m := range drop {
					if drop[m] {
						active[m], remaining[m] = false, 0
					}
				}
			}
		}
	}
	if err != nil {
		if !errors.Is(err, ErrNoWork) {
			logger(v).Info("hypervisor: no distribution", zap.Error(err))
		}
		return nil
	}
	same := true
	for m := range managed {
		for k := range cur[m] {
			same = same && cur[m][k] == d.Workers[m][k]
		}
	}
	if same {
		return nil
	}
	if !lpShouldMove(v, managed, active, remaining, inTasks, cur, d, gap) {
		return nil
	}
	// Per kind, the workers above the target (idle first) go to the
	// contexts below it.
	var moves []Move
	for k := 0; k < nk; k++ {
		var donors, recv []int
		for m, i := range managed {
			if extra := cur[m][k] - d.Workers[m][k]; extra > 0 {
				for _, w := range members(v, i) {
					if extra == 0 {
						break
					}
					if int(v.Workers[w].Kind) == k {
						donors = append(donors, w)
						extra--
					}
				}
			}
			for n := cur[m][k]; n < d.Workers[m][k]; n++ {
				recv = append(recv, i)
			}
		}
		for j := 0; j < min(len(donors), len(recv)); j++ {
			moves = append(moves, Move{Worker: donors[j], To: recv[j]})
		}
	}
	logger(v).Debug("hypervisor: linear program", zap.Float64("end_s", d.End), zap.Any("share", d.Share), zap.Any("target", d.Workers), zap.Any("current", cur))
	return moves
}

// lpShouldMove says whether the trigger of v justifies moving from cur
// to the distribution d.
func lpShouldMove(v *View, managed []int, active []bool, remaining []float64, inTasks []bool, cur [][]int, d Distribution, gap float64) bool {
	if v.Trigger&TriggerHook != 0 {
		return true
	}
	if v.Trigger&TriggerSpeed != 0 {
		for m, i := range managed {
			c := &v.Contexts[i]
			n := 0
			for _, x := range cur[m] {
				n += x
			}
			if !active[m] {
				if n > keep(c) {
					return true // workers held by a context without work
				}
				continue
			}
			if remaining[m] <= 0 || d.End <= 0 || math.IsInf(d.End, 1) {
				continue // no flops to compare with
			}
			planned, speed := remaining[m]/d.End, c.Speed
			if inTasks != nil && inTasks[m] {
				speed = c.TaskSpeed
			}
			if math.Abs(speed-planned)/planned > gap {
				return true
			}
		}
	}
	if v.Trigger&TriggerIdle != 0 {
		for m, i := range managed {
			above := false
			for k := range cur[m] {
				above = above || cur[m][k] > d.Workers[m][k]
			}
			if !above {
				continue
			}
			for _, w := range v.Contexts[i].Workers {
				if w < len(v.Workers) && v.Workers[w].MaxIdle > 0 && v.Workers[w].Idle >= v.Workers[w].MaxIdle {
					return true
				}
			}
		}
	}
	return false
}

var (
	_ Policy    = FEFT{}
	_ Policy    = TEFT{}
	_ TaskTyped = TEFT{}
)
