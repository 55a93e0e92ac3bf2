package dist

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler/internal/gantt"
)

// overlappingTransfers is two ranks' trace where rank 0 has two receives
// posted at once that end in the order they started (partly overlapping,
// as receives posted early for tiles produced later do) and sends one
// tile to rank 1 while they are pending.
func overlappingTransfers() []rankTrace {
	return []rankTrace{
		{Rank: 0, Epoch: 1000, Workers: []string{"cpu0"},
			Tasks: []taskRecord{{Name: "gemm", Worker: 0, Start: 0, End: 500}},
			Xfers: []xferRecord{
				{ID: 1, Handle: `"A(1,0)"`, Peer: 1, Start: 0, End: 300},
				{ID: 2, Handle: `"A(1,1)"`, Peer: 1, Start: 100, End: 400},
				{ID: 3, Handle: `"A(0,0)"`, Peer: 1, Send: true, Start: 150, End: 200},
			}},
		{Rank: 1, Epoch: 1000, Workers: []string{"cpu0"},
			Tasks: []taskRecord{{Name: "trsm", Worker: 0, Start: 0, End: 250}},
			Xfers: []xferRecord{
				{ID: 1, Handle: `"A(1,0)"`, Peer: 0, Send: true, Start: 260, End: 290},
				{ID: 2, Handle: `"A(1,1)"`, Peer: 0, Send: true, Start: 350, End: 390},
				{ID: 3, Handle: `"A(0,0)"`, Peer: 0, Start: 20, End: 210},
			}},
	}
}

// Perfetto drops or misdraws complete ("X") events of one thread that
// overlap without nesting (the JSON trace format forbids them), so the
// merged trace puts a rank's transfers that overlap on threads of their
// own, and every flow arrow starts and ends on a slice of its thread.
func TestMergedTraceTransfersDoNotOverlap(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, writeMergedTrace(&buf, overlappingTransfers(), nil))
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Ts   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			Pid  int            `json:"pid"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &tr))
	type thread struct{ pid, tid int }
	type span struct {
		name       string
		start, end float64
	}
	slices := map[thread][]span{}
	names := map[thread]string{}
	transfers := 0
	for _, e := range tr.TraceEvents {
		th := thread{e.Pid, e.Tid}
		switch e.Ph {
		case "X":
			for _, o := range slices[th] {
				assert.False(t, e.Ts < o.end && o.start < e.Ts+e.Dur,
					"rank %d thread %q: %q [%g, %g] overlaps %q [%g, %g]", e.Pid, names[th], e.Name, e.Ts, e.Ts+e.Dur, o.name, o.start, o.end)
			}
			slices[th] = append(slices[th], span{e.Name, e.Ts, e.Ts + e.Dur})
			if _, ok := e.Args["transfer"]; ok {
				transfers++
			}
		case "M":
			if e.Name == "thread_name" {
				names[th] = fmt.Sprint(e.Args["name"])
			}
		}
	}
	assert.Equal(t, 6, transfers, "every transfer, once on each end")
	flows := 0
	for _, e := range tr.TraceEvents {
		if e.Ph != "s" && e.Ph != "f" {
			continue
		}
		flows++
		th := thread{e.Pid, e.Tid}
		on := false
		for _, s := range slices[th] {
			on = on || (s.start <= e.Ts && e.Ts <= s.end)
		}
		assert.True(t, on, "flow %q at %g on rank %d thread %d (%q) has no slice of its thread there", e.Ph, e.Ts, e.Pid, e.Tid, names[th])
		assert.NotEmpty(t, names[th], "flow %q on rank %d: thread %d has no name", e.Ph, e.Pid, e.Tid)
	}
	assert.Equal(t, 6, flows, "an arrow per message")
}

// In the Gantt chart a rank's sends are not drawn over by its receives
// (nor the other way round): bars of different kinds never share a row
// where they overlap, so each send a rank made while receives were
// pending is visible.
func TestMergedGanttShowsSendsUnderPendingReceives(t *testing.T) {
	c := mergedGantt(overlappingTransfers())
	for i, a := range c.Bars {
		for _, b := range c.Bars[i+1:] {
			if a.Row == b.Row && a.Name != b.Name {
				assert.False(t, a.Start < b.End && b.Start < a.End, "row %q: %s [%v, %v] and %s [%v, %v] overlap",
					c.Rows[a.Row].Label, a.Name, a.Start, a.End, b.Name, b.Start, b.End)
			}
		}
	}
	var labels []string
	for _, r := range c.Rows {
		labels = append(labels, r.Label)
	}
	assert.Equal(t, []string{"rank 0 cpu0", "rank 0 receives", "rank 0 sends", "rank 1 cpu0", "rank 1 receives", "rank 1 sends"}, labels)
}

// A codelet's colour in the merged chart does not depend on the
// transfers, nor on the ranks' shares of the work: the codelets take the
// palette in the order rank 0 submitted their first tasks, then those
// rank 0 did not run in the order of rank 1's..., as in a one-rank chart,
// and the sends, receives and copies come after them. Before, bars were
// numbered rank after rank in start order with each rank's transfers in
// between, so rank 0's "send" and "recv" took palette colours ahead of
// rank 1's codelets: pzrun -n 4 cholesky drew gemm pink, pzrun -n 2
// cholesky yellow.
func TestMergedGanttCodeletColorsIgnoreTransfers(t *testing.T) {
	all := []rankTrace{
		{Rank: 0, Epoch: 1000, Workers: []string{"cpu0"},
			Tasks: []taskRecord{
				{Name: "fill", Worker: 0, Team: 1, Start: 0, End: 10},
				{Name: "fill", Worker: 0, Team: 2, Start: 10, End: 15},
				{Name: "potrf", Worker: 0, Team: 3, Start: 15, End: 20},
			},
			Xfers: []xferRecord{
				{ID: 1, Handle: `"A(0,0)"`, Peer: 1, Send: true, Start: 20, End: 30},
				{ID: 2, Handle: `"A(1,0)"`, Peer: 1, Start: 20, End: 80},
			},
			Copies: []copyRecord{{Link: "ram→sim0", Kind: "copy in", Start: 0, End: 5}}},
		{Rank: 1, Epoch: 1000, Workers: []string{"cpu0"},
			Tasks: []taskRecord{
				{Name: "fill", Worker: 0, Team: 1, Start: 0, End: 10},
				{Name: "syrk", Worker: 0, Team: 2, Start: 10, End: 20},
				// Submitted before trsm, started after it.
				{Name: "gemm", Worker: 0, Team: 3, Start: 60, End: 70},
				{Name: "trsm", Worker: 0, Team: 4, Start: 40, End: 60},
			},
			Xfers: []xferRecord{
				{ID: 1, Handle: `"A(0,0)"`, Peer: 0, Start: 5, End: 30},
				{ID: 2, Handle: `"A(1,0)"`, Peer: 0, Send: true, Start: 60, End: 80},
			}},
	}
	c := mergedGantt(all)
	got := gantt.Colors(c.Bars, c.FirstIDs)
	codelets := []string{"fill", "potrf", "syrk", "gemm", "trsm"}
	var oneRank []gantt.Bar
	for i, n := range append(codelets, "copy in", "recv", "send") {
		oneRank = append(oneRank, gantt.Bar{ID: uint64(i + 1), Name: n})
	}
	want := gantt.Colors(oneRank, nil)
	var codeletColors []string
	for _, n := range codelets {
		assert.Equal(t, want[n], got[n], "%s", n)
		codeletColors = append(codeletColors, got[n])
	}
	for _, n := range []string{"copy in", "recv", "send"} {
		assert.NotContains(t, codeletColors, got[n], "%s has a codelet's colour", n)
	}
}

// The merged chart's title counts messages as sends and receives, not
// as copies: pzrun -n 4 cholesky -trace said '112 copies' where the run
// said '56 tiles sent' (each a send on one rank and a receive on
// another), and with -sim 2 it added them to the device copies ('284
// copies'). Device copies are still copies.
func TestMergedGanttTitleCountsMessages(t *testing.T) {
	all := []rankTrace{
		{Rank: 0, Epoch: 1000, Workers: []string{"cpu0"},
			Tasks: []taskRecord{{Name: "potrf", Worker: 0, Team: 1, Start: 0, End: 10}},
			Xfers: []xferRecord{
				{ID: 1, Handle: `"A(0,0)"`, Peer: 1, Send: true, Start: 10, End: 20},
				{ID: 2, Handle: `"A(1,0)"`, Peer: 1, Start: 5, End: 40},
			},
			Copies: []copyRecord{{Link: "ram→sim0", Kind: "copy in", Start: 0, End: 5}, {Link: "sim0→ram", Kind: "copy out", Start: 10, End: 12}}},
		{Rank: 1, Epoch: 1000, Workers: []string{"cpu0"},
			Tasks: []taskRecord{{Name: "trsm", Worker: 0, Team: 1, Start: 20, End: 30}},
			Xfers: []xferRecord{
				{ID: 1, Handle: `"A(0,0)"`, Peer: 0, Start: 5, End: 20},
				{ID: 2, Handle: `"A(1,0)"`, Peer: 0, Send: true, Start: 30, End: 40},
			}},
	}
	var svg bytes.Buffer
	require.NoError(t, gantt.Write(&svg, mergedGantt(all)))
	assert.Contains(t, svg.String(), ">2 tasks on 2 workers, 40.0 ns; 2 receives, 2 sends, 2 copies<")
}
