package scheduler

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hexLab converts "#rrggbb" (sRGB) to CIELAB (D65 white).
func hexLab(t *testing.T, c string) [3]float64 {
	t.Helper()
	var r, g, b int
	_, err := fmt.Sscanf(c, "#%02x%02x%02x", &r, &g, &b)
	require.NoError(t, err, c)
	lin := func(v int) float64 {
		x := float64(v) / 255
		if x <= 0.04045 {
			return x / 12.92
		}
		return math.Pow((x+0.055)/1.055, 2.4)
	}
	lr, lg, lb := lin(r), lin(g), lin(b)
	x := (0.4124564*lr + 0.3575761*lg + 0.1804375*lb) / 0.95047
	y := 0.2126729*lr + 0.7151522*lg + 0.0721750*lb
	z := (0.0193339*lr + 0.1191920*lg + 0.9503041*lb) / 1.08883
	f := func(v float64) float64 {
		const d = 6.0 / 29
		if v > d*d*d {
			return math.Cbrt(v)
		}
		return v/(3*d*d) + 4.0/29
	}
	return [3]float64{116*f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))}
}

// deltaE is the CIE76 colour difference of two "#rrggbb" colours.
func deltaE(t *testing.T, a, b string) float64 {
	la, lb := hexLab(t, a), hexLab(t, b)
	return math.Sqrt((la[0]-lb[0])*(la[0]-lb[0]) + (la[1]-lb[1])*(la[1]-lb[1]) + (la[2]-lb[2])*(la[2]-lb[2]))
}

// TestContextColorsDistinct: the contexts of one chart get colours that
// cannot be confused - distinct, at least 27 apart in CIELAB, and apart
// from the global context's grey - for the names of the user trial's
// charts and larger sets; a name keeps its colour from chart to chart
// unless a name sorted before it took it.
func TestContextColorsDistinct(t *testing.T) {
	for i, a := range contextPalette {
		assert.GreaterOrEqual(t, deltaE(t, a, globalColor), 30.0, "%s vs the global grey", a)
		for _, b := range contextPalette[i+1:] {
			assert.GreaterOrEqual(t, deltaE(t, a, b), 27.0, "%s vs %s", a, b)
		}
	}
	sets := [][]string{
		{"left", "right"}, {"A", "B"}, {"small", "large"}, {"solver1", "solver2"},
		{"A", "B", "C", "D"}, {"c1", "c2", "c3"}, {"B.sub", "B", "E", "F"},
		{"ctx1", "ctx2", "ctx3", "ctx4", "ctx5", "ctx6", "ctx7", "ctx8", "ctx9", "ctx10"},
	}
	for _, set := range sets {
		names := append([]string{GlobalName}, set...)
		cs := contextColors(append(names, set[0])) // repeated names are one context
		require.Len(t, cs, len(names), "%v", set)
		assert.Equal(t, globalColor, cs[GlobalName])
		for i, a := range set {
			for _, b := range set[i+1:] {
				assert.NotEqual(t, cs[a], cs[b], "%v: %s and %s", set, a, b)
				assert.GreaterOrEqual(t, deltaE(t, cs[a], cs[b]), 27.0, "%v: %s %s and %s %s", set, a, cs[a], b, cs[b])
			}
			assert.Contains(t, contextPalette, cs[a])
		}
		for _, n := range set {
			alone := contextColors([]string{n})[n]
			if cs[n] != alone {
				// Only when a name sorted before it had taken its colour.
				taken := false
				for _, m := range set {
					if m < n && cs[m] == alone {
						taken = true
					}
				}
				assert.True(t, taken, "%v: %s changed colour (%s alone, %s here)", set, n, alone, cs[n])
			}
		}
	}
	// More contexts than colours: each colour serves at most twice.
	var many []string
	for i := range 2 * len(contextPalette) {
		many = append(many, fmt.Sprintf("ctx%d", i))
	}
	uses := map[string]int{}
	for _, c := range contextColors(many) {
		uses[c]++
	}
	assert.Len(t, uses, len(contextPalette))
	for c, n := range uses {
		assert.Equal(t, 2, n, c)
	}
}
