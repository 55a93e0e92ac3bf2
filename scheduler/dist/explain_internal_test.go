package dist

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// What a stalled rank waits for lists its receives first (each waits for
// a rank to send), then its sends, and the bracket counts each kind: the
// sends sorted first, under "(receives from rank 1)", once read as
// receives.
func TestExplainOrdersReceivesFirst(t *testing.T) {
	d := &Scheduler{rank: 0, xfers: map[uint64]inflight{
		1: {what: `sending handle "A(11,0)" (#66, owner 0) to rank 1`, from: -1},
		2: {what: `receiving handle "A(3,1)" (#9, owner 1) from rank 1`, from: 1},
		3: {what: `sending handle "A(12,0)" (#70, owner 0) to rank 1`, from: -1},
	}}
	assert.Equal(t, `rank 0 waits for 3 transfers (1 receive from rank 1, 2 sends): waits for rank 1 to send handle "A(3,1)" (#9, owner 1); `+
		`sending handle "A(11,0)" (#66, owner 0) to rank 1; sending handle "A(12,0)" (#70, owner 0) to rank 1`, d.explain())
	d.xfers = map[uint64]inflight{2: d.xfers[2]}
	assert.Equal(t, `rank 0 waits for 1 transfer (1 receive from rank 1): waits for rank 1 to send handle "A(3,1)" (#9, owner 1)`, d.explain())
	d.xfers = map[uint64]inflight{}
	assert.Contains(t, d.explain(), "rank 0 has no transfer in flight")
}
