package comm

import "testing"

// Buf.Len and CheckBuf shift by datatypeShifts instead of dividing by the
// size: every size must be the power of two it names.
func TestDatatypeShifts(t *testing.T) {
	for d := range numDatatypes {
		if d == Invalid {
			continue
		}
		if s := datatypeSizes[d]; 1<<datatypeShifts[d] != s {
			t.Errorf("%v: size %d, shift %d", d, s, datatypeShifts[d])
		}
	}
	if len(datatypeShifts) != len(datatypeSizes) {
		t.Errorf("%d shifts for %d sizes", len(datatypeShifts), len(datatypeSizes))
	}
}
