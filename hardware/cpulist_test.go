package hardware_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
)

func TestParseCPUList(t *testing.T) {
	cases := []struct {
		in   string
		want []int
		fail bool
	}{
		{"0", []int{0}, false},
		{"0-1\n", []int{0, 1}, false},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}, false},
		{"8,0-1,1", []int{0, 1, 8}, false},
		{" 2 - 3 ", nil, true},
		{"", nil, false},
		{"3-1", nil, true},
		{"a", nil, true},
		{"0-", nil, true},
		{"-1", nil, true},
		{"0-4000000000", nil, true},
		{"1,,2", nil, true},
	}
	for i, c := range cases {
		got, err := hardware.ParseCPUList(c.in)
		if c.fail {
			assert.ErrorIs(t, err, hardware.ErrBadCPUList, "case %d %q", i, c.in)
			continue
		}
		require.NoError(t, err, "case %d %q", i, c.in)
		assert.Equal(t, c.want, got, "case %d %q", i, c.in)
	}
}

func TestFormatCPUList(t *testing.T) {
	assert.Equal(t, "", hardware.FormatCPUList(nil))
	assert.Equal(t, "0-3,8,10-11", hardware.FormatCPUList([]int{11, 10, 8, 3, 2, 1, 0, 2}))
	assert.Equal(t, "5", hardware.FormatCPUList([]int{5}))
}

// TestCPUListRoundTrip checks Format against Parse on random sets.
func TestCPUListRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		var set []int
		for c := range 64 {
			if rng.IntN(3) == 0 {
				set = append(set, c)
			}
		}
		got, err := hardware.ParseCPUList(hardware.FormatCPUList(set))
		require.NoError(t, err, "case %d", i)
		if len(set) == 0 {
			assert.Empty(t, got, "case %d", i)
			continue
		}
		assert.True(t, slices.Equal(set, got), "case %d: %v -> %v", i, set, got)
	}
}
