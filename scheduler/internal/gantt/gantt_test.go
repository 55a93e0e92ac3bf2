package gantt

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// chart is a small chart: 2 workers, 4 tasks of 3 codelets (one
// odd-named), one dependency chain 1→2→4, two contexts.
func chart() Chart {
	return Chart{
		Rows: []Row{{Label: "cpu0"}, {Label: "cpu1"}},
		Bars: []Bar{
			{Row: 0, ID: 1, Name: "potrf", Start: 0, End: 2 * ms},
			{Row: 0, ID: 2, Name: "trsm", Start: 2 * ms, End: 5 * ms, Deps: []uint64{1}},
			{Row: 1, ID: 3, Name: "a<b&c", Start: 1 * ms, End: 3 * ms},
			{Row: 1, ID: 4, Name: "gemm", Start: 6 * ms, End: 10 * ms, Deps: []uint64{2}},
			{Row: 5, ID: 5, Name: "ghost", Start: 0, End: 50 * ms}, // no such row: not drawn
		},
		Bands: []Band{
			{Row: 0, Name: "global", Start: 0, End: 4 * ms, Color: "#999999"},
			{Row: 0, Name: "small", Start: 4 * ms, End: 10 * ms},
			{Row: 1, Name: "before", Start: -5 * ms, End: 0},
			{Row: 1, Name: "global", Start: 0, End: 10 * ms, Color: "#999999"},
		},
	}
}

func render(t *testing.T, c Chart) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, Write(&b, c))
	// Well-formed XML with an svg root.
	dec := xml.NewDecoder(strings.NewReader(b.String()))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, b.String())
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	require.Equal(t, "svg", root)
	return b.String()
}

func TestWrite(t *testing.T) {
	svg := render(t, chart())
	for _, want := range []string{
		">cpu0</text>", ">cpu1</text>", // row labels
		">50.0%</text>", ">60.0%</text>", // utilization: cpu0 busy 5 of 10 ms, cpu1 6 of 10
		`fill="url(#pz-gantt-idle)"`,                 // idle hatching
		">0</text>", ">2 ms</text>", ">10 ms</text>", // the axis
		"a&lt;b&amp;c", // escaped
		// the palette's colours in the order of the first task of each
		`fill="` + codeletPalette[0] + `"`, `fill="` + codeletPalette[3] + `"`, // potrf #1, gemm #4
		"<title>context small</title>", ">context small</text>", ">context global</text>", `fill="#999999"`,
		"4 tasks on 2 workers, 10.0 ms",
	} {
		assert.Contains(t, svg, want)
	}
	for _, name := range []string{"potrf", "trsm", "gemm", "a&lt;b&amp;c"} {
		assert.Contains(t, svg, ">"+name+": 1 run, ", "legend entry of %s", name)
	}
	assert.NotContains(t, svg, "ghost")
	assert.NotContains(t, svg, "context before", "a band before the first task is not drawn nor in the legend")
	assert.NotContains(t, svg, `class="critical"`)
}

func TestWriteCritical(t *testing.T) {
	c := chart()
	c.Critical = true
	svg := render(t, c)
	assert.Equal(t, 3, strings.Count(svg, `<rect class="critical"`), "tasks 1, 2, 4")
	assert.Equal(t, 2, strings.Count(svg, `class="critical-edge"`))
	assert.Contains(t, svg, "critical path (outlined): 3 tasks, 9.00 ms of work, 90% of the span")
	assert.Contains(t, svg, ">critical path</text>")
}

// A chart of something other than tasks names it in the subtitle and
// under the axis; Axis replaces the axis label.
func TestWriteNoun(t *testing.T) {
	c := chart()
	svg := render(t, c)
	assert.Contains(t, svg, ">time since the first task</text>")
	c.Critical, c.Noun = true, "runnable"
	svg = render(t, c)
	assert.Contains(t, svg, "critical path (outlined): 3 runnables, 9.00 ms")
	assert.Contains(t, svg, ">time since the first runnable</text>")
	assert.NotContains(t, svg, " task")
	c.Axis = "time since the period's start"
	assert.Contains(t, render(t, c), ">time since the period&#39;s start</text>")
}

// A failed task's bar is outlined in red with its error in the tooltip,
// and the legend says what the outline means; a chart without failures
// has neither.
func TestWriteFailed(t *testing.T) {
	assert.NotContains(t, render(t, chart()), "failed task")
	c := chart()
	c.Bars[2].Err = "bad input" // a<b&c, not on the critical path
	svg := render(t, c)
	assert.Equal(t, 1, strings.Count(svg, `<rect class="failed"`))
	assert.Contains(t, svg, `stroke="`+failedColor+`"`)
	assert.Contains(t, svg, "a&lt;b&amp;c #3, 2.00 ms, 1.00 ms–3.00 ms, failed: bad input</title>")
	assert.Contains(t, svg, ">failed task</text>")
}

// TestWriteFailedCritical is the regression test for a failed task on
// the critical path drawn dimmed, with its red outline only, so that
// nothing showed it on the path: it is drawn as critical (not dimmed,
// the black outline) and as failed (a red ring around), and its
// tooltip says both.
func TestWriteFailedCritical(t *testing.T) {
	c := chart()
	c.Bars[1].Err = "not positive definite" // trsm #2, on the path 1→2→4
	c.Critical = true
	svg := render(t, c)
	assert.Equal(t, 3, strings.Count(svg, `<rect class="critical"`), "tasks 1, 2, 4")
	assert.Equal(t, 1, strings.Count(svg, `<rect class="failed"`))
	assert.Regexp(t, `<rect class="failed" [^>]*fill="none" stroke="`+failedColor+`"[^>]*/><rect class="critical" [^>]*fill="`+codeletPalette[1]+`" stroke="#000000"[^>]*><title>trsm #2, 3.00 ms, 2.00 ms–5.00 ms \(critical path\), failed: not positive definite</title></rect>`, svg)
	assert.Contains(t, svg, "critical path (outlined): 3 tasks")
	assert.Contains(t, svg, ">critical path</text>")
	assert.Contains(t, svg, ">failed task</text>")
}

// TestWriteTracks: a transfer track's bars are copies - counted apart
// in the title, never on the critical path - even a copy longer than
// every chain of tasks.
func TestWriteTracks(t *testing.T) {
	c := chart()
	c.Critical = true
	c.Rows = append(c.Rows, Row{Label: "ram→dev0", Track: true})
	c.Bars = append(c.Bars, Bar{Row: 2, ID: 1 << 63, Name: "copy in", Start: 0, End: 10 * ms})
	svg := render(t, c)
	assert.Contains(t, svg, "4 tasks on 2 workers, 10.0 ms; 1 copy")
	assert.Contains(t, svg, ">ram→dev0</text>")
	assert.Contains(t, svg, ">100.0%</text>", "the track's utilization")
	assert.Equal(t, 3, strings.Count(svg, `<rect class="critical"`), "tasks 1, 2, 4, not the copy")
}

func TestWriteTeam(t *testing.T) {
	c := Chart{
		Rows: []Row{{Label: "cpu0"}, {Label: "cpu1"}},
		Bars: []Bar{
			{Row: 0, ID: 1, Name: "spmd", Start: 0, End: ms},
			{Row: 1, ID: 1, Name: "spmd", Start: 0, End: ms},
		},
		Critical: true,
	}
	svg := render(t, c)
	assert.Equal(t, 2, strings.Count(svg, `<rect class="critical"`), "both members")
	assert.Contains(t, svg, "1 task on 2 workers")
	assert.Contains(t, svg, "critical path (outlined): 1 task, ")
	// One task, counted once as in the title (it said "2 runs"); its
	// busy time is both workers'.
	assert.Contains(t, svg, ">spmd: 1 run (2 workers), 2.00 ms<")
}

// TestLegendCountsTeamsOnce: a team task's bars (one per member, one
// ID) are one run in the legend; the entry says how many workers ran
// them; copies on a track count one run each.
func TestLegendCountsTeamsOnce(t *testing.T) {
	bar := func(row int, id uint64, name string) Bar {
		return Bar{Row: row, ID: id, Name: name, Start: time.Duration(id) * ms, End: time.Duration(id+1) * ms}
	}
	c := Chart{
		Rows: []Row{{Label: "cpu0"}, {Label: "cpu1"}, {Label: "cpu2"}, {Label: "ram→dev0", Track: true}},
		Bars: []Bar{
			bar(0, 1, "pair"), bar(1, 1, "pair"), bar(0, 2, "pair"), bar(1, 2, "pair"), // 2 teams of 2
			bar(0, 3, "mixed"), bar(0, 4, "mixed"), bar(1, 4, "mixed"), bar(2, 4, "mixed"), // 1 and 3 workers
			bar(2, 5, "solo"), bar(2, 6, "solo"),
			bar(3, 0, "copy"), bar(3, 0, "copy"), // copies: no task ID
		},
	}
	svg := render(t, c)
	for _, want := range []string{
		">pair: 2 runs (2 workers each), 4.00 ms<",
		">mixed: 2 runs (1–3 workers), 4.00 ms<",
		">solo: 2 runs, 2.00 ms<",
		">copy: 2 runs, 1.00 ms<", // at the same time on one track: covered once
		"6 tasks on 3 workers",
	} {
		assert.Contains(t, svg, want)
	}
}

func TestWriteEmpty(t *testing.T) {
	svg := render(t, Chart{})
	assert.Contains(t, svg, "0 tasks on 0 workers")
	svg = render(t, Chart{Rows: []Row{{Label: "cpu0"}}})
	assert.Contains(t, svg, ">0.0%</text>")
	assert.Contains(t, svg, "0 tasks on 1 worker, 0 s<")
}

// TestLegendFits: every codelet has a legend entry, and entries sit in
// columns wide enough for their text, on lines inside the picture.
func TestLegendFits(t *testing.T) {
	c := Chart{Rows: []Row{{Label: "cpu0"}}}
	for i, n := range knownNames {
		c.Bars = append(c.Bars, Bar{ID: uint64(i), Name: n, Start: time.Duration(i) * ms, End: time.Duration(i+1) * ms})
	}
	d := newDrawing(c)
	require.Len(t, d.legend, len(knownNames))
	for _, e := range d.legend {
		assert.LessOrEqual(t, swatch+6+textWidth(e.text()), d.legendColW-12, e.name)
	}
	assert.LessOrEqual(t, margin+d.legendColW*float64(d.legendCols), d.total, "columns inside the picture")
	assert.GreaterOrEqual(t, d.legendCols*d.legendLines, len(d.legend)+1, "room for the codelets and idle")
	assert.LessOrEqual(t, d.legendY+legendLine*float64(d.legendLines-1), d.height-margin, "lines inside the picture")
	svg := render(t, c)
	for _, n := range knownNames {
		assert.Contains(t, svg, fmt.Sprintf(">%s: 1 run, ", n))
	}
}

// TestCount: the chart's counts agree with their numbers.
func TestCount(t *testing.T) {
	for want, got := range map[string]string{
		"0 tasks": count(0, "task"), "1 task": count(1, "task"), "2 tasks": count(2, "task"),
		"1 worker": count(1, "worker"), "900 tasks": count(900, "task"),
		"1 copy": count(1, "copy"), "3 copies": count(3, "copy"), "1 run": count(1, "run"),
	} {
		assert.Equal(t, want, got)
	}
}

// TestLongName: a name wider than the chart widens the picture.
func TestLongName(t *testing.T) {
	long := strings.Repeat("x", 400)
	d := newDrawing(Chart{Rows: []Row{{Label: "cpu0"}}, Bars: []Bar{{Name: long, End: ms}}})
	assert.Equal(t, 1, d.legendCols)
	assert.GreaterOrEqual(t, d.total, margin+swatch+6+textWidth(long+": 1 run, 1.00 ms"))
}
