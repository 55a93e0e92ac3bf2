package scheduler

import "testing"

func TestGoid(t *testing.T) {
	a, b := goid(), goid()
	if a == 0 || a != b {
		t.Fatalf("goid on one goroutine: %d, %d", a, b)
	}
	ch := make(chan uint64)
	go func() { ch <- goid() }()
	if c := <-ch; c == 0 || c == a {
		t.Fatalf("goid of another goroutine: %d (this one %d)", c, a)
	}
}
