package gantt_test

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/pzgo/pz/scheduler/internal/gantt"
)

// diamond is a small known schedule on two workers: load (task 1) feeds
// a (2) on cpu0 and b (3) on cpu1, and merge (4) waits for both. Through
// b the path is 2+4+2 = 8 ms, through a only 2+3+2 = 7 ms.
func diamond() gantt.Chart {
	ms := time.Millisecond
	return gantt.Chart{
		Rows: []gantt.Row{{Label: "cpu0"}, {Label: "cpu1"}},
		Bars: []gantt.Bar{
			{Row: 0, ID: 1, Name: "load", Start: 0, End: 2 * ms},
			{Row: 0, ID: 2, Name: "a", Start: 2 * ms, End: 5 * ms, Deps: []uint64{1}},
			{Row: 1, ID: 3, Name: "b", Start: 2 * ms, End: 6 * ms, Deps: []uint64{1}},
			{Row: 0, ID: 4, Name: "merge", Start: 6 * ms, End: 8 * ms, Deps: []uint64{2, 3}},
		},
		Critical: true,
	}
}

// Drawing the chart of a diamond-shaped task graph with its critical
// path, and reading back from the SVG what it shows: the summary, each
// row's utilization, the bars drawn (outlined if on the critical path)
// and the legend.
func ExampleWrite() {
	var svg strings.Builder
	if err := gantt.Write(&svg, diamond()); err != nil {
		fmt.Println(err)
		return
	}
	out := svg.String()

	// The title and the line under it.
	texts := regexp.MustCompile(`<text [^>]*>([^<]*)</text>`).FindAllStringSubmatch(out, -1)
	fmt.Println(texts[0][1])
	fmt.Println(texts[1][1])

	// Each row's busy time / span, right of the row: cpu0 then cpu1.
	for _, m := range regexp.MustCompile(`>(\d+\.\d%)<`).FindAllStringSubmatch(out, -1) {
		fmt.Println("busy:", m[1])
	}

	// One bar per run, its tooltip naming it; critical ones outlined.
	bars := regexp.MustCompile(`<rect (class="critical" )?x="[^"]*" y="[^"]*" width="[^"]*" height="16" fill="[^"]*"[^>]*><title>([^<]*)</title>`).FindAllStringSubmatch(out, -1)
	fmt.Println("bars:", len(bars))
	for _, b := range bars {
		fmt.Println(" ", b[2])
	}
	fmt.Println("critical edges:", strings.Count(out, `class="critical-edge"`))

	// The legend, in alphabetical order.
	entry := regexp.MustCompile(`^\w+: \d+ runs?, `)
	for _, t := range texts {
		if entry.MatchString(t[1]) {
			fmt.Println("legend:", t[1])
		}
	}
	// Output:
	// 4 tasks on 2 workers, 8.00 ms
	// critical path (outlined): 3 tasks, 8.00 ms of work, 100% of the span; hatched: idle; right: busy time / span
	// busy: 87.5%
	// busy: 50.0%
	// bars: 4
	//   a #2, 3.00 ms, 2.00 ms–5.00 ms
	//   load #1, 2.00 ms, 0–2.00 ms (critical path)
	//   b #3, 4.00 ms, 2.00 ms–6.00 ms (critical path)
	//   merge #4, 2.00 ms, 6.00 ms–8.00 ms (critical path)
	// critical edges: 2
	// legend: a: 1 run, 3.00 ms
	// legend: b: 1 run, 4.00 ms
	// legend: load: 1 run, 2.00 ms
	// legend: merge: 1 run, 2.00 ms
}

// The critical path of the diamond goes through b, the longer branch.
func ExampleCriticalPath() {
	fmt.Println(gantt.CriticalPath(diamond().Bars))
	// Output:
	// [1 3 4]
}

// Utilization counts overlapping runs once: two runs of 0–4 ms and
// 2–6 ms keep a row busy for 6 of the 8 ms.
func ExampleUtilization() {
	ms := time.Millisecond
	bars := []gantt.Bar{{Start: 0, End: 4 * ms}, {Start: 2 * ms, End: 6 * ms}}
	fmt.Println(gantt.Utilization(bars, 0, 8*ms))
	fmt.Println(gantt.Utilization(bars, 4*ms, 8*ms)) // only 4–6 ms of this window
	// Output:
	// 0.75
	// 0.5
}
