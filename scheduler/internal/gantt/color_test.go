package gantt

import (
	"regexp"
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
	for _, family := range [][]string{
		{"potrf", "trsm", "syrk", "gemm"},
		{"getrf", "trsmL", "trsmU", "gemm", "laswp"},
		{"geqrt", "tsqrt", "ormqr", "tsmqr"},
		{"cholesky_potrf_f32", "cholesky_trsm_f32", "cholesky_syrk_f32", "cholesky_gemm_f32"},
		{"cholesky_potrf_f64", "cholesky_trsm_f64", "cholesky_syrk_f64", "cholesky_gemm_f64"},
	} {
		assertDistinct(t, Color, family, 25)
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
// one chart to the next, and from one version of pz to the next.
func TestColorStable(t *testing.T) {
	for name, want := range map[string]string{
		"gemm":  Color("gemm"),
		"trsmL": Color("trsmL"),
	} {
		assert.Equal(t, want, Color(name), name)
	}
}
