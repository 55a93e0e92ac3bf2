package gantt

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// svgRect is a rect of a chart with its attributes.
type svgRect struct {
	x, y, w, h float64
	attr       map[string]string
	title      string
}

// svgRects returns the chart's rects that have a position, with their
// tooltips.
func svgRects(t *testing.T, svg string) []svgRect {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	var out []svgRect
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "rect" {
			continue
		}
		r := svgRect{attr: map[string]string{}}
		for _, a := range se.Attr {
			r.attr[a.Name.Local] = a.Value
		}
		if r.attr["x"] == "" {
			continue
		}
		for name, p := range map[string]*float64{"x": &r.x, "y": &r.y, "width": &r.w, "height": &r.h} {
			v, err := strconv.ParseFloat(r.attr[name], 64)
			require.NoError(t, err, "%s of %v", name, se)
			*p = v
		}
		var inner struct {
			Title string `xml:"title"`
		}
		require.NoError(t, dec.DecodeElement(&inner, &se))
		r.title = inner.Title
		out = append(out, r)
	}
}

// plotArea returns the left and right ends of the time area: the rows'
// idle backgrounds.
func plotArea(t *testing.T, rects []svgRect) (left, right float64) {
	t.Helper()
	for _, r := range rects {
		if r.attr["fill"] == "url(#pz-gantt-idle)" && r.w > 100 {
			return r.x, r.x + r.w
		}
	}
	t.Fatal("no row background")
	return 0, 0
}

// TestFixedRangeCutsBars: with From and To (pzrun stm analyze -svg draws
// 3 periods of a run), a run that starts after To or ends before From is
// not in the chart, and one that crosses an end is cut there. Runs of a
// late period (started at 37.8 ms in a 30 ms chart) were drawn at
// x = 1661 in a 1408 px wide picture, out of sight, and the legend
// counted them: 'grab: 5 runs' under 4 grab bars.
func TestFixedRangeCutsBars(t *testing.T) {
	c := Chart{
		Rows: []Row{{Label: "cpu0 planned"}, {Label: "cpu0 actual"}},
		Bars: []Bar{
			{Row: 0, ID: 1, Name: "grab", Start: 0, End: 1 * ms},
			{Row: 1, ID: 2, Name: "grab", Start: 2 * ms, End: 3 * ms},
			{Row: 0, ID: 3, Name: "grab", Start: 8 * ms, End: 12 * ms},   // cut at 10 ms
			{Row: 1, ID: 4, Name: "grab", Start: 37 * ms, End: 38 * ms},  // after
			{Row: 1, ID: 5, Name: "plan", Start: -5 * ms, End: -4 * ms},  // before
			{Row: 1, ID: 6, Name: "plan", Start: -1 * ms, End: 1 * ms},   // cut at 0
			{Row: 0, ID: 7, Name: "plan", Start: 10 * ms, End: 11 * ms},  // starts at To: after
			{Row: 1, ID: 8, Name: "other", Start: 20 * ms, End: 21 * ms}, // only after: no legend entry
		},
		From: 0, To: 10 * ms,
	}
	svg := render(t, c)
	rects := svgRects(t, svg)
	left, right := plotArea(t, rects)
	var titles []string
	for _, r := range rects {
		if r.title == "" {
			continue
		}
		titles = append(titles, r.title[:strings.Index(r.title, ",")])
		assert.GreaterOrEqual(t, r.x, left-0.01, r.title)
		assert.LessOrEqual(t, r.x+r.w, right+0.01, r.title)
	}
	assert.ElementsMatch(t, []string{"grab #1", "grab #2", "grab #3", "plan #6"}, titles)
	for _, want := range []string{
		">grab: 3 runs, 4.00 ms<", // 1 + 1 + the 2 ms before the cut
		">plan: 1 run, 1.00 ms<",  // the 1 ms after 0
		"4 tasks on 2 workers, 10.0 ms",
	} {
		assert.Contains(t, svg, want)
	}
	assert.NotContains(t, svg, "other")
	// The cut runs' tooltips keep their times, before the start too
	// (it read '-1000000.00 ns').
	assert.Contains(t, svg, "grab #3, 4.00 ms, 8.00 ms–12.0 ms")
	assert.Contains(t, svg, "plan #6, 2.00 ms, −1.00 ms–1.00 ms")
}

// TestTrackLegendCountsOverlapOnce: receives posted together wait side
// by side on a rank's receives row; the legend's busy time is the time
// the row was covered, as its busy column says, not the sum of the
// waits (pzrun -n 4 cholesky -sim 2 -trace: 'recv: 56 runs, 2.20 s'
// under a 92.7 ms chart of 4 receive rows).
func TestTrackLegendCountsOverlapOnce(t *testing.T) {
	c := Chart{
		Rows: []Row{{Label: "cpu0"}, {Label: "receives", Track: true}, {Label: "sends", Track: true}},
		Bars: []Bar{
			{Row: 0, ID: 1, Name: "gemm", Start: 0, End: 10 * ms},
			{Row: 1, Name: "recv", Start: 0, End: 10 * ms},
			{Row: 1, Name: "recv", Start: 2 * ms, End: 10 * ms},
			{Row: 1, Name: "recv", Start: 5 * ms, End: 10 * ms},
			{Row: 2, Name: "send", Start: 1 * ms, End: 3 * ms},
			{Row: 2, Name: "send", Start: 2 * ms, End: 4 * ms},
			{Row: 2, Name: "send", Start: 6 * ms, End: 7 * ms},
		},
	}
	svg := render(t, c)
	assert.Contains(t, svg, ">recv: 3 runs, 10.0 ms<")
	assert.Contains(t, svg, ">send: 3 runs, 4.00 ms<") // 1–4 and 6–7
	assert.Contains(t, svg, ">100.0%<")                // the receives row
	assert.Contains(t, svg, ">40.0%<")                 // the sends row: 4 ms of 10
}

// TestBarSeparatorOnSidesOnly: the white hairline between wide bars is
// drawn on their left and right edges only. A full outline paled the
// top and bottom rows of pixels, and in a dense row (pzrun cholesky
// -n 2048 -b 64 -trace) wide bars looked a pixel lower than the narrow
// ones between them, a jagged row.
func TestBarSeparatorOnSidesOnly(t *testing.T) {
	c := Chart{Rows: []Row{{Label: "cpu0"}}}
	for i := range 20 {
		c.Bars = append(c.Bars, Bar{Row: 0, ID: uint64(i + 1), Name: "gemm", Start: ms * time.Duration(i), End: ms * time.Duration(i+1)})
	}
	rects := svgRects(t, render(t, c))
	n := 0
	for _, r := range rects {
		if r.title == "" || r.attr["stroke"] != "#ffffff" {
			continue
		}
		n++
		// The outline runs along the top (w), the right side (h), the
		// bottom (w), the left side (h): dashes on the sides only.
		want := fmt.Sprintf("0 %.2f %.0f %.2f %.0f", r.w, r.h, r.w, r.h)
		assert.Equal(t, want, r.attr["stroke-dasharray"], r.title)
	}
	assert.Equal(t, 20, n, "every wide bar has its separator")
}

// TestTitleCountsTrackNouns: the title counts a track's bars by its
// Noun, "copy" by default, in the rows' order.
func TestTitleCountsTrackNouns(t *testing.T) {
	c := Chart{
		Rows: []Row{{Label: "cpu0"}, {Label: "ram→dev0", Track: true}, {Label: "receives", Track: true, Noun: "receive"},
			{Label: "sends", Track: true, Noun: "send"}, {Label: "dev0→ram", Track: true}},
		Bars: []Bar{
			{Row: 0, ID: 1, Name: "gemm", Start: 0, End: 10 * ms},
			{Row: 1, Name: "copy in", Start: 0, End: 1 * ms},
			{Row: 2, Name: "recv", Start: 0, End: 5 * ms},
			{Row: 2, Name: "recv", Start: 1 * ms, End: 5 * ms},
			{Row: 3, Name: "send", Start: 1 * ms, End: 2 * ms},
			{Row: 4, Name: "copy out", Start: 9 * ms, End: 10 * ms},
		},
	}
	assert.Contains(t, render(t, c), ">1 task on 1 worker, 10.0 ms; 2 copies, 2 receives, 1 send<")
}

// TestBandMarksOnlyAtChanges: a black mark crosses a row where its band
// changes from one name to another (a worker moved between contexts),
// not at the start of each band: stm analyze -svg's overrun bands and
// the plan's strips to the deadlines drew a black line through the bars
// at every run, and a row of short overrunning runs came out black.
func TestBandMarksOnlyAtChanges(t *testing.T) {
	c := Chart{
		Rows: []Row{{Label: "cpu0"}, {Label: "cpu1"}, {Label: "cpu2"}},
		Bars: []Bar{
			{Row: 0, ID: 1, Name: "a", Start: 0, End: 10 * ms},
			{Row: 1, ID: 2, Name: "b", Start: 1 * ms, End: 2 * ms},
			{Row: 1, ID: 3, Name: "b", Start: 3 * ms, End: 4 * ms},
			{Row: 2, ID: 4, Name: "c", Start: 0, End: 10 * ms},
		},
		Bands: []Band{
			{Row: 0, Name: "small", Start: 0, End: 5 * ms},
			{Row: 0, Name: "large", Start: 5 * ms, End: 10 * ms}, // a change: marked
			{Row: 1, Name: "overran", Start: 1 * ms, End: 2 * ms},
			{Row: 1, Name: "overran", Start: 3 * ms, End: 4 * ms},
			{Row: 2, Name: "to deadline", Start: 2 * ms, End: 5 * ms},
			{Row: 2, Name: "to deadline", Start: 5 * ms, End: 6 * ms},
		},
	}
	svg := render(t, c)
	assert.Equal(t, 1, strings.Count(svg, `class="band-change"`), svg)
	rects := svgRects(t, svg)
	left, right := plotArea(t, rects)
	x5 := left + (right-left)/2
	assert.Contains(t, svg, fmt.Sprintf(`<line class="band-change" x1="%.2f"`, x5))
}
