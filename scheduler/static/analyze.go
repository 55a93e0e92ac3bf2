package static

import (
	"cmp"
	"encoding/json"
	"fmt"
	"github.com/pzgo/pz/internal/plural"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pzgo/pz/scheduler/internal/chrometrace"
	"github.com/pzgo/pz/scheduler/internal/gantt"
)

// An Analysis summarizes a Run: per runnable, how late it started, how
// long it ran against its WCET, its overruns and skipped frames, and what
// it allocated inside the loop.
type Analysis struct {
	Plan    string `json:"plan"`
	Source  string `json:"source"`
	Periods int    `json:"periods"`
	// HyperepochPeriods gives each hyperepoch's periods when the run had
	// several (Periods is the most of any: each counts its own).
	HyperepochPeriods []RunHyperepoch `json:"hyperepoch_periods,omitempty"`
	Stopped           string          `json:"stopped"`
	Runnables         []RunnableStats `json:"runnables,omitempty"`
	// GCCycles and GCPauseNs total the clients' collections; GCPeriods
	// counts the periods with one.
	GCCycles  int64 `json:"gc_cycles"`
	GCPauseNs int64 `json:"gc_pause_ns"`
	GCPeriods int   `json:"gc_periods"`
	// Jitter is the start jitter over every CPU runnable run.
	Jitter Quantiles `json:"start_jitter"`
	// Overruns, Skipped and Allocating total the runnables'.
	Overruns int `json:"overruns"`
	Skipped  int `json:"skipped"`
	// OverrunsWCET totals the frames that ran past their WCET (their own
	// bodies ran long); StartedLate those that missed their deadline
	// having started late (RunnableStats.StartedLate).
	OverrunsWCET int `json:"overruns_wcet"`
	StartedLate  int `json:"started_late"`
	// LateRoots counts the late starts over every runnable by their root
	// cause, most first.
	LateRoots []RootCause `json:"late_roots,omitempty"`
	// Timeouts totals the runs that went past their timeout.
	Timeouts int `json:"timeouts"`
	// LostClients names the clients whose records were lost (their
	// runnables are Lost).
	LostClients []string `json:"lost_clients,omitempty"`
	// NoFrame names the runnables (of clients whose records came in)
	// that neither ran nor skipped a frame: the run ended before their
	// first, or their thread reached its first period far behind the
	// plan after a stop and abandoned every frame (RunnableStats.
	// Abandoned), as a thread that a loaded machine starts late can.
	NoFrame []string `json:"no_frame,omitempty"`
	// Allocating names the runnables that allocated inside the loop
	// (after the warm-up), when allocations were counted per run.
	Allocating []string `json:"allocating,omitempty"`
	// AllocatingClients names the clients whose process allocated inside
	// the loop; AllocPeriods counts those periods over every client.
	AllocatingClients []string `json:"allocating_clients,omitempty"`
	AllocPeriods      int      `json:"alloc_periods"`
	// PerRun says whether allocations were counted per run.
	PerRun bool `json:"alloc_per_run"`
}

// WarmupPeriods is how many first periods the analysis leaves out of
// allocation counts: the runtime makes its threads then. The last period
// is left out too: clients that have ended send their records then, and
// clients sharing a process (RunLocal) see that.
const WarmupPeriods = 3

// Quantiles of a duration, in ns.
type Quantiles struct {
	P50 int64 `json:"p50_ns"`
	P99 int64 `json:"p99_ns"`
	Max int64 `json:"max_ns"`
}

// RunnableStats is one runnable's line of an Analysis.
type RunnableStats struct {
	Name     string `json:"name"`
	Client   string `json:"client"`
	Resource string `json:"resource"`
	WCET     int64  `json:"wcet_ns"`
	// Runs counts the frames it ran; Skipped those it skipped.
	Runs    int `json:"runs"`
	Skipped int `json:"skipped"`
	// Jitter is start minus planned start (CPU runnables; a submittee
	// starts when enqueued).
	Jitter Quantiles `json:"start_jitter"`
	// Time is its run time (end minus start).
	Time Quantiles `json:"run_time"`
	// OverrunsWCET, OverrunsDeadline, Timeouts, Errors count frames.
	OverrunsWCET     int `json:"overruns_wcet"`
	OverrunsDeadline int `json:"overruns_deadline"`
	Timeouts         int `json:"timeouts"`
	Errors           int `json:"errors"`
	// StartedLate counts the frames that missed their deadline because
	// they started late (a predecessor ended late, or their thread
	// started them late): started at their planned start, the same run
	// would have ended in time. The other deadline overruns ran past
	// their WCET and slack (OverrunsWCET counts them, with the WCET
	// overruns that missed no deadline). LateCauses says why, by frame.
	StartedLate int         `json:"started_late"`
	LateCauses  []LateCause `json:"late_causes,omitempty"`
	// FirstError is the first error the record kept ("frame SEQ:
	// MESSAGE"), when it returned any.
	FirstError string `json:"first_error,omitempty"`
	// AllocRuns counts the runs during which its process allocated;
	// AllocObjects and AllocBytes total what was allocated.
	AllocRuns    int    `json:"alloc_runs"`
	AllocObjects uint64 `json:"alloc_objects"`
	AllocBytes   uint64 `json:"alloc_bytes"`
	// Lost says that its client's records were lost: it has no figures.
	Lost bool `json:"lost,omitempty"`
	// Abandoned counts the frames its client gave up after a stop, far
	// behind the plan (RunnableRun.Abandoned).
	Abandoned int64 `json:"abandoned,omitempty"`
}

// Analyze computes the Analysis of a run.
func Analyze(r *Run) *Analysis {
	a := &Analysis{Plan: r.Plan, Source: r.Source, Periods: r.Periods, Stopped: r.Stopped}
	if len(r.Hyperepochs) > 1 && r.Hyperepochs[0].Periods > 0 {
		a.HyperepochPeriods = slices.Clone(r.Hyperepochs)
	}
	var longest int64
	lastOf := map[string]int64{} // each hyperepoch's last period, where the record says
	longestLast := int64(-1)
	for _, h := range r.Hyperepochs {
		if h.Periods > 0 {
			lastOf[h.Name] = int64(h.Periods - 1)
		}
		if h.Period > longest || h.Period == longest && h.Periods > 0 {
			longest, longestLast = h.Period, int64(h.Periods-1)
		}
	}
	warm := WarmupPeriods * longest
	last := int64(max(r.Periods-1, 0))
	if longestLast < 0 {
		longestLast = last // a record without per-hyperepoch counts
	}
	// The start of the longest hyperepoch's last period: with
	// hyperepochs of different lengths stopped by a signal, Periods (the
	// most of any) times the longest period lies past the run's end.
	wind := longestLast * longest
	var all []int64
	blame := newBlamer(r)
	for ri, rr := range r.Runnables {
		s := RunnableStats{Name: rr.Name, Client: rr.Client, Resource: rr.Resource, WCET: rr.WCET, Lost: rr.Lost, Abandoned: rr.Abandoned}
		if rr.Lost && !slices.Contains(a.LostClients, rr.Client) {
			a.LostClients = append(a.LostClients, rr.Client)
		}
		var jit, dur []int64
		gpu := strings.HasPrefix(rr.Resource, "gpu")
		for i := range rr.Seq {
			f := rr.Flags[i]
			if f&FlagSkipped != 0 {
				s.Skipped++
				continue
			}
			s.Runs++
			if !gpu {
				jit = append(jit, rr.Start[i]-rr.Planned[i])
			}
			dur = append(dur, rr.End[i]-rr.Start[i])
			if f&FlagOverrunWCET != 0 {
				s.OverrunsWCET++
			}
			if f&FlagOverrunDeadline != 0 {
				s.OverrunsDeadline++
			}
			if f&FlagTimeout != 0 {
				s.Timeouts++
			}
			if f&FlagError != 0 {
				s.Errors++
			}
			if o := rr.AllocObjects[i]; o > 0 && rr.Planned[i] >= warm && rr.Planned[i] < wind {
				s.AllocRuns++
				s.AllocObjects += o
				s.AllocBytes += rr.AllocBytes[i]
			}
		}
		if len(rr.Errors) > 0 {
			s.FirstError = rr.Errors[0]
		}
		s.Jitter = quantiles(jit)
		s.Time = quantiles(dur)
		s.StartedLate, s.LateCauses = blame.blame(ri)
		a.OverrunsWCET += s.OverrunsWCET
		a.StartedLate += s.StartedLate
		for _, c := range s.LateCauses {
			if j := slices.IndexFunc(a.LateRoots, func(o RootCause) bool { return o.Root == c.Root && o.RootCause == c.RootCause }); j >= 0 {
				a.LateRoots[j].Frames += c.Frames
				continue
			}
			a.LateRoots = append(a.LateRoots, RootCause{Root: c.Root, RootCause: c.RootCause, Frames: c.Frames})
		}
		all = append(all, jit...)
		a.Skipped += s.Skipped
		a.Timeouts += s.Timeouts
		for i := range rr.Seq {
			if rr.Flags[i]&(FlagOverrunWCET|FlagOverrunDeadline) != 0 {
				a.Overruns++
			}
		}
		if s.AllocRuns > 0 {
			a.Allocating = append(a.Allocating, s.Name)
		}
		if !rr.Lost && len(rr.Seq) == 0 {
			a.NoFrame = append(a.NoFrame, s.Name)
		}
		a.Runnables = append(a.Runnables, s)
	}
	a.Jitter = quantiles(all)
	slices.SortStableFunc(a.LateRoots, func(x, y RootCause) int { return cmp.Compare(y.Frames, x.Frames) })
	// The threads started or ended in each period, by process (the
	// clients of one process, RunLocal's, read the same counters at
	// different moments, so a start and an exit between two readings of
	// one client can show in another's): the most any of its clients saw.
	type procPeriod struct {
		pid       int
		periodsOf string
		period    int64
	}
	churn := map[procPeriod]uint64{}
	for _, c := range r.Clients {
		for _, p := range c.Allocs {
			k := procPeriod{c.PID, c.PeriodsOf, p.Period}
			churn[k] = max(churn[k], p.NewThreads+p.ExitedThreads)
		}
	}
	for _, c := range r.Clients {
		for _, g := range c.GC {
			a.GCCycles += g.Cycles
			a.GCPauseNs += g.PauseNs
			a.GCPeriods++
		}
		a.PerRun = a.PerRun || c.PerRun
		n := 0
		// The client's periods are those of the hyperepoch that samples
		// them; their last one is left out (the run stops in it).
		cLast := last
		if l, ok := lastOf[c.PeriodsOf]; ok {
			cLast = l
		}
		for _, p := range c.Allocs {
			own := p.NewThreads + p.ExitedThreads
			around := churn[procPeriod{c.PID, c.PeriodsOf, p.Period}] - own
			for d := int64(1); d <= threadWindow; d++ {
				around += churn[procPeriod{c.PID, c.PeriodsOf, p.Period - d}] + churn[procPeriod{c.PID, c.PeriodsOf, p.Period + d}]
			}
			if p.Objects > 0 && p.Period >= WarmupPeriods && p.Period < cLast && !p.RuntimeObjects(around) {
				n++
			}
		}
		if n > 0 {
			a.AllocatingClients = append(a.AllocatingClients, c.Name)
			a.AllocPeriods += n
		}
	}
	return a
}

// quantiles sorts xs and reads p50, p99 (nearest rank) and the maximum.
func quantiles(xs []int64) Quantiles {
	if len(xs) == 0 {
		return Quantiles{}
	}
	slices.Sort(xs)
	rank := func(p float64) int64 {
		i := int(p*float64(len(xs))+0.999999) - 1
		return xs[max(0, min(i, len(xs)-1))]
	}
	return Quantiles{P50: rank(0.50), P99: rank(0.99), Max: xs[len(xs)-1]}
}

// WriteText prints the analysis as a table and a summary.
func (a *Analysis) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run of %s (plan %s): %s%s; stopped: %s\n", a.Source, a.Plan, plural.Of(a.Periods, "period"), a.byHyperepoch(), a.Stopped)
	fmt.Fprintln(tw, "runnable\tclient\tresource\truns\tskipped\tjitter p50\tp99\tmax\trun p50\tp99\tmax\tWCET\tran long\tlate starts\tallocating runs\t")
	for _, s := range a.Runnables {
		if s.Lost {
			fmt.Fprintf(tw, "%s\t%s\t%s\tlost\t-\t-\t-\t-\t-\t-\t-\t%s\t-\t-\t-\t\n", s.Name, s.Client, s.Resource, ns(s.WCET))
			continue
		}
		// A runnable that ran no frame has no jitter or run time to
		// show: a dash, not a 0 that reads as measured.
		q := func(v int64) string {
			if s.Runs == 0 {
				return "-"
			}
			return ns(v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t\n", s.Name, s.Client, s.Resource, s.Runs, s.Skipped,
			q(s.Jitter.P50), q(s.Jitter.P99), q(s.Jitter.Max), q(s.Time.P50), q(s.Time.P99), q(s.Time.Max), ns(s.WCET),
			s.OverrunsWCET, s.StartedLate, s.AllocRuns)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if slices.ContainsFunc(a.Runnables, func(s RunnableStats) bool { return s.Runs > 0 && !strings.HasPrefix(s.Resource, "gpu") }) {
		fmt.Fprintf(w, "start jitter over every CPU runnable: p50 %s, p99 %s, max %s\n", ns(a.Jitter.P50), ns(a.Jitter.P99), ns(a.Jitter.Max))
	} else {
		fmt.Fprintln(w, "start jitter over every CPU runnable: none ran")
	}
	fmt.Fprintf(w, "overruns: %d; skipped frames: %d; timeouts: %d\n", a.Overruns, a.Skipped, a.Timeouts)
	a.writeBlame(w)
	var abandoned []string
	for _, s := range a.Runnables {
		if s.Abandoned > 0 {
			abandoned = append(abandoned, fmt.Sprintf("%s %s", s.Name, plural.Of(int(s.Abandoned), "frame")))
		}
	}
	if len(abandoned) > 0 {
		fmt.Fprintf(w, "abandoned after the stop (their clients lagged far behind the plan and gave up the frames up to the stop's period, none run): %s\n", strings.Join(abandoned, ", "))
	}
	a.writeNoFrame(w)
	for _, c := range a.LostClients {
		var names []string
		for _, s := range a.Runnables {
			if s.Lost && s.Client == c {
				names = append(names, s.Name)
			}
		}
		fmt.Fprintf(w, "the records of client %s were lost (its process died or stopped answering before it sent them): %s show no figures, and the figures above leave them out\n", c, strings.Join(names, ", "))
	}
	if a.GCCycles == 0 {
		fmt.Fprintln(w, "garbage collection: none during the run")
	} else {
		fmt.Fprintf(w, "garbage collection: %s in %s, about %s of pauses\n", plural.Of(int(a.GCCycles), "cycle"), plural.Of(a.GCPeriods, "period"), ns(a.GCPauseNs))
	}
	if len(a.Allocating) > 0 {
		fmt.Fprintf(w, "allocating inside the loop (the collector will run and pause the process): %s\n", strings.Join(a.Allocating, ", "))
		fmt.Fprintln(w, "  (counted per process, so a runnable running beside one that allocates is counted too; the runtime publishes small allocations in batches, so counts are lower bounds; see docs/static-schedules.md on writing runnables that do not allocate)")
	}
	switch outside := a.clientsAllocatingOutsideRuns(); {
	case len(a.AllocatingClients) > 0 && !a.PerRun:
		fmt.Fprintf(w, "%s allocated inside the loop, in %s (the collector will run and pause them); run with allocation counts per run (pzrun stm run -allocs or pzrun stm master -allocs; static.WithAllocationCounts) to name the runnables\n", processesOf(a.AllocatingClients), plural.Of(a.AllocPeriods, "period"))
	case len(outside) > 0:
		fmt.Fprintf(w, "%s allocated inside the loop, outside the runs of their runnables (a GPU stream's work, another goroutine)\n", processesOf(outside))
	case len(a.Allocating) == 0 && len(a.AllocatingClients) == 0:
		fmt.Fprintf(w, "nothing allocated inside the loop (after the first %d periods, before the last)\n", WarmupPeriods)
	}
	for _, s := range a.Runnables {
		if s.Errors > 0 {
			fmt.Fprintf(w, "%s returned an error %s", s.Name, plural.Of(s.Errors, "time"))
			if s.FirstError != "" {
				fmt.Fprintf(w, "; the first, %s", firstLine(s.FirstError))
			}
			fmt.Fprintln(w)
		}
		if s.Timeouts > 0 {
			fmt.Fprintf(w, "%s ran past its timeout %s (its context was canceled)\n", s.Name, plural.Of(s.Timeouts, "time"))
		}
	}
	return nil
}

// writeBlame says which runnables ran long (their own bodies past their
// WCET), which started late and why (the predecessor each waited for
// and the root cause up the chain), and the late starts by root cause.
func (a *Analysis) writeBlame(w io.Writer) {
	var long []string
	for _, s := range a.Runnables {
		if s.OverrunsWCET > 0 {
			long = append(long, fmt.Sprintf("%s %s", s.Name, plural.Of(s.OverrunsWCET, "frame")))
		}
	}
	if len(long) > 0 {
		fmt.Fprintf(w, "ran long (past their WCET: their own bodies): %s\n", strings.Join(long, ", "))
	}
	if a.StartedLate == 0 {
		return
	}
	fmt.Fprintln(w, "started late (missed their deadline, which they would have met started on time), by what they waited for:")
	for _, s := range a.Runnables {
		for _, c := range s.LateCauses {
			// A runnable alone on its resource, or the first on it,
			// waits for its own run in the frame before ("waited for
			// grab" read as a runnable waiting for itself).
			waited := c.WaitedFor
			if waited == s.Name {
				waited = "its own run in the frame before"
			}
			var why string
			switch {
			case c.WaitedFor == "":
				why = "no predecessor ended late: its thread started it late (a loaded machine, the clock)"
			case c.WaitedFor == c.Root && c.RootCause == CauseRanLong:
				why = fmt.Sprintf("waited for %s, which ran long", waited)
			case c.WaitedFor == c.Root:
				why = fmt.Sprintf("waited for %s, which its thread started late", waited)
			default:
				why = fmt.Sprintf("waited for %s; root cause: %s", waited, rootText(c.Root, c.RootCause))
			}
			fmt.Fprintf(w, "  %s %s: %s\n", s.Name, plural.Of(c.Frames, "frame"), why)
		}
	}
	roots := make([]string, len(a.LateRoots))
	for i, r := range a.LateRoots {
		roots[i] = fmt.Sprintf("%s (%s)", rootText(r.Root, r.RootCause), plural.Of(r.Frames, "frame"))
	}
	fmt.Fprintf(w, "late starts by root cause: %s\n", strings.Join(roots, ", "))
}

// rootText says a root cause: "grab ran long", "grab's thread started
// late".
func rootText(name, cause string) string {
	if cause == CauseRanLong {
		return name + " ran long"
	}
	return name + "'s thread started late"
}

// writeNoFrame names the runnables that neither ran nor skipped a frame
// (NoFrame), apart by why: every frame abandoned after a stop, or the
// run ended before their first.
func (a *Analysis) writeNoFrame(w io.Writer) {
	var gaveUp, before []string
	for _, s := range a.Runnables {
		switch {
		case !slices.Contains(a.NoFrame, s.Name):
		case s.Abandoned > 0:
			gaveUp = append(gaveUp, s.Name)
		default:
			before = append(before, s.Name)
		}
	}
	if len(gaveUp) > 0 {
		fmt.Fprintf(w, "no frame run or skipped (each one's thread reached its first period far behind the plan after the stop had come - a thread started late on a loaded machine - and abandoned every frame up to the stop's period): %s\n", strings.Join(gaveUp, ", "))
	}
	if len(before) > 0 {
		fmt.Fprintf(w, "no frame run or skipped (the run ended before their first frame): %s\n", strings.Join(before, ", "))
	}
}

// clientsAllocatingOutsideRuns lists, with allocation counts per run,
// the allocating clients (AllocatingClients) none of whose runnables is
// named as allocating (Allocating): their process allocated outside the
// runs.
func (a *Analysis) clientsAllocatingOutsideRuns() []string {
	if !a.PerRun {
		return nil
	}
	inRuns := map[string]bool{}
	for _, s := range a.Runnables {
		if slices.Contains(a.Allocating, s.Name) {
			inRuns[s.Client] = true
		}
	}
	var out []string
	for _, c := range a.AllocatingClients {
		if !inRuns[c] {
			out = append(out, c)
		}
	}
	return out
}

// WriteJSON writes the analysis as JSON lines: one object per runnable
// ("type":"runnable") and a summary ("type":"summary").
func (a *Analysis) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, s := range a.Runnables {
		if err := enc.Encode(struct {
			Type string `json:"type"`
			RunnableStats
		}{"runnable", s}); err != nil {
			return err
		}
	}
	sum := *a
	sum.Runnables = nil
	return enc.Encode(struct {
		Type string `json:"type"`
		*Analysis
	}{"summary", &sum})
}

func ns(v int64) string {
	d := time.Duration(v)
	switch {
	case d == 0:
		return "0"
	case d < 0:
		return "-" + ns(-v)
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", v)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// WriteRunSVG draws the first periods of a run, each resource's planned
// row above its actual row, from the first recorded period to at most
// periods later.
func WriteRunSVG(w io.Writer, r *Run, periods int) error {
	var longest int64
	for _, h := range r.Hyperepochs {
		longest = max(longest, h.Period)
	}
	var first int64 = -1
	for _, rr := range r.Runnables {
		if len(rr.Planned) > 0 && (first < 0 || rr.Planned[0] < first) {
			first = rr.Planned[0]
		}
	}
	if first < 0 {
		return fmt.Errorf("static: the run recorded no frames")
	}
	from := time.Duration(first / max(longest, 1) * longest)
	to := from + time.Duration(int64(max(periods, 1))*longest)
	c := gantt.Chart{From: from, To: to, Noun: "runnable", Critical: false, LabelBeside: true,
		LegendTitle: "runnable: runs planned and runs that ran in the chart, with their time in it; an actual bar is under its planned one, in its colour; a name right of a bar too narrow for it is that bar's"}
	var resources []string
	for _, rr := range r.Runnables {
		if !slices.Contains(resources, rr.Resource) {
			resources = append(resources, rr.Resource)
		}
	}
	// In the numbers' order: cpu2 above cpu10 (sorted as strings, a
	// 16-CPU run put cpu10..cpu15 between cpu1 and cpu2).
	slices.SortFunc(resources, naturalCompare)
	row := map[string]int{}
	for _, res := range resources {
		row[res] = len(c.Rows)
		c.Rows = append(c.Rows, gantt.Row{Label: res + " planned"}, gantt.Row{Label: res + " actual"})
	}
	id := uint64(0)
	for _, rr := range r.Runnables {
		for i := range rr.Seq {
			if time.Duration(rr.Planned[i]) >= to || time.Duration(rr.End[i]) < from && time.Duration(rr.Planned[i]) < from {
				continue
			}
			id++
			p := time.Duration(rr.Planned[i])
			c.Bars = append(c.Bars, gantt.Bar{Row: row[rr.Resource], ID: id, Name: rr.Name, Start: p, End: p + time.Duration(rr.WCET)})
			if rr.Flags[i]&FlagSkipped != 0 {
				continue
			}
			id++
			c.Bars = append(c.Bars, gantt.Bar{Row: row[rr.Resource] + 1, ID: id, Name: rr.Name, Start: time.Duration(rr.Start[i]), End: max(time.Duration(rr.End[i]), time.Duration(rr.Start[i])+1)})
			if rr.Flags[i]&(FlagOverrunWCET|FlagOverrunDeadline) != 0 {
				c.Bands = append(c.Bands, gantt.Band{Row: row[rr.Resource] + 1, Name: "overran", Start: time.Duration(rr.Start[i]), End: time.Duration(rr.End[i]), Color: "#d32f2f"})
			}
		}
	}
	c.Legend = runLegend(c.Bars, from, to)
	c.BandKind = "frame"
	c.Title = fmt.Sprintf("run of %s (plan %s): periods %d to %d, planned and actual", r.Source, r.Plan, int64(from)/max(longest, 1), int64(to)/max(longest, 1)-1)
	c.Title += lostNote(r)
	c.Axis = fmt.Sprintf("time since the start of period %d", int64(from)/max(longest, 1))
	return gantt.Write(w, c)
}

// runLegend is the run chart's legend text by runnable: its runs
// planned and those that ran, each with its time inside [from, to).
// The chart's default legend counted bars, a planned and an actual one
// a run (5 periods read "10 runs"). It counts the bars that the chart
// draws (gantt leaves out those outside the range: a late frame's run
// after the last period); a planned bar's row is even, an actual one's
// the odd row under it.
func runLegend(bars []gantt.Bar, from, to time.Duration) map[string]string {
	type tally struct {
		planned, ran         int
		plannedTime, ranTime time.Duration
	}
	tallies := map[string]*tally{}
	var names []string
	for _, b := range bars {
		if b.Start >= to || b.End < from || b.End == from && b.Start < b.End {
			continue // not drawn
		}
		tl := tallies[b.Name]
		if tl == nil {
			tl = &tally{}
			tallies[b.Name] = tl
			names = append(names, b.Name)
		}
		in := max(min(b.End, to)-max(b.Start, from), 0)
		if b.Row%2 == 0 {
			tl.planned++
			tl.plannedTime += in
		} else {
			tl.ran++
			tl.ranTime += in
		}
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		tl := tallies[name]
		out[name] = fmt.Sprintf("%d planned (%s), %d ran (%s)", tl.planned, ns(int64(tl.plannedTime)), tl.ran, ns(int64(tl.ranTime)))
	}
	return out
}

// lostNote says, for the chart's title, which runnables it cannot draw:
// those of clients whose records were lost (a process killed mid-run)
// have no rows, hence neither planned nor actual bars, and their planned
// rows would otherwise read as idle. At most four are named, to keep
// the title on the picture.
func lostNote(r *Run) string {
	var names, clients []string
	for _, rr := range r.Runnables {
		if !rr.Lost {
			continue
		}
		names = append(names, rr.Name)
		if !slices.Contains(clients, rr.Client) {
			clients = append(clients, rr.Client)
		}
	}
	if len(names) == 0 {
		return ""
	}
	const most = 4
	list := strings.Join(names[:min(len(names), most)], ", ")
	if len(names) > most {
		list += fmt.Sprintf(" and %d more", len(names)-most)
	}
	who := "client " + clients[0]
	if len(clients) > 1 {
		who = "clients " + strings.Join(clients, ", ")
	}
	return fmt.Sprintf("; not drawn (the records of %s were lost): %s", who, list)
}

// naturalCompare orders a and b as strings, except that runs of digits
// compare as numbers: "cpu2" < "cpu10" < "gpu0.stream0".
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := leadingDigits(a), leadingDigits(b)
		if da == "" || db == "" {
			if c := cmp.Compare(a[0], b[0]); c != 0 {
				return c
			}
			a, b = a[1:], b[1:]
			continue
		}
		na, nb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
		if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb), cmp.Compare(len(da), len(db))); c != 0 {
			return c
		}
		a, b = a[len(da):], b[len(db):]
	}
	return cmp.Compare(len(a), len(b))
}

// leadingDigits returns the ASCII digits s begins with.
func leadingDigits(s string) string {
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// WriteRunTrace writes the run in the Trace Event Format that Perfetto
// opens: a process per client, a thread per resource, a slice per run.
func WriteRunTrace(w io.Writer, r *Run) error {
	tw := chrometrace.NewWriter(w)
	emit := tw.Emit
	pid := map[string]int{}
	for i, c := range r.Clients {
		pid[c.Name] = i + 1
		if err := emit(chrometrace.ProcessName(i+1, "client "+c.Name)); err != nil {
			return err
		}
	}
	tid := map[string]int{}
	for _, rr := range r.Runnables {
		key := rr.Client + "/" + rr.Resource
		if _, ok := tid[key]; !ok {
			tid[key] = len(tid) + 1
			if err := emit(chrometrace.ThreadName(pid[rr.Client], tid[key], rr.Resource)); err != nil {
				return err
			}
		}
		for i := range rr.Seq {
			if rr.Flags[i]&FlagSkipped != 0 {
				continue
			}
			args := map[string]any{"frame": rr.Seq[i], "planned_us": float64(rr.Planned[i]) / 1e3, "late_us": float64(rr.Start[i]-rr.Planned[i]) / 1e3}
			if f := rr.Flags[i]; f != 0 {
				args["flags"] = f
			}
			if err := emit(chrometrace.Event{Name: rr.Name, Cat: "runnable", Ph: "X", Ts: float64(rr.Start[i]) / 1e3, Dur: float64(rr.End[i]-rr.Start[i]) / 1e3,
				Pid: pid[rr.Client], Tid: tid[key], Args: args}); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// firstLine is s up to its first newline (a panic's message carries its
// stack on the lines after).
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// processesOf names the processes of the clients: "the process of
// client sensor", "the processes of clients sensor, fusion".
func processesOf(clients []string) string {
	if len(clients) == 1 {
		return "the process of client " + clients[0]
	}
	return "the processes of clients " + strings.Join(clients, ", ")
}

// byHyperepoch is " (main 2994, slow 998)" for a run of several
// hyperepochs, whose periods count apart, else "".
func (a *Analysis) byHyperepoch() string {
	if len(a.HyperepochPeriods) < 2 {
		return ""
	}
	parts := make([]string, len(a.HyperepochPeriods))
	for i, h := range a.HyperepochPeriods {
		parts[i] = fmt.Sprintf("%s %d", h.Name, h.Periods)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
