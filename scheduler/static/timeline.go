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
// resource's load over the period.
func WriteTimeline(w io.Writer, p *Plan) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "schedule %s (plan %s)\n", p.Source, p.Hash)
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

// WriteSVG draws the plan as a Gantt chart: a row per resource over one
// period of the longest hyperepoch, a bar per runnable run, a strip under
// each bar up to its deadline (its slack). A shorter hyperepoch's period
// is repeated over the chart, as it runs: a 5 ms hyperepoch shows four
// periods in a 20 ms chart (the last one cut at the chart's end when its
// period does not divide the longest).
func WriteSVG(w io.Writer, p *Plan) error {
	c := gantt.Chart{BandKind: "slack", LegendTitle: "runnable: runs in the chart, planned time"}
	var span time.Duration
	for _, h := range p.Hyperepochs {
		span = max(span, h.Period)
	}
	repeated := false
	id := uint64(0)
	for _, h := range p.Hyperepochs {
		row := map[string]int{}
		for _, r := range h.Resources {
			row[r.Name] = len(c.Rows)
			c.Rows = append(c.Rows, gantt.Row{Label: r.Name})
		}
		for pstart := time.Duration(0); pstart < span && h.Period > 0; pstart += h.Period {
			repeated = repeated || pstart > 0
			for _, e := range h.Epochs {
				ids := map[string]uint64{}
				for f := 0; f < e.Frames; f++ {
					base := pstart + e.Offset + time.Duration(f)*e.Period
					for _, r := range e.Runnables {
						id++
						ids[r.Name] = id
					}
					for _, r := range e.Runnables {
						var deps []uint64
						for _, d := range r.Deps {
							deps = append(deps, ids[d])
						}
						if r.Submitter != "" {
							deps = append(deps, ids[r.Submitter])
						}
						c.Bars = append(c.Bars, gantt.Bar{Row: row[r.Resource], ID: ids[r.Name], Name: r.Name, Start: base + r.Start, End: base + r.End(), Deps: deps})
						if r.Slack > 0 {
							c.Bands = append(c.Bands, gantt.Band{Row: row[r.Resource], Name: "to deadline", Start: base + r.End(), End: base + r.Deadline(), Color: "#9e9e9e"})
						}
					}
				}
			}
		}
	}
	c.From, c.To = 0, span
	c.Critical = true
	what := "planned period"
	if repeated {
		what = "planned longest period"
	}
	c.Title = fmt.Sprintf("%s: %s of %s (plan %s)", p.Source, what, fmtDur(span), p.Hash)
	return gantt.Write(w, c)
}
