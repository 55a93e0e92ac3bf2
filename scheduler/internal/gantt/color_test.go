package gantt

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// TestSlotCells: the slots are the grid's cells far enough from the
// palette and the failure red, none left out.
func TestSlotCells(t *testing.T) {
	var cells []int
	for c := range hueSlots * lightLevels {
		if isSlotCell(c) {
			cells = append(cells, c)
		}
	}
	assert.Equal(t, cells, slotCells[:])
	assert.GreaterOrEqual(t, Slots(), len(knownNames), "a slot for each known name")
}

// TestSlotsAvoidPaletteAndFailure is the regression test for a chart
// whose ninth codelet, "fails", was drawn in #438032 beside the
// palette's green #59a14f (ΔE 12.5), and one whose "panics" was drawn
// in a red (#bf4a5e) like the failed tasks' outline: every slot's
// colour is clearly apart from the palette's and from the failure red,
// as in a chart with more codelets than the palette.
func TestSlotsAvoidPaletteAndFailure(t *testing.T) {
	for k := range Slots() {
		c := SlotColor(k)
		assert.GreaterOrEqual(t, deltaE(c, failedColor), float64(failedApart), "slot %d %s vs the failure red", k, c)
		for _, p := range codeletPalette {
			assert.GreaterOrEqual(t, deltaE(c, p), float64(paletteApart), "slot %d %s vs palette %s", k, c, p)
		}
	}
	var bars []Bar
	names := []string{"k0", "k1", "kernel_2", "k3", "k4", "k5", "k6", "k7", "fails", "panics", "ok", "retry"}
	for i, n := range names {
		bars = append(bars, Bar{ID: uint64(i), Name: n})
	}
	cs := Colors(bars, nil)
	for _, n := range names[len(codeletPalette):] {
		assert.GreaterOrEqual(t, deltaE(cs[n], failedColor), float64(failedApart), "%s %s vs the failure red", n, cs[n])
		for _, p := range names[:len(codeletPalette)] {
			assert.GreaterOrEqual(t, deltaE(cs[n], cs[p]), float64(paletteApart), "%s %s vs %s %s", n, cs[n], p, cs[p])
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
// in one chart, most often side by side; they get colours far apart,
// from the palette (Colors), and far apart from their slots' colours
// too (Color), which a chart with more codelets than the palette gives.
func TestColorsOfOneKernelFamily(t *testing.T) {
	for _, family := range kernelFamilies {
		var bars []Bar
		for i, n := range family {
			bars = append(bars, Bar{ID: uint64(i), Name: n})
		}
		cs := Colors(bars, nil)
		assertDistinct(t, func(n string) string { return cs[n] }, family, paletteDeltaE)
		assertDistinct(t, Color, family, familyDeltaE)
	}
}

// paletteDeltaE is the least CIELAB distance between two colours of the
// codelet palette, and hueApart the least difference of the hues of the
// first four (the kernels of a Cholesky): the slots' colours of potrf and
// gemm, 25 apart and 30° apart, both looked pink.
const (
	paletteDeltaE = 30
	hueApart      = 60
)

// TestPaletteApart: the palette's colours are far apart, far from the
// failed tasks' red outline, and dark text is legible on each.
func TestPaletteApart(t *testing.T) {
	for i, a := range codeletPalette {
		assert.GreaterOrEqual(t, deltaE(a, failedColor), 40.0, "%s vs the failure red", a)
		assert.GreaterOrEqual(t, contrastWithBlack(a), 4.5, "%s: black text on it (WCAG AA)", a)
		for _, b := range codeletPalette[i+1:] {
			assert.GreaterOrEqual(t, deltaE(a, b), float64(paletteDeltaE), "%s vs %s", a, b)
		}
	}
}

// TestCholeskyColors is the regression test for the Cholesky chart
// whose potrf and gemm were both pink (#fa8dc9 and #ff909d), although
// the kernels of one factorization should look clearly different: in a
// chart of the four kernels, as drawn in the legend, any two colours
// are far apart and of hues far apart.
func TestCholeskyColors(t *testing.T) {
	c := Chart{Rows: []Row{{Label: "cpu0"}, {Label: "cpu1"}}}
	id := uint64(0)
	for k := range 3 { // a 3x3-tile Cholesky, in submission order
		add := func(name string) {
			id++
			start := time.Duration(id) * ms
			c.Bars = append(c.Bars, Bar{Row: int(id % 2), ID: id, Name: name, Start: start, End: start + ms})
		}
		add("potrf")
		for range 2 - k {
			add("trsm")
		}
		for range 2 - k {
			add("syrk")
			add("gemm")
		}
	}
	svg := render(t, c)
	re := regexp.MustCompile(`fill="(#[0-9a-f]{6})"/><text[^>]*>(\w+): `)
	colors := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(svg, -1) {
		colors[m[2]] = m[1]
	}
	require.Len(t, colors, 4, "%v", colors)
	names := []string{"potrf", "trsm", "syrk", "gemm"}
	hue := func(c string) float64 {
		_, a, b := hexLab(c)
		return math.Atan2(b, a) * 180 / math.Pi
	}
	for i, a := range names {
		for _, b := range names[i+1:] {
			ca, cb := colors[a], colors[b]
			assert.GreaterOrEqual(t, deltaE(ca, cb), float64(paletteDeltaE), "%s %s and %s %s", a, ca, b, cb)
			dh := math.Abs(hue(ca) - hue(cb))
			dh = min(dh, 360-dh)
			assert.GreaterOrEqual(t, dh, float64(hueApart), "%s %s and %s %s: hues %.0f° apart", a, ca, b, cb, dh)
		}
	}
}

// TestColorsOrder: a chart's names take the palette's colours in the
// order of their first task (the lowest ID), whatever the order of the
// bars, so a program's codelets get the same colours in every run; past
// the palette, each name gets a slot colour of its own.
func TestColorsOrder(t *testing.T) {
	var bars []Bar
	names := []string{"potrf", "trsm", "syrk", "gemm", "getrf", "laswp", "geqrt", "tsqrt", "ormqr", "tsmqr", "axpy", "dot"}
	for i, n := range names {
		for r := range 3 { // three runs each, the first with the lowest ID
			bars = append(bars, Bar{ID: uint64(i + 100*r), Name: n, Start: time.Duration(len(names)-i) * ms})
		}
	}
	want := Colors(bars, nil)
	require.Len(t, want, len(names))
	for i, n := range names[:len(codeletPalette)] {
		assert.Equal(t, codeletPalette[i], want[n], n)
	}
	seen := map[string]string{}
	for _, n := range names {
		if prev, ok := seen[want[n]]; ok {
			t.Errorf("%s and %s share %s", prev, n, want[n])
		}
		seen[want[n]] = n
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		rng.Shuffle(len(bars), func(i, j int) { bars[i], bars[j] = bars[j], bars[i] })
		assert.Equal(t, want, Colors(bars, nil))
	}
	// Ties of ID (charts drawn from several sources): the earlier start.
	cs := Colors([]Bar{{ID: 1, Name: "late", Start: 2 * ms}, {ID: 1, Name: "early", Start: ms}}, nil)
	assert.Equal(t, map[string]string{"early": codeletPalette[0], "late": codeletPalette[1]}, cs)
	// A name with no bar (its tasks canceled) keeps its turn when firsts
	// has it: the names after it keep their colours.
	without := slices.DeleteFunc(slices.Clone(bars), func(b Bar) bool { return b.Name == "trsm" })
	firsts := map[string]uint64{}
	for i, n := range names {
		firsts[n] = uint64(i)
	}
	got := Colors(without, firsts)
	for _, n := range names {
		assert.Equal(t, want[n], got[n], n)
	}
	assert.NotEqual(t, want["syrk"], Colors(without, nil)["syrk"], "without firsts the colours shift")
}

// contrastWithBlack is the WCAG 2 contrast ratio of black text on the
// "#rrggbb" colour c.
func contrastWithBlack(c string) float64 {
	var r8, g8, b8 int
	fmt.Sscanf(c, "#%02x%02x%02x", &r8, &g8, &b8)
	lin := func(v int) float64 {
		x := float64(v) / 255
		if x <= 0.04045 {
			return x / 12.92
		}
		return math.Pow((x+0.055)/1.055, 2.4)
	}
	y := 0.2126*lin(r8) + 0.7152*lin(g8) + 0.0722*lin(b8)
	return (y + 0.05) / 0.05
}

// TestFindColorSalt, with PZ_GANTT_FIND_SALT=1, finds the first salt
// under which knownNames fall in different slots and each kernel
// family's colours are at least 25 apart: the search that chose
// colorSalt (with the 37 slots, the first is past 1.7·10^9, about 5
// minutes on two cores; PZ_GANTT_FIND_SALT=N starts at N). Changing
// colorSalt, or the slots, changes every hashed codelet's colour.
func TestFindColorSalt(t *testing.T) {
	env := os.Getenv("PZ_GANTT_FIND_SALT")
	if env == "" {
		t.Skip("set PZ_GANTT_FIND_SALT=1 to search")
	}
	from, _ := strconv.ParseUint(env, 10, 64)
	n := uint64(Slots())
	require.LessOrEqual(t, n, uint64(64), "the search marks used slots in a uint64")
	de := make([][]float64, n)
	for i := range de {
		de[i] = make([]float64, n)
		for j := range de[i] {
			de[i][j] = deltaE(SlotColor(i), SlotColor(j))
		}
	}
	ok := func(salt uint64) bool {
		var used uint64
		for _, name := range knownNames {
			k := hash64(name, salt) % n
			if used&(1<<k) != 0 {
				return false
			}
			used |= 1 << k
		}
		for _, f := range kernelFamilies {
			for i := range f {
				for j := i + 1; j < len(f); j++ {
					if de[hash64(f[i], salt)%n][hash64(f[j], salt)%n] < familyDeltaE {
						return false
					}
				}
			}
		}
		return true
	}
	workers := uint64(runtime.GOMAXPROCS(0))
	found := make([]uint64, workers)
	var wg sync.WaitGroup
	var done atomic.Bool
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for salt := from + w; salt < from+1e10 && !done.Load(); salt += workers {
				if ok(salt) {
					found[w] = salt
					done.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	// The lowest found; a worker that stopped early may have missed a
	// lower one by at most workers-1 salts each: check them.
	best := uint64(0)
	for _, f := range found {
		if f != 0 && (best == 0 || f < best) {
			best = f
		}
	}
	for salt := max(from, best-min(best, workers*workers)); salt < best; salt++ {
		if ok(salt) {
			best = salt
			break
		}
	}
	t.Log("salt", best)
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
// change to the palette, the slots or the salt shows here. (They
// changed when the slots near the palette and the failure red were
// dropped: gemm's was #ff909d, 6 from the palette's pink.)
func TestColorStable(t *testing.T) {
	for name, want := range map[string]string{
		"gemm":              "#c6d0ff",
		"trsmL":             "#a3e28d",
		"potrf":             "#d8d674",
		"cholesky_gemm_f32": "#fa8dc9",
		"cholesky_trsm_f32": "#62e9b8",
	} {
		assert.Equal(t, want, Color(name), name)
	}
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
