package commtest

import "testing"

func TestPatternFill(t *testing.T) {
	for _, from := range []int{0, 1, mib - 3, 3*mib + 17, 1<<30 - 5} {
		b := make([]byte, 3*mib+101)
		fill(b, from, 3)
		for i := range b {
			if b[i] != pattern(i+from, 3) {
				t.Fatalf("from %d: byte %d is %d, want %d", from, i, b[i], pattern(i+from, 3))
			}
		}
		if err := checkBytes("x", b, from, 3); err != nil {
			t.Fatal(err)
		}
		b[mib+5]++
		if err := checkBytes("x", b, from, 3); err == nil {
			t.Fatal("corruption not found")
		}
	}
}
