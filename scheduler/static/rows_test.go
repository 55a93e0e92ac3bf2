package static

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRowsWithoutFrameLimit: a runnable keeps as many rows as the frame
// limit gives it, at most maxRows, and maxRows without a limit (as
// docs/static-schedules.md says: 131072, about two minutes at 1 kHz); a
// run without a limit kept only 65536.
func TestRowsWithoutFrameLimit(t *testing.T) {
	plan := compileString(t, threeClients)
	for _, c := range []struct {
		frames int64
		want   int
	}{
		{0, maxRows},
		{10, 10},
		{maxRows + 1, maxRows},
	} {
		e := newExecutor(plan, "a", nil, nil, c.frames, false, nil)
		for _, x := range e.runs {
			assert.Len(t, x.rec.rr.Seq, c.want, "frames %d, runnable %s", c.frames, x.r.Name)
		}
	}
	assert.Equal(t, 131072, maxRows, "the documented bound")
}
