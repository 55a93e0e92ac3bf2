package gantt

import (
	"encoding/xml"
	"errors"
	"io"
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
