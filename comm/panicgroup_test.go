package comm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// TestRankErrorsGroupPanics: ranks that panic alike are one group, with
// one stack (its first rank's, so labelled), as ranks that return alike
// errors are; each rank's error keeps its own stack. Before, every
// panic's message carried its stack, different on every rank, so four
// ranks panicking alike gave four groups and 7.6 KB of text.
func TestRankErrorsGroupPanics(t *testing.T) {
	err := local.Run(context.Background(), 4, func(ctx context.Context, c comm.Comm) error {
		panic("bad input")
	})
	require.Error(t, err)
	msg := err.Error()
	assert.Equal(t, 1, strings.Count(msg, "stacktrace"), msg)
	assert.Equal(t, 1, strings.Count(msg, "bad input"), msg)
	first := strings.SplitN(msg, "\n", 2)[0]
	assert.Contains(t, first, "ranks 0-3 (4 ranks)")
	assert.Regexp(t, `\nstacktrace \(rank \d\):\n`, msg)
	var res comm.RankErrors
	require.ErrorAs(t, err, &res)
	require.Len(t, res, 4)
	for _, e := range res {
		var pe *comm.PanicError
		require.ErrorAs(t, e, &pe)
		assert.Contains(t, e.Error(), "stacktrace:", "each rank's own error keeps its stack")
	}

	// Different panics are different groups, each with its stack; a
	// rank's error is its own.
	err = local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 2 {
			panic("other")
		}
		panic("bad input")
	})
	require.Error(t, err)
	msg = err.Error()
	assert.Equal(t, 2, strings.Count(msg, "stacktrace"), msg)
	assert.Contains(t, msg, "ranks 0-1: panic: bad input\nstacktrace (rank ")
	assert.Contains(t, msg, "rank 2: panic: other\nstacktrace:\n")
	assert.NotContains(t, msg, "\n\n")
}
