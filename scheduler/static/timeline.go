package static

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pzgo/pz/scheduler/internal/gantt"
)

// WriteTimeline prints the plan as text: per hyperepoch and epoch, every
// runnable's start, end, deadline and slack on its resource, then each
// resource's load over the period. A hyperepoch shorter than the longest
// also gets its load over the longest period, the span that WriteSVG
// draws, as the chart's busy column and legend count it (its last
// period cut at the chart's end where the periods do not divide).
func WriteTimeline(w io.Writer, p *Plan) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "schedule %s (plan %s)\n", p.Source, p.Hash)
	span := chartSpan(p)
	inChart := map[string]time.Duration{}
	for _, r := range chartRuns(p, span) {
		inChart[r.resource] += r.end - r.start
	}
	for _, h := range p.Hyperepochs {
		var names []string
		for _, r := range h.Resources {
			names = append(names, r.Name)
		}
		fmt.Fprintf(tw, "\nhyperepoch %s: period %s on %s\n", h.Name, fmtDur(h.Period), strings.Join(names, ", "))
		busy := map[string]time.Duration{}
		for _, e := range h.Epochs {
			fmt.Fprintf(tw, "  epoch %s: %d frame(s) of %s from %s\n", e.Name, e.Frames, fmtDur(e.Period), fmtDur(e.Offset))
			fmt.Fprintln(tw, "    start\tend\tdeadline\tslack\tresource\tclient\trunnable")
			for _, r := range e.Runnables {
				extra := ""
				if r.Submitter != "" {
					extra = " (submitted by " + r.Submitter + ")"
				}
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s%s\n", fmtDur(r.Start), fmtDur(r.End()), fmtDur(r.Deadline()), fmtDur(r.Slack), r.Resource, r.Client, r.Name, extra)
				busy[r.Resource] += time.Duration(e.Frames) * r.WCET
			}
		}
		fmt.Fprintln(tw, "  load over the period:")
		for _, r := range h.Resources {
			fmt.Fprintf(tw, "    %s\t%s\t%.0f%%\n", r.Name, fmtDur(busy[r.Name]), 100*float64(busy[r.Name])/float64(h.Period))
		}
		if h.Period != span && h.Period > 0 {
			cut := ""
			if span%h.Period != 0 {
				cut = ", the last one cut at its end"
			}
			fmt.Fprintf(tw, "  load over the %s of the -svg chart (%.4g periods%s), as its busy column shows it:\n", fmtDur(span), float64(span)/float64(h.Period), cut)
			for _, r := range h.Resources {
				fmt.Fprintf(tw, "    %s\t%s\t%.1f%%\n", r.Name, fmtDur(inChart[r.Name]), 100*float64(inChart[r.Name])/float64(span))
			}
		}
	}
	return tw.Flush()
}

// fmtDur prints a duration compactly: 0, 250µs, 1.5ms.
func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}

// chartSpan is the span of the plan's chart: the longest period.
func chartSpan(p *Plan) time.Duration {
	var span time.Duration
	for _, h := range p.Hyperepochs {
		span = max(span, h.Period)
	}
	return span
}

// chartRun is one run of a runnable in the plan's chart, cut at the
// chart's end.
type chartRun struct {
	hyper, period int // the hyperepoch's index, the period's number in the chart
	epoch         *PlanEpoch
	frame         int
	r             *PlanRunnable
	resource      string
	// start and end are the run's, end cut at the chart's end;
	// deadline too.
	start, end, deadline time.Duration
	cut                  bool // the run goes on past the chart's end
}

// chartRuns lists the runs of every runnable over [0, span): each
// hyperepoch's period repeated as it runs, a run that starts at or after
// span left out, one that ends after it cut there. WriteSVG draws them
// and WriteTimeline sums them, so that both count the same.
func chartRuns(p *Plan, span time.Duration) []chartRun {
	var out []chartRun
	for hi := range p.Hyperepochs {
		h := &p.Hyperepochs[hi]
		if h.Period <= 0 {
			continue
		}
		k := 0
		for pstart := time.Duration(0); pstart < span; pstart += h.Period {
			for ei := range h.Epochs {
				e := &h.Epochs[ei]
				for f := 0; f < e.Frames; f++ {
					base := pstart + e.Offset + time.Duration(f)*e.Period
					if base >= span {
						break
					}
					for ri := range e.Runnables {
						r := &e.Runnables[ri]
						start := base + r.Start
						if start >= span {
							continue
						}
						end := base + r.End()
						out = append(out, chartRun{hyper: hi, period: k, epoch: e, frame: f, r: r, resource: r.Resource,
							start: start, end: min(end, span), deadline: min(base+r.Deadline(), span), cut: end > span})
					}
				}
			}
			k++
			if pstart > span-h.Period { // the next would overflow or start past the end
				break
			}
		}
	}
	return out
}

// WriteSVG draws the plan as a Gantt chart: a row per resource over one
// period of the longest hyperepoch, a bar per runnable run in its legend
// colour, a strip under each bar up to its deadline (its slack). A shorter hyperepoch's period
// is repeated over the chart, as it runs: a 5 ms hyperepoch shows four
// periods in a 20 ms chart. Where a period does not divide the longest,
// the last repetition is cut at the chart's end: a run that would start
// after it is not drawn, one that would end after it is drawn up to it;
// the busy column and the legend count what is drawn, as the text
// timeline's load over the chart does.
func WriteSVG(w io.Writer, p *Plan) error {
	c := gantt.Chart{BandKind: "slack", Noun: "runnable", LabelBeside: true, Axis: "time since the period's start", LegendTitle: "runnable: runs drawn in the chart (one cut at its end counts), planned time inside the chart"}
	span := chartSpan(p)
	repeated, cut := false, false
	rowOf := map[string]int{}
	for _, h := range p.Hyperepochs {
		if h.Period > 0 && h.Period < span {
			repeated = true
			cut = cut || span%h.Period != 0
		}
		for _, r := range h.Resources {
			rowOf[r.Name] = len(c.Rows)
			c.Rows = append(c.Rows, gantt.Row{Label: r.Name})
		}
	}
	type frameKey struct {
		hyper, period int
		epoch         *PlanEpoch
		frame         int
	}
	// A run's ID is its index + 1; deps are looked up in its frame.
	ids := map[frameKey]map[string]uint64{}
	runs := chartRuns(p, span)
	for i, r := range runs {
		k := frameKey{r.hyper, r.period, r.epoch, r.frame}
		if ids[k] == nil {
			ids[k] = map[string]uint64{}
		}
		ids[k][r.r.Name] = uint64(i + 1)
	}
	for i, r := range runs {
		id := uint64(i + 1)
		k := frameKey{r.hyper, r.period, r.epoch, r.frame}
		var deps []uint64
		for _, d := range r.r.Deps {
			if i, ok := ids[k][d]; ok {
				deps = append(deps, i)
			}
		}
		if r.r.Submitter != "" {
			if i, ok := ids[k][r.r.Submitter]; ok {
				deps = append(deps, i)
			}
		}
		c.Bars = append(c.Bars, gantt.Bar{Row: rowOf[r.resource], ID: id, Name: r.r.Name, Start: r.start, End: r.end, Deps: deps})
		if r.deadline > r.end {
			c.Bands = append(c.Bands, gantt.Band{Row: rowOf[r.resource], Name: "to deadline", Start: r.end, End: r.deadline, Color: "#9e9e9e"})
		}
	}
	c.From, c.To = 0, span
	// No critical path: it would outline one frame's longest chain and
	// pale every other bar, although every frame repeats that chain; the
	// strips to the deadlines show what is tight, and every bar keeps its
	// legend colour.
	what := "planned period"
	if repeated {
		what = "planned longest period"
	}
	c.Title = fmt.Sprintf("%s: %s of %s (plan %s)", p.Source, what, fmtDur(span), p.Hash)
	if cut {
		c.Title += "; shorter periods repeated, the last cut at the end"
	}
	return gantt.Write(w, c)
}
