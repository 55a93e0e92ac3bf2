package runtimeview_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/runtimeview"
)

// TestRunNamesCloseErrorOnce: a function that returns rt.Close()'s error
// has it in Run's error once (helper-143's trial: twice, as Run's own
// Close returned the same error again and the two were joined); an error
// of its own and Close's are both there.
func TestRunNamesCloseErrorOnce(t *testing.T) {
	for _, n := range []int{1, 2} {
		err := runtimeview.Run(context.Background(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			rt.StackCallback(func() error { return errors.New("flush failed") })
			return rt.Close()
		})
		require.Error(t, err)
		// Ranks that failed alike are one line (comm.RankErrors).
		assert.Equal(t, 1, strings.Count(err.Error(), "flush failed"), "%v", err)

		err = runtimeview.Run(context.Background(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			rt.StackCallback(func() error { return errors.New("flush failed") })
			return errors.New("solver diverged")
		})
		require.Error(t, err)
		assert.Equal(t, 1, strings.Count(err.Error(), "flush failed"), "%v", err)
		assert.Equal(t, 1, strings.Count(err.Error(), "solver diverged"), "%v", err)
	}
}
