package gantt

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// A chart's first codelets take the colours of codeletPalette in turn
// (Colors), far apart by design; past those, a name takes a slot: a
// cell of a grid of hue slots × lightness levels in CIELCh (the polar
// form of CIELAB, where equal distances look about equally different),
// so that any two slots are clearly apart, among the cells far enough
// from the palette's colours (paletteApart) and from the failed tasks'
// red (failedApart), so that a hashed colour is never mistaken for a
// palette colour of the same chart nor for a failure. A name picks its
// slot by hash (Color), then the next one no other name of the chart
// has.
const (
	hueSlots    = 12   // 30° apart
	lightLevels = 4    // see level
	chroma      = 50.0 // CIELAB chroma before gamut clipping
	// paletteApart is the least CIELAB distance (CIE76 ΔE) of a slot's
	// colour from each of codeletPalette's: "fails" in #438032 beside
	// the palette's #59a14f (12.5 apart) looked the same green.
	paletteApart = 18
	// failedApart is the least distance of a slot's colour from
	// failedColor, as for the palette: "panics" in #bf4a5e (35 apart)
	// looked like a failure.
	failedApart = 40
	// colorSalt seeds the name hash. It was chosen (TestFindColorSalt)
	// so that the codelet names of pz's apps and the usual tile-kernel
	// names (knownNames in color_test.go) all fall in different slots,
	// and the kernels of one factorization far apart. Other names may
	// share a slot, as any hash into a finite set collides; the bar
	// labels and tooltips tell them apart.
	colorSalt = 1731458298
)

// slotCells are the grid cells (hue slot·lightLevels + level) that are
// slots: those at least paletteApart from every palette colour and
// failedApart from failedColor (TestSlotCells computes them again).
var slotCells = [...]int{3, 7, 8, 9, 10, 11, 12, 13, 14, 15, 19, 20, 21, 22, 23, 24, 26, 27, 28, 29, 30, 31, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47}

// level returns the CIELAB lightness of level i, 12 apart: from dark
// enough to stand out against the white background to light enough to
// differ from the darkest.
func level(i int) float64 { return 48 + 12*float64(i) }

// Slots returns the number of distinct codelet colours past the
// palette.
func Slots() int { return len(slotCells) }

// Slot returns the palette slot of name, in [0, Slots()).
func Slot(name string) int {
	return int(hash64(name, colorSalt) % uint64(Slots()))
}

// Color returns the colour of the codelet name's slot as "#rrggbb",
// which depends on name only: the colour a chart gives a name when its
// palette (Colors) is used up, unless another name of the chart has it.
func Color(name string) string { return SlotColor(Slot(name)) }

// codeletPalette holds the colours of a chart's first codelets: Tableau
// 10 (Maureen Stone's 2016 palette, designed to be told apart) without
// its red, which would hide a failed task's outline, and its grey, close
// to the idle hatching. Any two are at least 25 apart in CIELAB (CIE76
// ΔE; TestPaletteApart), and black text is legible on all of them.
var codeletPalette = [...]string{
	"#4e79a7", // blue
	"#f28e2b", // orange
	"#59a14f", // green
	"#b07aa1", // purple
	"#edc948", // yellow
	"#76b7b2", // teal
	"#ff9da7", // pink
	"#9c755f", // brown
}

// Colors returns the fill colour of each name of bars (and of firsts),
// as "#rrggbb": the names in the order of their first task (the lowest
// ID: the first submitted), ties broken by start time then name, take
// the colours of a palette of eight far apart (Tableau 10 without its red
// and grey) in turn, so that a program's codelets get the same colours in
// every run; the ninth and later take the colour of their slot (Color),
// or of the next slot that no other name of the chart has. firsts gives
// the ID of a name's first task where the bars may lack it (a codelet
// whose tasks were all canceled has no bar, and would otherwise shift
// the colours of the codelets after it); it may be nil.
func Colors(bars []Bar, firsts map[string]uint64) map[string]string {
	type first struct {
		name  string
		id    uint64
		start time.Duration
	}
	byName := map[string]*first{}
	var order []*first
	for name, id := range firsts {
		f := &first{name: name, id: id, start: math.MaxInt64}
		byName[name] = f
		order = append(order, f)
	}
	for _, b := range bars {
		f := byName[b.Name]
		if f == nil {
			f = &first{name: b.Name, id: b.ID, start: b.Start}
			byName[b.Name] = f
			order = append(order, f)
		}
		if b.ID < f.id || b.ID == f.id && b.Start < f.start {
			f.id, f.start = b.ID, b.Start
		}
	}
	slices.SortFunc(order, func(a, b *first) int {
		return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.start, b.start), strings.Compare(a.name, b.name))
	})
	out := make(map[string]string, len(order))
	used := make([]bool, Slots())
	for i, f := range order {
		if i < len(codeletPalette) {
			out[f.name] = codeletPalette[i]
			continue
		}
		k := Slot(f.name)
		for n := 0; used[k] && n < Slots(); n++ {
			k = (k + 1) % Slots()
		}
		used[k] = true
		out[f.name] = SlotColor(k)
	}
	return out
}

// SlotColor returns the colour of slot k as "#rrggbb": that of its
// grid cell (cellColor). Any two slots are at least 11 apart in CIELAB
// (CIE76 ΔE; TestSlotsApart), and each at least paletteApart from the
// palette's colours and failedApart from the failure red
// (TestSlotsAvoidPaletteAndFailure).
func SlotColor(k int) string {
	k = ((k % Slots()) + Slots()) % Slots()
	return cellColor(slotCells[k])
}

// cellColor returns the colour of grid cell c: hue 15° + 30°·(c/4),
// lightness level c%4.
func cellColor(c int) string {
	hue := 15 + float64(c/lightLevels)*360/hueSlots
	return lchHex(level(c%lightLevels), chroma, hue)
}

// isSlotCell reports whether grid cell c's colour is far enough from
// the palette's and the failure red to be a slot.
func isSlotCell(c int) bool {
	col := cellColor(c)
	if deltaE(col, failedColor) < failedApart {
		return false
	}
	for _, p := range codeletPalette {
		if deltaE(col, p) < paletteApart {
			return false
		}
	}
	return true
}

// hash64 is FNV-1a of name after the salt, with a final avalanche
// (splitmix64's) so that names differing in one letter spread over all
// slots.
func hash64(name string, salt uint64) uint64 {
	h := uint64(14695981039346656037) ^ salt
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// lchHex returns the sRGB colour of CIELCh (l, c, h°), with the chroma
// reduced as little as needed to bring it inside the sRGB gamut.
func lchHex(l, c, h float64) string {
	rad := h * math.Pi / 180
	rgb := func(c float64) (r, g, b float64, ok bool) { return labRGB(l, c*math.Cos(rad), c*math.Sin(rad)) }
	r, g, b, ok := rgb(c)
	if !ok {
		lo, hi := 0.0, c // in gamut at lo (grey), not at hi
		for hi-lo > 0.01 {
			mid := (lo + hi) / 2
			if _, _, _, in := rgb(mid); in {
				lo = mid
			} else {
				hi = mid
			}
		}
		r, g, b, _ = rgb(lo)
	}
	return fmt.Sprintf("#%02x%02x%02x", to8(r), to8(g), to8(b))
}

func to8(v float64) int { return int(math.Round(min(max(v, 0), 1) * 255)) }

// labRGB converts CIELAB (D65 white) to gamma-encoded sRGB in [0,1] and
// says whether the colour is inside the gamut. Formulas: CIE 15:2004 and
// IEC 61966-2-1 (sRGB).
func labRGB(l, a, b float64) (r, g, bl float64, ok bool) {
	fy := (l + 16) / 116
	fx := fy + a/500
	fz := fy - b/200
	finv := func(t float64) float64 {
		const d = 6.0 / 29
		if t > d {
			return t * t * t
		}
		return 3 * d * d * (t - 4.0/29)
	}
	x, y, z := 0.95047*finv(fx), finv(fy), 1.08883*finv(fz)
	lr := 3.2404542*x - 1.5371385*y - 0.4985314*z
	lg := -0.9692660*x + 1.8760108*y + 0.0415560*z
	lb := 0.0556434*x - 0.2040259*y + 1.0572252*z
	const eps = 1e-9
	ok = lr >= -eps && lr <= 1+eps && lg >= -eps && lg <= 1+eps && lb >= -eps && lb <= 1+eps
	gam := func(v float64) float64 {
		v = min(max(v, 0), 1)
		if v <= 0.0031308 {
			return 12.92 * v
		}
		return 1.055*math.Pow(v, 1/2.4) - 0.055
	}
	return gam(lr), gam(lg), gam(lb), ok
}

// hexLab converts "#rrggbb" to CIELAB (D65): the inverse of labRGB,
// for distances between colours.
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

// lighten mixes the "#rrggbb" colour c with white, f of white.
func lighten(c string, f float64) string {
	var r, g, b int
	fmt.Sscanf(c, "#%02x%02x%02x", &r, &g, &b)
	mix := func(v int) int { return int(math.Round(float64(v) + f*(255-float64(v)))) }
	return fmt.Sprintf("#%02x%02x%02x", mix(r), mix(g), mix(b))
}

// NeutralBand is the band colour of the neutral state (the scheduler's
// global context): grey.
const NeutralBand = "#999999"

// bandPalette holds the colours of the other bands' states: D3's
// category10 without its grey (NeutralBand's), and a dark blue. Any two
// are at least 27 apart in CIELAB (CIE76 ΔE), and 30 from the grey
// (TestBandColorsDistinct): a hash into hues at one lightness gave two
// contexts in three of four charts the same or a barely different band.
var bandPalette = [...]string{
	"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
	"#8c564b", "#e377c2", "#17becf", "#bcbd22", "#393b79",
}

// BandColors returns the colour of each state name of a chart's bands:
// NeutralBand for neutral, and for the others colours of a palette of
// ten, distinct while there are no more names than colours. A name takes
// the colour its hash picks, the same in every chart, unless a name
// before it (in sorted order) has it, then the next colour free in the
// chart; past ten names, the colours used least come again.
func BandColors(names []string, neutral string) map[string]string {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	out := make(map[string]string, len(names))
	var used [len(bandPalette)]int
	for _, n := range names {
		if n == neutral {
			out[n] = NeutralBand
			continue
		}
		k := int(hash64(n, 0) % uint64(len(bandPalette)))
		least := slices.Min(used[:])
		for used[k] > least {
			k = (k + 1) % len(bandPalette)
		}
		used[k]++
		out[n] = bandPalette[k]
	}
	return out
}
