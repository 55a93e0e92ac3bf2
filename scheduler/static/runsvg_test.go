package static

import (
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runSVGParts returns the row labels (the texts ending in " planned" or
// " actual", top to bottom), the bars' tooltips with their right ends,
// the time area's right end and the picture's width.
func runSVGParts(t *testing.T, svg string) (rows []string, bars map[string]float64, right, width float64) {
	t.Helper()
	bars = map[string]float64{}
	dec := xml.NewDecoder(strings.NewReader(svg))
	attr := func(se xml.StartElement, name string) string {
		for _, a := range se.Attr {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	num := func(se xml.StartElement, name string) float64 {
		v, err := strconv.ParseFloat(attr(se, name), 64)
		require.NoError(t, err, "%s of %v", name, se)
		return v
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return rows, bars, right, width
		}
		require.NoError(t, err)
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch {
		case se.Name.Local == "svg":
			width = num(se, "width")
		case se.Name.Local == "text":
			var s string
			require.NoError(t, dec.DecodeElement(&s, &se))
			if attr(se, "text-anchor") == "end" && (strings.HasSuffix(s, " planned") || strings.HasSuffix(s, " actual")) {
				rows = append(rows, s)
			}
		case se.Name.Local == "rect" && attr(se, "fill") == "url(#pz-gantt-idle)" && attr(se, "x") != "" && num(se, "width") > 100:
			right = num(se, "x") + num(se, "width")
		case se.Name.Local == "rect" && attr(se, "x") != "":
			var inner struct {
				Title string `xml:"title"`
			}
			x, w := num(se, "x"), num(se, "width")
			require.NoError(t, dec.DecodeElement(&inner, &se))
			if inner.Title != "" {
				bars[inner.Title] = x + w
			}
		}
	}
}

// TestWriteRunSVGRowsAndRange: stm analyze -svg lists the resources in
// their numbers' order (cpu2 above cpu10; sorted as strings, a 16-CPU
// run put cpu10..cpu15 between cpu1 and cpu2), and a late frame's run
// that started after the last period drawn is not in the chart (it was
// drawn past the picture's right edge and counted in the legend).
func TestWriteRunSVGRowsAndRange(t *testing.T) {
	const ms = int64(1e6)
	rr := func(name, res string, planned, start, end int64) RunnableRun {
		return RunnableRun{Name: name, Client: "c", Resource: res, WCET: ms,
			Seq: []int64{0}, Planned: []int64{planned}, Deadline: []int64{planned + 5*ms},
			Start: []int64{start}, End: []int64{end}, Flags: []int{0},
			AllocObjects: []uint64{0}, AllocBytes: []uint64{0}}
	}
	run := &Run{Format: "pz-stm-run", Version: RunVersion, Plan: "p", Source: "s.yaml", Periods: 3,
		Hyperepochs: []RunHyperepoch{{Name: "main", Period: 10 * ms, Periods: 3}},
		Runnables: []RunnableRun{
			rr("a", "cpu10", 0, 0, ms),
			rr("b", "cpu2", 0, 0, ms),
			rr("c", "gpu0.stream0", 0, 0, ms),
			rr("d", "cpu0", 0, 0, ms),
			rr("e", "cpu1", 10*ms, 37*ms, 38*ms), // frame 1, run after the chart's 20 ms
		},
	}
	var b strings.Builder
	require.NoError(t, WriteRunSVG(&b, run, 2))
	rows, bars, right, width := runSVGParts(t, b.String())
	var resources []string
	for i := 0; i < len(rows); i += 2 {
		resources = append(resources, strings.TrimSuffix(rows[i], " planned"))
	}
	assert.Equal(t, []string{"cpu0", "cpu1", "cpu2", "cpu10", "gpu0.stream0"}, resources)
	require.NotZero(t, right)
	for title, x1 := range bars {
		assert.LessOrEqual(t, x1, right+0.01, "%s ends past the time area", title)
		assert.LessOrEqual(t, x1, width, "%s ends past the picture", title)
	}
	assert.Len(t, bars, 9, "4 planned and actual runs, e's planned run; not e's actual run at 37 ms")
	assert.Contains(t, b.String(), ">e: 1 planned (1.00ms), 0 ran (0)<")
}

// TestWriteRunSVGNamesLostRunnables: a client killed mid-run (kill -9)
// leaves its runnables without rows (Lost); the chart of that run drew
// neither their planned nor their actual bars and said nothing, so its
// planned rows showed a plan without them, idle where they run (the
// STM trial: preprocess, detect_sub and detect gone from the chart of a
// pipeline whose perception client was killed). The chart now says
// which runnables it cannot draw and why.
func TestWriteRunSVGNamesLostRunnables(t *testing.T) {
	const ms = int64(1e6)
	run := &Run{Format: "pz-stm-run", Version: RunVersion, Plan: "p", Source: "s.yaml", Periods: 1,
		Hyperepochs: []RunHyperepoch{{Name: "main", Period: 10 * ms, Periods: 1}},
		Runnables: []RunnableRun{
			{Name: "a", Client: "c", Resource: "cpu0", WCET: ms,
				Seq: []int64{0}, Planned: []int64{0}, Deadline: []int64{5 * ms},
				Start: []int64{0}, End: []int64{ms}, Flags: []int{0},
				AllocObjects: []uint64{0}, AllocBytes: []uint64{0}},
			{Name: "b", Client: "d", Resource: "cpu0", WCET: ms, Lost: true},
			{Name: "k", Client: "d", Resource: "gpu0.stream0", WCET: ms, Lost: true},
		},
	}
	var b strings.Builder
	require.NoError(t, WriteRunSVG(&b, run, 1))
	assert.Contains(t, b.String(), "; not drawn (the records of client d were lost): b, k</text>")
	rows, _, _, _ := runSVGParts(t, b.String())
	assert.Contains(t, rows, "gpu0.stream0 planned", "the lost runnables' resources keep their rows")
}

func TestNaturalCompare(t *testing.T) {
	in := []string{"gpu0.stream10", "cpu10", "cpu2", "gpu0.stream2", "cpu", "cpu02", "cpu1", "a"}
	for range 3 {
		got := append([]string(nil), in...)
		slices.SortFunc(got, naturalCompare)
		assert.Equal(t, []string{"a", "cpu", "cpu1", "cpu2", "cpu02", "cpu10", "gpu0.stream2", "gpu0.stream10"}, got)
		in[0], in[len(in)-1] = in[len(in)-1], in[0]
	}
	assert.Zero(t, naturalCompare("cpu3", "cpu3"))
}

// TestWriteRunSVGLegendCountsRuns: the legend counted a runnable's
// bars, planned and actual together, as its runs ("grab: 10 runs" for 5
// periods); it now gives the runs planned and those that ran (a skipped
// frame has a planned bar only), each with its time in the chart. And
// the actual bars, shorter than their WCET, had no labels (a PNG did
// not tell which runnable each was): each now has its name right of it.
func TestWriteRunSVGLegendCountsRuns(t *testing.T) {
	const ms = int64(1e6)
	const periods = 5
	rr := RunnableRun{Name: "grab", Client: "c", Resource: "cpu0", WCET: ms}
	for k := range int64(periods) {
		flags := 0
		if k == 2 {
			flags = FlagSkipped
		}
		rr.Seq = append(rr.Seq, k)
		rr.Planned = append(rr.Planned, k*10*ms)
		rr.Deadline = append(rr.Deadline, k*10*ms+5*ms)
		rr.Start = append(rr.Start, k*10*ms+ms/10)
		rr.End = append(rr.End, k*10*ms+ms/10+ms/5) // 0.2 ms of 1 ms: too narrow for "grab"
		rr.Flags = append(rr.Flags, flags)
		rr.AllocObjects = append(rr.AllocObjects, 0)
		rr.AllocBytes = append(rr.AllocBytes, 0)
	}
	run := &Run{Format: "pz-stm-run", Version: RunVersion, Plan: "p", Source: "s.yaml", Periods: periods,
		Hyperepochs: []RunHyperepoch{{Name: "main", Period: 10 * ms, Periods: periods}},
		Runnables:   []RunnableRun{rr},
	}
	var b strings.Builder
	require.NoError(t, WriteRunSVG(&b, run, periods))
	svg := b.String()
	assert.Contains(t, svg, ">grab: 5 planned (5.00ms), 4 ran (800.0µs)</text>")
	assert.NotContains(t, svg, "9 runs")

	// Every actual bar has a label "grab" starting just right of it.
	_, bars, _, _ := runSVGParts(t, svg)
	labels := map[string]bool{} // x, rounded to 0.01 px
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "text" {
			var s string
			var x string
			for _, a := range se.Attr {
				if a.Name.Local == "x" {
					x = a.Value
				}
			}
			require.NoError(t, dec.DecodeElement(&s, &se))
			if s == "grab" {
				labels[x] = true
			}
		}
	}
	actual := 0
	for title, x1 := range bars {
		if strings.HasPrefix(title, "grab") && strings.Contains(title, ", 200 µs,") {
			actual++
			assert.True(t, labels[strconv.FormatFloat(x1+3, 'f', 2, 64)], "no label right of the actual bar %q ending at %.2f (labels at %v)", title, x1, labels)
		}
	}
	assert.Equal(t, periods-1, actual, "an actual bar per frame that ran")
	assert.Len(t, labels, 2*periods-1, "a label per bar, planned and actual")
}
