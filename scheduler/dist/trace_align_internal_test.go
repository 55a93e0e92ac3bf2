package dist

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Where the clock estimate is off within its uncertainty, a receive may
// still end before its send started: align moves that receive's end to
// just after the send's start, counts it, and the merged trace's arrows
// (send -> receive, receive -> the task that used the data) then end
// after they start. Here rank 1's clock is 1000 ns ahead, estimated 1200
// (± 300): its receive, which ended 150 ns after the send started, would
// end 50 ns before it.
func TestAlignClampsReceiveBeforeSend(t *testing.T) {
	all := []rankTrace{
		{Rank: 0, Epoch: 10_000, Workers: []string{"cpu0"},
			Tasks: []taskRecord{{Name: "produce", Worker: 0, Team: 1, Start: 0, End: 100}},
			Xfers: []xferRecord{{ID: 7, Handle: `"x"`, Peer: 1, Send: true, Start: 100, End: 400, Task: 2, Deps: []uint64{1}}}},
		{Rank: 1, Epoch: 10_000 + 1000, Workers: []string{"cpu0"},
			Tasks: []taskRecord{{Name: "consume", Worker: 0, Team: 5, Start: 260, End: 500, Deps: []uint64{4}}},
			Xfers: []xferRecord{{ID: 7, Handle: `"x"`, Peer: 0, Start: 0, End: 250, Task: 4}}},
	}
	clocks := []clockEstimate{{}, {Offset: 1200, Uncertainty: 300}}
	n := align(all, clocks)
	require.Equal(t, 1, n, "one receive ended before its send started")
	assert.Equal(t, int64(10_000-200), all[1].Epoch, "rank 1's epoch on rank 0's clock")
	sendStart := all[0].Epoch + all[0].Xfers[0].Start
	recvEnd := all[1].Epoch + all[1].Xfers[0].End
	assert.Equal(t, sendStart+2, recvEnd, "the receive's end, 2 ns after the send's start")
	assert.Equal(t, int64(0), all[1].Xfers[0].Start, "the receive's start stays")
	assert.Equal(t, 0, align(all, []clockEstimate{{}, {}}), "nothing more to move")

	var buf bytes.Buffer
	require.NoError(t, writeMergedTrace(&buf, all, &clockSync{Clocks: clocks, Clamped: n}))
	var tr struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Ts   float64 `json:"ts"`
			ID   uint64  `json:"id"`
		} `json:"traceEvents"`
		Metadata map[string]any `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &tr))
	ends := map[uint64][2]float64{}
	names := map[string]bool{}
	for _, e := range tr.TraceEvents {
		switch e.Ph {
		case "s":
			x := ends[e.ID]
			x[0] = e.Ts
			ends[e.ID] = x
			names[e.Name] = true
		case "f":
			x := ends[e.ID]
			x[1] = e.Ts
			ends[e.ID] = x
		}
	}
	assert.Equal(t, map[string]bool{"produced": true, "transfer": true, "received": true}, names)
	for id, x := range ends {
		assert.GreaterOrEqual(t, x[1], x[0], "flow %d ends before it starts", id)
	}
	assert.EqualValues(t, 1, tr.Metadata["clamped_receives"])
	offs, _ := tr.Metadata["clock_offsets"].([]any)
	require.Len(t, offs, 2)
	assert.Equal(t, map[string]any{"rank": 1.0, "offset_ns": 1200.0, "uncertainty_ns": 300.0}, offs[1])
}
