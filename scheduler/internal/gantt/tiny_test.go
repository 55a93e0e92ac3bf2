package gantt

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A run of 100,000 tasks of a few hundred nanoseconds draws a chart of
// sane size: the runs narrower than a pixel that fall in one pixel
// column of a row are drawn as one bar (which looks the same: each is
// widened to a pixel anyway), its tooltip counting them. Before, each
// run was a rect with its tooltip: 12.7 MB of SVG for a 1300 px wide
// picture of two rows (pzrun-like program of 100,000 empty tasks), slow
// to open in a browser.
func TestTinyRunsMerged(t *testing.T) {
	const n = 100_000
	c := Chart{Rows: []Row{{Label: "cpu0"}, {Label: "cpu1"}}}
	for i := range n {
		start := time.Duration(i) * 1300 * time.Nanosecond
		c.Bars = append(c.Bars, Bar{Row: i % 2, ID: uint64(i + 1), Name: "tiny", Start: start, End: start + 200})
	}
	// One failed run among them keeps its own bar and outline.
	c.Bars[n/2].Err = "boom"
	svg := render(t, c)
	assert.Less(t, len(svg), 1<<20, "bytes of SVG")
	bars := strings.Count(svg, `<rect x=`) + strings.Count(svg, `<rect class="failed"`)
	assert.LessOrEqual(t, bars, 2*1200+2+10, "bar rects (2 rows × 1200 px, the failed one, the legend's)")
	assert.Equal(t, 1, strings.Count(svg, `class="failed"`))

	// Every run is counted once in the tooltips.
	runs := 0
	for _, m := range regexp.MustCompile(`<title>tiny(?:: (\d+) runs| #\d+)`).FindAllStringSubmatch(svg, -1) {
		if m[1] == "" {
			runs++
			continue
		}
		k, err := strconv.Atoi(m[1])
		assert.NoError(t, err)
		runs += k
	}
	assert.Equal(t, n, runs)
}

// Sub-pixel runs are merged only within a pixel column, so a chart looks
// as before: runs of a row a pixel or more apart stay apart, with the
// idle hatching between them.
func TestTinyRunsApartStayApart(t *testing.T) {
	c := Chart{Rows: []Row{{Label: "cpu0"}}, Width: 100}
	// 100 px for 100 µs: runs of 100 ns at 10, 10.3 (same column) and 50 µs.
	for i, at := range []time.Duration{0, 10_000, 10_300, 50_000, 100_000} {
		c.Bars = append(c.Bars, Bar{Row: 0, ID: uint64(i + 1), Name: "t", Start: at, End: at + 100})
	}
	svg := render(t, c)
	assert.Equal(t, 4, strings.Count(svg, `<title>t`), "the runs at 10 and 10.3 µs share a bar")
	assert.Contains(t, svg, `<title>t: 2 runs`)
}
