package gantt

import (
	"encoding/xml"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// svgBox is a rect of a chart, or a bar's label's extent, in document
// order.
type svgBox struct {
	label          string // the label's text; "" for a rect
	x0, y0, x1, y1 float64
}

// svgBoxes returns the chart's rects and bar labels (the 10 px texts) in
// document order.
func svgBoxes(t *testing.T, svg string) []svgBox {
	t.Helper()
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
	var out []svgBox
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch {
		case se.Name.Local == "rect" && attr(se, "x") != "" && attr(se, "fill") != "none":
			x, y := num(se, "x"), num(se, "y")
			out = append(out, svgBox{x0: x, y0: y, x1: x + num(se, "width"), y1: y + num(se, "height")})
		case se.Name.Local == "text" && attr(se, "font-size") == "10":
			var s string
			require.NoError(t, dec.DecodeElement(&s, &se))
			x, y := num(se, "x"), num(se, "y")
			out = append(out, svgBox{label: s, x0: x, y0: y - 10, x1: x + textWidth(s)*10/fontSize, y1: y})
		}
	}
}

// A bar's label is never drawn over by a later bar: on a transfer track,
// where bars overlap (a rank's sends, a receive posted while another is
// pending), a label is drawn only if it fits before the next bar on the
// row starts. pzrun -n 2 cholesky -trace showed "ser send" and "recı
// recv": each earlier bar's "send" cut by the bar drawn over it.
func TestLabelsNotCovered(t *testing.T) {
	c := Chart{
		Rows: []Row{{Label: "cpu0"}, {Label: "sends", Track: true}},
		Bars: []Bar{
			{Row: 0, ID: 1, Name: "gemm", Start: 0, End: 100 * ms},
			// Overlapping sends, one not in start order.
			{Row: 1, ID: 1 << 62, Name: "send", Start: 0, End: 40 * ms},
			{Row: 1, ID: 1<<62 | 1, Name: "send", Start: 2 * ms, End: 50 * ms},
			{Row: 1, ID: 1<<62 | 3, Name: "send", Start: 70 * ms, End: 90 * ms},
			{Row: 1, ID: 1<<62 | 2, Name: "send", Start: 60 * ms, End: 95 * ms},
		},
	}
	boxes := svgBoxes(t, render(t, c))
	labels := 0
	for i, l := range boxes {
		if l.label == "" {
			continue
		}
		labels++
		for _, r := range boxes[i+1:] {
			if r.label == "" {
				assert.False(t, r.x0 < l.x1 && l.x0 < r.x1 && r.y0 < l.y1 && l.y0 < r.y1,
					"the label %q at [%.1f, %.1f] is under a later rect at [%.1f, %.1f]", l.label, l.x0, l.x1, r.x0, r.x1)
			}
		}
	}
	assert.Equal(t, 4, labels, "gemm and every send but the first, which the second starts over 2 ms in")
}

// With LabelBeside, a bar too narrow for its name is labelled right of
// it where the name fits in the idle time before the next bar of its
// row and the chart's end, and no earlier bar covers that time; the
// label overlaps no bar. Without it, such a bar has no label (pzrun stm
// analyze -svg: the actual bars, shorter than their WCET, all
// unlabelled).
func TestLabelBeside(t *testing.T) {
	bars := []Bar{
		{Row: 0, ID: 1, Name: "narrow", Start: 0, End: 1 * ms},          // idle after: beside
		{Row: 0, ID: 2, Name: "wide", Start: 40 * ms, End: 90 * ms},     // fits inside
		{Row: 0, ID: 3, Name: "cramped", Start: 91 * ms, End: 92 * ms},  // next bar 1 ms on: none
		{Row: 0, ID: 4, Name: "next", Start: 93 * ms, End: 94 * ms},     // the chart's end 0.5 ms on: none
		{Row: 1, ID: 5, Name: "long", Start: 0, End: 30 * ms},           // fits inside
		{Row: 1, ID: 6, Name: "short", Start: 10 * ms, End: 11 * ms},    // under long: none
		{Row: 1, ID: 7, Name: "cut", Start: 94*ms + ms/2, End: 96 * ms}, // past the chart's end: none
	}
	c := Chart{Rows: []Row{{Label: "r0", Track: true}, {Label: "r1", Track: true}}, Bars: bars, From: 0, To: 94*ms + ms/2, Width: 945}
	labelsOf := func(c Chart) []string {
		boxes := svgBoxes(t, render(t, c))
		var out []string
		for _, l := range boxes {
			if l.label == "" {
				continue
			}
			out = append(out, l.label)
			if l.label != "narrow" {
				continue
			}
			for _, r := range boxes {
				if r.label == "" && r.x1-r.x0 < c.Width { // a bar or band, not a row's background
					assert.False(t, r.x0 < l.x1 && l.x0 < r.x1 && r.y0 < l.y1 && l.y0 < r.y1,
						"the label %q at [%.1f, %.1f] overlaps a rect at [%.1f, %.1f]", l.label, l.x0, l.x1, r.x0, r.x1)
				}
			}
		}
		return out
	}
	assert.Equal(t, []string{"long", "wide"}, labelsOf(c), "without LabelBeside")
	c.LabelBeside = true
	assert.Equal(t, []string{"narrow", "long", "wide"}, labelsOf(c))
	var narrowEnd, label float64
	for _, b := range svgBoxes(t, render(t, c)) {
		if b.label == "narrow" {
			label = b.x0
		} else if b.label == "" && b.x1-b.x0 > 9 && b.x1-b.x0 < 11 && narrowEnd == 0 { // the first 1 ms bar, 10 px
			narrowEnd = b.x1
		}
	}
	assert.InDelta(t, narrowEnd+3, label, 0.01, "just right of its bar")
}

// Chart.Legend replaces a name's runs and busy time in the legend, and
// the picture is wide enough for the text it gives.
func TestLegendText(t *testing.T) {
	long := "1 planned, 1 ran" + strings.Repeat(", and a long text", 12)
	c := Chart{
		Rows:   []Row{{Label: "planned"}, {Label: "actual"}},
		Bars:   []Bar{{Row: 0, ID: 1, Name: "a", End: ms}, {Row: 1, ID: 2, Name: "a", End: ms / 2}, {Row: 0, ID: 3, Name: "b", Start: ms, End: 2 * ms}},
		Legend: map[string]string{"a": long},
	}
	svg := render(t, c)
	assert.Contains(t, svg, ">a: "+long+"</text>")
	assert.NotContains(t, svg, ">a: 2 runs")
	assert.Contains(t, svg, ">b: 1 run, 1.00 ms</text>", "a name not in Legend keeps its count")
	m := regexp.MustCompile(`<svg [^>]*width="([0-9.]+)"`).FindStringSubmatch(svg)
	require.NotNil(t, m)
	width, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	assert.Greater(t, textWidth("a: "+long), defaultWidth, "the text is wider than the time area")
	assert.GreaterOrEqual(t, width, 2*margin+swatch+6+textWidth("a: "+long))
}
