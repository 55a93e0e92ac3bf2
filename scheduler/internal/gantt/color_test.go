package gantt

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// knownNames are the codelet names of pz's apps (internal/apps) and the
// usual tile kernels of dense linear algebra (Cholesky, LU, QR) and
// vector work: 31 names, which must all look different in one chart.
var knownNames = []string{
	"cholesky_potrf_f32", "cholesky_trsm_f32", "cholesky_syrk_f32", "cholesky_gemm_f32",
	"cholesky_potrf_f64", "cholesky_trsm_f64", "cholesky_syrk_f64", "cholesky_gemm_f64",
	"gemm_tile_f32", "gemm_tile_f64",
	"potrf", "trsm", "syrk", "gemm", "trsmL", "trsmU", "getrf", "geqrt", "tsqrt", "ormqr", "tsmqr", "laswp",
	"gemv", "axpy", "dot", "scale", "copy", "fill", "zero", "init", "reduce",
}

// kernelFamilies are the kernels of one factorization.
var kernelFamilies = [][]string{
	{"potrf", "trsm", "syrk", "gemm"},
	{"getrf", "trsmL", "trsmU", "gemm", "laswp"},
	{"geqrt", "tsqrt", "ormqr", "tsmqr"},
	{"cholesky_potrf_f32", "cholesky_trsm_f32", "cholesky_syrk_f32", "cholesky_gemm_f32"},
	{"cholesky_potrf_f64", "cholesky_trsm_f64", "cholesky_syrk_f64", "cholesky_gemm_f64"},
}

// familyDeltaE is the least CIELAB distance between the colours of two
// kernels of one family: more than two lightness steps or a hue step.
const familyDeltaE = 25

// minDeltaE is the least CIELAB distance (CIE76) between two slots'
// colours: about 5 times a just-noticeable difference (2.3), clearly
// apart side by side.
const minDeltaE = 11

func TestColorFormat(t *testing.T) {
	hex := regexp.MustCompile(`^#[0-9a-f]{6}$`)
	for k := range Slots() {
		assert.Regexp(t, hex, SlotColor(k), "slot %d", k)
	}
	assert.Regexp(t, hex, Color(""))
	assert.Regexp(t, hex, BandColor("ctx"))
}

func TestSlotsApart(t *testing.T) {
	for i := range Slots() {
		for j := i + 1; j < Slots(); j++ {
			assert.GreaterOrEqual(t, deltaE(SlotColor(i), SlotColor(j)), float64(minDeltaE), "slots %d %s and %d %s", i, SlotColor(i), j, SlotColor(j))
		}
	}
}

// TestColorsDistinct is the regression test for the chart that drew gemm
// and trsmL in the same orange: a hash into a 10-colour palette gives
// 31 names collisions. Every pair of known names must be clearly apart.
func TestColorsDistinct(t *testing.T) {
	require.GreaterOrEqual(t, len(knownNames), 20)
	assertDistinct(t, Color, knownNames, minDeltaE)
}

// TestColorsOfOneKernelFamily: the kernels of one factorization appear
// in one chart, most often side by side; they get colours far apart.
func TestColorsOfOneKernelFamily(t *testing.T) {
	for _, family := range kernelFamilies {
		assertDistinct(t, Color, family, familyDeltaE)
	}
}

// TestFindColorSalt, with PZ_GANTT_FIND_SALT=1, lists the salts under
// which knownNames fall in different slots and each kernel family's
// colours are at least 25 apart: the search that chose colorSalt (the
// first 10^8 salts take a few minutes). Changing colorSalt changes every
// codelet's colour.
func TestFindColorSalt(t *testing.T) {
	if os.Getenv("PZ_GANTT_FIND_SALT") == "" {
		t.Skip("set PZ_GANTT_FIND_SALT=1 to search")
	}
	n := uint64(Slots())
	var de [hueSlots * lightLevels][hueSlots * lightLevels]float64
	for i := range de {
		for j := range de[i] {
			de[i][j] = deltaE(SlotColor(i), SlotColor(j))
		}
	}
	for salt := uint64(0); salt < 1e8; salt++ {
		used := make([]bool, n)
		ok := true
		for _, name := range knownNames {
			k := hash64(name, salt) % n
			ok = ok && !used[k]
			used[k] = true
		}
		for _, f := range kernelFamilies {
			for i := range f {
				for j := i + 1; j < len(f) && ok; j++ {
					ok = de[hash64(f[i], salt)%n][hash64(f[j], salt)%n] >= familyDeltaE
				}
			}
		}
		if ok {
			t.Log("salt", salt)
		}
	}
}

func assertDistinct(t *testing.T, color func(string) string, names []string, least float64) {
	t.Helper()
	for i, a := range names {
		for _, b := range names[i+1:] {
			ca, cb := color(a), color(b)
			assert.GreaterOrEqual(t, deltaE(ca, cb), least, "%s %s and %s %s", a, ca, b, cb)
		}
	}
}

// TestColorStable pins a few colours: a codelet keeps its colour from
// one chart to the next, and from one version of pz to the next; a
// change to the palette or the salt shows here.
func TestColorStable(t *testing.T) {
	for name, want := range map[string]string{
		"gemm":              "#ff909d",
		"trsmL":             "#6c8ee6",
		"potrf":             "#fa8dc9",
		"cholesky_gemm_f32": "#00825f",
		"cholesky_trsm_f32": "#bf4a5e",
	} {
		assert.Equal(t, want, Color(name), name)
	}
}

// hexLab converts "#rrggbb" to CIELAB (D65), for distance checks.
func hexLab(hex string) (l, a, b float64) {
	var r8, g8, b8 int
	fmt.Sscanf(hex, "#%02x%02x%02x", &r8, &g8, &b8)
	lin := func(c int) float64 {
		v := float64(c) / 255
		if v <= 0.04045 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	lr, lg, lb := lin(r8), lin(g8), lin(b8)
	x := (0.4124564*lr + 0.3575761*lg + 0.1804375*lb) / 0.95047
	y := 0.2126729*lr + 0.7151522*lg + 0.0721750*lb
	z := (0.0193339*lr + 0.1191920*lg + 0.9503041*lb) / 1.08883
	f := func(t float64) float64 {
		const d = 6.0 / 29
		if t > d*d*d {
			return math.Cbrt(t)
		}
		return t/(3*d*d) + 4.0/29
	}
	fx, fy, fz := f(x), f(y), f(z)
	return 116*fy - 16, 500 * (fx - fy), 200 * (fy - fz)
}

// deltaE is the CIE76 distance between two "#rrggbb" colours.
func deltaE(c1, c2 string) float64 {
	l1, a1, b1 := hexLab(c1)
	l2, a2, b2 := hexLab(c2)
	return math.Sqrt((l1-l2)*(l1-l2) + (a1-a2)*(a1-a2) + (b1-b2)*(b1-b2))
}

// TestBandColorsDistinct: the states of one chart's bands (the
// scheduler's contexts) get colours that cannot be confused - distinct,
// at least 27 apart in CIELAB, and apart from the neutral grey - for the
// names of a user trial's charts and larger sets; a name keeps its colour
// from chart to chart unless a name sorted before it took it.
func TestBandColorsDistinct(t *testing.T) {
	for i, a := range bandPalette {
		assert.GreaterOrEqual(t, deltaE(a, NeutralBand), 30.0, "%s vs the neutral grey", a)
		for _, b := range bandPalette[i+1:] {
			assert.GreaterOrEqual(t, deltaE(a, b), 27.0, "%s vs %s", a, b)
		}
	}
	const neutral = "global"
	sets := [][]string{
		{"left", "right"}, {"A", "B"}, {"small", "large"}, {"solver1", "solver2"},
		{"A", "B", "C", "D"}, {"c1", "c2", "c3"}, {"B.sub", "B", "E", "F"},
		{"ctx1", "ctx2", "ctx3", "ctx4", "ctx5", "ctx6", "ctx7", "ctx8", "ctx9", "ctx10"},
	}
	for _, set := range sets {
		names := append([]string{neutral}, set...)
		cs := BandColors(append(names, set[0]), neutral) // repeated names are one state
		require.Len(t, cs, len(names), "%v", set)
		assert.Equal(t, NeutralBand, cs[neutral])
		for i, a := range set {
			for _, b := range set[i+1:] {
				assert.GreaterOrEqual(t, deltaE(cs[a], cs[b]), 27.0, "%v: %s %s and %s %s", set, a, cs[a], b, cs[b])
			}
			assert.Contains(t, bandPalette, cs[a])
		}
		for _, n := range set {
			if alone := BandColors([]string{n}, neutral)[n]; cs[n] != alone {
				// Only when a name sorted before it had taken its colour.
				taken := slices.ContainsFunc(set, func(m string) bool { return m < n && cs[m] == alone })
				assert.True(t, taken, "%v: %s changed colour (%s alone, %s here)", set, n, alone, cs[n])
			}
		}
	}
	// More names than colours: each colour serves at most twice.
	var many []string
	for i := range 2 * len(bandPalette) {
		many = append(many, fmt.Sprintf("ctx%d", i))
	}
	uses := map[string]int{}
	for _, c := range BandColors(many, neutral) {
		uses[c]++
	}
	assert.Len(t, uses, len(bandPalette))
	for c, n := range uses {
		assert.Equal(t, 2, n, c)
	}
}
