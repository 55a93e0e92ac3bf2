package hypervisor

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// Errors of SolveFlops and SolveTasks.
var (
	// ErrNoWork is returned when no context has work left: there is
	// nothing to plan.
	ErrNoWork = errors.New("hypervisor: no work left to plan")
	// ErrInfeasible is returned when no distribution of the workers fits
	// the problem: limits that ask for more workers than there are (or
	// fewer), a context whose work no kind of worker present can run (a
	// zero speed on every kind), or limits that leave a context with
	// work no worker.
	ErrInfeasible = errors.New("hypervisor: no distribution of the workers fits")
	// ErrBadProblem is returned for a malformed problem: a negative
	// number of contexts or of workers, lengths that do not match the
	// number of contexts (Flops and Speed, Min, Max), a task type of a
	// context that does not exist, or work that is not a finite number
	// (NaN or +Inf flops or task count); the message names the context.
	ErrBadProblem = errors.New("hypervisor: invalid problem")
)

// A FlopsProblem is the input of feft: how much work each context has
// left and how fast each kind of worker does it.
type FlopsProblem struct {
	// Flops is each context's remaining work (0 or less: none; the
	// context then gets its Min). NaN and +Inf are refused
	// (ErrBadProblem).
	Flops []float64
	// Speed[i][k] is the speed (flop/s) of one worker of kind k on
	// context i's tasks; 0 (or less) when that kind cannot run them.
	Speed [][]float64
	// Workers[k] is the number of workers of kind k to share.
	Workers []int
	// Min and Max bound each context's number of workers, all kinds
	// together (nil: no bound; a Max of 0: no bound).
	Min, Max []int
}

// A TaskType is one type of task in a TaskProblem.
type TaskType struct {
	// Context is the index of the context that runs the tasks.
	Context int
	// Count is the number of tasks left (0 or less: none; NaN and +Inf
	// are refused, ErrBadProblem).
	Count float64
	// Time[k] is the time (seconds) of one task on a worker of kind k;
	// 0 (or less, or NaN, or +Inf) when that kind cannot run it, or its
	// time is unknown.
	Time []float64
}

// A TaskProblem is the input of teft: every type of task left, its
// count and its time per kind of worker.
type TaskProblem struct {
	// Contexts is the number of contexts (at least 0).
	Contexts int
	// Types are the types of task left.
	Types []TaskType
	// Workers, Min and Max are as in FlopsProblem.
	Workers  []int
	Min, Max []int
}

// A Distribution is how the workers should be shared so that all the
// work ends first.
type Distribution struct {
	// Share[i][k] is the linear program's (fractional) number of workers
	// of kind k for context i.
	Share [][]float64
	// Workers[i][k] is Share rounded to integers: each kind's workers
	// are all assigned, once, and every context's total is within its
	// Min and Max. A context with work gets at least one worker whenever
	// the workers and the limits allow it (as many workers as contexts
	// with work, Min and Max permitting): the program then bounds its
	// share below by one. Unserved lists the others.
	Workers [][]int
	// End is the predicted time (seconds) until all the work is done
	// with the fractional distribution Share: the linear program's
	// optimum, a lower bound of RoundedEnd.
	End float64
	// RoundedEnd is the predicted time (seconds) until all the work is
	// done with the distribution returned, Workers (each context's work
	// shared at best among its whole workers); +Inf when a context with
	// work has no worker that can run it (see Unserved).
	RoundedEnd float64
	// Unserved lists the contexts with work that Workers leaves without
	// a worker able to run it, which happens only with fewer such workers
	// than contexts with work (or Min and Max that leave too few); nil
	// otherwise.
	Unserved []int
}

// SolveFlops returns the distribution of the workers among the contexts
// that finishes all their flops first (StarPU's feft_lp: a linear
// program over the contexts' remaining flops and the speed of each kind
// of worker on each context), assuming that each context keeps all its
// workers busy. It is a plain function of its input.
//
// The program, with n[i][k] the workers of kind k in context i and
// y = 1/End, maximizes y subject to Σ_k Speed[i][k]·n[i][k] ≥
// Flops[i]·y for every context, Σ_i n[i][k] = Workers[k] for every kind
// and Min[i] ≤ Σ_k n[i][k] ≤ Max[i]. It is the task program of
// SolveTasks with one type per context, Flops[i] tasks of 1/Speed[i][k]
// seconds.
func SolveFlops(p FlopsProblem) (Distribution, error) {
	if len(p.Speed) != len(p.Flops) {
		return Distribution{}, fmt.Errorf("%w: %d contexts of flops, %d of speeds", ErrBadProblem, len(p.Flops), len(p.Speed))
	}
	tp := TaskProblem{Contexts: len(p.Flops), Workers: p.Workers, Min: p.Min, Max: p.Max}
	for i, f := range p.Flops {
		if math.IsNaN(f) || math.IsInf(f, 1) {
			return Distribution{}, fmt.Errorf("%w: context %d: flops %g is not a finite amount of work", ErrBadProblem, i, f)
		}
		if f <= 0 {
			continue
		}
		t := make([]float64, len(p.Workers))
		for k := range t {
			if k < len(p.Speed[i]) && p.Speed[i][k] > 0 {
				t[k] = 1 / p.Speed[i][k]
			}
		}
		tp.Types = append(tp.Types, TaskType{Context: i, Count: f, Time: t})
	}
	return SolveTasks(tp)
}

// SolveTasks returns the distribution of the workers among the contexts
// that finishes all their tasks first (StarPU's teft_lp: a linear
// program over every type of task left, its count and its time on each
// kind of worker). It is a plain function of its input.
//
// With n[i][k] the workers of kind k in context i, a[j][k] the tasks of
// type j run by workers of kind k and End the time when all are done,
// the tasks of context i on kind k must fit in its workers' time:
// Σ_{j of i} Time[j][k]·a[j][k] ≤ n[i][k]·End. StarPU searches End by
// dichotomy, solving one program per guess; dividing by End instead
// (b = a/End, y = 1/End) makes it one linear program: maximize y
// subject to
//
//	Σ_{j of i} Time[j][k]·b[j][k] ≤ n[i][k]   for every context i, kind k
//	Σ_k b[j][k] = Count[j]·y                  for every type j
//	Σ_i n[i][k] = Workers[k]                  for every kind k
//	Min[i] ≤ Σ_k n[i][k] ≤ Max[i]              for every context i
//
// solved by gonum's Simplex, then rounded to integers (see
// Distribution.Workers). A second program, with the workers fixed to
// the rounded ones, gives RoundedEnd.
func SolveTasks(p TaskProblem) (Distribution, error) {
	ns, nk := p.Contexts, len(p.Workers)
	if ns < 0 {
		return Distribution{}, fmt.Errorf("%w: %d contexts", ErrBadProblem, ns)
	}
	lo, hi, total, err := bounds(ns, p.Workers, p.Min, p.Max)
	if err != nil {
		return Distribution{}, err
	}
	// The kinds present, and the types with work, each with the kinds
	// that can run it.
	var kinds []int
	for k, w := range p.Workers {
		if w > 0 {
			kinds = append(kinds, k)
		}
	}
	type typ struct {
		ctx   int
		count float64
		time  map[int]float64 // by kind
	}
	var types []typ
	maxCount, maxTime := 0.0, 0.0
	hasWork := make([]bool, ns)
	for j, t := range p.Types {
		if t.Context < 0 || t.Context >= ns {
			return Distribution{}, fmt.Errorf("%w: type %d: context %d out of 0..%d", ErrBadProblem, j, t.Context, ns-1)
		}
		if math.IsNaN(t.Count) || math.IsInf(t.Count, 1) {
			return Distribution{}, fmt.Errorf("%w: context %d: type %d: task count %g is not a finite amount of work", ErrBadProblem, t.Context, j, t.Count)
		}
		if !(t.Count > 0) {
			continue
		}
		tt := typ{ctx: t.Context, count: t.Count, time: map[int]float64{}}
		for _, k := range kinds {
			if k < len(t.Time) && t.Time[k] > 0 && !math.IsInf(t.Time[k], 1) {
				tt.time[k] = t.Time[k]
				maxTime = max(maxTime, t.Time[k])
			}
		}
		if len(tt.time) == 0 {
			return Distribution{}, fmt.Errorf("%w: context %d has %g tasks (type %d) that no kind of worker present can run (zero speed or unknown time on every kind)", ErrInfeasible, t.Context, t.Count, j)
		}
		maxCount = max(maxCount, t.Count)
		hasWork[t.Context] = true
		types = append(types, tt)
	}
	if len(types) == 0 {
		return Distribution{}, ErrNoWork
	}
	if total == 0 {
		return Distribution{}, fmt.Errorf("%w: no workers for the work left", ErrInfeasible)
	}
	// A context with work gets at least one worker when the workers and
	// the limits allow it: raise its lower bound to 1 if the bounds still
	// add up to at most the workers.
	served := slices0(lo)
	sumLo := 0
	for i := range served {
		if hasWork[i] {
			served[i] = max(served[i], min(1, hi[i]))
		}
		sumLo += served[i]
	}
	if sumLo > total {
		served = lo
	}

	// Columns: n[i][k] for the kinds present, b[j][k] for the kinds that
	// can run type j, y, then one slack per inequality.
	col := 0
	nCol := make([][]int, ns)
	for i := range nCol {
		nCol[i] = make([]int, nk)
		for _, k := range kinds {
			nCol[i][k] = col
			col++
		}
	}
	bCol := make([]map[int]int, len(types))
	for j, t := range types {
		bCol[j] = map[int]int{}
		for _, k := range kinds {
			if _, ok := t.time[k]; ok {
				bCol[j][k] = col
				col++
			}
		}
	}
	yCol := col
	col++
	// Rows, as sparse maps of column to coefficient, and their right
	// sides. A slack column is added to each inequality.
	type row struct {
		a     map[int]float64
		b     float64
		slack float64 // +1 for ≤, -1 for ≥, 0 for =
	}
	// solve builds and solves the program; with fixed, the workers are
	// fixed to it instead of free within the kinds' totals and limits.
	solve := func(fixed [][]int) ([]float64, error) {
		var rows []row
		// Scale times and counts to about 1 so that the Simplex's tolerances
		// fit (flops ~1e12 against times ~1e-9 s per flop otherwise); y is
		// then y·maxTime·maxCount.
		for i := 0; i < ns; i++ {
			if !hasWork[i] {
				continue
			}
			for _, k := range kinds {
				r := row{a: map[int]float64{nCol[i][k]: -1}, slack: 1}
				for j, t := range types {
					if c, ok := bCol[j][k]; ok && t.ctx == i {
						r.a[c] = t.time[k] / maxTime
					}
				}
				if len(r.a) > 1 {
					rows = append(rows, r)
				}
			}
		}
		for j, t := range types {
			r := row{a: map[int]float64{yCol: -t.count / maxCount}}
			for _, c := range bCol[j] {
				r.a[c] = 1
			}
			rows = append(rows, r)
		}
		if fixed != nil {
			for i := 0; i < ns; i++ {
				for _, k := range kinds {
					rows = append(rows, row{a: map[int]float64{nCol[i][k]: 1}, b: float64(fixed[i][k])})
				}
			}
		}
		for _, k := range kinds {
			if fixed != nil {
				break
			}
			r := row{a: map[int]float64{}, b: float64(p.Workers[k])}
			for i := 0; i < ns; i++ {
				r.a[nCol[i][k]] = 1
			}
			rows = append(rows, r)
		}
		for i := 0; i < ns && fixed == nil; i++ {
			if lo[i] > 0 {
				r := row{a: map[int]float64{}, b: float64(lo[i]), slack: -1}
				for _, k := range kinds {
					r.a[nCol[i][k]] = 1
				}
				rows = append(rows, r)
			}
			if hi[i] < total {
				r := row{a: map[int]float64{}, b: float64(hi[i]), slack: 1}
				for _, k := range kinds {
					r.a[nCol[i][k]] = 1
				}
				rows = append(rows, r)
			}
		}
		nslack := 0
		for _, r := range rows {
			if r.slack != 0 {
				nslack++
			}
		}
		ncols := col + nslack
		A := mat.NewDense(len(rows), ncols, nil)
		b := make([]float64, len(rows))
		sc := col
		for ri, r := range rows {
			for c, v := range r.a {
				A.Set(ri, c, v)
			}
			if r.slack != 0 {
				A.Set(ri, sc, r.slack)
				sc++
			}
			b[ri] = r.b
		}
		c := make([]float64, ncols)
		c[yCol] = -1
		_, x, err := lp.Simplex(c, A, b, simplexTol, nil)
		return x, err
	}
	x, err := solve(nil)
	if err != nil {
		return Distribution{}, fmt.Errorf("%w: linear program of %d contexts, %d types, %d kinds: %w", ErrInfeasible, ns, len(types), len(kinds), err)
	}
	y := x[yCol]
	if !(y > 1e-12) {
		return Distribution{}, fmt.Errorf("%w: the limits leave a context with work no worker that can run it", ErrInfeasible)
	}
	d := Distribution{Share: make([][]float64, ns), End: maxTime * maxCount / y}
	for i := range d.Share {
		d.Share[i] = make([]float64, nk)
		for _, k := range kinds {
			d.Share[i][k] = max(x[nCol[i][k]], 0)
		}
	}
	d.Workers, err = roundShares(d.Share, p.Workers, served, hi)
	if err != nil {
		return d, err
	}
	// can[i][k]: a worker of kind k can run some of context i's work.
	can := make([][]bool, ns)
	for i := range can {
		can[i] = make([]bool, nk)
	}
	for _, t := range types {
		for k := range t.time {
			can[t.ctx][k] = true
		}
	}
	useWorkers(d.Workers, can)
	for i := range d.Workers {
		useful := false
		for k, w := range d.Workers[i] {
			useful = useful || w > 0 && can[i][k]
		}
		if hasWork[i] && !useful {
			d.Unserved = append(d.Unserved, i)
		}
	}
	d.RoundedEnd = math.Inf(1)
	if x, err := solve(d.Workers); err == nil && x[yCol] > 1e-12 {
		d.RoundedEnd = maxTime * maxCount / x[yCol]
	}
	return d, nil
}

// bounds checks the limits and returns each context's least and most
// workers (hi capped at the total).
func bounds(ns int, workers, minw, maxw []int) (lo, hi []int, total int, err error) {
	if (minw != nil && len(minw) != ns) || (maxw != nil && len(maxw) != ns) {
		return nil, nil, 0, fmt.Errorf("%w: %d contexts but %s", ErrBadProblem, ns, limitsLen(minw, maxw))
	}
	for k, w := range workers {
		if w < 0 {
			return nil, nil, 0, fmt.Errorf("%w: %d workers of kind %d", ErrBadProblem, w, k)
		}
		total += w
	}
	lo, hi = make([]int, ns), make([]int, ns)
	sumLo, sumHi := 0, 0
	for i := range lo {
		hi[i] = total
		if minw != nil {
			lo[i] = max(minw[i], 0)
		}
		if maxw != nil && maxw[i] > 0 {
			hi[i] = min(maxw[i], total)
		}
		if lo[i] > hi[i] {
			return nil, nil, 0, fmt.Errorf("%w: context %d: min %d above max %d (or the %d workers)", ErrInfeasible, i, lo[i], hi[i], total)
		}
		sumLo += lo[i]
		sumHi += hi[i]
	}
	if sumLo > total {
		return nil, nil, 0, fmt.Errorf("%w: the contexts' minimums add up to %d workers, there are %d", ErrInfeasible, sumLo, total)
	}
	if sumHi < total {
		return nil, nil, 0, fmt.Errorf("%w: the contexts' maximums add up to %d workers, %d must be placed", ErrInfeasible, sumHi, total)
	}
	return lo, hi, total, nil
}

// roundShares rounds a fractional distribution share[i][k] whose kind
// columns add up to workers[k] to integers with the same column sums and
// row sums within [lo[i], hi[i]]: first each context's total (from its
// minimum, each worker to the context that would end last), then each
// kind within the totals (largest remainder, then any cell that both
// still lack).
func roundShares(share [][]float64, workers []int, lo, hi []int) ([][]int, error) {
	const eps = 1e-9 // the Simplex's round-off on an integral share
	ns, nk := len(share), len(workers)
	want := make([]float64, ns)
	tot := make([]int, ns)
	left := 0
	for _, w := range workers {
		left += w
	}
	for i := range share {
		for _, v := range share[i] {
			want[i] += v
		}
		tot[i] = lo[i]
		left -= tot[i]
	}
	// Each context's work takes about want[i]/tot[i] of the fractional
	// plan's time with tot[i] whole workers: from the minimums up, each
	// worker goes to the context that would otherwise end last (with one
	// kind of worker and the program's shares, the split that ends
	// first). Rounding each share down and handing out the rest by the
	// largest remainder gave shares of 1.47 and 2.53 workers 1 and 3,
	// ending at 1.47 times the plan's time, where 2 and 2 end at 1.26;
	// and a context raised to its minimum of one worker took it from the
	// floors of the others without a look at which then ends last.
	load := func(i, n int) float64 {
		switch {
		case want[i] <= eps:
			return 0
		case n <= 0:
			return math.Inf(1)
		}
		return want[i] / float64(n)
	}
	if left < 0 {
		return nil, fmt.Errorf("%w: the minimums take %d workers too many", ErrInfeasible, -left)
	}
	for ; left > 0; left-- {
		best := -1
		for i := range tot {
			if tot[i] < hi[i] && (best < 0 || load(i, tot[i]) > load(best, tot[best]) ||
				load(i, tot[i]) == load(best, tot[best]) && want[i]-float64(tot[i]) > want[best]-float64(tot[best])) {
				best = i
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("%w: the maximums leave %d workers unplaced", ErrInfeasible, left)
		}
		tot[best]++
	}
	out := make([][]int, ns)
	rowDef := make([]int, ns)
	colDef := slices0(workers)
	for i := range share {
		out[i] = make([]int, nk)
		for k := range out[i] {
			out[i][k] = min(int(math.Floor(share[i][k]+eps)), colDef[k])
			colDef[k] -= out[i][k]
			rowDef[i] += out[i][k]
		}
		// A total rounded below its floors gives back the cells with the
		// smallest remainders.
		for rowDef[i] > tot[i] {
			kk := -1
			for k := range out[i] {
				if out[i][k] > 0 && (kk < 0 || share[i][k]-float64(out[i][k]) < share[i][kk]-float64(out[i][kk])) {
					kk = k
				}
			}
			out[i][kk]--
			colDef[kk]++
			rowDef[i]--
		}
		rowDef[i] = tot[i] - rowDef[i]
	}
	for {
		bi, bk := -1, -1
		for i := range out {
			if rowDef[i] == 0 {
				continue
			}
			for k := range out[i] {
				if colDef[k] > 0 && (bi < 0 || share[i][k]-float64(out[i][k]) > share[bi][bk]-float64(out[bi][bk])) {
					bi, bk = i, k
				}
			}
		}
		if bi < 0 {
			break
		}
		out[bi][bk]++
		rowDef[bi]--
		colDef[bk]--
	}
	for i, d := range rowDef {
		if d != 0 {
			return nil, fmt.Errorf("%w: rounding left context %d %d workers short", ErrInfeasible, i, d)
		}
	}
	return out, nil
}

func slices0(s []int) []int { return append([]int(nil), s...) }

// limitsLen describes the lengths of Min and Max for an error: "2 Min"
// and "no Max" (nil) rather than "0 Max".
func limitsLen(minw, maxw []int) string {
	one := func(name string, l []int) string {
		if l == nil {
			return "no " + name
		}
		return fmt.Sprintf("%d %s", len(l), name)
	}
	return one("Min", minw) + " and " + one("Max", maxw)
}

// useWorkers trades workers between contexts so that a context whose
// workers can run none of its work (can: by context, then kind) gets
// one that can, from a context that stays served after the trade (it
// can use the worker it gets back, or keeps another it can use, or has
// no work): rounding a share of 0.26 kind-1 workers up by the fallback,
// when the kind-1 workers were all placed, gave such a context a kind-0
// worker it had no use for (RoundedEnd +Inf). Every context keeps its
// number of workers, every kind its count.
func useWorkers(w [][]int, can [][]bool) {
	served := func(i int) bool {
		for k, n := range w[i] {
			if n > 0 && can[i][k] {
				return true
			}
		}
		return !slices.Contains(can[i], true) // no work: nothing to serve
	}
	for i := range w {
		if served(i) {
			continue
		}
		k := slices.IndexFunc(w[i], func(n int) bool { return n > 0 })
		if k < 0 {
			continue // no worker at all: Unserved
		}
	trade:
		for j := range w {
			if j == i {
				continue
			}
			for k2, n := range w[j] {
				if n == 0 || k2 == k || !can[i][k2] {
					continue
				}
				w[j][k2]--
				w[j][k]++
				if !served(j) {
					w[j][k2]++ // j would lose its last useful worker
					w[j][k]--
					continue
				}
				w[i][k]--
				w[i][k2]++
				break trade
			}
		}
	}
}

// simplexTol is the reduced cost below which gonum's Simplex stops (its
// tol). At 0 a reduced cost of round-off size (-1e-17) kept it pivoting
// on a degenerate vertex for ever: FlopsProblem{Flops: 42, 64, 54;
// Speed: 1, 4, 1; Workers: 3; Max: 0, 2, 1} never returned (gonum issue
// 1914 is another such loop). The objective is -y with y = 1/End
// scaled to about 1, so this stops within a billionth of the optimum.
const simplexTol = 1e-9
