// Package gantt draws Gantt charts of task runs as SVG.
//
// A Chart is plain data: rows (one per worker), bars (one per task run on
// a row, with the task's id, name, start, end and predecessors) and
// optional bands under the rows (which scheduling context each worker was
// in). Write draws it: each bar filled with its name's colour (Colors),
// idle time hatched, each row's utilization beside it, a time axis with
// ticks at round values, a legend of every name with its runs (a team
// task once, with its number of workers) and busy time, and on demand the
// critical path (CriticalPath) outlined.
//
// The package knows nothing of the scheduler; scheduler/gantt.go converts
// the scheduler's trace into a Chart.
package gantt

import (
	"bufio"
	"cmp"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// A Chart is what Write draws. Write does not modify it.
type Chart struct {
	// Title is the first line above the chart; empty means a summary
	// (tasks, workers, span).
	Title string
	// Rows are the chart's rows, top to bottom.
	Rows []Row
	// Bars are the task runs. A bar whose Row is not an index of Rows is
	// not drawn. A task run by a team has one bar per member, all with
	// the task's ID.
	Bars []Bar
	// Bands are drawn as thin strips under the rows' bars, with a mark
	// where a row's band changes; nil draws none.
	Bands []Band
	// Critical outlines the bars on the critical path (CriticalPath) and
	// joins them, dimming the others.
	Critical bool
	// Width is the width of the time area in pixels; 0 means 1200.
	Width float64
	// From and To fix the drawn time range when To > From; otherwise it
	// spans the bars.
	From, To time.Duration
	// BandKind is the word before a band's name in the legend and its
	// tooltip; "" means "context".
	BandKind string
	// LegendTitle heads the legend; "" means "codelet: runs, busy time".
	LegendTitle string
	// Noun is what a bar runs, in the titles and under the axis
	// ("critical path: 4 runnables", "time since the first runnable");
	// "" means "task".
	Noun string
	// Axis is the label under the time axis; "" means "time since the
	// first " and Noun.
	Axis string
	// FirstIDs gives, by bar name, the ID of its first task, for the
	// colours (Colors): a name whose tasks have no bar keeps its turn.
	FirstIDs map[string]uint64
	// Legend gives, by bar name, the legend's text after "name: " in
	// place of its runs and busy time: where a run has several bars on
	// rows that are not a team (pzrun stm analyze -svg: a planned bar
	// and an actual one), the counts of bars would read as twice the
	// runs. A name not in it keeps its runs and busy time.
	Legend map[string]string
	// LabelBeside labels a bar too narrow for its name just right of
	// it, where the name fits before the next bar on its row and the
	// chart's end and no other bar of the row covers that space; false
	// labels bars only inside.
	LabelBeside bool
}

// A Row is one row of the chart: a worker, or a transfer track.
type Row struct {
	// Label is drawn left of the row, e.g. "cpu3".
	Label string
	// Track marks a row that is not a worker but a transfer track (copies
	// between memory nodes, a rank's messages): its bars are copies,
	// counted apart in the summary and never on the critical path.
	Track bool
	// Noun is what a track's bars are, in the title's count ("56
	// sends"); "" means "copy".
	Noun string
}

// A Bar is one run of a task on a row.
type Bar struct {
	// Row is the index in Chart.Rows.
	Row int
	// ID identifies the task; a team task's bars share it.
	ID uint64
	// Name is the task's kind (its codelet's name); it picks the colour
	// (Colors).
	Name string
	// Start and End are the run's times, from any common origin.
	Start, End time.Duration
	// Deps are the IDs of the task's predecessors. IDs with no bar are
	// ignored.
	Deps []uint64
	// Err is the first line of the task's error, "" when it succeeded:
	// a failed task's bar is outlined in red, with the error in its
	// tooltip (on the critical path, around the path's black outline).
	Err string
	// Label, when set, stands in the tooltip for "#ID": a merged chart's
	// IDs encode the rank, and say nothing to a reader, so it names the
	// task's number in its rank's trace and the rank instead.
	Label string
}

// failedColor outlines a failed task's bar.
const failedColor = "#d62728"

// A Band is a period during which a row was in some state, such as a
// scheduling context.
type Band struct {
	// Row is the index in Chart.Rows.
	Row int
	// Name is the state's name, e.g. the context's; the legend lists it
	// as "context Name".
	Name string
	// Start and End are the period, on the bars' time origin; the part
	// outside the bars' time range is not drawn.
	Start, End time.Duration
	// Color is the band's colour; empty means BandColor(Name).
	Color string
}

// Layout, in pixels. Text widths are estimated at charW per character
// of an 11 px sans-serif font (DejaVu Sans, the widest common default,
// averages 0.6 em).
const (
	defaultWidth = 1200.0
	barH         = 16.0 // a bar's height
	bandH        = 4.0  // a context band's height, under the bar
	rowGap       = 4.0  // space between rows
	charW        = 6.6
	fontSize     = 11
	swatch       = 12.0 // legend swatch size
	legendLine   = 18.0 // legend line height
	margin       = 10.0
)

// Write draws c as a standalone SVG document to w. Its cost is linear
// in the number of bars, plus sorting.
func Write(w io.Writer, c Chart) error {
	d := newDrawing(c)
	bw := bufio.NewWriter(w)
	d.write(bw)
	return bw.Flush()
}

// drawing is a Chart laid out: the time range, scales and positions of
// every part.
type drawing struct {
	Chart
	t0, t1        time.Duration
	span          float64 // t1-t0 in ns, > 0
	width         float64 // of the time area
	left, top     float64 // of the time area
	rowH          float64
	axisY         float64 // the time axis's line
	legendY       float64 // the first legend line's baseline
	legend        []legendEntry
	legendCols    int
	legendLines   int
	legendColW    float64
	failed        bool // some bar is a failed task's (the legend says what its outline means)
	contexts      []string
	height, total float64 // of the document
	critical      map[uint64]bool
	path          []uint64
	pathWork      time.Duration     // the critical path's summed durations
	colors        map[string]string // each bar name's fill (Colors)
}

// legendEntry is one codelet name, its runs, the sizes of their teams
// and their busy time (of every worker).
type legendEntry struct {
	name  string
	count int // runs: a team task's bars count once
	// minTeam and maxTeam are the least and most workers of a run (1
	// for a task run by one worker, or a copy).
	minTeam, maxTeam int
	busy             time.Duration
	// custom, when set, replaces the runs and busy time (Chart.Legend).
	custom string
}

// text is the entry's line: "gemm: 3 runs, 12.0 ms", and for team
// tasks "team: 1 run (2 workers), 8.0 ms", "team: 3 runs (2 workers
// each), ...", "team: 3 runs (1–4 workers), ...".
func (e legendEntry) text() string {
	if e.custom != "" {
		return e.name + ": " + e.custom
	}
	team := ""
	switch {
	case e.maxTeam <= 1:
	case e.minTeam != e.maxTeam:
		team = fmt.Sprintf(" (%d–%d workers)", e.minTeam, e.maxTeam)
	case e.count == 1:
		team = fmt.Sprintf(" (%d workers)", e.maxTeam)
	default:
		team = fmt.Sprintf(" (%d workers each)", e.maxTeam)
	}
	return fmt.Sprintf("%s: %s%s, %s", e.name, count(e.count, "run"), team, formatDuration(e.busy))
}

// legendEntries returns the legend's entries, by name: a task's runs on
// worker rows count once however many workers (a team) ran it; each
// bar of a track row (a copy) is one run. The busy time is inside
// [t0, t1]; on a track row, where a name's bars overlap (copies queued
// together, receives posted long before their data come), it is the
// time covered, counted once, as the row's busy column counts it.
func legendEntries(rows []Row, bars []Bar, t0, t1 time.Duration) []legendEntry {
	type key struct {
		name string
		id   uint64
	}
	type track struct {
		name string
		row  int
	}
	team := map[key]int{} // workers per task
	byName := map[string]*legendEntry{}
	onTrack := map[track][]Bar{}
	for _, b := range bars {
		e := byName[b.Name]
		if e == nil {
			e = &legendEntry{name: b.Name}
			byName[b.Name] = e
		}
		if rows[b.Row].Track {
			onTrack[track{b.Name, b.Row}] = append(onTrack[track{b.Name, b.Row}], b)
			e.count++
			e.minTeam = max(e.minTeam, 1)
			e.maxTeam = max(e.maxTeam, 1)
			continue
		}
		e.busy += max(min(b.End, t1)-max(b.Start, t0), 0)
		team[key{b.Name, b.ID}]++
	}
	for k, v := range onTrack {
		byName[k.name].busy += covered(v, t0, t1)
	}
	for k, n := range team {
		e := byName[k.name]
		e.count++
		if e.minTeam == 0 || n < e.minTeam {
			e.minTeam = n
		}
		e.maxTeam = max(e.maxTeam, n)
	}
	out := make([]legendEntry, 0, len(byName))
	for _, e := range byName {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b legendEntry) int { return strings.Compare(a.name, b.name) })
	return out
}

func newDrawing(c Chart) *drawing {
	d := &drawing{Chart: c, width: c.Width}
	if d.width <= 0 {
		d.width = defaultWidth
	}
	d.Bars = slices.DeleteFunc(slices.Clone(c.Bars), func(b Bar) bool { return b.Row < 0 || b.Row >= len(c.Rows) })
	d.Bands = slices.DeleteFunc(slices.Clone(c.Bands), func(b Band) bool { return b.Row < 0 || b.Row >= len(c.Rows) })
	for i, b := range d.Bars {
		if i == 0 || b.Start < d.t0 {
			d.t0 = b.Start
		}
		d.t1 = max(d.t1, b.End)
	}
	for _, b := range d.Bands {
		d.t1 = max(d.t1, b.End)
	}
	if len(d.Bars) == 0 && len(d.Bands) > 0 {
		d.t0 = d.Bands[0].Start
		for _, b := range d.Bands {
			d.t0 = min(d.t0, b.Start)
		}
	}
	if c.To > c.From {
		d.t0, d.t1 = c.From, c.To
		// Bars outside the fixed range are not in the chart: not
		// drawn past the axis, not counted in the title or legend.
		d.Bars = slices.DeleteFunc(d.Bars, func(b Bar) bool {
			return b.Start >= d.t1 || b.End < d.t0 || b.End == d.t0 && b.Start < b.End
		})
	}
	if d.BandKind == "" {
		d.BandKind = "context"
	}
	if d.LegendTitle == "" {
		d.LegendTitle = "codelet: runs, busy time"
	}
	d.span = max(float64(d.t1-d.t0), 1)

	labelW := 0.0
	for _, r := range d.Rows {
		labelW = max(labelW, textWidth(r.Label))
	}
	d.left = margin + labelW + 8
	d.top = margin + 2*legendLine + 4
	d.rowH = barH + rowGap
	if len(d.Bands) > 0 {
		d.rowH += bandH + 1
	}
	d.axisY = d.top + d.rowH*float64(len(d.Rows)) + 2
	d.total = d.left + d.width + 8 + textWidth("100.0%") + margin

	d.legend = legendEntries(d.Rows, d.Bars, d.t0, d.t1)
	for i := range d.legend {
		d.legend[i].custom = d.Legend[d.legend[i].name]
	}
	d.colors = Colors(d.Bars, d.FirstIDs)
	for _, b := range d.Bands {
		if min(b.End, d.t1) > max(b.Start, d.t0) && !slices.Contains(d.contexts, b.Name) { // drawn
			d.contexts = append(d.contexts, b.Name)
		}
	}
	slices.Sort(d.contexts)

	// The legend: codelets in columns as wide as the widest entry, then
	// the idle swatch, the critical path's and the bands'.
	colW := textWidth("idle") + swatch + 24
	for _, e := range d.legend {
		colW = max(colW, swatch+6+textWidth(e.text())+24)
	}
	for _, n := range d.contexts {
		colW = max(colW, swatch+6+textWidth(d.BandKind+" "+n)+24)
	}
	d.legendColW = colW
	d.total = max(d.total, 2*margin+colW) // room for one column of the longest name
	d.legendCols = max(1, int((d.total-2*margin)/colW))
	d.legendY = d.axisY + 44 + legendLine
	n := len(d.legend) + 1 + len(d.contexts) // +1: idle
	if d.Critical {
		n++
	}
	for _, b := range d.Bars {
		if b.Err != "" {
			d.failed = true
			n++
			break
		}
	}
	d.legendLines = (n + d.legendCols - 1) / d.legendCols
	d.height = d.legendY + legendLine*float64(d.legendLines) + margin

	if d.Critical {
		d.path = CriticalPath(d.workBars())
		d.critical = make(map[uint64]bool, len(d.path))
		for _, id := range d.path {
			d.critical[id] = true
		}
		runs := tasks(d.Bars)
		for _, id := range d.path {
			t := runs[id]
			d.pathWork += t.end - t.start
		}
	}
	return d
}

// x returns the abscissa of time t.
func (d *drawing) x(t time.Duration) float64 {
	return d.left + d.width*float64(t-d.t0)/d.span
}

// rowY returns the top of row r.
func (d *drawing) rowY(r int) float64 { return d.top + d.rowH*float64(r) }

func (d *drawing) write(w *bufio.Writer) {
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="DejaVu Sans, Verdana, sans-serif" font-size="%d">`+"\n",
		d.total, d.height, d.total, d.height, fontSize)
	// Idle time is the hatched row background that the bars leave
	// uncovered.
	fmt.Fprint(w, `<defs><pattern id="pz-gantt-idle" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">`+
		`<rect width="6" height="6" fill="#ffffff"/><line x1="0" y1="0" x2="0" y2="6" stroke="#bdbdbd" stroke-width="2"/></pattern></defs>`+"\n")
	fmt.Fprintf(w, `<rect width="%.0f" height="%.0f" fill="#ffffff"/>`+"\n", d.total, d.height)
	d.writeTitle(w)
	d.writeAxis(w)
	d.writeRows(w)
	d.writeBars(w)
	d.writeBands(w)
	if d.Critical {
		d.writeCriticalEdges(w)
	}
	d.writeLegend(w)
	fmt.Fprintln(w, "</svg>")
}

func (d *drawing) writeTitle(w *bufio.Writer) {
	title := d.Title
	if title == "" {
		workers := 0
		for _, r := range d.Rows {
			if !r.Track {
				workers++
			}
		}
		span := formatDuration(d.t1 - d.t0)
		if d.t1 == d.t0 {
			span = "0 s" // formatDuration's "0" is an axis tick's label
		}
		title = fmt.Sprintf("%s on %s, %s", count(len(tasks(d.workBars())), d.noun()), count(workers, "worker"), span)
		// Track bars by their rows' nouns, in the rows' order: "; 161
		// copies, 56 receives, 56 sends" (a message is a send on one
		// rank and a receive on another, not two copies).
		var nouns []string
		perNoun := map[string]int{}
		for _, b := range d.Bars {
			if r := d.Rows[b.Row]; r.Track {
				perNoun[cmp.Or(r.Noun, "copy")]++
			}
		}
		for _, r := range d.Rows {
			if n := cmp.Or(r.Noun, "copy"); r.Track && perNoun[n] > 0 && !slices.Contains(nouns, n) {
				nouns = append(nouns, n)
			}
		}
		for i, n := range nouns {
			sep := ", "
			if i == 0 {
				sep = "; "
			}
			title += sep + count(perNoun[n], n)
		}
	}
	fmt.Fprintf(w, `<text x="%.0f" y="%.0f" font-size="13" font-weight="bold">%s</text>`+"\n", margin, margin+12, esc(title))
	sub := "hatched: idle; right: busy time / span"
	if d.Critical {
		sub = fmt.Sprintf("critical path (outlined): %s, %s of work, %.0f%% of the span; ", count(len(d.path), d.noun()), formatDuration(d.pathWork), 100*float64(d.pathWork)/d.span) + sub
	}
	fmt.Fprintf(w, `<text x="%.0f" y="%.0f" fill="#444444">%s</text>`+"\n", margin, margin+12+legendLine, esc(sub))
}

// noun is Chart.Noun or its default.
func (d *drawing) noun() string {
	if d.Noun == "" {
		return "task"
	}
	return d.Noun
}

// count returns n and the noun, in the plural unless n is 1: "1 task",
// "2 tasks", "3 copies".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		noun = strings.TrimSuffix(noun, "y") + "ie"
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeAxis draws the time axis under the rows, a light grid line
// through the rows at each tick.
func (d *drawing) writeAxis(w *bufio.Writer) {
	step, unit := Ticks(d.t1-d.t0, int(d.width/100))
	y := d.axisY
	fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#000000"/>`+"\n", d.left, d.left+d.width, y, y)
	for t := time.Duration(0); t <= d.t1-d.t0; t += step {
		x := d.x(d.t0 + t)
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`, x, x, d.top, y)
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#000000"/>`, x, x, y, y+5)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y+17, esc(FormatTick(t, step, unit)))
	}
	label := d.Axis
	if label == "" {
		label = "time since the first " + d.noun()
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444444">%s</text>`+"\n", d.left+d.width/2, y+33, esc(label))
}

// writeRows draws each row's label, hatched background and utilization.
func (d *drawing) writeRows(w *bufio.Writer) {
	busy := make([][]Bar, len(d.Rows))
	for _, b := range d.Bars {
		busy[b.Row] = append(busy[b.Row], b)
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#444444">busy</text>`+"\n", d.total-margin, d.top-4)
	for r, row := range d.Rows {
		y := d.rowY(r)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`, d.left-6, y+barH-4, esc(row.Label))
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="url(#pz-gantt-idle)" stroke="#cccccc" stroke-width="0.5"/>`,
			d.left, y, d.width, barH)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end">%.1f%%</text>`+"\n",
			d.total-margin, y+barH-4, 100*Utilization(busy[r], d.t0, d.t1))
	}
}

// writeBars draws the bars, with their names inside where they fit.
func (d *drawing) writeBars(w *bufio.Writer) {
	fill := func(name string) string { return d.colors[name] }
	if d.Critical {
		// Dimmed by mixing with white, not by opacity, which would let
		// the idle hatching show through.
		fill = func(name string) string { return lighten(d.colors[name], 0.6) }
	}
	// Critical bars last, so that their outlines are on top; the others
	// by start, so that where bars of a row overlap (a transfer track's)
	// the later one is on top.
	bars := slices.Clone(d.Bars)
	slices.SortStableFunc(bars, func(a, b Bar) int {
		ca, cb := d.critical[a.ID], d.critical[b.ID]
		switch {
		case ca == cb:
			return cmp.Compare(a.Start, b.Start)
		case cb:
			return -1
		}
		return 1
	})
	room := labelRoom(bars)
	var free []bool
	if d.LabelBeside {
		free = besideFree(bars)
	}
	// Crisp edges: with anti-aliasing, the seams between touching bars
	// let the hatching through, and a dense row looks striped with idle
	// time it does not have.
	fmt.Fprintln(w, `<g shape-rendering="crispEdges">`)
	defer fmt.Fprintln(w, `</g>`)
	// Runs narrower than a pixel, each widened to one, are gathered per
	// row while they fall in the pixel column of the first and share
	// its name, and drawn as one bar, which looks the same: 100,000
	// tiny tasks make a chart of a few thousand bars, not of 100,000.
	type group struct {
		first      Bar
		n          int
		end        time.Duration
		busy       time.Duration
		x0, xLimit float64 // the first's abscissa; a run joins if it starts before xLimit
	}
	groups := map[int]*group{}
	flush := func(row int) {
		g := groups[row]
		if g == nil {
			return
		}
		delete(groups, row)
		wd := max(d.x(min(g.end, d.t1))-g.x0, 1)
		title := d.barTitle(g.first)
		if g.n > 1 {
			title = fmt.Sprintf("%s: %s, %s busy, %s–%s", g.first.Name, count(g.n, "run"), formatDuration(g.busy), formatDuration(g.first.Start-d.t0), formatDuration(g.end-d.t0))
		}
		fmt.Fprintf(w, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.0f" fill="%s"><title>%s</title></rect>`+"\n",
			g.x0, d.rowY(row), wd, barH, fill(g.first.Name), esc(title))
	}
	defer func() {
		for _, r := range slices.Sorted(maps.Keys(groups)) {
			flush(r)
		}
	}()
	for i, b := range bars {
		// Cut at a fixed range's ends (the tooltip keeps the run's times).
		x, xEnd := d.x(max(b.Start, d.t0)), d.x(min(b.End, d.t1))
		wd := max(xEnd-x, 1) // a pixel at least: every run shows
		if tiny := xEnd-x < 1 && !d.critical[b.ID] && b.Err == ""; tiny {
			if g := groups[b.Row]; g != nil && g.first.Name == b.Name && x < g.xLimit {
				g.n++
				g.end = max(g.end, b.End)
				g.busy += b.End - b.Start
				continue
			}
			flush(b.Row)
			groups[b.Row] = &group{first: b, n: 1, end: b.End, busy: b.End - b.Start, x0: x, xLimit: math.Floor(x) + 1}
			continue
		}
		flush(b.Row)
		y := d.rowY(b.Row)
		title := d.barTitle(b)
		switch {
		case d.critical[b.ID]:
			// Not dimmed, outlined in black; a failed one also ringed
			// in red just outside, on the background, where it shows
			// whatever the bar's colour: both marks show.
			if b.Err != "" {
				fmt.Fprintf(w, `<rect class="failed" x="%.2f" y="%.1f" width="%.2f" height="%.0f" fill="none" stroke="%s" stroke-width="2" pointer-events="none"/>`,
					x-2, y-2, wd+4, barH+4, failedColor)
			}
			fmt.Fprintf(w, `<rect class="critical" x="%.2f" y="%.1f" width="%.2f" height="%.0f" fill="%s" stroke="#000000" stroke-width="1.5"><title>%s</title></rect>`,
				x, y, wd, barH, d.colors[b.Name], esc(title))
		case b.Err != "":
			fmt.Fprintf(w, `<rect class="failed" x="%.2f" y="%.1f" width="%.2f" height="%.0f" fill="%s" stroke="%s" stroke-width="2"><title>%s</title></rect>`,
				x, y, wd, barH, fill(b.Name), failedColor, esc(title))
		default:
			// A hairline between touching bars of one colour, on the
			// bar's left and right edges only (the dashes skip the top
			// and bottom): a full outline paled the top and bottom
			// edges, and wide bars looked lower than narrow ones
			// beside them.
			sep := ""
			if wd >= 6 {
				sep = fmt.Sprintf(` stroke="#ffffff" stroke-width="0.5" stroke-dasharray="0 %.2f %.0f %.2f %.0f"`, wd, barH, wd, barH)
			}
			fmt.Fprintf(w, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.0f" fill="%s"%s><title>%s</title></rect>`,
				x, y, wd, barH, fill(b.Name), sep, esc(title))
		}
		labelW := textWidth(b.Name) * 10 / fontSize
		switch {
		case d.x(min(b.End, room[i], d.t1))-x >= labelW+6:
			fmt.Fprintf(w, `<text x="%.2f" y="%.1f" font-size="10" pointer-events="none">%s</text>`, x+3, y+barH-4, esc(b.Name))
		case d.LabelBeside && free[i] && b.End < d.t1 && d.x(min(room[i], d.t1))-xEnd >= labelW+6:
			// Beside the bar, in the idle time after it, with the gap
			// of an inside label on each side.
			fmt.Fprintf(w, `<text class="beside" x="%.2f" y="%.1f" font-size="10" fill="#333333" pointer-events="none">%s</text>`, xEnd+3, y+barH-4, esc(b.Name))
		}
		fmt.Fprintln(w)
	}
}

// barTitle is b's tooltip: its name, number, duration and times, and
// whether it is on the critical path or failed.
func (d *drawing) barTitle(b Bar) string {
	id := fmt.Sprintf("#%d", b.ID)
	if b.Label != "" {
		id = b.Label
	}
	title := fmt.Sprintf("%s %s, %s, %s–%s", b.Name, id, formatDuration(b.End-b.Start), formatDuration(b.Start-d.t0), formatDuration(b.End-d.t0))
	if d.critical[b.ID] {
		title += " (critical path)"
	}
	if b.Err != "" {
		title += ", failed: " + b.Err
	}
	return title
}

// labelRoom returns, for each of bars (in drawing order), when the next
// bar drawn over it on its row starts: its label is drawn only if it
// fits before, or a bar drawn after it would cut it. It is the start of
// the bar after it on the row in the order of start, then drawing;
// math.MaxInt64 for the last. (A bar drawn later that starts earlier is
// a critical one, on a worker's row, where bars do not overlap.)
func labelRoom(bars []Bar) []time.Duration {
	order := make([]int, len(bars))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		return cmp.Or(cmp.Compare(bars[i].Row, bars[j].Row), cmp.Compare(bars[i].Start, bars[j].Start), cmp.Compare(i, j))
	})
	room := make([]time.Duration, len(bars))
	for k, i := range order {
		room[i] = math.MaxInt64
		if k+1 < len(order) && bars[order[k+1]].Row == bars[i].Row {
			room[i] = bars[order[k+1]].Start
		}
	}
	return room
}

// besideFree returns, for each of bars, whether no other bar of its
// row covers its end: none that started before it (or with it, drawn
// before it) ends after it. Bars that start after its end are
// labelRoom's.
func besideFree(bars []Bar) []bool {
	order := make([]int, len(bars))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		return cmp.Or(cmp.Compare(bars[i].Row, bars[j].Row), cmp.Compare(bars[i].Start, bars[j].Start), cmp.Compare(i, j))
	})
	free := make([]bool, len(bars))
	var reach time.Duration // the latest end of the row's bars so far
	for k, i := range order {
		if k == 0 || bars[order[k-1]].Row != bars[i].Row {
			reach = math.MinInt64
		}
		free[i] = reach <= bars[i].End
		reach = max(reach, bars[i].End)
	}
	return free
}

// writeBands draws the bands under the bars and a mark at each change:
// where a band starts as another of a different name ends on its row (a
// worker moved from one context to another). A band that follows none,
// or one of its own name, has no mark: an overrun's band or a run's
// strip to its deadline would draw a black line through its row's bars
// at each run (pzrun stm analyze -svg of 100 runnables: every
// overrunning run black, none of its legend colour).
func (d *drawing) writeBands(w *bufio.Writer) {
	type edge struct {
		row int
		at  time.Duration
	}
	ends := map[edge][]string{} // the names of the bands ending there
	for _, b := range d.Bands {
		ends[edge{b.Row, b.End}] = append(ends[edge{b.Row, b.End}], b.Name)
	}
	for _, b := range d.Bands {
		x0 := d.x(max(b.Start, d.t0))
		x1 := d.x(min(b.End, d.t1))
		if x1 <= x0 {
			continue
		}
		y := d.rowY(b.Row) + barH + 1
		fmt.Fprintf(w, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.0f" fill="%s"><title>%s %s</title></rect>`+"\n",
			x0, y, x1-x0, bandH, bandColor(b), esc(d.BandKind), esc(b.Name))
		change := slices.ContainsFunc(ends[edge{b.Row, b.Start}], func(n string) bool { return n != b.Name })
		if b.Start > d.t0 && change {
			fmt.Fprintf(w, `<line class="band-change" x1="%.2f" x2="%.2f" y1="%.1f" y2="%.1f" stroke="#000000" stroke-width="1"/>`+"\n",
				x0, x0, d.rowY(b.Row), y+bandH)
		}
	}
}

// writeCriticalEdges joins each critical task's end to its successor's
// start on the path.
func (d *drawing) writeCriticalEdges(w *bufio.Writer) {
	first := map[uint64]Bar{} // a task's bar with the lowest row
	for _, b := range d.Bars {
		if f, ok := first[b.ID]; d.critical[b.ID] && (!ok || b.Row < f.Row) {
			first[b.ID] = b
		}
	}
	runs := tasks(d.Bars)
	for i := 1; i < len(d.path); i++ {
		p, s := first[d.path[i-1]], first[d.path[i]]
		fmt.Fprintf(w, `<line class="critical-edge" x1="%.2f" y1="%.1f" x2="%.2f" y2="%.1f" stroke="#000000" stroke-width="1"/>`+"\n",
			d.x(runs[p.ID].end), d.rowY(p.Row)+barH/2, d.x(runs[s.ID].start), d.rowY(s.Row)+barH/2)
	}
}

func (d *drawing) writeLegend(w *bufio.Writer) {
	i := 0
	pos := func() (float64, float64) { // down the columns, alphabetical order
		x := margin + d.legendColW*float64(i/d.legendLines)
		y := d.legendY + legendLine*float64(i%d.legendLines)
		i++
		return x, y
	}
	fmt.Fprintf(w, `<text x="%.0f" y="%.1f" fill="#444444">%s</text>`+"\n", margin, d.legendY-legendLine, esc(d.LegendTitle))
	for _, e := range d.legend {
		x, y := pos()
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			x, y-swatch+2, swatch, swatch, d.colors[e.name], x+swatch+6, y, esc(e.text()))
	}
	x, y := pos()
	fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" fill="url(#pz-gantt-idle)" stroke="#cccccc" stroke-width="0.5"/><text x="%.1f" y="%.1f">idle</text>`+"\n",
		x, y-swatch+2, swatch, swatch, x+swatch+6, y)
	if d.Critical {
		x, y := pos()
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" fill="#ffffff" stroke="#000000" stroke-width="1.5"/><text x="%.1f" y="%.1f">critical path</text>`+"\n",
			x, y-swatch+2, swatch, swatch, x+swatch+6, y)
	}
	if d.failed {
		x, y := pos()
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" fill="#ffffff" stroke="%s" stroke-width="2"/><text x="%.1f" y="%.1f">failed task</text>`+"\n",
			x, y-swatch+2, swatch, swatch, failedColor, x+swatch+6, y)
	}
	for _, n := range d.contexts {
		x, y := pos()
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" fill="%s"/><text x="%.1f" y="%.1f">%s %s</text>`+"\n",
			x, y-bandH-2, swatch, bandH, bandColor(Band{Name: n, Color: d.bandColorOf(n)}), x+swatch+6, y, esc(d.BandKind), esc(n))
	}
}

// bandColorOf returns the colour of the first band named n.
func (d *drawing) bandColorOf(n string) string {
	for _, b := range d.Bands {
		if b.Name == n {
			return b.Color
		}
	}
	return ""
}

func bandColor(b Band) string {
	if b.Color != "" {
		return b.Color
	}
	return BandColor(b.Name)
}

// BandColor returns the colour of the band name as "#rrggbb": darker and
// more saturated than the codelets' colours, so that a band stands out
// under a bar.
func BandColor(name string) string {
	return lchHex(40, 60, 15+float64(hash64(name, colorSalt+1)%hueSlots)*360/hueSlots)
}

// workBars returns the bars on the workers' rows (not on the tracks).
func (d *drawing) workBars() []Bar {
	if !slices.ContainsFunc(d.Rows, func(r Row) bool { return r.Track }) {
		return d.Bars
	}
	return slices.DeleteFunc(slices.Clone(d.Bars), func(b Bar) bool { return d.Rows[b.Row].Track })
}

// Utilization returns the fraction of [t0, t1] covered by the bars
// (overlaps counted once), in [0, 1].
func Utilization(bars []Bar, t0, t1 time.Duration) float64 {
	if t1 <= t0 {
		return 0
	}
	return float64(covered(bars, t0, t1)) / float64(t1-t0)
}

// covered returns the time in [t0, t1] covered by the bars, overlaps
// counted once.
func covered(bars []Bar, t0, t1 time.Duration) time.Duration {
	iv := make([][2]time.Duration, 0, len(bars))
	for _, b := range bars {
		s, e := max(b.Start, t0), min(b.End, t1)
		if e > s {
			iv = append(iv, [2]time.Duration{s, e})
		}
	}
	slices.SortFunc(iv, func(a, b [2]time.Duration) int { return int(min(max(a[0]-b[0], -1), 1)) })
	var busy, end time.Duration
	end = t0
	for _, v := range iv {
		if v[1] <= end {
			continue
		}
		busy += v[1] - max(v[0], end)
		end = v[1]
	}
	return busy
}

// Ticks returns the step between ticks for an axis spanning span, the
// smallest of 1, 2 or 5 × 10^k ns giving at most n intervals (n < 1
// counts as 1), and the unit to label them in: the largest of ns, µs,
// ms and s not above span.
func Ticks(span time.Duration, n int) (step, unit time.Duration) {
	n = max(n, 1)
	span = max(span, 1)
	step = niceStep(span, time.Duration(n))
	unit = time.Nanosecond
	for _, u := range []time.Duration{time.Microsecond, time.Millisecond, time.Second} {
		if span >= u {
			unit = u
		}
	}
	return step, unit
}

// niceStep returns the smallest of 1, 2 or 5 × 10^k with span/step <= n.
func niceStep(span, n time.Duration) time.Duration {
	for pow := time.Duration(1); ; pow *= 10 {
		for _, m := range [...]time.Duration{1, 2, 5} {
			// The pow bound stops the search before it overflows.
			if s := m * pow; span/s <= n || pow >= 1e17 {
				return s
			}
		}
	}
}

// FormatTick formats t, a multiple of step, in unit (from Ticks) with as
// many decimals as step needs: "0", "0.5 ms", "1 ms", "1.5 ms".
func FormatTick(t, step, unit time.Duration) string {
	if t == 0 {
		return "0"
	}
	dec := 0
	for s := step; s%unit != 0 && s < unit*1e9; s *= 10 {
		dec++
	}
	v := strconvFloat(float64(t)/float64(unit), dec)
	return v + " " + unitName(unit)
}

func strconvFloat(v float64, dec int) string {
	s := fmt.Sprintf("%.*f", dec, v)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func unitName(u time.Duration) string {
	switch u {
	case time.Second:
		return "s"
	case time.Millisecond:
		return "ms"
	case time.Microsecond:
		return "µs"
	}
	return "ns"
}

// formatDuration formats d with 3 significant digits in the unit that
// fits: "812 µs", "1.25 ms", "3.50 s".
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	if d < 0 { // a run that began before a fixed range's start
		return "−" + formatDuration(-d)
	}
	_, u := Ticks(d, 1)
	v := float64(d) / float64(u)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unitName(u))
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unitName(u))
	}
	return fmt.Sprintf("%.2f %s", v, unitName(u))
}

// textWidth estimates the width of s in pixels at the default font size.
func textWidth(s string) float64 { return charW * float64(len([]rune(s))) }

func esc(s string) string { return html.EscapeString(s) }
