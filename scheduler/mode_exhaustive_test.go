package scheduler_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestEveryModeValueValidated: validate's fast path takes a mode m as R,
// W or RW when m-1 < ModeRW (Mode is a uint8, so 0 wraps to 255); every
// one of the 256 values must still be accepted exactly when it is a mode
// (R, W, RW, Scratch, Redux, W|Commute, RW|Commute) and refused with
// ErrInvalidMode otherwise: 0 and combined flags (R|Scratch, W|Redux,
// Commute alone, R|Commute, bits above Commute) included.
func TestEveryModeValueValidated(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	var v float64
	h, err := s.RegisterValue(&v)
	require.NoError(t, err)
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, h.SetReduction(nop, nop))
	accepted := 0
	for m := range 256 {
		mode := scheduler.Mode(m)
		valid := !strings.HasPrefix(mode.String(), "Mode(") // String names the modes only
		err := s.Submit(ctx, nop, scheduler.Data(h, mode))
		if valid {
			accepted++
			assert.NoError(t, err, "mode %v (%#x)", mode, m)
		} else {
			assert.ErrorIs(t, err, scheduler.ErrInvalidMode, "mode %#x", m)
		}
	}
	assert.Equal(t, 7, accepted)
	require.NoError(t, s.WaitAll(ctx))
}
