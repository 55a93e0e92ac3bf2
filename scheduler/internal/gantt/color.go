package gantt

import (
	"fmt"
	"math"
)

// The codelet palette is a grid of hue slots × lightness levels in
// CIELCh (the polar form of CIELAB, where equal distances look about
// equally different), so that any two slots are clearly apart. A name
// picks its slot by hash alone: the same name has the same colour in
// every chart whatever else is drawn.
const (
	hueSlots    = 12   // 30° apart
	lightLevels = 4    // see level
	chroma      = 50.0 // CIELAB chroma before gamut clipping
	// colorSalt seeds the name hash. It was chosen (see TestColorSalt)
	// so that the codelet names of pz's apps, and the common tile-kernel
	// names, all fall in different slots; other names may share a slot
	// (a hash into a finite set collides), which the legend, the bar
	// labels and the tooltips disambiguate.
	colorSalt = 9024797
)

// level returns the CIELAB lightness of level i, 12 apart: from dark
// enough to stand out against the white background to light enough to
// differ from the darkest.
func level(i int) float64 { return 48 + 12*float64(i) }

// Slots returns the number of distinct codelet colours.
func Slots() int { return hueSlots * lightLevels }

// Slot returns the palette slot of name, in [0, Slots()).
func Slot(name string) int {
	return int(hash64(name, colorSalt) % uint64(Slots()))
}

// Color returns the fill colour of the codelet name as "#rrggbb". It
// depends on name only.
func Color(name string) string { return SlotColor(Slot(name)) }

// SlotColor returns the colour of palette slot k as "#rrggbb": hue
// 15° + 30°·(k/4), lightness level k%4. Any two slots are at least 11
// apart in CIELAB (CIE76 ΔE; TestSlotsApart).
func SlotColor(k int) string {
	k = ((k % Slots()) + Slots()) % Slots()
	hue := 15 + float64(k/lightLevels)*360/hueSlots
	return lchHex(level(k%lightLevels), chroma, hue)
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

// lchHex returns the sRGB colour of CIELCh (l, c, h°), reducing the
// chroma until the colour is inside the sRGB gamut.
func lchHex(l, c, h float64) string {
	lo, hi := 0.0, c
	r, g, b, ok := labRGB(l, c*math.Cos(h*math.Pi/180), c*math.Sin(h*math.Pi/180))
	for i := 0; !ok && i < 30; i++ { // bisection on the chroma
		mid := (lo + hi) / 2
		if r, g, b, ok = labRGB(l, mid*math.Cos(h*math.Pi/180), mid*math.Sin(h*math.Pi/180)); ok {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 0.01 {
			r, g, b, _ = labRGB(l, lo*math.Cos(h*math.Pi/180), lo*math.Sin(h*math.Pi/180))
			ok = true
		}
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
