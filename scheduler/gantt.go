package scheduler

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"io"
	"sort"
	"strings"
	"time"
)

// codeletColor picks a stable color per codelet name.
func codeletColor(name string) string {
	palette := []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}
	h := fnv.New32a()
	h.Write([]byte(name))
	return palette[h.Sum32()%uint32(len(palette))]
}

// writeGantt draws one row per worker and one rectangle per task.
func writeGantt(out io.Writer, evs []traceEvent, nworkers int, spans []ctxSpan) error {
	const width, rowH, left, top = 1200.0, 24.0, 60.0, 20.0
	var t0, t1 time.Duration
	for i, e := range evs {
		if i == 0 || e.start < t0 {
			t0 = e.start
		}
		if e.end > t1 {
			t1 = e.end
		}
	}
	span := float64(t1 - t0)
	if span <= 0 {
		span = 1
	}
	names := map[string]bool{}
	for _, e := range evs {
		names[e.name] = true
	}
	legend := make([]string, 0, len(names))
	for n := range names {
		legend = append(legend, n)
	}
	sort.Strings(legend)
	height := top + rowH*float64(nworkers) + 30 + 16*float64(max(len(legend), len(contextNames(spans))))
	bw := bufio.NewWriter(out)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width+left+20, height)
	fmt.Fprintf(bw, `<text x="%.0f" y="14">%d tasks, %.3f ms</text>`+"\n", left, len(evs), span/1e6)
	for w := 0; w < nworkers; w++ {
		y := top + rowH*float64(w)
		fmt.Fprintf(bw, `<text x="4" y="%.1f">cpu%d</text><rect x="%.0f" y="%.1f" width="%.0f" height="%.0f" fill="#f4f4f4"/>`+"\n", y+rowH*0.65, w, left, y, width, rowH-2)
	}
	for _, e := range evs {
		x := left + width*float64(e.start-t0)/span
		wd := max(width*float64(e.end-e.start)/span, 0.2)
		y := top + rowH*float64(e.worker)
		fmt.Fprintf(bw, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.0f" fill="%s"><title>%s #%d</title></rect>`+"\n",
			x, y, wd, rowH-2, codeletColor(e.name), escapeXML(e.name), e.id)
	}
	y := top + rowH*float64(nworkers) + 20
	for i, n := range legend {
		yy := y + 16*float64(i)
		fmt.Fprintf(bw, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			left, yy-10, codeletColor(n), left+16, yy, escapeXML(n))
	}
	drawContexts(bw, spans, t0, span, left, width, top, rowH, y)
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

func escapeXML(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	return r.Replace(s)
}

// drawContexts draws, under each worker's row of the Gantt chart, a band
// colored by the worker's context over time, a tick at each change, and
// a legend of the contexts at legendY.
func drawContexts(bw *bufio.Writer, spans []ctxSpan, t0 time.Duration, span, left, width, top, rowH, legendY float64) {
	for _, c := range spans {
		x0 := left + width*float64(max(c.start-t0, 0))/span
		x1 := left + width*float64(max(c.end-t0, 0))/span
		x0, x1 = min(x0, left+width), min(x1, left+width)
		if x1 <= x0 {
			continue
		}
		y := top + rowH*float64(c.worker) + rowH - 6
		fmt.Fprintf(bw, `<rect x="%.2f" y="%.1f" width="%.2f" height="4" fill="%s"><title>context %s</title></rect>`+"\n",
			x0, y, x1-x0, contextColor(c.name), escapeXML(c.name))
		if c.start > t0 {
			fmt.Fprintf(bw, `<line x1="%.2f" x2="%.2f" y1="%.1f" y2="%.1f" stroke="black" stroke-width="1"/>`+"\n",
				x0, x0, top+rowH*float64(c.worker), top+rowH*float64(c.worker)+rowH-2)
		}
	}
	for i, n := range contextNames(spans) {
		yy := legendY + 16*float64(i)
		fmt.Fprintf(bw, `<rect x="%.0f" y="%.0f" width="12" height="4" fill="%s"/><text x="%.0f" y="%.0f">context %s</text>`+"\n",
			left+400, yy-6, contextColor(n), left+416, yy, escapeXML(n))
	}
}

// contextColor picks a stable color per context name, from a palette
// distinct from the codelets'.
func contextColor(name string) string {
	palette := []string{"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"}
	if name == GlobalName {
		return "#999999"
	}
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return palette[h%uint32(len(palette))]
}
