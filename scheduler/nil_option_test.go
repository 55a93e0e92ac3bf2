package scheduler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestNewRefusesNilOption: a nil Option (a variable left unset) is an
// error naming its position, not a nil-function panic inside New.
func TestNewRefusesNilOption(t *testing.T) {
	var unset scheduler.Option
	s, err := scheduler.New(context.Background(), scheduler.WithWorkers(1), unset)
	if s != nil {
		s.Close()
	}
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	require.ErrorContains(t, err, "option 2 of 2 is nil")
}
